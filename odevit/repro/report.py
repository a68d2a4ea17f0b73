"""The claims table of a study of cells (params.yaml's `study`, or an exploratory snapshot in docs/evidence/): every
claim of `paper.CLAIMS` tested on its seeds with a computed verdict (`stats.verdict`: supports / contradicts /
inconclusive at its budget), its figure, and the cell-against-reference comparisons the earlier studies' pages show."""
from __future__ import annotations

import math
import os
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from . import paper, stats
from .files import read_json
from .results import collect


def comparisons(cells: pd.DataFrame, reference: str = "ref", metric: str = "acc1", scale: float = 100.0) -> pd.DataFrame:
    """Every cell against the reference over their common seeds: means ± std and the paired difference
    reference - cell (x `scale`: points for accuracies) with its 95% t interval, its two-sided p against 0, and
    `finding` (stats.finding: which side the interval lies on, or no resolved difference)."""
    from .stats import paired

    ref = cells[cells.cell == reference].set_index("seed")[metric]
    rows = []
    for name, g in cells[cells.cell != reference].groupby("cell", sort=False):
        g = g.set_index("seed")[metric]
        seeds = sorted(set(g.index) & set(ref.index))
        if not seeds:
            continue
        p = paired(ref.loc[seeds].to_numpy() * scale, g.loc[seeds].to_numpy() * scale)
        d = ref.loc[seeds].to_numpy() * scale - g.loc[seeds].to_numpy() * scale
        e = stats.estimate(d, "none")
        rows.append({"cell": name, "seeds": p["n"], f"{metric}_ref": p["mean_a"], f"{metric}_ref_std": p["std_a"],
                     f"{metric}_cell": p["mean_b"], f"{metric}_cell_std": p["std_b"], "diff_mean": p["diff_mean"],
                     "diff_std": p["diff_std"], "ci_low": p["ci_low"], "ci_high": p["ci_high"],
                     "p_vs_null": e["p_vs_null"], "resolved": p["resolved"],
                     "finding": stats.finding(e, reference, name)})
    return pd.DataFrame(rows)


def _unique(g: pd.DataFrame, col: str) -> str:
    """The distinct values of a metrics.json key over a cell's seeds ("unknown" where the files do not carry it)."""
    if col not in g or g[col].isna().all():
        return "unknown"
    return "/".join(f"{v:g}" if isinstance(v, float) else str(v) for v in sorted(g[col].dropna().unique()))


def epochs_ran(g: pd.DataFrame) -> str:
    """ "20 epochs", or where early stopping cut the cap (metrics.json `epochs_run` < `epochs`) the epochs that ran:
    "9–18 epochs (cap 20, stopped on validation)" — the cap is not what ran."""
    cap = _unique(g, "epochs")
    if "epochs_run" in g and g.epochs_run.notna().any() and (g.epochs_run < g.epochs).any():
        lo, hi = int(g.epochs_run.min()), int(g.epochs_run.max())
        return f"{lo}{f'–{hi}' if hi > lo else ''} epochs (cap {cap}, stopped on validation)"
    return f"{cap} epochs"


def budget(cells: pd.DataFrame, names: List[str]) -> str:
    """Train images x epochs run of each named cell (`epochs_ran`) and how many of its seeds converged (metrics.json
    `converged`)."""
    parts = []
    for n in names:
        g = cells[cells.cell == n]
        if g.empty:
            parts.append(f"{n}: no finished seed")
            continue
        conv = (f"{int(g.converged.fillna(False).astype(bool).sum())}/{len(g)} converged"
                if "converged" in g and g.converged.notna().any() else "convergence unknown")
        parts.append(f"{n}: {_unique(g, 'train_images')} images x {epochs_ran(g)}, {conv}")
    return "; ".join(parts)


