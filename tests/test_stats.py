"""Claims' statistics with known answers: t tests against 0 and against a value, two one-sided tests, Holm, the
comparison with the paper's number, and every verdict flipping when the data do."""
import math

import numpy as np
import pytest

from odevit.repro import stats

T2_95 = 2.919985580355516  # t(0.95, 2): the 90 % interval with 3 values


def _p_df2(t: float) -> float:
    """Two-sided p of a t statistic with 2 degrees of freedom (closed form: F(t) = 1/2 + t / (2 sqrt(2 + t^2)))."""
    return 1 - abs(t) / math.sqrt(2 + t * t)


def test_p_value_against_zero_and_against_a_value():
    assert stats.p_value([1.0, 2.0, 3.0]) == pytest.approx(_p_df2(2 / (1 / math.sqrt(3))))  # 0.0742
    assert stats.p_value([1.0, 2.0, 3.0], 2.0) == pytest.approx(1.0)
    assert stats.p_value([1.0, 2.0, 3.0], 5.0) == pytest.approx(_p_df2(-3 / (1 / math.sqrt(3))))
    assert math.isnan(stats.p_value([1.0]))
    assert stats.p_value([2.0, 2.0, 2.0], 0.0) == 0.0 and stats.p_value([2.0, 2.0], 2.0) == 1.0  # no spread


def test_tost_known_answer():
    d = [0.1, 0.2, -0.1]
    m, se = np.mean(d), np.std(d, ddof=1) / math.sqrt(3)
    t = stats.tost(d, 1.0)
    assert t["ci90_low"] == pytest.approx(m - T2_95 * se) and t["ci90_high"] == pytest.approx(m + T2_95 * se)
    # the larger one-sided p: against the upper margin, t = (m - 1) / se; one-sided p = two-sided p / 2
    assert t["p"] == pytest.approx(_p_df2((m - 1) / se) / 2)
    far = stats.tost([3.0, 3.5, 4.0], 1.0)
    assert far["p"] > 0.5 and far["ci90_low"] > 1
    with pytest.raises(ValueError, match="equivalence_margin_pts"):
        stats.tost(d, 0.0)


