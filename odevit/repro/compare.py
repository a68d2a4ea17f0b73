"""Compare this checkout's results with another run's: did a rerun reproduce the numbers, and the conclusions?

    python -m odevit.repro.compare HEAD                 # a fresh `make quick` here vs the results committed at HEAD
    python -m odevit.repro.compare /path/to/results     # vs another results directory (or a checkout holding results/)
    python -m odevit.repro.compare v1 --this v2         # two git revisions' committed results

Per metric: each study cell's Acc@1 mean over seeds, the teacher's Acc@1 and, where both runs hold a quick-run claims
table (results/07_report/claims.csv, revisions before a408254 removed it), each row's ours_mean, with the difference
in units of the seed std (pooled over the two runs' seeds; the claims' ours_std), then every such claim whose verdict
column (`verdict`, else `resolved`) changed, and whether the two machines promise bit-identical
numbers (odevit.repro.machine.same_kernels on results/run.json). Prints the tables; exit code 0 (a report, not a gate).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pandas as pd

from .machine import same_kernels

FILES = ("cells/*/s*/metrics.json", "02_teacher/metrics.json", "07_report/claims.csv", "run.json")
VERDICTS = ("verdict", "resolved")  # the first present in both claims tables is compared


@dataclass
class Results:
    """The compared part of one run's results/."""
    cells: pd.DataFrame  # cell, seed, acc1
    teacher_acc1: Optional[float]
    claims: pd.DataFrame  # claims.csv (empty when absent)
    run: Dict = field(default_factory=dict)  # run.json (empty when absent)


def _json(path: str) -> Dict:
    with open(path) as f:
        return json.load(f)


def _results_dir(path: str) -> str:
    sub = os.path.join(path, "results")
    return sub if os.path.isdir(os.path.join(sub, "cells")) else path


def load_dir(path: str) -> Results:
    """Read a results directory (or a checkout holding results/)."""
    root = _results_dir(path)
    rows = []
    for p in sorted(glob.glob(os.path.join(root, "cells/*/s*/metrics.json"))):
        m = _json(p)
        rows.append({"cell": m["cell"], "seed": m["seed"], "acc1": m["acc1"]})
    if not rows:
        raise FileNotFoundError(f"{root}/cells/*/s*/metrics.json: no study cells to compare (a results directory, "
                                "a checkout holding results/, or a git revision is expected)")
    teacher = os.path.join(root, "02_teacher/metrics.json")
    claims = os.path.join(root, "07_report/claims.csv")
    run = os.path.join(root, "run.json")
    return Results(pd.DataFrame(rows), _json(teacher)["acc1"] if os.path.isfile(teacher) else None,
                   pd.read_csv(claims) if os.path.isfile(claims) else pd.DataFrame(),
                   _json(run) if os.path.isfile(run) else {})


def load_rev(rev: str, repo: str = ".") -> Results:
    """Read the results committed at git revision `rev` (git show REV:results/...)."""
    git = ["git", "-C", repo]
    try:
        names = subprocess.run(git + ["ls-tree", "-r", "--name-only", rev, "--", "results"], check=True,
                               capture_output=True, text=True).stdout.split()
    except subprocess.CalledProcessError as e:
        raise ValueError(f"OTHER '{rev}' is neither a directory nor a git revision of {repo}: "
                         f"{e.stderr.strip()}") from e
    import fnmatch

    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if any(fnmatch.fnmatch(name, "results/" + pat) for pat in FILES):
                out = os.path.join(tmp, name)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with open(out, "wb") as f:
                    f.write(subprocess.run(git + ["show", f"{rev}:{name}"], check=True, capture_output=True).stdout)
        return load_dir(tmp)


def load(source: str, repo: str = ".") -> Results:
    """A directory if one exists at `source`, else a git revision."""
    return load_dir(source) if os.path.isdir(source) else load_rev(source, repo)


def _pooled(a: pd.Series, b: pd.Series) -> float:
    """Pooled seed std (ddof 1) of two runs' values; NaN with fewer than 2 seeds in both."""
    dof = (len(a) - 1) + (len(b) - 1)
    if dof <= 0:
        return math.nan
    ss = (len(a) - 1) * (a.var(ddof=1) if len(a) > 1 else 0.0) + (len(b) - 1) * (b.var(ddof=1) if len(b) > 1 else 0.0)
    return math.sqrt(ss / dof)


def _units(diff: float, std: float) -> float:
    if diff == 0:
        return 0.0
    return diff / std if std and not math.isnan(std) else math.nan


