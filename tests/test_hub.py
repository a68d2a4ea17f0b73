"""Published weights (weights/quick: the quick run's; weights/evidence: plan 1's; weights/v2: plan v2's): every tag reloads offline and
reproduces its published Acc@1, which is its run's committed Acc@1 (exactly for the quick run, trained on this CPU;
within publish.ACC1_TOLERANCE for a GPU run); altered or missing files and architecture mismatches are refused with
the file's name and its expected checksum."""
import json
import os
import shutil
from pathlib import Path

import pytest
import timm
import torch

import odevit
from odevit import hub
from odevit.repro import data, evaluate, publish

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {f: json.loads((ROOT / "weights" / f / "manifest.json").read_text())["weights"] for f in (hub.QUICK, hub.EVIDENCE, hub.V2)}
MANIFEST = {t: e for m in FOLDERS.values() for t, e in m.items()}
DISTILL = f"{hub.STUDENT_ARCH}.fmnist_distill"
TEACHER = f"{hub.TEACHER_ARCH}.fmnist"


def test_every_registered_tag_is_published_with_its_registered_architecture():
    assert set(MANIFEST) == set(hub.TAGS) and hub.published().keys() == MANIFEST.keys()
    for folder, m in FOLDERS.items():
        for tag, e in m.items():
            assert hub.TAGS[tag][2] == folder
            assert e["architecture"] == hub.TAGS[tag][0], f"{tag}: the run's architecture is not the registered one"
            assert (ROOT / "weights" / folder / e["file"]).stat().st_size == e["bytes"]
            run = json.loads((ROOT / e["metrics_file"]).read_text())["acc1"]
            assert e["run_metrics"]["acc1"] == run
            if folder == hub.QUICK:  # trained on this CPU type: the run's own Acc@1, exactly
                assert e["metrics"]["acc1"] == run
            assert abs(e["metrics"]["acc1"] - run) <= publish.ACC1_TOLERANCE + 1e-12


def test_evidence_tags_are_the_best_validation_seed_of_their_plan_cell():
    """weights/evidence: per plan.yaml publish row, the seed whose validation Acc@1 (history.csv) is highest."""
    import pandas as pd
    import yaml

    plan = yaml.safe_load((ROOT / "plan.yaml").read_text())
    rows = plan["publish"]
    assert {r["tag"] for r in rows} == set(FOLDERS[hub.EVIDENCE])
    for r in rows:
        e = FOLDERS[hub.EVIDENCE][r["tag"]]
        if "snapshot" in r:
            assert e["checkpoint"] == f"{r['snapshot']}/teacher.safetensors" and e["kind"] == "teacher"
            continue
        seeds = plan["studies"][r["study"]]["seeds"]
        best = {s: pd.read_csv(ROOT / f"results/studies/{r['study']}/{r['cell']}/s{s}/history.csv").val_acc1.max()
                for s in seeds}
        assert (e["study"], e["cell"]) == (r["study"], r["cell"])
        assert e["seed"] == max(best, key=lambda k: (best[k], -k)), r["tag"]


def test_v2_teacher_is_the_selected_seeds_kept_weights():
    """weights/v2: plan v2's teacher, the seed results/v2/teacher/selected.json names (selected on validation), made
    from the best.pt kept in git whose sha256 the selection recorded; its Acc@1 is that seed's test Acc@1."""
    sel = json.loads((ROOT / "results/v2/teacher/selected.json").read_text())
    e = FOLDERS[hub.V2][f"{hub.TEACHER_ARCH}.fmnist_v2"]
    assert e["seed"] == sel["seed"] and e["checkpoint"] == "weights/v2_teacher/best.pt"
    assert hub.sha256(str(ROOT / e["checkpoint"])) == sel["sha256"]
    assert e["metrics"]["acc1"] == e["run_metrics"]["acc1"] == sel["acc1"]


@pytest.mark.parametrize("tag", sorted(hub.TAGS))
def test_published_tag_reproduces_committed_acc1(tag, capsys):
    if not os.path.isdir(data.DEBIAN_FASHION_MNIST):
        pytest.skip("needs Fashion-MNIST (make data: Debian's dataset-fashion-mnist)")
    assert evaluate.main([tag]) == 0  # loads through timm.create_model(tag, pretrained=True), full test set
    out = capsys.readouterr().out
    assert f"Acc@1 {MANIFEST[tag]['metrics']['acc1']:.4f}" in out and "(identical)" in out


