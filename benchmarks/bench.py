"""The fast path's speed, measured, never timed in tests (as timm's benchmark.py, outside the package):

    python benchmarks/bench.py cpu          # side by side in one process: K plain runs (train.fit) vs K stacked (fast.fit)
    python benchmarks/bench.py gpu-record   # the GPU's cell groups of plan v2, from the runs' own histories
    python benchmarks/bench.py compute      # what every committed run of plans v2 and v3 took, by machine kind
    python benchmarks/bench.py profile      # one fast-path step at K = 8, 16, 32 seeds on this machine's device

Each writes its record under results/bench (machine and date in it).
"""
from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import statistics
import sys
import time
from typing import List, Optional, Sequence

import pandas as pd
import torch

from odevit.repro import fast, pipeline, train
from odevit.repro.machine import cpu_model

OUT = "results/bench"


def gpu_record(results: str = "results/v2") -> pd.DataFrame:
    """Per cell group of the committed v2 runs made on a GPU: where it ran, K seeds, images/s of its training loop
    (median over its epochs, all K counted), its loop and evaluation seconds."""
    rows = []
    for d in [os.path.join(results, "teacher")] + sorted(glob.glob(os.path.join(results, "v2_*", "*"))):
        runs = sorted(glob.glob(os.path.join(d, "s*", "metrics.json")))
        if not runs:
            continue
        m = json.load(open(runs[0]))
        if m["provenance"]["device"].startswith("CPU"):  # the GPU's groups only (the CPU's: `cpu`)
            continue
        h = pd.read_csv(runs[0].replace("metrics.json", "history.csv"))
        K = len(runs)
        rows.append(dict(group=os.path.relpath(d, results), device=m["provenance"]["device"],
                         torch=m["provenance"]["torch"], K=K, epochs=len(h), train_images=m.get("train_images"),
                         img_per_s=round(float(h.img_per_s.median())), loop_s=round(float(h.epoch_time_s.sum()) * K, 1),
                         eval_s=round(float(h.eval_time_s.sum()) * K, 1)))
    return pd.DataFrame(rows)


def compute(root: str = ".") -> pd.DataFrame:
    """What the committed runs of plans v2 (with its teacher) and v3 took, from their own records: per plan and
    machine kind (provenance.device), the groups (a cell's seeds, trained stacked), the runs and the hours of training
    loops and evaluation (history.csv's epoch_time_s + eval_time_s over epochs, resumes and seeds: each seed of a
    group records its 1/K share). Reruns outside the plans (results/v2_cpu) are not counted."""
    rows = []
    for f in sorted(glob.glob(os.path.join(root, "results/v[23]/*/*/s*/metrics.json"))
                    + glob.glob(os.path.join(root, "results/v2/teacher/s*/metrics.json"))):
        parts = os.path.relpath(f, root).split(os.sep)
        h = pd.read_csv(os.path.join(os.path.dirname(f), "history.csv"))
        rows.append({"plan": parts[1], "group": "/".join(parts[2:-2]),
                     "machine": json.load(open(f))["provenance"]["device"],
                     "seconds": train.history_seconds(h.to_dict("records"))})
    by = pd.DataFrame(rows, columns=["plan", "group", "machine", "seconds"]).groupby(["plan", "machine"])
    return pd.DataFrame({"groups": by.group.nunique(), "runs": by.size(),
                         "hours": (by.seconds.sum() / 3600).round(2)}).reset_index()


def _cell(K: int, steps: int, device: torch.device):
    """The plan's v2_10k ref cell (its committed teacher, distances and K seeds' models), the first `steps` batches
    of 128 training images, and its distillation objective on the teacher's cached CLS states."""
    p = fast.Plan()
    b0 = dataclasses.replace(p.base, precision="fp32")
    c = pipeline.build(fast.cell_of(p, "v2_10k", "ref"), p, list(range(K)), device)
    loaders, _, _ = fast._loaders(b0, steps * b0.batch_size, list(range(K)))
    full = fast.in_order(loaders[0], 512)
    cache = pipeline.teacher_cls_cache(c.teachers[0], full, device).to(device)
    obj = pipeline.distill(c.teachers[0], pipeline.schedule(c.distances, c.distill), c.distill, cache=cache)
    return p, b0, c, loaders, full, obj


def cpu(steps: int = 12, K: int = 2, repeats: int = 3, warmup: int = 1) -> dict:
    """Seconds of one epoch of `steps` batches of the cell for K seeds: K plain runs one after another (train.fit)
    vs the K stacked (fast.fit, eager), alternating `repeats` times after `warmup` untimed rounds (the first round
    pays for the first loads: on the Intel Xeon, 2026-12-04, its plain side took 32.6 s against 3.4 s the next)."""
    dev = torch.device("cpu")
    times = {"plain": [], "fast": []}
    for _ in range(warmup + repeats):
        p, b0, c, loaders, full, obj = _cell(K, steps, dev)
        d = c.distill
        _, va, _ = pipeline.data_loaders(b0, train_limit=steps * b0.batch_size)
        va_small = va.__class__(va.split, 512, va.transform, limit=512)
        tc = train.TrainConfig(epochs=1, lr=d.lr, weight_decay=d.weight_decay, warmup=d.warmup, clip=d.clip,
                               device="cpu")
        times["plain"].append(sum(train.fit(m, l, va_small, obj, tc)[0]["epoch_time_s"]
                                  for m, l in zip(c.models, loaders)))
        c = pipeline.build(fast.cell_of(p, "v2_10k", "ref"), p, list(range(K)), dev)  # the same initial models again
        g = fast.new_group(c.models, fast.Optim(d.lr, d.weight_decay, d.warmup, d.clip, 1), len(loaders[0]), dev)
        fast.fit(g, lambda key: obj, loaders, fast.Data.of(full, dev), fast.Data.of(va_small, dev), [None] * K, dev,
                 lambda e, b: 0, graphs=False)
        times["fast"].append(g.histories[0][0]["epoch_time_s"] * K)
    plain, fast_ = times["plain"][warmup:], times["fast"][warmup:]  # the timed rounds
    return {"machine": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__, "K": K,
            "steps": steps, "batch": b0.batch_size, "warmup_rounds": warmup, "plain_s": plain, "fast_s": fast_,
            "ratio_fast_over_plain": statistics.median(fast_) / statistics.median(plain),
            "date": time.strftime("%Y-%m-%d")}


