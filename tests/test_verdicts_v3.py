"""Plan v3's rules (params.yaml plan_v3.rules) as the verdict writer applies them: the deciding (1 - 2 alpha) interval
and the decisions against 0 and delta, the floor window, the learning-left rule (its bound and its false-alarm rate on
flat runs), a row that the learning left could flip, the machine binding and the plan's own checks; each verdict
flipping when the data do, the numbers computed by hand."""
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from odevit.repro import fast
from odevit.repro import plan as P
from odevit.repro import verdicts as V

SUP = dict(id="q", claim="c", kind="paired", a="ref", b="free", metric="acc1", unit="pt", test="superiority",
           direction="greater", delta=2.9)
EQ = dict(SUP, kind="within", test="equivalence", direction="none", margin=1.0, delta=None)
T975_2 = 4.302652729911275  # t(0.975, 2)


def test_the_deciding_interval_and_the_decisions_against_zero_and_delta():
    e = V.decide_v3(np.array([2.0, 2.5, 3.0]), SUP, 0.025)  # level 0.95: t(0.975, 2); half = 4.3027 x 0.5 / sqrt 3
    half = T975_2 * 0.5 / math.sqrt(3)
    assert e["level"] == 0.95 and e["decide_low"] == pytest.approx(2.5 - half) and e["verdict"] == V.SUPPORTS
    small = np.array([0.2, 0.5, 0.8])  # [-0.245, 1.245]: below delta 2.9 -> contradicts
    assert V.decide_v3(small, SUP, 0.025)["decide_high"] == pytest.approx(0.5 + T975_2 * 0.3 / math.sqrt(3))
    assert V.decide_v3(small, SUP, 0.025)["verdict"] == V.CONTRADICTS
    assert V.decide_v3(small, dict(SUP, delta=1.0), 0.025)["verdict"] == V.INCONCLUSIVE  # 1.245 >= 1: open
    assert V.decide_v3(small + 1.0, SUP, 0.025)["verdict"] == V.SUPPORTS  # low 0.755 > 0 (a gain below delta)
    assert V.decide_v3(small, SUP, 0.0001)["verdict"] == V.INCONCLUSIVE  # a stricter level widens it past delta


def test_equivalence_decisions_flip():
    assert V.decide_v3(np.array([0.1, -0.1, 0.0, 0.05, -0.05]), EQ, 0.005)["verdict"] == V.SUPPORTS
    assert V.decide_v3(np.array([-65.0, -60.0, -70.0]), EQ, 0.005)["verdict"] == V.CONTRADICTS
    assert V.decide_v3(np.array([0.5, -1.5, 1.0]), EQ, 0.005)["verdict"] == V.INCONCLUSIVE


def test_the_floor_window_is_floored_not_rounded():
    assert [V.floor_window(e, 0.25) for e in (150, 60, 40, 8)] == [37, 15, 10, 2]


def _climb(epochs=40, end=0.80, slope_pts=0.2, window=10):
    """A run that rose to `end` and then climbs by slope_pts per epoch (exactly) over its floor window."""
    head = list(np.linspace(0.3, end, epochs - window))
    return head + [end + slope_pts / 100 * (k + 1) for k in range(window)]


def test_learning_left_is_the_floor_run_as_long_again_on_the_best_accuracy():
    ll = V.learning_left(_climb(), 0.25, 0.005, 1.0)  # fit(end) = 82.0, + 0.2 x 10 = 84.0; best 82.0 -> g = 2.0
    assert ll["window"] == 10 and ll["flagged"] and ll["slope"] == pytest.approx(0.2) and ll["g"] == pytest.approx(2.0)
    assert V.learning_left(_climb(), 0.25, 0.005, 0.5)["g"] == pytest.approx(1.0)  # half the horizon
    flat = V.learning_left([0.5] * 30 + [0.8] * 10, 0.25, 0.005, 1.0)
    assert not flat["flagged"] and flat["g"] == 0.0
    down = V.learning_left(_climb(slope_pts=-0.2), 0.25, 0.005, 1.0)
    assert not down["flagged"] and down["g"] == 0.0
    peaked = _climb()
    peaked[10] = 0.90  # best.pt came from the high-LR phase: the floor's climb stays below it
    assert V.learning_left(peaked, 0.25, 0.005, 1.0)["flagged"] and V.learning_left(peaked, 0.25, 0.005, 1.0)["g"] == 0.0


