"""The study: seeds x cells. One cell = one configuration of the distilled student (the distill block with the
cell's overrides), or the same architecture trained from scratch (`free: true`); one DVC stage per (cell, seed).

    python -m odevit.repro.study ref 0          # train cell 'ref' with seed 0 -> checkpoints/cells/ref/s0, results/cells/ref/s0
    python -m odevit.repro.study ref 100 --study confirm_55k   # a plan study's run (plan.yaml: its cells, budget, seeds)
                                                # -> checkpoints/studies/confirm_55k/ref/s100, results/studies/...
    python -m odevit.repro.study ref 100 101 102 --study confirm_55k   # three seeds trained together (a GPU's
                                                # fast path: `run_many`); each writes what its own stage writes
    cells = study.collect()               # one row per finished (cell, seed): Acc@1/3/5, Acc@1 at N/2 and 2N, c, ...

Seed s fixes the initialisation, the data order and the augmentation draws; runs of two cells with the same seed
are paired. Every cell uses the distill block's optimiser, epochs and losses, and `study.train_limit` images.
Cell overrides are distill keys, plus `free: true` (no teacher: the student's exact architecture from scratch, CE +
the same JaSMin) and `preset: FILE` (the distill block of a preset, its epoch-valued curriculum rescaled to this
run's epochs: see `preset_overrides`).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import pandas as pd
import torch
import torch.nn as nn

from . import config, data, objectives, pipeline, provenance, study_teacher, train
from . import plan as plan_mod
from .config import (CELL_KEYS, EPOCH_KEYS, SWITCH_KEYS, Base, ConfigError, Distill, Study, Teacher, cell_config,
                     preset_overrides)
from .results import collect  # noqa: F401  (study.collect: the notebooks' name)
from ..model import ODEViT


def cell_dir(kind: str, name: str, seed: int, study: Optional[str] = None) -> str:
    """checkpoints/cells/NAME/sSEED (kind 'checkpoints') or results/cells/NAME/sSEED (kind 'results'); a plan study's
    run: KIND/studies/STUDY/NAME/sSEED."""
    return f"{kind}/cells/{name}/s{seed}" if study is None else f"{kind}/studies/{study}/{name}/s{seed}"


def build_free(teacher: nn.Module, cfg: Distill) -> ODEViT:
    """The student's exact architecture (width, heads, mlp_ratio, N, T = L, patch, registers, head norm, norm,
    solver, init, dropout), every part freshly initialised and trainable: nothing taken from the teacher."""
    model = pipeline.build_student(teacher, dataclasses.replace(cfg, freeze=[]))
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


def load_teacher(b: Base, t: Teacher, device: torch.device, ckpt: str = pipeline.TEACHER_CKPT) -> nn.Module:
    return train.load_weights(pipeline.build_teacher(b, t), f"{ckpt}/best.pt").to(device).eval()


def read_teacher_distances(path: str = "results/02_teacher/distances.csv") -> List[float]:
    """d_1..d_L as 02_teacher measured them on training batches (`pipeline.teacher_distances`)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: missing (run 02_teacher: dvc repro)")
    return pd.read_csv(path).distance.tolist()


def build_cell(teacher: nn.Module, d: Distill, free: bool) -> ODEViT:
    return build_free(teacher, d) if free else pipeline.build_student(teacher, d)


def run(name: str, seed: int, params_file: str = "params.yaml", study_name: Optional[str] = None,
        plan_file: str = plan_mod.PLAN_FILE) -> Dict[str, Any]:
    """Train one (cell, seed) and write its checkpoints and results; resumes an interrupted run. best.pt and early
    stopping follow `base.select_on` (the validation split by default); the test set is scored once, at best.pt.
    timing.json: seconds per phase (`pipeline.timing`). `study_name`: a plan study's run (`config.study_configs`); its
    metrics.json records the study's plan hash. Every run's metrics.json records its provenance (`provenance`)."""
    return run_many(name, [seed], params_file, study_name, plan_file)[0]


def run_many(name: str, seeds: List[int], params_file: str = "params.yaml", study_name: Optional[str] = None,
             plan_file: str = plan_mod.PLAN_FILE) -> List[Dict[str, Any]]:
    """`run` of several seeds of one cell; more than one are trained together, as one batched model
    (`train.fit_many`: one kernel launch does every seed's work, for GPUs that small models leave idle). Each seed
    writes what its own `run` writes, to floating-point rounding (tests/test_fit_many.py); its metrics.json names
    the seeds trained with it (`trained_together`) and its provenance the process they shared. Seeds trained
    together need the whole schedule (no patience), no dropout and no drawn step count (`distill.train_steps`)."""
    clock = _Clock(len(seeds))
    cell = _configs(name, seeds, params_file, study_name, plan_file)
    built = _build(cell, clock)
    with contextlib.ExitStack() as stack:  # each seed's provenance: the machine's load while it fits and is scored
        mons = [stack.enter_context(provenance.Monitor(ck, clock.start, trained_with=[o for o in cell.ckpts
                                                                                      if o != ck]))
                for ck in cell.ckpts]
        hists = _fit(cell, built, clock)
        metrics = _evaluate(cell, built, clock)
    _record(cell, built, hists, metrics, mons, clock)
    return metrics


