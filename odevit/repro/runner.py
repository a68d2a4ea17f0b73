"""Run a plan's study stages several at a time, outside DVC (which runs one stage at a time), then record them in DVC.

    python -m odevit.repro.runner confirm_1k confirm_3k --jobs 2             # the runs not finished yet, 2 at once
    python -m odevit.repro.runner confirm_55k --jobs 12 --threads 1 --deadline 540   # on a GPU machine (no DVC there)
    python -m odevit.repro.runner confirm_55k --together 5 --jobs 3          # GPU: a cell's 5 seeds in one process
    python -m odevit.repro.runner confirm_55k --commit                       # here: `dvc commit` the finished runs
    python -m odevit.repro.runner ablations_3k --cells ref,parallel --together 16   # part of a study (one session)
    python -m odevit.repro.runner all --together 16 --jobs 4                 # every study of the plan (make evidence-gpu)

Each run is its stage's own command (`python -m odevit.repro.study CELL SEED --study STUDY`), so what it writes is
what `dvc repro STUDY@CELL-SEED` writes; its output goes to checkpoints/studies/STUDY/CELL/sSEED/log.txt. With
`--together K`, K seeds of a cell share one process (`study.run_many`: one batched model, the same files to rounding,
each metrics.json naming its `trained_together` seeds). A run whose
metrics.json exists is finished and skipped. `--deadline S`: no run starts after S seconds and running ones are
stopped (SIGTERM) at S; each resumes from its last.pt next time. The exit code is 1 when a run failed (not when one
was stopped at the deadline), else 0. Each run is a process session of its own, so stop the runner, not its runs:
SIGTERM, SIGINT (Ctrl-C) or SIGHUP to it ends every run it started (the whole process group: SIGTERM, SIGKILL after
GRACE_S or at a second signal), waits for them and exits 128 + the signal's number with one line saying that each
stopped run resumes from its last.pt next time (`stop`, `Stopped`); SIGKILL to the runner alone would leave them
training. `--commit` records each finished run in dvc.lock
(`dvc commit`), after checking that it was trained by this code (its metrics.json's `source` = the training source's
hash now) under this plan: a run made by other code is refused, never adopted; a run recorded already whose
checkpoints this machine's DVC cache lacks (no DVC remote) is left as recorded. A study that trains its own teacher
(plan.yaml: studies.STUDY.teacher) has it trained first (`study_teacher`, stage STUDY_teacher) and committed with it.

Before anything starts, `preflight` checks what a study needs to train and be recorded (dvc.yaml's study stages
as `python -m odevit.repro.stages` generates them from this plan.yaml, the plan.yaml keys its stage reads, a budget
of at least one batch and enough epochs for the convergence rule) and stops with one line naming what is missing;
runs this machine must not make are listed and left out (`refusals`; the others go on, and the exit code does not
count them): a study's runs where its finished runs did their arithmetic on another device
(plan.yaml rules.machine: one machine type per study; `--other-machine` for a replicate, plan.yaml `replicates`), and
cells of a study's own teacher whose training is recorded but whose checkpoint is not here (training it again gives
another teacher: docs/evidence/teacher_retrain_xeon). A study teacher trained here is therefore kept in git, its
best.pt byte for byte (weights/study_teachers/STUDY/best.pt, `keep_teacher`), and copied back where a machine lacks
it (`bring_back_teacher`, checked against the `teacher_sha256` its students recorded). Where 02_teacher's checkpoint,
which every cell loads, is missing (a fresh clone: no DVC remote), it stops with the command that rebuilds it
(`python -m odevit.repro.restore`).
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from tqdm import tqdm

from . import config, pipeline, provenance
from . import plan as plan_mod
from . import stages as study_stages
from . import study_teacher, train
from ..hub import sha256
from .config import ConfigError
from .machine import cpu_model
from .plan2 import images as study_images
from .results import kept_path, lock_holds
from .study import cell_dir
from .verdicts import devices


def runs(plan: dict, studies: List[str], cells: Optional[List[str]] = None) -> List[Tuple[str, str, int]]:
    """(study, cell, seed) of the given studies, longest budgets first (they bound the wall time); `cells`: only
    these cells (each must be a cell of one of the studies), e.g. to split a study over machine sessions."""
    for s in studies:
        if s not in plan["studies"]:
            raise plan_mod.PlanError(f"plan: study '{s}' is not one of {list(plan['studies'])}")
    known = {c for s in studies for c in plan["studies"][s]["cells"]}
    for c in cells or []:
        if c not in known:
            raise plan_mod.PlanError(f"--cells: '{c}' is not a cell of {', '.join(studies)} ({sorted(known)})")
    cost = lambda s: study_images(plan["studies"][s]) * plan["studies"][s]["budget"]["epochs"]
    return [(s, c, seed) for s in sorted(studies, key=cost, reverse=True)
            for seed in plan["studies"][s]["seeds"] for c in plan["studies"][s]["cells"] if not cells or c in cells]


def finished(study: str, cell: str, seed: int) -> bool:
    return os.path.isfile(f"{cell_dir('results', cell, seed, study)}/metrics.json")


def resumed_epoch(study: str, cell: str, seed: int) -> int:
    """The epoch a run's last.pt holds (0: none), so that only runs at the same point are trained together."""
    path = f"{cell_dir('checkpoints', cell, seed, study)}/last.pt"
    return int(train.load_checkpoint(path)["epoch"]) if os.path.isfile(path) else 0


