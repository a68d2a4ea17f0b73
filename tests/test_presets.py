"""Every paper-scale preset runs its stages at its real shapes, on a handful of synthetic images, through the code
the DVC stages run: `odevit.repro.run 02_teacher` (the teacher notebook's training), the teacher distances of 02, then
the study cells `ref` (distilled student) and `free` (`odevit.repro.study.run`, i.e. `python -m odevit.repro.study CELL SEED`).

Real shapes: 224 px, a ViT-B/16-shaped teacher (teacher.name's architecture, trained from scratch here: no hub),
a D 768 student with 10 registers, N 35 (23 for ImageNet-100), dropout 0.1. Only the data and the budget are
tiny (2 training images, batch 2, one epoch).

Three of the five presets train here (AT_SHAPES); the other two differ from a trained one only in values that a
trained preset also has, once the tiny data replace the dataset (test_presets_not_trained_here_are_covered): each
real-shape preset costs 90-130 s of CPU, and those two would run no code the three do not.
"""
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import List

import pandas as pd
import pytest
import torch
import yaml

from odevit.repro import config, pipeline, run, study, train

ROOT = Path(__file__).resolve().parents[1]
PAPER = sorted(p.name for p in (ROOT / "presets").glob("*dino*.yaml"))
# trained at their shapes: Base + CE from epoch 200 (CIFAR-100), Small (mlp_ratio 1), Base at N 23 with JaSMin k 10
AT_SHAPES = ["cifar100_dino_base.yaml", "cifar10_dino_small.yaml", "imagenet100_dino_base.yaml"]
TINY_DATA = {
    "base": dict(dataset="synthetic", synthetic_size=2, train_limit=0, val_size=0, select_on="test", test_limit=2,
                 batch_size=2, eval_batch_size=2,
                 device="cpu", precision="fp32"),
    "teacher": dict(pretrained=False, weights_file=None, linear_probe=False, epochs=1),
    "distill": dict(epochs=1, distance_batches=1),
    "study": dict(seeds=[0], robustness_steps=[1], robustness_test_limit=2),
}


def test_every_paper_preset_is_checked():
    assert len(PAPER) == 5, PAPER