def profile(Ks: Sequence[int] = (8, 16, 32), steps: int = 5, device_name: str = "auto") -> pd.DataFrame:
    """One fast-path step of the cell at K seeds (batch 128 each), on this machine's device: the median step time
    over `steps` steps after warm-up (on CUDA: replayed graphs), images/s, and under torch.profiler the kernel
    launches (CUDA) or operator calls (CPU) of one step."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    dev = fast._device_setup("fp32", device_name)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    rows = []
    for K in Ks:
        p, b0, c, loaders, full, obj = _cell(K, steps + 4, dev)
        d = c.distill
        g = fast.new_group(c.models, fast.Optim(d.lr, d.weight_decay, d.warmup, d.clip, 1), len(loaders[0]), dev)
        trd = fast.Data.of(full, dev)
        st = fast.Stepper(g, lambda key: obj, dev, graphs=True)
        plans = [l.indices(0) for l in loaders]
        times = []
        for i in range(steps + 4):
            idx = torch.stack([q[i][0] for q in plans]).to(dev)
            sync()
            t0 = time.perf_counter()
            if i == steps + 3:  # the last step under the profiler
                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
                with torch_profile(activities=acts) as prof:
                    st.step(0, trd.x[idx], trd.y[idx], idx, 0, d.lr)
                    sync()
                ev = prof.key_averages()
                launches = sum(e.count for e in ev if e.key in ("cudaLaunchKernel", "cudaGraphLaunch", "cuLaunchKernel"))
                ops = sum(e.count for e in ev if e.key.startswith("aten::"))
            else:
                st.step(0, trd.x[idx], trd.y[idx], idx, 0, d.lr)
                sync()
                if i >= 4:  # after the warm-up (and, on CUDA, the capture)
                    times.append(time.perf_counter() - t0)
        ms_step = 1000 * statistics.median(times)
        rows.append(dict(device=fast.device_kind(dev), K=K, batch=b0.batch_size, step_ms=round(ms_step, 2),
                         img_per_s=round(K * b0.batch_size / ms_step * 1000), launches_in_step=launches,
                         aten_ops_in_step=ops))
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def _write(path: str, text: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Measure the fast path; the record goes under results/bench")
    ap.add_argument("what", choices=["cpu", "gpu-record", "compute", "profile"])
    ap.add_argument("--K", type=int, nargs="*", default=[8, 16, 32], help="profile: the seed counts")
    a = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    if a.what == "gpu-record":
        t = gpu_record()
        _write(os.path.join(OUT, "fast_v2_gpu.md"),
               "# The fast path on the GPU: plan v2's cell groups (from their own histories)\n\n"
               "`python benchmarks/bench.py gpu-record`. Each group = one cell's K seeds trained as one stacked model, "
               "each step a replayed CUDA graph, fp32 without TF32, batch 128 per seed; images/s = the training "
               "loop's, all K seeds counted (median over epochs).\n\n" + t.to_markdown(index=False) + "\n\n"
               f"Training images in all: {int((t.img_per_s * t.loop_s).sum()):,} (images/s x loop seconds); "
               f"training loops {t.loop_s.sum():.0f} s, evaluation {t.eval_s.sum():.0f} s.\n")
    elif a.what == "compute":
        _write(os.path.join(OUT, "compute.md"),
               "# What the committed runs took, by plan and machine (from their own histories)\n\n"
               "`python benchmarks/bench.py compute`: per plan (v2 with its teacher; v3) and machine kind, the groups "
               "(a cell's seeds, trained stacked), the runs and the hours of training loops and per-epoch evaluation "
               "(history.csv's epoch_time_s + eval_time_s, over every epoch, resume and seed). Reruns outside the "
               "plans (results/v2_cpu) are not counted.\n\n"
               + compute().assign(hours=lambda t: t.hours.map("{:.2f} h".format)).to_markdown(index=False) + "\n")
    elif a.what == "profile":
        t = profile(a.K)
        kind = "gpu" if "CPU" not in t.device.iloc[0] else "cpu"
        _write(os.path.join(OUT, f"fast_profile_{kind}.md"),
               f"# One fast-path step of the default distilled cell at K seeds ({time.strftime('%Y-%m-%d')})\n\n"
               "`python benchmarks/bench.py profile`: median of the steps after warm-up (CUDA: replayed graphs); "
               "launches / aten ops counted under torch.profiler in one more step.\n\n" + t.to_markdown(index=False) + "\n")
    else:
        r = cpu()
        _write(os.path.join(OUT, "fast_cpu.json"), json.dumps(r, indent=2))
        print(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