def test_the_false_alarm_rate_on_flat_runs_is_at_most_alpha_row():
    assert P.false_alarm(0.05, 10) == pytest.approx(1 - 0.995 ** 10) and P.false_alarm(0.05, 10) <= 0.05
    rng = np.random.default_rng(0)  # flat runs: 88 % plus the validation set's binomial noise (5,000 images)
    se = math.sqrt(0.88 * 0.12 / 5000)
    rows = [any(V.learning_left(list(0.88 + se * rng.standard_normal(40)), 0.25, 0.05 / 10, 1.0)["flagged"]
                for _ in range(10)) for _ in range(1500)]
    assert 0.03 < np.mean(rows) < 0.07  # 1 - (1 - 0.005)^10 = 0.049 (SE of the estimate 0.006)


def _row_plan(tmp_path):
    params = yaml.safe_load(open("params.yaml"))
    rules = params["plan_v3"]["rules"]
    study = dict(status="confirmatory", family="fam", description="d", budget={"train_limit": 1000, "epochs": 40},
                 cells={"ref": {}, "free": {"free": True}}, seeds=[1, 2, 3],
                 questions=[dict(SUP, id="ts", delta_reason="r", pilot={"sd": 0.5, "n": 6, "mean": 0.0})])
    return {"version": 3, "rules": dict(rules, primary_family="fam"), "teacher": params["teacher"],
            "studies": {"v3_x": study}}


def _runs(tmp_path, plan, ref_hist):
    rows = []
    for cell, accs in (("ref", [80.2, 80.5, 80.8]), ("free", [80.0, 80.0, 80.0])):
        for seed, acc in zip([1, 2, 3], accs):
            d = tmp_path / "v3_x" / cell / f"s{seed}"
            d.mkdir(parents=True, exist_ok=True)
            hist = ref_hist if cell == "ref" else [0.5] * 30 + [0.8] * 10
            pd.DataFrame({"epoch": range(1, 41), "val_acc1": hist}).to_csv(d / "history.csv", index=False)
            rows.append(dict(study="v3_x", cell=cell, seed=seed, acc1=acc, plan_hash=P.study_hash(plan, "v3_x"),
                             device="CPU: x"))
    return pd.DataFrame(rows)


def test_a_row_the_learning_left_could_flip_is_unsettled_and_says_by_how_much(tmp_path):
    plan = _row_plan(tmp_path)
    t = {"acc1": 95.0, "seed_sd": 0.1, "seed": 0, "converged": True}
    flat = [0.5] * 30 + [0.8] * 10
    row = V.judge_v3(plan, _runs(tmp_path, plan, flat), t, str(tmp_path), v2={}).iloc[0]
    assert row.verdict == V.CONTRADICTS and row.still_learning == "0 of 6"  # d = [0.2, 0.5, 0.8]: high 1.006 < 2.9
    row = V.judge_v3(plan, _runs(tmp_path, plan, _climb()), t, str(tmp_path), v2={}).iloc[0]
    # every ref run climbs: + 2.0 pt left -> d + g = [2.2, 2.5, 2.8], low 1.994 > 0 would support
    assert row.verdict_test == V.CONTRADICTS and row.learning_left_up == pytest.approx(2.0)
    # and the deciding interval each shift gives (alpha_each 0.05, one family of one row: t(0.95, 2) x 0.3 / sqrt 3 =
    # 0.506 either side of 2.5 and of 0.5)
    assert row.verdict == ("unsettled: the learning left could make it supports (mean +2.00 / -0.00 pt, interval then "
                           "[1.99, 3.01] / [-0.01, 1.01])")
    assert row.still_learning.startswith("3 of 6: ref s1 (+2.00)")


