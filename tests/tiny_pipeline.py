"""The tiny pipeline: `dvc repro` of the real dvc.yaml and notebooks on tiny synthetic data, made once per test
session in the background while the other tests run (the `repro` fixture, which tests/conftest.py offers every test
module and starts at the session's first test: test_pipeline checks the stages and their outputs, test_v2_figures the
executed plan-v2 notebooks), and the tiny params and plan other tests build on."""
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, Optional

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

TINY = {
    "base": dict(dataset="synthetic", image_size=28, channels=1, synthetic_size=192, val_size=64, batch_size=32,
                 eval_batch_size=64, device="cpu"),
    "teacher": dict(name=None, patch_size=7, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0, epochs=2),
    "distill": dict(num_steps=4, epochs=2, distance_batches=2),
    "study": dict(seeds=[0, 1], train_limit=64, robustness_test_limit=32, robustness_steps=[1, 8],
                  cells={"ref": {}, "free": {"free": True}, "jasmin_off": {"jasmin_weight": 0.0}}),
    "dynamics": dict(weights="trained", cells=["ref", "jasmin_off"], test_limit=32, bound_samples=2,
                     bound_steps=[2, 4, 8], attention_images=2, pca_samples=8, power_iters=3),
}


# plan.yaml's studies the tiny pipeline leaves out: each runs the same code as a study it keeps, at another budget,
# and at the tiny budget every study has the same one (confirm_55k_40ep, confirm_3k, confirm_10k, confirm_1k as
# confirm_55k; remedy_3k_b as remedy_3k). Its study stages come from its plan (python -m odevit.repro.stages, as for
# any plan): 18 runs, each a DVC stage and a process (~8 s on 2 cores, most of it starting Python).
TINY_LEAVES_OUT = ("confirm_55k_40ep", "confirm_3k", "confirm_10k", "confirm_1k", "remedy_3k_b")


def tiny_plan() -> dict:
    """plan.yaml's studies (but TINY_LEAVES_OUT) at a tiny budget: 2 seeds, 2 epochs, 64 images; every study keeps its
    questions whose cells it keeps (confirm_55k all three cells, the ablation study ref and
    jasmin_off, teacher strength ref and ref_strong with a 2-epoch teacher), status exploratory (no power gate at 2 seeds)
    and no exploratory snapshot (not copied)."""
    plan = yaml.safe_load((ROOT / "plan.yaml").read_text())
    plan.pop("replicates", None)  # their folders are not copied
    for name in TINY_LEAVES_OUT:
        del plan["studies"][name]
    for name, st in plan["studies"].items():
        st.update(status="exploratory", seeds=[0, 1], budget={"train_limit": 64, "epochs": 2})
        if name.startswith("confirm_") and name not in ("confirm_55k",):
            st["cells"] = {k: v for k, v in st["cells"].items() if k in ("ref", "free")}
        if st.get("teacher"):  # teacher strength: ref from 02_teacher's teacher, ref_strong from the study's own
            st["cells"] = {k: v for k, v in st["cells"].items() if k in ("ref", "ref_strong")}
            st["teacher"]["epochs"] = 2
        elif len(st["cells"]) > 3:  # the ablation study: ref and one switch (its questions are alike)
            st["cells"] = {k: v for k, v in st["cells"].items() if k in ("ref", "jasmin_off")}
        st["questions"] = [q for q in st["questions"] if q["a"] in st["cells"] and q.get("b", q["a"]) in st["cells"]]
        for q in st["questions"]:
            q.pop("exploratory", None)
    return plan


def tiny_params() -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for block, over in TINY.items():  # a copy: a test that edits the result leaves TINY as it is for the next
        params[block].update(copy.deepcopy(over))
    return params


ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # background processes; tests beside them (conftest)


