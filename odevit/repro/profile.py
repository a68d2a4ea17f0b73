"""Where a study step's time goes, on this machine: the training step of the study cells as `train.fit` runs it
(`train.train_step` on `train.new_run`'s state: the same objective, cache, AdamW, clipping and host syncs), under
torch.profiler, split into labelled phases.

    python -m odevit.repro.profile                 # results/bench/profile_<cpu|cuda>.{json,md}
    python -m odevit.repro.profile --steps 10 --cells ref

Per cell (default: ref = MSE + JaSMin on the teacher's cached CLS states, jasmin_off = the same without the
attention-map path JaSMin needs, free = the same architecture from scratch, CE + JaSMin): the wall time of a step
without the profiler (median of `--steps`), then under the profiler each phase's host (CPU) time and, on CUDA,
device time: data (batch, transform, copy to the device), student trajectory (forward_trajectory: every solver
step, and the attention maps when JaSMin needs them), loss terms (trajectory MSE, JaSMin, CE), backward,
clip + finiteness checks, optimiser step. Also: the host syncs per step (aten::item / _local_scalar_dense: the
finiteness check, and the logged losses that `fit` reads once an epoch, here counted once a step), the ops with the most self CPU time, and
the step's wall time minus its ops' self CPU time (Python, dispatch and the profiler's own overhead). The machine,
threads, torch and date are recorded with the result.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from . import config, data, objectives, pipeline, train
from .bench import _clock, timed_together  # wall seconds of a call, the device synchronised around it
from .machine import machine_info
from .pipeline import write_json
from .files import write_text
from .. import losses
from ..model import ODEViT

PHASES = ("data", "student trajectory", "loss terms", "backward", "clip + finiteness checks", "optimiser step")
SYNC_OPS = ("aten::_local_scalar_dense",)  # what .item(), bool(tensor) and float(tensor) call


@contextlib.contextmanager
def _labelled() -> Iterator[None]:
    """The objective's building blocks wrapped in profiler labels for the duration (restored after): the student's
    trajectory, and the loss functions the terms of `losses.TERMS` and `objectives.ode_scratch` call."""
    targets = [(ODEViT, "forward_trajectory", "student trajectory")] + [
        (mod, name, "loss terms") for mod, name in ((losses, "trajectory_mse"), (losses, "jasmin"),
                                                    (losses, "attention_l1"), (objectives, "jasmin"),
                                                    (objectives.F, "cross_entropy"))]
    saved = [getattr(obj, name) for obj, name, _ in targets]

    def wrap(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        def inner(*a: Any, **k: Any) -> Any:
            with record_function(label):
                return fn(*a, **k)
        return inner

    for (obj, name, label), fn in zip(targets, saved):
        setattr(obj, name, wrap(fn, label))
    try:
        yield
    finally:
        for (obj, name, _), fn in zip(targets, saved):
            setattr(obj, name, fn)


def _cell(cfg: Dict[str, Any], name: str, device: torch.device):
    """(objective, training state) of a study cell, built as `study.run` and `pipeline.fit_*` build them: the
    state is `train.new_run`'s (fit's AdamW with its two parameter groups and its schedule)."""
    from . import study as st

    b, s = cfg["base"], cfg["study"]
    d, free = config.cell_config(cfg["distill"], s, name)
    tr, _, _ = pipeline.data_loaders(b, augment=d.augment, train_limit=s.train_limit)
    teacher = st.load_teacher(b, cfg["teacher"], device)
    model = st.build_cell(teacher, d, free).to(device)
    if free:
        obj = objectives.ode_scratch(d)
    else:
        c = pipeline.schedule(st.read_teacher_distances(), d)
        obj = objectives.distill(teacher, c, d, cache=pipeline.teacher_cache(teacher, tr, d, device))
    cfg_t = pipeline.train_config(b, d)
    return obj, train.new_run(model, tr, {cfg_t.select_on: None}, cfg_t, device), d.clip


def _step(obj: Any, run: Any, clip: float, batches: Iterator[Any], device: torch.device) -> None:
    """One step of `train.fit`'s loop: the loader's next batch, then `train.train_step` (its phases labelled), and
    the read of the logged losses that `fit` does once an epoch (here once a step: an upper bound)."""
    with record_function("data"):
        batch = next(batches)
    logged = train.train_step(obj, [run], [batch], 0, device, clip)
    {k: v.tolist() for k, v in logged.items()}


def _batches(loader: data.Loader, n: int) -> Iterator[Any]:
    """`n` training batches (the loader's epoch order, repeated if it has fewer), transformed as `fit` gets them."""
    got = 0
    while got < n:
        for batch in loader.batches(got, with_index=True):
            yield batch
            got += 1
            if got == n:
                return


def phase_times(averages: List[Any], dev_attr: str) -> Tuple[Dict[str, float], Dict[str, float]]:
    """Host and device microseconds per event key. On CUDA a labelled phase has two entries with one key (the CPU
    range and its GPU-side annotation, whose CPU time is 0): each total is taken from the entry that has it."""
    host: Dict[str, float] = {}
    dev: Dict[str, float] = {}
    for e in averages:
        host[e.key] = max(host.get(e.key, 0.0), float(e.cpu_time_total))
        dev[e.key] = max(dev.get(e.key, 0.0), float(getattr(e, dev_attr, 0.0) or 0.0))
    return host, dev


def profile_cell(cfg: Dict[str, Any], name: str, steps: int, device: torch.device, warmup: int = 3) -> Dict[str, Any]:
    obj, run, clip = _cell(cfg, name, device)
    model, loader = run.model, run.loader
    model.train()
    it = _batches(loader, warmup + 2 * steps)  # the loader's own iteration: its batch transform runs in `data`
    for _ in range(warmup):
        _step(obj, run, clip, it, device)
    step = lambda: _step(obj, run, clip, it, device)  # noqa: E731
    walls = [_clock(step, device) for _ in range(steps)]  # without the profiler: the step as training runs it
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with _labelled(), profile(activities=acts) as prof:
        profiled = _clock(lambda: [step() for _ in range(steps)], device) / steps
    averages = list(prof.key_averages())
    ev = {e.key: e for e in averages}
    dev_attr = "device_time_total" if hasattr(averages[0], "device_time_total") else "cuda_time_total"
    host, dev = phase_times(averages, dev_attr)
    phases = {p: {"host_ms": round(host.get(p, 0.0) / 1e3 / steps, 3),
                  "device_ms": round(dev.get(p, 0.0) / 1e3 / steps, 3) if device.type == "cuda" else None}
              for p in PHASES}
    ops = sorted((e for k, e in ev.items() if k.startswith("aten::") or k.startswith("cuda")),
                 key=lambda e: e.self_cpu_time_total, reverse=True)
    self_cpu = sum(e.self_cpu_time_total for k, e in ev.items() if k not in PHASES) / 1e3 / steps
    return {
        "cell": name, "batch": loader.batch_size, "steps": steps,
        "step_ms_median": round(1e3 * statistics.median(walls), 3), "step_ms_min": round(1e3 * min(walls), 3),
        "img_per_s": round(loader.batch_size / statistics.median(walls), 1),
        "profiled_step_ms": round(1e3 * profiled, 3), "phases": phases,
        "host_syncs_per_step": sum(ev[k].count for k in SYNC_OPS if k in ev) / steps,
        "ops_self_cpu_ms": round(self_cpu, 3),
        "outside_ops_ms": round(1e3 * profiled - self_cpu, 3),
        "top_ops": [{"op": e.key, "self_cpu_ms": round(e.self_cpu_time_total / 1e3 / steps, 3),
                     "calls": e.count // steps} for e in ops[:12]],
    }


def together(cfg: Dict[str, Any], name: str, counts: List[int], steps: int, device: torch.device) -> List[Dict]:
    """K seeds of a cell per training step, two ways, timed round-robin (`bench.timed_together`): one
    `train.train_step` of K runs trained together (`train.fit_many`: one batched model under vmap) vs K steps one
    run at a time. Per K: ms per K-seed step both ways, training images/s (all seeds), and the ratio."""
    base = cfg["base"]
    runs, obj, clip = [], None, 0.0
    for k in range(max(counts)):
        cfg_k = dict(cfg, base=dataclasses.replace(base, seed=base.seed + k))
        train.seed_everything(base.seed + k)
        o, r, clip = _cell(cfg_k, name, device)
        obj = obj or o  # one objective (its teacher cache) for every seed, as `pipeline.fit_student_many`
        r.model.train()
        runs.append(r)
    its = [_batches(r.loader, 10 ** 9) for r in runs]
    out = []
    for K in counts:
        sub = list(zip(runs[:K], its[:K]))
        fns = {"together": lambda: train.train_step(obj, [r for r, _ in sub], [next(i) for _, i in sub], 0, device,
                                                    clip),
               "one_at_a_time": lambda: [train.train_step(obj, [r], [next(i)], 0, device, clip) for r, i in sub]}
        t = timed_together(fns, steps, 2, device)
        batch = runs[0].loader.batch_size
        out.append({"cell": name, "seeds": K, "batch": batch,
                    **{f"{k}_ms": round(1e3 * v["median_s"], 2) for k, v in t.items()},
                    **{f"{k}_img_per_s": round(K * batch / v["median_s"], 1) for k, v in t.items()},
                    "speedup": round(t["one_at_a_time"]["median_s"] / t["together"]["median_s"], 3)})
    return out


def markdown(res: Dict[str, Any]) -> str:
    m = res["machine"]
    dev = m.get("cuda_device") or f"{m['cpu_model']} ({m['cpu_capability']}), {res['threads']} threads"
    lines = [f"# Profile of one study step — {dev}, torch {m['torch_build']}, {res['date']}", "",
             f"`{res['command']}`. Step = `train.fit`'s loop body on the study's "
             f"params (batch {res['cells'][0]['batch']}); times per step; load per core while it ran: "
             f"{res['load_per_core']:.2f}.", ""]
    head = "| phase | " + " | ".join(c["cell"] for c in res["cells"]) + " |"
    lines += [head, "|---|" + "---:|" * len(res["cells"])]
    cuda = res["device"] == "cuda"
    for p in PHASES:
        cells = []
        for c in res["cells"]:
            ph = c["phases"][p]
            cells.append(f"{ph['host_ms']:.1f}" + (f" / {ph['device_ms']:.1f}" if cuda else ""))
        lines.append(f"| {p} (ms{', host / device' if cuda else ''}) | " + " | ".join(cells) + " |")
    for key, label in (("profiled_step_ms", "step under the profiler (ms)"), ("step_ms_median", "step without the profiler, median (ms)"),
                       ("img_per_s", "training images/s (without the profiler)"),
                       ("ops_self_cpu_ms", "ops' self CPU time (ms)"), ("outside_ops_ms", "outside ops: Python, dispatch, profiler (ms)"),
                       ("host_syncs_per_step", "host syncs per step (item / _local_scalar_dense)")):
        lines.append(f"| {label} | " + " | ".join(f"{c[key]:g}" for c in res["cells"]) + " |")
    for c in res["cells"]:
        lines += ["", f"Top ops of `{c['cell']}` by self CPU time (ms per step, calls per step):", "",
                  "| op | self CPU ms | calls |", "|---|---:|---:|"]
        lines += [f"| `{o['op']}` | {o['self_cpu_ms']:.2f} | {o['calls']} |" for o in c["top_ops"]]
    if res.get("together"):
        lines += ["", f"K seeds of a cell, one step each: trained together (`train.fit_many`, one batched model under "
                  f"torch.func.vmap) vs one at a time, timed round-robin ({res['steps']} steps, median):", "",
                  "| cell | seeds K | together (ms) | one at a time (ms) | together (img/s) | one at a time (img/s) "
                  "| speed-up |", "|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {t['cell']} | {t['seeds']} | {t['together_ms']:.1f} | {t['one_at_a_time_ms']:.1f} | "
                  f"{t['together_img_per_s']:.0f} | {t['one_at_a_time_img_per_s']:.0f} | {t['speedup']:.2f}x |"
                  for t in res["together"]]
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    ap = argparse.ArgumentParser(description="Profile one study step (results/bench/profile_<device>.{json,md})")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--cells", nargs="+", default=["ref", "jasmin_off", "free"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default="results/bench")
    ap.add_argument("--together", default="1,2,4",
                    help="seed counts K for the together-vs-one-at-a-time timing of the first cell ('' = skip)")
    args = ap.parse_args(argv)
    cfg = config.check_stage("cell", args.params)
    unknown = [c for c in args.cells if c not in cfg["study"].cells]
    if unknown or args.steps < 1:
        raise SystemExit(f"error: --cells {unknown} not in study.cells {sorted(cfg['study'].cells)}" if unknown
                         else f"error: --steps {args.steps} must be >= 1")
    cfg["base"] = dataclasses.replace(cfg["base"], seed=cfg["study"].seeds[0])
    device = pipeline.setup(cfg["base"])
    load0 = os.getloadavg()[0]
    cells = [profile_cell(cfg, c, args.steps, device) for c in args.cells]
    counts = [int(k) for k in args.together.split(",") if k.strip()]
    tog = together(cfg, args.cells[0], counts, args.steps, device) if counts else []
    res = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": device.type,
           "threads": torch.get_num_threads(), "machine": machine_info(),
           "load_per_core": (load0 + os.getloadavg()[0]) / 2 / (os.cpu_count() or 1),
           "command": " ".join(["python -m odevit.repro.profile"] + (argv if argv is not None else [])).strip(),
           "steps": args.steps, "cells": cells, "together": tog}
    os.makedirs(args.out, exist_ok=True)
    write_json(res, os.path.join(args.out, f"profile_{device.type}.json"))
    write_text(markdown(res), os.path.join(args.out, f"profile_{device.type}.md"))
    print(markdown(res))
    return res


if __name__ == "__main__":
    main()
