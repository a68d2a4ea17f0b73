"""Losses: trajectory MSE through teacher checkpoints, JaSMin, the published attention-map L1 term, top-k hits.

The distillation objective's terms (`TERMS`, registered with `@term`): each a function of one batch's trajectory and
the run's config, summed by `odevit.repro.pipeline.distill`.

Cross-entropy with label smoothing is `torch.nn.functional.cross_entropy(..., label_smoothing=...)`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

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


# --- the distillation objective's terms ----------------------------------------------------------------------------
# `odevit.repro.pipeline.distill` sums `weight x term` over TERMS, in this order, for every term whose weight is
# > 0 (or `always`) and whose `from_epoch` has come. A term reads its options from the distill config by name (any
# object with those attributes: the lab's `odevit.repro.config.Distill`). A new term is one `@term(...)` function
# here and its fields (weight, options) in that config: nothing else changes.


@dataclass
class TermInputs:
    """What one batch gives the terms: the student's trajectory, the teacher's states, the batch's labels."""

    states: Sequence[torch.Tensor]  # student X_0..X_N, each (B, 1+M+R, D)
    attn: Optional[Sequence[torch.Tensor]]  # student attention maps, one per step (None unless a term asks)
    logits: torch.Tensor  # (B, classes)
    teacher_hidden: Sequence[torch.Tensor]  # h_0..h_L (CLS rows only where the teacher's cache stands in)
    teacher_attn: Optional[torch.Tensor]  # the teacher's last-layer map (None unless a term asks)
    checkpoints: Sequence[int]  # c_1..c_L for this batch's N
    y: torch.Tensor  # labels (read only by terms that use them)
    grid: Optional[int] = None  # patches per side (None: from the number of patches)


@dataclass(frozen=True)
class Term:
    fn: Callable[[TermInputs, Any], torch.Tensor]
    weight: str  # the config field holding the term's weight
    attn: bool = False  # reads the student's attention maps
    teacher_attn: bool = False  # reads the teacher's last attention map (the teacher's CLS cache cannot stand in)
    always: bool = False  # computed and logged at weight 0 too
    from_epoch: Optional[str] = None  # the config field of the epoch the term joins at
    cls_only: Callable[[Any], bool] = lambda cfg: True  # whether the teacher's CLS states suffice (its cache)


TERMS: Dict[str, Term] = {}


def term(name: str, weight: str, **kw: Any) -> Callable:
    """Register `fn(inputs, cfg) -> 0-dim tensor` as the distillation term `name` (logged under that name)."""

    def add(fn: Callable[[TermInputs, Any], torch.Tensor]) -> Callable:
        if name in TERMS:
            raise ValueError(f"term: '{name}' is already registered")
        TERMS[name] = Term(fn, weight, **kw)
        return fn

    return add


@term("mse", weight="mse_weight", always=True, cls_only=lambda cfg: cfg.mse_tokens == "cls")
def _mse(i: TermInputs, cfg: Any) -> torch.Tensor:
    """Trajectory MSE through the teacher's checkpoints (`mse_tokens`)."""
    return trajectory_mse(i.states, i.teacher_hidden, i.checkpoints, tokens=cfg.mse_tokens)


@term("jasmin", weight="jasmin_weight", attn=True)
def _jasmin(i: TermInputs, cfg: Any) -> torch.Tensor:
    """JaSMin (`jasmin_k`, `jasmin_detach`, `jasmin_maps_from`)."""
    return jasmin(i.attn, k=cfg.jasmin_k, detach=cfg.jasmin_detach, maps_from=cfg.jasmin_maps_from)


@term("attn_l1", weight="attn_l1_weight", attn=True, teacher_attn=True)
def _attn_l1(i: TermInputs, cfg: Any) -> torch.Tensor:
    """The published attention-map L1 term, on the student's last map without its registers."""
    n = i.teacher_hidden[0].shape[1]  # CLS + patches
    return attention_l1(i.attn[-1][:, :, :n, :n], i.teacher_attn, grid=i.grid or int((n - 1) ** 0.5))


@term("ce", weight="ce_weight", from_epoch="ce_from_epoch")
def _ce(i: TermInputs, cfg: Any) -> torch.Tensor:
    """Cross-entropy on the labels (`label_smoothing`), from epoch `ce_from_epoch` (the curriculum)."""
    return F.cross_entropy(i.logits.float(), i.y, label_smoothing=cfg.label_smoothing)


def active_terms(cfg: Any) -> Dict[str, Term]:
    """The terms `cfg` switches on (weight > 0, or `always`), in TERMS' order; ValueError naming a missing field."""
    for name, t in TERMS.items():
        for f in (t.weight, t.from_epoch):
            if f is not None and not hasattr(cfg, f):
                raise ValueError(f"term '{name}': the config has no field '{f}' (add it to the distill config)")
    on = {name: t for name, t in TERMS.items() if t.always or getattr(cfg, t.weight) > 0}
    if not on:
        raise ValueError(f"the config switches on none of the terms {list(TERMS)}")
    return on


def wider_than_cls(cfg: Any) -> List[str]:
    """The terms `cfg` switches on that need more of the teacher than its CLS states (its attention map, or more
    tokens): where there is one, the teacher's cached CLS states cannot stand in for the teacher."""
    return [name for name, t in active_terms(cfg).items() if t.teacher_attn or not t.cls_only(cfg)]


def weighted_sum(terms: Dict[str, Term], inputs: TermInputs, cfg: Any, epoch: int):
    """(sum of weight x term over the terms whose epoch has come, {name: detached term}): the objective's loss."""
    loss, parts = None, {}
    for name, t in terms.items():
        if t.from_epoch is not None and epoch < getattr(cfg, t.from_epoch):
            continue
        v = t.fn(inputs, cfg)
        w = getattr(cfg, t.weight) * v
        loss, parts[name] = (w if loss is None else loss + w), v.detach()
    return loss, parts
