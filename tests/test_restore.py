"""odevit.repro.restore: 02_teacher's best.pt rebuilt from the published teacher holds exactly the published tensors
and loads as the students load their teacher; another params block, an altered file or weights that do not give the
run's Acc@1 are refused with the reason, and nothing is written."""
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from odevit import hub
from odevit.repro import config, data, pipeline, publish, restore, train

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "weights" / hub.QUICK
ENTRY = json.loads((QUICK / "manifest.json").read_text())["weights"][restore.TAG]
PARAMS, METRICS = str(ROOT / "params.yaml"), str(ROOT / "results" / "02_teacher" / "metrics.json")


def test_restored_checkpoint_is_the_published_teacher(tmp_path):
    if not os.path.isdir(data.DEBIAN_FASHION_MNIST):
        pytest.skip("needs Fashion-MNIST (make data: Debian's dataset-fashion-mnist)")
    out = tmp_path / "02_teacher" / "best.pt"
    r = restore.restore(PARAMS, str(QUICK), METRICS, str(out))
    run = json.loads(Path(METRICS).read_text())
    assert r["acc1"] == ENTRY["metrics"]["acc1"] and r["file"] == str(out)  # fp32 on a CPU, as published
    ckpt = train.load_checkpoint(str(out))
    assert set(ckpt) == {"model", "epoch", "val_acc1"}
    assert ckpt["epoch"] == run["best_epoch"] and ckpt["val_acc1"] == run["val_acc1"]
    published = load_file(str(QUICK / ENTRY["file"]))
    assert set(ckpt["model"]) == set(published)
    assert all(torch.equal(ckpt["model"][k], published[k]) for k in published)  # bit for bit
    cfg = config.check_stage("publish", PARAMS)
    train.load_weights(pipeline.build_teacher(cfg["base"], cfg["teacher"]), str(out))  # as study.load_teacher does


def test_other_teacher_params_are_refused_before_anything_is_written(tmp_path):
    p = yaml.safe_load(Path(PARAMS).read_text())
    p["teacher"]["epochs"] += 1
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    out = tmp_path / "best.pt"
    with pytest.raises(hub.WeightsError, match=r"manifest.json: .*trained under other base/teacher blocks"):
        restore.restore(str(tmp_path / "params.yaml"), str(QUICK), METRICS, str(out))
    assert not out.exists()


def test_altered_file_is_refused_by_its_checksum(tmp_path):
    shutil.copytree(QUICK, tmp_path / "w")
    path = tmp_path / "w" / ENTRY["file"]
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(hub.WeightsError, match=ENTRY["sha256"]):
        restore.restore(PARAMS, str(tmp_path / "w"), METRICS, str(tmp_path / "best.pt"))
    assert not (tmp_path / "best.pt").exists()


def test_weights_that_miss_the_runs_acc1_are_refused(tmp_path, monkeypatch):
    run, tol = json.loads(Path(METRICS).read_text()), publish.ACC1_TOLERANCE
    for got, refused in ((run["acc1"] - 2 * tol, True), (run["acc1"] + 2 * tol, True),
                         (run["acc1"] - tol, False), (run["acc1"] + tol, False)):
        monkeypatch.setattr(restore, "evaluate_on_test", lambda *a, **k: {"acc1": got})
        out = tmp_path / f"{got}.pt"
        if refused:
            with pytest.raises(hub.WeightsError, match=r"test Acc@1 .* not 02_teacher's weights"):
                restore.restore(PARAMS, str(QUICK), METRICS, str(out))
        else:
            restore.restore(PARAMS, str(QUICK), METRICS, str(out))
        assert out.exists() != refused


def test_an_entry_that_is_not_02_teachers_checkpoint_is_refused(tmp_path):
    shutil.copytree(QUICK, tmp_path / "w")
    m = json.loads((tmp_path / "w" / "manifest.json").read_text())
    m["weights"][restore.TAG]["checkpoint"] = "checkpoints/studies/x/teacher/best.pt"
    (tmp_path / "w" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(hub.WeightsError, match=r"is not 02_teacher's best.pt"):
        restore.restore(PARAMS, str(tmp_path / "w"), METRICS, str(tmp_path / "best.pt"))
    assert not (tmp_path / "best.pt").exists()


def test_cli_leaves_an_existing_checkpoint_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints" / "02_teacher").mkdir(parents=True)
    (tmp_path / "checkpoints" / "02_teacher" / "best.pt").write_bytes(b"x")
    assert restore.main(["--params", PARAMS, "--root", str(QUICK)]) == 2
    assert "exists: nothing to restore" in capsys.readouterr().err
    assert (tmp_path / "checkpoints" / "02_teacher" / "best.pt").read_bytes() == b"x"
