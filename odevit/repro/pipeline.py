"""Glue the notebooks call: loaders from the base block, models from their blocks, the training of each stage.

Everything a stage writes goes under results/<stage>/ (metrics.json, CSV series, PNG figures, tables; written whole
or not at all by odevit.repro.files) and checkpoints/<stage>/ (best.pt, last.pt).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd
import timm
import torch
import torch.nn as nn

from . import data, distributed, objectives, train
from .files import read_json, save_figure, write_csv, write_json  # noqa: F401  (the stages call pipeline.write_json, ...)
from .config import TEACHER_SHAPE, Base, ConfigError, Distill, Optim, Scratch, Teacher, resolve_teacher
from ..losses import wider_than_cls
from ..model import ODEViT
from ..schedule import checkpoint_indices, layer_distances
from ..teacher import create_teacher, hidden_states, student_from_teacher


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


def run_summary(history: List[Dict[str, float]], base: Base, cfg: Optim) -> Dict[str, Any]:
    """`train.summary` of a stage's history with the base block's selection split and convergence window."""
    return train.summary(history, base.select_on, cfg.min_delta_pts, base.converge_window, cfg.epochs)


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
    cache = objectives.teacher_cls_cache(teacher, loader, device)
    if times is not None:
        times["teacher_cache"] = times.get("teacher_cache", 0.0) + time.perf_counter() - t0
    if distributed.is_main():
        print(f"teacher CLS states cached: {tuple(cache.shape)}, {cache.numel() * 4 / 2**20:.0f} MB, "
              f"{time.perf_counter() - t0:.0f}s", flush=True)
    return cache


PHASES = ("startup", "data", "teacher", "teacher_cache", "train", "val_eval", "test_eval", "robustness", "write")


def process_start() -> float:
    """Epoch seconds at which this process started (psutil, else /proc/self/stat): its interpreter start and imports
    count in a stage's time."""
    try:
        import psutil

        return psutil.Process().create_time()
    except ImportError:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time in clock ticks after boot
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime"))
        return btime + ticks / os.sysconf("SC_CLK_TCK")


def timing(phases: Dict[str, float], history: List[Dict[str, float]], start: float, share: int = 1) -> Dict[str, Any]:
    """A stage's timing.json: seconds per phase (PHASES; train = the epoch loops, val_eval = the per-epoch
    evaluations, both from `history`), total = now - `start` (the process start) + phases['resumed_s'] (a resumed
    run: the earlier processes' epochs, which `history` holds; their start-up is not counted), other = total - the
    phases; train_time_s kept for the README. `share`: runs trained together in this process (`study.run_many`):
    the process's wall counts 1/share to each, so totals summed over runs stay the machine's time."""
    out = {k: 0.0 for k in PHASES}
    out.update(phases)
    out["train"] = float(sum(h["epoch_time_s"] for h in history))
    out["val_eval"] = float(sum(h.get("eval_time_s", 0.0) for h in history))
    out["total"] = (time.time() - start) / share + phases.get("resumed_s", 0.0)
    out["other"] = out["total"] - sum(out[k] for k in PHASES)
    out = {k: round(v, 3) for k, v in out.items()}
    out["train_time_s"] = out["train"]
    return out


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
        attn_drop=cfg.dropout, proj_drop=cfg.dropout, mlp_drop=cfg.dropout,
    )


def build_student(teacher: nn.Module, cfg: Distill) -> ODEViT:
    copy = ("patch_embed", "cls_token", "pos_embed", "reg_token", "head") + (("norm",) if cfg.head_norm else ())
    return student_from_teacher(
        teacher, num_steps=cfg.num_steps, mlp_ratio=cfg.mlp_ratio, copy=copy,
        freeze=[k for k in cfg.freeze if k in copy], solver=cfg.solver, norm=cfg.norm, reg_tokens=cfg.reg_tokens,
        pos_embed_reg=cfg.pos_embed_reg, spectral_init_qkv=cfg.spectral_init_qkv, attn_drop=cfg.dropout,
        proj_drop=cfg.dropout, mlp_drop=cfg.dropout, attn_maps_after_dropout=cfg.attn_maps_after_dropout,
    )


TEACHER_CKPT, DISTILL_CKPT = "checkpoints/02_teacher", "checkpoints/04_distill"


def fit_teacher(model: nn.Module, base: Base, cfg: Teacher, train_loader: data.Loader,
                evals: Dict[str, data.Loader], out_dir: str = TEACHER_CKPT) -> List[Dict[str, float]]:
    """Stage 02's training (also run by `torchrun … -m odevit.repro.run 02_teacher`; a plan study's own teacher:
    `study_teacher`): CE, checkpoints in `out_dir`; `evals` from `eval_loaders` (best.pt and early stopping on
    `base.select_on`)."""
    if cfg.linear_probe:
        for n, p in model.named_parameters():
            p.requires_grad_(n.startswith("head."))
    return train.fit(model, train_loader, evals, objectives.cross_entropy(cfg.label_smoothing),
                     train_config(base, cfg), out_dir, run_id=train.fingerprint(base, cfg))