class _Clock:
    """`run_many`'s seconds per phase of each seed (timing.json: `pipeline.timing`), from the process start."""

    def __init__(self, n_seeds: int):
        self.start, self.last = pipeline.process_start(), time.perf_counter()
        self.phases: List[Dict[str, float]] = [{} for _ in range(n_seeds)]
        for ph in self.phases:
            ph["startup"] = time.time() - self.start  # interpreter start + imports, up to here

    def lap(self, key: str, k: Optional[int] = None) -> None:
        """Seconds since the last lap to phase `key` of seed k, or of every seed (work they share)."""
        now = time.perf_counter()
        for ph in (self.phases if k is None else [self.phases[k]]):
            ph[key] = ph.get(key, 0.0) + now - self.last
        self.last = now

    def restart(self) -> None:
        """Start the next lap now (the seconds since the last one count in no phase)."""
        self.last = time.perf_counter()

    def share_fit(self, hists: List[List[Dict[str, float]]]) -> None:
        """After the fit's lap to 'write' (of every seed): its checkpointing, the fit's wall minus the loops and
        evaluations the histories hold (resumed_s: epochs not run here) and the teacher cache; seeds trained
        together each get their share (1/K) of the shared phases."""
        phs, K = self.phases, len(self.phases)
        shared = (phs[0]["write"] - sum(train.history_seconds(h) for h in hists)
                  + sum(ph.get("resumed_s", 0.0) for ph in phs) - phs[0].get("teacher_cache", 0.0))
        for ph in phs:
            ph["write"] = max(0.0, shared) / K
            for key in ("startup", "teacher_cache") if K > 1 else ():
                if key in ph:
                    ph[key] /= K


@dataclasses.dataclass
class CellRun:
    """One cell's seeds as `run_many` trains them: every input checked (`_configs`), the configs resolved."""
    name: str
    seeds: List[int]
    study_name: Optional[str]
    cfg: Dict[str, Any]  # params.yaml's checked configs, a plan study's applied
    distill: Distill  # the cell's distill block (its overrides applied)
    free: bool
    teacher: Teacher  # the teacher block: 02_teacher's, or the plan study's own
    teacher_ckpt: str
    teacher_run: Optional[str]  # the plan study's own teacher's results folder (None: 02_teacher's)
    teacher_id: str  # its best.pt's hash, part of the run ids of the cells it teaches ('' for 02_teacher's)
    distances: List[float]
    checkpoints: List[int]  # c_1..c_L
    plan_hash: Optional[str]
    source: str  # the training code's hash at the start (even if the checkout changes meanwhile)

    @property
    def ckpts(self) -> List[str]:
        return [cell_dir("checkpoints", self.name, s, self.study_name) for s in self.seeds]

    @property
    def outs(self) -> List[str]:
        return [cell_dir("results", self.name, s, self.study_name) for s in self.seeds]


def _configs(name: str, seeds: List[int], params_file: str, study_name: Optional[str], plan_file: str) -> CellRun:
    """The cell's configs, every input checked here, once: distinct seeds (of the plan study's, if one), the cell's
    overrides, whether its seeds can share a process, its teacher (a plan study's own: trained and current) and
    that teacher's distances and schedule."""
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ConfigError(f"seeds {seeds}: give each seed once")
    source = train.fingerprint()
    cfg = raw = config.check_stage("cell", params_file)
    plan, plan_hash = None, None
    if study_name is not None:
        plan = plan_mod.load(plan_file)  # read once: the study's configs and its teacher's come from this copy
        cfg, plan_hash = config.study_configs(raw, plan, study_name, plan_file), plan_mod.study_hash(plan, study_name)
        for seed in seeds:
            if int(seed) not in cfg["study"].seeds:
                raise ConfigError(f"{plan_file}: seed {seed} is not one of study {study_name}'s seeds "
                                  f"{cfg['study'].seeds}")
    study: Study = cfg["study"]
    d, free = cell_config(cfg["distill"], study, name)
    why = config.together_refusal(d, cfg["base"], free)
    if len(seeds) > 1 and why:
        raise ConfigError(f"cell {name}: its seeds cannot be trained together ({why}): train one seed at a time")
    tcfg, tckpt, tdist, own, tid = cfg["teacher"], pipeline.TEACHER_CKPT, "results/02_teacher/distances.csv", None, ""
    if study_name is not None and config.study_teacher_cell(study, name):  # the study's own teacher
        tb, tcfg, _, _ = study_teacher.configs(study_name, plan_file=plan_file, cfg=raw, plan=plan)
        tckpt, own = study_teacher.dirs(study_name)
        tdist = f"{own}/distances.csv"
        if not study_teacher.current(study_name, tb, tcfg):
            raise ConfigError(f"cell {name} distils from study {study_name}'s own teacher, not trained yet (or "
                              f"trained under an earlier teacher block): run `python -m odevit.repro.study_teacher "
                              f"{study_name}` (stage {study_teacher.stage(study_name)}) first")
        tid = study_teacher.identity(study_name)
    distances = read_teacher_distances(tdist)
    return CellRun(name, list(seeds), study_name, cfg, d, free, tcfg, tckpt, own, tid, distances,
                   pipeline.schedule(distances, d), plan_hash, source)


