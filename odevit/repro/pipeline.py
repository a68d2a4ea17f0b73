"""What a run is made of: the teacher's committed files, loaders, a plan cell's models, objectives.

Both trainers build from here: the notebooks' (odevit.repro.fast, K seeds stacked) and the plain loop (odevit.repro.train,
one model, `torchrun -m odevit.repro.pipeline 02_teacher | 04_distill` at the bottom of this file, data-parallel).
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import data, runtime, train
from .files import read_json, save_figure, write_csv, write_json  # noqa: F401  (the stages call pipeline.write_json, ...)
from .config import (KEPT_TEACHER, RESULTS, TEACHER_SHAPE, WEAK, Base, Cell, ConfigError, Distill, Optim, Plan, Scratch,
                     Teacher, resolve_teacher)
from ..losses import TermInputs, active_terms, jasmin, weighted_sum, wider_than_cls
from ..model import ODEViT
from ..schedule import checkpoint_indices, layer_distances
from ..teacher import create_teacher, hidden_states, last_attention, student_from_teacher


# --- the objectives: (model, x, y, epoch) -> (loss, logged parts), one per kind of run in the paper ----------

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
    from .runtime import all_reduce_sum, autocast

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


# --- loaders and models from their blocks ------------------------------------------------------------------------

def setup(base: Base) -> torch.device:
    """Start of every stage: seed everything, apply `base.precision`, return the device of `base.device`."""
    train.seed_everything(base.seed)
    train.set_precision(base.precision)
    return train.resolve_device(base.device)


def data_loaders(base: Base, augment: bool = False, train_limit: Optional[int] = None
                 ) -> Tuple[data.Loader, Optional[data.Loader], data.Loader]:
    """(train, validation, test) loaders of the base block's dataset: validation = the last `base.val_size` images of
    the training split (None when 0), train = the first `train_limit` (default `base.train_limit`; 0 = all) of the
    images before them, so no validation image is ever trained on."""
    full = data.load_split(base.dataset, "train", base.data_root, synthetic_size=base.synthetic_size, seed=base.seed)
    te = data.load_split(base.dataset, "test", base.data_root, synthetic_size=base.synthetic_size, seed=base.seed)
    try:
        tr, va = data.holdout(full, base.val_size)
    except ValueError as e:
        raise ConfigError(f"params.yaml: {e}") from None
    tf = data.batch_transform(base.dataset, base.image_size, base.channels, base.normalize)
    limit = train_limit if train_limit is not None else base.train_limit
    train_loader = data.Loader(tr, base.batch_size, tf, shuffle=True, drop_last=True, seed=base.seed, augment=augment,
                               limit=limit or None)
    val = data.Loader(va, base.eval_batch_size, tf) if va is not None else None
    test = data.Loader(te, base.eval_batch_size, tf, limit=base.test_limit or None)
    return train_loader, val, test


def loaders(base: Base, augment: bool = False, train_limit: Optional[int] = None) -> Tuple[data.Loader, data.Loader]:
    """(train, test) loaders (`data_loaders` without the validation split; the training images still exclude it)."""
    tr, _, te = data_loaders(base, augment, train_limit)
    return tr, te


def eval_loaders(base: Base, val: Optional[data.Loader], test: data.Loader) -> Dict[str, data.Loader]:
    """The loaders `train.fit` scores every epoch: the validation split, plus the test set under the authors'
    selection (`base.select_on: test`) only."""
    out = {"val": val} if val is not None else {}
    if base.select_on == "test":
        out["test"] = test
    return out


def train_config(base: Base, cfg: Optim) -> train.TrainConfig:
    """The optimiser/schedule part of a stage block, with the base block's device and seed."""
    return train.TrainConfig(epochs=cfg.epochs, lr=cfg.lr, weight_decay=cfg.weight_decay, warmup=cfg.warmup,
                             cycles=cfg.cycles, clip=cfg.clip, device=base.device, seed=base.seed,
                             select_on=base.select_on, patience=cfg.patience, min_delta_pts=cfg.min_delta_pts)


def step_schedules(distances: Sequence[float], cfg: Distill) -> Optional[Dict[int, List[int]]]:
    """{N: the checkpoint schedule for N} of distill.train_steps (None when empty: always num_steps)."""
    return {n: schedule(distances, dataclasses.replace(cfg, num_steps=n)) for n in cfg.train_steps} or None


def cache_usable(cfg: Distill) -> bool:
    """Whether the teacher's CLS states, computed once, can stand in for it: no augmentation, and no switched-on loss
    term that needs more of it (`losses.wider_than_cls`: mse_tokens 'all', the attention-map L1)."""
    return not (cfg.augment or wider_than_cls(cfg))


