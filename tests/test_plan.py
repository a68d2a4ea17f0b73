"""The analysis plan: its validation, hash and power calculation against hand-computed values."""
import copy
import math

import pytest
import yaml

from odevit.repro import plan as P


@pytest.fixture(scope="module")
def committed():
    return P.load("plan.yaml")


def test_power_matches_the_textbook_value():
    # paired t, d = 1, n = 10, two-sided alpha 0.05: power 0.8031 (Cohen 1988; G*Power gives 0.8031)
    assert P.power(1.0, 1.0, 10, 0.05) == pytest.approx(0.8031, abs=5e-4)
    assert P.power(0.0, 1.0, 10, 0.05) == pytest.approx(0.05, abs=1e-9)  # at the null: the level
    assert P.power(1.0, 1.0, 20, 0.05) > P.power(1.0, 1.0, 10, 0.05)     # more seeds, more power
    assert P.power(40.0, 1.0, 5, 0.01) == pytest.approx(1.0)              # scipy's nct gives NaN here: normal limit


def test_equivalence_power_needs_small_sd():
    assert P.power(0.0, 0.2, 5, 0.05, "equivalence", 1.0) > 0.95
    assert P.power(0.0, 2.0, 5, 0.05, "equivalence", 1.0) < 0.05
    assert P.power(-10.0, 1.0, 5, 0.05, "equivalence", 1.0) > 0.99  # far outside: decides (contradicts)


def test_planning_sd_is_the_upper_80_percent_bound():
    # chi2.ppf(0.2, 2) = -2 ln 0.8 = 0.446287; sqrt(2 / 0.446287) = 2.11693
    assert P.planning_sd(1.0, 3) == pytest.approx(math.sqrt(2 / (-2 * math.log(0.8))), rel=1e-9)


def test_committed_plan_is_valid_and_powered(committed):
    t = P.power_table(committed)
    confirm = t[t.study.str.startswith("confirm")]
    assert len(confirm) >= 9
    ok = (confirm.power_paper >= P.POWER_MIN) | (confirm.power_note.str.len() > 0)
    assert ok.all()
    assert set(t.family).__len__() == len(committed["studies"])  # one family per study


def test_hash_moves_with_the_study_block_only(committed):
    h = P.study_hash(committed, "confirm_1k")
    other = copy.deepcopy(committed)
    other["studies"]["confirm_55k"]["questions"][0]["claim"] += " (edited)"
    assert P.study_hash(other, "confirm_1k") == h            # another study's edit: not this study's business
    other["studies"]["confirm_1k"]["questions"][0]["margin"] = 0.5
    assert P.study_hash(other, "confirm_1k") != h
    other = copy.deepcopy(committed)
    other["rules"]["alpha"] = 0.1
    assert P.study_hash(other, "confirm_1k") != h            # the global rules belong to every study


@pytest.mark.parametrize("edit, message", [
    (lambda p: p["studies"]["confirm_1k"]["questions"][0].update(test="bayes"), "test must be one of"),
    (lambda p: p["studies"]["confirm_1k"]["questions"][0].update(b="nope"), "b = 'nope'"),
    (lambda p: p["studies"]["confirm_55k"]["questions"][2].pop("margin_reason"), "margin_reason"),
    (lambda p: p["studies"]["confirm_3k"].update(family="budget_1k"), "already study"),
    (lambda p: p["studies"]["confirm_1k"].update(seeds=[1, 1]), "distinct"),
    (lambda p: p["studies"]["confirm_1k"].update(seeds=[1, 2]), "power"),  # 2 seeds: not powered, no note
    (lambda p: p["studies"]["confirm_1k"]["budget"].pop("epochs"), "budget"),
    (lambda p: p["studies"]["teacher_strength_3k"]["teacher"].update(depth=12), "teacher training keys"),
    (lambda p: p["studies"]["teacher_strength_3k"]["teacher"].update(epochs=0), "teacher: epochs"),
    (lambda p: p["studies"]["teacher_strength_3k"]["teacher"].update(augment="yes"), "teacher: augment"),
    (lambda p: p["studies"]["teacher_strength_3k"]["cells"].update(
        ref_strong={"tau": 15.0}, ce_strong={"ce_weight": 1.0}), "no cell distils from it"),
    (lambda p: p["studies"]["teacher_strength_3k"].pop("teacher"), "_strong.teacher: .study. .distil"),  # no teacher to use
    (lambda p: p["studies"]["confirm_1k"]["cells"]["ref"].update(teacher="study"), "cells.ref.teacher"),
    (lambda p: p["studies"]["teacher_strength_3k"]["cells"]["ref_strong"].update(teacher="other"), "'study'"),
    (lambda p: p["studies"]["teacher_strength_3k"]["cells"].update(teacher={}), "not a cell"),
    (lambda p: p["studies"]["teacher_strength_3k"]["questions"][0].update(kind="teacher_gap"), "own teacher"),
])
def test_bad_plans_fail_naming_the_key(committed, tmp_path, edit, message):
    bad = copy.deepcopy(committed)
    edit(bad)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(P.PlanError, match=message):
        P.load(str(path))


