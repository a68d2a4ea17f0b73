"""Losses: trajectory MSE through teacher checkpoints, JaSMin, the published attention-map L1 term, top-k hits.

Cross-entropy with label smoothing is `torch.nn.functional.cross_entropy(..., label_smoothing=...)`.
"""
from __future__ import annotations

import math
from typing import List, Sequence

import torch
import torch.nn.functional as F

EPS = 1e-12


def trajectory_mse(
    states: Sequence[torch.Tensor], teacher_hidden: Sequence[torch.Tensor], checkpoints: Sequence[int], tokens: str = "cls"
) -> torch.Tensor:
    """sum_l mean((X_{c_l} - h_l)^2) over l = 1..L (CLS row, or CLS + patch tokens; registers never compared).

    Args:
        states: student states X_0..X_N, each (B, 1+M+R, D).
        teacher_hidden: teacher states h_0..h_L in the student's layout, each (B, 1+M, D) (h_0 unused).
        checkpoints: c_1..c_L.
    """
    if len(checkpoints) != len(teacher_hidden) - 1:
        raise ValueError(f"checkpoints: {len(checkpoints)} given for {len(teacher_hidden) - 1} teacher layers")
    n_tok = teacher_hidden[0].shape[1]
    loss = states[0].new_zeros(())
    for c, h in zip(checkpoints, teacher_hidden[1:]):
        x = states[c]
        if tokens == "cls":
            loss = loss + F.mse_loss(x[:, 0].float(), h[:, 0].float())
        elif tokens == "all":
            loss = loss + F.mse_loss(x[:, :n_tok].float(), h.float())
        else:
            raise ValueError(f"tokens: '{tokens}' is not one of ['cls', 'all']")
    return loss


def jasmin_rows(p: torch.Tensor, k: int = 2) -> torch.Tensor:
    """Per-row JaSMin value of attention rows p (..., n): log g_1 if k == 1 else log(g_1 / g_k).

    With p sorted descending, g_j = p_(j) (1 - p_(j) + p_(j+1)), p_(n+1) = 0; g_1 = ||diag(p) - p p^T||_2
    (Yudin et al. 2025). Rows are clamped to [1e-12, 1] and renormalised first, as published.
    """
    n = p.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(f"jasmin_k: {k} must be in [1, {n}] (number of keys)")
    p = p.to(torch.promote_types(p.dtype, torch.float32)).clamp(EPS, 1.0)  # bf16 -> fp32, fp64 kept
    p = p / p.sum(-1, keepdim=True)
    s = p.sort(dim=-1, descending=True).values
    nxt = F.pad(s[..., 1:], (0, 1))  # p_(j+1), with p_(n+1) = 0
    g = s * (1 - s + nxt)
    if k == 1:
        return torch.log(g[..., 0] + EPS)
    return torch.log(g[..., 0] / (g[..., k - 1] + EPS) + EPS)


JASMIN_MAPS_FROM = ("steps", "grid_points")


def jasmin_map_count(num_maps: int, last_frac: float = 0.85, maps_from: str = "steps") -> int:
    """How many of the last attention maps JaSMin averages, out of `num_maps` (one per solver step, N).

    'steps' (ours): max(1, floor(last_frac * N)). 'grid_points' (the published code, which counts its N + 1 grid
    points: models/ode_transformer_gpt.py ~l.615 at b41824d): int(last_frac * (N + 1)), at most N. At N = 35: 29 vs 30.
    """
    if maps_from not in JASMIN_MAPS_FROM:
        raise ValueError(f"jasmin_maps_from: '{maps_from}' is not one of {list(JASMIN_MAPS_FROM)}")
    n = math.floor(last_frac * num_maps) if maps_from == "steps" else int(last_frac * (num_maps + 1))
    return min(num_maps, max(1, n))


def jasmin(attn_maps: Sequence[torch.Tensor], k: int = 2, last_frac: float = 0.85, detach: bool = False,
           maps_from: str = "steps") -> torch.Tensor:
    """JaSMin regulariser over a trajectory of attention maps, each (B, H, T, T).

    Max over query rows, mean over heads and batch, mean over the last `jasmin_map_count` maps (floor(last_frac * N),
    at least one; maps_from='grid_points': the published int(last_frac * (N + 1))).
    detach=True reproduces the published code, whose maps are detached (the term then has no gradient).
    """
    if not attn_maps:
        raise ValueError("jasmin: no attention maps (call forward_trajectory with return_attn=True)")
    n = jasmin_map_count(len(attn_maps), last_frac, maps_from)
    a = torch.stack(attn_maps[-n:])  # (n, B, H, T, T): one batched pass
    a = a.detach() if detach else a
    return jasmin_rows(a, k).amax(dim=-1).mean()  # max over queries, mean over (steps, B, H)


def _top_mass(a: torch.Tensor, threshold: float, sharpness: float = 40.0) -> torch.Tensor:
    """Soft mask keeping the top `threshold` fraction of attention mass per row (DINO-style), applied to a."""
    s, idx = a.sort(dim=-1)
    c = (s / s.sum(-1, keepdim=True).clamp_min(EPS)).cumsum(-1)
    mask_sorted = torch.sigmoid(sharpness * (c - (1 - threshold)))
    return a * torch.empty_like(mask_sorted).scatter_(-1, idx, mask_sorted)


def attention_l1(
    student_attn: torch.Tensor, teacher_attn: torch.Tensor, grid: int, student_threshold: float = 0.5,
    teacher_threshold: float = 0.7,
) -> torch.Tensor:
    """The published attention-map L1 term: sum |A_s - A_t| of masked, blurred, head-averaged CLS->patch maps.

    Args:
        student_attn: (B, H, T_s, T_s) last-step map; CLS is row 0, patches are columns 1..M.
        teacher_attn: (B, H', T_t, T_t) teacher last-layer map in the same layout.
        grid: patches per side (M = grid^2).
    """
    from torchvision.transforms.v2.functional import gaussian_blur

    M = grid * grid

    def prep(a: torch.Tensor, thr: float) -> torch.Tensor:
        cls = a[:, :, 0, 1 : 1 + M].float()  # (B, H, M)
        m = _top_mass(cls, thr).reshape(-1, 1, grid, grid)
        m = gaussian_blur(m, kernel_size=[3, 3], sigma=[0.5, 0.5]).reshape(a.shape[0], a.shape[1], grid, grid)
        return m.mean(1)  # (B, grid, grid)

    return (prep(student_attn, student_threshold) - prep(teacher_attn, teacher_threshold)).abs().sum()


def topk_correct(logits: torch.Tensor, target: torch.Tensor, ks: Sequence[int] = (1, 3, 5)) -> List[int]:
    """Number of samples whose label is among the top-k logits, for each k."""
    return topk_hits(logits, target, ks).tolist()


def topk_hits(logits: torch.Tensor, target: torch.Tensor, ks: Sequence[int] = (1, 3, 5)) -> torch.Tensor:
    """`topk_correct` as a (len(ks),) int64 tensor on the logits' device (no host sync: sum it over batches)."""
    top = logits.topk(min(max(ks), logits.shape[-1]), dim=-1).indices  # (B, kmax)
    hit = top == target[:, None]
    return torch.stack([hit[:, :k].any(-1).sum() for k in ks])