@dataclasses.dataclass
class Built:
    """What `_build` made for seed k: its base block (seed k), loaders (train, val, test) and model; the RNG state
    after its initialisation; the frozen teacher (the same weights serve every seed); the device."""
    bases: List[Base]
    loaders: List[Tuple[data.Loader, Optional[data.Loader], data.Loader]]
    models: List[ODEViT]
    rngs: List[Dict[str, Any]]
    teacher: nn.Module
    device: torch.device


def _build(cell: CellRun, clock: _Clock) -> Built:
    """Per seed, as `run` does: seed everything (init, data order, augmentation draws), the loaders, the teacher
    (building it draws from the RNG), the cell's model."""
    d = cell.distill
    bases, loaders, models, rngs, teacher = [], [], [], [], None
    for k, seed in enumerate(cell.seeds):
        b = dataclasses.replace(cell.cfg["base"], seed=int(seed))
        device = pipeline.setup(b)
        loaders.append(pipeline.data_loaders(b, augment=d.augment, train_limit=cell.cfg["study"].train_limit))
        clock.lap("data", k)
        t = load_teacher(b, cell.teacher, device, cell.teacher_ckpt)
        teacher = t if teacher is None else teacher
        models.append(build_cell(t, d, cell.free))
        rngs.append(train._rng_state())  # what `fit` saves in last.pt when training draws nothing
        bases.append(b)
        clock.lap("teacher", k)
    many = len(cell.seeds) > 1
    what = "free (from scratch)" if cell.free else (f"distilled, c = {cell.checkpoints}"
                                                    + (f", N drawn per batch from {d.train_steps}" if d.train_steps
                                                       else ""))
    print(f"cell {cell.name} seed{'s' if many else ''} {', '.join(map(str, cell.seeds))}"
          f"{' (trained together)' if many else ''}: {what}; "
          f"{loaders[0][0].n} training images x {d.epochs} epochs, selected on {bases[0].select_on}", flush=True)
    return Built(bases, loaders, models, rngs, teacher, device)


def _fit(cell: CellRun, built: Built, clock: _Clock) -> List[List[Dict[str, float]]]:
    """Train every seed (together when more than one), best.pt and last.pt in its checkpoint folder; returns the
    histories. The fit's time: its loops and evaluations from the histories, the rest checkpointing (`share_fit`)."""
    evals = [pipeline.eval_loaders(b, va, te) for b, (_, va, te) in zip(built.bases, built.loaders)]
    trs = [l[0] for l in built.loaders]
    if cell.free:
        hists = pipeline.fit_free_many(built.models, built.bases, cell.distill, trs, evals, cell.ckpts,
                                       times=clock.phases, rngs=built.rngs)
    else:
        hists = pipeline.fit_student_many(built.models, built.teacher, cell.checkpoints, built.bases, cell.teacher,
                                          cell.distill, trs, evals, cell.ckpts, times=clock.phases,
                                          distances=cell.distances,
                                          rngs=built.rngs, teacher_id=cell.teacher_id)
    clock.lap("write")
    clock.share_fit(hists)
    return hists


def _evaluate(cell: CellRun, built: Built, clock: _Clock) -> List[Dict[str, Any]]:
    """Every seed's test metrics at its best.pt (`evaluate_cell`)."""
    metrics = []
    for k, model in enumerate(built.models):
        clock.restart()
        train.load_weights(model, f"{cell.ckpts[k]}/best.pt").to(built.device)
        metrics.append(evaluate_cell(model, built.loaders[k][2], cell.cfg["study"], built.device, clock.phases[k]))
    return metrics


