"""The one verdict writer: the plan's rows computed from its runs' files (`python -m odevit.repro.verdicts`):
results/v2/claims.csv, claims.md and power.csv; `figure` draws one family's forest figure (notebook 07_verdicts
saves results/v2/verdicts_<family>.png). The notebooks that train a study compute its rows with `judge` too.

A row's verdict, in this order (params.yaml rules):
  1. "not measured yet (k of n seeds)" while any of its runs is missing (the plan's seeds, never a subset);
  2. "not converged (k of n runs)" where any run it uses failed the floor-slope rule (metrics.json `converged`);
  3. "unfair (teacher not above free)" for a distillation-minus-free row whose teacher's test Acc@1 is not above the
     free ODE's mean test Acc@1 at that budget (rules.fairness);
  4. else the test's verdict (verdicts.decide: supports / contradicts / inconclusive) at alpha / family size.
Every row also says whether its verdict would hold at alpha / family size / number of families
(holds_across_families).
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from scipy import stats as st

from . import plan as plan_mod
from .pages import budget_images  # claims.csv's budget column read back (written in judge below)

SUPPORTS, CONTRADICTS, INCONCLUSIVE = "supports", "contradicts", "inconclusive"

RESULTS = "results/v2"
RERUNS = "results/v2_cpu"  # committed runs retrained on a second machine kind (fast --into --seeds): the machine shift
COLORS = {SUPPORTS: "#1b9e77", CONTRADICTS: "#d95f02", INCONCLUSIVE: "#7570b3"}


def runs(results: str = RESULTS) -> pd.DataFrame:
    """One row per finished student run of the plan whose folder `results` is (results/v2: studies v2_*, results/v3:
    v3_*; metrics.json), accuracies in percentage points."""
    rows = []
    prefix = "v3_" if os.path.basename(os.path.normpath(results)) == "v3" else "v2_"
    for f in sorted(glob.glob(os.path.join(results, f"{prefix}*", "*", "s*", "metrics.json"))):
        with open(f) as fh:
            m = json.load(fh)
        r = {k: v for k, v in m.items() if not isinstance(v, (dict, list))}
        for k in list(r):
            if k.startswith("acc") and isinstance(r[k], float):
                r[k] = 100.0 * r[k]
        r["device"] = m.get("provenance", {}).get("device")
        rows.append(r)
    return pd.DataFrame(rows)


def shifts(runs_: pd.DataFrame, reruns: pd.DataFrame) -> pd.DataFrame:
    """The machine shift (plan rule `machine`): per rerun seed, its test Acc@1 minus the committed run's of the same
    study, cell and seed (points), with both machine kinds."""
    if runs_.empty or reruns.empty:
        return pd.DataFrame(columns=["study", "cell", "seed", "shift", "device_rerun", "device_committed"])
    m = reruns.merge(runs_, on=["study", "cell", "seed"], suffixes=("_rerun", "_committed"))
    m["shift"] = m["acc1_rerun"] - m["acc1_committed"]
    return m[["study", "cell", "seed", "shift", "device_rerun", "device_committed"]]


def _shift_note(sh: pd.DataFrame, devices: set) -> Optional[pd.DataFrame]:
    """The shift rows measured between the row's two machine kinds (either way round), or None."""
    if len(devices) != 2 or sh.empty:
        return None
    hit = sh[sh.apply(lambda r: {r.device_rerun, r.device_committed} == devices, axis=1)]
    return hit if len(hit) else None


def reruns_of(results: str = RESULTS) -> str:
    """The reruns folder beside a results folder (results/v2 -> results/v2_cpu, RERUNS)."""
    return os.path.join(os.path.dirname(os.path.normpath(results)), os.path.basename(RERUNS))


