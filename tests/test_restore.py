"""odevit.repro.restore: 02_teacher's best.pt rebuilt from the published teacher holds exactly the published tensors
and loads as the students load their teacher; another params block, an altered file or weights that do not give the
run's Acc@1 are refused with the reason, and nothing is written."""
import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from odevit import hub
from odevit.repro import config, pipeline, restore, train

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "weights" / hub.QUICK
ENTRY = json.loads((QUICK / "manifest.json").read_text())["weights"][restore.TAG]
PARAMS, METRICS = str(ROOT / "params.yaml"), str(ROOT / "results" / "02_teacher" / "metrics.json")


def test_restored_checkpoint_is_the_published_teacher(tmp_path):
    out = tmp_path / "02_teacher" / "best.pt"
    r = restore.restore(PARAMS, str(QUICK), METRICS, str(out))
    run = json.loads(Path(METRICS).read_text())
    assert r["acc1"] == pytest.approx(run["acc1"], abs=1e-3) and r["file"] == str(out)
    ckpt = train.load_checkpoint(str(out))
    assert set(ckpt) == {"model", "epoch", "val_acc1"} and ckpt["epoch"] == run["best_epoch"]
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
    run = json.loads(Path(METRICS).read_text())
    for got, refused in ((run["acc1"] - 0.002, True), (run["acc1"] + 0.0005, False)):  # tolerance 0.001
        monkeypatch.setattr(restore, "evaluate_on_test", lambda *a, **k: {"acc1": got})
        out = tmp_path / f"{got}.pt"
        if refused:
            with pytest.raises(hub.WeightsError, match=r"test Acc@1 .* not 02_teacher's weights"):
                restore.restore(PARAMS, str(QUICK), METRICS, str(out))
        else:
            restore.restore(PARAMS, str(QUICK), METRICS, str(out))
        assert out.exists() != refused


def test_cli_leaves_an_existing_checkpoint_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints" / "02_teacher").mkdir(parents=True)
    (tmp_path / "checkpoints" / "02_teacher" / "best.pt").write_bytes(b"x")
    assert restore.main(["--params", PARAMS, "--root", str(QUICK)]) == 2
    assert "exists: nothing to restore" in capsys.readouterr().err
    assert (tmp_path / "checkpoints" / "02_teacher" / "best.pt").read_bytes() == b"x"