def test_teacher_tag_loads_through_create_teacher_and_students_through_timm():
    t = odevit.create_teacher(TEACHER, num_classes=10, pretrained=True)
    ref = hub.load(TEACHER)
    assert all(torch.equal(a, b) for a, b in zip(t.state_dict().values(), ref.state_dict().values()))
    s = timm.create_model(DISTILL, pretrained=True).eval()
    x = torch.randn(2, 1, 28, 28)
    with torch.no_grad():
        assert torch.equal(s(x), hub.load(DISTILL)(x))
    assert not torch.equal(s.field.mlp.fc1.weight, timm.create_model(hub.STUDENT_ARCH).field.mlp.fc1.weight)


@pytest.fixture
def copy_weights(tmp_path):
    shutil.copytree(ROOT / "weights" / hub.QUICK, tmp_path / "w")
    return tmp_path / "w"


def test_altered_or_missing_file_is_refused_with_name_and_checksum(copy_weights):
    e = MANIFEST[DISTILL]
    path = copy_weights / e["file"]
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1  # one bit of the last weight
    path.write_bytes(bytes(raw))
    with pytest.raises(hub.WeightsError, match=rf"{e['file']}.*does not match the manifest's {e['sha256']}"):
        hub.verify(DISTILL, str(copy_weights))
    with pytest.raises(hub.WeightsError, match=e["sha256"]):  # the path users take
        timm.create_model(DISTILL, pretrained=True, pretrained_cfg_overlay=dict(file=str(path)))
    path.unlink()
    with pytest.raises(hub.WeightsError, match=rf"{e['file']}: missing; expected sha256 {e['sha256']}"):
        hub.load(DISTILL, str(copy_weights))
    assert evaluate.main([DISTILL, "--limit", "8"]) == 0  # the repository's own copy is untouched


def test_weights_of_another_architecture_are_refused_by_the_registered_name(copy_weights):
    m = json.loads((copy_weights / "manifest.json").read_text())
    m["weights"][DISTILL]["model_kwargs"]["num_steps"] = 24
    (copy_weights / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(hub.WeightsError, match="another architecture.*num_steps"):
        timm.create_model(DISTILL, pretrained=True, pretrained_cfg_overlay=dict(file=str(copy_weights / f"{DISTILL}.safetensors")))
    assert hub.load(DISTILL, str(copy_weights)).num_steps == 24  # the manifest's architecture, built as recorded


def test_published_weights_load_with_dynamic_img_size():
    """dynamic_img_size=True has the same parameters: the published files load, give the registered model's output
    at 28 px, and predict at other sizes (position embedding resampled)."""
    x, big = torch.randn(2, 1, 28, 28), torch.randn(2, 1, 42, 35)
    for tag in (DISTILL, TEACHER):
        fixed = timm.create_model(tag, pretrained=True).eval()
        dynamic = timm.create_model(tag, pretrained=True, dynamic_img_size=True).eval()
        with torch.no_grad():
            torch.testing.assert_close(dynamic(x), fixed(x))
            assert dynamic(big).shape == (2, 10)
        with pytest.raises(AssertionError, match="doesn't match model"):
            fixed(big)


def test_evaluate_cli_lists_tags_and_rejects_bad_input(capsys):
    assert evaluate.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(tag in out for tag in hub.TAGS)
    assert evaluate.main([DISTILL, "--num-steps", "0"]) == 2
    assert evaluate.main(["odevit_small_patch7_28.nope"]) == 2
    assert evaluate.main([TEACHER, "--num-steps", "4"]) == 2
    assert "discrete ViT" in capsys.readouterr().err


def test_publish_v2_without_its_teacher_stops_naming_the_file(tmp_path, monkeypatch, capsys):
    """`publish --v2` where plan v2's teacher is not selected yet: one line naming the missing file, exit 2, nothing
    written; and a kept best.pt that is not the selected seed's is refused by its sha256."""
    for f in ("params.yaml", "plan_v2.yaml"):
        shutil.copy(ROOT / f, tmp_path / f)
    shutil.copytree(ROOT / "presets", tmp_path / "presets")  # the plan's cells name presets
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        publish.main(["--v2"])
    assert e.value.code == 2 and "results/v2/teacher/selected.json: missing" in capsys.readouterr().err
    assert not (tmp_path / "weights").exists()
    shutil.copytree(ROOT / "results/v2/teacher", tmp_path / "results/v2/teacher")
    (tmp_path / "weights/v2_teacher").mkdir(parents=True)
    (tmp_path / "weights/v2_teacher/best.pt").write_bytes(b"not the teacher")
    with pytest.raises(SystemExit) as e:
        publish.main(["--v2"])
    assert e.value.code == 2 and "not the selected teacher's weights" in capsys.readouterr().err
    assert not (tmp_path / "weights/v2").exists()
