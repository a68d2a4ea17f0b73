"""The one pipeline end to end: `dvc repro` of the real dvc.yaml and notebooks on tiny data (tests/tiny_pipeline.py)
makes every stage, trains every run through the notebooks and leaves nothing to do; a committed run is reused by its
run key; a cell added to params.yaml is the only thing trained; a bad value stops `dvc repro` before any training; and
on a fresh clone of the repository `dvc status` is clean and an added cell plans exactly its runs."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tiny_pipeline import _env, dvc

ROOT = Path(__file__).resolve().parents[1]
UP_TO_DATE = "Data and pipelines are up to date."


def _copy(repro: Path, tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(repro, work, symlinks=True)
    return work


def _fast_dry(work: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "odevit.repro.fast", "--dry"], cwd=work, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _add_cell(work: Path, name: str, cell: dict) -> None:
    """One edit of params.yaml: a cell under study v2_10k."""
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["studies"]["v2_10k"]["cells"][name] = cell
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _dry_stages(work: Path) -> set:
    """The stages `dvc repro --dry` would run."""
    return {ln.split("'")[1] for ln in dvc(work, "repro", "--dry").stdout.splitlines() if ln.startswith("Running stage")}


def _trained(log: str) -> set:
    """The (study, cell) groups a log shows training (their epoch lines)."""
    return {tuple(ln.split()[:2]) for ln in log.splitlines() if " epoch " in ln and ln.split()[0][:3] in ("v2_", "v3_")}


def _studies(plan: dict) -> dict:
    """study -> (its plan's results folder, its block): plan v2's studies, then plan v3's."""
    return {**{s: ("results/v2", b) for s, b in plan["studies"].items()},
            **{s: ("results/v3", b) for s, b in (plan.get("plan_v3") or {}).get("studies", {}).items()}}


@pytest.mark.slow
def test_every_stage_made_its_outputs_and_nothing_is_left_to_do(repro):
    stages = yaml.safe_load((repro / "dvc.yaml").read_text())["stages"]
    plan = yaml.safe_load((repro / "params.yaml").read_text())
    for name, st in stages.items():
        for o in st["outs"]:
            path = repro / next(iter(o))
            assert path.exists(), f"{name}: {path}"
            if path.suffix == ".png":
                assert path.stat().st_size > 10_000, path
        nb = json.loads((repro / f"outputs/{name}.ipynb").read_text())
        assert any("image/png" in out.get("data", {}) for c in nb["cells"] for out in c.get("outputs", [])) or \
            name == "07_verdicts" and (repro / "results/v2/verdicts_v2_headline.png").exists(), name
    log = (repro / "repro.log").read_text()
    trained = _trained(log)
    studies = _studies(plan)
    cells = {(s, c) for s, (_, st) in studies.items() for c in st["cells"]}
    assert trained == cells and any(s.startswith("v3_") for s, _ in cells)  # every cell of both plans, by a notebook
    for s, c in cells:
        res, st = studies[s]
        key = json.loads((repro / f"{res}/{s}/{c}/key.json").read_text())
        assert key["parts"]["cell"] == c and key["parts"]["seeds"] == st["seeds"]
        assert all((repro / f"{res}/{s}/{c}/s{x}/metrics.json").exists() for x in st["seeds"])
    claims = pd.read_csv(repro / "results/v2/claims.csv")
    assert list(claims.question) == [q["id"] for st in plan["studies"].values() for q in st["questions"]]
    claims3 = pd.read_csv(repro / "results/v3/claims.csv")
    assert list(claims3.question) == [q["id"] for st in plan["plan_v3"]["studies"].values() for q in st["questions"]]
    assert not claims3.verdict.str.startswith("not measured").any()  # every v3 row computed from its runs
    assert UP_TO_DATE in dvc(repro, "status").stdout


@pytest.mark.slow
def test_a_forced_rerun_reuses_every_committed_run(repro, tmp_path):
    work = _copy(repro, tmp_path)
    log = dvc(work, "repro", "--force", "03_budget").stdout
    assert _trained(log) == set() and log.count(": reused (") == (4 + 3) * 3  # v2's 4 and v3's 3 studies x 3 cells
    assert UP_TO_DATE in dvc(work, "status").stdout


@pytest.mark.slow
def test_a_cell_added_to_params_yaml_is_all_that_trains(repro, tmp_path):
    work = _copy(repro, tmp_path)
    _add_cell(work, "parallel", {"solver": "parallel"})
    assert _dry_stages(work) == {"03_budget", "04_steps", "05_design", "07_verdicts"}
    assert [ln for ln in _fast_dry(work).splitlines() if "would train" in ln] == [
        "v2_10k parallel: would train 6 runs (seeds [2300, 2301, 2302, 2303, 2304, 2305], 4 epochs, 64 training images)"]
    log = dvc(work, "repro").stdout
    assert _trained(log) == {("v2_10k", "parallel")}
    assert "v2_10k ref: reused" in log
    assert UP_TO_DATE in dvc(work, "status").stdout


@pytest.mark.slow
def test_a_bad_cell_stops_dvc_repro_before_any_training(repro, tmp_path):
    work = _copy(repro, tmp_path)
    _add_cell(work, "x", {"solver": "euler"})
    r = dvc(work, "repro", check=False)
    assert r.returncode != 0
    errors = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("error:")]
    assert errors == ["error: params.yaml: distill.solver = 'euler' is not one of "
                      "['lie_trotter', 'parallel', 'rk4', 'strang'] (in studies.v2_10k.cells.x)"]
    assert _trained(r.stdout) == set() and not (work / "results/v2/v2_10k/x").exists()