def test_holm_known_answer_and_nan():
    # sorted 0.01, 0.03, 0.04 -> x3, x2, x1 = 0.03, 0.06, 0.04 -> running max 0.03, 0.06, 0.06
    np.testing.assert_allclose(stats.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    h = stats.holm([0.01, math.nan, 0.04])  # NaN does not count: two tests
    assert h[0] == pytest.approx(0.02) and math.isnan(h[1]) and h[2] == pytest.approx(0.04)


def test_vs_paper_flips():
    assert stats.vs_paper(1.0, 2.0, 5.8) == "below the paper's"
    assert stats.vs_paper(5.0, 7.0, 5.8) == "consistent with the paper's"
    assert stats.vs_paper(6.0, 7.0, 5.8) == "above the paper's"
    assert stats.vs_paper(1.0, 2.0, None) == ""
    e = stats.estimate([2.0, 2.5, 3.0], "greater", paper=5.8)
    assert e["vs_paper"] == "below the paper's" and e["p_vs_paper"] == pytest.approx(_p_df2((2.5 - 5.8) / (0.5 / math.sqrt(3))))


@pytest.mark.parametrize("direction, x, expected", [
    ("greater", [2.0, 2.5, 3.0], stats.SUPPORTS),
    ("greater", [-2.0, -2.5, -3.0], stats.CONTRADICTS),
    ("greater", [1.0, -1.0, 0.5], stats.INCONCLUSIVE),
    ("less", [2.0, 2.5, 3.0], stats.CONTRADICTS),
    ("less", [-2.0, -2.5, -3.0], stats.SUPPORTS),
    ("less", [1.0, -1.0, 0.5], stats.INCONCLUSIVE),
    ("equivalent", [0.1, 0.2, -0.1], stats.SUPPORTS),  # 90 % CI [-0.19, 0.32] inside +-1
    ("equivalent", [3.0, 3.5, 4.0], stats.CONTRADICTS),  # 95 % CI [2.26, 4.74] outside +-1
    ("equivalent", [-1.05, -1.45, -1.85], stats.INCONCLUSIVE),  # 95 % CI [-2.44, -0.46] straddles -1
    ("greater", [2.5], stats.INCONCLUSIVE),  # one seed: no interval
    ("greater", [], stats.NOT_MEASURED),
    ("none", [2.0, 2.5, 3.0], stats.NOT_A_CLAIM),
    ("fact", [22.4, 22.4], stats.FACT),
])
def test_verdict_flips_with_the_data(direction, x, expected):
    e = stats.estimate(x, direction, 0.0, margin=1.0 if direction == "equivalent" else None)
    assert stats.verdict(e) == expected


def test_equivalence_around_a_nonzero_centre_and_margin_size():
    e = stats.estimate([0.94, 0.941, 0.939], "equivalent", null=0.939, margin=0.0108)
    assert stats.verdict(e) == stats.SUPPORTS and e["ci90_low"] > 0.939 - 0.0108
    e = stats.estimate([0.74, 0.75, 0.745], "equivalent", null=0.939, margin=0.0108)
    assert stats.verdict(e) == stats.CONTRADICTS
    wide = stats.estimate([0.1, 0.2, -0.1], "equivalent", margin=0.2)  # 90 % CI reaches 0.32 > 0.2
    assert stats.verdict(wide) == stats.INCONCLUSIVE
    with pytest.raises(ValueError, match="margin"):
        stats.estimate([1.0, 2.0], "equivalent")
    with pytest.raises(ValueError, match="direction"):
        stats.estimate([1.0, 2.0], "bigger")


def test_family_member_needs_the_holm_p():
    e = stats.estimate([2.0, 2.5, 3.0], "greater")
    assert stats.verdict(e, holm_p=0.01) == stats.SUPPORTS
    assert stats.verdict(e, holm_p=0.2) == stats.INCONCLUSIVE
    c = stats.estimate([-2.0, -2.5, -3.0], "greater")
    assert stats.verdict(c, holm_p=0.03) == stats.CONTRADICTS and stats.verdict(c, holm_p=0.06) == stats.INCONCLUSIVE


def test_bound_verdict_flips():
    assert stats.bound_verdict([1.0, 1.0, 1.0], [2.0, 3.0, 4.0]) == stats.SUPPORTS
    assert stats.bound_verdict([1.0, 1.0, 1.0], [2.0, 30.0, 4.0]) == stats.VACUOUS  # one seed's bound >= 10x everywhere
    assert stats.bound_verdict([1.0, 0.99, 1.0], [2.0, 3.0, 4.0]) == stats.CONTRADICTS  # one error above the bound
    assert stats.bound_verdict([1.0, 1.0], [math.nan, math.nan]) == stats.INCONCLUSIVE  # tightness not measured
    assert stats.bound_verdict([], []) == stats.NOT_MEASURED


def test_finding_names_the_higher_side():
    assert stats.finding(stats.estimate([2.0, 2.5, 3.0], "none"), "ce", "pub") == "differs: ce higher"
    assert stats.finding(stats.estimate([-2.0, -2.5, -3.0], "none"), "ce", "pub") == "differs: pub higher"
    assert stats.finding(stats.estimate([1.0, -1.0, 0.5], "none"), "ce", "pub") == "no resolved difference"


def test_paper_numbers_and_their_arithmetic():
    from pathlib import Path

    from odevit.repro import paper

    c = paper.CLAIMS
    assert c["ts_minus_free"].value == pytest.approx(86.7 - 80.9) and "+7.8 pt" in c["ts_minus_free"].arithmetic
    assert c["ts_ce_minus_free"].value == pytest.approx(72.1 - 57.9)
    assert c["ts_ce_minus_free_rel"].value == pytest.approx(100 * (0.721 / 0.579 - 1), abs=1e-5)
    assert c["retention"].value == pytest.approx(0.867 / 0.923, abs=1e-6) and c["retention"].direction == "greater"
    assert c["r1_minus_r4"].value == pytest.approx(-1.8) and c["r1_minus_r4"].direction == "less"
    assert c["compression_total"].value == pytest.approx(85 / 3.8, abs=1e-6)
    assert c["jasmin_on_minus_off_lyapunov"].value == pytest.approx(0.2379 - 0.4045)
    assert {k for k, v in c.items() if v.family} == {"lie_trotter_minus_parallel", "jasmin_on_minus_off", "r1_minus_r4",
                                                     "centernorm_minus_layernorm", "softmax_minus_uniform_schedule",
                                                     "qkv_spectral_minus_xavier"}
    assert not any("§" in v.source or "§" in v.statement for v in c.values())  # no section number nobody can check
    doc = Path(__file__).resolve().parents[1] / "docs" / "paper.md"
    assert doc.read_text() == paper.markdown(), "python -m odevit.repro.paper, then commit docs/paper.md"


def _cdf_df2(t: float) -> float:
    """CDF of Student's t with 2 degrees of freedom (closed form)."""
    return 0.5 + t / (2 * math.sqrt(2 + t * t))


T2_975 = 4.302652729911275  # t(0.975, 2): the 95 % interval with 3 values


def test_unit_p_gates_a_decisive_verdict():
    """A per-seed correlation over a handful of units: the seeds' interval decides only if every seed's test over
    the units does too (unit_p = their largest p); NaN decides nothing; an inconclusive row stays so."""
    e = stats.estimate([0.40, 0.50, 0.45], "less", 0.0)
    assert stats.verdict(e, replication_min=0) == stats.CONTRADICTS
    assert stats.verdict(e, replication_min=0, unit_p=0.03) == stats.CONTRADICTS
    assert stats.verdict(e, replication_min=0, unit_p=0.08) == stats.INCONCLUSIVE
    assert stats.verdict(e, replication_min=0, unit_p=float("nan")) == stats.INCONCLUSIVE
    wide = stats.estimate([0.4, -0.3, 0.1], "less", 0.0)
    assert stats.verdict(wide, replication_min=0, unit_p=0.001) == stats.INCONCLUSIVE


def test_replication_known_answer_and_the_verdict_it_flips():
    # [1, 1.5, 0.8]: mean 1.1, se = std / sqrt(3); the 95 % interval excludes 0 (t = 5.28 > 4.30), but a replicate
    # decides the same with P = F_2((t - 4.30) / sqrt 2) = 0.72 < 0.9: floating-point noise could flip it
    x = [1.0, 1.5, 0.8]
    t = np.mean(x) / (np.std(x, ddof=1) / math.sqrt(3))
    e = stats.estimate(x, "greater")
    assert e["ci_low"] > 0 and stats.replication(e) == pytest.approx(_cdf_df2((t - T2_975) / math.sqrt(2)))
    assert stats.replication(e) == pytest.approx(0.7203, abs=1e-4) and stats.verdict(e) == stats.INCONCLUSIVE
    tight = stats.estimate([1.0, 1.2, 0.9], "greater")  # t = 11.7: P = 0.983
    assert stats.replication(tight) == pytest.approx(0.983, abs=1e-3) and stats.verdict(tight) == stats.SUPPORTS
    # the same on the other side: contradicts only when a replicate would contradict again
    assert stats.verdict(stats.estimate([-1.0, -1.5, -0.8], "greater")) == stats.INCONCLUSIVE
    assert stats.verdict(stats.estimate([-1.0, -1.2, -0.9], "greater")) == stats.CONTRADICTS
    # nothing decided: no replication probability; no spread: a replicate decides the same for sure
    assert math.isnan(stats.replication(stats.estimate([1.0, -1.0, 0.5], "greater")))
    assert stats.replication(stats.estimate([2.0, 2.0, 2.0], "greater")) == 1.0


def test_replication_of_an_equivalence():
    # inside +-1: both one-sided tests must pass again, P >= 1 - miss(low) - miss(high), t_c = t(0.95, 2)
    x = [0.1, 0.2, -0.1]
    m, se = np.mean(x), np.std(x, ddof=1) / math.sqrt(3)
    want = _cdf_df2(((m + 1) / se - T2_95) / math.sqrt(2)) + _cdf_df2(((1 - m) / se - T2_95) / math.sqrt(2)) - 1
    e = stats.estimate(x, "equivalent", margin=1.0)
    assert stats.replication(e) == pytest.approx(want) and stats.verdict(e) == stats.SUPPORTS
    near = stats.estimate([0.5, 0.7, 0.3], "equivalent", margin=1.0)  # inside, but close to +1: a replicate often is not
    assert near["ci90_high"] < 1.0 and stats.replication(near) < stats.REPLICATION
    assert stats.verdict(near) == stats.INCONCLUSIVE
    # outside: the distance to the margin edge it lies beyond, t_c = t(0.975, 2)
    out = stats.estimate([3.0, 3.5, 4.0], "equivalent", margin=1.0)
    se = 0.5 / math.sqrt(3)
    assert stats.replication(out) == pytest.approx(_cdf_df2(((3.5 - 1) / se - T2_975) / math.sqrt(2)))


def test_paper_yaml_is_checked_when_read():
    """The claims are data (odevit/repro/paper.yaml): a value's operation and a claim's direction outside the allowed
    ones stop with the file's name; a value is computed from the table, so the table's numbers move it."""
    from odevit.repro import paper

    with pytest.raises(ValueError, match=r"paper\.yaml: value\.op 'typed'"):
        paper.paper_value({"op": "typed", "terms": [["small", "cifar10", "free", "cifar10"]]})
    good = {"id": "x", "statement": "s", "source": "{tldr}", "direction": "greater", "statistic": "t", "unit": "pt"}
    assert paper._claim(good).source == paper.TLDR
    with pytest.raises(ValueError, match=r"paper\.yaml: claim x: direction 'bigger'"):
        paper._claim(dict(good, direction="bigger"))
    value, text = paper.paper_value({"op": "diff_pt", "label": "L", "terms": [["base", "cifar10", "small", "cifar10"]]})
    assert value == pytest.approx(100 * (0.885 - 0.867)) and text == "L: 0.885 − 0.867 = +1.8 pt"
