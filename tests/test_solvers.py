"""Solvers against known answers: convergence orders on a split linear ODE, torchdiffeq as the oracle."""
import numpy as np
import pytest
import torch
from scipy.linalg import expm
from torchdiffeq import odeint

from odevit.solvers import SOLVERS, get_solver


class LinearSplit:
    """dX/dt = A X + B X with non-commuting A (F) and B (G); exact solution expm((A+B) t) X0."""

    def __init__(self, A, B):
        self.A, self.B = A, B

    def F(self, x):
        return x @ self.A.T

    def G(self, x):
        return x @ self.B.T


@pytest.fixture(scope="module")
def system():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(4, 4, generator=g, dtype=torch.float64) * 0.5
    B = torch.randn(4, 4, generator=g, dtype=torch.float64) * 0.5
    assert (A @ B - B @ A).abs().max() > 0.1  # non-commuting: splitting error is real
    x0 = torch.randn(3, 4, generator=g, dtype=torch.float64)
    T = 1.0
    exact = x0 @ torch.from_numpy(expm(((A + B) * T).numpy())).T
    return LinearSplit(A, B), x0, T, exact


@pytest.mark.parametrize("name,order", [("lie_trotter", 1), ("parallel", 1), ("strang", 2), ("rk4", 4)])
def test_convergence_order(system, name, order):
    field, x0, T, exact = system
    Ns = [8, 16, 32, 64]
    errs = [(get_solver(name).integrate(field, x0, N, T)[-1] - exact).norm().item() for N in Ns]
    slope = np.polyfit(np.log([T / N for N in Ns]), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.25, (name, slope, errs)
    assert SOLVERS[name].order == order


def test_returns_n_plus_one_states(system):
    field, x0, T, _ = system
    states = get_solver("lie_trotter").integrate(field, x0, 5, T)
    assert len(states) == 6 and torch.equal(states[0], x0)


def test_parallel_equals_torchdiffeq_euler(system):
    field, x0, T, _ = system
    N = 10
    ours = torch.stack(get_solver("parallel").integrate(field, x0, N, T))
    ref = odeint(lambda t, x: field.F(x) + field.G(x), x0, torch.linspace(0, T, N + 1, dtype=torch.float64),
                 method="euler")
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)


def test_rk4_equals_torchdiffeq_rk4(system):
    field, x0, T, _ = system
    N = 7
    ours = torch.stack(get_solver("rk4").integrate(field, x0, N, T))
    ref = odeint(lambda t, x: field.F(x) + field.G(x), x0, torch.linspace(0, T, N + 1, dtype=torch.float64),
                 method="rk4")
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)


def test_lie_trotter_differs_from_parallel_by_O_h(system):
    """The split step and the unsplit Euler step agree to first order: their gap shrinks ~ h."""
    field, x0, T, _ = system
    gaps = []
    for N in (16, 64):
        lt = get_solver("lie_trotter").integrate(field, x0, N, T)[-1]
        pa = get_solver("parallel").integrate(field, x0, N, T)[-1]
        gaps.append((lt - pa).norm().item())
    assert gaps[1] < gaps[0] / 3


def test_unknown_solver():
    with pytest.raises(ValueError, match="solver: 'euler' is not one of"):
        get_solver("euler")
