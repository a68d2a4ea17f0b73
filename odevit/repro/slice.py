"""Retrain a slice of committed plan-v2 runs on this machine and compare them, epoch by epoch, with the committed ones.

`make repro` ends with this check (issue 55): nothing committed is trained again in full; instead the first few epochs
of a few committed runs are retrained here with the same command the plan's runs used (`odevit.repro.fast`, the same
seeds, schedule and data order) and their validation Acc@1 and training loss are set beside the committed history.
On the machine kind that made the runs (recorded in each run's metrics.json) the two must be identical; on another
machine kind (e.g. this CPU against an H200) they differ by the machine's arithmetic only, and the table says by how
much, beside the binomial SE of one validation accuracy.

    python -m odevit.repro.slice                                   # v2_1k ref and free, seeds 2100 2101, 10 epochs
    python -m odevit.repro.slice --study v2_10k --cells ref_weak --seeds 2300 --epochs 3
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

INTO = "results/slice"  # the retrained slice's files (ignored by git); checkpoints under checkpoints/slice
WALL = "results/repro_time.json"  # `make repro`'s wall time on the machine that last ran it (committed)
COLUMNS = ("val_acc1", "train_loss")


def committed(study: str, cell: str, seed: int, root: str = "results/v2") -> Dict[str, Any]:
    """A committed run's metrics and history; a clear error naming the file where it is missing."""
    d = f"{root}/{study}/{cell}/s{seed}"
    for f in ("metrics.json", "history.csv"):
        if not os.path.exists(f"{d}/{f}"):
            raise FileNotFoundError(f"{d}/{f}: no committed run {study} {cell} seed {seed} to compare with "
                                    f"(`ls {root}/{study}` lists the committed cells)")
    return {"metrics": json.load(open(f"{d}/metrics.json")), "history": pd.read_csv(f"{d}/history.csv")}


def compare(ours: Sequence[Dict[str, float]], theirs: pd.DataFrame, epochs: int) -> pd.DataFrame:
    """Epoch-by-epoch table of the retrained history (`ours`, rows as fast.fit writes them) against the committed
    one: for each column in COLUMNS its committed value, ours, and the difference (ours - committed)."""
    rows = []
    for e in range(min(epochs, len(ours), len(theirs))):
        r: Dict[str, Any] = {"epoch": e + 1}
        for c in COLUMNS:
            a, b = float(theirs[c].iloc[e]), float(ours[e][c])
            r.update({f"{c}_committed": a, f"{c}_here": b, f"{c}_diff": b - a})
        rows.append(r)
    return pd.DataFrame(rows)


def run(plan: str = "plan_v2.yaml", study: str = "v2_1k", cells: Sequence[str] = ("ref", "free"),
        seeds: Sequence[int] = (2100, 2101), epochs: int = 10, params: str = "params.yaml",
        resume: bool = False) -> pd.DataFrame:
    """Retrain `epochs` epochs of `cells` x `seeds` of `study` (one group per cell, the seeds together) into INTO on
    the CPU, and return the comparison table of every run (columns study, cell, seed, epoch, ...)."""
    import torch

    from . import fast
    from .files import write_csv

    if epochs < 1:
        raise ValueError(f"--epochs {epochs}: expected at least 1")
    p = fast.Plan(plan, params)
    if study not in p.plan["studies"]:
        raise ValueError(f"--study {study}: the plan's studies are {sorted(p.plan['studies'])}")
    for c in cells:
        if c not in p.plan["studies"][study]["cells"]:
            raise ValueError(f"--cells {c}: {study}'s cells are {sorted(p.plan['studies'][study]['cells'])}")
    refs = {(c, s): committed(study, c, s) for c in cells for s in seeds}  # every file checked before any training
    ck_root = f"checkpoints/{os.path.basename(INTO)}"
    if not resume:
        for d in (INTO, ck_root):
            shutil.rmtree(d, ignore_errors=True)
    device = fast._device_setup(p.base.precision, "cpu")
    here = fast.device_kind(device)
    tables = []
    for c in cells:
        t0 = time.time()
        print(f"slice: {study} {c} seeds {list(seeds)}: the first {epochs} epochs on {here}", flush=True)
        fast.train_cell(p, study, c, device, False, None, {}, into=INTO, only_seeds=seeds, max_epochs=epochs)
        ck = fast.load_checkpoint(f"{ck_root}/{study}/{c}/last.pt")
        order = [s for s in p.plan["studies"][study]["seeds"] if s in set(seeds)]
        for k, s in enumerate(order):
            t = compare(ck["histories"][k], refs[(c, s)]["history"], epochs)
            made_on = refs[(c, s)]["metrics"].get("provenance", {}).get("device", "?")
            t.insert(0, "seed", s)
            t.insert(0, "cell", c)
            t.insert(0, "study", study)
            t["committed_on"], t["here"] = made_on, here
            tables.append(t)
        print(f"slice: {study} {c} took {time.time() - t0:.0f} s", flush=True)
    out = pd.concat(tables, ignore_index=True)
    write_csv(out, f"{INTO}/compare.csv")
    return out