def test_the_docs_study_template_passes_the_plan_check_and_the_runners_preflight(tmp_path):
    """docs/plan.md's 'Adding a study' template, as a user copies it: plan.yaml's check accepts it (power stated at
    the pilot's effect, no paper number), and with the stage step 3 generates the runner's preflight passes."""
    import re
    import shutil
    from pathlib import Path

    import yaml

    from odevit.repro import runner, stages

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs/plan.md").read_text()
    section = text[text.index("## Adding a study"):]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    study = yaml.safe_load(block)
    plan = P.load(str(root / "plan.yaml"))
    plan["studies"].update(study)
    P.check(plan)  # raises PlanError on a missing or wrong key
    (name,) = study
    dvc = tmp_path / "dvc.yaml"
    shutil.copy(root / "dvc.yaml", dvc)
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    assert stages.main(["--plan", str(tmp_path / "plan.yaml"), "--dvc", str(dvc)]) == 0  # step 3
    assert yaml.safe_load(dvc.read_text())["stages"][name]["cmd"].endswith(f"--study {name}")
    runner.preflight(plan, [name], params_file=str(root / "params.yaml"), dvc_file=str(dvc))
    row = P.power_table(plan).set_index("id").loc[study[name]["questions"][0]["id"]]
    assert row.power_pilot >= P.POWER_MIN  # the template's seeds reach its stated power at the pilot's effect


def test_make_study_is_the_one_command_after_the_plan_block():
    """docs/plan.md, 'Adding a study': after the plan block, `make study NAME=…` runs steps 3–5 in order (its dry run
    lists them: stages generated, runs trained, recorded in dvc.lock, verdicts, README); without NAME (or with `all`)
    it stops with one line when the Makefile is read, before its install and data prerequisites."""
    import subprocess
    from pathlib import Path

    import os

    root = Path(__file__).resolve().parents[1]
    # under `make test` this runs inside a make: without its MAKELEVEL/MAKEFLAGS the child is a top-level make (no
    # "Entering directory" lines, no inherited flags such as -n or -k)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")}
    make = ["make", "--no-print-directory"]
    r = subprocess.run([*make, "-n", "study", "NAME=my_ablation", "STAMP="], cwd=root, capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    steps = ["-m odevit.repro.stages", "-m odevit.repro.runner my_ablation --jobs", "-m odevit.repro.runner my_ablation "
             "--commit", "dvc repro -s evidence", "-m odevit.repro.readme"]
    at = [next(i for i, line in enumerate(lines) if s in line) for s in steps]
    assert at == sorted(at), lines
    for args, msg in (([], "make study NAME=STUDY: the name of a study in plan.yaml"),
                      (["NAME=all"], "make study NAME=all: every study is `make evidence`")):
        r = subprocess.run([*make, "study", *args], cwd=root, capture_output=True, text=True, env=env)  # no STAMP= here:
        # refused when the Makefile is read, before the install and data prerequisites (nothing runs)
        assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and msg in r.stderr