@dataclasses.dataclass
class TeacherRun:
    """What `train_teacher` leaves behind for a notebook's figures: the trained model at best.pt, its history, the
    metrics written, the layer distances d_1..d_L and the three loaders."""
    model: nn.Module
    history: List[Dict[str, float]]
    metrics: Dict[str, Any]
    distances: List[float]
    loaders: Tuple[data.Loader, Optional[data.Loader], data.Loader]


def train_teacher(base: Base, cfg: Teacher, dcfg: Distill, ckpt: str, out: str, phases: Dict[str, float],
                  start: float, record: Optional[Dict[str, Any]] = None, monitor: bool = False) -> TeacherRun:
    """Stage 02's teacher, and a plan study's own (`study_teacher`): seed and data (`setup`, `data_loaders`), the
    teacher trained or resumed (`fit_teacher`: checkpoints in `ckpt`, best.pt on `base.select_on`), the test set
    scored once at best.pt, the layer distances on `dcfg.distance_batches` training batches; writes `out`/
    history.csv, distances.csv, timing.json and metrics.json (last: its presence marks the run finished).
    `record`: more keys for metrics.json; `monitor`: record the machine's load and this process
    (`provenance.Monitor` in `ckpt`; metrics.json's `provenance`). `phases` gets data and test_eval seconds."""
    from . import provenance  # only here: pipeline is imported by every stage, the monitor by few

    clock = time.perf_counter()
    device = setup(base)  # seed, precision: before the loaders and the model, whose draws it fixes
    tr, va, te = data_loaders(base, augment=cfg.augment)
    phases["data"] = time.perf_counter() - clock
    model = build_teacher(base, cfg)
    val_images = va.n if va is not None else 0
    print(f"teacher {cfg.name or '(a ViT of the shape keys)'}: {params_m(model):.3f}M parameters, {cfg.epochs} "
          f"epochs{', augmented' if cfg.augment else ''}; {tr.n} training images, {val_images} validation images; "
          f"best epoch selected on {base.select_on}", flush=True)
    with (provenance.Monitor(ckpt, start) if monitor else contextlib.nullcontext()) as mon:
        hist = fit_teacher(model, base, cfg, tr, eval_loaders(base, va, te), out_dir=ckpt)
        write_csv(pd.DataFrame(hist), f"{out}/history.csv")
        clock = time.perf_counter()
        train.load_weights(model, f"{ckpt}/best.pt")
        acc = train.evaluate(model, te, device)  # the test set, once, at the selected epoch
        phases["test_eval"] = time.perf_counter() - clock
        dist = teacher_distances(model.to(device).eval(), tr, dcfg.distance_batches, dcfg.distance_tokens, device)
    metrics = {**acc, **run_summary(hist, base, cfg), "params_m": params_m(model),
               "encoder_params": encoder_params(model), "depth": len(model.blocks), "embed_dim": model.embed_dim,
               "epochs": cfg.epochs, "train_images": tr.n, "val_images": val_images, **(record or {})}
    if mon is not None:
        metrics["provenance"] = mon.summary()
    write_csv(pd.DataFrame({"layer": range(1, len(dist) + 1), "distance": dist}), f"{out}/distances.csv")
    write_json(timing(phases, hist, start), f"{out}/timing.json")
    write_json(metrics, f"{out}/metrics.json")  # deterministic: same params + seed -> same bytes (CPU)
    return TeacherRun(model, hist, metrics, dist, (tr, va, te))


def fit_free(model: ODEViT, base: Base, cfg: Distill, train_loader: data.Loader, evals: Dict[str, data.Loader],
             out_dir: str, times: Optional[Dict[str, float]] = None) -> List[Dict[str, float]]:
    """A study cell's free model: the student's architecture from scratch, CE (+ the student's JaSMin), the
    student's optimiser and epochs (`times`: as `train.fit`)."""
    return fit_free_many([model], [base], cfg, [train_loader], [evals], [out_dir], [times])[0]


def fit_free_many(models: List[ODEViT], bases: List[Base], cfg: Distill, train_loaders: List[data.Loader],
                  evals: List[Dict[str, data.Loader]], out_dirs: List[str],
                  times: Optional[List[Optional[Dict[str, float]]]] = None,
                  rngs: Optional[List[Dict[str, Any]]] = None) -> List[List[Dict[str, float]]]:
    """`fit_free` of one cell's seeds (base k = seed k), trained together when more than one (`train.fit_many`)."""
    obj = objectives.ode_scratch(cfg)
    return train.fit_many(models, train_loaders, evals, obj, train_config(bases[0], cfg), out_dirs,
                          run_ids=[train.fingerprint(b, cfg, "free") for b in bases], times=times, rngs=rngs)


