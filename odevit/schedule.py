"""Checkpoint schedule: which solver step c_l should pass through teacher layer l.

    d_l = mean_x ||h_l(x) - h_{l-1}(x)||_2          (CLS token by default, or all tokens)
    w   = softmax(d / tau);  n_l = round(w_l * N);  c = cumsum(n);  c_L := N

Big teacher updates get more ODE time. Rounding is half-to-even (torch.round), as in the published code.
The published code multiplies by its N+1 grid points instead of the N steps (`points='grid_points'`:
n_l = round(w_l (N+1)), models/ode_transformer_gpt.py ~l.480-486 at b41824d); with the published distances and
tau 30 the two rules differ at 33 of N = 12..100 (e.g. N = 24). Indices past N, which the published code would use
(an IndexError there), are clamped to N here under both rules.

The paper's rule can give two teacher layers the same step (e.g. d = [100, 1, 1, 1], tau = 5, N = 8 gives
c = [8, 8, 8, 8]): the student is then asked to be at h_1 and h_4 at once. That case warns (`DegenerateSchedule`);
mode 'softmax_min1' gives every layer at least one step (n_l = 1 + the largest-remainder share of w (N - L)), so
c is strictly increasing.
"""
from __future__ import annotations

import warnings
from typing import Iterable, List, Sequence

import torch

MODES = ("softmax", "softmax_min1", "uniform")
POINTS = ("steps", "grid_points")  # the multiplier of w in mode 'softmax': N (ours) or N + 1 (published code)


class DegenerateSchedule(UserWarning):
    """Two or more teacher layers were mapped to the same solver step."""


def checkpoint_indices(distances: Sequence[float], num_steps: int, tau: float = 30.0, mode: str = "softmax",
                       points: str = "steps") -> List[int]:
    """Indices c_1..c_L into the N+1 states (0 = X(0)), non-decreasing, c_L = N.

    Args:
        distances: d_1..d_L (only their number is used in 'uniform' mode).
        num_steps: N, the solver steps; must be >= L.
        tau: softmax temperature (> 0).
        mode: 'softmax' (paper), 'softmax_min1' (every layer >= 1 step) or 'uniform' (c_l = round(l N / L)).
        points: 'steps' (n_l = round(w_l N), ours) or 'grid_points' (n_l = round(w_l (N + 1)), the published code;
            mode 'softmax' only).
    Warns (DegenerateSchedule) when two layers share a step.
    """
    L = len(distances)
    if L < 1:
        raise ValueError("distances: need at least one teacher layer")
    if points not in POINTS:
        raise ValueError(f"schedule_points: '{points}' is not one of {list(POINTS)}")
    if points == "grid_points" and mode != "softmax":
        raise ValueError(f"schedule_points: 'grid_points' applies to schedule 'softmax' only (got '{mode}')")
    if num_steps < L:
        raise ValueError(f"num_steps: {num_steps} is fewer than the {L} teacher checkpoints")
    if mode == "uniform":
        c = [int(round(l * num_steps / L)) for l in range(1, L + 1)]
    elif mode in ("softmax", "softmax_min1"):
        if tau <= 0:
            raise ValueError(f"tau: {tau} must be > 0")
        w = torch.softmax(torch.as_tensor(distances, dtype=torch.float64) / tau, dim=0)
        if mode == "softmax":
            n = torch.round(w * (num_steps + 1 if points == "grid_points" else num_steps))
        else:  # one step each, the other N - L shared by largest remainder: sum n = N exactly
            share = w * (num_steps - L)
            n = torch.floor(share)
            left = int(num_steps - L - n.sum().item())
            n[torch.argsort(share - n, descending=True)[:left]] += 1
            n = n + 1
        c = torch.cumsum(n, dim=0).clamp(max=num_steps).long().tolist()
    else:
        raise ValueError(f"mode: '{mode}' is not one of {list(MODES)}")
    c[-1] = num_steps
    shared = sorted({x for x in c if c.count(x) > 1} | ({0} if c[0] == 0 else set()))
    if shared:
        warnings.warn(f"checkpoint schedule c = {c}: several teacher layers map to step(s) {shared} "
                      f"(tau = {tau}, N = {num_steps}); raise tau or N, or use schedule 'softmax_min1'",
                      DegenerateSchedule, stacklevel=2)
    return c


@torch.no_grad()
def layer_distances(hidden: Iterable[Sequence[torch.Tensor]], tokens: str = "cls") -> List[float]:
    """Mean L2 distance between consecutive teacher states over a data sample.

    Args:
        hidden: an iterable of per-batch hidden-state lists [h_0, ..., h_L], each (B, T, D)
            (e.g. `odevit.teacher.hidden_states` over a few batches).
        tokens: 'cls' (distance of the CLS row) or 'all' (Frobenius distance of the whole token matrix).
    Returns:
        [d_1, ..., d_L] as floats.
    """
    if tokens not in ("cls", "all"):
        raise ValueError(f"tokens: '{tokens}' is not one of ['cls', 'all']")
    total, count = None, 0
    for hs in hidden:
        h = torch.stack([x.float() for x in hs])  # (L+1, B, T, D)
        diff = h[1:] - h[:-1]
        d = diff[:, :, 0].norm(dim=-1) if tokens == "cls" else diff.flatten(2).norm(dim=-1)  # (L, B)
        total = d.sum(1) if total is None else total + d.sum(1)
        count += d.shape[1]
    if not count:
        raise ValueError("layer_distances: no data")
    return (total / count).tolist()