def teacher_cache(teacher: nn.Module, loader: data.Loader, cfg: Distill, device: torch.device,
                  times: Optional[Dict[str, float]] = None) -> Optional[torch.Tensor]:
    """The frozen teacher's CLS states for every training sample, computed once — or None where they would change
    (augmentation) or more than CLS is compared (mse_tokens 'all', attention-L1): then the teacher runs per batch."""
    if not cache_usable(cfg):
        return None
    t0 = time.perf_counter()
    cache = teacher_cls_cache(teacher, loader, device)
    if times is not None:
        times["teacher_cache"] = times.get("teacher_cache", 0.0) + time.perf_counter() - t0
    if runtime.is_main():
        print(f"teacher CLS states cached: {tuple(cache.shape)}, {cache.numel() * 4 / 2**20:.0f} MB, "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
    return cache


GENERIC_VIT = "vit_tiny_patch16_224"  # teacher.name null: this timm ViT with every shape key replaced by params.yaml's


def teacher_kwargs(base: Base, cfg: Teacher) -> Dict[str, Any]:
    """timm's constructor arguments for teacher.name: the data's image size and channels, the dataset's classes,
    and the name's own shape (`config.resolve_teacher`: a shape key that disagrees with the name is an error)."""
    t = resolve_teacher(cfg)
    return dict(img_size=base.image_size, in_chans=base.channels, num_classes=data.num_classes(base.dataset),
                **{k: getattr(t, k) for k in TEACHER_SHAPE})


def build_teacher(base: Base, cfg: Teacher) -> nn.Module:
    """The discrete ViT teacher: teacher.name's architecture, from scratch (offline default) or pretrained (hub or
    local file)."""
    kw = teacher_kwargs(base, cfg)
    return create_teacher(cfg.name or GENERIC_VIT, kw.pop("num_classes"), pretrained=cfg.pretrained, weights_file=cfg.weights_file,
                          **kw)


def build_scratch(base: Base, cfg: Scratch) -> ODEViT:
    return ODEViT(
        img_size=base.image_size, patch_size=cfg.patch_size, in_chans=base.channels,
        num_classes=data.num_classes(base.dataset), embed_dim=cfg.embed_dim, num_heads=cfg.num_heads,
        mlp_ratio=cfg.mlp_ratio, num_steps=cfg.num_steps, horizon=cfg.horizon, solver=cfg.solver, norm=cfg.norm,
        reg_tokens=cfg.reg_tokens, pos_embed_reg=cfg.pos_embed_reg, spectral_init_qkv=cfg.spectral_init_qkv,
        attn_drop=cfg.dropout, proj_drop=cfg.dropout, mlp_drop=cfg.dropout)


def build_student(teacher: nn.Module, cfg: Distill) -> ODEViT:
    copy = ("patch_embed", "cls_token", "pos_embed", "reg_token", "head") + (("norm",) if cfg.head_norm else ())
    return student_from_teacher(
        teacher, num_steps=cfg.num_steps, mlp_ratio=cfg.mlp_ratio, copy=copy,
        freeze=[k for k in cfg.freeze if k in copy], solver=cfg.solver, norm=cfg.norm, reg_tokens=cfg.reg_tokens,
        pos_embed_reg=cfg.pos_embed_reg, spectral_init_qkv=cfg.spectral_init_qkv, attn_drop=cfg.dropout,
        proj_drop=cfg.dropout, mlp_drop=cfg.dropout, attn_maps_after_dropout=cfg.attn_maps_after_dropout)


TEACHER_CKPT, DISTILL_CKPT = "checkpoints/02_teacher", "checkpoints/04_distill"


def fit_teacher(model: nn.Module, base: Base, cfg: Teacher, train_loader: data.Loader,
                evals: Dict[str, data.Loader], out_dir: str = TEACHER_CKPT) -> List[Dict[str, float]]:
    """The teacher block's model trained by the plain trainer (`torchrun … -m odevit.repro.pipeline 02_teacher`): CE,
    checkpoints in `out_dir`; `evals` from `eval_loaders` (best.pt and early stopping on `base.select_on`)."""
    if cfg.linear_probe:
        for n, p in model.named_parameters():
            p.requires_grad_(n.startswith("head."))
    return train.fit(model, train_loader, evals, cross_entropy(cfg.label_smoothing),
                     train_config(base, cfg), out_dir, run_id=train.fingerprint(base, cfg))


def fit_student(student: ODEViT, teacher: nn.Module, checkpoints: Sequence[int], base: Base, tcfg: Teacher,
                cfg: Distill, train_loader: data.Loader, evals: Dict[str, data.Loader],
                out_dir: str = DISTILL_CKPT, times: Optional[Dict[str, float]] = None,
                distances: Sequence[float] = ()) -> List[Dict[str, float]]:
    """A student's training by the plain trainer (`torchrun … -m odevit.repro.pipeline 04_distill`): the distillation
    objective (teacher CLS states cached where valid; its time added to times['teacher_cache']), the published CE
    curriculum (`unfreeze_head_at`), checkpoints in `out_dir`. `distances`: the teacher's layer distances, from which
    the checkpoint schedule of every N in distill.train_steps is made (`step_schedules`; needed only when it is set)."""

    def curriculum(epoch: int, model: nn.Module) -> None:
        if cfg.unfreeze_head_at >= 0 and epoch == cfg.unfreeze_head_at:
            model.head.requires_grad_(True)

    if cfg.train_steps and not distances:
        raise ValueError(f"fit_student: distill.train_steps = {cfg.train_steps} needs the teacher's layer distances "
                         "(`distances`) to make each N's checkpoint schedule")
    device = train.resolve_device(base.device)
    obj = distill(teacher, checkpoints, cfg, cache=teacher_cache(teacher, train_loader, cfg, device, times),
                  step_schedules=step_schedules(distances, cfg))
    return train.fit(student, train_loader, evals, obj, train_config(base, cfg), out_dir, on_epoch=curriculum,
                     run_id=train.fingerprint(base, tcfg, cfg, list(checkpoints)), times=times)


@torch.no_grad()
def teacher_distances(teacher: nn.Module, loader: data.Loader, batches: int, tokens: str, device: torch.device) -> List[float]:
    """d_1..d_L measured on the first `batches` training batches (epoch-0 order)."""
    teacher.eval().to(device)

    def gen():
        for i, (x, _) in enumerate(loader.batches(0, local=False)):  # global batches under torchrun
            if i >= batches:
                return
            yield hidden_states(teacher, x.to(device))

    return layer_distances(gen(), tokens=tokens)


def schedule(distances: Sequence[float], cfg: Distill) -> List[int]:
    """c_1..c_L of the distill config for the teacher distances d_1..d_L."""
    return checkpoint_indices(distances, cfg.num_steps, cfg.tau, cfg.schedule, cfg.schedule_points)


def build_free(teacher: nn.Module, cfg: Distill) -> ODEViT:
    """The student's exact architecture (width, heads, mlp_ratio, N, T = L, patch, registers, head norm, norm,
    solver, init, dropout), every part freshly initialised and trainable: nothing taken from the teacher."""
    model = build_student(teacher, dataclasses.replace(cfg, freeze=[]))
    fresh = ODEViT(**arch_kwargs(model), spectral_init_qkv=cfg.spectral_init_qkv)
    for p in fresh.parameters():
        p.requires_grad_(True)
    return fresh


def arch_kwargs(m: ODEViT) -> Dict[str, Any]:
    """The constructor arguments that fix an ODEViT's architecture (used to compare two models)."""
    f = m.field
    return dict(img_size=m.patch_embed.img_size[0], patch_size=m.patch_embed.patch_size[0],
                in_chans=m.patch_embed.proj.in_channels, num_classes=m.num_classes, embed_dim=m.embed_dim,
                num_heads=f.attn.num_heads, mlp_ratio=f.mlp.fc1.out_features / m.embed_dim, num_steps=m.num_steps,
                horizon=m.horizon, solver=m.solver_name, norm=type(f.norm1).__name__.lower(),
                bias=f.attn.qkv.bias is not None, reg_tokens=m.num_reg_tokens, pos_embed_reg=m.pos_embed_reg,
                head_norm=isinstance(m.norm, nn.LayerNorm), attn_drop=f.attn.attn_drop.p, proj_drop=f.attn.proj_drop.p,
                mlp_drop=f.mlp.drop1.p)


def load_teacher(b: Base, t: Teacher, device: torch.device, ckpt: str) -> nn.Module:
    return train.load_weights(build_teacher(b, t), f"{ckpt}/best.pt").to(device).eval()


# --- a plan cell's models (its configuration: config.cell_of) ------------------------------------------------------


def build(c: Cell, p: Plan, seeds: Sequence[int], device: Any = "cpu") -> Cell:
    """For each seed, its teacher and the cell's model on `device` (into `c.teachers`, `c.models`): seed everything,
    build the teacher (it draws from the RNG), then the student (or the free ODE of its architecture). Only for a cell
    that trains: building every cell's models up front made a reuse-only `fast --dry` take 9.5 min instead of 20 s."""
    teacher_weights(c.teacher, c.checkpoint)
    for x in seeds:
        b = dataclasses.replace(p.base, seed=int(x))
        setup(b)
        c.teachers.append(load_teacher(b, p.teacher_cfg, device, c.checkpoint))
        c.models.append(build_free(c.teachers[-1], c.distill) if c.free else build_student(c.teachers[-1], c.distill))
    return c


def teacher_weights(which: str, ck: str) -> None:
    """Put the teacher's best.pt into `ck` where this machine lacks it (a fresh clone), from the bytes kept in git:
    the v2 teacher's best.pt (weights/v2_teacher/best.pt, its sha256 in selected.json), the weak teacher's tensors
    (a safetensors file, its sha256 in teacher_weak/selected.json). Refused, writing nothing, on other bytes."""
    import json

    from ..hub import sha256

    if os.path.exists(f"{ck}/best.pt"):
        return
    if which == "weak":
        from safetensors.torch import load_file

        sel = json.load(open(f"{WEAK}/selected.json"))
        if sha256(sel["weights"]) != sel["weights_sha256"]:
            raise FileNotFoundError(f"{sel['weights']}: not the weak teacher's weights (sha256 "
                                    f"{sel['weights_sha256'][:12]} expected)")
        train.save_atomic({"model": load_file(sel["weights"]), "epoch": None, "val_acc1": None}, f"{ck}/best.pt")
        return
    sel = json.load(open(f"{RESULTS}/teacher/selected.json"))
    if not os.path.exists(KEPT_TEACHER) or sha256(KEPT_TEACHER) != sel["sha256"]:
        raise FileNotFoundError(f"{ck}/best.pt is missing and {KEPT_TEACHER} is not the selected teacher "
                                f"(sha256 {sel['sha256'][:12]}): its students cannot be trained")
    import shutil

    os.makedirs(ck, exist_ok=True)
    shutil.copyfile(KEPT_TEACHER, f"{ck}/best.pt.tmp")
    os.replace(f"{ck}/best.pt.tmp", f"{ck}/best.pt")


# ---------------------------------------------------------------------------------------------------------------------
# One model trained data-parallel with torchrun, over processes or GPUs (the plain trainer, `train.fit`):
#     torchrun --nproc_per_node=2 -m odevit.repro.pipeline 02_teacher   # params.yaml's teacher -> checkpoints/02_teacher
#     torchrun --nproc_per_node=2 -m odevit.repro.pipeline 04_distill   # its distill student -> checkpoints/04_distill
# `base.batch_size` is the global batch (split evenly over the processes; see `odevit.repro.runtime`). The plan's runs
# are the notebooks' (odevit.repro.fast, K seeds stacked on one device).

STAGES = ("02_teacher", "04_distill")


def run(stage: str, params_file: str = "params.yaml") -> None:
    from .config import check_stage

    cfg = check_stage("cell", params_file)  # one-line error before any process group or data
    b = cfg["base"]
    rank, world = runtime.init(b.device)
    if b.batch_size % world:
        raise ConfigError(f"params.yaml: base.batch_size = {b.batch_size} is the global batch; it must be a "
                                 f"multiple of the {world} processes")
    device = setup(b)  # seed, precision, device
    if stage == "02_teacher":
        tr, va, te = data_loaders(b, augment=cfg["teacher"].augment)
        fit_teacher(build_teacher(b, cfg["teacher"]), b, cfg["teacher"], tr, eval_loaders(b, va, te))
    else:
        t, d = cfg["teacher"], cfg["distill"]
        tr, va, te = data_loaders(b, augment=d.augment)
        teacher = load_teacher(b, t, device, TEACHER_CKPT)
        dist = teacher_distances(teacher, tr, d.distance_batches, d.distance_tokens, device)
        fit_student(build_student(teacher, d), teacher, schedule(dist, d), b, t, d, tr, eval_loaders(b, va, te),
                    distances=dist)
    runtime.shutdown()


def main() -> None:
    import argparse
    import sys

    ap = argparse.ArgumentParser(description="One model trained data-parallel with torchrun (02_teacher, 04_distill)")
    ap.add_argument("stage", choices=STAGES)
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    try:
        run(args.stage, args.params)
    except (ConfigError, train.CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
