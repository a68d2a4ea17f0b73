"""Verdicts of the plan's questions, computed from the plan (plan.yaml) and the runs the pipeline made — never typed.

    python -m odevit.repro.verdicts      # results/evidence/{claims.csv, claims.md, runs.csv, power.csv,
                                         #   machine_shift.csv, run_time.csv, verdicts.png, teacher_by_images.png}

For each study of the plan and each of its questions: the per-seed statistic over the plan's seeds (paired by seed),
its mean, SD and interval at the question's level (alpha / the family's fixed size), and the verdict of its test
(plan.yaml `rules.verdict`). A row says
  *not measured*   no run of its cells yet;            *incomplete*     fewer seeds finished than the plan fixes;
  *not converged*  a run failed the plan's rule (the best validation Acc@1 of the last `window_frac` of epochs beat
                   the best before by >= `se_multiple` standard errors of the validation set); in a study with
                   `convergence: cell_mean`, a cell's runs failed it on average (`row_converged`);
  *mixed machines* a confirmatory row's runs did their arithmetic on more than one device (a GPU model, or the CPU
                   model without one): plan.yaml `rules.machine` makes a study's runs on one machine type;
  *mixed teachers* a cell's runs distilled from different trainings of their teacher (metrics.json `teacher_sha256`);
  and *post hoc* beside its verdict when a run was trained under another version of its study's plan (its recorded
  plan hash differs from the plan's now).
A question with `exploratory: DIR` also gets a row computed by the same code from the committed exploratory runs of
DIR (results made before the plan, judged here under it, labelled exploratory: their rules were chosen after them).
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import sys
import textwrap
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pandas as pd
from scipy import stats as st

from . import files
from .report import VERDICT_COLORS, verdict_color
from . import plan as plan_mod
from .plan2 import images as study_images

SUPPORTS, CONTRADICTS, INCONCLUSIVE = "supports", "contradicts", "inconclusive"
NOT_MEASURED, INCOMPLETE, NOT_CONVERGED = "not measured", "incomplete", "not converged"
MIXED_MACHINES, MIXED_TEACHERS = "mixed machines", "mixed teachers"
COLORS = {**VERDICT_COLORS, INCOMPLETE: "#bdbdbd"}  # every figure's verdict colours (report.VERDICT_COLORS)


def color(verdict: str) -> str:
    """A plan verdict's colour, as every other figure colours it ('inconclusive' as 'inconclusive at this budget')."""
    return COLORS.get(str(verdict)) or verdict_color(str(verdict))


def devices(machine: str) -> List[str]:
    """The devices a run's arithmetic ran on, from runs.csv's `machine` (its provenance machines 'CPU model / GPU
    name' joined by '; ', one per machine the run was resumed on): the GPU, or the CPU model where it had none."""
    out = []
    for m in (machine if isinstance(machine, str) else "").split("; "):  # NaN: a CSV's empty cell
        cpu, _, gpu = m.partition(" / ")
        if m:
            out.append(cpu if gpu in ("", "no GPU") else gpu)
    return sorted(set(out))


def val_se_pts(acc: float, n: int) -> float:
    """Binomial standard error of an accuracy `acc` (fraction) measured on n images, in points."""
    return 100.0 * math.sqrt(max(acc * (1 - acc), 0.0) / n) if n > 0 else math.nan


def convergence(val_acc: List[float], val_images: int, window_frac: float, se_multiple: float
                ) -> Tuple[bool, float, float]:
    """(converged, gain, threshold) of one run under the plan's rule: gain = best validation Acc@1 of the last
    ceil(window_frac x epochs) epochs minus the best before them (points); threshold = se_multiple x the validation
    SE at the run's best accuracy. Fewer than 2 epochs: not judgeable, (False, nan, threshold)."""
    k = max(1, math.ceil(window_frac * len(val_acc)))
    thr = se_multiple * val_se_pts(max(val_acc) if val_acc else math.nan, val_images)
    if len(val_acc) < k + 1:
        return False, math.nan, thr
    gain = 100.0 * (max(val_acc[-k:]) - max(val_acc[:-k]))
    return bool(gain < thr), gain, thr