def budget_of(cells: pd.DataFrame, names: List[str]) -> tuple:
    """(budget text, every run of the named cells converged) — a claim resting on a run that had not finished learning
    shows its numbers but no verdict (stats.NOT_CONVERGED)."""
    g = cells[cells.cell.isin(names)]
    conv = bool(len(g)) and "converged" in g and bool(g.converged.fillna(False).astype(bool).all())
    return budget(cells, names), conv


def gate(verdict: str, converged: bool) -> str:
    """The convergence gate: a decided or inconclusive verdict of a claim resting on a run that had not finished
    learning becomes stats.NOT_CONVERGED (its numbers stay, the verdict goes); not measured, fact and not a claim
    stay what they are."""
    if not converged and verdict not in (stats.NOT_MEASURED, stats.FACT, stats.NOT_A_CLAIM):
        return stats.NOT_CONVERGED
    return verdict


def decide(e: dict, converged: bool, holm_p: Optional[float] = None, replication_min: float = stats.REPLICATION,
           unit_p: Optional[float] = None) -> str:
    """The verdict of one claim row wherever it is printed — 07's claims table (`claims`), 03's headline rows, 05's
    ablation table (`ablations`) — so that no notebook says what the report does not: `stats.verdict` (Holm,
    replication and unit gates included), then the convergence `gate`."""
    return gate(stats.verdict(e, holm_p, replication_min, unit_p), converged)


def _per_seed(cells: pd.DataFrame, name: str, col: str = "acc1") -> pd.Series:
    g = cells[cells.cell == name]
    return g.set_index("seed")[col].astype(float) if col in g else pd.Series(dtype=float)


def _paired_values(cells: pd.DataFrame, a: str, b: str, relative: bool = False) -> np.ndarray:
    """a - b in Acc@1 points over their common seeds (relative: in % of b)."""
    x, y = _per_seed(cells, a), _per_seed(cells, b)
    seeds = sorted(set(x.index) & set(y.index))
    x, y = x.loc[seeds].to_numpy(), y.loc[seeds].to_numpy()
    return 100 * (x / y - 1) if relative else 100 * (x - y)


def _dyn_values(dyn: dict, key: str, cell: str, field: str) -> np.ndarray:
    return np.array([v[field] for v in dyn.get(key, {}).get(cell, {}).values() if field in v], dtype=np.float64)


CLAIM_COLUMNS = ["claim", "statement", "source", "direction", "statistic", "unit", "ours_mean", "ours_std", "seeds",
                 "ci_low", "ci_high", "p_vs_null", "null", "holm_p", "unit_p", "replication", "margin", "tost_p", "ci90_low", "ci90_high",
                 "paper", "paper_value", "p_vs_paper", "vs_paper", "verdict", "finding", "cells", "budget", "note"]


def _row(cid: str, e: dict, cells: str, budget_: tuple, note: str = "") -> dict:
    c = paper.claim(cid)
    budget_, conv = budget_
    return {"claim": cid, "statement": c.statement, "source": c.source, "direction": c.direction,
            "statistic": c.statistic, "unit": c.unit, "ours_mean": e["mean"], "ours_std": e["std"], "seeds": e["n"],
            "ci_low": e["ci_low"], "ci_high": e["ci_high"], "p_vs_null": e.get("p_vs_null", math.nan),
            "null": e.get("null", math.nan), "holm_p": math.nan, "unit_p": math.nan, "replication": math.nan, "margin": e.get("margin", math.nan),
            "tost_p": e.get("tost_p", math.nan), "ci90_low": e.get("ci90_low", math.nan),
            "ci90_high": e.get("ci90_high", math.nan), "paper": c.paper,
            "paper_value": math.nan if c.value is None else c.value, "p_vs_paper": e.get("p_vs_paper", math.nan),
            "vs_paper": e.get("vs_paper", ""), "verdict": "", "finding": "", "cells": cells, "budget": budget_,
            "note": note, "_e": e, "_conv": conv}


