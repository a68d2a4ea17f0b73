"""Seed statistics for claims: mean ± std over seeds, paired differences with t confidence intervals, and effect
sizes of a per-sample quantity against correctness (point-biserial r with a Fisher-z interval, AUC).

    d_s = a_s - b_s (same seed s: same data order and init);  CI95 = mean(d) ± t(0.975, n-1) · std(d) / sqrt(n)

A comparison is "resolved" when its interval excludes the null value (0 for a difference), otherwise it is
"not resolved at this budget" and must not be ranked. A claim is a hypothesis with a direction: `estimate` tests
the per-seed values against the null (t test, scipy), against the paper's own number, and for "robust" claims with
two one-sided tests (statsmodels ttost_paired) within a margin; `holm` adjusts a family's p values (statsmodels);
`verdict` turns one estimate into supports / contradicts / inconclusive at this budget — the only place a verdict
is decided (`bound_verdict` for the one bound).

Floating-point noise: a run on another CPU type (other SIMD kernels, another thread count) follows another
floating-point path, and training amplifies the difference (for small nets, one changed bit diverges about as far
as a new seed: Summers & Dinneen 2021). `replication` models a replicate on another machine as a fresh draw of the
per-seed values, and `verdict` keeps a decisive label only if such a replicate would reach it again with probability
>= REPLICATION; a verdict that floating-point noise would flip more often reads inconclusive.
"""
from __future__ import annotations

import math
from typing import Dict, Mapping, Optional, Sequence

import numpy as np
from scipy import stats as st


