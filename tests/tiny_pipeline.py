"""The tiny pipeline: `dvc repro` of the real dvc.yaml and notebooks on tiny synthetic data, made once per test session
(the `repro` fixture, which tests/conftest.py offers every test module; the tests that read it run last), and the tiny
params other tests build on.

The tiny params are the repository's params.yaml with the knobs shrunk (TINY: synthetic 28 x 28 images, a 2-layer
teacher of width 16) and every study of the plan at a tiny budget (64 training images, 4 epochs; its cells, seeds and
questions as they are), so the workspace runs every stage of the real pipeline: the notebooks train the teacher and
every cell through the one trainer, 06_dynamics reads the published models, 07_verdicts writes the claims file and the
pages. The weak teacher of `ref_weak` is a freshly initialised tiny teacher, kept as the repository keeps the real one
(a safetensors file whose sha256 its selected.json records)."""
import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

TINY = {
    "base": dict(dataset="synthetic", image_size=28, channels=1, synthetic_size=192, val_size=64, batch_size=32,
                 eval_batch_size=64, device="cpu"),
    "teacher": dict(name=None, patch_size=7, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0, epochs=4),
    "distill": dict(num_steps=12, epochs=2, distance_batches=2),
    "dynamics": dict(weights="published", cells=["ref", "free"], test_limit=32, bound_samples=2,
                     bound_steps=[2, 4, 8], attention_images=2, pca_samples=8, power_iters=3),
}
TINY_BUDGET = {"train_limit": 64, "epochs": 4}  # every study's: 2 batches an epoch, a floor window of 1 -> 2 epochs
TINY_BUDGET_V3 = {"train_limit": 64, "epochs": 8}  # plan v3's studies: its floor window floor(0.25 x 8) = 2 epochs
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def tiny_params() -> dict:
    """params.yaml with TINY's knobs and every study at TINY_BUDGET (a copy: the caller may edit it)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for block, over in TINY.items():
        params[block].update(copy.deepcopy(over))
    for s in params["studies"].values():
        s["budget"] = dict(TINY_BUDGET)
    for s in (params.get("plan_v3") or {}).get("studies", {}).values():
        s["budget"] = dict(TINY_BUDGET_V3)
    return params


def _env() -> dict:
    """The environment with this interpreter's bin/ first on PATH (dvc, papermill of the test's venv), one thread."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", **ONE_THREAD)


def _weak_teacher(work: Path, params: dict) -> None:
    """A tiny weak teacher, kept as the repository keeps plan 1's: weights/v2_teacher/weak.safetensors, its distances
    and the sha256 of both in results/v2/teacher_weak/selected.json (what `pipeline.teacher_weights` checks)."""
    import torch
    from safetensors.torch import save_file

    from odevit.hub import sha256
    from odevit.repro import config, pipeline

    b, t = config.parse("base", params["base"]), config.load("teacher", params["teacher"])
    torch.manual_seed(0)
    model = pipeline.build_teacher(b, t)
    (work / "weights/v2_teacher").mkdir(parents=True)
    weights = work / "weights/v2_teacher/weak.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(weights))
    out = work / "results/v2/teacher_weak"
    out.mkdir(parents=True)
    (out / "distances.csv").write_text("layer,distance\n" + "".join(f"{i + 1},{1.0 + i}\n" for i in range(t.depth)))
    (out / "selected.json").write_text(json.dumps(dict(
        sha256="tiny-weak-teacher", weights="weights/v2_teacher/weak.safetensors", weights_sha256=sha256(str(weights)))))


def prepare(work: Path) -> None:
    """The workspace: the pipeline (dvc.yaml, notebooks, the package), the pages 07_verdicts writes, the published
    models 06_dynamics reads, the tiny params and weak teacher; no committed run (results/v2 is made here)."""
    work.mkdir(parents=True, exist_ok=True)
    for name in ("dvc.yaml", "notebooks", "odevit", "docs", "README.md", "CITATION.cff", "weights/v2", "presets"):
        src, dst = ROOT / name, work / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__")) if src.is_dir()
         else shutil.copy(src, dst))
    (work / "outputs").mkdir()
    (work / "results/v2_cpu").mkdir(parents=True)  # the machine-shift reruns: none here (one machine)
    params = tiny_params()
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _weak_teacher(work, params)
    for args in (["init", "--no-scm", "-q"], ["config", "core.analytics", "false"]):
        dvc(work, *args)


def dvc(work: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["dvc", *args], cwd=work, env=_env(), capture_output=True, text=True)
    assert not check or r.returncode == 0, f"dvc {' '.join(args)}: " + (r.stdout + r.stderr)[-8000:]
    return r


@pytest.fixture(scope="session")
def repro(tmp_path_factory):
    """The tiny pipeline's workspace after `dvc repro` (its log in repro.log)."""
    work = tmp_path_factory.mktemp("tiny") / "work"
    prepare(work)
    r = dvc(work, "repro")
    (work / "repro.log").write_text(r.stdout + r.stderr)
    return work
