"""The plan runner: which runs it schedules, and which training sources its dvc commit accepts."""
import json

import pytest

from odevit.repro import plan as P
from odevit.repro import runner


def test_runs_longest_budget_first_and_unknown_study_fails():
    plan = P.load("plan.yaml")
    todo = runner.runs(plan, ["confirm_1k", "confirm_55k"])
    assert todo[0][0] == "confirm_55k" and todo[-1][0] == "confirm_1k"
    assert len(todo) == sum(len(plan["studies"][s]["cells"]) * len(plan["studies"][s]["seeds"])
                            for s in ("confirm_1k", "confirm_55k"))
    with pytest.raises(P.PlanError, match="not one of"):
        runner.runs(plan, ["nope"])


def test_only_checked_equivalent_sources_are_accepted(tmp_path):
    path = tmp_path / "eq.json"
    path.write_text(json.dumps([{"old": "a", "new": "b"}, {"old": "b", "new": "c"}, {"old": "x", "new": "y"}]))
    assert runner.equivalent_sources("c", str(path)) == {"a", "b", "c"}  # a chain of checks ending today
    assert runner.equivalent_sources("b", str(path)) == {"a", "b"}       # never forward to newer code
    assert runner.equivalent_sources("z", str(path)) == {"z"}            # no record: today's source only
    assert runner.equivalent_sources("c", str(tmp_path / "missing.json")) == {"c"}
