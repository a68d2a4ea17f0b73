"""Seed statistics for claims: mean ± std over seeds, paired differences with t confidence intervals, and effect
sizes of a per-sample quantity against correctness (point-biserial r with a Fisher-z interval, AUC).

    d_s = a_s - b_s (same seed s: same data order and init);  CI95 = mean(d) ± t(0.975, n-1) · std(d) / sqrt(n)

A comparison is "resolved" when its interval excludes the null value (0 for a difference), otherwise it is
"not resolved at this budget" and must not be ranked.
"""
from __future__ import annotations

import math
from typing import Dict, Sequence

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
