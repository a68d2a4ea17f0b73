"""The exploratory studies' generated sections (docs/exploratory.md: the converged study, the budget curve, the
float noise), each filled into its template (docs/templates/NAME.md.j2) from its snapshot under docs/evidence/."""
from __future__ import annotations

import math
import os
from typing import Callable, Dict, List

import pandas as pd

from . import stats
from .evidence import BUDGETS, EVIDENCE, STRONG_TEACHER, progress
from .report import summary_line, to_markdown
from .results_pages import claims_table, cpu
from .results import collect
from .wording import fill, read_json, read_yaml

CONVERGED = f"{EVIDENCE}/converged_fmnist"


def converged_study(root: str = ".") -> str:
    """The converged study (docs/evidence/converged_fmnist, written by `odevit.repro.evidence snapshot`): its
    claims table once every run and stage is in; until then the runs finished so far and their validation curves."""
    path = os.path.join(root, CONVERGED)
    if not os.path.isfile(os.path.join(path, "study.json")):
        return fill("converged-study", meta=None)
    meta = read_json(os.path.join(path, "study.json"))
    params = read_yaml(os.path.join(path, "params.yaml")) if os.path.isfile(os.path.join(path, "params.yaml")) else {}
    page = dict(meta=meta, here=CONVERGED, cpu=cpu(meta["machine"]), progress=to_markdown(progress(path).fillna("–")),
                limit=(params.get("study") or {}).get("robustness_test_limit"),
                test=(params.get("base") or {}).get("test_limit"))
    if not meta["complete"]:
        return fill("converged-study", **page)
    c = pd.read_csv(os.path.join(path, "results/07_report/claims.csv"))
    best = collect(os.path.join(path, "results")).groupby("cell").acc1.mean()
    return fill("converged-study", **page, counts=summary_line(c), skipped=int((c.verdict == stats.NOT_MEASURED).sum()),
                t=read_json(os.path.join(path, "results/02_teacher/metrics.json"))["acc1"],
                students=best.drop("free", errors="ignore"), free=best.get("free", math.nan),
                table=claims_table(path, measured_only=True),
                figure=os.path.isfile(os.path.join(path, "results/07_report/claims.png")))


def budget_curve(root: str = ".") -> str:
    """The budget curve (docs/evidence/budget_curve.csv, `python -m odevit.repro.evidence budget`): student − free
    ODE at each training-set size and teacher setup, with intervals and verdicts, and its figure. A point whose free
    runs are another study's (`free_from`) is marked †, ‡... with that study named under the table."""
    path = os.path.join(root, EVIDENCE, "budget_curve.csv")
    if not os.path.isfile(path):
        return fill("budget-curve", rows=None)
    t = pd.read_csv(path)
    t = t.assign(**{k: v for k, v in dict(schedule="–", tau=math.nan, degenerate=False, replication=math.nan,
                                            free_from=math.nan).items() if k not in t})
    borrowed: Dict[str, str] = {}
    marks = [borrowed.setdefault(r.free_from, "†" * (len(borrowed) + 1))
             if isinstance(r.free_from, str) and r.free_from != r.study else "" for r in t.itertuples()]
    absent = [f"`{n}`" + (" (snapshotted, no pair finished yet)" if os.path.isfile(os.path.join(root, EVIDENCE, n,
              "study.json")) else "") for n in BUDGETS + STRONG_TEACHER if n not in set(t.study)]
    return fill("budget-curve", rows=list(zip(t.itertuples(), marks)), teacher=_teacher, borrowed=borrowed,
                evidence=EVIDENCE, absent=absent, rules=stopping_rules(t, root), reading=budget_reading(t),
                strength=teacher_strength(root))


def stopping_rules(t: pd.DataFrame, root: str = ".") -> str:
    """The stopping rule of each budget-curve point, read from its snapshots' params.yaml (distill.epochs: the cap;
    distill.patience; distill.min_delta_pts), one entry per training-set size (per study where they differ); '' when
    no snapshot's params.yaml is there."""
    by_size: Dict[int, Dict[tuple, List[str]]] = {}
    for study, n in t.groupby("study", sort=False).train_images.first().items():
        path = os.path.join(root, EVIDENCE, study, "params.yaml")
        if os.path.isfile(path):
            d = read_yaml(path)["distill"]
            rule = (d["epochs"], d["patience"], d["min_delta_pts"])
            by_size.setdefault(int(n), {}).setdefault(rule, []).append(study)
    deltas = sorted({r[2] for rules in by_size.values() for r in rules})
    entries = [(n, studies if len(rules) > 1 else [], *rule) for n, rules in sorted(by_size.items())
               for rule, studies in rules.items()]
    return fill("stopping-rules", deltas=deltas, entries=entries) if deltas else ""