def _unmade(root: Path) -> dict:
    """The plan cells whose runs are not committed in `root` (plan v3's while they are being made), in the trainer's
    order: the cell's results folder -> the trainer's dry-run line for it."""
    out = {}
    for s, (res, st) in _studies(yaml.safe_load((root / "params.yaml").read_text())).items():
        for c in st["cells"]:
            if not all((root / f"{res}/{s}/{c}/s{x}/metrics.json").exists() for x in st["seeds"]):
                out[f"{res}/{s}/{c}"] = (f"{s} {c}: would train {len(st['seeds'])} runs (seeds {st['seeds']}, "
                                         f"{st['budget']['epochs']} epochs, {st['budget']['train_limit'] or 'all'} "
                                         "training images)")
    return out


def _stages_writing(root: Path, folders) -> set:
    """The dvc.yaml stages whose outs hold any of `folders` (an out is the folder or one above it)."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]
    return {name for name, st in stages.items() for out in st.get("outs", []) for f in folders
            if f == next(iter(out)) or f.startswith(next(iter(out)) + "/")}


@pytest.mark.slow
def test_a_fresh_clone_is_up_to_date_and_an_added_cell_plans_exactly_its_runs(tmp_path):
    """On a clone of the committed repository (no checkpoints, nothing trained): `dvc status` is clean and the
    trainer plans no run (a plan cell left unmade: only the stages that write it, and exactly its runs); a cell added to a study
    makes `dvc repro --dry` re-execute the notebooks that read that study and the trainer plan only its runs more."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    unmade = _unmade(clone)
    waiting = {"03_budget", "04_steps", "05_design", "07_verdicts"}
    if unmade:  # the stages that write the unmade cells, and 07_verdicts too where plan v3's runs landed since it ran
        training = _stages_writing(clone, unmade)
        assert training and training <= _dry_stages(clone) <= training | {"07_verdicts"}
    else:
        assert UP_TO_DATE in dvc(clone, "status").stdout
    assert [ln.split("; refused here: ")[0] for ln in _fast_dry(clone).splitlines() if "would train" in ln] == \
        list(unmade.values())  # a cell bound to another machine type than this one's says so after its line
    _add_cell(clone, "parallel", {"solver": "parallel"})
    assert _dry_stages(clone) == waiting
    would = [ln.split("; refused here: ")[0] for ln in _fast_dry(clone).splitlines() if "would train" in ln]
    assert would == ["v2_10k parallel: would train 6 runs (seeds [2300, 2301, 2302, 2303, 2304, 2305], 40 epochs, "
                     "10000 training images)"] + list(unmade.values())


@pytest.mark.slow
def test_a_study_bound_to_another_machine_type_is_refused_before_it_trains(repro, tmp_path):
    """Plan v3's rule machine: one_type_per_study. A v3 study whose finished runs name another machine type is not
    trained here: one line naming both types, exit 2 (the stage fails, nothing is recorded as done), nothing trained;
    the dry run says so beside the runs it would train."""
    work = _copy(repro, tmp_path)
    m = work / "results/v3/v3_1k/ref/s3100/metrics.json"
    made = json.loads(m.read_text())
    made["provenance"]["device"] = "CPU: elsewhere"
    m.write_text(json.dumps(made))
    for d in ("results/v3/v3_1k/free", "checkpoints/v3/v3_1k/free"):
        shutil.rmtree(work / d)
    r = subprocess.run([sys.executable, "-m", "odevit.repro.fast", "--cells", "free"], cwd=work, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip()
    assert line.startswith("v3_1k: its runs were made on ") and "CPU: elsewhere" in line and "\n" not in line
    assert _trained(r.stdout) == set() and not (work / "results/v3/v3_1k/free").exists()
    r = subprocess.run([sys.executable, "-m", "odevit.repro.fast", "--cells", "free", "--dry"], cwd=work, env=_env(),
                       capture_output=True, text=True, timeout=600)
    would = [ln for ln in r.stdout.splitlines() if "would train" in ln]
    assert r.returncode == 0 and len(would) == 1 and would[0].startswith("v3_1k free: would train ") and \
        would[0].endswith(f"; refused here: {line}"), r.stdout
