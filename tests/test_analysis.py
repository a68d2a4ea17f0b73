"""Analyses against known answers: Lyapunov exponents of linear maps, the Euler bound, halting = simulation."""
import math

import numpy as np
import pytest
import torch

from odevit import ODEViT
from odevit import analysis as A


def euler_step(Amat, h):
    return lambda x: x + h * (Amat @ x.reshape(-1)).reshape(x.shape)


@pytest.mark.parametrize("Amat,expect", [
    (torch.diag(torch.tensor([0.3, -0.5, -1.0], dtype=torch.float64)), [0.3, -0.5, -1.0]),
    (torch.tensor([[-0.2, 4.0], [0.0, -1.0]], dtype=torch.float64), [-0.2, -1.0]),  # non-normal
    (torch.tensor([[-0.5, 1.0], [-1.0, -0.5]], dtype=torch.float64), [-0.5, -0.5]),  # rotation, contracting
])
def test_spectrum_of_linear_systems_is_real_part_of_eigenvalues(Amat, expect):
    h, N = 0.02, 900  # T = 18, the first third discarded as transient (non-normal growth)
    ex = A.lyapunov_spectrum(euler_step(Amat, h), torch.ones(Amat.shape[0], dtype=torch.float64), N, h,
                             k=Amat.shape[0], transient=300)
    np.testing.assert_allclose(ex.numpy(), sorted(expect, reverse=True), atol=0.03)


def test_contracting_system_all_negative():
    g = torch.Generator().manual_seed(0)
    M = torch.randn(5, 5, generator=g, dtype=torch.float64)
    Amat = -(M @ M.T) / 5 - 0.2 * torch.eye(5, dtype=torch.float64)  # symmetric negative definite
    ex = A.lyapunov_spectrum(euler_step(Amat, 0.02), torch.randn(5, dtype=torch.float64), 900, 0.02, k=5,
                             transient=300)
    assert (ex < 0).all()
    lam = torch.linalg.eigvalsh(Amat).flip(0)
    # the Euler map's exponents are log|1 + h lambda| / h (-> lambda as h -> 0)
    np.testing.assert_allclose(ex.numpy(), (torch.log((1 + 0.02 * lam).abs()) / 0.02).numpy(), atol=0.02)
    np.testing.assert_allclose(ex[:3].numpy(), lam[:3].numpy(), atol=0.03)


def linear_model(Amat, solver="parallel", N=400, T=4.0):
    m = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=4, num_heads=2, num_steps=N,
               horizon=T, solver=solver).eval()
    m.field.F = lambda x: x @ Amat.to(x.dtype).T  # every token: x' = A x ; G off
    m.field.G = lambda x: torch.zeros_like(x)
    return m


def test_cls_lyapunov_of_linear_field():
    Amat = torch.diag(torch.tensor([0.4, -0.3, -0.6, -1.0]))
    m = linear_model(Amat, N=800, T=40.0)  # long horizon: the random start's projection fades as log|c| / T
    lam = A.cls_lyapunov(m, torch.randn(3, 5, 4))
    np.testing.assert_allclose(lam.numpy(), 0.4, atol=0.05)


def test_euler_error_below_bound_and_first_order():
    Amat = torch.tensor([[-0.5, 0.3, 0.0, 0.0], [-0.3, -0.5, 0.0, 0.0], [0, 0, 0.2, 0], [0, 0, 0, -1.0]])
    m = linear_model(Amat, T=1.0)
    x0 = torch.randn(2, 5, 4)
    L = torch.linalg.matrix_norm(Amat, ord=2).item()  # Lipschitz constant of x -> A x
    res = A.convergence_study(m, x0, [4, 8, 16, 32, 64], lipschitz=L)
    assert abs(res["order"] - 1) < 0.1, res
    for r in res["rows"]:
        assert r["error"] <= r["bound"] * 1.0001, r


def test_adaptive_forward_matches_halting_simulation():
    torch.manual_seed(0)
    m = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=8, num_heads=2, num_steps=10,
               horizon=4.0).eval()
    x = torch.randn(16, 1, 8, 8)
    inc, pred = A.step_trace(m, x)
    for eps, stable in [(float(inc.median()), 0), (0.0, 2), (float(inc.quantile(0.3)), 3)]:
        k = A.halting_steps(inc, pred, eps, stable)
        logits, used = A.adaptive_forward(m, x, eps, stable)
        assert torch.equal(used, k), (eps, stable)
        assert torch.equal(logits.argmax(-1), pred[k - 1, torch.arange(16)])
    assert torch.equal(A.halting_steps(inc, pred, -1.0), torch.full((16,), 10))  # never halts early