# (claim, cell a, cell b): Acc@1 a - b paired by seed; the ablation family is the claims with `family` set
PAIRS = [("ts_minus_free", "ref", "free"), ("ts_ce_minus_free", "ce", "free"),
         ("lie_trotter_minus_parallel", "ref", "parallel"), ("jasmin_on_minus_off", "ref", "jasmin_off"),
         ("centernorm_minus_layernorm", "ref", "layernorm"), ("softmax_minus_uniform_schedule", "ref", "uniform"),
         ("qkv_spectral_minus_xavier", "ref", "qkv_xavier"), ("r1_minus_r4", "ref", "mlp4"),
         ("ce_from_start_minus_published_curriculum", "ce", "pub_curriculum"),
         ("published_curriculum_minus_published", "pub_curriculum", "published")]


def claims(results: str = "results", reference: str = "ref", margin_pts: float = 1.0,
           replication_min: float = stats.REPLICATION) -> pd.DataFrame:
    """One row per claim of `paper.CLAIMS`: our per-seed statistic (mean, std, 95 % t interval, p against the null
    and against the paper's own number), the TOST within ±`margin_pts` (params.yaml study.equivalence_margin_pts)
    for "robust" / "competitive" claims, the Holm-adjusted p of the ablation family, the computed verdict
    (stats.verdict; stats.bound_verdict for Prop. 1; compression rows are facts), the cells / files it rests on and
    their budget. Accuracy differences are in Acc@1 points. `replication_min` = 0: the intervals (and Holm) alone
    decide, as before the replication rule (`odevit.repro.evidence.replicate_compare` shows both)."""

    if not margin_pts > 0:
        raise ValueError(f"params.yaml: study.equivalence_margin_pts = {margin_pts!r}: expected > 0 (Acc@1 points)")
    cells = collect(results)
    t = read_json(f"{results}/02_teacher/metrics.json")
    dyn_path = f"{results}/06_dynamics/metrics.json"
    dyn = read_json(dyn_path) if os.path.isfile(dyn_path) else {}
    cell_files = f"{results}/cells/{{}}/s*/metrics.json"
    rows = []

    def pair(cid: str, a: str, b: str, relative: bool = False) -> None:
        a = reference if a == "ref" else a
        c = paper.claim(cid)
        e = stats.estimate(_paired_values(cells, a, b, relative), c.direction, 0.0, paper=c.value)
        row = _row(cid, e, f"{a} − {b}: " + cell_files.format(f"{{{a},{b}}}"), budget_of(cells, [a, b]))
        row["finding"] = stats.finding(e, a, b)
        rows.append(row)

    for cid, a, b in PAIRS[:2]:
        pair(cid, a, b)
        pair(cid + "_rel", a, b, relative=True)
    for cid, cell in [("retention", reference), ("retention_ce", "ce")]:
        c = paper.claim(cid)
        margin = margin_pts / 100 / t["acc1"]  # margin_pts of the student's Acc@1, as a ratio to the teacher's
        # non-inferiority: "competitive" holds if the student keeps at least the paper's share minus the margin (a
        # student that keeps more of its teacher than the paper's did is not evidence against it)
        e = stats.estimate(_per_seed(cells, cell) / t["acc1"], c.direction, c.value - margin, paper=c.value)
        rows.append(_row(cid, e, f"{cell}: {cell_files.format(cell)}; {results}/02_teacher/metrics.json",
                         budget_of(cells, [cell]), f"non-inferiority: null = the paper's {c.value:.3f} − {margin_pts:g} "
                         f"pt of Acc@1 / teacher Acc@1 {t['acc1']:.4f}"))
    ref = cells[cells.cell == reference]
    for cid, num, den in [("compression_total", t["params_m"], ref.params_m.astype(float) if len(ref) else None),
                          ("compression_encoder", t["encoder_params"],
                           ref.encoder_params.astype(float) if len(ref) else None)]:
        v = [] if den is None else list(num / den)
        e = stats.estimate(v, paper.claim(cid).direction)
        rows.append(_row(cid, e, f"{reference}: {cell_files.format(reference)}; {results}/02_teacher/metrics.json",
                         budget_of(cells, [reference]), f"teacher {num:g} / student "
                         + (f"{den.iloc[0]:g}" if den is not None else "missing")))
    for cid, col in [("step_robustness_half", "acc1_half_n"), ("step_robustness_double", "acc1_double_n")]:
        d = (100 * (ref[col] - ref["acc1_sub_n"])).to_numpy(dtype=np.float64) if col in ref else np.array([])
        e = stats.estimate(d, "equivalent", 0.0, margin_pts)
        rows.append(_row(cid, e, f"{reference}: {cell_files.format(reference)} ({col} − acc1_sub_n)",
                         budget_of(cells, [reference]), f"margin ±{margin_pts:g} pt (params.yaml "
                                                     "study.equivalence_margin_pts)"))
    for cid, a, b in PAIRS[2:]:
        pair(cid, a, b)
    lyap_budget = budget_of(cells, [reference])
    for cid, key in [("lyapunov_vs_correctness", "lyapunov"), ("lyapunov_class_vs_accuracy", "lyapunov_class")]:
        c = paper.claim(cid)
        e = stats.estimate(_dyn_values(dyn, key, reference, "r"), c.direction, 0.0, paper=c.value)
        n = _dyn_values(dyn, key, reference, "n" if key == "lyapunov" else "n_classes")
        rows.append(_row(cid, e, f"{dyn_path}: {key}.{reference}", lyap_budget,
                         f"{'images' if key == 'lyapunov' else 'classes'} per seed: "
                         + ("/".join(f"{x:g}" for x in n) or "none")))
        if c.per_unit:  # r over 10 classes: each seed's Pearson test over the classes must hold too
            p = _dyn_values(dyn, key, reference, "p_value")
            rows[-1]["unit_p"] = float(np.max(p)) if len(p) and not np.isnan(p).any() else math.nan
            rows[-1]["note"] += "; Pearson p over the classes per seed: " + ("/".join(f"{x:.3g}" for x in p) or "none")
    lo, lj = dyn.get("lyapunov", {}).get(reference, {}), dyn.get("lyapunov", {}).get("jasmin_off", {})
    seeds = sorted(set(lo) & set(lj))
    c = paper.claim("jasmin_on_minus_off_lyapunov")
    e = stats.estimate([lo[s]["mean"] - lj[s]["mean"] for s in seeds], c.direction, 0.0, paper=c.value)
    rows.append(_row(c.id, e, f"{dyn_path}: lyapunov.{{{reference},jasmin_off}}.mean",
                     budget_of(cells, [reference, "jasmin_off"])))
    p1 = dyn.get("prop1", {})
    fr = [v.get("fraction_within", math.nan) for v in p1.values()]
    tight = [v.get("tightness_median", math.nan) for v in p1.values()]
    e = {"n": len(fr), "mean": float(np.min(fr)) if fr else math.nan, "std": math.nan, "ci_low": math.nan,
         "ci_high": math.nan}
    row = _row("prop1_bound", e, f"{dyn_path}: prop1", budget_of(cells, [reference]),
               "; ".join(f"{s}: within {v.get('fraction_within', math.nan):.3f}, tightness min "
                         f"{v.get('tightness_min', math.nan):.3g} / median {v.get('tightness_median', math.nan):.3g}, "
                         f"L_max {v.get('L_max', math.nan):.3g}; with L = {v.get('paper_L', math.nan):g}: within "
                         f"{v.get('fraction_within_paper_L', math.nan):.3f}" for s, v in p1.items()))
    row["verdict"] = stats.bound_verdict(fr, tight)
    rows.append(row)
    family = [i for i, r in enumerate(rows) if paper.claim(r["claim"]).family]
    for i, h in zip(family, stats.holm([rows[i]["p_vs_null"] for i in family])):
        rows[i]["holm_p"] = h
    for r in rows:
        e = r.pop("_e")
        conv = r.pop("_conv")
        if not r["verdict"]:
            r["replication"] = stats.replication(e)
            c = paper.claim(r["claim"])  # per_unit: unit_p gates it (NaN: undecided)
            r["verdict"] = decide(e, conv, r["holm_p"] if c.family else None, replication_min,
                                  r["unit_p"] if c.per_unit else None)
        else:  # Prop. 1's bound verdict: the same gate (numbers, no verdict, where a run had not finished learning)
            r["verdict"] = gate(r["verdict"], conv)
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def verdict_counts(claims_: pd.DataFrame) -> Dict[str, int]:
    """How many rows carry each verdict: supports, contradicts, inconclusive (at this budget) first, always present,
    then the rows counted apart (fact, not a claim, not measured, holds, vacuous) where any."""
    counts = claims_.verdict.value_counts().to_dict()
    out = {key: int(counts.pop(v, 0)) for v, key in stats.COUNTED.items()}
    return {**out, **{k: int(v) for k, v in counts.items()}}


