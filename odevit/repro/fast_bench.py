"""The fast path's speed, measured (issue 54): `python -m odevit.repro.fast_bench gpu-record` tabulates the GPU runs'
own histories (results/v2, one row per cell group: device, K, images/s of the training loop); `python -m
odevit.repro.fast_bench profile` times one step at K = 8, 16, 32 seeds on this machine's device (the tool to run first on
a GPU); `python -m odevit.repro.fast_bench cpu` times the plain path (`train.fit_many`) and the fast path (`fast.fit`, eager) side by side
on this CPU, the same cell, seeds and batches, alternating, and writes results/bench/fast_cpu.json and .md."""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time
from typing import List, Optional, Sequence

import pandas as pd

OUT = "results/bench"


def gpu_record(results: str = "results/v2") -> pd.DataFrame:
    """Per cell group of the committed v2 runs: where it ran, K seeds, images/s of its training loop (median over its
    epochs, all K counted), its loop and evaluation seconds."""
    rows = []
    for d in [os.path.join(results, "teacher")] + sorted(glob.glob(os.path.join(results, "v2_*", "*"))):
        runs = sorted(glob.glob(os.path.join(d, "s*", "metrics.json")))
        if not runs:
            continue
        m = json.load(open(runs[0]))
        h = pd.read_csv(runs[0].replace("metrics.json", "history.csv"))
        K = len(runs)
        imgs = float(h.img_per_s.median())
        rows.append(dict(group=os.path.relpath(d, results), device=m["provenance"]["device"],
                         torch=m["provenance"]["torch"], K=K, epochs=len(h), train_images=m.get("train_images"),
                         img_per_s=round(imgs), loop_s=round(float(h.epoch_time_s.sum()) * K, 1),
                         eval_s=round(float(h.eval_time_s.sum()) * K, 1)))
    return pd.DataFrame(rows)


def cpu_side_by_side(steps: int = 12, K: int = 2, repeats: int = 2) -> dict:
    """Seconds of one epoch of `steps` batches (batch 128) of the default distilled cell (teacher's CLS states
    cached) for K seeds, plain path (train.fit_many) vs fast path (fast.fit, eager), alternating `repeats` times."""
    import dataclasses

    import torch

    from . import config, fast, objectives, pipeline, train
    from .study import build_cell, load_teacher, read_teacher_distances

    cfg = config.check_stage("cell")
    b0, d = dataclasses.replace(cfg["base"], precision="fp32", val_size=5000), cfg["distill"]
    n = steps * b0.batch_size
    cpu = torch.device("cpu")
    dist = read_teacher_distances()
    ck = pipeline.schedule(dist, d)
    loaders, _, _ = fast._loaders(b0, n, list(range(K)))
    _, va, _ = pipeline.data_loaders(b0, train_limit=n)
    va_small = va.__class__(va.split, 512, va.transform, limit=512)

    def models():
        ms, rngs, t = [], [], None
        for s in range(K):
            b = dataclasses.replace(b0, seed=s)
            pipeline.setup(b)
            t = load_teacher(b, cfg["teacher"], cpu)
            ms.append(build_cell(t, d, False))
            rngs.append(train._rng_state())
        return ms, rngs, t

    times = {"plain": [], "fast": []}
    for _ in range(repeats):
        ms, rngs, t = models()
        cache = objectives.teacher_cls_cache(t, fast.in_order(loaders[0], 512), cpu)
        obj = objectives.distill(t, ck, d, cache=cache)
        tc = train.TrainConfig(epochs=1, lr=d.lr, weight_decay=d.weight_decay, warmup=d.warmup, clip=d.clip,
                               device="cpu")
        hs = train.fit_many(ms, loaders, [va_small] * K, obj, tc, [None] * K, run_ids=["b"] * K, rngs=rngs)
        times["plain"].append(hs[0][0]["epoch_time_s"] * K)
        ms, _, t = models()
        g = fast.new_group(ms, fast.Optim(d.lr, d.weight_decay, d.warmup, d.clip, 1), len(loaders[0]), cpu)
        trd = fast.Data.of(fast.in_order(loaders[0], 512), cpu)
        fast.fit(g, lambda key: obj, loaders, trd, fast.Data.of(va_small, cpu), [None] * K, cpu, lambda e, b: 0,
                 graphs=False)
        times["fast"].append(g.histories[0][0]["epoch_time_s"] * K)
    from .machine import cpu_model

    return {"machine": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__, "K": K,
            "steps": steps, "batch": b0.batch_size, "plain_s": times["plain"], "fast_s": times["fast"],
            "ratio_fast_over_plain": statistics.median(times["fast"]) / statistics.median(times["plain"]),
            "date": time.strftime("%Y-%m-%d")}


