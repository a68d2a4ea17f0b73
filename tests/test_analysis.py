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
