"""dvc.yaml's study stages are generated from plan.yaml (odevit.repro.stages): current in the repository, stale when
the plan's studies change without regenerating, and a new study's stages exactly the ones a study has."""
import copy
import shutil
from pathlib import Path

import pytest
import yaml

from odevit.repro import stages as S

ROOT = Path(__file__).resolve().parents[1]


def _plan() -> dict:
    return yaml.safe_load((ROOT / "plan.yaml").read_text())


def _stages(path: Path) -> dict:
    return yaml.safe_load(path.read_text())["stages"]


def _renamed(stage: dict, old: str, new: str) -> dict:
    """A stage with a study's name replaced in each of its places (what a hand copy used to be)."""
    return yaml.safe_load(yaml.safe_dump(stage).replace(old, new))


def test_dvc_yaml_study_stages_are_the_plans():
    """The staleness check: the text between dvc.yaml's markers is what plan.yaml renders to (run `python -m
    odevit.repro.stages` after changing plan.yaml's studies), and every plan study has its stage(s)."""
    text = (ROOT / "dvc.yaml").read_text()
    _, region, _ = S.split(text)
    assert region == S.render(_plan(), S.run_deps(text)), "dvc.yaml is stale: run `python -m odevit.repro.stages`"
    assert S.stale(_plan(), str(ROOT / "dvc.yaml")) is None
    stages = _stages(ROOT / "dvc.yaml")
    for study, st in _plan()["studies"].items():
        assert stages[study]["cmd"] == f"python -m odevit.repro.study ${{item.cell}} ${{item.seed}} --study {study}"
        assert (f"{study}_teacher" in stages) == bool(st.get("teacher"))
        if st.get("teacher"):
            assert (ROOT / f"results/studies/{study}/teacher/.gitkeep").is_file()
    assert stages["cell"]["deps"] == S.run_deps(text)  # the &run_deps list the study runs share


