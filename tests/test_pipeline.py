"""End to end: `dvc repro` of the real dvc.yaml and notebooks on tiny synthetic data; notebook hygiene; report."""
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import yaml
from tiny_pipeline import ROOT, TINY, _env, tiny_plan  # the `repro` fixture: tests/conftest.py

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _finite(obj) -> bool:
    if isinstance(obj, dict):
        return all(_finite(v) for v in obj.values())
    if isinstance(obj, list):
        return all(_finite(v) for v in obj)
    if isinstance(obj, float):
        return math.isfinite(obj)
    return True


@pytest.mark.slow
def test_dvc_repro_tiny_writes_every_declared_output(repro):
    stages = yaml.safe_load((repro / "dvc.yaml").read_text())["stages"]  # the study stages of the tiny plan
    cells = TINY["study"]
    for name, seed in [(c, s) for c in cells["cells"] for s in cells["seeds"]]:  # the matrix stage: every cell
        m = json.loads((repro / f"results/cells/{name}/s{seed}/metrics.json").read_text())
        assert m["cell"] == name and m["seed"] == seed and _finite(m)
        assert (repro / f"checkpoints/cells/{name}/s{seed}/best.pt").is_file()
    from odevit.repro import config
    stages.pop("cell")
    plan = tiny_plan()
    for study in plan["studies"]:  # the plan's study stages: every (cell, seed) ran its whole tiny schedule
        stages.pop(study)
        for name, seed in [(c, s) for c in plan["studies"][study]["cells"] for s in plan["studies"][study]["seeds"]]:
            m = json.loads((repro / f"results/studies/{study}/{name}/s{seed}/metrics.json").read_text())
            assert (m["study"], m["cell"], m["seed"], m["epochs_run"]) == (study, name, seed, 2)
            assert m["plan_hash"] and m["provenance"]["resumes"] == 0 and m["provenance"]["cpu_s"] > 0
            own = config.uses_study_teacher(plan["studies"][study]["cells"][name])
            assert m.get("teacher_run") == (f"results/studies/{study}/teacher" if own else None)
        if plan["studies"][study].get("teacher"):  # its own teacher: trained by its stage, not 02_teacher's
            t = json.loads((repro / f"results/studies/{study}/teacher/metrics.json").read_text())
            assert t["plan_hash"] == m["plan_hash"] and t["epochs_run"] == 2 and t["teacher"]["augment"]
            import torch

            from odevit.repro.train import load_checkpoint

            own, default = (load_checkpoint(str(repro / p))["model"] for p in
                            (f"checkpoints/studies/{study}/teacher/best.pt", "checkpoints/02_teacher/best.pt"))
            assert not torch.equal(own["head.weight"], default["head.weight"])
    ev = __import__("pandas").read_csv(repro / "results/evidence/claims.csv")
    assert len(ev) == sum(len(st["questions"]) for st in plan["studies"].values())  # no exploratory snapshot here
    assert not ev.post_hoc.any() and (ev.n == 2).all()
    for name, st in stages.items():
        declared = []
        for kind in ("outs", "metrics", "plots"):
            for o in st.get(kind, []):
                declared.append(next(iter(o)) if isinstance(o, dict) else o)
        import itertools

        matrix = st.get("matrix", {})  # plan v2's run stages: one output per cell (${item.cell})
        assert all(isinstance(v, list) for v in matrix.values()), f"{name}: a matrix of params left here: {matrix}"
        items = [dict(zip(matrix, v)) for v in itertools.product(*matrix.values())] if matrix else [{}]
        for path, item in itertools.product(declared, items):
            for k, v in item.items():
                path = path.replace("${item.%s}" % k, str(v))
            assert (repro / path).exists(), f"{name}: {path} missing"
        for m in st.get("metrics", []):
            path = next(iter(m))
            data = json.loads((repro / path).read_text())
            assert data and _finite(data), f"{path}: {data}"
    from odevit.repro.notebook import NOTEBOOKS

    assert sorted(p.stem for p in (repro / "results/html").glob("*.html")) == sorted(NOTEBOOKS)
    # every stage of dvc.yaml ran (the two halves together) and a second repro is a no-op
    env = _env()
    names = subprocess.run(["dvc", "stage", "list", "--name-only"], cwd=repro, env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    assert set(yaml.safe_load((repro / "dvc.lock").read_text())["stages"]) == set(names)
    r = subprocess.run(["dvc", "status"], cwd=repro, env=env, capture_output=True, text=True)
    assert "up to date" in r.stdout, r.stdout


@pytest.mark.slow
def test_repro_prints_stages_and_epochs_not_library_noise(repro):
    log = (repro / "repro.log").read_text()
    for noise in ("Executing Cell", "Ending Cell", "without encryption", "IProgress not found",
                  "Passed unknown parameter", "Alternative text is missing", "<Figure size", "IPython.core.display"):
        assert noise not in log, f"{noise!r} in the dvc repro output"
    assert log.count("[06_dynamics] executing notebooks/06_dynamics.ipynb") == 1
    assert "epoch 2/2" in log  # the training progress lines still come through


def _metric_keys(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{path}{k}"
            yield from _metric_keys(v, f"{path}{k}.")


@pytest.mark.slow
def test_metric_keys_are_plain_identifiers(repro):
    import re

    files = list(repro.glob("results/**/metrics.json"))
    assert len(files) > 10
    for f in files:
        for key in _metric_keys(json.loads(f.read_text())):
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.rsplit(".", 1)[-1]), f"{f.relative_to(repro)}: {key}"


SERIES_PLOTS = {  # multi-series CSV -> the series it must hold (one line each in `dvc plots show`)
    "results/06_dynamics/lyapunov_per_class.csv": set(TINY["dynamics"]["cells"]),
    "results/06_dynamics/prop1_per_step.csv": {"error", "bound_measured_L", "bound_paper_L", "error_parallel",
                                               "bound_parallel_measured_L"},
    "results/06_dynamics/prop1_tightness.csv": {"min", "median"},
    "results/06_dynamics/euler_bound.csv": {"euler_parallel", "model_lie_trotter"},
    "results/06_dynamics/fidelity.csv": {"student", "teacher_step"},
    "results/06_dynamics/halting.csv": {"increment", "increment_or_stable"},
}


@pytest.mark.slow
def test_dvc_plots_draw_one_line_per_series(repro):
    """Every multi-series CSV is declared with a series template (colour = the `series` column) and renders."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    declared = {next(iter(p)): next(iter(p.values())) for st in stages.values() for p in st.get("plots", [])}
    r = subprocess.run(["dvc", "plots", "show", "--json"], cwd=repro, env=_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    shown = json.loads(r.stdout)
    assert not shown.get("errors"), shown.get("errors")
    for path, series in SERIES_PLOTS.items():
        assert declared[path]["template"].startswith("series"), path
        (plot,) = shown["data"][path]
        spec = plot["content"]
        assert spec["encoding"]["color"]["field"] == "series", path
        values = spec["data"]["values"]
        assert {v["series"] for v in values} == series, path
        assert {declared[path]["x"], declared[path]["y"]} <= set(values[0]), path


@pytest.mark.slow
def test_publish_stage_writes_verified_weights(repro):
    from odevit import hub

    m = json.loads((repro / "weights/quick/manifest.json").read_text())["weights"]
    assert set(m) == {t for t, v in hub.TAGS.items() if v[2] == hub.QUICK}
    assert not (repro / "weights/quick.staging").exists()
    for tag, e in m.items():
        hub.verify(tag, str(repro / "weights/quick"))  # file present with its recorded sha256
        assert e["architecture"] is None  # tiny run: not the registered (default) architecture
        # trained and evaluated on this CPU: the published Acc@1 is the run's, exactly
        assert e["metrics"]["acc1"] == e["run_metrics"]["acc1"] == json.loads((repro / e["metrics_file"]).read_text())["acc1"]
    assert {e["cell"] for e in m.values()} == {None, "ref", "free"} and {e["seed"] for e in m.values()} == {0}
    # the plan's tags (stage publish_evidence): each cell's seed with the best validation Acc@1, never the test set
    ev = json.loads((repro / "weights/evidence/manifest.json").read_text())["weights"]
    assert set(ev) == {t for t, v in hub.TAGS.items() if v[2] == hub.EVIDENCE}
    for tag, e in ev.items():
        hub.verify(tag, str(repro / "weights/evidence"))
        assert abs(e["metrics"]["acc1"] - e["run_metrics"]["acc1"]) == 0  # same CPU: the run's Acc@1 exactly
        if e["kind"] == "teacher":
            assert e["study"] is None and e["checkpoint"].endswith("teacher.safetensors")
            continue
        vals = {s: pd.read_csv(repro / f"results/studies/{e['study']}/{e['cell']}/s{s}/history.csv").val_acc1.max()
                for s in (0, 1)}
        assert e["seed"] == max(vals, key=lambda k: (vals[k], -k)) and e["val_acc1"] == vals[e["seed"]]
        assert set(e["converged_plan"]) == {"converged", "gain_last_pts", "threshold_pts"}


def dynamics_from_published(tmp, job) -> None:
    """06_dynamics run by papermill on a copy of the tiny pipeline without its trained checkpoints, with
    dynamics.weights: published (plan v2's published models)."""
    work = tmp / "w"
    shutil.copytree(job.pipeline(), work, ignore=shutil.ignore_patterns("checkpoints", ".dvc"))  # no trained checkpoints
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["dynamics"]["weights"] = "published"
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    r = job.run(["papermill", "-k", "python3", "--cwd", ".", "-f", "params.yaml", "notebooks/06_dynamics.ipynb",
                 str(tmp / "06.ipynb")], work)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((work / "results/06_dynamics/metrics.json").read_text())
    ref = json.loads((ROOT / "weights/v2/manifest.json").read_text())["weights"]["odevit_small_patch7_28.fmnist_v2_distill"]
    assert list(m["lyapunov"]) == ["ref"] and list(m["lyapunov"]["ref"]) == [f"seed{ref['seed']}"]  # plan v2's published ref


@pytest.mark.slow
@pytest.mark.background.with_args(dynamics_from_published, pipeline=True)  # beside the tests (tests/conftest.py)
def test_dynamics_notebook_runs_from_published_weights(background):
    """06_dynamics runs from the published weights alone (`dynamics_from_published`, a background check)."""
    background.result()


def notebook_from_its_folder(tmp, job) -> None:
    """As in Jupyter: kernel started in notebooks/, no injected parameters (params.yaml is read from the root)."""
    work = tmp / "w"
    shutil.copytree(job.pipeline(), work, ignore=shutil.ignore_patterns("checkpoints", ".dvc"))
    (work / "results/01_data/metrics.json").unlink()
    r = job.run(["papermill", "-k", "python3", "--cwd", "notebooks", "notebooks/01_data.ipynb", str(tmp / "01.ipynb")],
                work)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((work / "results/01_data/metrics.json").read_text())["dataset"] == "synthetic"
    assert not (work / "notebooks/results").exists()


@pytest.mark.slow
@pytest.mark.background.with_args(notebook_from_its_folder, pipeline=True)
def test_notebook_runs_when_opened_from_notebooks_dir(background):
    """A notebook run as Jupyter runs it, from notebooks/ (`notebook_from_its_folder`, a background check)."""
    background.result()


@pytest.mark.slow
def test_claims_follow_metrics_files(repro, tmp_path):
    """A study's claims (report.claims, what an exploratory snapshot's table is computed with) come from the cells'
    metrics.json files as they are now: with the reference cell's seeds at Acc@1 0.25 / 0.75, the
    ts_minus_free claim is the mean and std of the per-seed differences to the free cell's files, computed here. On a
    copy of the results: the module's workspace is shared with the other tests (the publish test compares the
    manifests with these very files)."""
    import statistics

    from odevit.repro import report

    results = tmp_path / "results"
    shutil.copytree(repro / "results", results)
    accs = {0: 0.25, 1: 0.75}
    assert set(accs) == set(TINY["study"]["seeds"])
    for s, acc in accs.items():
        path = results / f"cells/ref/s{s}/metrics.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "acc1": acc}))
    free = {s: json.loads((results / f"cells/free/s{s}/metrics.json").read_text())["acc1"] for s in accs}
    diffs = [100 * (accs[s] - free[s]) for s in accs]  # Acc@1 points
    claim = report.claims(str(results)).set_index("claim").loc["ts_minus_free"]
    assert claim.seeds == 2 and claim.ours_mean == pytest.approx(statistics.mean(diffs))
    assert claim.ours_std == pytest.approx(statistics.stdev(diffs))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.name)
def test_source_notebooks_are_clean(nb):
    d = json.loads(nb.read_text())
    assert d["metadata"]["kernelspec"]["name"] == "python3"
    for c in d["cells"]:
        if c["cell_type"] == "code":
            assert not c.get("outputs") and c.get("execution_count") is None, f"{nb.name} has outputs"
    tags = [c.get("metadata", {}).get("tags", []) for c in d["cells"]]
    assert d["cells"][0]["cell_type"] == "markdown" and ["parameters"] in tags


def fresh_clone(work, job) -> None:
    """git clone (committed results and weights, no DVC cache, no checkpoints): status (which plans every stage of
    the real pipeline), dag, exp show, and the documented `dvc exp run -S ...` examples together as one dry run of
    the quick run: the examples set params.yaml's study block, which the quick run's stages read (`cell`,
    06_dynamics, publish; `html` after them) and so does publish_evidence, whose upstream is the plan's ~300 study
    stages (their own params untouched by the examples). The dry run targets the quick run's stages: without targets
    it took 74 s instead of 48 s on the 2-core AMD EPYC, and `dvc status` beside it plans every stage anyway.
    docs/plan.md's example study planned in the other clone. Two clones, each running its commands one after another,
    the two at once: each command is one single-threaded DVC process, and two DVC processes in one repository would
    wait on its lock. Run in the background (`job`: tests/tiny_pipeline.py) by test_dvc_commands_work_on_a_fresh_clone."""
    if not (ROOT / ".git").exists():
        return
    from concurrent.futures import ThreadPoolExecutor

    readme = "\n".join((ROOT / p).read_text() for p in ("README.md", "docs/pipeline.md", "docs/results.md"))
    examples = [shlex.split(m) for m in re.findall(r"dvc exp run ((?:-S (?:'[^']*'|[^\s`$]+) ?)+)", readme)]
    assert len(examples) >= 3  # the documented `dvc exp run -S ...` examples, each checked as a dry run below
    # the examples touch different keys, so one dry run applies them all at once (each DVC process reads the whole
    # pipeline first: one run instead of one per example saves that read per example)
    quick = ["06_dynamics", "publish", "html"]  # the stages that read params.yaml's study block, and html after them
    cmds = [[["dvc", "exp", "run", "--dry", *(a for args in examples for a in args), *quick], ["dvc", "status"],
             ["dvc", "dag"]],
            [["dvc", "exp", "show", "--no-pager"]]]
    clones = [work / f"c{i}" for i in range(2)]
    for c in clones:
        r = job.run(["git", "clone", "-q", str(ROOT), str(c)], work)
        assert r.returncode == 0, r.stderr
    # docs/plan.md's example study, added as its "Adding a study" says: one block in plan.yaml, then `make study`,
    # whose first step (python -m odevit.repro.stages) runs here; then DVC plans its runs (`dvc repro --dry
    # my_ablation`, among the commands; tests/test_plan.py checks make study's steps and their order)
    doc = (ROOT / "docs/plan.md").read_text()
    block = textwrap.dedent(doc[doc.index("```yaml", doc.index("## Adding a study")) + 7:].split("```")[0])
    example = yaml.safe_load(block)
    assert list(example) == ["my_ablation"]
    with open(clones[1] / "plan.yaml", "a") as f:
        f.write(textwrap.indent(block, "  "))
    plan = yaml.safe_load((clones[1] / "plan.yaml").read_text())
    assert plan["studies"]["my_ablation"] == example["my_ablation"]
    r = job.run([sys.executable, "-m", "odevit.repro.stages"], clones[1])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cmds[1].insert(0, ["dvc", "repro", "--dry", "my_ablation"])  # in the clone whose plan has it

    def run_half(i):
        return [(cmd, job.run(cmd, clones[i])) for cmd in cmds[i]]

    with ThreadPoolExecutor(2) as pool:
        results = [x for half in pool.map(run_half, range(2)) for x in half]
    assert len(results) == sum(map(len, cmds)) == 5
    for cmd, r in results:
        assert r.returncode == 0, f"{' '.join(cmd)}: " + r.stdout[-2000:] + r.stderr[-2000:]
    dry = next(r for cmd, r in results if cmd[-1] == "my_ablation").stdout
    runs = [f"my_ablation@{c}-{s}" for c in example["my_ablation"]["cells"] for s in example["my_ablation"]["seeds"]]
    assert all(f"Running stage '{r}'" in dry for r in runs), dry[-2000:]


@pytest.mark.slow
@pytest.mark.background.with_args(fresh_clone)  # its DVC processes run beside the tests after the tiny pipeline's (conftest.py)
def test_dvc_commands_work_on_a_fresh_clone(background):
    """DVC's commands on a fresh clone of the repository, and docs/plan.md's example study (`fresh_clone`)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    background.result()


def test_a_background_check_waits_for_the_pipeline_and_fails_in_its_test(tmp_path):
    """A `background` check (tests/tiny_pipeline.py `Job`) starts its commands only once the thread it follows has
    ended, and what it raised is raised where its test asks for the result; `stop` ends a check still running."""
    import threading
    import time
    import types

    import tiny_pipeline

    gate, seen = threading.Event(), []
    pipeline = types.SimpleNamespace(thread=threading.Thread(target=gate.wait, daemon=True))  # a build, running
    pipeline.thread.start()

    def check(work, job):
        seen.append(pipeline.thread.is_alive())  # False: the check began after the "pipeline" ended
        seen.append(job.run([sys.executable, "-c", "print(6 * 7)"], work).stdout.strip())
        assert seen == [False, "41"], seen

    try:
        job = tiny_pipeline.Job(check, tmp_path, pipeline)
        time.sleep(0.2)
        assert seen == [] and job.thread.is_alive()  # the "pipeline" is still running
    finally:
        gate.set()
    with pytest.raises(AssertionError, match="42"):
        job.result()
    assert seen[0] is False

    def sleeper(work, job):
        job.run([sys.executable, "-c", "import time; time.sleep(60)"], work)

    job = tiny_pipeline.Job(sleeper, tmp_path, None)
    deadline = time.time() + 30
    while not job.procs and time.time() < deadline:
        time.sleep(0.05)
    t0 = time.time()
    job.stop()
    assert time.time() - t0 < 10 and not job.thread.is_alive() and job.procs[0].poll() is not None


def test_a_background_test_without_its_fixture_is_refused(tmp_path):
    """A test marked `background(fn)` that does not ask for the `background` fixture would have its check run and
    nobody read it: the session stops at collection, naming the test (tests/conftest.py)."""
    (tmp_path / "tests").mkdir()
    for name in ("conftest.py", "tiny_pipeline.py"):
        shutil.copy(ROOT / "tests" / name, tmp_path / "tests" / name)
    (tmp_path / "tests" / "test_x.py").write_text(
        "import pytest\n\n\ndef check(work, job):\n    raise AssertionError('found something')\n\n\n"
        "@pytest.mark.background.with_args(check)\ndef test_unread():\n    pass\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == pytest.ExitCode.USAGE_ERROR, r.stdout + r.stderr
    assert "not asking for the `background` fixture: tests/test_x.py::test_unread" in r.stderr


def test_stage_per_notebook():
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert stages.pop("cell")["cmd"] == "python -m odevit.repro.study ${item.name} ${item.seed}"  # the study's runs
    assert stages.pop("publish")["cmd"] == "python -m odevit.repro.publish"  # weights/quick (tests/test_hub.py)
    assert stages.pop("publish_evidence")["cmd"] == "python -m odevit.repro.publish --evidence"  # weights/evidence
    assert stages.pop("evidence")["cmd"] == "python -m odevit.repro.verdicts"  # the plan's verdicts
    html = stages.pop("html")
    assert html["cmd"] == "python -m odevit.repro.notebook --html"  # results/html/, every notebook
    from odevit.repro import notebook

    assert {f"outputs/{n}.ipynb" for n in notebook.NOTEBOOKS} <= set(html["deps"])  # a new notebook: a dep of its page
    for study, st in yaml.safe_load((ROOT / "plan.yaml").read_text())["studies"].items():  # one matrix stage per
        assert stages.pop(study)["cmd"] == f"python -m odevit.repro.study ${{item.cell}} ${{item.seed}} --study {study}"
        if st.get("teacher"):  # plan study, and one stage for a study's own teacher, which its cells depend on
            assert stages.pop(f"{study}_teacher")["cmd"] == f"python -m odevit.repro.study_teacher {study}"
            assert (ROOT / f"results/studies/{study}/teacher/.gitkeep").is_file()  # the folder they depend on
    assert stages.pop("v2_teacher")["cmd"] == "python -m odevit.repro.fast plan_v2.yaml --teacher-only"  # plan v2
    for study in yaml.safe_load((ROOT / "plan_v2.yaml").read_text())["studies"]:  # its runs (tests/test_stages.py)
        assert stages.pop(study)["cmd"].startswith(f"python -m odevit.repro.fast plan_v2.yaml --studies {study} ")
    assert stages.pop("v2_verdicts")["cmd"] == "python -m odevit.repro.verdicts2"  # results/v2/claims.csv
    assert {f"notebooks/{n}.ipynb" for n in stages} == {f"notebooks/{p.name}" for p in NOTEBOOKS}
    for name, st in stages.items():
        assert st["cmd"] == f"python -m odevit.repro.notebook {name}", name  # validates, then papermill
        assert {f"outputs/{name}.ipynb": {"cache": False}} in st["outs"], name  # executed copy committed


def test_stopping_the_background_pipeline_ends_every_process_it_started(tmp_path):
    """tests/conftest.py stops the tiny pipeline at the session's end: its DVC commands run in process groups of their
    own, and `stop` ends each group, the stage processes DVC started included; nothing starts after it."""
    import time

    import tiny_pipeline

    class Sleepy(tiny_pipeline._Build):  # a "DVC command" that starts a child which would sleep for a minute
        def _body(self):
            p = self._popen([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
                             "'import time; time.sleep(60)']); print(p.pid, flush=True); p.wait()"], self.work)
            self.grandchild = int(p.stdout.readline())
            p.communicate()

    shutil.copy(ROOT / "plan_v2.yaml", tmp_path)  # a workspace's file the build reads when it starts
    b = Sleepy(tmp_path)
    deadline = time.time() + 60
    while not hasattr(b, "grandchild") and time.time() < deadline:
        time.sleep(0.05)
    assert os.path.exists(f"/proc/{b.grandchild}")
    t0 = time.time()
    b.stop()
    assert time.time() - t0 < 30 and not b.thread.is_alive()
    assert all(p.poll() is not None for p in b.procs)
    for _ in range(100):  # the grandchild, reparented when its parent died, is reaped by init shortly after
        if not os.path.exists(f"/proc/{b.grandchild}") or " Z " in open(f"/proc/{b.grandchild}/stat").read():
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"process {b.grandchild} still running")
    with pytest.raises(RuntimeError, match="the session ended before the tiny pipeline was made"):
        b._popen(["true"], tmp_path)
