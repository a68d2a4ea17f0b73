"""Analyses against known answers: the CLS Lyapunov exponent of linear fields, the Euler bound, halting = really halting."""
import math
from typing import Optional, Tuple

import numpy as np
import pytest
import torch

from odevit import ODEViT
from odevit.repro import dynamics as A


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


def _adaptive_forward(model: ODEViT, x: torch.Tensor, eps: float, stable: int = 0,
                     num_steps: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The oracle of the halting simulation: really integrate with halting, each step advancing only the
    still-active samples. Returns (logits (B, C), steps used (B,))."""
    step, _, N = A.step_map(model, num_steps)
    X = model.embed(x)
    active = torch.arange(x.shape[0], device=x.device)
    used = torch.full((x.shape[0],), N, dtype=torch.long, device=x.device)
    logits = torch.empty(x.shape[0], model.num_classes, device=x.device)
    prev = model.forward_head(model.norm(X)).argmax(-1)
    same = torch.zeros(x.shape[0], dtype=torch.long, device=x.device)
    for k in range(1, N + 1):
        Xa = X[active]
        Xn = step(Xa)
        out = model.forward_head(model.norm(Xn))
        pred = out.argmax(-1)
        if k > 1:
            same[active] = torch.where(pred == prev[active], same[active] + 1, 0)
        prev[active] = pred
        X[active] = Xn
        halt = ((Xn[:, 0] - Xa[:, 0]).norm(dim=-1) < eps) | (k == N)
        if stable > 0:
            halt |= same[active] >= stable
        done = active[halt]
        logits[done] = out[halt].float()
        used[done] = k
        active = active[~halt]
        if active.numel() == 0:
            break
    return logits, used


def test_adaptive_forward_matches_halting_simulation():
    torch.manual_seed(0)
    m = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=8, num_heads=2, num_steps=10,
               horizon=4.0).eval()
    x = torch.randn(16, 1, 8, 8)
    inc, pred = A.step_trace(m, x)
    for eps, stable in [(float(inc.median()), 0), (0.0, 2), (float(inc.quantile(0.3)), 3)]:
        k = A.halting_steps(inc, pred, eps, stable)
        logits, used = _adaptive_forward(m, x, eps, stable)
        assert torch.equal(used, k), (eps, stable)
        assert torch.equal(logits.argmax(-1), pred[k - 1, torch.arange(16)])
    assert torch.equal(A.halting_steps(inc, pred, -1.0), torch.full((16,), 10))  # never halts early


def test_attention_and_pca_shapes():
    m = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=8, num_heads=2, num_steps=3,
               reg_tokens=2)
    a = A.cls_attention_over_time(m, torch.randn(2, 1, 8, 8))
    assert a.shape == (3, 2, 2, 2, 2)
    (p, q), _ = A.pca_2d_explained(torch.randn(10, 8), torch.randn(4, 8))
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


def test_fidelity_on_a_constructed_pair():
    """A student that IS its teacher (both teacher blocks identical, loaded into a LayerNorm/bias Lie-Trotter field,
    h = 1): the student's relative distance is 0 at every layer at c = [1, 2], and at c = [2, 2] layer 1's is
    ||h_2 - h_1|| / ||h_1||; the teacher's own relative step is ||h_l - h_{l-1}|| / ||h_l||, by hand."""
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
        hs = [h[:, 0] for h in hidden_states(t, x)]
        fid, means = A.fidelity_study({0: s}, t, [(x, None)], [1, 2], torch.device("cpu"))
        shifted, _ = A.fidelity_study({0: s}, t, [(x, None)], [2, 2], torch.device("cpu"))
    rel = lambda a, b, n: float(((a - b).norm(dim=-1) / n.norm(dim=-1)).mean())  # noqa: E731
    student = fid[fid.series == "student"].relative_distance
    np.testing.assert_allclose(student, 0, atol=1e-9)
    assert means["student_rel_mean"] == pytest.approx(0, abs=1e-9)
    step = fid[fid.series == "teacher_step"].relative_distance.tolist()
    np.testing.assert_allclose(step, [rel(hs[1], hs[0], hs[1]), rel(hs[2], hs[1], hs[2])], rtol=1e-9)
    moved = shifted[(shifted.series == "student") & (shifted.layer == 1)].relative_distance.item()
    assert moved == pytest.approx(rel(hs[2], hs[1], hs[1]), rel=1e-9) and moved > 0.01


# ------------------------------------------------------------------------------------------ Proposition 1: can fail
def rotation_model(omega=1.0, N=10, T=1.0, solver="lie_trotter"):
    """psi(X) = omega J X per token with J a rotation generator in two planes (G = 0, so every solver is Euler):
    ||X(t)|| is constant, sigma_max(J_psi) = omega (all singular values), ||X''|| = omega^2 ||X_0||, and Euler's
    X_n is the complex product (1 + i omega h)^n X_0 in each plane."""
    J = torch.tensor([[0.0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 0, -1], [0, 0, 1, 0]], dtype=torch.float64) * omega
    m = linear_model(J, solver=solver, N=N, T=T)
    return m


def rotation_closed_form(x0, omega, N, T, lipschitz):
    """error_n = ||X_0|| |e^{i w t_n} - (1 + i w h)^n|;  bound_n = (e^{L t_n} - 1) / (2 L) h w^2 ||X_0||."""
    h = T / N
    t = np.arange(N + 1) * h
    nx = x0.flatten(1).norm(dim=1).numpy()[:, None]
    err = nx * np.abs(np.exp(1j * omega * t) - (1 + 1j * omega * h) ** np.arange(N + 1))
    bound = np.expm1(lipschitz * t) / (2 * lipschitz) * h * omega ** 2 * nx
    return err, bound


def test_prop1_on_a_rotation_holds_and_is_tight():
    """(a) Known answer: the measured L equals omega, M = omega^2 ||X_0||, the error and the bound equal their
    closed forms, the bound holds at every step and is tight: bound / error in [1, 1.8] (by hand: -> (e^{wt}-1)/(wt)
    for small h, 1 at t -> 0, e - 1 = 1.72 at t = 1), far from vacuous."""
    torch.manual_seed(0)
    omega, N = 1.0, 10
    m = rotation_model(omega, N)
    x0 = torch.randn(3, 5, 4, dtype=torch.float64)
    r = A.prop1_per_step(m, x0, iters=5, rtol=1e-10, atol=1e-10)
    assert r["solver"] == "lie_trotter"
    np.testing.assert_allclose(r["L"], omega, rtol=1e-9)
    np.testing.assert_allclose(r["M"], omega ** 2 * x0.flatten(1).norm(dim=1).numpy(), rtol=1e-8)
    err, bound = rotation_closed_form(x0, omega, N, 1.0, omega)
    np.testing.assert_allclose(r["error"], err, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(r["error_parallel"], err, rtol=1e-6, atol=1e-12)  # G = 0: the same scheme
    np.testing.assert_allclose(10 ** r["log10_bound"][:, 1:], bound[:, 1:], rtol=1e-9)
    s = A.prop1_summary(r["error"], r["log10_bound"])
    ratio = bound[:, 1:] / err[:, 1:]
    assert s["fraction_within"] == 1.0 and s["holds"] and not s["vacuous"]
    assert s["tightness_min"] == pytest.approx(ratio.min(), rel=1e-5)
    assert s["tightness_median"] == pytest.approx(10 ** np.median(np.log10(ratio)), rel=1e-5)  # median in log10
    assert 1.0 <= s["tightness_min"] and ratio.max() < 1.8


def test_prop1_with_too_small_L_is_violated():
    """(b) The check can fail: with L = omega / 1000 the bound is ~ t h M / 2, while Euler's amplitude error alone
    is ((1 + h^2 w^2)^{n/2} - 1) ||X_0|| > (n/2) h^2 w^2 ||X_0|| for n >= 2 (Bernoulli): every step from n = 2 on is
    violated, step 1 (error (h w)^2/2 (1 - (h w)^2/36) < bound) is within: fraction 1/10."""
    torch.manual_seed(0)
    m = rotation_model(1.0, 10)
    x0 = torch.randn(2, 5, 4, dtype=torch.float64)
    r = A.prop1_per_step(m, x0, lipschitz=1e-3, iters=5, rtol=1e-10, atol=1e-10)
    err, bound = rotation_closed_form(x0, 1.0, 10, 1.0, 1e-3)
    assert (err[:, 2:] > bound[:, 2:]).all() and (err[:, 1] < bound[:, 1]).all()  # the hand computation
    s = A.prop1_summary(r["error"], r["log10_bound"])
    assert s["fraction_within"] == pytest.approx(0.1) and not s["holds"]
    assert s["tightness_min"] < 1.0 and not s["vacuous"]


def test_prop1_summary_known_cases_and_vacuous():
    err = np.ones((2, 4))
    s = A.prop1_summary(err, np.full((2, 4), 1.5))  # bound = 10^1.5 x error everywhere
    assert s["vacuous"] and s["holds"] and s["tightness_min"] == pytest.approx(10 ** 1.5)
    s = A.prop1_summary(err, np.full((2, 4), 0.5))
    assert not s["vacuous"] and s["holds"] and s["tightness_median"] == pytest.approx(10 ** 0.5)
    lb = np.full((2, 4), 2.0)
    lb[0, 1] = 0.5  # informative at one early pair, >= 10x at the typical pair: still vacuous (median rule)
    s = A.prop1_summary(err, lb)
    assert s["vacuous"] and s["tightness_min"] == pytest.approx(10 ** 0.5)
    lb = np.full((2, 4), 0.5)
    lb[1, 3] = -0.3  # one of the 6 pairs (steps >= 1) has bound < error
    s = A.prop1_summary(err, lb)
    assert s["fraction_within"] == pytest.approx(5 / 6) and not s["holds"]
    assert s["tightness_min"] == pytest.approx(10 ** -0.3) and s["log10_bound_max"] == 0.5


def test_prop1_bound_in_log_space_never_overflows():
    """(c) L t = 5000 (e^{L t} overflows float64 at 709): the log bound is finite and equals L t - log 2L + log hM;
    where float64 does not overflow it equals the direct formula; L -> 0 gives t h M / 2."""
    L = torch.tensor([500.0, 2.0, 1e-12], dtype=torch.float64)
    t = torch.tensor([0.0, 0.5, 10.0], dtype=torch.float64)
    M = torch.tensor([3.0, 3.0, 3.0], dtype=torch.float64)
    lb = A.log_prop1_bound(L, t, 0.25, M)
    assert torch.isneginf(lb[:, 0]).all() and torch.isfinite(lb[:, 1:]).all()
    assert lb[0, 2].item() == pytest.approx(5000 - math.log(1000) + math.log(0.75), rel=1e-14)
    direct = torch.expm1(L[1] * t[1:]) / (2 * L[1]) * 0.25 * 3.0
    torch.testing.assert_close(lb[1, 1:].exp(), direct, rtol=1e-12, atol=0)
    torch.testing.assert_close(lb[2, 1:].exp(), t[1:] * 0.25 * 3.0 / 2, rtol=1e-9, atol=0)
    assert torch.isfinite(A.log_prop1_bound(torch.tensor([0.0]), t, 0.25, M[:1])[:, 1:]).all()  # L = 0: the limit
    # the per-step mean over images stays in log space too
    np.testing.assert_allclose(A._log10_mean(np.array([[400.0], [400.0]])), [400.0])
    np.testing.assert_allclose(A._log10_mean(np.array([[0.0], [1.0]])), [math.log10(5.5)])


def test_prop1_study_on_a_small_random_model():
    """The study on a tiny attention model: every metric present and finite, the CSV never inf, the parallel
    series and L = paper_L beside the measured one; sigma_max_median <= L_max."""
    torch.manual_seed(0)
    m = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=8, num_heads=2, num_steps=4,
               horizon=12.0).eval()
    per_step, tight, met = A.prop1_study({0: m}, torch.randn(2, 1, 8, 8), iters=3, paper_lipschitz=0.5)
    assert set(per_step.series) == {"error", "bound_measured_L", "error_parallel", "bound_parallel_measured_L",
                                    "bound_paper_L"}
    assert np.isfinite(per_step.log10_value).all() and per_step.step.min() == 1 and per_step.step.max() == 4
    assert set(tight.series) == {"min", "median"} and np.isfinite(tight.log10_tightness).all()
    v = met["seed0"]
    for k in ("fraction_within", "fraction_within_parallel", "fraction_within_paper_L", "tightness_min",
              "tightness_median", "log10_bound_max", "L_max", "L_median", "M_max", "sigma_max_median"):
        assert math.isfinite(v[k]), k
    assert v["paper_L"] == 0.5 and v["solver"] == "lie_trotter" and v["n_images"] == 2
    assert v["sigma_max_median"] <= v["L_max"] and v["vacuous"] == (v["tightness_median"] >= 10)
    assert v["fraction_within"] == 1.0 or not v["holds"]


# --------------------------------------------------------------------------------- Lyapunov at the paper's unit
def _per_image(acc):
    """4 classes x 4 images; class c: exponents 0.1 (c + 1) +- 0.01, a fraction acc[c] of its images correct."""
    import pandas as pd

    rows = []
    for c, a in enumerate(acc):
        k = int(round(a * 4))
        rows += [{"cell": "ref", "seed": 0, "label": c, "correct": i < k, "lyapunov": 0.1 * (c + 1) + d}
                 for i, d in enumerate([-0.01, 0.01, -0.01, 0.01])]
    return pd.DataFrame(rows)


def test_lyapunov_class_correlation_known_answer_and_sign_flip():
    """Class means x = 0.1, 0.2, 0.3, 0.4 and Acc@1 y = 1, 0.5, 0.75, 0.25: by hand sum dx dy = -0.1,
    sum dx^2 = 0.05, sum dy^2 = 0.3125, r = -0.1 / 0.125 = -0.8; t = r sqrt(2) / 0.6, p (2 df) = 0.2 exactly.
    Flipping every image's correctness (y -> 1 - y) flips the sign, same p."""
    pc = A.per_class_table(_per_image([1.0, 0.5, 0.75, 0.25]))
    np.testing.assert_allclose(pc.lyapunov, [0.1, 0.2, 0.3, 0.4])
    v = A.lyapunov_class_correlation(pc)["ref"]["seed0"]
    assert v["n_classes"] == 4
    assert v["r"] == pytest.approx(-0.8, abs=1e-12) and v["p_value"] == pytest.approx(0.2, abs=1e-12)
    w = A.lyapunov_class_correlation(A.per_class_table(_per_image([0.0, 0.5, 0.25, 0.75])))["ref"]["seed0"]
    assert w["r"] == pytest.approx(0.8, abs=1e-12) and w["p_value"] == pytest.approx(0.2, abs=1e-12)
    two = A.lyapunov_class_correlation(A.per_class_table(_per_image([1.0, 0.5])))["ref"]["seed0"]
    assert math.isnan(two["r"]) and two["n_classes"] == 2  # 2 classes: no correlation to estimate


def test_pca_explained_variance():
    """Points on a line along e1 (variance 4) plus e2 noise of variance 1: explained 0.8 and 0.2."""
    x = torch.tensor([[2.0, 1.0, 0.0], [-2.0, 1.0, 0.0], [2.0, -1.0, 0.0], [-2.0, -1.0, 0.0]])
    (p,), ev = A.pca_2d_explained(x)
    np.testing.assert_allclose(ev, [0.8, 0.2], atol=1e-12)
    np.testing.assert_allclose(np.abs(p), [[2.0, 1.0]] * 4, atol=1e-12)


def test_point_biserial_and_auc_by_hand():
    """The effect sizes of the Lyapunov exponent against correctness: r is Pearson's r of the value and the 0/1 flag,
    with the Fisher-z interval; AUC is P(flagged > unflagged), ties half; both undefined with one class."""
    v, f = [1.0, 2.0, 3.0, 4.0, 5.0], [0, 0, 1, 1, 1]
    e = A.point_biserial(v, f)
    r = float(np.corrcoef(v, f)[0, 1])
    half = 1.959963984540054 / math.sqrt(5 - 3)
    assert e["r"] == pytest.approx(r) and e["ci_low"] == pytest.approx(math.tanh(math.atanh(r) - half))
    assert A.point_biserial(v, [1, 1, 0, 0, 0])["r"] == pytest.approx(-r)  # flips with the flag
    assert math.isnan(A.point_biserial(v, [1] * 5)["r"])
    assert A.auc([1, 2, 3, 4], [False, False, True, True]) == 1.0
    assert A.auc([1, 2, 3, 4], [True, True, False, False]) == 0.0
    assert A.auc([1, 1, 1, 1], [True, False, True, False]) == 0.5
    assert math.isnan(A.auc([1, 2], [True, True]))


def test_stable_rounds_to_significant_digits_everywhere():
    """A.stable: 4 significant digits, correctly rounded, through every container 06_dynamics writes or draws."""
    import pandas as pd
    assert A.stable(0.123456) == 0.1235 and A.stable(-98765.4) == -98770.0 and A.stable(2.794429809e-10) == 2.794e-10
    assert A.stable(0.0) == 0.0 and math.isnan(A.stable(math.nan)) and A.stable(math.inf) == math.inf
    assert A.stable(7) == 7 and A.stable(True) is True and A.stable("euler") == "euler" and A.stable(None) is None
    df = pd.DataFrame({"seed": [1, 2], "series": ["a", "b"], "v": [0.331093358, 1.0e-6 + 3.3e-13]})
    t, (arr, d) = A.stable((df, (np.array([[1.23456, -0.000987654]]), {"k": [np.float32(3.14159)]})))
    assert list(t.seed) == [1, 2] and list(t.series) == ["a", "b"] and list(t.v) == [0.3311, 1.0e-6]
    np.testing.assert_array_equal(arr, [[1.235, -0.0009877]])
    assert d == {"k": [3.142]}
    ten = A.stable(torch.tensor([0.123456, 2.0], dtype=torch.float32))
    assert ten.dtype == torch.float32 and torch.equal(ten, torch.tensor([0.1235, 2.0], dtype=torch.float32))
    assert torch.equal(A.stable(torch.tensor([3, 4])), torch.tensor([3, 4]))  # integers as they are


def test_stable_removes_float_noise_and_keeps_real_differences():
    """The committed 06_dynamics metrics made on an Intel and on an AMD CPU (commit 461fe20) differed by up to 5e-7
    relative: after A.stable they are equal; a difference in the 4th significant digit still shows."""
    intel = {"student_rel_mean": 0.3309335857629776, "p_value": 2.794429809120851e-10, "ci_high": 0.0036289997542614224}
    amd = {"student_rel_mean": 0.3309335758288701, "p_value": 2.794431203675954e-10, "ci_high": 0.0036289922642225476}
    assert intel != amd and A.stable(intel) == A.stable(amd)
    assert A.stable(0.3309) != A.stable(0.3310) and A.stable({"x": 1.234e-3}) != A.stable({"x": 1.235e-3})


def test_the_committed_convergence_order_is_the_slope_over_the_three_finest_steps():
    """06_dynamics' observed order (metrics.json euler) is the slope of log error vs log h over the three smallest h
    of its own table (euler_bound.csv), not over every N: the coarse N = 2, 4 sit before the asymptotic regime (there
    the error rises), and a fit over all six N read 1.67 / 2.21 for these first-order schemes."""
    import json
    from pathlib import Path

    import pandas as pd

    root = Path(__file__).resolve().parents[1] / "results/06_dynamics"
    orders = json.loads((root / "metrics.json").read_text())["euler"]
    t = pd.read_csv(root / "euler_bound.csv")
    for key, g in (("order_parallel", t[t.series == "euler_parallel"]),
                   ("order_model_solver", t[t.series.str.startswith("model_")])):
        fine = g.nsmallest(3, "h")
        slope = np.polyfit(np.log(fine.h), np.log(fine.error), 1)[0]
        assert abs(orders[key] - slope) < 5e-3, (key, orders[key], slope)
        assert abs(orders[key] - np.polyfit(np.log(g.h), np.log(g.error), 1)[0]) > 0.1  # the all-N fit differs here
        assert 0.8 < orders[key] < 1.3  # first order, as Euler and Lie-Trotter are
