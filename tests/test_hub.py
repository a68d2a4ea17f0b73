"""Published weights (weights/v2: the plan's teacher and 55k students): every tag reloads offline and reproduces its
published Acc@1, which is its run's committed Acc@1 within weights.ACC1_TOLERANCE (the runs were made on a GPU);
altered or missing files and architecture mismatches are refused with the file's name and its expected checksum."""
import json
import os
import shutil
from pathlib import Path

import pytest
import timm
import torch

import odevit
from odevit import hub
from odevit.repro import data, weights

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {f: json.loads((ROOT / "weights" / f / "manifest.json").read_text())["weights"] for f in (hub.V2,)}
MANIFEST = {t: e for m in FOLDERS.values() for t, e in m.items()}
DISTILL = f"{hub.STUDENT_ARCH}.fmnist_v2_distill"
TEACHER = f"{hub.TEACHER_ARCH}.fmnist_v2"


PENDING = json.loads((ROOT / "weights" / hub.V2 / "manifest.json").read_text()).get("pending", {})


def test_every_registered_tag_is_published_with_its_registered_architecture():
    """Every tag odevit.hub registers is published, or (plan v2's students whose cells still train) pending in its
    folder's manifest, never both."""
    assert set(MANIFEST) | set(PENDING) == set(hub.TAGS) and not set(MANIFEST) & set(PENDING)
    assert hub.published().keys() == MANIFEST.keys() and hub.pending() == PENDING
    assert all(hub.TAGS[t][2] == hub.V2 for t in PENDING)
    for folder, m in FOLDERS.items():
        for tag, e in m.items():
            assert hub.TAGS[tag][2] == folder
            assert e["architecture"] == hub.TAGS[tag][0], f"{tag}: the run's architecture is not the registered one"
            assert (ROOT / "weights" / folder / e["file"]).stat().st_size == e["bytes"]
            run = json.loads((ROOT / e["metrics_file"]).read_text())["acc1"]
            assert e["run_metrics"]["acc1"] == run
            assert abs(e["metrics"]["acc1"] - run) <= weights.ACC1_TOLERANCE + 1e-12


def test_v2_teacher_is_the_selected_seeds_kept_weights():
    """weights/v2: plan v2's teacher, the seed results/v2/teacher/selected.json names (selected on validation), made
    from the best.pt kept in git whose sha256 the selection recorded; its Acc@1 is that seed's test Acc@1."""
    sel = json.loads((ROOT / "results/v2/teacher/selected.json").read_text())
    e = FOLDERS[hub.V2][f"{hub.TEACHER_ARCH}.fmnist_v2"]
    assert e["seed"] == sel["seed"] and e["checkpoint"] == "weights/v2_teacher/best.pt"
    assert hub.sha256(str(ROOT / e["checkpoint"])) == sel["sha256"]
    assert e["metrics"]["acc1"] == e["run_metrics"]["acc1"] == sel["acc1"]


@pytest.mark.parametrize("tag", sorted(MANIFEST))
def test_published_tag_reproduces_committed_acc1(tag, capsys):
    if not os.path.isdir(data.DEBIAN_FASHION_MNIST):
        pytest.skip("needs Fashion-MNIST (make data: Debian's dataset-fashion-mnist)")
    assert weights.main([tag]) == 0  # loads through timm.create_model(tag, pretrained=True), full test set
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
    shutil.copytree(ROOT / "weights" / hub.V2, tmp_path / "w")
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
    assert weights.main([DISTILL, "--limit", "8"]) == 0  # the repository's own copy is untouched


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
    assert weights.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(tag in out for tag in hub.TAGS)
    assert weights.main([DISTILL, "--num-steps", "0"]) == 2
    assert weights.main(["odevit_small_patch7_28.nope"]) == 2
    assert weights.main([TEACHER, "--num-steps", "4"]) == 2
    assert "discrete ViT" in capsys.readouterr().err


