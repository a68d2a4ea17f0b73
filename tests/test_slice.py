"""odevit.repro.slice: the make-repro comparison of retrained epochs with committed ones (pure parts, hand-made data;
the retraining itself is fast.train_cell, covered by tests/test_fast.py)."""
import sys

import pandas as pd
import pytest

from odevit.repro import slice as sl


def _table(here_acc, kind_here="CPU: X", kind_committed="CPU: X", loss_here=(2.0, 1.0)):
    theirs = pd.DataFrame({"val_acc1": [0.5, 0.6], "train_loss": [2.0, 1.0]})
    ours = [{"val_acc1": a, "train_loss": l} for a, l in zip(here_acc, loss_here)]
    t = sl.compare(ours, theirs, epochs=2)
    t.insert(0, "seed", 1)
    t.insert(0, "cell", "ref")
    t.insert(0, "study", "s")
    t["committed_on"], t["here"] = kind_committed, kind_here
    return t


def test_compare_by_hand():
    t = _table([0.5, 0.62])
    assert list(t["epoch"]) == [1, 2]
    assert t["val_acc1_diff"].tolist() == pytest.approx([0.0, 0.02])
    assert t["train_loss_diff"].tolist() == [0.0, 0.0]


def test_same_machine_identical_flips_when_one_epoch_differs():
    assert "identical to the committed run" in sl.summary(_table([0.5, 0.6]))[0]
    line = sl.summary(_table([0.5, 0.61]))[0]
    assert "NOT identical" in line and "1.00 pt" in line
    assert "NOT identical" in sl.summary(_table([0.5, 0.6], loss_here=(2.0, 1.0 + 1e-7)))[0]


def test_other_machine_states_the_difference_beside_the_se():
    line = sl.summary(_table([0.5, 0.61], kind_here="CPU: Y"))[0]
    assert "committed on CPU: X, retrained on CPU: Y" in line and "1.00 pt" in line
    assert "SE 0.69 pt" in line  # sqrt(0.6 * 0.4 / 5000) = 0.69 pt


def test_missing_committed_run_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="s7/metrics.json"):
        sl.committed("v2_1k", "ref", 7, root=str(tmp_path))


def test_fast_cli_refuses_seeds_without_into_and_into_the_plans_folder():
    from odevit.repro import fast

    with pytest.raises(SystemExit):
        fast.main(["plan_v2.yaml", "--seeds", "2100"])
    with pytest.raises(SystemExit):
        fast.main(["plan_v2.yaml", "--into", "results/v2/"])


def test_a_seed_outside_the_study_is_refused_before_training(tmp_path):
    import torch

    from odevit.repro import fast

    p = fast.Plan("plan_v2.yaml")
    with pytest.raises(ValueError, match=r"--seeds \[1\]: v2_1k has seeds \[2100"):
        fast.train_cell(p, "v2_1k", "ref", torch.device("cpu"), False, None, {}, into=str(tmp_path), only_seeds=[1])


def _make_var(name):
    import re

    text = open("Makefile").read()
    return re.search(rf"^{name} :?= (.*)$", text, re.M).group(1).split()


TRAINING = ("odevit.repro.study ", "odevit.repro.fast", "odevit.repro.runner", "notebook 02_teacher",
            "odevit.repro.study_teacher", "odevit.repro.publish")


def test_make_repro_reexecutes_every_reading_notebook_and_trains_nothing():
    """make repro's READ_STAGES: every notebook stage that only reads committed files (all but 02_teacher, which
    trains; 06_dynamics reads weights/v2 with params.yaml's dynamics.weights: published), and no stage whose command
    trains."""
    import yaml as _yaml

    assert _yaml.safe_load(open("params.yaml"))["dynamics"]["weights"] == "published"  # else 06 needs trained cells
    import yaml

    stages = yaml.safe_load(open("dvc.yaml"))["stages"]
    read = _make_var("READ_STAGES")
    assert set(read) <= set(stages), f"READ_STAGES names stages dvc.yaml lacks: {set(read) - set(stages)}"
    for name in read:
        cmd = stages[name]["cmd"]
        assert not any(t in cmd for t in TRAINING), f"make repro would train: {name}: {cmd}"
    notebooks = {n for n, s in stages.items() if "odevit.repro.notebook" in str(s.get("cmd", ""))
                 and not any(t in s["cmd"] for t in TRAINING)}
    assert notebooks <= set(read), f"notebook stages make repro does not re-execute: {sorted(notebooks - set(read))}"


def test_reread_runs_each_stage_by_its_dvc_command_and_stops_at_the_first_failure(tmp_path, monkeypatch, capsys):
    """make repro's reading stages: their dvc.yaml commands in the order given; a stage dvc.yaml lacks, or a matrix
    stage, is refused before anything runs; a failing stage stops the ones after it and names itself."""
    import yaml

    from odevit.repro import reread

    monkeypatch.chdir(tmp_path)
    py = sys.executable
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "a": {"cmd": f"{py} -c \"open('a', 'w').write('1')\""},
        "b": {"cmd": f"{py} -c \"import sys; sys.exit(3)\""},
        "c": {"cmd": f"{py} -c \"open('c', 'w').write('1')\""},
        "m": {"matrix": {"x": [1, 2]}, "cmd": "echo ${item.x}"}}}))
    assert reread.main(["c", "a"]) == 0 and (tmp_path / "a").exists() and (tmp_path / "c").exists()
    assert [n for n, _ in reread.commands(["c", "a"])] == ["c", "a"]
    (tmp_path / "a").unlink(), (tmp_path / "c").unlink()
    assert reread.main(["a", "b", "c"]) == 3
    assert (tmp_path / "a").exists() and not (tmp_path / "c").exists()
    assert "stage 'b' failed (exit 3)" in capsys.readouterr().err
    assert reread.main(["a", "nope"]) == 2 and not (tmp_path / "c").exists()
    assert "no stage 'nope'" in capsys.readouterr().err
    assert reread.main(["m"]) == 2 and "matrix/foreach" in capsys.readouterr().err


def test_make_repro_rereads_its_stages_without_dvc():
    """The Makefile's repro recipe: reread over READ_STAGES; no DVC process (each costs minutes on 2 cores)."""
    text = open("Makefile").read()
    recipe = text[text.index("\nrepro:"):text.index("\nquick:")]
    assert "odevit.repro.reread $(READ_STAGES)" in recipe
    assert "$(BIN)/dvc " not in recipe