def _tiny_params(preset: str) -> dict:
    """params.yaml + the preset + TINY_DATA: what run_preset trains."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for block, values in yaml.safe_load((ROOT / "presets" / preset).read_text()).items():
        params[block].update(values)
    for block, values in TINY_DATA.items():
        params[block].update(values)
    return params


def _flat(params: dict) -> dict:
    return {(block, k): repr(v) for block, values in params.items() if isinstance(values, dict) for k, v in values.items()}


def _untrained(mine: dict, trained: dict) -> set:
    """The (block, key) = value pairs of `mine` that differ from its nearest trained preset and that no trained preset
    has: what training the trained presets would not exercise."""
    seen = set().union(*(set(f.items()) for f in trained.values()))
    nearest = min(trained.values(), key=lambda f: len(set(mine.items()) ^ set(f.items())))
    return {kv for kv in mine.items() if nearest.get(kv[0]) != kv[1]} - seen


def test_presets_not_trained_here_are_covered(tmp_path, monkeypatch):
    """A preset left out of AT_SHAPES differs from its nearest trained preset only in values (block, key, value) that
    some trained preset has too; it still parses (config.check_stage) and builds at its shapes on the meta device.
    A preset with a value no trained preset has (a new N, a new mlp_ratio) fails here until it joins AT_SHAPES."""
    assert set(AT_SHAPES) < set(PAPER)
    trained = {p: _flat(_tiny_params(p)) for p in AT_SHAPES}
    n47 = {**trained[AT_SHAPES[0]], ("distill", "num_steps"): "47"}
    assert _untrained(n47, trained) == {(("distill", "num_steps"), "47")}  # the rule can fail: N 47 is nobody's
    monkeypatch.chdir(tmp_path)
    for preset in sorted(set(PAPER) - set(AT_SHAPES)):
        assert not _untrained(_flat(_tiny_params(preset)), trained), f"{preset}: trained by no preset in AT_SHAPES"
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(_tiny_params(preset)))
        cfg = config.check_stage("cell")
        b, t, d = cfg["base"], cfg["teacher"], cfg["distill"]
        with torch.device("meta"):
            teacher = pipeline.build_teacher(b, t)
            for cell in ("ref", "free"):
                model = study.build_cell(teacher, *study.cell_config(d, cfg["study"], cell))
                assert (model.embed_dim, model.num_steps, model.num_patches) == (768, d.num_steps, 196), preset


@pytest.mark.slow
@pytest.mark.alone  # ~6 GB a child: after the tiny pipeline's processes (tests/conftest.py), never beside them
@pytest.mark.parametrize("preset", AT_SHAPES)
def test_paper_preset_runs_at_its_shapes(preset, tmp_path):
    """Each preset in child processes: a ViT-B/16 teacher and a D 768 student at 224 px leave ~6 GB of allocator
    pages behind, which one pytest process would carry into the next preset (9.6 GB after three, measured with GNU
    time). One child trains the teacher and the ref cell, a second the free cell: in one child the free cell's
    training came on top of what the ref cell left resident (7.3 GB; 5.9 GB each apart, GNU time, cifar100_dino_base),
    and the suite, every process summed (tests/conftest.py), went just over 8 GB."""
    for cells in (["ref"], ["free"]):  # the child imports this checkout's odevit, whatever the venv has installed
        code = (f"import sys; sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'tests')!r}]; import test_presets; "
                f"test_presets.run_preset({preset!r}, {str(tmp_path)!r}, {cells!r})")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
        print(r.stdout.strip().splitlines()[-1])


def run_preset(preset: str, tmp: str, cells: List[str]) -> None:
    """The preset's stages at its real shapes on tiny data, in `tmp` (called in child processes by the test): the
    teacher stage where `tmp` has no params.yaml yet (the first child), then the study `cells`."""
    import os

    tmp_path = Path(tmp)
    params = _tiny_params(preset)
    first = not (tmp_path / "params.yaml").exists()
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    os.chdir(tmp_path)

    cfg = config.check_stage("cell")
    b, t, d = cfg["base"], cfg["teacher"], cfg["distill"]
    assert (b.image_size, t.patch_size, t.embed_dim, t.depth, t.num_heads) == (224, 16, 768, 12, 12)
    assert d.reg_tokens == 10 and d.dropout == 0.1 and d.num_steps in (23, 35)

    times = {}
    device = pipeline.setup(b)
    if first:
        t0 = time.perf_counter()
        run.run("02_teacher")  # the teacher stage's training (pipeline.fit_teacher), checkpoints/02_teacher
        times["teacher"] = time.perf_counter() - t0
        teacher = study.load_teacher(b, t, device)  # the teacher's layer distances, which the ref cell's schedule reads
        tr, _ = pipeline.loaders(b)
        dist = pipeline.teacher_distances(teacher, tr, d.distance_batches, d.distance_tokens, device)
        assert len(dist) == 12
        pipeline.write_csv(pd.DataFrame({"layer": range(1, 13), "distance": dist}), "results/02_teacher/distances.csv")
        del teacher
    # The checks of each trained cell's checkpoint build its architecture on the meta device (shapes, no storage, no
    # initialisation): the same constructor and config as the run, and `load_weights` (strict load_state_dict) still
    # fails on any missing, extra or differently shaped tensor of best.pt; only the values are not copied, and no
    # check reads them. On CPU the real build was a ViT-B/16 teacher read from its checkpoint plus the student's
    # spectral init (an SVD in float64 per weight matrix, twice for `free`): about a third of each preset's time.
    with torch.device("meta"):
        shapes_teacher = pipeline.build_teacher(b, t)
    for cell in cells:
        t0 = time.perf_counter()
        m = study.run(cell, 0)
        times[cell] = time.perf_counter() - t0
        assert m["train_images"] == 2 and 0.0 <= m["acc1"] <= 1.0
        with torch.device("meta"):
            model = study.build_cell(shapes_teacher, *study.cell_config(d, cfg["study"], cell))
        assert all(p.is_meta for p in model.parameters())
        with warnings.catch_warnings():  # "copying from a non-meta parameter ... is a no-op": the point here
            warnings.filterwarnings("ignore", message=".*meta parameter.*")
            train.load_weights(model, f"checkpoints/cells/{cell}/s0/best.pt")
        assert (model.embed_dim, model.num_steps, model.num_reg_tokens, model.num_patches) == (768, d.num_steps, 10, 196)
        assert model.field.attn.attn_drop.p == 0.1 and model.field.mlp.fc1.out_features == int(768 * d.mlp_ratio)
        if cell == "ref":
            assert len(m["checkpoints"]) == 12 and m["checkpoints"][-1] == d.num_steps
    print(f"\n{preset}: wall s per stage (CPU, batch 2, 1 step + evaluation): "
          + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))


def _cells(epochs: int = 3):
    """Every study cell's distill config, from the repository's params.yaml with distill.epochs = `epochs`."""
    import dataclasses

    cfg = config.check_stage("cell", str(ROOT / "params.yaml"))
    d = dataclasses.replace(cfg["distill"], epochs=epochs)
    return {name: dataclasses.asdict(study.cell_config(d, cfg["study"], name)[0]) for name in cfg["study"].cells}


def _differ(a: dict, b: dict) -> set:
    return {k for k in a if a[k] != b[k]}


def test_reference_is_label_free_and_the_curriculum_cells_isolate_one_difference_each(monkeypatch):
    """ref = the paper's MSE + JaSMin (CE weight 0); ce adds CE from epoch 0; pub_curriculum differs from ce only in
    the CE/head timing (rescaled 200/300 of the run's epochs); published differs from pub_curriculum only in the
    other published switches."""
    monkeypatch.chdir(ROOT)  # cell presets are paths relative to the repository root
    c = _cells(epochs=3)
    assert c["ref"]["ce_weight"] == 0.0 and c["ref"]["unfreeze_head_at"] == -1 and "head" in c["ref"]["freeze"]
    assert _differ(c["ce"], c["ref"]) == {"ce_weight"} and c["ce"]["ce_weight"] == 1.0
    assert _differ(c["pub_curriculum"], c["ce"]) == {"ce_from_epoch", "unfreeze_head_at"}
    assert c["pub_curriculum"]["ce_from_epoch"] == c["pub_curriculum"]["unfreeze_head_at"] == 2  # round(200/300 * 3)
    assert _differ(c["published"], c["pub_curriculum"]) == {
        "solver", "jasmin_detach", "jasmin_maps_from", "schedule_points", "attn_maps_after_dropout",
        "spectral_init_qkv", "head_norm", "freeze", "attn_l1_weight", "mse_weight", "label_smoothing", "dropout",
        "cycles"}
    assert c["published"]["ce_weight"] == 1.0  # the published recipe still gets CE, with its curriculum
    assert study.preset_overrides(str(ROOT / "presets/published_curriculum.yaml"), 300) == {
        "ce_weight": 1.0, "ce_from_epoch": 200, "unfreeze_head_at": 200}


def test_published_preset_sets_the_three_training_switches():
    block = yaml.safe_load((ROOT / "presets" / "published_code.yaml").read_text())["distill"]
    assert (block["jasmin_maps_from"], block["schedule_points"], block["attn_maps_after_dropout"]) == \
        ("grid_points", "grid_points", True)
    assert all(k in study.SWITCH_KEYS for k in block if k != "epochs"), [k for k in block if k not in study.SWITCH_KEYS]
    defaults = config.parse("distill", {})
    assert (defaults.jasmin_maps_from, defaults.schedule_points, defaults.attn_maps_after_dropout) == \
        ("steps", "steps", False)  # our rules are the default
    with pytest.raises(config.ConfigError, match="distill.schedule_points = 'grid_points' needs distill.schedule"):
        config.parse("distill", {"schedule_points": "grid_points", "schedule": "uniform"})
    with pytest.raises(config.ConfigError, match=r"distill.jasmin_maps_from = 'grid' is not one of"):
        config.parse("distill", {"jasmin_maps_from": "grid"})