def test_publish_v2_without_its_teacher_stops_naming_the_file(tmp_path, monkeypatch, capsys):
    """`publish` where the plan's teacher is not selected yet: one line naming the missing file, exit 2, nothing
    written; and a kept best.pt that is not the selected seed's is refused by its sha256."""
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    assert weights.main(["--publish"]) == 2 and "results/v2/teacher/selected.json: missing" in capsys.readouterr().err
    assert not (tmp_path / "weights").exists()
    shutil.copytree(ROOT / "results/v2/teacher", tmp_path / "results/v2/teacher")
    (tmp_path / "weights/v2_teacher").mkdir(parents=True)
    (tmp_path / "weights/v2_teacher/best.pt").write_bytes(b"not the teacher")
    assert weights.main(["--publish"]) == 2 and "not the selected teacher's weights" in capsys.readouterr().err
    assert not (tmp_path / "weights/v2").exists()


def test_publish_v2_selects_each_students_seed_on_validation_and_names_unfinished_cells(tmp_path, monkeypatch):
    """params.yaml's publish rows: a cell with every seed finished gives its best-validation seed (a tie goes to the
    first in the plan's order; the test Acc@1 is never looked at), with its convergence and architecture; a cell with a
    seed missing is pending, naming the seeds, and is not published; a finished row whose tag odevit.hub does not
    register is refused by name."""
    import yaml

    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(ROOT / "results/v2/teacher", tmp_path / "results/v2/teacher")
    (tmp_path / "weights/v2_teacher").mkdir(parents=True)
    shutil.copy(ROOT / "weights/v2_teacher/best.pt", tmp_path / "weights/v2_teacher/best.pt")
    monkeypatch.chdir(tmp_path)
    plan = yaml.safe_load((ROOT / "params.yaml").read_text())
    rows = {r["cell"]: r for r in plan["publish"]}
    seeds = plan["studies"]["v2_55k"]["seeds"]

    def runs(cell, vals, accs):
        for x, v, a in zip(seeds, vals, accs):
            out = tmp_path / f"results/v2/v2_55k/{cell}/s{x}"
            out.mkdir(parents=True)
            (out / "metrics.json").write_text(json.dumps(dict(val_acc1=v, acc1=a, converged=True, epochs_run=40,
                                                              gain_floor_pts=0.1, threshold_pts=0.5)))

    runs("ref", [0.88, 0.90, 0.90, 0.89], [0.99, 0.80, 0.70, 0.99])  # s1 and s2 tie on validation; test says s0
    runs("ce", [0.91, 0.92], [0.9, 0.9])                              # two of four seeds finished
    src, pending = weights.v2_sources()
    ref = src[rows["ref"]["tag"]]
    assert (ref["seed"], ref["val_acc1"], ref["cell"], ref["kind"]) == (seeds[1], 0.90, "ref", "student")
    assert ref["checkpoint"] == f"checkpoints/v2/v2_55k/ref/s{seeds[1]}/best.pt"
    assert ref["model_kwargs"] == hub.STUDENT_KWARGS and ref["converged_plan"]["converged"] is True
    assert f"s{seeds[0]} 88.00" in ref["selection"]
    assert set(pending) == {rows["ce"]["tag"], rows["free"]["tag"]} and rows["ce"]["tag"] not in src
    assert f"seeds {seeds[2:]} of {seeds} not finished" in pending[rows["ce"]["tag"]]
    plan["publish"] = [dict(rows["ref"], tag="odevit_small_patch7_28.unregistered")]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(plan))
    with pytest.raises(weights.config.ConfigError, match=r"publish\[0\]\.tag 'odevit_small_patch7_28.unregistered'"):
        weights.v2_sources()


def test_a_pending_tag_is_refused_saying_its_runs_still_train(tmp_path):
    """A registered tag listed as pending (its cell still training): loading it, through timm or odevit.hub, fails
    with one line naming the tag and why, never with timm's missing-file error."""
    root = tmp_path / "v2"
    shutil.copytree(ROOT / "weights" / hub.V2, root)
    m = json.loads((root / "manifest.json").read_text())
    tag = f"{hub.STUDENT_ARCH}.fmnist_v2_free"
    m["weights"].pop(tag, None)
    m["pending"] = {tag: "v2_55k/free: seeds [2402, 2403] of [2400, 2401, 2402, 2403] not finished"}
    (root / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(hub.WeightsError, match=rf"{tag}: not published yet, its runs are still training \(v2_55k/free"):
        hub.load(tag, str(root))
    with pytest.raises(hub.WeightsError, match="not published yet"):
        timm.create_model(tag, pretrained=True, pretrained_cfg_overlay=dict(file=str(root / f"{tag}.safetensors")))
