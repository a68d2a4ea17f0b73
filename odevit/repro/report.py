"""The report: the paper's main-table format filled from the stages' metrics files, the paper's numbers beside, and
the claims table — every claim of `paper.CLAIMS` tested on this run's seeds with a computed verdict
(`stats.verdict`: supports / contradicts / inconclusive at this budget)."""
from __future__ import annotations

import glob
import math
import os
import re
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from . import paper, stats
from .files import read_json, write_text  # noqa: F401  (report.write_text: 07_report's name)
from .results import collect

PAPER = paper.TABLE  # the authors' README results table (odevit/repro/paper.yaml: the paper's numbers and their sources)


def paper_table() -> pd.DataFrame:
    return PAPER.copy()


def _paper_acc1(model: str, dataset: str) -> tuple:
    rows = PAPER[PAPER.Model == model]
    if rows.empty:
        return None, None
    same = rows[rows.Dataset == dataset]
    r = (same if not same.empty else rows[rows.Dataset == "cifar10"]).iloc[0]
    return float(r["Acc@1"]), r["Dataset"]


def _pm(x: pd.Series, scale: float = 1.0, nd: int = 4) -> str:
    return f"{x.mean() * scale:.{nd}f} ± {x.std(ddof=1) * scale:.{nd}f}" if len(x) > 1 else f"{x.mean() * scale:.{nd}f}"


def main_table(dataset: str, results: str = "results", reference: str = "ref") -> pd.DataFrame:
    """Our rows in the paper's format (Model, Dataset, Params (M), Losses, Acc@1/3/5 as mean ± std over the seeds)
    + the paper's Acc@1 for the same kind of row (same dataset where the paper has it, else its CIFAR-10 row) and which
    row that is ("Paper row": the +CE cell is Small with CE from epoch 0, the paper's only +CE row is CIFAR-100 Base)."""

    t = read_json(f"{results}/02_teacher/metrics.json")
    cells = collect(results)
    ref, free = cells[cells.cell == reference], cells[cells.cell == "free"]
    size = "Small" if float(read_json(f"{results}/04_distill/metrics.json")["mlp_ratio"]) == 1.0 else "Base"
    rows = [(f"Teacher – ViT depth {t['depth']}, D {t['embed_dim']} (trained here, {t['epochs']} epochs)",
             "Teacher – DINO-base + Training Only Head", "CE", None, t)]
    if len(free):
        rows.append(("ODE (free, from scratch; the student's exact architecture)", "ODE (free, from scratch)",
                     "CE+JaSMin", free, None))
    ce = cells[cells.cell == "ce"]
    # a study with a `ce` cell has the label-free reference (the authors' Small rows) and the +CE cell (their
    # CIFAR-100 Base row); an older one trained CE in the reference itself
    rows.append((f"ODE Teacher–Student {size}", f"ODE Teacher–Student {size}",
                 "MSE+JaSMin" if len(ce) else "MSE+JaSMin+CE", ref, None))
    if len(ce):
        rows.append((f"ODE Teacher–Student {size} + CE", ("ODE Teacher–Student Base", "cifar100"), "MSE+JaSMin+CE",
                     ce, None))
    out = []
    for name, paper_name, losses, df, m in rows:
        p_acc, p_ds = (paper.acc1(*paper_name), paper_name[1]) if isinstance(paper_name, tuple) else \
            _paper_acc1(paper_name, dataset)
        if m is not None:
            accs = {k: f"{m[k]:.4f}" for k in ("acc1", "acc3", "acc5")}
            params, enc, seeds = m["params_m"], m["encoder_params"], 1
        else:
            accs = {k: _pm(df[k]) for k in ("acc1", "acc3", "acc5")}
            params, enc, seeds = float(df.params_m.iloc[0]), float(df.encoder_params.iloc[0]), len(df)
        out.append({"Model": name, "Dataset": dataset, "Params (M)": round(params, 3), "Losses": losses,
                    "Acc@1": accs["acc1"], "Acc@3": accs["acc3"], "Acc@5": accs["acc5"], "Seeds": seeds,
                    "Encoder params (M)": round(enc / 1e6, 3), "Paper Acc@1": p_acc, "Paper dataset": p_ds,
                    "Paper row": paper_name[0] if isinstance(paper_name, tuple) else paper_name})
    return pd.DataFrame(out)


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