def summary(t: pd.DataFrame, val_images: int = 5000) -> List[str]:
    """Plain lines: per run, whether the retrained epochs equal the committed ones (same machine kind), else the
    largest difference in validation Acc@1 beside the binomial SE of one validation accuracy."""
    lines = []
    for (study, cell, seed), g in t.groupby(["study", "cell", "seed"], sort=False):
        same = g["committed_on"].iloc[0] == g["here"].iloc[0]
        worst = float(g["val_acc1_diff"].abs().max()) * 100
        p = float(g["val_acc1_committed"].iloc[-1])
        se = 100 * math.sqrt(max(p * (1 - p), 1e-12) / val_images)
        identical = bool((g["val_acc1_diff"] == 0).all() and (g["train_loss_diff"] == 0).all())
        head = f"{study} {cell} s{seed}, epochs 1-{len(g)}: "
        if same:
            lines.append(head + ("identical to the committed run (same machine kind: "
                                 f"{g['here'].iloc[0]})" if identical else
                                 f"NOT identical on the same machine kind ({g['here'].iloc[0]}): largest val Acc@1 "
                                 f"difference {worst:.2f} pt"))
        else:
            rel = float((g["train_loss_diff"].abs() / g["train_loss_committed"].abs()).max())
            lines.append(head + f"committed on {g['committed_on'].iloc[0]}, retrained on {g['here'].iloc[0]}: "
                         f"largest val Acc@1 difference {worst:.2f} pt (one val accuracy's binomial SE {se:.2f} pt), "
                         f"training loss within a relative {rel:.1e} (another machine's arithmetic: equal bits are "
                         "not expected)")
    return lines


def record_wall(t0: float, path: str = WALL) -> Dict[str, Any]:
    """`make repro`'s wall time since `t0` (epoch seconds) with this machine's facts, written atomically."""
    from .machine import machine_info
    from .files import write_json

    rec = {"wall_s": round(time.time() - t0, 1), "date": time.strftime("%Y-%m-%d", time.gmtime()),
           "machine_info": machine_info(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2)}
    write_json(rec, path)
    return rec


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Retrain the first epochs of committed plan-v2 runs and compare them")
    ap.add_argument("--plan", default="plan_v2.yaml")
    ap.add_argument("--study", default="v2_1k")
    ap.add_argument("--cells", nargs="+", default=["ref", "free"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[2100, 2101])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--resume", action="store_true", help="continue the slice's own last.pt instead of starting over")
    ap.add_argument("--record-wall", type=float, default=None, metavar="T0",
                    help="only write results/repro_time.json: the wall since T0 (`date +%%s` at make repro's start)")
    a = ap.parse_args(argv)
    if a.record_wall is not None:
        rec = record_wall(a.record_wall)
        print(f"make repro: {rec['wall_s'] / 60:.1f} min on {rec['machine_info'].get('cpu_model')} "
              f"({rec['machine_info'].get('cpu_count')} cores); {WALL}")
        return 0
    from .fast import ResumeError

    try:
        t = run(a.plan, a.study, a.cells, a.seeds, a.epochs, resume=a.resume)
    except (ValueError, ResumeError) as e:  # a bad argument or (--resume) a last.pt of another run: one line
        print(f"slice: {e}", file=sys.stderr)
        return 2
    cols = ["cell", "seed", "epoch", "val_acc1_committed", "val_acc1_here", "val_acc1_diff", "train_loss_diff"]
    with pd.option_context("display.width", 160, "display.max_rows", 200):
        print(t[cols].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    for line in summary(t):
        print(line)
    print(f"slice: table in {INTO}/compare.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