def fit_student(student: ODEViT, teacher: nn.Module, checkpoints: Sequence[int], base: Base, tcfg: Teacher,
                cfg: Distill, train_loader: data.Loader, evals: Dict[str, data.Loader],
                out_dir: str = DISTILL_CKPT, times: Optional[Dict[str, float]] = None,
                distances: Sequence[float] = ()) -> List[Dict[str, float]]:
    """A student's training (a study cell, or `odevit.repro.run 04_distill`): the distillation objective (teacher CLS
    states cached where valid; its time added to times['teacher_cache']), the published CE curriculum
    (`unfreeze_head_at`), checkpoints in `out_dir`."""
    return fit_student_many([student], teacher, checkpoints, [base], tcfg, cfg, [train_loader], [evals], [out_dir],
                            [times], distances)[0]


def same_images(a: data.Loader, b: data.Loader) -> bool:
    """Whether two loaders serve the same samples under the same indices (their orders may differ)."""
    if a.n != b.n:
        return False
    if a.split.images is not None and b.split.images is not None:
        return torch.equal(a.split.images[: a.n], b.split.images[: b.n])
    return a.split.folder is not None and getattr(a.split.folder, "samples", None) == getattr(b.split.folder, "samples", 1)


def fit_student_many(students: List[ODEViT], teacher: nn.Module, checkpoints: Sequence[int], bases: List[Base],
                     tcfg: Teacher, cfg: Distill, train_loaders: List[data.Loader],
                     evals: List[Dict[str, data.Loader]], out_dirs: List[str],
                     times: Optional[List[Optional[Dict[str, float]]]] = None,
                     distances: Sequence[float] = (),
                     rngs: Optional[List[Dict[str, Any]]] = None, teacher_id: str = "") -> List[List[Dict[str, float]]]:
    """`fit_student` of one cell's seeds (base k = seed k), trained together when more than one (`train.fit_many`).
    The teacher's cached states serve every seed: they are indexed by sample, and every seed trains on the same
    images (checked), in its own order. `distances`: the teacher's layer distances, from which the checkpoint
    schedule of every N in distill.train_steps is made here (`step_schedules`; needed only when train_steps is set).
    `teacher_id` (a study teacher's weights hash) joins the run ids."""

    def curriculum(epoch: int, model: nn.Module) -> None:
        if cfg.unfreeze_head_at >= 0 and epoch == cfg.unfreeze_head_at:
            model.head.requires_grad_(True)

    if not all(same_images(train_loaders[0], l) for l in train_loaders[1:]):
        raise ValueError("fit_student_many: the seeds' loaders hold different images (e.g. the synthetic dataset, "
                         "drawn per seed): train them one at a time")
    if cfg.train_steps and not distances:
        raise ValueError(f"fit_student_many: distill.train_steps = {cfg.train_steps} needs the teacher's layer "
                         "distances (`distances`) to make each N's checkpoint schedule")
    device = train.resolve_device(bases[0].device)
    times = times or [None] * len(students)
    obj = objectives.distill(teacher, checkpoints, cfg, cache=teacher_cache(teacher, train_loaders[0], cfg, device,
                                                                          times[0]),
                             step_schedules=step_schedules(distances, cfg))
    for t in times[1:]:  # shared work: every seed's timing shows it
        if t is not None and times[0] is not None and "teacher_cache" in times[0]:
            t["teacher_cache"] = times[0]["teacher_cache"]
    return train.fit_many(students, train_loaders, evals, obj, train_config(bases[0], cfg), out_dirs,
                          on_epoch=curriculum, run_ids=[train.fingerprint(b, tcfg, cfg, list(checkpoints),
                                                                          *([teacher_id] if teacher_id else []))
                                                        for b in bases], times=times, rngs=rngs)


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


def params_m(model: nn.Module, trainable: bool = False) -> float:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable) / 1e6


def encoder_params(model: nn.Module) -> int:
    """Encoder parameters: the shared ODE block, or a ViT's blocks."""
    if isinstance(model, ODEViT):
        return model.encoder_params()
    return sum(p.numel() for p in model.blocks.parameters())


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
    return train.load_weights(pipeline.build_teacher(b, t), f"{ckpt}/best.pt").to(device).eval()


def build_cell(teacher: nn.Module, d: Distill, free: bool) -> ODEViT:
    return build_free(teacher, d) if free else build_student(teacher, d)