def mean_ci(x: Sequence[float], level: float = 0.95) -> Dict[str, float]:
    """Mean, std (ddof 1) and the t interval of the mean of n values. With n = 1: std and interval are NaN."""
    a = np.asarray(x, dtype=np.float64)
    n = len(a)
    if n == 0:
        raise ValueError("mean_ci: no values")
    m = float(a.mean())
    if n == 1:
        return {"n": 1, "mean": m, "std": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    s = float(a.std(ddof=1))
    half = float(st.t.ppf(0.5 + level / 2, n - 1)) * s / math.sqrt(n)
    return {"n": n, "mean": m, "std": s, "ci_low": m - half, "ci_high": m + half}


def resolved(ci_low: float, ci_high: float, null: float = 0.0) -> bool:
    """True when the interval excludes the null value (NaN bounds: never resolved)."""
    if math.isnan(ci_low) or math.isnan(ci_high):
        return False
    return ci_low > null or ci_high < null


def paired(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Dict[str, float]:
    """a vs b over the same seeds (element s of each = seed s): their means and stds, and the paired difference
    a - b with its t interval; `resolved` when the interval excludes 0."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired: need two equal-length 1-D sequences, got {a.shape} and {b.shape}")
    d = mean_ci(a - b, level)
    ma, mb = mean_ci(a, level), mean_ci(b, level)
    return {"n": d["n"], "mean_a": ma["mean"], "std_a": ma["std"], "mean_b": mb["mean"], "std_b": mb["std"],
            "diff_mean": d["mean"], "diff_std": d["std"], "ci_low": d["ci_low"], "ci_high": d["ci_high"],
            "resolved": resolved(d["ci_low"], d["ci_high"])}


def point_biserial(values: Sequence[float], flag: Sequence[bool], level: float = 0.95) -> Dict[str, float]:
    """Correlation of a per-sample quantity with a binary flag (e.g. correct): r, its p value, and the Fisher-z
    interval (z = atanh r ± z_q / sqrt(n - 3))."""
    v, f = np.asarray(values, dtype=np.float64), np.asarray(flag, dtype=np.float64)
    n = len(v)
    if n < 4 or f.min() == f.max():
        return {"n": n, "r": math.nan, "p_value": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    r, p = st.pointbiserialr(f, v)
    half = float(st.norm.ppf(0.5 + level / 2)) / math.sqrt(n - 3)
    z = math.atanh(max(min(r, 1 - 1e-12), -1 + 1e-12))
    return {"n": n, "r": float(r), "p_value": float(p), "ci_low": math.tanh(z - half), "ci_high": math.tanh(z + half)}


def auc(values: Sequence[float], flag: Sequence[bool]) -> float:
    """P(value of a flagged sample > value of an unflagged one), ties counted half (Mann-Whitney U / n1 n0)."""
    v, f = np.asarray(values, dtype=np.float64), np.asarray(flag, dtype=bool)
    n1, n0 = int(f.sum()), int((~f).sum())
    if n1 == 0 or n0 == 0:
        return math.nan
    ranks = st.rankdata(v)
    return float((ranks[f].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


SUPPORTS, CONTRADICTS, INCONCLUSIVE = "supports", "contradicts", "inconclusive at this budget"
VACUOUS, FACT, NOT_A_CLAIM, NOT_MEASURED = "holds, vacuous", "fact", "not a claim", "not measured"
NOT_CONVERGED = "not converged"  # numbers without a verdict: a run the claim rests on had not finished learning
DIRECTIONS = ("greater", "less", "equivalent", "none", "fact")
ALPHA = 0.05
COUNTED = {SUPPORTS: "supports", CONTRADICTS: "contradicts", INCONCLUSIVE: "inconclusive"}  # the summary's counts
VACUOUS_RATIO = 10.0  # a bound >= 10x the measured error everywhere "holds, vacuous"
REPLICATION = 0.9  # a decisive verdict needs P(an independent replicate decides the same) >= this (`replication`)


def p_value(x: Sequence[float], value: float = 0.0) -> float:
    """Two-sided one-sample t test p of mean(x) = value (scipy.stats.ttest_1samp); NaN with fewer than 2 values;
    with no spread 0 or 1 (the mean differs from the value or not)."""
    a = np.asarray(x, dtype=np.float64)
    if len(a) < 2:
        return math.nan
    if float(a.std()) == 0.0:
        return 1.0 if float(a[0]) == value else 0.0
    return float(st.ttest_1samp(a, value).pvalue)


def tost(x: Sequence[float], margin: float, center: float = 0.0) -> Dict[str, float]:
    """Two one-sided tests that mean(x) lies inside center ± margin (statsmodels ttost_paired against a constant):
    p = the larger one-sided p; the 90 % t interval (inside the margin iff p < 0.05)."""
    from statsmodels.stats.weightstats import ttost_paired

    if not margin > 0:
        raise ValueError(f"tost: margin = {margin!r}: expected > 0 (params.yaml study.equivalence_margin_pts)")
    a = np.asarray(x, dtype=np.float64)
    ci90 = mean_ci(a, 1 - 2 * ALPHA) if len(a) else {"ci_low": math.nan, "ci_high": math.nan}
    if len(a) < 2:
        p = math.nan
    elif float(a.std()) == 0.0:
        p = 0.0 if abs(float(a[0]) - center) < margin else 1.0
    else:
        p = float(ttost_paired(a, np.full_like(a, center), -margin, margin)[0])
    return {"p": p, "ci90_low": ci90["ci_low"], "ci90_high": ci90["ci_high"]}


def holm(p: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p values (statsmodels multipletests, method "holm"); NaN entries stay NaN and do not count."""
    from statsmodels.stats.multitest import multipletests

    a = np.asarray(p, dtype=np.float64)
    out = np.full_like(a, math.nan)
    ok = ~np.isnan(a)
    if ok.any():
        out[ok] = multipletests(a[ok], method="holm")[1]
    return out


def vs_paper(ci_low: float, ci_high: float, value: Optional[float]) -> str:
    """Where the paper's own number lies relative to our 95 % interval ("" when the paper gives none)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "no interval (fewer than 2 seeds)"
    if ci_high < value:
        return "below the paper's"
    if ci_low > value:
        return "above the paper's"
    return "consistent with the paper's"


def estimate(x: Sequence[float], direction: str, null: float = 0.0, margin: Optional[float] = None,
             paper: Optional[float] = None) -> Dict[str, float]:
    """Everything a claim row needs from its per-seed values x: mean, std, n, 95 % t interval, p against `null`
    (two-sided), for direction "equivalent" the TOST within null ± margin, and against the paper's value its p and
    `vs_paper`."""
    if direction not in DIRECTIONS:
        raise ValueError(f"estimate: direction {direction!r} is not one of {DIRECTIONS}")
    if direction == "equivalent" and margin is None:
        raise ValueError("estimate: an 'equivalent' claim needs a margin (params.yaml study.equivalence_margin_pts)")
    a = np.asarray(x, dtype=np.float64)
    a = a[~np.isnan(a)]
    if len(a) == 0:
        e = {"n": 0, "mean": math.nan, "std": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    elif direction == "fact":  # a fixed quantity: no interval, no test
        return {"n": len(a), "mean": float(a.mean()), "std": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                "direction": direction, "null": math.nan, "p_vs_null": math.nan}
    else:
        e = mean_ci(a)
    out = {**e, "direction": direction, "null": null, "p_vs_null": p_value(a, null) if len(a) else math.nan,
           "margin": margin if direction == "equivalent" else math.nan, "tost_p": math.nan,
           "ci90_low": math.nan, "ci90_high": math.nan,
           "paper_value": math.nan if paper is None else float(paper),
           "p_vs_paper": p_value(a, paper) if paper is not None and len(a) else math.nan,
           "vs_paper": vs_paper(e["ci_low"], e["ci_high"], paper) if len(a) else ""}
    if direction == "equivalent" and len(a):
        t = tost(a - null, margin)
        out.update(tost_p=t["p"], ci90_low=t["ci90_low"] + null, ci90_high=t["ci90_high"] + null)
    return out


def _decided(e: Mapping[str, float]) -> str:
    """The label the intervals alone give (before Holm and the replication rule): see `verdict`. Only a greater /
    less / equivalent claim with an interval is decided."""
    d, lo, hi, null = e["direction"], e["ci_low"], e["ci_high"], e["null"]
    if d not in ("greater", "less", "equivalent") or math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    if d == "equivalent":
        m = e["margin"]
        return (SUPPORTS if e["tost_p"] < ALPHA and null - m < e["ci90_low"] and e["ci90_high"] < null + m else
                CONTRADICTS if lo > null + m or hi < null - m else INCONCLUSIVE)
    above, below = lo > null, hi < null
    return (SUPPORTS if (above if d == "greater" else below) else
            CONTRADICTS if (below if d == "greater" else above) else INCONCLUSIVE)


def replication(e: Mapping[str, float]) -> float:
    """Probability that an independent replicate (n fresh per-seed values from the same distribution: what another
    machine's floating-point path amounts to once training has amplified it) decides what these intervals decide.

    With mean m, standard error se = (ci_high - ci_low) / (2 t(0.975, n-1)) and a boundary b that the decision
    needs the replicate's t statistic to clear by t_c, our distance to it in standard errors is t = |m - b| / se.
    A replicate's mean differs from ours by se * sqrt(2) * T, T ~ t(n-1) (flat prior, its own spread taken equal to
    ours), so P = F_t(n-1)((t - t_c) / sqrt(2)). Greater / less and an equivalence row outside its margin: b = the
    null (or the margin edge it lies beyond), t_c = t(0.975, n-1). Equivalence inside the margin: both one-sided
    tests must pass again, t_c = t(0.95, n-1) at each edge, P = 1 - (miss low) - (miss high) (the replicate's
    spread held equal to ours, it cannot miss both). Holm is not part of it (`verdict` applies both).
    NaN when the intervals decide nothing (no replicate is needed to keep "inconclusive"; so also for a fact, an
    attribution without a direction, or no seeds); 1 with no spread."""
    v = _decided(e)
    if v == INCONCLUSIVE:
        return math.nan
    n, lo, hi, null = int(e["n"]), e["ci_low"], e["ci_high"], e["null"]
    t975 = float(st.t.ppf(0.975, n - 1))
    se, m = (hi - lo) / (2 * t975), (lo + hi) / 2
    if se == 0:
        return 1.0
    again = lambda dist, tc: float(st.t.cdf((dist / se - tc) / math.sqrt(2), n - 1))  # noqa: E731
    if e["direction"] != "equivalent":
        return again(abs(m - null), t975)
    mg = e["margin"]
    if v == CONTRADICTS:
        return again(m - (null + mg) if lo > null + mg else (null - mg) - m, t975)
    t95 = float(st.t.ppf(0.95, n - 1))
    return max(0.0, again(m - (null - mg), t95) + again((null + mg) - m, t95) - 1.0)


def verdict(e: Mapping[str, float], holm_p: Optional[float] = None, replication_min: float = REPLICATION,
            unit_p: Optional[float] = None) -> str:
    """The verdict of one claim from its `estimate`: the only function that decides one.

    greater / less (the paper predicts the statistic above / below `null`): supports if the 95 % interval lies on
    the paper's side, contradicts if it lies on the other side; equivalent: supports if the TOST puts the mean inside
    null ± margin (p < 0.05, 90 % interval inside), contradicts if the 95 % interval lies entirely outside; none:
    not a claim; fact: fact (no test). For a family member (holm_p given) a decisive verdict also needs holm_p < 0.05.
    A decisive verdict also needs `replication` >= `replication_min` (REPLICATION; 0 = the intervals alone): floating-
    point noise (another CPU type) must not flip it. A statistic that is itself a correlation over a handful of units
    (e.g. r over the 10 classes, one r per seed) gives `unit_p`, the largest over the seeds of its test over those
    units: a decisive verdict also needs unit_p < 0.05 (the seeds' interval only says the r is stable across seeds,
    not that 10 units can tell it from 0). Otherwise, and with fewer than 2 seeds, inconclusive at this budget (no
    seeds at all: not measured)."""
    d = e["direction"]
    if e["n"] == 0:  # no run of the cells it needs (a fact or an attribution without data is not measured either)
        return NOT_MEASURED
    if d == "none":
        return NOT_A_CLAIM
    if d == "fact":
        return FACT
    v = _decided(e)
    if v != INCONCLUSIVE and holm_p is not None and not holm_p < ALPHA:
        return INCONCLUSIVE
    if v != INCONCLUSIVE and replication_min > 0 and not replication(e) >= replication_min:
        return INCONCLUSIVE
    if v != INCONCLUSIVE and unit_p is not None and not unit_p < ALPHA:
        return INCONCLUSIVE
    return v


def finding(e: Mapping[str, float], a: str = "a", b: str = "b") -> str:
    """Which side of the null the 95 % interval lies on, in words ("differs: A higher" / "no resolved difference")."""
    if e["n"] == 0:
        return NOT_MEASURED
    if not resolved(e["ci_low"], e["ci_high"], e["null"]):
        return "no resolved difference"
    return f"differs: {a if e['ci_low'] > e['null'] else b} higher"


def bound_verdict(fraction_within: Sequence[float], tightness_median: Sequence[float]) -> str:
    """A bound that can fail: contradicts if any seed has a measured error above the bound (fraction_within < 1);
    holds, vacuous if it holds everywhere but some seed's bound is >= 10x the error at the typical (image, step)
    (its median tightness bound / error >= 10: a bound that is informative at one early step only is still
    vacuous); supports if it holds and every seed's median tightness is < 10; inconclusive at this budget without
    data (NaN tightness)."""
    f = np.asarray(fraction_within, dtype=np.float64)
    t = np.asarray(tightness_median, dtype=np.float64)
    if len(f) == 0:
        return NOT_MEASURED
    if (f < 1.0).any():
        return CONTRADICTS
    if np.isnan(f).any() or len(t) != len(f) or np.isnan(t).any():
        return INCONCLUSIVE
    return VACUOUS if (t >= VACUOUS_RATIO).any() else SUPPORTS
