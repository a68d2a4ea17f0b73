"""Checkpoint schedule: which solver step c_l should pass through teacher layer l.

    d_l = mean_x ||h_l(x) - h_{l-1}(x)||_2          (CLS token by default, or all tokens)
    w   = softmax(d / tau);  n_l = round(w_l * N);  c = cumsum(n);  c_L := N

Big teacher updates get more ODE time. Rounding is half-to-even (torch.round), as in the published code.
"""
from __future__ import annotations

from typing import Iterable, List, Sequence

import torch


def checkpoint_indices(distances: Sequence[float], num_steps: int, tau: float = 30.0, mode: str = "softmax") -> List[int]:
    """Indices c_1..c_L into the N+1 states (0 = X(0)), non-decreasing, c_L = N.

    Args:
        distances: d_1..d_L (only their number is used in 'uniform' mode).
        num_steps: N, the solver steps; must be >= L.
        tau: softmax temperature (> 0).
        mode: 'softmax' (paper) or 'uniform' (c_l = round(l N / L)).
    """
    L = len(distances)
    if L < 1:
        raise ValueError("distances: need at least one teacher layer")
    if num_steps < L:
        raise ValueError(f"num_steps: {num_steps} is fewer than the {L} teacher checkpoints")
    if mode == "uniform":
        c = [int(round(l * num_steps / L)) for l in range(1, L + 1)]
    elif mode == "softmax":
        if tau <= 0:
            raise ValueError(f"tau: {tau} must be > 0")
        w = torch.softmax(torch.as_tensor(distances, dtype=torch.float64) / tau, dim=0)
        c = torch.cumsum(torch.round(w * num_steps), dim=0).clamp(max=num_steps).long().tolist()
    else:
        raise ValueError(f"mode: '{mode}' is not one of ['softmax', 'uniform']")
    c[-1] = num_steps
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