QUICK_RUN_LABEL = "quick run (CPU slice, not converged: no verdict)"  # how 03 / 05 / 07 name a run whose claims are gated


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


def metric_keys(d: Dict[str, int]) -> Dict[str, int]:
    """The same dict with plain identifier keys for `dvc metrics` (every run of non-word characters becomes one underscore)."""
    return {re.sub(r"\W+", "_", k).strip("_"): v for k, v in d.items()}


def summary_line(claims_: pd.DataFrame) -> str:
    """ "supports k · contradicts m · inconclusive n", then the rows counted apart."""
    c = verdict_counts(claims_)
    head = " · ".join(f"{k} {c[k]}" for k in stats.COUNTED.values())
    rest = {k: v for k, v in c.items() if k not in stats.COUNTED.values()}
    label = lambda k: f"“{k}”" if "," in k else k  # noqa: E731  (a label with a comma is quoted)
    return head + (" (apart: " + " · ".join(f"{label(k)} {v}" for k, v in rest.items()) + ")" if rest else "")


def dynamics_summary(dyn: dict) -> pd.DataFrame:
    """One row per measured quantity of 06_dynamics (its metrics.json)."""
    rows = []
    for cell, per_seed in dyn["lyapunov"].items():
        for seed, v in per_seed.items():
            rows.append((f"CLS exponent vs correctness, {cell} seed {seed.removeprefix('seed')} ({v['n']} images)",
                         f"point-biserial r = {v['r']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}], AUC = {v['auc']:.3f}; "
                         f"mean exponent {v['mean']:.4f}"))
    for seed, v in dyn["prop1"].items():
        rows.append((f"Prop. 1, ref seed {seed.removeprefix('seed')}: fraction of (image, step) with error <= bound",
                     f"{v['fraction_within']:.3f} with the measured L (max {v['L_max']:.2f})"
                     + (f", tightness (bound / error) min {v['tightness_min']:.3g}, median {v['tightness_median']:.3g}"
                        if "tightness_min" in v else "")
                     + f"; {v['fraction_within_paper_L']:.3f} with L = {v['paper_L']}"))
    e = dyn["euler"]
    rows.append(("Observed convergence order (Euler / model's solver)",
                 f"{abs(e['order_parallel']):.2f} / {abs(e['order_model_solver']):.2f}"))
    h = dyn["halting"]
    b = h["best_within_tolerance"]
    rows.append((f"Adaptive halting (best within {h['tolerance_pts']} pt Acc@1)",
                 f"{b['saving'] * 100:.1f}% fewer ψ evaluations ({b['mean_evals']:.2f} of {h['N']}), "
                 f"Acc@1 {b['acc1']:.4f} vs {h['full_acc1']:.4f}" if b else
                 f"no threshold keeps Acc@1 within {h['tolerance_pts']} pt of {h['full_acc1']:.4f}"))
    return pd.DataFrame(rows, columns=["Analysis", "Result"])


def to_markdown(df: pd.DataFrame) -> str:
    return df.to_markdown(index=False)


def figures(results: str = "results") -> List[str]:
    """Every PNG the stages wrote, in stage order (the report's own excluded)."""
    return sorted(p for p in glob.glob(f"{results}/*/*.png") if "/07_report/" not in p)


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