def measured_shifts(results: str = RESULTS, made: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """`shifts` between the runs in `results` and the reruns beside them (reruns_of): what judge's `shift` takes."""
    made = runs(results) if made is None else made
    return shifts(made, runs(reruns_of(results)))


def decide(x: np.ndarray, q: Dict[str, Any], alpha: float) -> Dict[str, Any]:
    """Mean, SD, the (1 - alpha) interval and the test's verdict (params.yaml rules: the test, its margin, alpha) of per-seed values x."""
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


def teacher(results: str = RESULTS) -> Dict[str, Any]:
    """The selected teacher (selected.json): test Acc@1 and its seeds' spread, in points."""
    path = os.path.join(results, "teacher", "selected.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: the v2 teacher is not trained yet (python -m odevit.repro.fast)")
    with open(path) as fh:
        t = json.load(fh)
    return {"acc1": 100.0 * t["acc1"], "seed_sd": float(t["seed_sd_pts"]), "seed": t["seed"],
            "converged": all(t["converged"])}


def margin(q: Dict[str, Any], t: Dict[str, Any], test_images: int = 10000) -> float:
    """The question's margin; rule teacher_spread: max(2 x the teacher seeds' SD, 2 x one Acc@1's binomial SE)."""
    if q.get("margin_rule") == "teacher_spread":
        p = t["acc1"] / 100.0
        return max(2.0 * t["seed_sd"], 2.0 * 100.0 * math.sqrt(p * (1 - p) / test_images))
    return float(q.get("margin") or 0.0)


def values(q: Dict[str, Any], r: pd.DataFrame, seeds: List[int], t: Dict[str, Any]) -> pd.Series:
    """The question's statistic per seed (index = seed), for the plan's seeds that have every run it needs."""
    by = r[r.seed.isin(seeds)].set_index(["cell", "seed"]) if not r.empty else r
    cells = set(by.index.get_level_values(0)) if not r.empty else set()
    if q["a"] not in cells or q["metric"] not in by.columns:
        return pd.Series(dtype=float)
    a = by.loc[q["a"]][q["metric"]]
    if q["kind"] == "paired":
        if q["b"] not in cells:
            return pd.Series(dtype=float)
        out = a - by.loc[q["b"]][q["metric"]]
    elif q["kind"] == "within":
        out = a - by.loc[q["a"]][q["metric_b"]]
    else:  # teacher_gap
        out = a - t["acc1"]
    return out.dropna().sort_index()


def _used(rs: pd.DataFrame, seeds: List[int], q: Dict[str, Any]) -> Tuple[List[str], pd.DataFrame]:
    """The cells a question uses (a, and b for a paired row) and their runs of the plan's seeds among a study's runs."""
    cells = [q["a"]] + ([q["b"]] if q["kind"] == "paired" else [])
    return cells, rs[rs.cell.isin(cells) & rs.seed.isin(seeds)] if not rs.empty else rs


def _fairness(row: Dict[str, Any], q: Dict[str, Any], s: Dict[str, Any], rs: pd.DataFrame, t: Dict[str, Any]
              ) -> Optional[bool]:
    """rules.fairness for a distillation-minus-free row: is the teacher's test Acc@1 above the free ODE's mean (None:
    not such a row, or no free run yet); records teacher_minus_free and fair in `row`."""
    fair = None
    if q["kind"] == "paired" and q.get("b") and dict(s["cells"][q["b"]] or {}).get("free"):
        free_mean = float(rs[rs.cell == q["b"]].acc1.mean()) if len(rs) else math.nan
        fair = bool(t["acc1"] > free_mean) if not math.isnan(free_mean) else None
        row["teacher_minus_free"] = t["acc1"] - free_mean
    row["fair"] = fair
    return fair


def judge(plan: Dict[str, Any], r: pd.DataFrame, t: Dict[str, Any], shift: Optional[pd.DataFrame] = None
          ) -> pd.DataFrame:
    """Every question of the plan as one row (the order of the plan). A row whose runs were made on two machine kinds
    reports the shift measured between them (`shift`, from `shifts`; plan rule `machine`), and, descriptively (not a
    plan rule), whether its verdict is the same with every seed's value moved by the largest measured |shift| either
    way; without a measured shift between its two kinds it has no verdict yet."""
    fams = plan_mod.families(plan)
    n_fams = len(fams)
    out = []
    for name, s in plan["studies"].items():
        seeds = [int(x) for x in s["seeds"]]
        rs = r[r.study == name] if not r.empty else r
        b = s["budget"]
        for q in s["questions"]:
            fam = plan_mod.family_of(s, q)
            a = plan_mod.alpha_each(plan, fam)
            qm = dict(q, margin=margin(q, t))
            used_cells, used = _used(rs, seeds, q)
            x = values(q, rs, seeds, t)
            row = dict(study=name, family=fam, primary=fam == plan["rules"]["primary_family"], question=q["id"],
                       claim=q["claim"], test=q["test"], direction=q["direction"], margin=qm["margin"],
                       alpha_each=a, seeds=len(seeds), budget=f"{plan_mod.images(s)} images x {b['epochs']} epochs",
                       plan_hash=plan_mod.study_hash(plan, name), paper_effect=(q.get("paper") or {}).get("effect"))
            d = decide(x.to_numpy(dtype=float), qm, a)
            row.update({k: d[k] for k in ("n", "mean", "sd", "ci_low", "ci_high")})
            conv = int(used.converged.sum()) if len(used) else 0
            row.update(converged=f"{conv}/{len(used)}" if len(used) else "–",
                       still_learning=", ".join(f"{c} {int((~g.converged.astype(bool)).sum())}/{len(g)}"
                                                for c, g in used.groupby("cell", sort=False)
                                                if not g.converged.all()) if len(used) else "",
                       device=", ".join(sorted(set(used.device))) if len(used) else "")
            hashes = set(used.plan_hash) if len(used) else set()
            row["post_hoc"] = bool(hashes - {row["plan_hash"]})
            fair = _fairness(row, q, s, rs, t)
            devices = set(used.device) if len(used) else set()
            sh = _shift_note(shift if shift is not None else pd.DataFrame(), devices) if len(devices) > 1 else None
            row["machine_shift"], row["verdict_under_shift"] = None, None
            if sh is not None:
                big = float(sh["shift"].abs().max())
                row["machine_shift"] = (f"{sh.device_rerun.iloc[0]} runs minus the same seeds' "
                                        f"{sh.device_committed.iloc[0]} runs: "
                                        + ", ".join(f"{x:+.2f} ({c} s{int(z)})" for x, c, z in
                                                    zip(sh["shift"], sh.cell, sh.seed))
                                        + f" pt; mean {sh['shift'].mean():+.2f}, largest |shift| {big:.2f}")
                moved = {decide(x.to_numpy(dtype=float) + e, qm, a)["verdict"] for e in (-big, big)}
                row["verdict_under_shift"] = "same" if moved == {d["verdict"]} else "changes"
            if len(x) < len(seeds) or len(used) < len(used_cells) * len(seeds):
                row["verdict"] = f"not measured yet ({len(x)} of {len(seeds)} seeds)"
                row.update(converged="–", still_learning="")  # counted once every run of the row is there
            elif len(devices) > 1 and sh is None:
                row["verdict"] = f"not measured yet (machine shift between {' and '.join(sorted(devices))})"
            elif conv < len(used):
                row["verdict"] = f"not converged ({len(used) - conv} of {len(used)} runs)"
            elif fair is False:
                row["verdict"] = "unfair (teacher not above free)"
            else:
                row["verdict"] = d["verdict"]
            row["verdict_test"] = d["verdict"] if len(x) >= 2 else None  # what the test alone says (shown, not used)
            row["holds_across_families"] = (decide(x.to_numpy(dtype=float), qm, a / n_fams)["verdict"] == row["verdict"]
                                            if row["verdict"] in (SUPPORTS, CONTRADICTS) else None)
            out.append(row)
    return pd.DataFrame(out)


def seed_ids(seeds: Any) -> str:
    """Seed ids as a reader finds them in the run folders: "2300–2305" for consecutive seeds, else listed."""
    x = [int(v) for v in seeds]
    if len(x) > 2 and x == list(range(x[0], x[0] + len(x))):
        return f"{x[0]}–{x[-1]}"
    return ", ".join(map(str, x))


def draw_rows(ax: Any, c: pd.DataFrame, v3: bool, lim: Optional[float] = None, words: bool = True) -> None:
    """Each row of c on ax, the first on top: interval (bar) and mean (dot) in its verdict's colour, margins dotted,
    plan v3's delta dashed (inside +-lim where zoomed, a row beyond it named), `words`: the verdict on the right."""
    for i, r in c.reset_index(drop=True).iterrows():
        y = len(c) - 1 - i
        col = COLORS.get(r.verdict, "#9e9e9e")
        if r.n >= 2:
            ax.plot([r.ci_low, r.ci_high], [y, y], color=col, lw=3)
            ax.plot(r["mean"], y, "o", color=col, ms=6, mec="black")
            if lim and (r.ci_high < -lim or r.ci_low > lim):
                left = r.ci_high < -lim
                ax.text(-lim if left else lim, y, f"{'◂ ' if left else ''}off this scale (see left){'' if left else ' ▸'}",
                        ha="left" if left else "right", va="bottom", fontsize=7, color="#555555")
        if r.margin and r.test != "superiority":
            for v in ([-r.margin, r.margin] if r.test == "equivalence" else [-r.margin]):
                ax.plot([v, v], [y - 0.4, y + 0.4], color="black", lw=1, ls=":")
        if v3 and r.test == "superiority" and not (lim and r.delta > lim):
            ax.plot([r.delta, r.delta], [y - 0.4, y + 0.4], color="black", lw=1, ls="--")
        if words:
            ax.text(1.01, y, r.verdict, transform=ax.get_yaxis_transform(), va="center", fontsize=8)
    ax.set_ylim(-0.6, len(c) - 0.4)  # the bottom row inside the panel, not on its edge


def figure(claims: pd.DataFrame, family: str, plan: Dict[str, Any], label: Optional[Callable[[str], str]] = None):
    """One family's rows: each interval at its level on the family's own scale, the null and the margins; the
    verdict in words on the right; each row by `label` (words; default its id) with its id and training images.
    Where the intervals span far more than the margins (the step family: tens of points against +-1 pt), a second
    panel zooms to a few points, so each interval and margin can be read; a family with no interval yet shows a
    panel that says so, not an empty scale."""
    import matplotlib.pyplot as plt

    c = claims[claims.family == family].reset_index(drop=True)
    v3 = "decide_low" in c.columns  # plan v3's claims: the deciding interval, delta lines on "beats" rows
    if v3:
        c = c.assign(ci_low=c.decide_low, ci_high=c.decide_high, margin=c.margin.fillna(0.0))
    label = label or (lambda q: q)
    measured = c[c.n >= 2]
    margins = [float(m) for m, t in zip(c.margin, c.test) if m and t != "superiority"]
    span = float(np.nanmax(np.abs(measured[["ci_low", "ci_high"]].to_numpy()))) if len(measured) else 0.0
    unit = max(margins + [1.0])
    zoom = 4 * unit if span > 10 * unit else None
    fig, axes = plt.subplots(1, 2 if zoom else 1, figsize=(13 if zoom else 10, 0.55 * len(c) + 1.9), sharey=True,
                             squeeze=False, layout="constrained")
    axes = list(axes[0])
    for ax, lim in zip(axes, [None, zoom]):
        draw_rows(ax, c, v3, lim, words=ax is axes[-1])
        if len(measured):
            ax.axvline(0, color="black", lw=0.8)
        ax.grid(alpha=0.3, axis="x")
        if lim:
            ax.set_xlim(-lim, lim)
            ax.set_title(f"zoomed to ±{lim:g} pt: the margins (±{unit:g} pt) and the small intervals", fontsize=9)
        elif zoom:
            ax.set_title("every row on one scale", fontsize=9)
    if not len(measured):
        ax = axes[0]
        ax.set_xlim(-1, 1)
        ax.set_xticks([])
        ax.text(0.5, 0.5, "not measured yet: no row of this family has its runs\n(each interval is drawn once its "
                "seeds' runs exist)", transform=ax.transAxes, ha="center", va="center", fontsize=9, color="#b00000")
    axes[0].set_yticks(range(len(c)))
    one_budget = c.budget.nunique() == 1  # then the title gives the training images, not every row
    axes[0].set_yticklabels([f"{label(r.question)}\n({r.question}" + ("" if one_budget else
                             f", {budget_images(r.budget):,} training images") + ")"
                             for r in c.iloc[::-1].itertuples()], fontsize=8)
    fig.supxlabel("difference in test Acc@1 (percentage points, paired by seed; all 10,000 test images); bar = the "
                  + ("row's deciding (1 - 2 alpha/family size) interval, dashed = delta (the smallest effect of "
                     "interest), dotted = margin" if v3 else "row's (1 - alpha/family size) interval, dotted = margin"),
                  fontsize=8)
    studies = list(dict.fromkeys(c.study))
    seeds = ", ".join(f"{seed_ids(plan['studies'][s]['seeds'])} ({plan_mod.images(plan['studies'][s]):,}"
                      + (" training images)" if i == 0 else ")") for i, s in enumerate(studies))
    n = len(c)
    fig.suptitle(f"Plan v{plan.get('version', 2)}, family {family}: {n} row{'' if n == 1 else 's'}, paired by seed, tested on all 10,000 "
                 f"Fashion-MNIST test images\nseeds {seeds}", fontsize=9, x=0.01, ha="left")
    return fig


COLUMNS = ["family", "question", "budget", "n", "mean", "ci_low", "ci_high", "margin", "converged", "verdict",
           "holds_across_families"]


def write_files(claims: pd.DataFrame, plan: Dict[str, Any], out: str, head: str, columns: List[str]) -> None:
    """claims.csv (4 decimals), power.csv and claims.md in `out`: `head`, then claims.csv's `columns` to 2 decimals."""
    from .files import write_csv, write_text

    c = claims.round(4)
    write_csv(c, os.path.join(out, "claims.csv"))
    write_csv(pd.DataFrame(plan_mod.power_rows(plan)).round(4), os.path.join(out, "power.csv"))
    write_text(f"{head}\n\n" + c[columns].round(2).to_markdown(index=False) + "\n", os.path.join(out, "claims.md"))


def write(plan: Dict[str, Any], results: str = RESULTS, out: str = RESULTS) -> pd.DataFrame:
    """claims.csv, claims.md and power.csv in `out`, from the runs in `results`; returns the claims."""
    t = teacher(results)
    made = runs(results)
    claims = judge(plan, made, t, measured_shifts(results, made))
    write_files(claims, plan, out, f"Teacher: seed {t['seed']}, test Acc@1 {t['acc1']:.2f} %, its seeds' SD "
                f"{t['seed_sd']:.2f} pt.", COLUMNS)
    return claims


# ---------------------------------------------------------------------------------------------------------------------
# Plan v3 (params.yaml plan_v3.rules): the deciding interval is the (1 - 2 alpha_each) paired-t interval; superiority
# rows decide against 0 and their smallest effect of interest delta; the convergence rule asks whether the learning a
# run has left could change its row's verdict.

RESULTS_V3 = "results/v3"
UNSETTLED = "unsettled"


def floor_window(epochs: int, floor_frac: float) -> int:
    """Plan v3's floor window: floor(floor_frac x epochs) epochs (rules.schedule.window: floor), at least 2."""
    return max(2, int(math.floor(floor_frac * epochs + 1e-9)))


def learning_left(val_acc1: Any, floor_frac: float, alpha_run: float, horizon: float) -> Dict[str, float]:
    """Plan v3's rule on one run (validation Acc@1 per epoch, fractions): the OLS slope of the floor window's accuracies
    (pt per epoch) and its one-sided p (scipy.stats.linregress, alternative 'greater'); flagged iff p < alpha_run;
    the learning left g = max(0, fit(last epoch) + slope x horizon x window - best validation Acc@1) for a flagged run,
    else 0 (pt)."""
    y = np.asarray(val_acc1, dtype=float) * 100.0
    w = floor_window(len(y), floor_frac)
    yy, xx = y[-w:], np.arange(w, dtype=float)
    if np.ptp(yy) == 0:  # a constant window: no trend (linregress needs variation)
        return dict(window=w, slope=0.0, p=1.0, flagged=False, g=0.0)
    fit = st.linregress(xx, yy, alternative="greater")
    flagged = bool(fit.pvalue < alpha_run)
    end = fit.intercept + fit.slope * (w - 1)
    g = max(0.0, end + fit.slope * horizon * w - float(y.max())) if flagged else 0.0
    return dict(window=w, slope=float(fit.slope), p=float(fit.pvalue), flagged=flagged, g=float(g))


def decide_v3(x: np.ndarray, q: Dict[str, Any], alpha: float) -> Dict[str, Any]:
    """Mean, SD, the deciding (1 - 2 alpha) interval [low, high] and the verdict of per-seed values x (plan v3's
    rules.decide): superiority supports iff low > 0, contradicts iff high < delta (and not supports); equivalence
    supports iff the interval lies inside +-margin, contradicts iff it lies outside."""
    n = len(x)
    out = dict(n=n, mean=float(np.mean(x)) if n else math.nan, sd=float(np.std(x, ddof=1)) if n > 1 else math.nan,
               level=1 - 2 * alpha, decide_low=math.nan, decide_high=math.nan, verdict=INCONCLUSIVE)
    if n < 2:
        return out
    half = float(st.t.ppf(1 - alpha, n - 1)) * out["sd"] / math.sqrt(n)
    lo, hi = out["mean"] - half, out["mean"] + half
    out.update(decide_low=lo, decide_high=hi)
    if q["test"] == "superiority":
        delta = float(q["delta"])
        if lo > 0:
            out["verdict"] = SUPPORTS
        elif hi < delta:
            out["verdict"] = CONTRADICTS
    else:
        m = float(q["margin"])
        if -m < lo and hi < m:
            out["verdict"] = SUPPORTS
        elif lo > m or hi < -m:
            out["verdict"] = CONTRADICTS
    return out


def histories(results: str, study: str, cell: str, seeds: List[int]) -> Dict[int, List[float]]:
    """Validation Acc@1 per epoch (fractions) of a cell's runs that have a history.csv."""
    out = {}
    for x in seeds:
        f = os.path.join(results, study, cell, f"s{x}", "history.csv")
        if os.path.exists(f):
            out[x] = pd.read_csv(f)["val_acc1"].tolist()
    return out


def against_v2(v3: str, v2: Optional[Dict[str, Any]]) -> str:
    """What a plan v3 row says of the plan v2 row it replicates (same question id)."""
    if not v2:
        return "no plan v2 row"
    v2_final, v2_test = v2.get("verdict"), v2.get("verdict_test")
    if v3.startswith("not measured"):
        return f"waits for its runs (plan v2: {v2_final})"
    if v3 not in (SUPPORTS, CONTRADICTS):
        return f"not decided (plan v2: {v2_final})"
    if v2_final == v3:
        return f"replicates plan v2 ({v2_final})"
    if v2_final in (SUPPORTS, CONTRADICTS):
        return f"overturns plan v2 ({v2_final})"
    if v2_test in (SUPPORTS, CONTRADICTS) and v2_test != v3:  # plan v2's ungated test read the other way
        return f"overturns plan v2's reading ({v2_final}; its test alone: {v2_test})"
    return f"decides what plan v2 left open ({v2_final}; its test alone: {v2_test})"


def judge_v3(plan: Dict[str, Any], r: pd.DataFrame, t: Dict[str, Any], results: str = RESULTS_V3,
             v2: Optional[Dict[str, Dict[str, Any]]] = None) -> pd.DataFrame:
    """Every question of plan v3 as one row, in the plan's order, by its rules (docstring of decide_v3, learning_left)."""
    rules = plan["rules"]
    conv = rules["convergence"]
    floor_frac = float(rules["schedule"]["floor_frac"])
    fams = plan_mod.families(plan)
    if v2 is None:  # plan v2's rows by question
        f = os.path.join(RESULTS, "claims.csv")
        v2 = {r["question"]: r for r in pd.read_csv(f).to_dict("records")} if os.path.exists(f) else {}
    out = []
    for name, s in plan["studies"].items():
        seeds = [int(x) for x in s["seeds"]]
        rs = r[r.study == name] if not r.empty else r
        if len(rs):  # a run is made when both its files are (the learning-left rule reads its history)
            rs = rs[[os.path.exists(os.path.join(results, name, c, f"s{int(x)}", "history.csv"))
                     for c, x in zip(rs.cell, rs.seed)]]
        for q in s["questions"]:
            fam = plan_mod.family_of(s, q)
            a = plan_mod.alpha_each(plan, fam)
            cells, used = _used(rs, seeds, q)
            x = values(q, rs, seeds, t)
            R = plan_mod.row_runs(s, q)
            row = dict(plan="v3", study=name, family=fam, primary=fam == rules["primary_family"], question=q["id"],
                       replicates=q.get("replicates"), claim=q["claim"], test=q["test"],
                       delta=float(q["delta"]) if q["test"] == "superiority" else math.nan,
                       margin=float(q["margin"]) if q["test"] == "equivalence" else math.nan, alpha_each=a,
                       seeds=len(seeds), budget=f"{plan_mod.images(s)} images x {s['budget']['epochs']} epochs",
                       plan_hash=plan_mod.study_hash(plan, name))
            d = decide_v3(x.to_numpy(dtype=float), q, a)
            row.update({k: d[k] for k in ("n", "mean", "sd", "level", "decide_low", "decide_high")})
            row["verdict_test"] = d["verdict"] if d["n"] >= 2 else None
            # the learning left of every run the row uses, on the verdict's metric (validation Acc@1 at best.pt)
            g = {c: {} for c in cells}
            flagged = []
            for c in cells:
                for seed, h in histories(results, name, c, seeds).items():
                    ll = learning_left(h, floor_frac, float(conv["alpha_row"]) / R, float(conv["horizon"]))
                    g[c][seed] = ll["g"]
                    if ll["flagged"]:
                        flagged.append(f"{c} s{seed} (+{ll['g']:.2f})")
            row.update(still_learning=f"{len(flagged)} of {len(used)}" + (": " + ", ".join(flagged) if flagged else ""),
                       false_alarm=plan_mod.false_alarm(float(conv["alpha_row"]), R))
            moved, alt, shift_up, shift_down = set(), [], math.nan, math.nan
            if d["n"] >= 2:
                ga = pd.Series({k: g[q["a"]].get(k, 0.0) for k in x.index})
                gb = pd.Series({k: g[cells[-1]].get(k, 0.0) for k in x.index})
                shift_up, shift_down = float(ga.mean()), float(gb.mean())
                alt = [decide_v3(v.to_numpy(dtype=float), q, a) for v in (x + ga, x - gb)]  # up, down
                moved = {e["verdict"] for e in alt} - {d["verdict"]}
            row.update(learning_left_up=shift_up, learning_left_down=shift_down)
            hashes = set(used.plan_hash) if len(used) else set()
            row["post_hoc"] = bool(hashes - {row["plan_hash"]})
            devices = set(used.device) if len(used) else set()
            row["device"] = ", ".join(sorted(devices))
            fair = _fairness(row, q, s, rs, t)
            if len(x) < len(seeds) or len(used) < len(cells) * len(seeds):
                verdict = f"not measured yet ({len(x)} of {len(seeds)} seeds)"
            elif len(devices) > 1:
                verdict = f"mixed machines ({', '.join(sorted(devices))}): against rules.machine"
            elif fair is False:
                verdict = "unfair (teacher not above free)"
            elif moved:
                verdict = (f"{UNSETTLED}: the learning left could make it {' or '.join(sorted(moved))} (mean "
                           f"+{shift_up:.2f} / -{shift_down:.2f} pt, interval then "
                           + " / ".join(f"[{e['decide_low']:.2f}, {e['decide_high']:.2f}]" for e in alt) + ")")
            else:
                verdict = d["verdict"]
            row["verdict"] = verdict
            row["effect_vs_delta"] = ("gain below delta" if verdict == SUPPORTS and q["test"] == "superiority"
                                      and d["decide_high"] < float(q["delta"]) else "")
            row["holds_across_families"] = (decide_v3(x.to_numpy(dtype=float), q, a / len(fams))["verdict"] == verdict
                                            if verdict in (SUPPORTS, CONTRADICTS) else None)
            row["against_v2"] = against_v2(verdict, v2.get(q.get("replicates")))
            out.append(row)
    return pd.DataFrame(out)


COLUMNS_V3 = ["study", "family", "question", "budget", "n", "mean", "level", "decide_low", "decide_high", "delta", "margin",
              "still_learning", "verdict", "against_v2"]


def write_v3(plan: Dict[str, Any], results: str = RESULTS_V3, out: str = RESULTS_V3) -> pd.DataFrame:
    """Plan v3's claims.csv, claims.md and power.csv in `out`, from its runs in `results` (plan v2's teacher)."""
    t = teacher(RESULTS)
    claims = judge_v3(plan, runs(results), t, results)
    write_files(claims, plan, out, f"Plan v3. Teacher (plan v2's): seed {t['seed']}, test Acc@1 {t['acc1']:.2f} %.",
                COLUMNS_V3)
    return claims


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="The plan's verdicts from its runs' files")
    ap.add_argument("--plan", default=plan_mod.PLAN_FILE)
    ap.add_argument("--results", default=RESULTS)
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--version", type=int, default=2, help="2 (results/v2) or 3 (results/v3)")
    a = ap.parse_args(argv)
    if a.version == 3:
        res = RESULTS_V3 if a.results == RESULTS else a.results
        claims, cols = write_v3(plan_mod.load(a.plan, 3), res, RESULTS_V3 if a.out == RESULTS else a.out), COLUMNS_V3
    else:
        claims, cols = write(plan_mod.load(a.plan), a.results, a.out), COLUMNS
    with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 40):
        print(claims[cols].round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