def _env() -> dict:
    """The environment with this interpreter's bin/ first on PATH (dvc, papermill of the test's venv)."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def _snapshot_teacher(work: Path) -> None:
    """plan.yaml's publish block names a teacher kept as a committed snapshot (its teacher.safetensors and
    results/02_teacher/metrics.json): here a freshly initialised tiny teacher with its measured Acc@1."""
    import torch
    from safetensors.torch import save_file

    from odevit.repro import config, evaluate, pipeline, publish

    cfg = config.check_stage("publish", str(work / "params.yaml"))
    b, t = cfg["base"], cfg["teacher"]
    torch.manual_seed(0)
    model = pipeline.build_teacher(b, t).eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the publish stage will evaluate it: one thread, like every stage process here
    try:
        m = evaluate.evaluate_on_test(model, publish._data_spec(b, b.seed))
    finally:
        torch.set_num_threads(threads)
    snap = work / yaml.safe_load((ROOT / "plan.yaml").read_text())["publish"][-1]["snapshot"]
    (snap / "results/02_teacher").mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(snap / "teacher.safetensors"))
    (snap / "results/02_teacher/metrics.json").write_text(json.dumps(m))


# The tiny pipeline is made in a background thread from the session's first test on (`start`, called by
# tests/conftest.py when some selected test asks for `repro`), while the tests that do not read it run: its DVC
# processes and theirs share the 2 cores, instead of the pipeline's minutes coming before them (docs/tests.md, "Where
# its time goes", has the suite timed both ways). conftest runs the tests that ask for `repro` after the others, then
# the tests whose background checks (`Job`) ran beside them once the pipeline's processes had ended, and the heavy ones
# (marked `alone`: the presets at their shapes) last, when no background process runs. The workspace is prepared, and its tiny teacher snapshot made (torch, this
# process's RNG), before the thread starts; the thread only copies files and waits on subprocesses, so it touches no
# state a test uses.
#
# The two halves run at once, one DVC process each (one core each on 2 cores): the quick half runs the quick run's 6
# cells, 06_dynamics, publish, the plan-v2 notebooks (03–05, 07, 08: they read the committed results/v2 and need neither
# half's runs) and `html`, which exports every executed notebook (so all of them are made in that half); the plan
# half the plan's 18 runs, its teacher, evidence and publish_evidence. repro.log ends with each half's wall time.


def _merge_run(src: Path, dst: Path) -> None:
    """Bring the plan half's run (`src`) into the quick half's workspace (`dst`): its stages' outputs, its DVC cache
    and its dvc.lock entries (the two halves share 01_data and 02_teacher, identical: copied before they split)."""
    for d in ("results/studies", "results/evidence", "checkpoints/studies", "weights/evidence", ".dvc/cache"):
        if (src / d).exists():
            shutil.copytree(src / d, dst / d, dirs_exist_ok=True)
    lock, theirs = (yaml.safe_load((p / "dvc.lock").read_text()) for p in (dst, src))
    for name, entry in theirs["stages"].items():
        assert lock["stages"].get(name, entry) == entry, f"{name}: the two halves ran it differently"
        lock["stages"][name] = entry
    (dst / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))


def _prepare(work: Path) -> None:
    """The workspace: the repository's pipeline, notebooks and plan v2's committed runs, tiny params and plan, its
    study stages, the kept teacher's snapshot."""
    (work / "outputs").mkdir()  # in git as outputs/.gitkeep
    for name in ("dvc.yaml", "notebooks", "odevit", "presets", "plan_v2.yaml", "results/v2", "results/v2_cpu",
                 "docs/templates", "weights/v2"):  # plan v2's committed runs and reruns, which its notebooks' stages
        # (03–05, 07, 08) read, and its published models (a dependency of 06_dynamics, which reads them with weights: published)
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, work / name)
    (work / "params.yaml").write_text(yaml.safe_dump(tiny_params()))
    (work / "plan.yaml").write_text(yaml.safe_dump(tiny_plan()))
    subprocess.run([sys.executable, "-m", "odevit.repro.stages"], cwd=work, check=True)  # its study stages
    evidence_deps = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["evidence"]["deps"]
    for d in evidence_deps:  # the evidence stage's exploratory and replicate folders (empty here)
        if d.startswith("docs/evidence/"):
            (work / d).mkdir(parents=True)
    _snapshot_teacher(work)