def groups(todo: List[Tuple[str, str, int]], together: int,
           refusal: Callable[[str, str], Optional[str]] = lambda s, c: None) -> List[Tuple[str, str, Tuple[int, ...]]]:
    """(study, cell, seeds) per process: up to `together` seeds of one cell that resume from the same epoch
    (`study.run_many` trains them as one batched model: a GPU's fast path), in `todo`'s order; 1 = a run each. A
    cell whose seeds cannot share a process (`refusal(study, cell)` gives why, e.g. `cell_refusal`) runs
    one seed per process."""
    out: List[Tuple[str, str, Tuple[int, ...]]] = []
    open_groups: dict = {}
    alone = {(s, c) for s, c in {(s, c) for s, c, _ in todo} if together > 1 and refusal(s, c)}
    for s, c, seed in todo:
        key = (s, c, resumed_epoch(s, c, seed) if together > 1 and (s, c) not in alone else seed)
        g = open_groups.get(key)
        if g is None or len(out[g][2]) >= together:
            open_groups[key] = len(out)
            out.append((s, c, (seed,)))
        else:
            out[g] = (s, c, out[g][2] + (seed,))
    return out


def cell_refusal(cell: str, study: str, plan: dict, params: Optional[Dict[str, Any]] = None) -> Optional[str]:
    """`config.together_refusal` of a plan study's cell: why its seeds cannot share a process (None: they can).
    `params`: `config.check_stage("cell")`'s parse, read once by a caller asking for many cells (default: read here)."""
    cfg = config.study_configs(params if params is not None else config.check_stage("cell"), plan, study)
    d, free = config.cell_config(cfg["distill"], cfg["study"], cell)
    return config.together_refusal(d, cfg["base"], free)


def teachers(plan: dict, studies: List[str]) -> List[Tuple[str, str, Tuple[int, ...]]]:
    """The teacher runs to do of the studies that train their own (`study_teacher`; not finished under the plan's
    teacher block as it is now): (study, 'teacher', ())."""
    return [(s, "teacher", ()) for s in studies if plan["studies"][s].get("teacher") and not study_teacher.finished(s)]