def test_against_plan_v2_says_replicated_decided_or_overturned():
    assert V.against_v2("supports", {"verdict": "supports", "verdict_test": "supports"}) == "replicates plan v2 (supports)"
    assert V.against_v2("contradicts", {"verdict": "supports", "verdict_test": "supports"}).startswith("overturns")
    assert V.against_v2("contradicts", {"verdict": "not converged (2 of 12 runs)", "verdict_test": "contradicts"}
                        ).startswith("decides what plan v2 left open")
    assert V.against_v2("inconclusive", {"verdict": "inconclusive"}) == "not decided (plan v2: inconclusive)"
    # an inconclusive plan v2 reading is left open, not overturned; a contrary one is overturned
    assert V.against_v2("contradicts", {"verdict": "inconclusive", "verdict_test": "inconclusive"}).startswith(
        "decides what plan v2 left open")
    assert V.against_v2("contradicts", {"verdict": "not converged (1 of 12 runs)", "verdict_test": "supports"}
                        ).startswith("overturns plan v2's reading")


def test_a_study_is_bound_to_the_machine_type_of_its_runs(tmp_path):
    d = tmp_path / "v3_x" / "ref" / "s1"
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({"provenance": {"device": "CPU: Intel Xeon"}}))
    assert fast.machine_refusal(str(tmp_path / "v3_x"), "CPU: Intel Xeon", "v3_x") == ""  # the same type: trains
    assert fast.machine_refusal(str(tmp_path / "v3_x"), "CPU: AMD EPYC", "v3_x").startswith(
        "v3_x: its runs were made on CPU: Intel Xeon; this machine is CPU: AMD EPYC.")
    assert fast.machine_refusal(str(tmp_path / "empty"), "CPU: AMD EPYC", "v3_y") == ""  # nothing made yet: any type


@pytest.mark.parametrize("edit, message", [
    (lambda p: p["plan_v3"]["studies"]["v3_1k"].__setitem__("seeds", [2100, 3101, 3102, 3103, 3104]),
     "plan_v3.studies.v3_1k.seeds: 2100 is not a fresh integer seed (already plan v2's)"),
    (lambda p: p["plan_v3"]["studies"]["v3_3k"].__setitem__("seeds", [3200, 3201, 3202]),
     "plan_v3.studies.v3_3k: ts_minus_free_3k reaches power"),
    (lambda p: p["plan_v3"]["studies"]["v3_1k"]["questions"][0].pop("delta"),
     "questions[ts_minus_free_1k]: superiority needs direction greater, delta > 0"),
    (lambda p: p["plan_v3"]["rules"]["convergence"].__setitem__("horizon", 0),
     "plan_v3.rules.convergence: rule learning_left, alpha_row in (0, 0.5), horizon > 0"),
])
def test_a_bad_plan_v3_stops_with_one_line_naming_the_key(tmp_path, edit, message):
    params = yaml.safe_load(open("params.yaml"))
    edit(params)
    f = tmp_path / "params.yaml"
    f.write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(P.PlanError, match=re.escape(message)):
        P.load(str(f))


def test_plan_v3_seeds_reach_the_power_its_rules_ask_for():
    rows = pd.DataFrame(P.power_rows(P.load("params.yaml", 3)))
    sup = rows[rows.test == "superiority"]
    assert len(sup) == 9 and (sup.power >= 0.8).all()
    # by hand for one row: planning SD 0.8856 x sqrt(5 / chi2.ppf(0.2, 5)) = 1.294; 6 seeds, alpha 0.05 / 6
    r = rows[rows.id == "ts_minus_free_3k"].iloc[0]
    assert r.planning_sd == pytest.approx(0.8856 * math.sqrt(5 / 2.342533), rel=1e-4) and r.seeds_needed == 6
    assert (rows.false_alarm <= 0.05).all()