class _Background:
    """Work made in a background thread of this pytest process (`_body`), every command it runs in a process group
    of its own (`_popen`), so that `stop` ends each command with every process it started."""

    def __init__(self, env: dict) -> None:
        self.error, self.procs, self.env = None, [], env
        self.lock = threading.Lock()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def _popen(self, cmd, cwd: Path, stderr=subprocess.STDOUT) -> subprocess.Popen:
        """A command in a process group of its own (`stop` ends it with every process it started)."""
        with self.lock:
            if self.stopped:
                raise RuntimeError(f"the session ended before {self.what} was made")
            p = subprocess.Popen(cmd, cwd=cwd, env=self.env, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                 start_new_session=True)
            self.procs.append(p)
            return p

    def _run(self) -> None:
        self.began = time.time()
        try:
            self._body()
        except BaseException as e:  # raised again by `result`, in the test that asks
            self.error = e
        finally:
            self.ended = time.time()

    def result(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.value

    def halt(self) -> None:
        """End every command still running, and start no other (a session interrupted, or one that never asked)."""
        with self.lock:
            self.stopped = True
            for p in self.procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass

    def stop(self) -> None:
        self.halt()
        self.thread.join(timeout=60)


class _Build(_Background):
    """The session's one tiny pipeline: its workspace, the thread making it, the DVC processes it runs."""

    what = "the tiny pipeline"

    def __init__(self, work: Path) -> None:
        # the stage processes' environment, taken here in the main thread: a test that sets a variable for a moment
        # (e.g. ODEVIT_MEMORY_LIMIT) never reaches them. One thread each: its models are tiny (a second thread speeds
        # nothing up), and beside the other tests a second OpenMP thread of every stage process only spins
        super().__init__(dict(_env(), **ONE_THREAD))
        self.work = self.value = work
        from odevit.repro.notebook import PLAN_V2  # imported here too, not in the thread beside a test
        from odevit.repro.stages import v2_run_stages

        self.plan_v2 = PLAN_V2
        self.v2_runs = v2_run_stages(yaml.safe_load((work / "plan_v2.yaml").read_text()))
        self.thread.start()

    def _dvc(self, cwd: Path, *args: str) -> str:
        p = self._popen(["dvc", *args], cwd)
        out = p.communicate()[0]
        assert p.returncode == 0, f"dvc {' '.join(args)}: " + out[-8000:]
        return out

    def _body(self) -> None:
        """01_data and 02_teacher, then the quick run (`dvc repro 06_dynamics publish html`, what `make quick` runs)
        and the plan's studies with their verdicts (`dvc repro evidence publish_evidence`) at once in two copies of
        the workspace (each DVC command is one process; one workspace's lock would serialise them), then one
        workspace holding both, whose `dvc status` must be clean."""
        work = self.work
        self._dvc(work, "init", "--no-scm", "-q")
        self._dvc(work, "config", "core.analytics", "false")
        shutil.copytree(ROOT / ".dvc/plots", work / ".dvc/plots")  # the series templates of the multi-series CSVs
        log = self._dvc(work, "repro", "02_teacher")
        # plan v2's runs are committed files here, as in the repository: their stages (odevit.repro.stages) are
        # recorded as they are, so the v2 notebooks' stages read them (after v2_verdicts) instead of retraining plan v2
        log += self._dvc(work, "commit", "-f", *self.v2_runs)
        plan_work = work.parent / f"{work.name}_plan"
        shutil.copytree(work, plan_work, symlinks=True)
        t0, walls, logs = time.time(), [0.0, 0.0], ["", ""]
        halves = [(work, ["06_dynamics", "publish", *self.plan_v2, "html"]),
                  (plan_work, ["evidence", "publish_evidence"])]

        def half(k):  # each half's output read to its end, and the time it ended
            logs[k] = self._dvc(halves[k][0], "repro", *halves[k][1])
            walls[k] = time.time() - t0

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(half, range(2)))
        _merge_run(plan_work, work)
        (work / "repro.log").write_text(log + "".join(logs) + f"\nhalves: quick {walls[0]:.0f} s, plan {walls[1]:.0f} s\n")