def metrics(this: Results, other: Results) -> pd.DataFrame:
    """One row per metric in both runs: this, other, diff = this - other, seed std, diff / seed std."""
    rows = []
    for cell in sorted(set(this.cells.cell) & set(other.cells.cell)):
        a = this.cells[this.cells.cell == cell].acc1
        b = other.cells[other.cells.cell == cell].acc1
        std = _pooled(a, b)
        rows.append({"metric": f"cell {cell} Acc@1 (mean of {len(a)} | {len(b)} seeds)", "this": a.mean(),
                     "other": b.mean(), "diff": a.mean() - b.mean(), "seed_std": std,
                     "diff_in_std": _units(a.mean() - b.mean(), std)})
    if this.teacher_acc1 is not None and other.teacher_acc1 is not None:
        d = this.teacher_acc1 - other.teacher_acc1
        rows.append({"metric": "teacher Acc@1 (one run)", "this": this.teacher_acc1, "other": other.teacher_acc1,
                     "diff": d, "seed_std": math.nan, "diff_in_std": _units(d, math.nan)})
    if len(this.claims) and len(other.claims):
        c = this.claims.merge(other.claims, on="claim", suffixes=("_this", "_other"))
        for r in c.itertuples():
            std = math.sqrt((r.ours_std_this ** 2 + r.ours_std_other ** 2) / 2)
            d = r.ours_mean_this - r.ours_mean_other
            rows.append({"metric": f"claim {r.claim} ours_mean", "this": r.ours_mean_this,
                         "other": r.ours_mean_other, "diff": d, "seed_std": std, "diff_in_std": _units(d, std)})
    return pd.DataFrame(rows, columns=["metric", "this", "other", "diff", "seed_std", "diff_in_std"])


def verdicts(this: Results, other: Results) -> pd.DataFrame:
    """Every claim whose verdict column differs between the runs (claim, column, other, this)."""
    cols = ["claim", "column", "other", "this"]
    if not (len(this.claims) and len(other.claims)):
        return pd.DataFrame(columns=cols)
    col = next((v for v in VERDICTS if v in this.claims and v in other.claims), None)
    if col is None:
        return pd.DataFrame(columns=cols)
    c = this.claims[["claim", col]].merge(other.claims[["claim", col]], on="claim", how="outer",
                                          suffixes=("_this", "_other"))
    changed = c[c[f"{col}_this"].astype(str) != c[f"{col}_other"].astype(str)]
    return pd.DataFrame({"claim": changed.claim, "column": col, "other": changed[f"{col}_other"],
                         "this": changed[f"{col}_this"]}, columns=cols).reset_index(drop=True)


def machines(this: Results, other: Results) -> str:
    """What the two runs' machine records promise."""
    a, b = this.run.get("machine_info") or {}, other.run.get("machine_info") or {}
    same = same_kernels(a, b)
    if same is None:
        return "machines: a run.json without machine_info (odevit.repro.machine): cannot tell whether to expect " \
               "bit-identical numbers"
    if same:
        return "machines: same CPU model, instruction set, threads and lock: expect bit-identical numbers"
    diff = [k for k in ("cpu_model", "cpu_capability", "threads", "lock_sha256") if a.get(k) != b.get(k)]
    return f"machines differ in {', '.join(diff)}: expect agreement within seed noise, not bit-identical numbers"


def report(this: Results, other: Results) -> str:
    m, v = metrics(this, other), verdicts(this, other)
    identical = bool(len(m)) and bool((m["diff"] == 0).all())
    lines = [machines(this, other), "",
             m.to_string(index=False, float_format=lambda x: f"{x:.4f}", na_rep="-"), "",
             f"{int((m['diff'] != 0).sum())} of {len(m)} metrics differ"
             + (" (all bit-identical)" if identical else
                f"; largest |diff| in seed std: {m.diff_in_std.abs().max():.2f}" if m.diff_in_std.notna().any()
                else ""),
             "verdicts changed: none" if v.empty else "verdicts changed:\n" + v.to_string(index=False)]
    only = sorted(set(this.cells.cell) ^ set(other.cells.cell))
    if only:
        lines.append(f"cells in one run only (not compared): {', '.join(only)}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("other", help="a results directory, a checkout holding results/, or a git revision")
    ap.add_argument("--this", default="results", help="the run to check (default: ./results)")
    args = ap.parse_args(argv)
    try:
        this, other = load(args.this), load(args.other)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"this: {args.this}   other: {args.other}")
    print(report(this, other))
    return 0


if __name__ == "__main__":
    sys.exit(main())