def _record(cell: CellRun, built: Built, hists: List[List[Dict[str, float]]], metrics: List[Dict[str, Any]],
            monitors: List[Any], clock: _Clock) -> None:
    """Complete each seed's metrics (the cell, its configs' facts, its history's summary, its `monitors[k]`'s
    provenance, the source hash) and write its history.csv, metrics.json and timing.json."""
    d, K = cell.distill, len(cell.seeds)
    for k, (seed, model, m, hist, ph) in enumerate(zip(cell.seeds, built.models, metrics, hists, clock.phases)):
        clock.restart()
        tr, va, _ = built.loaders[k]
        m.update(cell=cell.name, seed=int(seed), free=cell.free,
                 checkpoints=cell.checkpoints if not cell.free else None,
                 encoder_params=model.encoder_params(), params_m=pipeline.params_m(model),
                 trainable_params_m=pipeline.params_m(model, True), epochs=d.epochs, train_images=tr.n,
                 val_images=va.n if va is not None else 0, **pipeline.run_summary(hist, built.bases[k], d),
                 provenance=monitors[k].summary(), source=cell.source)
        if K > 1:
            m["trained_together"] = [int(s) for s in cell.seeds]
        if cell.study_name is not None:
            m.update(study=cell.study_name, plan_hash=cell.plan_hash, precision=built.bases[k].precision)
        if cell.teacher_run is not None:
            m.update(teacher_run=cell.teacher_run, teacher_sha256=cell.teacher_id)  # its metrics.json: the teacher's
        pipeline.write_csv(pd.DataFrame(hist), f"{cell.outs[k]}/history.csv")
        pipeline.write_json(m, f"{cell.outs[k]}/metrics.json")
        clock.lap("write", k)
        pipeline.write_json(pipeline.timing(ph, hist, clock.start, share=K), f"{cell.outs[k]}/timing.json")


def evaluate_cell(model: ODEViT, test: data.Loader, study: Study, device: torch.device,
                  times: Optional[Dict[str, float]] = None) -> Dict[str, Any]:
    """Acc@1/3/5 at the trained N (whole test set); Acc@1 vs N on the first `robustness_test_limit` test images,
    for every N of `robustness_steps` and N/2, N, 2N (acc1_half_n, acc1_sub_n, acc1_double_n: same images). The
    curve's point at the trained N is read off the whole-set pass (its first images: the same batches of the same
    images), not computed again. Seconds of each part go to times['test_eval'] / times['robustness']."""
    t0 = time.perf_counter()
    N = model.num_steps
    m = train.evaluate(model, test, device, per_sample=True)
    correct = m.pop("correct1")
    t1 = time.perf_counter()
    sub = data.Loader(test.split, test.batch_size, test.transform, limit=study.robustness_test_limit or None)
    steps = sorted(set(study.robustness_steps) | {max(1, N // 2), N, 2 * N})
    m["robustness"] = {f"n{n}": (correct[: sub.n].sum().item() / sub.n if n == N and len(correct) >= sub.n
                                 else train.evaluate(model, sub, device, num_steps=n, ks=(1,))["acc1"]) for n in steps}
    m.update(acc1_half_n=m["robustness"][f"n{max(1, N // 2)}"], acc1_sub_n=m["robustness"][f"n{N}"],
             acc1_double_n=m["robustness"][f"n{2 * N}"])
    if times is not None:
        times["test_eval"] = times.get("test_eval", 0.0) + t1 - t0
        times["robustness"] = times.get("robustness", 0.0) + time.perf_counter() - t1
    return m


def models(cells: List[str], seeds: List[int], params_file: str = "params.yaml",
           device: Optional[torch.device] = None) -> Dict[Tuple[str, int], ODEViT]:
    """The trained best.pt of each (cell, seed), in eval mode (for the dynamics analyses)."""
    cfg = config.check_stage("06_dynamics", params_file)
    device = device or train.resolve_device(cfg["base"].device)
    teacher = load_teacher(cfg["base"], cfg["teacher"], device)
    out = {}
    for name in cells:
        d, free = cell_config(cfg["distill"], cfg["study"], name)
        for s in seeds:
            m = build_cell(teacher, d, free)
            out[(name, s)] = train.load_weights(m, f"{cell_dir('checkpoints', name, s)}/best.pt").to(device).eval()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="Train one (cell, seed) of the study")
    ap.add_argument("cell")
    ap.add_argument("seed", type=int, nargs="+", help="one seed (the stage's run), or several: trained together")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--study", default=None, help="a study of plan.yaml (its cells, seeds, budget); default: params.yaml's")
    ap.add_argument("--plan", default=plan_mod.PLAN_FILE)
    args = ap.parse_args()
    try:
        run_many(args.cell, args.seed, args.params, args.study, args.plan)
    except (ConfigError, plan_mod.PlanError, train.CheckpointError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
