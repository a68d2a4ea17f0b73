"""Plan v2 (params.yaml): checked on load, families across studies, and its verdicts (verdicts.judge) against hand-computed
cases, each verdict flipping when the data do."""
import copy
import math

import pandas as pd
import pytest
import yaml
from scipy import stats as st

from odevit.repro import plan as plan_mod
from odevit.repro import verdicts
from odevit.repro.plan import PlanError

PLAN = plan_mod.load("params.yaml")


def test_committed_plan_loads_with_its_families():
    plan_mod.check(PLAN)
    fams = plan_mod.families(PLAN)
    assert PLAN["rules"]["primary_family"] == "v2_headline"
    assert len(fams["v2_headline"]) == 9 and len(fams["v2_steps"]) == 10  # the headline rows of all four budgets
    assert plan_mod.alpha_each(PLAN, "v2_headline") == pytest.approx(0.05 / 9)


@pytest.mark.parametrize("edit, match", [
    (lambda p: p["studies"]["v2_3k"].__setitem__("seeds", [2100, 2201]), "not a fresh integer seed"),
    (lambda p: p["studies"]["v2_10k"]["questions"][2].pop("margin"), "margin needed"),
    (lambda p: p["rules"]["convergence"].__setitem__("rule", "full_schedule"), "floor_slope"),
    (lambda p: p.__setitem__("version", 1), "version: 2"),
    (lambda p: p["studies"]["v2_1k"]["questions"][0]["pilot"].__setitem__("sd", 50.0), "power"),
    (lambda p: p["publish"][0].__setitem__("cell", "layernorm"), r"publish\[0\]: \{tag, study, cell\}"),
])
def test_bad_plans_are_refused_naming_the_key(edit, match):
    p = copy.deepcopy(PLAN)
    edit(p)
    with pytest.raises(PlanError, match=match):
        plan_mod.check(p)


def test_hash_changes_with_the_block_only():
    p = copy.deepcopy(PLAN)
    h = {n: plan_mod.study_hash(PLAN, n) for n in PLAN["studies"]}
    p["publish"] = []  # which runs are published decides no verdict: no study's hash covers it
    assert {n: plan_mod.study_hash(p, n) for n in PLAN["studies"]} == h
    p["studies"]["v2_1k"]["budget"]["epochs"] = 151
    assert plan_mod.study_hash(p, "v2_1k") != h["v2_1k"] and plan_mod.study_hash(p, "v2_3k") == h["v2_3k"]


def _mini(test="superiority", margin=None):
    q = {"id": "q", "claim": "c", "kind": "paired", "a": "ref", "b": "free", "metric": "acc1", "unit": "pt",
         "test": test, "direction": "greater" if test != "equivalence" else "none", "pilot": {"sd": 1, "n": 3, "mean": 0}}
    if margin is not None:
        q["margin"] = margin
    return {"rules": {"alpha": 0.05, "primary_family": "f"},
            "studies": {"s": {"family": "f", "budget": {"train_limit": 1000, "epochs": 10}, "seeds": [1, 2, 3],
                              "cells": {"ref": {}, "free": {"free": True}}, "questions": [q]}},
            "teacher": {}}


def _runs(ref, free, conv=(True,) * 6):
    rows = [dict(study="s", cell="ref", seed=s, acc1=a, converged=c, plan_hash="x", device="d")
            for s, a, c in zip((1, 2, 3), ref, conv[:3])]
    rows += [dict(study="s", cell="free", seed=s, acc1=a, converged=c, plan_hash="x", device="d")
             for s, a, c in zip((1, 2, 3), free, conv[3:])]
    return pd.DataFrame(rows)


T = {"acc1": 90.0, "seed_sd": 0.2, "seed": 0, "converged": True}