def summary_line(claims_: pd.DataFrame) -> str:
    """ "supports k · contradicts m · inconclusive n", then the rows counted apart."""
    c = verdict_counts(claims_)
    head = " · ".join(f"{k} {c[k]}" for k in stats.COUNTED.values())
    rest = {k: v for k, v in c.items() if k not in stats.COUNTED.values()}
    label = lambda k: f"“{k}”" if "," in k else k  # noqa: E731  (a label with a comma is quoted)
    return head + (" (apart: " + " · ".join(f"{label(k)} {v}" for k, v in rest.items()) + ")" if rest else "")


def to_markdown(df: pd.DataFrame) -> str:
    return df.to_markdown(index=False)


VERDICT_COLORS = {stats.SUPPORTS: "#1a9850", stats.CONTRADICTS: "#d73027", stats.INCONCLUSIVE: "#7f7f7f",
                  stats.VACUOUS: "#fdae61", stats.FACT: "#000000", stats.NOT_A_CLAIM: "#4575b4",
                  stats.NOT_MEASURED: "#d9d9d9", stats.NOT_CONVERGED: "#969696"}
DATASET_NAMES = {"fashion_mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100",
                 "imagenet100": "ImageNet-100", "synthetic": "synthetic"}  # for figure titles


def verdict_color(verdict: str) -> str:
    """A verdict's colour in every figure (`VERDICT_COLORS`; a verdict with a suffix, e.g. "inconclusive at this
    budget" written "inconclusive", by its start; black if none matches)."""
    if verdict in VERDICT_COLORS:
        return VERDICT_COLORS[verdict]
    v = str(verdict)
    return next((c for k, c in VERDICT_COLORS.items() if v and (v.startswith(k) or k.startswith(v))), "k")


