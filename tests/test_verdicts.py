"""The verdict of a row's per-seed values (verdicts.decide): hand-computed intervals, each verdict flipping when the
data do (the rows built from runs: tests/test_plan.py)."""
import math

import pytest

from odevit.repro import verdicts as V

Q = dict(id="q", claim="c", kind="paired", a="ref", b="free", metric="acc1", unit="pt", test="superiority",
         direction="greater")


def test_superiority_interval_by_hand_and_flips():
    x = [2.0, 2.5, 3.0]  # mean 2.5, sd 0.5; alpha 0.05: t(0.975, 2) = 4.302653
    e = V.decide(x, Q, 0.05)
    half = 4.302652729911275 * 0.5 / math.sqrt(3)
    assert (e["mean"], e["sd"]) == (2.5, 0.5) and e["ci_low"] == pytest.approx(2.5 - half)
    assert e["verdict"] == V.SUPPORTS
    assert V.decide([-v for v in x], Q, 0.05)["verdict"] == V.CONTRADICTS
    assert V.decide([1.0, -1.0, 0.5], Q, 0.05)["verdict"] == V.INCONCLUSIVE
    # a stricter family level widens the interval: alpha 0.001, t(0.9995, 2) = 31.6 -> half 9.1 -> inconclusive
    assert V.decide(x, Q, 0.001)["verdict"] == V.INCONCLUSIVE
    less = dict(Q, direction="less")
    assert V.decide(x, less, 0.05)["verdict"] == V.CONTRADICTS


def test_non_inferiority_and_equivalence_flip():
    ni = dict(Q, test="non_inferiority", margin=5.6)
    assert V.decide([-1.0, -0.5, -1.5], ni, 0.05)["verdict"] == V.SUPPORTS          # well above -5.6
    assert V.decide([-9.0, -8.5, -9.5], ni, 0.05)["verdict"] == V.CONTRADICTS       # entirely below -5.6
    assert V.decide([-5.0, -7.0, -6.0], ni, 0.05)["verdict"] == V.INCONCLUSIVE
    eq = dict(Q, test="equivalence", direction="none", margin=1.0)
    assert V.decide([0.1, -0.1, 0.0, 0.05, -0.05], eq, 0.05)["verdict"] == V.SUPPORTS
    assert V.decide([-65.0, -60.0, -70.0], eq, 0.05)["verdict"] == V.CONTRADICTS
    assert V.decide([0.5, -1.5, 1.0], eq, 0.05)["verdict"] == V.INCONCLUSIVE
