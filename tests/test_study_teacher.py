"""A plan study's own teacher (odevit.repro.study_teacher): its cells refuse to start before it is trained, then
distil from it (its checkpoint, its distances), and the runner trains and commits it before them."""
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from odevit.repro import config, pipeline, runner, study, study_teacher
from odevit.repro import plan as P

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from tiny_pipeline import tiny_params, tiny_plan  # noqa: E402

STUDY = "teacher_strength_3k"


@pytest.fixture
def work(tmp_path, monkeypatch):
    params, plan = tiny_params(), tiny_plan()
    params["teacher"]["epochs"] = 1
    plan["studies"][STUDY].update(seeds=[0, 1], budget={"train_limit": 32, "epochs": 1})
    plan["studies"][STUDY]["teacher"]["epochs"] = 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan))
    shutil.copytree(ROOT / "presets", tmp_path / "presets")  # the tiny params' published cell reads one
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_study_teacher_cell_waits_for_its_teacher_then_distils_from_it(work):
    assert runner.teachers(P.load(), [STUDY, "confirm_55k"]) == [(STUDY, "teacher", ())]
    with pytest.raises(config.ConfigError, match=f"odevit.repro.study_teacher {STUDY}"):
        study.run("ref_strong", 0, study_name=STUDY)  # before its teacher: one clear error, nothing written
    assert not (work / f"results/studies/{STUDY}/ref_strong").exists()
    t = study_teacher.run(STUDY)
    assert t["epochs_run"] == 1 and t["plan_hash"] == P.study_hash(P.load(), STUDY) and t["teacher"]["augment"]
    assert t["provenance"]["resumes"] == 0 and t["source"] == study_teacher.train.fingerprint()
    # the metrics 02_teacher's notebook writes (the same function, pipeline.train_teacher), plus the study's
    assert {"acc1", "best_epoch", "converged", "encoder_params", "depth", "train_images", "val_images"} <= set(t)
    assert runner.teachers(P.load(), [STUDY]) == []  # finished: the runner goes straight to the cells
    # a schedule of its own: distances written by the teacher's stage, not 02_teacher's (absent here)
    (work / f"results/studies/{STUDY}/teacher/distances.csv").write_text("layer,distance\n1,1.0\n2,30.0\n")
    d, _ = config.cell_config(config.check_stage("cell")["distill"], config.study_configs(
        config.check_stage("cell"), P.load(), STUDY)["study"], "ref_strong")
    want = pipeline.schedule([1.0, 30.0], d)
    assert want != pipeline.schedule([30.0, 1.0], d)  # the file decides the schedule
    m = study.run("ref_strong", 0, study_name=STUDY)
    assert m["teacher_run"] == f"results/studies/{STUDY}/teacher" and m["checkpoints"] == want
    assert m["teacher_sha256"] == study_teacher.identity(STUDY)
    with pytest.raises(FileNotFoundError, match="02_teacher"):  # ref reads 02_teacher's teacher
        study.run("ref", 0, study_name=STUDY)
    # the plan's teacher block edited after its teacher was trained: that teacher no longer counts
    plan = yaml.safe_load((work / "plan.yaml").read_text())
    plan["studies"][STUDY]["teacher"]["lr"] = 5e-4
    (work / "plan.yaml").write_text(yaml.safe_dump(plan))
    assert not study_teacher.finished(STUDY) and runner.teachers(P.load(), [STUDY]) == [(STUDY, "teacher", ())]
    with pytest.raises(config.ConfigError, match="earlier teacher block"):
        study.run("ref_strong", 1, study_name=STUDY)


def test_the_teacher_of_a_study_without_one_is_an_error(work):
    with pytest.raises(config.ConfigError, match="no teacher block"):
        study_teacher.configs("confirm_55k")
    with pytest.raises(config.ConfigError, match="not one of"):
        study_teacher.configs("nope")