class Job(_Background):
    """A test's commands, run in the background once the tiny pipeline's processes have ended (`after`: the build),
    while the tests after them run (or at once, where the session makes no pipeline): `fn(work, job)` in an empty
    folder `work`, its commands through `job.run` (one OpenMP thread each: they run beside a test), the pipeline's
    workspace through `job.pipeline()`. The session's checks start together. The test marked `background(fn)` asks
    for the `background` fixture and calls its `result()` (tests/conftest.py runs those tests after the others but
    the presets, and refuses a marked test without the fixture), which waits and raises what `fn` raised; where `fn`
    asserts, the assertion is the test's."""

    what = "a background check"

    def __init__(self, fn: Callable, work: Path, after: Optional[_Build]) -> None:
        super().__init__(dict(_env(), **ONE_THREAD))  # taken here, in the main thread
        self.fn, self.work, self.after, self.value = fn, work, after, None
        self.thread.start()

    def _body(self) -> None:
        if self.after is not None:
            self.after.thread.join()
        self.began = time.time()  # its own commands start here
        self.value = self.fn(self.work, self)

    def pipeline(self) -> Path:
        """The tiny pipeline's workspace (`repro`); what its making raised, if it failed."""
        if self.after is None:
            raise RuntimeError("no tiny pipeline in this session: mark the test background.with_args(fn, pipeline=True)")
        return self.after.result()

    def run(self, cmd, cwd: Path) -> subprocess.CompletedProcess:
        """`subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)` in a process group `stop` ends."""
        p = self._popen(cmd, cwd, stderr=subprocess.PIPE)
        out, err = p.communicate()
        return subprocess.CompletedProcess(cmd, p.returncode, out, err)


_BUILD: Dict[str, object] = {}  # "build": the session's _Build, or "error": why its workspace could not be prepared


def start(tmp_path_factory) -> None:
    """Start making the tiny pipeline in the background (once a session). A failure while preparing its workspace is
    kept for the tests that read the pipeline (`repro` raises it), not raised in every test's setup."""
    if not _BUILD:
        try:
            work = tmp_path_factory.mktemp("pipeline")
            _prepare(work)
            _BUILD["build"] = _Build(work)
        except Exception as e:
            _BUILD["error"] = e


def _work() -> Dict[str, _Background]:
    """The session's background work by name: the tiny pipeline (where one is made), then each check by its function."""
    return {**({"tiny pipeline": _BUILD["build"]} if "build" in _BUILD else {}),
            **{f.__name__: j for f, j in _JOBS.items()}}


def busy() -> bool:
    """Whether background work runs now: the tiny pipeline's processes or a test's background check."""
    return any(b.thread.is_alive() for b in _work().values())


_JOBS: Dict[Callable, Job] = {}  # the session's background checks, by their function


def start_job(marker, tmp_path_factory) -> None:
    """Start the check of a test's `background(fn)` marker, once a session: after the tiny pipeline where one is
    being made (and where the marker says `pipeline=True`, the pipeline is started for it)."""
    fn = marker.args[0]
    if fn not in _JOBS:
        if marker.kwargs.get("pipeline"):
            start(tmp_path_factory)
            if "error" in _BUILD:
                raise _BUILD["error"]
        _JOBS[fn] = Job(fn, tmp_path_factory.mktemp(fn.__name__), _BUILD.get("build"))


def spans(t0: float) -> Dict[str, list]:
    """When the background work of this session ran: name -> [start, end] in seconds from `t0` (the session's start);
    a check's start is when its own commands began, after the pipeline."""
    return {name: [round(b.began - t0, 1), round(b.ended - t0, 1)] for name, b in _work().items() if hasattr(b, "ended")}


def stop() -> None:
    """End the pipeline's and the background checks' commands (all halted first: a check waiting on the pipeline
    would otherwise wait for it), then wait for their threads."""
    running = list(_work().values())
    for b in running:
        b.halt()
    for b in running:
        b.thread.join(timeout=60)


@pytest.fixture(scope="session")
def repro(tmp_path_factory):
    """`dvc repro` of the real dvc.yaml and notebooks on tiny data (`_Build._body`), started in the background at the
    session's first test (tests/conftest.py) or here, and waited for."""
    start(tmp_path_factory)
    if "error" in _BUILD:
        raise _BUILD["error"]
    return _BUILD["build"].result()


@pytest.fixture
def background(request, tmp_path_factory) -> Job:
    """The check of the test's `background(fn)` marker (`Job`), started at the session's first test
    (tests/conftest.py) or here: the test calls its `result()`, which waits for it and raises what `fn` raised (a
    failure of the test, not of its setup)."""
    marker = request.node.get_closest_marker("background")
    start_job(marker, tmp_path_factory)
    return _JOBS[marker.args[0]]