def test_verdict_by_hand_and_flips():
    plan = _mini()
    r = verdicts.judge(plan, _runs([82.0, 83.0, 84.5], [80.0, 80.5, 81.0]), T).iloc[0]
    d = [2.0, 2.5, 3.5]  # ref - free per seed
    mean, sd = sum(d) / 3, pd.Series(d).std()
    half = st.t.ppf(1 - 0.05 / 2, 2) * sd / math.sqrt(3)
    assert (r["mean"], r["ci_low"], r["ci_high"]) == pytest.approx((mean, mean - half, mean + half))
    assert r.verdict == "supports" and r.fair
    flipped = verdicts.judge(plan, _runs([80.0, 80.5, 81.0], [82.0, 83.0, 84.5]), T).iloc[0]
    assert flipped.verdict == "contradicts"
    noisy = verdicts.judge(plan, _runs([82.0, 79.0, 84.5], [80.0, 80.5, 81.0]), T).iloc[0]
    assert noisy.verdict == "inconclusive"


def test_row_labels_before_the_test():
    plan = _mini()
    good = _runs([82.0, 83.0, 84.5], [80.0, 80.5, 81.0])
    assert verdicts.judge(plan, good.iloc[1:], T).iloc[0].verdict == "not measured yet (2 of 3 seeds)"
    one_cell = verdicts.judge(plan, good[good.cell == "ref"], T).iloc[0]  # a cell finished, its partner not yet
    assert one_cell.verdict == "not measured yet (0 of 3 seeds)" and one_cell.converged == "–"
    assert verdicts.judge(plan, good, T).iloc[0].converged == "6/6"
    assert verdicts.judge(plan, _runs([82.0, 83.0, 84.5], [80.0, 80.5, 81.0], (True,) * 5 + (False,)),
                           T).iloc[0].verdict == "not converged (1 of 6 runs)"
    weak = dict(T, acc1=80.0)  # a teacher below the free ODE's mean (80.5): not a fair test of distillation
    r = verdicts.judge(plan, good, weak).iloc[0]
    assert r.verdict == "unfair (teacher not above free)" and r.verdict_test == "supports"


def test_retention_margin_rule():
    q = {"margin_rule": "teacher_spread"}
    assert verdicts.margin(q, {"acc1": 90.0, "seed_sd": 0.5}) == pytest.approx(1.0)
    assert verdicts.margin(q, {"acc1": 90.0, "seed_sd": 0.1}) == pytest.approx(2 * 100 * math.sqrt(0.09 / 10000))


def test_two_machine_kinds_need_their_measured_shift():
    plan = _mini()
    r = _runs([82.0, 83.0, 84.5], [80.0, 80.5, 81.0])
    r.loc[r.cell == "free", "device"] = "cpu"  # free made on a second machine kind
    row = verdicts.judge(plan, r, T).iloc[0]
    assert row.verdict == "not measured yet (machine shift between cpu and d)"
    rerun = pd.DataFrame([dict(study="s", cell="ref", seed=1, acc1=82.1, device="cpu")])
    sh = verdicts.shifts(r, rerun)
    assert sh["shift"].tolist() == pytest.approx([0.1]) and sh.device_committed.tolist() == ["d"]
    row = verdicts.judge(plan, r, T, shift=sh).iloc[0]
    assert row.verdict == "supports" and row.verdict_under_shift == "same"
    assert row.machine_shift == "cpu runs minus the same seeds' d runs: +0.10 (ref s1) pt; mean +0.10, largest |shift| 0.10"
    big = pd.DataFrame([dict(study="s", cell="ref", seed=1, acc1=84.5, device="cpu")])  # a 2.5 pt shift
    row = verdicts.judge(plan, r, T, shift=verdicts.shifts(r, big)).iloc[0]
    assert row.verdict == "supports" and row.verdict_under_shift == "changes"
    same = verdicts.judge(plan, _runs([82.0, 83.0, 84.5], [80.0, 80.5, 81.0]), T, shift=sh).iloc[0]
    assert same.machine_shift is None and same.verdict == "supports"  # one machine kind: no shift needed