def test_attention_and_pca_shapes():
    m = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=8, num_heads=2, num_steps=3,
               reg_tokens=2)
    a = A.cls_attention_over_time(m, torch.randn(2, 1, 8, 8))
    assert a.shape == (3, 2, 2, 2, 2)
    p, q = A.pca_2d(torch.randn(10, 8), torch.randn(4, 8))
    assert p.shape == (10, 2) and q.shape == (4, 2)


def _hand_step(m, solver, h):
    """The solver's step written out here, independently of odevit.solvers."""
    F, G = m.field.F, m.field.G
    if solver == "lie_trotter":
        def step(x):
            y = x + h * G(x)
            return y + h * F(y)
    else:  # strang: half step of F, full step of G, half step of F, each sub-flow by one explicit midpoint step
        def mid(f, x, dt):
            return x + dt * f(x + 0.5 * dt * f(x))

        def step(x):
            return mid(F, mid(G, mid(F, x, 0.5 * h), h), 0.5 * h)
    return step


@pytest.mark.parametrize("solver", ["lie_trotter", "strang"])
def test_cls_lyapunov_follows_the_models_own_solver(solver):
    """cls_lyapunov on a real (nonlinear, attention) field equals a jvp pushed through the hand-written step of that
    solver, and differs from the plain Euler (parallel) step's: the exponent is taken along the model's solver."""
    torch.manual_seed(0)
    m = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=8, num_heads=2, num_steps=6,
               horizon=3.0, solver=solver).double().eval()
    m.field.attn.fused = False  # forward-mode AD through the explicit softmax
    x0 = m.embed(torch.randn(2, 1, 8, 8, dtype=torch.float64)).detach()
    got = A.cls_lyapunov(m, x0, seed=3)

    def by_hand(step):
        g = torch.Generator().manual_seed(3)
        v = torch.zeros_like(x0)
        v[:, 0] = torch.randn(2, 8, generator=g).to(x0)
        v[:, 0] /= v[:, 0].norm(dim=-1, keepdim=True)
        total, x = torch.zeros(2, dtype=torch.float64), x0
        with torch.no_grad():
            for _ in range(6):
                x, v = torch.func.jvp(step, (x,), (v,))
                n = v[:, 0].norm(dim=-1)
                total += n.log()
                v = v / n[:, None, None]
        return (total / 3.0).float()

    torch.testing.assert_close(got, by_hand(_hand_step(m, solver, 0.5)), rtol=1e-5, atol=1e-6)
    euler = by_hand(lambda x: x + 0.5 * (m.field.F(x) + m.field.G(x)))
    assert (got - euler).abs().max() > 1e-3


def test_teacher_student_distances_on_a_constructed_pair():
    """A student that IS its teacher (both teacher blocks identical, loaded into a LayerNorm/bias Lie-Trotter field,
    h = 1): every checkpoint distance is 0 at c = [1, 2] and ||h_2 - h_1|| at c = [2, 2]; with labels chosen from
    the predictions and the student's head rows rotated, all four categories land where constructed."""
    import timm

    from odevit import load_block_, student_from_teacher
    from odevit.teacher import hidden_states

    torch.manual_seed(0)
    t = timm.create_model("vit_tiny_patch16_224", img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2,
                          num_classes=4).double().eval()
    t.blocks[1].load_state_dict(t.blocks[0].state_dict())
    s = student_from_teacher(t, num_steps=2, mlp_ratio=4.0, norm="layernorm", bias=True).double().eval()
    load_block_(s, t.blocks[0])
    x = torch.randn(8, 3, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        pred = t(x).argmax(-1)
        hs = hidden_states(t, x)
    y = torch.cat([pred[:4], (pred[4:] + 1) % 4])  # teacher right on the first 4, wrong on the last 4
    out = A.teacher_student_distances(s, t, [(x, y)], [1, 2], torch.device("cpu"))
    np.testing.assert_allclose(out["per_checkpoint"], 0, atol=1e-9)
    np.testing.assert_allclose(out["final"], 0, atol=1e-9)
    assert list(out["category"]) == ["both correct"] * 4 + ["both wrong"] * 4
    shifted = A.teacher_student_distances(s, t, [(x, y)], [2, 2], torch.device("cpu"))["per_checkpoint"]
    np.testing.assert_allclose(shifted[:, 0], (hs[2][:, 0] - hs[1][:, 0]).norm(dim=-1).numpy(), rtol=1e-9)
    with torch.no_grad():  # student row j = teacher row j - 1: the student predicts (teacher's class + 1) % 4
        s.head.weight.copy_(t.head.weight.roll(1, 0))
        s.head.bias.copy_(t.head.bias.roll(1, 0))
    out = A.teacher_student_distances(s, t, [(x, y)], [1, 2], torch.device("cpu"))
    assert list(out["category"]) == ["only teacher correct"] * 4 + ["only student correct"] * 4