def preflight(plan: dict, studies: List[str], params_file: str = "params.yaml", dvc_file: str = "dvc.yaml",
              running: bool = True) -> None:
    """Check, before any run starts, what would otherwise fail later or give rows no verdict could come from; a
    ConfigError names the key and what is allowed. dvc.yaml's study stages must be the plan's (`stages.stale`: they
    are generated from plan.yaml by `python -m odevit.repro.stages`; a stale copy would make `dvc commit` fail or
    record the run under another stage, after the training), and every plan.yaml key a study's stage reads must be
    there (`stages.studies`: `dvc commit` fails on a missing one, after the training). With `running` (runs to train):
    a training budget of at least one batch (the loader drops the last partial batch: fewer images than
    base.batch_size give an epoch with no step) and enough epochs for the plan's convergence rule to judge (its last
    quarter and one epoch before it: else every row reads *not converged*)."""
    try:
        study_stages.studies(plan, plan_mod.PLAN_FILE)  # the keys every study's stage reads
        problem = study_stages.stale(plan, dvc_file, plan_mod.PLAN_FILE) if os.path.isfile(dvc_file) else None
    except study_stages.StagesError as e:
        raise ConfigError(str(e)) from None
    if problem:
        raise ConfigError(problem)
    if not running:
        return
    cfg = config.check_stage("cell", params_file)
    frac = float(plan["rules"]["convergence"]["window_frac"])
    for s in studies:
        st = plan["studies"][s]
        batch = config.study_configs(cfg, plan, s)["base"].batch_size
        limit, epochs = st["budget"]["train_limit"], st["budget"]["epochs"]
        if 0 < limit < batch:
            raise ConfigError(f"{plan_mod.PLAN_FILE}: studies.{s}.budget.train_limit = {limit} images, less than one "
                              f"batch (base.batch_size {batch}; the last partial batch is dropped): an epoch would have "
                              f"no step. Use >= {batch} (params.yaml base.batch_size)")
        if epochs < math.ceil(frac * epochs) + 1:
            raise ConfigError(f"{plan_mod.PLAN_FILE}: studies.{s}.budget.epochs = {epochs}: the convergence rule "
                              f"(rules.convergence.window_frac {frac}) compares the last {math.ceil(frac * epochs)} "
                              "epoch(s) with those before, so it needs at least one epoch more; with fewer every row "
                              "reads not converged")


def this_device() -> str:
    """The device the runs launched from here do their arithmetic on, named as a run's provenance names it
    (`verdicts.devices`): the CUDA device torch sees, else the CPU model. Asked of a child process (as the runs
    are launched), so that the runner holds no CUDA context."""
    code = "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else '')"
    gpu = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    return gpu or cpu_model()


def study_devices(plan: dict, study: str) -> Set[str]:
    """The devices the study's runs did their arithmetic on: its finished runs' (metrics.json provenance) and its
    unfinished runs' so far (their checkpoint folder's provenance records: a run may have been started elsewhere)."""
    out: Set[str] = set()
    for s, c, seed in runs(plan, [study]):
        if finished(s, c, seed):
            prov = pipeline.read_json(f"{cell_dir('results', c, seed, s)}/metrics.json").get("provenance") or {}
            out.update(devices("; ".join(prov.get("machines") or [])))
        else:
            out.update(devices("; ".join(f"{r.get('cpu_model')} / {r.get('cuda_device') or 'no GPU'}"
                                         for r in provenance.read(cell_dir("checkpoints", c, seed, s)))))
    return out


def refusals(plan: dict, todo: List[Tuple[str, str, int]], other_machine: bool = False,
             device: Callable[[], str] = this_device) -> Dict[Tuple[str, str, int], str]:
    """The runs of `todo` this machine must not make, with why: every run of a study whose finished runs did their
    arithmetic on another device than this one (`device()`, asked only where a study has finished runs; plan.yaml
    rules.machine: one machine type per study, so a study already on two devices takes no more runs; `other_machine`:
    a replicate, run in a clone whose results are copied to the replicate's folder), and
    the runs of cells distilled from their study's own teacher whose training is recorded (its metrics.json, under
    the plan's teacher block now) while its best.pt here is missing or not the one its students recorded
    (`teacher_problem`; verdicts: *mixed teachers*)."""
    out: Dict[Tuple[str, str, int], str] = {}
    here: Optional[str] = None
    for s in dict.fromkeys(s for s, _, _ in todo):
        devs = set() if other_machine else study_devices(plan, s)
        if devs:
            here = here or device()
        lost = plan["studies"][s].get("teacher") and study_teacher.finished(s) and teacher_problem(s)
        for r in (r for r in todo if r[0] == s):
            if len(devs) > 1:
                out[r] = (f"its study's runs were made on {len(devs)} devices already ({', '.join(sorted(devs))}): "
                          "its rows read mixed machines; plan.yaml rules.machine: one machine type per study")
            elif devs and here not in devs:
                out[r] = (f"its study's runs were made on {', '.join(sorted(devs))}, this machine is {here} "
                          "(plan.yaml rules.machine: one machine type per study; --other-machine: a replicate)")
            elif lost and config.uses_study_teacher(plan["studies"][s]["cells"][r[1]]):
                out[r] = lost
    return out