@pytest.mark.parametrize("edit, named", [
    (lambda p: p["studies"].update(mine=copy.deepcopy(p["studies"]["confirm_1k"])), "lacks mine"),
    (lambda p: p["studies"].pop("confirm_10k"), "has confirm_10k (not in"),
    (lambda p: p["studies"]["confirm_3k"].update(teacher={"epochs": 40}), "lacks confirm_3k_teacher"),
    (lambda p: p["studies"].update({k: p["studies"].pop(k) for k in list(p["studies"])[::-1]}), "their text differs"),
], ids=["added", "removed", "teacher-added", "reordered"])
def test_an_edited_plan_makes_dvc_yaml_stale(tmp_path, capsys, edit, named):
    """plan.yaml's studies edited without regenerating: the check fails with one line naming what is stale (from a
    modified copy of the plan, so the repository's files are only read)."""
    plan = _plan()
    edit(plan)
    assert named in S.stale(plan, str(ROOT / "dvc.yaml"))
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    before = (ROOT / "dvc.yaml").read_text()
    assert S.main(["--check", "--plan", str(path), "--dvc", str(ROOT / "dvc.yaml")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and "python -m odevit.repro.stages" in err
    assert (ROOT / "dvc.yaml").read_text() == before  # --check writes nothing


def test_cells_seeds_and_budgets_need_no_regeneration():
    """DVC reads a study's cells, seeds and budget from plan.yaml itself (`vars`): only names, order and teachers
    shape the generated text."""
    plan = _plan()
    plan["studies"]["confirm_3k"]["seeds"].append(105)
    plan["studies"]["confirm_3k"]["cells"]["other"] = {"ce_weight": 0.5}
    plan["studies"]["confirm_3k"]["budget"]["epochs"] += 1
    assert S.stale(plan, str(ROOT / "dvc.yaml")) is None


def _workspace(tmp_path: Path, plan: dict) -> Path:
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    return tmp_path


def test_adding_a_study_gives_exactly_its_stages(tmp_path, capsys):
    """One block in plan.yaml and one command: a study gets its matrix stage, one with its own teacher also
    NAME_teacher (and its cells the teacher's folder as a dependency and its teacher block as a param); nothing
    else in dvc.yaml changes, and a second run leaves it as it is."""
    plan = _plan()
    plan["studies"]["mine"] = copy.deepcopy(plan["studies"]["confirm_1k"])
    plan["studies"]["mine_t"] = copy.deepcopy(plan["studies"]["teacher_strength_3k"])
    work = _workspace(tmp_path, plan)
    args = ["--plan", str(work / "plan.yaml"), "--dvc", str(work / "dvc.yaml")]
    assert S.main(args) == 0
    assert "results/studies/mine_t/teacher/.gitkeep: created" in capsys.readouterr().out
    assert (work / "results/studies/mine_t/teacher/.gitkeep").is_file()
    old, new = _stages(ROOT / "dvc.yaml"), _stages(work / "dvc.yaml")
    assert set(new) - set(old) == {"mine", "mine_t_teacher", "mine_t"} and set(old) <= set(new)
    assert {k: new[k] for k in old} == old  # the stages there were: untouched
    assert list(new).index("mine_t_teacher") == list(new).index("mine_t") - 1  # the teacher before its cells
    mine = new["mine"]
    assert mine["cmd"] == "python -m odevit.repro.study ${item.cell} ${item.seed} --study mine"
    assert mine["matrix"] == {"cell": "${studies.mine.cells}", "seed": "${studies.mine.seeds}"}
    assert mine["deps"] == old["cell"]["deps"]  # *run_deps
    assert mine["params"][-1] == {"plan.yaml": ["studies.mine.budget", "studies.mine.base",
                                                "studies.mine.cells.${item.cell}"]}
    assert [next(iter(o)) for o in mine["outs"]] == ["checkpoints/studies/mine/${item.cell}/s${item.seed}",
                                                     "results/studies/mine/${item.cell}/s${item.seed}/history.csv",
                                                     "results/studies/mine/${item.cell}/s${item.seed}/timing.json"]
    assert mine == _renamed(old["confirm_1k"], "confirm_1k", "mine")
    t = new["mine_t"]
    assert t["deps"] == old["cell"]["deps"] + ["results/studies/mine_t/teacher"]
    assert t["params"][-1]["plan.yaml"] == ["studies.mine_t.budget", "studies.mine_t.base", "studies.mine_t.teacher",
                                            "studies.mine_t.cells.${item.cell}"]
    assert t == _renamed(old["teacher_strength_3k"], "teacher_strength_3k", "mine_t")
    assert new["mine_t_teacher"]["cmd"] == "python -m odevit.repro.study_teacher mine_t"
    assert new["mine_t_teacher"] == _renamed(old["teacher_strength_3k_teacher"], "teacher_strength_3k", "mine_t")
    assert "deps: *teacher_deps" in (work / "dvc.yaml").read_text()  # the teacher deps written once
    assert S.stale(plan, str(work / "dvc.yaml")) is None
    text = (work / "dvc.yaml").read_text()
    assert S.main(args) == 0 and (work / "dvc.yaml").read_text() == text
    assert "unchanged" in capsys.readouterr().out


@pytest.mark.parametrize("line", [S.BEGIN, S.END])
def test_missing_markers_are_named(tmp_path, capsys, line):
    work = _workspace(tmp_path, _plan())
    text = (work / "dvc.yaml").read_text()
    (work / "dvc.yaml").write_text(text.replace(line + "\n", ""))
    with pytest.raises(S.StagesError, match=f"no line '{line.strip()[:12]}"):
        S.split((work / "dvc.yaml").read_text())
    assert S.main(["--plan", str(work / "plan.yaml"), "--dvc", str(work / "dvc.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "python -m odevit.repro.stages" in err
    assert (work / "dvc.yaml").read_text() == text.replace(line + "\n", "")  # nothing written


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.pop("cells"), r"plan.yaml: studies.mine.cells is missing or empty"),
    (lambda s: s.update(seeds=[]), r"plan.yaml: studies.mine.seeds is missing or empty"),
    (lambda s: s.pop("base"), r"plan.yaml: studies.mine.base is missing: its stage reads it"),
    (lambda s: s.pop("budget"), r"plan.yaml: studies.mine.budget is missing"),
], ids=["no-cells", "no-seeds", "no-base", "no-budget"])
def test_a_study_its_stages_cannot_come_from_is_named(edit, message):
    plan = _plan()
    plan["studies"]["mine"] = copy.deepcopy(plan["studies"]["confirm_1k"])
    edit(plan["studies"]["mine"])
    with pytest.raises(S.StagesError, match=message):
        S.render(plan, ["x.py"])


def test_a_study_named_as_a_hand_written_stage_is_refused():
    plan = _plan()
    plan["studies"]["evidence"] = copy.deepcopy(plan["studies"]["confirm_1k"])
    with pytest.raises(S.StagesError, match="study stage 'evidence' is also a stage written by hand"):
        S.generate(plan, (ROOT / "dvc.yaml").read_text())


def _plan_v2() -> dict:
    return yaml.safe_load((ROOT / "plan_v2.yaml").read_text())


def test_dvc_yaml_plan_v2_stages_are_plan_v2s():
    """Plan v2's runs are DVC stages too, generated from plan_v2.yaml by the same command: its teacher, a matrix
    stage per study (a run per cell: its seeds train together, `fast --studies S --cells C`), and its verdicts, which
    the v2 notebooks' stages read; a run's dependencies are what its run key hashes (the training source and fast.py)."""
    from odevit.repro import train

    text = (ROOT / "dvc.yaml").read_text()
    _, region, _ = S.split(text, markers=(S.BEGIN_V2, S.END_V2))
    assert region == S.render_v2(_plan_v2()), "dvc.yaml is stale: run `python -m odevit.repro.stages`"
    assert S.stale_v2(_plan_v2(), str(ROOT / "dvc.yaml")) is None
    stages = _stages(ROOT / "dvc.yaml")
    assert stages["v2_teacher"]["cmd"] == "python -m odevit.repro.fast plan_v2.yaml --teacher-only"
    for study, s in _plan_v2()["studies"].items():
        st = stages[study]
        assert st["matrix"] == {"cell": list(s["cells"])}
        assert st["cmd"] == f"python -m odevit.repro.fast plan_v2.yaml --studies {study} --cells ${{item.cell}}"
        assert [next(iter(o)) for o in st["outs"]] == [f"results/v2/{study}/${{item.cell}}"]
        assert f"results/v2/{study}" in stages["v2_verdicts"]["deps"]
    assert S.v2_run_stages(_plan_v2()) == ["v2_teacher", *_plan_v2()["studies"]]
    pkg = sorted(f"odevit/{p.name}" for p in (ROOT / "odevit").glob("*.py"))
    sources = set(pkg) | {f"odevit/{p}" for p in train.TRAINING_SOURCES} | {"odevit/repro/fast.py",
                                                                             "odevit/repro/plan2.py"}
    assert set(S.V2_RUN_DEPS) == sources | {"results/01_data/metrics.json"}
    assert set(stages["v2_1k"]["deps"]) == set(S.V2_RUN_DEPS) | {"results/v2/teacher", "results/02_teacher/metrics.json",
                                                                  "results/02_teacher/distances.csv"}
    assert {"results/v2/claims.csv"} <= {next(iter(o)) for o in stages["v2_verdicts"]["outs"]}
    assert "results/v2/claims.csv" in stages["04_v2_budget"]["deps"]  # the notebooks read the verdicts' output


def test_an_edited_plan_v2_makes_dvc_yaml_stale(tmp_path):
    """A study or a cell added to plan_v2.yaml without regenerating: the check names it; regenerating gives exactly
    the new study's stage (nothing else changes) and the check passes."""
    plan = _plan_v2()
    plan["studies"]["v2_mine"] = copy.deepcopy(plan["studies"]["v2_1k"])
    assert "lacks v2_mine" in S.stale_v2(plan, str(ROOT / "dvc.yaml"))
    other = _plan_v2()
    other["studies"]["v2_3k"]["cells"]["extra"] = {"ce_weight": 0.5}
    assert "their text differs" in S.stale_v2(other, str(ROOT / "dvc.yaml"))  # the matrix lists the cells
    work = _workspace(tmp_path, _plan())
    (work / "plan_v2.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    args = ["--plan", str(work / "plan.yaml"), "--plan-v2", str(work / "plan_v2.yaml"), "--dvc", str(work / "dvc.yaml")]
    assert S.main(["--check", *args]) == 1
    assert S.main(args) == 0
    old, new = _stages(ROOT / "dvc.yaml"), _stages(work / "dvc.yaml")
    assert set(new) - set(old) == {"v2_mine"} and {k: new[k] for k in old if k != "v2_verdicts"} == \
        {k: old[k] for k in old if k != "v2_verdicts"}
    assert "results/v2/v2_mine" in new["v2_verdicts"]["deps"]
    assert new["v2_mine"] == _renamed(old["v2_1k"], "v2_1k", "v2_mine")
    assert S.main(["--check", *args]) == 0


def test_a_plan_v2_study_name_that_cannot_be_a_stage_is_named():
    plan = _plan_v2()
    plan["studies"]["teacher"] = copy.deepcopy(plan["studies"]["v2_1k"])
    with pytest.raises(S.StagesError, match="plan_v2.yaml: studies.teacher: a study name"):
        S.render_v2(plan)
    plan = _plan_v2()
    plan["studies"]["v2_1k"]["cells"]["a-b"] = {}
    with pytest.raises(S.StagesError, match=r"studies.v2_1k.cells.a-b: a cell name"):
        S.render_v2(plan)