def test_every_committed_run_records_the_plan_hash_of_params_yaml():
    """The plan moved into params.yaml with its text: each committed run's recorded plan hash (its study block +
    rules + the teacher recipe) is today's, and an edit of a study's block changes that study's hash only."""
    import glob
    import json

    plan = plan_mod.load("params.yaml")
    files = sorted(glob.glob("results/v2/v2_*/*/s*/metrics.json"))
    assert len(files) == 90
    for f in files:
        m = json.load(open(f))
        assert m["plan_hash"] == plan_mod.study_hash(plan, m["study"]), f
    for f in glob.glob("results/v2/teacher/s*/metrics.json"):
        assert json.load(open(f))["plan_hash"] == plan_mod.study_hash(plan, None), f
    edited = copy.deepcopy(plan)
    edited["teacher"]["depth"] = 12  # the architecture keys beside the recipe are not the plan's
    assert plan_mod.study_hash(edited, "v2_1k") == plan_mod.study_hash(plan, "v2_1k")
    edited["teacher"]["epochs"] = 41  # the recipe is
    assert plan_mod.study_hash(edited, "v2_1k") != plan_mod.study_hash(plan, "v2_1k")


def test_an_ablation_cell_leaves_the_plan_hash_a_question_that_reads_it_does_not():
    """study_hash covers the cells a question reads: a cell added in no question (an ablation, docs/pipeline.md) leaves
    the study's hash, so its committed rows stay pre-registered; a question that reads the cell, or an edit of a cell
    a question reads, changes it (those rows read post hoc)."""
    plan = plan_mod.load("params.yaml")
    h = plan_mod.study_hash(plan, "v2_10k")
    edited = copy.deepcopy(plan)
    edited["studies"]["v2_10k"]["cells"]["parallel"] = {"solver": "parallel"}
    assert plan_mod.study_hash(edited, "v2_10k") == h
    edited["studies"]["v2_10k"]["questions"].append(dict(edited["studies"]["v2_10k"]["questions"][0],
                                                         id="parallel_minus_ref", a="parallel", b="ref"))
    assert plan_mod.study_hash(edited, "v2_10k") != h
    edited = copy.deepcopy(plan)
    edited["studies"]["v2_10k"]["cells"]["free"] = {"lr": 1e-3}
    assert plan_mod.study_hash(edited, "v2_10k") != h


def test_plan_v3_was_committed_before_each_of_its_runs():
    """Every plan v3 run records its study's hash (today's) and the commit whose code trained it (run_key.commit); the
    params.yaml of that commit gives the same hash: the plan was in git before the run was made. Plan v3's hashes
    differ from plan v2's (its own rules), and its first commit adds no run."""
    import glob
    import json
    import subprocess

    plan3 = plan_mod.load("params.yaml", 3)
    files = sorted(glob.glob("results/v3/v3_*/*/s*/metrics.json"))
    for f in files:
        m = json.load(open(f))
        assert m["plan_hash"] == plan_mod.study_hash(plan3, m["study"]), f
        then = yaml.safe_load(subprocess.run(["git", "show", f"{m['run_key']['commit']}:params.yaml"],
                                             capture_output=True, text=True, check=True).stdout)
        v3_then = {"rules": then["plan_v3"]["rules"], "teacher": then["teacher"], "studies": then["plan_v3"]["studies"]}
        assert plan_mod.study_hash(v3_then, m["study"]) == m["plan_hash"], f
    first = subprocess.run(["git", "log", "--format=%H", "-S", "plan_v3:", "--", "params.yaml"], capture_output=True,
                           text=True, check=True).stdout.split()[-1]
    added = subprocess.run(["git", "show", "--name-only", "--format=", first], capture_output=True, text=True,
                           check=True).stdout.split()
    assert "params.yaml" in added and not any(p.startswith("results/v3/") for p in added)
    assert {plan_mod.study_hash(plan3, s) for s in plan3["studies"]}.isdisjoint(
        {plan_mod.study_hash(plan_mod.load("params.yaml"), s) for s in plan_mod.load("params.yaml")["studies"]})