def keep_teacher(study: str) -> Optional[str]:
    """Copy the study teacher's best.pt, its exact bytes (its students' `teacher_sha256` is the file's), to
    `kept_path(study)` for git, so that a fresh clone or another machine continues its cells with this teacher, not a
    new training of it; returns the path, or None where there is no best.pt or the kept copy is it already."""
    src, dst = f"{study_teacher.dirs(study)[0]}/best.pt", kept_path(study)
    if not os.path.isfile(src) or (os.path.isfile(dst) and sha256(dst) == sha256(src)):
        return None
    why = teacher_problem(study)
    if why or os.path.isfile(dst):
        raise ConfigError(f"{src}: not kept in {dst}: " + (why or f"{dst} holds another teacher (sha256 "
                          f"{sha256(dst)[:16]}), which is never replaced"))
    _copy(src, dst)
    return dst


def recorded_teachers(study: str) -> Set[str]:
    """The teacher identities (`teacher_sha256`) the study's finished students recorded."""
    paths = glob.glob(f"results/studies/{study}/*/s*/metrics.json")
    found = (pipeline.read_json(p).get("teacher_sha256") for p in paths)
    return {t for t in found if t}


def bring_back_teacher(study: str) -> Optional[str]:
    """Copy the kept teacher (`kept_path`) back to the study teacher's checkpoint folder where its best.pt is missing
    here and its training is recorded (`study_teacher.finished`); returns the path, or None where nothing was needed or
    kept. ConfigError where the study's finished students recorded another teacher (`keep_teacher` kept only the one
    they recorded, or the study's first)."""
    dst = f"{study_teacher.dirs(study)[0]}/best.pt"
    if os.path.isfile(dst) or not os.path.isfile(kept_path(study)) or not study_teacher.finished(study):
        return None
    want, got = recorded_teachers(study), sha256(kept_path(study))[:16]
    if want and want != {got}:
        raise ConfigError(f"{kept_path(study)}: sha256 {got}, but study {study}'s students recorded teacher "
                          f"{', '.join(sorted(want))}: not their teacher")
    _copy(kept_path(study), dst)
    return dst


def _copy(src: str, dst: str) -> None:
    """Copy atomically (a reader sees no file or the whole one); no temporary file is left behind on failure."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = f"{dst}.tmp{os.getpid()}"
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def teacher_problem(study: str) -> Optional[str]:
    """Why the study's students must not train against the teacher checkpoint on this machine, or None: its best.pt
    is missing, or it is not the teacher the study's finished students recorded (`teacher_sha256`): training the
    teacher again gives another one (docs/evidence/teacher_retrain_xeon), whose students would not pair with theirs."""
    path = f"{study_teacher.dirs(study)[0]}/best.pt"
    if not os.path.isfile(path):
        return (f"its teacher, {path}, is recorded (results) but not on this machine; training it again gives another "
                "teacher, whose students would not pair with the recorded ones")
    want, got = recorded_teachers(study), study_teacher.identity(study)  # what its students record
    if want and got not in want:
        return (f"its teacher here, {path} (sha256 {got}), is not the one its finished students recorded "
                f"({', '.join(sorted(want))})")
    return None


def missing_teacher(todo: List[Tuple[str, str, int]]) -> Optional[str]:
    """Why the runs of `todo` cannot start here, or None: 02_teacher's best.pt, which every study cell loads, is not
    on this machine (a fresh clone: checkpoints are in the DVC cache, which has no remote)."""
    path = f"{pipeline.TEACHER_CKPT}/best.pt"
    if not todo or os.path.isfile(path):
        return None
    return (f"{path} is not on this machine (every study cell loads it; the DVC cache holds checkpoints, and a fresh "
            "clone has none): `python -m odevit.repro.restore` rebuilds it from the published weights, checked")


def command(study: str, cell: str, seeds: Tuple[int, ...]) -> List[str]:
    """The stage command of (study, cell, seeds), or of the study's own teacher (cell 'teacher', no seeds)."""
    cmd = (["odevit.repro.study", cell, *map(str, seeds), "--study", study] if seeds
           else ["odevit.repro.study_teacher", study])
    return [sys.executable, "-m", *cmd]