def teacher_strength(root: str = ".") -> str:
    """The stronger teacher's students against the default teacher's, same seeds, budget and student rule
    (docs/evidence/teacher_strength.csv, `evidence.teacher_strength`); '' before it exists."""
    path = os.path.join(root, EVIDENCE, "teacher_strength.csv")
    return "\n\n" + fill("teacher-strength", t=pd.read_csv(path), evidence=EVIDENCE) if os.path.isfile(path) else ""


def _teacher(r) -> str:
    """'default (86.98, 3 ep, not converged)': a budget-curve row's teacher, its test Acc@1, epochs, convergence."""
    acc, ep, conv = (getattr(r, k, math.nan) for k in ("teacher_acc1", "teacher_epochs", "teacher_converged"))
    bits = ([] if pd.isna(acc) else [f"{acc:.2f}"]) + ([] if pd.isna(ep) else [f"{int(ep)} ep"]) + (
        [] if pd.isna(conv) else ["converged" if str(conv) == "True" else "not converged"])
    return getattr(r, "teacher", "default") + (f" ({', '.join(bits)})" if bits else "")


def budget_reading(t: pd.DataFrame) -> str:
    """What the budget curve shows, from its verdicts: per teacher setup and student, each budget's difference and
    what its verdict says (helps = supports, hurts = contradicts, no verdict), and between which budgets the teacher
    stops helping when a budget where it helps is followed by a larger one where it hurts."""
    lines = []
    who = t["setup"] if "setup" in t else (t["teacher"] if "teacher" in t else pd.Series("default", index=t.index))
    for (su, student), g in t.groupby([who, "student"], sort=False):
        g = g.sort_values("train_images")
        n, d = list(g.train_images), list(g.diff_mean)
        word = [{"supports": "helps", "contradicts": "hurts"}.get(v, "no verdict") for v in g.verdict]
        helps = [x for x, w in zip(n, word) if w == "helps"]
        hurts = [x for x, w in zip(n, word) if w == "hurts" and helps and x > max(helps)]
        flip = [(a, b) for a, b, x, y in zip(n, n[1:], d, d[1:]) if x > 0 > y]
        kind, _, rest = su.replace("tau", "τ").partition(", ")
        lines.append((kind, rest, student, list(zip(n, d, word)), helps and hurts and (max(helps), min(hurts)),
                      flip[0] if flip and len(g) > 2 else None))
    return fill("budget-reading", lines=lines)


FLOAT_NOISE = f"{EVIDENCE}/emulated_cpu"  # `evidence snapshot emulated_cpu` + `evidence replicate emulated_cpu`


def float_noise(root: str = ".") -> str:
    """The default run's headline cells rerun on an emulated other CPU type (docs/evidence/emulated_cpu): how far each
    run moved against the seed spread, and which verdicts flipped by the intervals alone and by the replication rule."""
    path = os.path.join(root, FLOAT_NOISE)
    if not os.path.isfile(os.path.join(path, "replicate_claims.csv")):
        return fill("float-noise", meta=None)
    runs, cells = (pd.read_csv(os.path.join(path, f"replicate_{k}.csv")) for k in ("runs", "cells"))
    claims = pd.read_csv(os.path.join(path, "replicate_claims.csv"))
    decided = claims[~claims.primary_intervals.isin([stats.FACT, stats.NOT_A_CLAIM])]
    decisive = lambda col: decided[col].isin([stats.SUPPORTS, stats.CONTRADICTS])  # noqa: E731
    meta = read_json(os.path.join(path, "study.json"))
    return fill("float-noise", meta=meta, cpu=cpu(meta["machine"]), runs=runs, cells=cells, decided=decided,
                t=runs[runs.cell == "teacher"].iloc[0],
                per_seed={c: "/".join(f"{d:+.2f}" for d in g.sort_values("seed").diff_pt)
                          for c, g in runs.groupby("cell")},
                seeds="/".join(str(x) for x in sorted(runs[runs.cell != "teacher"].seed.unique())),
                flips=dict(intervals=int(decided.flips_intervals.sum()), rule=int(decided.flips_rule.sum()),
                           intervals_decisive=int((decided.flips_intervals & decisive("primary_intervals")).sum()),
                           rule_decisive=int((decided.flips_rule & decisive("primary_rule")).sum())))

SECTIONS: Dict[str, Callable[[str], str]] = {
    "converged-study": converged_study, "budget-curve": budget_curve, "float-noise": float_noise}