def profile_step(Ks: Sequence[int] = (8, 16, 32), steps: int = 5, device_name: str = "auto") -> pd.DataFrame:
    """One fast-path step of the default distilled cell at K seeds (batch 128 each), on this machine's device: the
    median step time over `steps` steps after warm-up (on CUDA: replayed graphs), images/s, and under
    torch.profiler the kernel launches (CUDA) or operator calls (CPU) of one step."""
    import dataclasses

    import torch
    from torch.profiler import ProfilerActivity, profile

    from . import config, fast, objectives, pipeline, train
    from .study import build_cell, load_teacher, read_teacher_distances

    cfg = config.check_stage("cell")
    b0, d = dataclasses.replace(cfg["base"], precision="fp32"), cfg["distill"]
    dev = fast._device_setup("fp32", device_name)
    ck = pipeline.schedule(read_teacher_distances(), d)
    rows = []
    for K in Ks:
        n = (steps + 4) * b0.batch_size
        loaders, _, _ = fast._loaders(b0, n, list(range(K)))
        ms, t = [], None
        for s in range(K):
            b = dataclasses.replace(b0, seed=s)
            pipeline.setup(b)
            t = load_teacher(b, cfg["teacher"], dev)
            ms.append(build_cell(t, d, False))
        full = fast.in_order(loaders[0], 512)
        cache = objectives.teacher_cls_cache(t, full, dev).to(dev)
        obj = objectives.distill(t, ck, d, cache=cache)
        g = fast.new_group(ms, fast.Optim(d.lr, d.weight_decay, d.warmup, d.clip, 1), len(loaders[0]), dev)
        trd = fast.Data.of(full, dev)
        st = fast.Stepper(g, lambda key: obj, dev, graphs=True)
        plans = [l.indices(0) for l in loaders]
        times = []
        for i in range(steps + 4):
            idx = torch.stack([p[i][0] for p in plans]).to(dev)
            sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
            sync()
            t0 = time.perf_counter()
            if i == steps + 3:  # the last step under the profiler
                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
                with profile(activities=acts) as prof:
                    st.step(0, trd.x[idx], trd.y[idx], idx, 0, d.lr)
                    sync()
                ev = prof.key_averages()
                launches = sum(e.count for e in ev if e.key in ("cudaLaunchKernel", "cudaGraphLaunch",
                                                                "cuLaunchKernel"))
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


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["gpu-record", "cpu", "profile"])
    ap.add_argument("--K", type=int, nargs="*", default=[8, 16, 32])
    a = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    if a.what == "gpu-record":
        t = gpu_record()
        path = os.path.join(OUT, "fast_v2_gpu.md")
        with open(path + ".tmp", "w") as f:
            f.write("# The fast path on the GPU: plan v2's cell groups (from their own histories)\n\n"
                    "`python -m odevit.repro.fast_bench gpu-record`. Each group = one cell's K seeds trained as one "
                    "stacked model, each step a replayed CUDA graph, fp32 without TF32, batch 128 per seed; "
                    "images/s = the training loop's, all K seeds counted (median over epochs).\n\n"
                    + t.to_markdown(index=False) + "\n\n"
                    f"Training images in all: {int((t.img_per_s * t.loop_s).sum()):,} (images/s x loop seconds); "
                    f"training loops {t.loop_s.sum():.0f} s, evaluation {t.eval_s.sum():.0f} s.\n")
        os.replace(path + ".tmp", path)
        print(open(path).read())
    elif a.what == "profile":
        t = profile_step(a.K)
        kind = "gpu" if "CPU" not in t.device.iloc[0] else "cpu"
        path = os.path.join(OUT, f"fast_profile_{kind}.md")
        with open(path + ".tmp", "w") as f:
            f.write(f"# One fast-path step of the default distilled cell at K seeds ({time.strftime('%Y-%m-%d')})\n\n"
                    "`python -m odevit.repro.fast_bench profile`: median of the steps after warm-up (CUDA: replayed "
                    "graphs); launches / aten ops counted under torch.profiler in one more step.\n\n"
                    + t.to_markdown(index=False) + "\n")
        os.replace(path + ".tmp", path)
    else:
        r = cpu_side_by_side()
        with open(os.path.join(OUT, "fast_cpu.json.tmp"), "w") as f:
            json.dump(r, f, indent=2)
        os.replace(os.path.join(OUT, "fast_cpu.json.tmp"), os.path.join(OUT, "fast_cpu.json"))
        print(json.dumps(r, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