def dataset_name(name: str) -> str:
    """params' base.dataset as a title writes it ('fashion_mnist' -> 'Fashion-MNIST')."""
    return DATASET_NAMES.get(name, name)


def test_images(limit: int = 0, dataset: str = "") -> str:
    """The test images a number rests on, from base.test_limit (or study.robustness_test_limit): 'the whole
    Fashion-MNIST test split' (0) or 'the first 2,000 Fashion-MNIST test images'."""
    ds = f"{dataset_name(dataset)} " if dataset else ""
    return f"the first {int(limit):,} {ds}test images" if limit else f"the whole {ds}test split"


def budget_title(results: str = "results", reference: str = "ref") -> str:
    """ "n seeds (paired), T train images × E epochs per cell" line for the figures' titles: the reference's seeds and
    images, and the epochs that ran in every cell of the figure (`epochs_ran`: not the cap where early stopping cut
    it)."""

    cells = collect(results)
    ref = cells[cells.cell == reference]
    return (f"{ref.seed.nunique()} seeds (paired), {_unique(ref, 'train_images')} train images × {epochs_ran(cells)} "
            "per cell")


def claims_figure(claims_: pd.DataFrame, title: str = ""):
    """Ours (mean and 95 % interval over the seeds) against the paper's own number (diamond) for every claim, one
    panel per unit, coloured by verdict; the null (dashed tick) and the equivalence margin (band) per row."""
    import matplotlib.pyplot as plt

    c = claims_[claims_.ours_mean.notna()].reset_index(drop=True)
    # one panel per unit; the equivalence rows (0 ± margin, e.g. a step-count collapse of tens of points) get their
    # own, so that their range does not squeeze the headline intervals next to them
    c["panel"] = [u + (" (equivalence)" if d == "equivalent" else "") for u, d in zip(c.unit, c.direction)]
    units = list(dict.fromkeys(c.panel))
    main = max(units, key=lambda u: (c.panel == u).sum())
    rest = [u for u in units if u != main]
    n_main, n_rest = (c.panel == main).sum(), sum((c.panel == u).sum() for u in rest)
    fig = plt.figure(figsize=(12, 0.45 * max(n_main, n_rest + 1.2 * len(rest)) + 2.4))
    gs = fig.add_gridspec(max(len(rest), 1), 2, width_ratios=(1.1, 1),
                          height_ratios=[(c.panel == u).sum() + 1 for u in rest] or [1])
    axes = {main: fig.add_subplot(gs[:, 0])}
    for i, u in enumerate(rest):
        axes[u] = fig.add_subplot(gs[i, 1])
    for u, ax in axes.items():
        g = c[c.panel == u].reset_index(drop=True)
        for i, r in g.iterrows():
            col = VERDICT_COLORS.get(r.verdict, "k")
            lo, hi = r.ci_low, r.ci_high
            xerr = None if math.isnan(lo) else [[r.ours_mean - lo], [hi - r.ours_mean]]
            ax.errorbar(r.ours_mean, i, xerr=xerr, fmt="o", color=col, capsize=3, ms=6)
            if not math.isnan(r.paper_value):
                ax.plot(r.paper_value, i, marker="D", ms=7, mfc="none", mec="k", ls="")
            if not math.isnan(r.null):
                ax.plot([r.null, r.null], [i - 0.35, i + 0.35], color="k", ls="--", lw=0.9)
            if not math.isnan(r.margin):
                ax.fill_betweenx([i - 0.3, i + 0.3], r.null - r.margin, r.null + r.margin, color="#1a9850", alpha=0.12)
        ax.set_yticks(range(len(g)), g.claim, fontsize=9)
        ax.set_ylim(len(g) - 0.5, -0.5)
        unit = g.unit.iloc[0]
        ax.set_xlabel({"pt": "Acc@1 difference (pt)", "%": "difference (% of the free model's Acc@1)",
                       "ratio": "Acc@1 student / teacher", "x": "parameter ratio teacher / student",
                       "r": "correlation r", "exponent": "mean CLS exponent difference",
                       "fraction": "fraction of (image, step) within the bound"}.get(unit, unit)
                      + (" — equivalence rows" if u != unit else ""), fontsize=9)
        ax.tick_params(axis="x", labelsize=9)
        ax.xaxis.set_major_locator(plt.MaxNLocator(6))
    handles = [plt.Line2D([], [], marker="o", ls="", color=VERDICT_COLORS[v], label=v)
               for v in dict.fromkeys(c.verdict) if v in VERDICT_COLORS]
    handles += [plt.Line2D([], [], marker="D", ls="", mfc="none", mec="k", label="the paper's value"),
                plt.Line2D([], [], ls="--", color="k", label="null"),
                plt.Rectangle((0, 0), 1, 1, color="#1a9850", alpha=0.12, label="equivalence margin")]
    top = 1 - 0.8 / fig.get_figheight()  # title and legend: about 0.8 inch
    fig.legend(handles=handles, loc="upper center", ncol=min(len(handles), 4), fontsize=9, frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.38 / fig.get_figheight()))
    fig.suptitle(f"Claims of the paper: ours (mean, 95% CI) vs the paper's value.\n{title}", fontsize=10, y=0.995)
    fig.tight_layout(rect=(0, 0, 1, top))
    return fig
