"""Fixed-step solvers for a split vector field dX/dt = F(X) + G(X), in the style of torchdiffeq's fixed_grid.

Every solver is a tiny class with an `order` and one `step`; `SOLVERS` maps names to classes. A field is any object
with methods `F(x)` and `G(x)` (an `odevit.model.ViTField`, or a pair of linear maps in the tests).

    lie_trotter  X <- X + h G(X);  X <- X + h F(X)      first order, the paper's text (default)
    parallel     X <- X + h (F(X) + G(X))                first order, the published code (plain Euler on F+G)
    strang       half step of F, full step of G, half step of F (Strang/Macaron splitting); second order
    rk4          Kutta's 3/8-rule RK4 on F + G, as torchdiffeq's 'rk4'; fourth order

Strang splitting is second order only if every sub-flow is integrated to second order; with Euler sub-steps it
collapses to first order. Each sub-flow therefore takes one explicit midpoint step: 2 evaluations of G (attention)
and 4 of F (MLP) per step, about twice the cost of a Lie-Trotter step.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Protocol, Type

import torch
from torch.utils.checkpoint import checkpoint


class SplitField(Protocol):
    def F(self, x: torch.Tensor) -> torch.Tensor: ...
    def G(self, x: torch.Tensor) -> torch.Tensor: ...


class Solver:
    """Base class: `integrate` applies `step` N times with h = T/N and returns the N+1 states."""

    order: int = 1
    g_evals_per_step: int = 1  # evaluations of G (attention) per step, to pick one attention map per step

    def step(self, field: SplitField, x: torch.Tensor, h: float) -> torch.Tensor:
        raise NotImplementedError

    def integrate(self, field: SplitField, x0: torch.Tensor, num_steps: int, horizon: float,
                  stop: Optional[int] = None, grad_checkpointing: bool = False) -> List[torch.Tensor]:
        """[X_0, ..., X_stop] with h = horizon / num_steps (stop defaults to num_steps: the whole horizon).

        grad_checkpointing: keep only each step's input for backward and recompute the step's inside
        (attention maps, MLP hidden) during backward; the field must compute the same function both times."""
        if num_steps < 1:
            raise ValueError(f"num_steps: {num_steps} must be >= 1")
        stop = num_steps if stop is None else stop
        if not 1 <= stop <= num_steps:
            raise ValueError(f"stop: {stop} must be in 1..{num_steps}")
        h = horizon / num_steps
        states = [x0]
        for _ in range(stop):
            if grad_checkpointing and torch.is_grad_enabled():
                states.append(checkpoint(self.step, field, states[-1], h, use_reentrant=False))
            else:
                states.append(self.step(field, states[-1], h))
        return states


class LieTrotter(Solver):
    def step(self, field, x, h):
        x = torch.add(x, field.G(x), alpha=h)  # x + h G(x), one kernel
        return torch.add(x, field.F(x), alpha=h)


class Parallel(Solver):
    def step(self, field, x, h):
        return torch.add(x, field.F(x) + field.G(x), alpha=h)


class RK4(Solver):
    order = 4
    g_evals_per_step = 4

    def step(self, field, x, h):
        f = lambda y: field.F(y) + field.G(y)  # noqa: E731
        k1 = f(x)
        k2 = f(x + h * k1 / 3)
        k3 = f(x + h * (k2 - k1 / 3))
        k4 = f(x + h * (k1 - k2 + k3))
        return x + h * (k1 + 3 * (k2 + k3) + k4) / 8


def _midpoint(sub: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, h: float) -> torch.Tensor:
    return x + h * sub(x + 0.5 * h * sub(x))


class Strang(Solver):
    order = 2
    g_evals_per_step = 2

    def step(self, field, x, h):
        x = _midpoint(field.F, x, 0.5 * h)
        x = _midpoint(field.G, x, h)
        return _midpoint(field.F, x, 0.5 * h)


SOLVERS: Dict[str, Type[Solver]] = {
    "lie_trotter": LieTrotter,
    "parallel": Parallel,
    "strang": Strang,
    "rk4": RK4,
}


def get_solver(name: str) -> Solver:
    if name not in SOLVERS:
        raise ValueError(f"solver: '{name}' is not one of {sorted(SOLVERS)}")
    return SOLVERS[name]()