def ablations(cells: pd.DataFrame, reference: str = "ref") -> pd.DataFrame:
    """`comparisons` (reference − cell, raw 95 % interval) with, per cell, the claim it tests (paper.CLAIMS), the
    direction the paper predicts, the Holm-adjusted p of the ablation family beside the raw p, and the verdict —
    `decide`, the claims table's own: a cell or reference run that had not finished learning gives "not converged"."""
    table = comparisons(cells, reference)
    by_cell = {b: cid for cid, a, b in PAIRS if a == "ref"}
    table["claim"] = table.cell.map(by_cell).fillna("")
    table["direction"] = [paper.claim(c).direction if c else "none" for c in table.claim]
    fam = [bool(c) and paper.claim(c).family for c in table.claim]
    table["holm_p"] = math.nan
    table.loc[fam, "holm_p"] = stats.holm(table.loc[fam, "p_vs_null"].to_numpy())
    verdicts, reps = [], []
    for r in table.itertuples():
        e = {"direction": r.direction, "n": r.seeds, "ci_low": r.ci_low, "ci_high": r.ci_high, "null": 0.0}
        verdicts.append(decide(e, budget_of(cells, [reference, r.cell])[1], None if math.isnan(r.holm_p) else r.holm_p))
        reps.append(stats.replication(e))
    table["verdict"], table["replication"] = verdicts, reps
    return table


def _side(direction: str, reference: str, cell: str) -> str:
    """What the paper predicts for a row of reference − cell, in words ('paper: ref better, > 0')."""
    return {"greater": f"paper: {reference} better, > 0", "less": f"paper: {cell} better, < 0"}.get(direction,
                                                                                                  "no prediction")