def launch(study: str, cell: str, seeds: Tuple[int, ...], threads: int) -> subprocess.Popen:
    """Start `command(study, cell, seeds)` in a process session of its own (its pid is its process group's id: `stop`
    ends the group, DataLoader workers included; a Ctrl-C in the runner's terminal does not reach it, the runner's
    handler does); output to the first seed's (the teacher's) checkpoint folder's log.txt."""
    ckpt = cell_dir("checkpoints", cell, seeds[0], study) if seeds else study_teacher.dirs(study)[0]
    os.makedirs(ckpt, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
    with open(os.path.join(ckpt, "log.txt"), "a") as log:  # the child has its own copy of the descriptor
        return subprocess.Popen(command(study, cell, seeds), stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
GRACE_S = 30.0  # after SIGTERM a run's process group has this long to end (a training process ends at once: SystemExit
# through its loop, which completes its provenance record); then SIGKILL. A second stop signal: SIGKILL at once
_asked: List[int] = []  # the stop signals received while `stopping()` is in force, in order
_depth = [0]


class Stopped(Exception):
    """The runner was asked to stop (`STOP_SIGNALS`): its running processes were ended and waited for (`stop`).
    `stopped`: their (study, cell, seeds); `done`: (study, cell, seeds, returncode) of those that had ended before."""

    def __init__(self, signum: int, stopped: List[Tuple], done: List[Tuple]):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.stopped, self.done = signum, stopped, done

    def line(self) -> str:
        names = [label(*key) for key in self.stopped]
        return (f"runner stopped by {signal.Signals(self.signum).name}: {len(names)} running process(es) ended and "
                f"waited for ({', '.join(names[:4]) + (', ...' if len(names) > 4 else '') or 'none'}); every "
                "stopped run resumes from its last.pt next time (the same command; a run stopped in its first epoch "
                "starts again), and runs not started yet start then")


def _note(signum: int, frame: object) -> None:
    _asked.append(signum)  # acted on by run_all between two polls, never in the middle of a launch or a copy


@contextlib.contextmanager
def stopping():
    """While in force (re-entrant), SIGTERM, SIGINT and SIGHUP do not end the runner where it stands: its runs, each
    in a session of its own, would train on without it. The signal is noted; `run_all` then ends every running
    process's group, waits for it and raises `Stopped`. Outside the main thread, where Python cannot handle signals,
    nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    if _depth[0] == 0:
        _asked.clear()
        old = {s: signal.signal(s, _note) for s in STOP_SIGNALS}
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        for s, h in old.items():
            signal.signal(s, h)


def _nap(seconds: float) -> None:
    """Sleep up to `seconds`, less once a stop signal is noted."""
    end = time.monotonic() + seconds
    while not _asked and time.monotonic() < end:
        time.sleep(0.1)


def _group_alive(p: subprocess.Popen) -> bool:
    """Whether child `p` or any process of its group (pgid = its pid) is still running (zombies are not)."""
    if p.poll() is None:
        return True
    if not os.path.isdir("/proc"):
        try:
            os.killpg(p.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    state, _, pgrp = f.read().rsplit(")", 1)[1].split()[:3]
            except (OSError, ValueError, IndexError):
                continue  # ended while read
            if int(pgrp) == p.pid and state not in "ZX":
                return True
    return False


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # ended already


def stop(procs: List[subprocess.Popen], grace: Optional[float] = None) -> None:
    """End the runs' processes and wait for them: SIGTERM to each one's process group (the training process saves
    nothing half-written: last.pt is replaced atomically, once an epoch), then SIGKILL to a group still there after
    `grace` seconds (GRACE_S) or at another stop signal; returns once every child is reaped and its group is gone."""
    grace = GRACE_S if grace is None else grace
    for p in procs:
        _signal_group(p.pid, signal.SIGTERM)
    asked, end = len(_asked), time.monotonic() + grace
    while any(_group_alive(p) for p in procs) and time.monotonic() < end and len(_asked) == asked:
        time.sleep(0.1)
    for p in procs:
        if _group_alive(p):
            _signal_group(p.pid, signal.SIGKILL)
    for p in procs:
        p.wait()
    end = time.monotonic() + 10  # SIGKILL is not deferred; this only waits for the kernel to tear the group down
    while any(_group_alive(p) for p in procs) and time.monotonic() < end:
        time.sleep(0.05)


def run_all(todo: List[Tuple[str, str, Tuple[int, ...]]], jobs: int, threads: int, deadline: float) -> List[Tuple]:
    """Run `todo` (study, cell, seeds) `jobs` processes at a time until done or `deadline` seconds; returns
    (study, cell, seeds, returncode). A stop signal (`stopping`) or an error here ends the running processes first
    (`stop`): none outlives the runner; a signal then raises `Stopped`."""
    t0, pending, active, done = time.time(), list(todo), {}, []
    bar = tqdm(total=len(todo), desc="runs", unit="run")
    with stopping():
        try:
            while pending or active:
                if _asked:
                    stop(list(active.values()))
                    stopped = list(active)
                    active.clear()
                    raise Stopped(_asked[0], stopped, done)
                late = deadline > 0 and time.time() - t0 > deadline
                while pending and len(active) < jobs and not late and not _asked:
                    key = pending.pop(0)
                    active[key] = launch(*key, threads)
                for key, p in list(active.items()):
                    if p.poll() is not None:
                        done.append((*key, p.returncode))
                        del active[key]
                        bar.update(1)
                if late:
                    stop(list(active.values()))  # each resumes from its last.pt next time
                    done.extend((*key, "stopped at the deadline") for key in active)
                    active.clear()
                    break
                _nap(2)
        except BaseException:
            stop(list(active.values()))  # a crash of the runner (or Stopped: nothing left running) ends its runs too
            raise
        finally:
            bar.close()
    return done


EQUIVALENCE = "docs/evidence/source_equivalence.json"


def equivalent_sources(source: str, path: str = EQUIVALENCE) -> set:
    """Training sources whose runs today's code reproduces: the chain of checked old -> new records ending at
    `source` (each record: a run retrained with the new code, bit-identical to the old code's run)."""
    ok, recs = {source}, json.load(open(path)) if os.path.isfile(path) else []
    changed = True
    while changed:
        changed = False
        for r in recs:
            if r["new"] in ok and r["old"] not in ok:
                ok.add(r["old"])
                changed = True
    return ok


def recorded(lock: dict, stage: str, results: str) -> bool:
    """Whether dvc.lock already records `stage` with today's results (`lock_holds` its metrics.json): the run is
    recorded, and is left as it is. Its checkpoints may be absent here (committed on a machine whose DVC cache this one
    lacks: no DVC remote) or present in another state (a study teacher's best.pt brought back without its last.pt; a
    stale copy): `dvc commit` would then record them over the ones the run made."""
    return lock_holds(lock.get("stages", {}).get(stage), f"{results}/metrics.json")


def commit(plan: dict, studies: List[str], lock_file: str = "dvc.lock") -> List[str]:
    """`dvc commit` every finished run of the studies trained by today's training source, or by one that a checked
    equivalence record (EQUIVALENCE) shows to give bit-identical runs. A run that dvc.lock records already, with
    today's results, is left as recorded (`recorded`), whatever checkpoints this machine has."""
    source = train.fingerprint()
    accepted = equivalent_sources(source)
    lock = config.read_yaml(lock_file) if os.path.isfile(lock_file) else {}
    stages, kept = [], []
    hashes = {s: plan_mod.study_hash(plan, s) for s in studies}
    stale: Dict[str, List[str]] = {}  # runs trained under another version of their plan block: rows read post hoc
    for s in studies:  # a study's own teacher first: its cells' stages depend on it
        if plan["studies"][s].get("teacher") and study_teacher.finished(s):
            m = pipeline.read_json(f"{study_teacher.dirs(s)[1]}/metrics.json")
            if m.get("source") not in accepted:
                raise SystemExit(f"{study_teacher.stage(s)}: trained by other code (source {m.get('source')}, "
                                 f"today's {source}): rerun it, never adopt it")
            res = study_teacher.dirs(s)[1]
            if keep_teacher(s):
                print(f"{kept_path(s)}: kept (git add it with dvc.lock)", file=sys.stderr)
            (kept if recorded(lock, study_teacher.stage(s), res) else stages).append(
                study_teacher.stage(s))
    for s, c, seed in runs(plan, studies):
        if not finished(s, c, seed):
            continue
        m = pipeline.read_json(f"{cell_dir('results', c, seed, s)}/metrics.json")
        if m.get("source") not in accepted:
            raise SystemExit(f"{s}@{c}-{seed}: trained by other code (source {m.get('source')}, today's {source}, no "
                             f"equivalence record in {EQUIVALENCE}): rerun it, never adopt it")
        if m.get("plan_hash") not in (None, hashes[s]):
            stale.setdefault(s, []).append(f"{c}/s{seed}")
        rec = recorded(lock, f"{s}@{c}-{seed}", cell_dir("results", c, seed, s))
        (kept if rec else stages).append(f"{s}@{c}-{seed}")
    if kept:
        print(f"{len(kept)} run(s) recorded in {lock_file} already with today's results: left as "
              f"recorded ({', '.join(kept[:3])}{', ...' if len(kept) > 3 else ''})", file=sys.stderr)
    if stages:
        rc = subprocess.run(["dvc", "commit", "-f", *stages]).returncode
        if rc:
            raise ConfigError(f"`dvc commit` of {len(stages)} run(s) failed (exit {rc}): DVC's message is above")
    for s, old in stale.items():
        print(f"note: {len(old)} run(s) of {s} ({', '.join(old[:4])}{', ...' if len(old) > 4 else ''}) were trained "
              f"under another version of its plan block (plan hash now {hashes[s]}): their rows "
              f"read post hoc. To train them under today's plan, delete their folders under results/studies/{s}/ and "
              f"checkpoints/studies/{s}/ and run the runner again", file=sys.stderr)
    return stages


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run plan study stages several at a time; --commit records them in DVC")
    ap.add_argument("studies", nargs="+", help="study names of plan.yaml, or `all`: every study of the plan")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 1) // 2))
    ap.add_argument("--deadline", type=float, default=0.0, help="seconds; 0 = none")
    ap.add_argument("--together", type=int, default=1,
                    help="seeds of one cell trained together in one process (study.run_many; a GPU's fast path)")
    ap.add_argument("--commit", action="store_true", help="dvc commit the finished runs (checked) instead of running")
    ap.add_argument("--cells", default="", help="comma-separated: only these cells' runs (e.g. half a study per session)")
    ap.add_argument("--other-machine", action="store_true",
                    help="run a study whose runs were made on another device: a replicate (plan.yaml replicates), "
                         "in a clone whose results are then copied to the replicate's folder; without it such runs "
                         "are left out")
    args = ap.parse_args(argv)
    try:
        plan = plan_mod.load()
        if args.studies == ["all"]:
            args.studies = list(plan["studies"])
        if args.commit:
            preflight(plan, args.studies, running=False)
            print("\n".join(commit(plan, args.studies))
                  or "nothing to commit (no finished run that dvc.lock does not record)")
            return 0
        cells = [c for c in args.cells.split(",") if c]
        todo = [r for r in runs(plan, args.studies, cells) if not finished(*r)]  # checks the study names first
        preflight(plan, list(dict.fromkeys(s for s, _, _ in todo)))
        for s in dict.fromkeys(s for s, _, _ in todo if plan["studies"][s].get("teacher")):
            back = bring_back_teacher(s)
            if back:
                print(f"{back}: study {s}'s teacher, copied back from {kept_path(s)}", flush=True)
            elif study_teacher.finished(s) and not teacher_problem(s) and keep_teacher(s):  # trained earlier
                # (e.g. by dvc repro) and not kept yet; a wrong or missing one: refusals leaves its cells out
                print(f"{kept_path(s)}: kept (git add it: no other machine has this teacher)", flush=True)
        refused = refusals(plan, todo, args.other_machine)
        todo = [r for r in todo if r not in refused]
        missing = missing_teacher(todo)
        if missing:
            raise ConfigError(missing)
        taught = {(s, c) for s, c, _ in todo if config.uses_study_teacher(plan["studies"][s]["cells"][c])}
        first = [t for t in teachers(plan, args.studies) if any(s == t[0] for s, _ in taught)]
        params = config.check_stage("cell")  # parsed once for every cell's refusal
        procs = groups(todo, max(1, args.together), lambda s, c: cell_refusal(c, s, plan, params))
    except (plan_mod.PlanError, ConfigError, train.CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as e:  # this_device: torch could not be asked which device it has
        print(f"error: asking torch for this machine's device failed: {(e.stderr or '').strip()[-500:]}",
              file=sys.stderr)
        return 2
    for why in dict.fromkeys(refused.values()):  # before anything starts; the others go on
        left_out = [f"{s}@{c}-{seed}" for (s, c, seed), w in refused.items() if w == why]
        print(f"not run here ({len(left_out)}): {', '.join(left_out)}: {why}", file=sys.stderr, flush=True)
    try:
        with stopping():  # from the first run on, a stop signal ends the runs started, then the runner
            rc = _train(args, todo, first, procs, taught)
            if _asked:  # noted after the last poll (e.g. while a teacher was kept): nothing is running any more
                raise Stopped(_asked[0], [], [])
        return rc
    except Stopped as e:
        for s, c, seeds, rc in e.done:  # those that ended before the signal
            print(f"{label(s, c, seeds)}: {'done' if rc == 0 else rc}", flush=True)
        print(e.line(), file=sys.stderr, flush=True)
        return 128 + e.signum  # non-zero: `make evidence` stops before committing


def label(study: str, cell: str, seeds: Tuple[int, ...]) -> str:
    """A process's runs as their stages are named: STUDY@CELL-SEED[/SEED...], or the study teacher's stage."""
    return f"{study}@{cell}-{'/'.join(map(str, seeds))}" if seeds else study_teacher.stage(study)


def _train(args: argparse.Namespace, todo: List[Tuple[str, str, int]], first: List[Tuple], procs: List[Tuple],
           taught: Set[Tuple[str, str]]) -> int:
    """The studies' own teachers, then their cells (`main`); the exit code: 1 when a run failed, else 0."""
    t0, failed = time.time(), []
    if first:  # the studies' own teachers, before any cell (some cells distil from them)
        print(f"{len(first)} study teacher(s) to train first: {', '.join(s for s, _, _ in first)}", flush=True)
        for s, _, _, rc in run_all(first, args.jobs, args.threads, args.deadline):
            print(f"{study_teacher.stage(s)}: {'done' if rc == 0 else rc}", flush=True)
            if rc == 0 and keep_teacher(s):
                print(f"{kept_path(s)}: kept (git add it: no other machine has this teacher)", flush=True)
            if isinstance(rc, int) and rc != 0:
                failed.append(study_teacher.stage(s))
            if rc != 0:  # stopped at the deadline (resumes next time) or failed (its log says why): its cells wait
                procs = [p for p in procs if not (p[0] == s and (p[0], p[1]) in taught)]
    left = args.deadline - (time.time() - t0) if args.deadline > 0 else 0.0
    if args.deadline > 0 and left <= 0:
        return 1 if failed else 0
    print(f"{len(todo)} runs to do in {len(procs)} processes, {args.jobs} at a time, {args.threads} threads each",
          flush=True)
    for s, c, seeds, rc in run_all(procs, args.jobs, args.threads, left):
        print(f"{label(s, c, seeds)}: {'done' if rc == 0 else rc}", flush=True)
        if isinstance(rc, int) and rc != 0:
            failed.append(label(s, c, seeds))
    if failed:  # a stop at the deadline is not a failure (it resumes); a crash is, and `make evidence-gpu` stops there
        print(f"failed ({len(failed)}; each log.txt in its checkpoint folder says why): {', '.join(failed)}",
              file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
