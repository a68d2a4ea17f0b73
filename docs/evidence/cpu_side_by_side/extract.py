"""runs.csv and summary.md of the side-by-side CPU runs (run.sh): per run the training loop's seconds (the epochs'
epoch_time_s), the evaluations' and the run's total; per cell the median of each version and AFTER / BEFORE; and
whether the two versions' results agree bit for bit (every metric except timings and provenance).

    python docs/evidence/cpu_side_by_side/extract.py
"""
import glob
import json
import os

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = {"provenance", "source", "timing"}


def main() -> None:
    rows, metrics = [], {}
    for d in sorted(glob.glob(os.path.join(HERE, "raw", "*_*_*"))):
        rnd, version, cell = os.path.basename(d).split("_")
        h = pd.read_csv(os.path.join(d, "history.csv"))
        t = json.load(open(os.path.join(d, "timing.json")))
        m = json.load(open(os.path.join(d, "metrics.json")))
        metrics.setdefault(cell, {})[version] = {k: v for k, v in m.items() if k not in SKIP}
        load = open(os.path.join(d, "load_before.txt")).read().split("load average:")[-1].split(",")[0].strip()
        rows.append(dict(cell=cell, round=int(rnd), version=version, loop_s=round(h.epoch_time_s.sum(), 3),
                         eval_s=round(h.eval_time_s.sum(), 3), total_s=t["total"], img_per_s=round(h.img_per_s.mean(), 1),
                         acc1=m["acc1"], load_1min_before=float(load)))
    runs = pd.DataFrame(rows).sort_values(["cell", "round"])
    runs.to_csv(os.path.join(HERE, "runs.csv"), index=False)
    revs = open(os.path.join(HERE, "raw", "revisions.txt")).read().split()
    mach = json.load(open(os.path.join(HERE, "raw", "machine.json")))
    lines = [f"# CPU side by side: {revs[0]} (before) vs {revs[1]} (after)", "",
             f"{mach.get('cpu_model')}, {mach.get('cpu_count')} cores, torch {mach.get('torch_build')}; quick-run cells, "
             "seed 0, 6,000 images x 2 epochs, rounds alternating A B B A ..., one run at a time (`run.sh`; every run in `runs.csv`).", "",
             "| cell | runs each | loop s before (median, min-max) | loop s after (median, min-max) | after / before (medians) | total s before | total s after | results bit-identical |",
             "|---|---|---|---|---|---|---|---|"]
    for cell, g in runs.groupby("cell"):
        b, a = g[g.version == "before"], g[g.version == "after"]
        same = metrics[cell]["before"] == metrics[cell]["after"]
        lines.append(f"| {cell} | {len(b)} | {b.loop_s.median():.2f} ({b.loop_s.min():.2f}–{b.loop_s.max():.2f}) | "
                     f"{a.loop_s.median():.2f} ({a.loop_s.min():.2f}–{a.loop_s.max():.2f}) | "
                     f"{a.loop_s.median() / b.loop_s.median():.3f} | {b.total_s.median():.1f} | {a.total_s.median():.1f} | "
                     f"{'yes' if same else 'no'} |")
    open(os.path.join(HERE, "summary.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