def ablation_figure(table: pd.DataFrame, reference: str = "ref", title: str = "", test: str = ""):
    """reference − cell (Acc@1 pt) with its raw 95 % interval per cell, coloured by verdict; each row says which side
    the paper predicts in words (the reference better, > 0, or, for a row whose direction is 'less' such as mlp4,
    the cell better, < 0) and carries the Holm-adjusted p of the family. `title`: the budget line (`budget_title`);
    `test`: the test images the accuracies rest on (`test_images`)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 0.45 * len(table) + 2.4))
    for i, r in enumerate(table.itertuples()):
        col = verdict_color(r.verdict)
        ax.errorbar(r.diff_mean, i, xerr=[[r.diff_mean - r.ci_low], [r.ci_high - r.diff_mean]], fmt="o", color=col,
                    capsize=3)
        holm = "" if math.isnan(r.holm_p) else f", Holm p {r.holm_p:.3f}"
        ax.annotate(f"{r.diff_mean:+.2f} pt ({_side(r.direction, reference, r.cell)}{holm})", (1.0, i),
                    xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=8, color=col)
    ax.axvline(0, color="k", lw=0.8, ls="--")
    ax.set_yticks(range(len(table)), table.cell)
    ax.invert_yaxis()
    n = table.seeds.unique() if "seeds" in table else []
    over = f" over {n[0]} paired seeds" if len(n) == 1 else " over the paired seeds"
    ax.set_xlabel(f"Acc@1 {reference} − cell (pt), mean and 95 % t interval{over}\n"
                  f"> 0: {reference} scored higher; < 0: the cell scored higher (the text right of each row says "
                  "which side the paper predicts)", fontsize=9)
    handles = [plt.Line2D([], [], marker="o", ls="", color=verdict_color(v), label=v) for v in
               dict.fromkeys(table.verdict)]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.01), ncol=len(handles), fontsize=8,
              frameon=False)
    head = "Ablations (05_ablations): each cell against the reference " + reference
    fig.suptitle(head + (f"\n{title}" if title else "") + (f"; test Acc@1 on {test}" if test else ""), fontsize=10)
    fig.subplots_adjust(left=0.12, right=0.62, top=1 - 1.2 / fig.get_figheight(), bottom=1.1 / fig.get_figheight())
    return fig


def robustness_figure(rob: pd.DataFrame, trained_n: int, test_limit: int = 0, dataset: str = "",
                      reference: str = "ref", labels: Optional[Dict[str, str]] = None, title: str = ""):
    """Acc@1 against the solver steps N used at evaluation (log2 axis, ticks at the N evaluated), one panel per cell
    (the reference first), so that eleven lines need no eleven hues: the cell's mean over its seeds with a band of
    ±1 sd over them, the reference's mean in grey in every other panel, the trained N as a labelled dashed line.
    `rob`: one row per (cell, seed, N) with acc1 (05_ablations' robustness.csv); `test_limit`, `dataset`: the test
    images of the curves (study.robustness_test_limit, base.dataset); `labels`: a cell's words under its name (its
    overrides; the panels follow their order); `title`: the budget line (`budget_title`)."""
    import matplotlib.pyplot as plt

    labels = labels or {}
    g = rob.assign(acc=100 * rob.acc1).groupby(["cell", "N"]).acc.agg(["mean", "std", "count"]).reset_index()
    g["std"] = g["std"].fillna(0.0)  # one seed: no band
    order = [c for c in labels if c in set(g.cell)] + [c for c in dict.fromkeys(rob.cell) if c not in labels]
    cells = [reference] * (reference in set(g.cell)) + [c for c in order if c != reference]  # the labels' order
    ncol = min(4, len(cells))
    nrow = -(-len(cells) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.0 * ncol + 0.4, 2.3 * nrow + 1.5), sharex=True, sharey=True,
                             squeeze=False)
    ref = g[g.cell == reference].sort_values("N")
    ns = sorted(int(n) for n in g.N.unique())
    for ax, cell in zip(axes.flat, cells):
        c = g[g.cell == cell].sort_values("N")
        if cell != reference and len(ref):
            ax.plot(ref.N, ref["mean"], color="0.55", lw=1.2, ls="-", zorder=1)
        col = "k" if cell == reference else "C0"
        ax.fill_between(c.N, c["mean"] - c["std"], c["mean"] + c["std"], color=col, alpha=0.18, lw=0, zorder=2)
        ax.plot(c.N, c["mean"], color=col, marker="o", ms=3.5, lw=1.5, zorder=3)
        ax.axvline(trained_n, color="C3", ls="--", lw=1.0, zorder=0)
        words = re.sub(r"[\w./-]*/", "", labels.get(cell, ""))  # a preset's file without its folder
        words = words if len(words) <= 40 else words[:39] + "…"
        ax.set_title(cell + (f"\n{words}" if words else ""), fontsize=9)
        ax.grid(lw=0.4, alpha=0.6)
    for ax in axes.flat[len(cells):]:
        ax.axis("off")
    for k, ax in enumerate(axes.flat[:len(cells)]):
        if k + ncol >= len(cells):  # the lowest panel of its column: the x axis is labelled there
            ax.set_xlabel("solver steps N at evaluation (log scale)", fontsize=8)
            ax.tick_params(axis="x", labelbottom=True, labelsize=8)
    ax0 = axes.flat[0]
    ax0.set_xscale("log", base=2)
    ax0.set_xticks(ns, [str(n) for n in ns])
    ax0.minorticks_off()
    ax0.annotate(f"trained N = {trained_n}", (trained_n, 0.03), xycoords=("data", "axes fraction"), xytext=(-3, 0),
                 textcoords="offset points", ha="right", va="bottom", fontsize=8, color="C3")
    for ax in axes[:, 0]:
        ax.set_ylabel("test Acc@1 (%)", fontsize=9)
    seeds = rob.groupby("cell").seed.nunique()
    n = (f"{seeds.iloc[0]} seed" + ("s" if seeds.iloc[0] > 1 else "") if seeds.nunique() == 1
         else f"{seeds.min()}–{seeds.max()} seeds")
    band = f"band: ±1 sd over {n}" if seeds.max() > 1 else "one seed: no band"
    handles = [plt.Line2D([], [], color="C0", marker="o", ms=3.5, label="the panel's cell: mean over its seeds"),
               *([plt.Rectangle((0, 0), 1, 1, color="C0", alpha=0.18, label=band)] if seeds.max() > 1 else []),
               plt.Line2D([], [], color="0.55", label=f"{reference} (the reference): mean, in every panel"),
               plt.Line2D([], [], color="C3", ls="--", label=f"trained N = {trained_n} (distill.num_steps)")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(f"Step-count robustness (05_ablations): test Acc@1 against the solver steps N at evaluation\n"
                 f"{len(cells)} cells × {n}, {test_images(test_limit, dataset)}; {band}"
                 + (f"\ntraining: {title}" if title else ""), fontsize=10)
    fig.tight_layout(rect=(0, 0.35 / fig.get_figheight(), 1, 1))
    return fig


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