def collect(results: str, study: Optional[str], rule: Dict[str, Any]) -> pd.DataFrame:
    """One row per finished run: results/studies/STUDY/CELL/sSEED (study given) or an exploratory snapshot's
    results/cells/CELL/sSEED (study None), with the plan rule's convergence from its history.csv (an exploratory
    run: the `converged` its metrics.json recorded under the rule it ran with; gain and threshold still the plan's)."""
    pattern = f"{results}/studies/{study}/*/s*/metrics.json" if study else f"{results}/cells/*/s*/metrics.json"
    rows = []
    for path in sorted(glob.glob(pattern)):
        m = files.read_json(path)
        hist = pd.read_csv(os.path.join(os.path.dirname(path), "history.csv"))
        conv, gain, thr = convergence(hist["val_acc1"].tolist(), int(m.get("val_images") or 0),
                                      rule["window_frac"], rule["se_multiple"])
        if study is None:  # an exploratory run was early-stopped, not a whole schedule: its own recorded rule
            conv = bool(m.get("converged"))
        prov = m.get("provenance") or {}
        procs = prov.get("processes") or []
        rows.append(dict(cell=m["cell"], seed=int(m["seed"]), acc1=100 * m["acc1"],
                         acc1_half_n=100 * m["acc1_half_n"], acc1_sub_n=100 * m["acc1_sub_n"],
                         acc1_double_n=100 * m["acc1_double_n"], epochs_run=m.get("epochs_run"),
                         best_epoch=m.get("best_epoch"), stopped_early=m.get("stopped_early"),
                         converged=conv, gain_last_pts=gain, threshold_pts=thr, plan_hash=m.get("plan_hash"),
                         machine="; ".join(prov.get("machines") or []), teacher_sha256=m.get("teacher_sha256"),
                         torch=", ".join(sorted({p["torch"] for p in procs if p.get("torch")})) or "unknown",
                         source_hash=m.get("source") or "unknown",
                         wall_s=prov.get("wall_s"),
                         cpu_s=prov.get("cpu_s"), resumes=prov.get("resumes"),
                         load_per_core=np.mean(loads) if (loads := [p["load_per_core_mean"] for p in procs
                                                                     if "load_per_core_mean" in p]) else math.nan,
                         source=path))
    return pd.DataFrame(rows, columns=RUN_COLUMNS)


RUN_COLUMNS = ["cell", "seed", "acc1", "acc1_half_n", "acc1_sub_n", "acc1_double_n", "epochs_run", "best_epoch",
               "stopped_early", "converged", "gain_last_pts", "threshold_pts", "plan_hash", "machine", "torch",
               "teacher_sha256", "source_hash", "wall_s", "cpu_s", "resumes", "load_per_core", "source"]


def values(q: Dict[str, Any], runs: pd.DataFrame, seeds: List[int], teacher_acc1: float) -> pd.Series:
    """The question's statistic per seed (index = seed), over the plan's seeds that have every run it needs."""
    if runs.empty:
        return pd.Series(dtype=float)
    by = runs[runs.seed.isin(seeds)].set_index(["cell", "seed"])
    a = by.loc[q["a"]][q["metric"]] if q["a"] in by.index.get_level_values(0) else pd.Series(dtype=float)
    if q["kind"] == "paired":
        b = by.loc[q["b"]][q["metric"]] if q["b"] in by.index.get_level_values(0) else pd.Series(dtype=float)
        out = (a - b).dropna()
    elif q["kind"] == "within":
        out = a - by.loc[q["a"]][q["metric_b"]]
    else:  # teacher_gap
        out = a - teacher_acc1
    return out.sort_index()


def decide(x: np.ndarray, q: Dict[str, Any], alpha: float) -> Dict[str, Any]:
    """Mean, SD, the (1 - alpha) interval and the test's verdict (plan.yaml rules.verdict) of per-seed values x."""
    n = len(x)
    out = dict(n=n, mean=float(np.mean(x)) if n else math.nan, sd=float(np.std(x, ddof=1)) if n > 1 else math.nan,
               ci_low=math.nan, ci_high=math.nan, verdict=INCONCLUSIVE)
    if n < 2:
        return out
    se = out["sd"] / math.sqrt(n)
    half = float(st.t.ppf(1 - alpha / 2, n - 1)) * se
    lo, hi = out["mean"] - half, out["mean"] + half
    out.update(ci_low=lo, ci_high=hi)
    null, m = float(q.get("null") or 0.0), float(q.get("margin") or 0.0)
    sign = 1.0 if q["direction"] == "greater" else -1.0
    if q["test"] == "superiority":
        if (lo > null if sign > 0 else hi < null):
            out["verdict"] = SUPPORTS
        elif (hi < null if sign > 0 else lo > null):
            out["verdict"] = CONTRADICTS
    elif q["test"] == "non_inferiority":
        edge = null - sign * m
        if (lo > edge if sign > 0 else hi < edge):
            out["verdict"] = SUPPORTS
        elif (hi < edge if sign > 0 else lo > edge):
            out["verdict"] = CONTRADICTS
    else:  # equivalence: TOST at alpha = the (1 - 2 alpha) interval inside null +- m
        h90 = float(st.t.ppf(1 - alpha, n - 1)) * se
        if null - m < out["mean"] - h90 and out["mean"] + h90 < null + m:
            out["verdict"] = SUPPORTS
        elif lo > null + m or hi < null - m:
            out["verdict"] = CONTRADICTS
    return out


