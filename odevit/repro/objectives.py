"""Training objectives: (model, x, y, epoch) -> (loss, logged parts). One per kind of run in the paper."""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..losses import TermInputs, active_terms, jasmin, weighted_sum, wider_than_cls
from ..teacher import hidden_states, last_attention
from .config import Distill, Scratch

# (model, x, y, epoch, sample indices or None) -> (loss, logged parts): the parts are detached 0-dim tensors, read
# by the training loop once an epoch (no host sync per step), and the objective is pure enough for torch.func.vmap
# (`train.fit_many` trains several seeds as one batched model)
Objective = Callable[..., Tuple[torch.Tensor, Dict[str, torch.Tensor]]]


def cross_entropy(label_smoothing: float = 0.0):
    """Plain classification (the discrete teacher)."""

    def objective(model: nn.Module, x: torch.Tensor, y: torch.Tensor, epoch: int, idx=None) -> Tuple[torch.Tensor, Dict]:
        loss = F.cross_entropy(model(x).float(), y, label_smoothing=label_smoothing)
        return loss, {}

    return objective


def ode_scratch(cfg: Union[Scratch, Distill]):
    """ODE-ViT from scratch (stage 03, a study's free cell): CE with `cfg.label_smoothing` (+ `cfg.jasmin_weight` x
    JaSMin, `cfg.jasmin_k` / `cfg.jasmin_detach`, on the attention maps of the last 85% of steps: 'steps', whatever a
    Distill config's jasmin_maps_from says)."""

    def objective(model, x, y, epoch, idx=None):
        out = model.forward_trajectory(x, return_attn=cfg.jasmin_weight > 0)
        ce = F.cross_entropy(out["logits"].float(), y, label_smoothing=cfg.label_smoothing)
        loss, parts = ce, {"ce": ce.detach()}
        if cfg.jasmin_weight > 0:
            js = jasmin(out["attn"], k=cfg.jasmin_k, detach=cfg.jasmin_detach)
            loss = loss + cfg.jasmin_weight * js
            parts["jasmin"] = js.detach()
        return loss, parts

    return objective


def distill(teacher: nn.Module, checkpoints: Sequence[int], cfg: Distill, *, cache: Optional[torch.Tensor] = None,
            step_schedules: Optional[Dict[int, Sequence[int]]] = None, num_steps: Optional[int] = None,
            grid: Optional[int] = None):
    """Teacher-student: the sum of weight x term over the terms of `losses.TERMS` that the distill block `cfg`
    switches on (`losses.active_terms`), in their order: the student's states at c_l pass through the teacher's h_l
    (MSE: `mse_weight`, `mse_tokens`), + JaSMin (`jasmin_weight`, `jasmin_k`, `jasmin_detach`, `jasmin_maps_from`),
    + the published attention-map L1 term (`attn_l1_weight`, off by default), + CE (`ce_weight`, `label_smoothing`)
    from `ce_from_epoch` (curriculum). A new term: one `@losses.term` function and its fields in `config.Distill`.

    With ce_weight 0 (the label-free default) the labels y are never read: the frozen head only classifies.
    `cache` (n, L, D): the teacher's CLS states h_1..h_L of every training sample (see `teacher_cls_cache`); with
    it, batches that come with their sample indices skip the teacher forward.
    `step_schedules` {N: checkpoints for N} (distill.train_steps): each batch integrates with an N drawn uniformly
    from its keys (torch's RNG: seeded, and saved with last.pt) and is compared at that N's checkpoints.
    `num_steps`: integrate every batch with this N (`checkpoints` then are that N's), the model's own N otherwise;
    the fast path (`fast.py`) draws N outside the objective and builds one objective per N.
    `grid`: the patch grid's side for the attention-map L1 term (default: from the number of patches)."""
    terms = active_terms(cfg)
    wider = wider_than_cls(cfg) if cache is not None else []
    if wider:
        raise ValueError(f"cache: holds the teacher's CLS states only; the terms {wider} need more (mse_tokens "
                         "'cls', attn_l1_weight 0)")
    return_attn = any(t.attn for t in terms.values())
    teacher_attn = any(t.teacher_attn for t in terms.values())
    choices = sorted(step_schedules) if step_schedules else []
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)

    def objective(model, x, y, epoch, idx=None):
        with torch.no_grad():
            if cache is not None and idx is not None:
                h = cache[idx.to(cache.device)].to(x.device)  # (B, L, D); a cache on the device: no host sync
                hs = [h[:, :1]] + [h[:, l : l + 1] for l in range(h.shape[1])]  # h_0 is never compared
            else:
                hs = hidden_states(teacher, x)
            t_attn = last_attention(teacher, x) if teacher_attn else None
        n, ckpts = num_steps, checkpoints
        if choices:
            n = choices[int(torch.randint(len(choices), (1,)))]
            ckpts = step_schedules[n]
        out = model.forward_trajectory(x, num_steps=n, return_attn=return_attn)
        inputs = TermInputs(out["states"], out.get("attn"), out["logits"], hs, t_attn, ckpts, y, grid)
        return weighted_sum(terms, inputs, cfg, epoch)

    return objective


@torch.no_grad()
def teacher_cls_cache(teacher: nn.Module, loader, device: torch.device) -> torch.Tensor:
    """CLS rows of the teacher's h_1..h_L for every sample of `loader` (no augmentation), (n, L, D) on the CPU.

    Computed once; valid because the teacher is frozen and the inputs do not change between epochs. Under torchrun
    each process computes its slice of the samples and the slices are summed into the whole."""
    from .distributed import all_reduce_sum
    from .precision import autocast

    teacher.eval().to(device)
    out = None
    for x, _, idx in loader.batches(0, with_index=True, ordered=True):
        with autocast(device):
            hs = hidden_states(teacher, x.to(device))
        h = torch.stack([s[:, 0] for s in hs[1:]], 1).float().cpu()  # (B, L, D)
        if out is None:
            out = torch.zeros(loader.n, h.shape[1], h.shape[2])
        out[idx] = h
    return all_reduce_sum(out) if getattr(loader, "world", 1) > 1 else out