def judge(plan: Dict[str, Any], name: str, results: str = "results", teacher_acc1: Optional[float] = None,
          runs: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """The confirmatory (or the study's own status) rows of one study, plus an exploratory row per question that
    names an exploratory results folder. `runs`: the study's `collect` if already read."""
    s, rule = plan["studies"][name], plan["rules"]["convergence"]
    alpha, want = plan_mod.family_alpha(plan, name), plan_mod.study_hash(plan, name)
    if teacher_acc1 is None:
        teacher_acc1 = _teacher_acc1(results)
    if runs is None:
        runs = collect(results, name, rule)
    # a run counts only where it trained its study's whole schedule (its metrics.json is written at the end of it; a
    # run that records fewer epochs is not this budget's run): its seed is then missing, the row incomplete
    runs = runs[runs.epochs_run == s["budget"]["epochs"]]
    explored: Dict[str, Tuple[pd.DataFrame, float]] = {}  # an exploratory folder is read once per study
    rows = []
    for q in s["questions"]:
        rows.append(_row(plan, name, q, runs, s["seeds"], teacher_acc1, alpha, want, s["status"], results))
        ex = q.get("exploratory")
        if ex:
            if ex not in explored:
                explored[ex] = (collect(ex, None, rule), _teacher_acc1(ex))
            ex_runs, ex_teacher = explored[ex]
            ex_seeds = sorted(ex_runs.seed.unique().tolist()) if not ex_runs.empty else []
            rows.append(_row(plan, name, q, ex_runs, ex_seeds, ex_teacher, alpha, None, "exploratory", ex))
    return pd.DataFrame(rows)


def row_converged(used: pd.DataFrame, level: str = "run") -> bool:
    """Whether a row's runs pass the plan's convergence rule at the study's level (plan.CONVERGENCE_LEVELS): `run` =
    every run converged; `cell_mean` = in each cell the runs' mean last-quarter gain, a loss counted as no gain
    (max(gain, 0): runs that fell cannot hide runs still learning), is below their mean threshold (a run without a
    gain or threshold, under 2 epochs, fails its cell). Exploratory rows are judged per run (their recorded rule)."""
    if level == "run":
        return bool(used.converged.all())
    return all(g.gain_last_pts.notna().all() and g.threshold_pts.notna().all()
               and g.gain_last_pts.clip(lower=0).mean() < g.threshold_pts.mean() for _, g in used.groupby("cell"))


def mixed_runs(used: pd.DataFrame) -> Optional[str]:
    """Why a confirmatory row's runs cannot be compared as the plan's (a label, no verdict), or None: they did their
    arithmetic on more than one device (`devices`; plan.yaml rules.machine: one machine type per study; another
    machine type is a replicate, `machine_shift`), or a cell's runs distilled from different trainings of their
    teacher (`teacher_sha256`; none recorded, the default teacher, counts as one)."""
    devs = sorted({d for m in used.machine for d in devices(m)})
    teachers = used.teacher_sha256.fillna("")  # none recorded (None or NaN): the default teacher
    if len(devs) > 1:
        return f"{MIXED_MACHINES} ({len(devs)} devices: {', '.join(devs)})"
    for cell, g in teachers.groupby(used.cell):
        if g.nunique() > 1:
            return f"{MIXED_TEACHERS} (cell {cell}: {g.nunique()} teachers)"
    return None


def _teacher_acc1(results: str) -> float:
    path = os.path.join(results, "02_teacher/metrics.json")
    return 100 * files.read_json(path)["acc1"] if os.path.isfile(path) else math.nan


def _row(plan: Dict[str, Any], name: str, q: Dict[str, Any], runs: pd.DataFrame, seeds: List[int],
         teacher_acc1: float, alpha: float, want: Optional[str], status: str, source: str) -> Dict[str, Any]:
    s = plan["studies"][name]
    x = values(q, runs, seeds, teacher_acc1)
    needed = [q["a"]] + ([q["b"]] if q["kind"] == "paired" else [])
    used = runs[runs.cell.isin(needed) & runs.seed.isin(x.index)] if not runs.empty else runs
    e = decide(x.to_numpy(dtype=np.float64), q, alpha)
    planned = len(seeds)
    if e["n"] == 0:
        verdict = NOT_MEASURED
    elif e["n"] < planned:
        verdict = f"{INCOMPLETE} ({e['n']} of {planned} seeds)"
    elif status != "exploratory" and (mixed := mixed_runs(used)):
        verdict = mixed
    elif not row_converged(used, s.get("convergence", "run") if status != "exploratory" else "run"):
        verdict = NOT_CONVERGED
    else:
        verdict = e["verdict"]
    post_hoc = bool(want is not None and not used.empty and (used.plan_hash != want).any())
    paper = q.get("paper") or {}
    return dict(study=name, family=s["family"], status=status, question=q["id"], claim=q["claim"], test=q["test"],
                direction=q["direction"], margin=q.get("margin"), alpha_each=alpha, unit=q["unit"],
                seeds=",".join(str(v) for v in x.index), n=e["n"], planned=planned, mean=e["mean"], sd=e["sd"],
                ci_low=e["ci_low"], ci_high=e["ci_high"], converged=f"{int(used.converged.sum())}/{len(used)}",
                verdict=verdict + (" (post hoc)" if post_hoc and e["n"] else ""), post_hoc=post_hoc,
                paper_effect=paper.get("effect"), paper_source=paper.get("source"),
                budget=f"{study_images(s)} images x {s['budget']['epochs']} epochs (whole schedule)"
                if status != "exploratory" else "exploratory: early-stopped (patience), converged by its own recorded rule; rules chosen after the runs",
                plan_hash=want or "", source=source)


SHIFT_COLUMNS = ["replicate", "study", "kind", "name", "n", "seeds", "shift_mean", "shift_sd", "ci_low", "ci_high",
                 "shift_sd_upper", "shift_max_abs", "identical", "sd_here", "machine_here", "machine_replicate",
                 "source_here", "source_replicate"]


def _shift_row(d: np.ndarray, seeds: List[int], spread: np.ndarray, **keys: Any) -> Dict[str, Any]:
    """One machine_shift row: per-seed shifts d (replicate - here) summarised, with the SD of the same quantity over
    the study's seeds here (`spread`) as its scale."""
    n = len(d)
    sd = float(d.std(ddof=1)) if n > 1 else math.nan
    half = float(st.t.ppf(0.975, n - 1)) * sd / math.sqrt(n) if n > 1 else math.nan
    upper = sd * math.sqrt((n - 1) / float(st.chi2.ppf(0.025, n - 1))) if n > 1 else math.nan  # 95 % interval's top
    return dict(keys, n=n, seeds=" ".join(str(x) for x in sorted(seeds)), shift_mean=float(d.mean()), shift_sd=sd,
                ci_low=float(d.mean()) - half, ci_high=float(d.mean()) + half, shift_sd_upper=upper,
                shift_max_abs=float(np.abs(d).max()), identical=int((d == 0).sum()),
                sd_here=float(spread.std(ddof=1)) if len(spread) > 1 else math.nan)


def _environment(runs: pd.DataFrame) -> str:
    """The machines of some runs with their torch versions (the replicate's environment differs in both)."""
    return "; ".join(sorted(runs.machine.unique())) + " (torch " + ", ".join(sorted(runs.torch.unique())) + ")"


def machine_shift(plan: Dict[str, Any], results: str = "results",
                  collected: Optional[Dict[str, pd.DataFrame]] = None) -> pd.DataFrame:
    """The machine as a measured variance component: each replicate (plan.yaml `replicates`: the same study, cells,
    seeds and odevit code re-run on another machine type, its results folder) against the study's runs here, seed by
    seed, in Acc@1 points (replicate - here). Rows of kind `cell`: each replicated cell's test Acc@1; rows of kind
    `question`: the per-seed statistic of each of the study's paired or within-cell questions whose cells were all
    replicated (what a verdict rests on: a shift common to both cells cancels there). Per row: n seeds paired, the
    shift's mean, SD and 95 % t-interval, the top of the SD's 95 % interval (chi-square: what n seeds cannot rule
    out), the largest |shift|, how many seeds gave the identical value, `sd_here` (the same quantity's SD over all the
    study's seeds here: the scale; a machine that changed each run as much as a new seed would give a shift SD of about
    sqrt(2) x it), the machines with their torch versions and the training sources (metrics.json `source`) of each
    side's runs. `collected`: the studies' runs here as `collect` gave them (main's), else read from `results`."""
    rule = plan["rules"]["convergence"]
    rows = []
    for rep in plan.get("replicates") or []:
        study = plan["studies"][rep["study"]]
        here = collected[rep["study"]] if collected is not None else collect(results, rep["study"], rule)
        there = collect(rep["results"], rep["study"], rule)
        if here.empty or there.empty:
            continue
        m = here.merge(there, on=["cell", "seed"], suffixes=("", "_rep"))
        h, t = here[here.cell.isin(m.cell) & here.seed.isin(m.seed)], there[there.cell.isin(m.cell)]
        env = dict(machine_here=_environment(h), machine_replicate=_environment(t),
                   source_here=" ".join(sorted(h.source_hash.unique())),
                   source_replicate=" ".join(sorted(t.source_hash.unique())))
        for cell, g in m.groupby("cell"):
            rows.append(_shift_row((g.acc1_rep - g.acc1).to_numpy(dtype=np.float64), list(g.seed),
                                   here.acc1[here.cell == cell].to_numpy(dtype=np.float64), replicate=rep["results"],
                                   study=rep["study"], kind="cell", name=cell, **env))
        for q in study["questions"]:
            if q["kind"] not in ("paired", "within") or not {q["a"], q.get("b", q["a"])} <= set(there.cell):
                continue
            a, b = (values(q, r, list(study["seeds"]), math.nan) for r in (here, there))
            common = a.index.intersection(b.index)
            if len(common):
                rows.append(_shift_row((b[common] - a[common]).to_numpy(dtype=np.float64), list(common),
                                       a.to_numpy(dtype=np.float64), replicate=rep["results"], study=rep["study"],
                                       kind="question", name=f"{q['id']} ({q['a']} − {q['b']})" if q["kind"] == "paired"
                                       else f"{q['id']} ({q['a']}: {q['metric']} − {q['metric_b']})", **env))
    return pd.DataFrame(rows, columns=SHIFT_COLUMNS)


def _busy_wall_seconds(spans: List[Tuple[float, float]]) -> float:
    """Seconds covered by the union of [start, end] spans: the time at least one of them ran."""
    total, end = 0.0, -math.inf
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def with_power(claims: pd.DataFrame, power: pd.DataFrame) -> pd.DataFrame:
    """`claims` with the power the plan gave each confirmatory row's seeds (`power`: plan.power_table):
    `power_paper` at the paper's effect, `power_pilot` at the pilot's (or the effect of interest the question names);
    NaN on exploratory rows, whose seeds no power calculation chose. Placed after `planned`."""
    keep = ["power_paper", "power_pilot"]
    out = claims.merge(power[["study", "id"] + keep].rename(columns={"id": "question"}), on=["study", "question"],
                       how="left")
    out.loc[out.status == "exploratory", keep] = math.nan
    i = list(claims.columns).index("planned") + 1
    return out[list(claims.columns[:i]) + keep + list(claims.columns[i:])]


def _ended(p: Dict[str, Any]) -> float:
    """A process record's end (epoch s): `ended`, or for a process stopped before it could write one, its start plus
    the wall seconds of its last heartbeat. Its span is then [end - wall_s, end]: wall_s counts its start-up too."""
    if p.get("ended"):
        return pd.Timestamp(p["ended"]).timestamp()
    return pd.Timestamp(p["started"]).timestamp() + float(p["wall_s"])


def run_time(plan: Dict[str, Any], results: str = "results") -> pd.DataFrame:
    """Where and how fast each study's runs trained, from their metrics.json provenance. Per study and machine (a
    run's machines joined, as runs.csv's `machine`), then per machine over every study (study "all": studies that
    shared a machine at once are counted once): the finished runs; their processes (one per run, or one per cell's
    seeds trained together: `--together`); the largest number trained in one process; the training images
    (train_images x epochs_run, summed over runs); `busy_wall_s`, the union of the processes' [end - wall_s, end] (wall_s
    counts a process's start-up, before its record's `started`) — the seconds at least one of them ran, the gaps
    between sittings left out; `process_s`, the processes' wall summed; and
    images/s over busy_wall_s (evaluation and start-up included). `unrecorded`: processes stopped before their first
    heartbeat, whose seconds no file holds (left out of busy_wall_s and process_s, so images/s is then an upper bound).
    A study's own teacher is not counted."""
    groups: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for study in plan["studies"]:
        for path in sorted(glob.glob(f"{results}/studies/{study}/*/s*/metrics.json")):
            m = files.read_json(path)
            prov = m.get("provenance") or {}
            machine = "; ".join(prov.get("machines") or []) or "unknown"
            for key in ((study, machine), ("all", machine)):
                g = groups.setdefault(key, dict(runs=0, images=0, procs={}, together=1))
                g["runs"] += 1
                g["images"] += int(m.get("train_images") or 0) * int(m.get("epochs_run") or 0)
                g["together"] = max(g["together"], len(m.get("trained_together") or []) or 1)
                for p in prov.get("processes") or []:  # seeds trained together share one process: counted once
                    g["procs"][(p.get("host"), p.get("pid"), p.get("started"))] = p
    rows = []
    for (study, machine), g in sorted(groups.items(), key=lambda kv: kv[0][0] == "all"):
        procs = list(g["procs"].values())
        spans = [(e - float(p["wall_s"]), e) for p in procs if p.get("started") and p.get("wall_s") is not None
                 for e in [_ended(p)]]
        busy = _busy_wall_seconds(spans)
        rows.append(dict(study=study, machine=machine, runs=g["runs"], processes=len(procs),
                         unrecorded=len(procs) - len(spans), together_max=g["together"], train_images=g["images"],
                         busy_wall_s=round(busy, 1), process_s=round(sum(float(p.get("wall_s") or 0.0) for p in procs), 1),
                         img_per_s=round(g["images"] / busy) if busy > 0 else math.nan))
    return pd.DataFrame(rows, columns=["study", "machine", "runs", "processes", "unrecorded", "together_max",
                                       "train_images", "busy_wall_s", "process_s", "img_per_s"])


FIGURE_LAYOUT = os.path.join(os.path.dirname(__file__), "plan1_figure.yaml")  # panels, plain labels: data


def predicted_side(test: str, direction: str, margin: float) -> Tuple[str, float, float]:
    """What the paper predicts for a row, in words, and as the x range it covers: superiority '> 0' (or '< 0' for a
    'less' row such as r1_minus_r4), non-inferiority '> -margin', equivalence 'within ±margin'."""
    m = float(margin) if margin == margin and margin is not None else 0.0
    if test == "equivalence":
        return f"within ±{m:g}", -m, m
    edge = -m if test == "non_inferiority" else 0.0
    if direction == "less":
        return (f"< {-edge:g}" if edge else "< 0"), -math.inf, -edge
    return (f"> {edge:g}".replace("-", "−") if edge else "> 0"), edge, math.inf


def _beyond(r: Any) -> str:
    """Why an interval runs past what an Acc@1 difference can be (±100 pt): its seeds and t quantile; "" if not."""
    if not (r.n and r.n >= 2 and (r.ci_low < -100 or r.ci_high > 100)):
        return ""
    q = float(st.t.ppf(1 - r.alpha_each / 2, r.n - 1))
    return (f"n = {int(r.n)} seeds: the interval is mean ± t({1 - r.alpha_each / 2:.3f}, {int(r.n) - 1}) = {q:.2f} "
            f"× SE, wider than any Acc@1 difference (±100 pt) — the t formula's width, not a range of values")


def figure(claims: pd.DataFrame, plan: Dict[str, Any], layout: Optional[Dict[str, Any]] = None):
    """Forest plot of plan 1's verdicts, one panel per kind of question (plan1_figure.yaml: panels, their x scales and
    the rows' plain labels), two columns. Each row: its interval at its level and mean (filled, black-edged dot =
    confirmatory; open dot = exploratory), the side the paper predicts for that row shaded and said in words on the
    right with the verdict (coloured as every figure colours it) and the numbers; a row past its panel's scale is
    drawn to the edge with an arrow (its numbers on the right); an interval wider than an Acc@1 difference can be
    (±100 pt) is marked † and explained under its panel."""
    import matplotlib.pyplot as plt
    import yaml

    layout = layout or yaml.safe_load(open(FIGURE_LAYOUT))
    labels, studies = layout["labels"], layout["studies"]
    order = {n: i for i, n in enumerate(plan["studies"])}

    def images(name: str) -> Tuple[int, int]:
        return (study_images(plan["studies"][name]), plan["studies"][name]["budget"]["epochs"])

    def rows_of(panel: Dict[str, Any]) -> pd.DataFrame:
        c = claims[claims.question.isin(panel["questions"])].copy()
        c["_q"] = c.question.map({q: i for i, q in enumerate(panel["questions"])})
        c["_b"] = [images(n) for n in c.study]
        c["_s"] = (c.status == "exploratory").astype(int)
        c["_o"] = c.study.map(order)
        return c.sort_values(["_q", "_b", "_o", "_s"]).reset_index(drop=True)

    columns = [[(p, rows_of(p)) for p in col] for col in layout["columns"]]
    columns = [[(p, c) for p, c in col if len(c)] for col in columns]
    tall = max(sum(len(c) for _, c in col) * 0.24 + len(col) * 0.75 for col in columns)
    fig = plt.figure(figsize=(16, tall + 1.2), layout="constrained")
    subs = fig.subfigures(1, len(columns), wspace=0.03)
    for sub, col in zip(np.atleast_1d(subs), columns):
        axes = sub.subplots(len(col), 1, gridspec_kw={"height_ratios": [len(c) + 1.6 for _, c in col]}, squeeze=False)
        for ax, (panel, c) in zip(axes[:, 0], col):
            lo_x, hi_x = panel["xlim"]
            notes, right = [], []
            for i, r in c.iterrows():
                y = len(c) - 1 - i
                col_ = color(r.verdict)
                side, s_lo, s_hi = predicted_side(r.test, r.direction, r.margin)
                ax.fill_betweenx([y - 0.45, y + 0.45], max(s_lo, lo_x), min(s_hi, hi_x), color="#1a9850", alpha=0.12,
                                 lw=0)
                if r.margin == r.margin and r.margin and r.test != "superiority":
                    for v in ([-r.margin, r.margin] if r.test == "equivalence" else [-r.margin]):
                        ax.plot([v, v], [y - 0.4, y + 0.4], color="black", lw=1, ls=":")
                expl = r.status == "exploratory"
                if r.n and r.n >= 2 and not math.isnan(r.ci_low):
                    a, b = max(r.ci_low, lo_x), min(r.ci_high, hi_x)
                    if a < b:
                        ax.plot([a, b], [y, y], color=col_, lw=3, solid_capstyle="butt")
                    for edge, past, mk in ((lo_x, r.ci_low < lo_x, "<"), (hi_x, r.ci_high > hi_x, ">")):
                        if past:
                            ax.plot(edge, y, mk, color=col_, ms=7, clip_on=False)
                if r.n and lo_x <= r["mean"] <= hi_x:
                    ax.plot(r["mean"], y, "o", ms=6, mec="black" if not expl else col_,
                            mfc="white" if expl else col_, mew=1.2)
                why = _beyond(r)
                if why:
                    notes.append(textwrap.fill(f"† {labels[r.question]}, {studies[r.study]}"
                                               + (", exploratory" if expl else "") + f": {why}", 95))
                nums = (f"{r['mean']:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]{' †' if why else ''}"
                        if r.n and r.n >= 2 else "")
                right.append((f"paper: {side} · {r.verdict}" + (f" · {nums}" if nums else ""), col_))
            ax.axvline(0, color="black", lw=0.8)
            ax.set_xlim(lo_x, hi_x)
            ax.set_ylim(-0.6, len(c) - 0.4)
            ax.set_yticks(range(len(c)))
            ax.set_yticklabels([f"{labels[r.question]} · {studies[r.study]}"
                                + (" · exploratory" if r.status == "exploratory" else "")
                                for r in c.iloc[::-1].itertuples()], fontsize=7.5)
            ax.grid(axis="y", visible=False)
            ax.tick_params(axis="x", labelsize=8)
            sec = ax.secondary_yaxis("right")
            sec.set_yticks(range(len(c)))
            sec.set_yticklabels([t for t, _ in right[::-1]], fontsize=7.5)
            for tick, (_, cl) in zip(sec.get_yticklabels(), right[::-1]):
                tick.set_color(cl if cl not in (color(INCOMPLETE), color(NOT_MEASURED)) else "black")
            sec.tick_params(length=0)
            ax.set_title(panel["title"], fontsize=9, loc="left")
            if notes:
                ax.set_xlabel("\n".join(notes), fontsize=7.5, loc="left")
    fig.suptitle("Plan 1's verdicts (plan.yaml), Fashion-MNIST: difference in test Acc@1, percentage points, all "
                 "10,000 test images", fontsize=10)
    fig.supxlabel("dot = mean over seeds (filled, black edge: confirmatory, the plan's seeds; open: exploratory, seeds "
                  "0-2, judged after the fact); bar = the row's interval at its level (1 - alpha / family size); "
                  "green = the side the paper predicts\nfor that row (also in words on the right), dotted = margin; "
                  "an arrow = the interval runs past the panel's scale (its numbers on the right). Each panel has its "
                  "own scale.", fontsize=8)
    return fig


TEACHER_QUESTIONS = {"ts_minus_free": "label-free − free ODE", "ts_ce_minus_free": "+CE − free ODE"}


def teacher_points(claims: pd.DataFrame, plan: Dict[str, Any], all_images: int) -> pd.DataFrame:
    """Does the teacher help, by the student's training images: every measured confirmatory row of the questions
    TEACHER_QUESTIONS, whichever study asks them, with its study's training images (train_limit, or `all_images`,
    the teacher's, where the study trains on all) and epochs."""
    c = claims[(claims.status == "confirmatory") & claims.question.isin(list(TEACHER_QUESTIONS)) & (claims.n > 0)]
    budget = {n: st["budget"] for n, st in plan["studies"].items()}
    return pd.DataFrame([dict(study=r.study, question=r.question, images=budget[r.study]["train_limit"] or all_images,
                              epochs=budget[r.study]["epochs"], n=r.n, mean=r["mean"], ci_low=r.ci_low,
                              ci_high=r.ci_high, verdict=r.verdict) for _, r in c.iterrows()],
                        columns=["study", "question", "images", "epochs", "n", "mean", "ci_low", "ci_high", "verdict"])


def teacher_figure(points: pd.DataFrame):
    """One look at the headline: the paired difference (teacher-student − free ODE, pt) against the training images
    (log axis), one marker per question (label-free circle, +CE square, side by side), bar = the row's interval at
    its level, colour = verdict; a not-converged row is drawn hollow, and two schedules at the same images are
    labelled with their epochs."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.6))
    marks = dict(zip(TEACHER_QUESTIONS, ["o", "s"]))
    shared = points.groupby("images").epochs.nunique()
    # each schedule's place on the log axis: the images, moved right by 1.5x per longer schedule at the same images
    slot = points.images * 1.5 ** points.groupby("images").epochs.rank(method="dense").sub(1)
    for k, q in enumerate(TEACHER_QUESTIONS):
        for r, at in zip(points[points.question == q].itertuples(), slot[points.question == q]):
            x, col = at * (1.0 + 0.07 * (k - 0.5)), color(r.verdict)  # the two questions side by side
            ax.plot([x, x], [r.ci_low, r.ci_high], color=col, lw=2.5)
            ax.plot(x, r.mean, marks[q], ms=8, mec="black", mfc="white" if r.verdict == NOT_CONVERGED else col)
    for (images, epochs), g in points.groupby(["images", "epochs"]):  # two schedules at the same images: labelled
        if shared[images] > 1:
            ax.annotate(f"{epochs} ep.", (slot[g.index[0]], g.ci_high.max()), textcoords="offset points",
                        xytext=(0, 5), ha="center", fontsize=8)
    for q, label in TEACHER_QUESTIONS.items():  # legend: the questions by marker
        ax.plot([], [], marks[q], mfc="none", mec="black", ls="none", label=label)
    for v in dict.fromkeys(points.verdict):  # and the verdicts by colour
        ax.plot([], [], "o", mec="black", mfc="white" if v == NOT_CONVERGED else color(v), ls="none", label=v)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ticks = sorted(points.images.unique())
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:,}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("student's training images (the teacher trained on all of them)")
    ax.set_ylabel("test Acc@1, teacher-student − free ODE (pt)")
    seeds = ", ".join(str(n) for n in sorted(points.n.unique()))
    ax.set_title(f"Does a teacher help? Plan studies, confirmatory seeds ({seeds} per point), test set 10,000 images;\n"
                 "bar = interval at the row's level (α / family size); hollow = not converged", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    return fig


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Verdicts of plan.yaml's questions from the pipeline's runs")
    ap.add_argument("--plan", default=plan_mod.PLAN_FILE)
    ap.add_argument("--results", default="results")
    ap.add_argument("--out", default="results/evidence")
    args = ap.parse_args(argv)
    try:
        plan = plan_mod.load(args.plan)
    except plan_mod.PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    by_study = {n: collect(args.results, n, plan["rules"]["convergence"]) for n in plan["studies"]}
    teacher = _teacher_acc1(args.results)
    power = plan_mod.power_table(plan)  # power.csv, and each claims row's own power
    claims = with_power(pd.concat([judge(plan, n, args.results, teacher, r) for n, r in by_study.items()],
                                  ignore_index=True), power)
    runs = pd.concat([r.assign(study=n) for n, r in by_study.items()], ignore_index=True)
    rounded = claims.round(4)  # claims.csv's values; claims.md prints these (as the README does), not rounded twice
    files.write_csv(rounded, f"{args.out}/claims.csv")
    files.write_csv(runs.round(4), f"{args.out}/runs.csv")
    files.write_csv(power.round(4), f"{args.out}/power.csv")
    files.write_csv(machine_shift(plan, args.results, by_study).round(4), f"{args.out}/machine_shift.csv")
    files.write_csv(run_time(plan, args.results), f"{args.out}/run_time.csv")
    cols = ["study", "question", "status", "n", "mean", "ci_low", "ci_high", "converged", "verdict"]
    with open(f"{args.out}/claims.md", "w") as f:
        f.write(rounded[cols].to_markdown(index=False, floatfmt=".2f") + "\n")
    fig = figure(claims, plan)
    files.save_figure(fig, f"{args.out}/verdicts.png")
    images = files.read_json(os.path.join(args.results, "02_teacher/metrics.json"))["train_images"]
    files.save_figure(teacher_figure(teacher_points(claims, plan, images)), f"{args.out}/teacher_by_images.png")
    print(claims[cols].round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
