"""The plan runner: which runs it schedules, which training sources its dvc commit accepts, and that stopping it
stops its runs."""
import json
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from odevit.repro import plan as P
from odevit.repro import runner


def test_runs_longest_budget_first_and_unknown_study_fails():
    plan = P.load("plan.yaml")
    todo = runner.runs(plan, ["confirm_1k", "confirm_55k"])
    assert todo[0][0] == "confirm_55k" and todo[-1][0] == "confirm_1k"
    assert len(todo) == sum(len(plan["studies"][s]["cells"]) * len(plan["studies"][s]["seeds"])
                            for s in ("confirm_1k", "confirm_55k"))
    with pytest.raises(P.PlanError, match="not one of"):
        runner.runs(plan, ["nope"])


def test_only_checked_equivalent_sources_are_accepted(tmp_path):
    path = tmp_path / "eq.json"
    path.write_text(json.dumps([{"old": "a", "new": "b"}, {"old": "b", "new": "c"}, {"old": "x", "new": "y"}]))
    assert runner.equivalent_sources("c", str(path)) == {"a", "b", "c"}  # a chain of checks ending today
    assert runner.equivalent_sources("b", str(path)) == {"a", "b"}       # never forward to newer code
    assert runner.equivalent_sources("z", str(path)) == {"z"}            # no record: today's source only
    assert runner.equivalent_sources("c", str(tmp_path / "missing.json")) == {"c"}


def test_seeds_of_a_cell_are_grouped_by_the_epoch_they_resume_from(monkeypatch):
    todo = [("s", "ref", 1), ("s", "free", 1), ("s", "ref", 2), ("s", "free", 2), ("s", "ref", 3), ("s", "ref", 4)]
    monkeypatch.setattr(runner, "resumed_epoch", lambda s, c, seed: 5 if seed == 3 else 0)
    assert runner.groups(todo, 1) == [(s, c, (seed,)) for s, c, seed in todo]
    assert runner.groups(todo, 2) == [("s", "ref", (1, 2)), ("s", "free", (1, 2)), ("s", "ref", (3,)),
                                      ("s", "ref", (4,))]  # seed 3 resumes from epoch 5; seed 4 starts a new group
    assert runner.groups(todo, 3) == [("s", "ref", (1, 2, 4)), ("s", "free", (1, 2)), ("s", "ref", (3,))]
    # a cell whose seeds cannot share a process (e.g. drawn step counts) runs one seed per process
    assert runner.groups(todo, 3, lambda s, c: "train_steps" if c == "free" else None) == [
        ("s", "ref", (1, 2, 4)), ("s", "free", (1,)), ("s", "free", (2,)), ("s", "ref", (3,))]


def test_cells_select_part_of_a_study_and_unknown_cells_fail():
    plan = P.load("plan.yaml")
    todo = runner.runs(plan, ["ablations_3k"], ["ref", "mlp4"])
    assert {c for _, c, _ in todo} == {"ref", "mlp4"} and len(todo) == 2 * len(plan["studies"]["ablations_3k"]["seeds"])
    with pytest.raises(P.PlanError, match="'nope' is not a cell"):
        runner.runs(plan, ["ablations_3k"], ["nope"])


def test_an_unknown_study_is_one_clean_error(capsys):
    assert runner.main(["nope"]) == 2 and "not one of" in capsys.readouterr().err


def test_all_means_every_study_of_the_plan(capsys):
    """`runner all` (make evidence-gpu) resolves to every study of plan.yaml: an unknown cell is then refused with the
    cells of all of them, before anything runs."""
    plan = P.load()
    assert runner.main(["all", "--cells", "nope"]) == 2
    err = capsys.readouterr().err
    assert "'nope' is not a cell of " + ", ".join(plan["studies"]) in err


def test_exit_code_says_whether_a_run_failed(monkeypatch, capsys):
    """runner exits 1 when a run crashed (so `make evidence-gpu` stops before committing), 0 when every run finished
    or was stopped at the deadline (it resumes next time). No run is launched: run_all is replaced."""
    outcome = {}
    monkeypatch.setattr(runner, "finished", lambda s, c, seed: False)
    monkeypatch.setattr(runner, "missing_teacher", lambda todo: None)  # (test_a_fresh_clone_without_...)
    monkeypatch.setattr(runner, "run_all", lambda todo, jobs, threads, deadline: [(*t, outcome[t[2]]) for t in todo])
    seeds = P.load("plan.yaml")["studies"]["confirm_3k"]["seeds"]
    outcome.update({(s,): 0 for s in seeds})
    assert runner.main(["confirm_3k", "--cells", "free"]) == 0
    outcome[(seeds[0],)] = "stopped at the deadline"
    assert runner.main(["confirm_3k", "--cells", "free"]) == 0
    outcome[(seeds[1],)] = 1
    assert runner.main(["confirm_3k", "--cells", "free"]) == 1
    assert f"failed (1; each log.txt in its checkpoint folder says why): confirm_3k@free-{seeds[1]}" in capsys.readouterr().err


def test_a_run_recorded_already_is_left_as_recorded_whatever_checkpoints_are_here(tmp_path):
    """runner --commit: a run is skipped while dvc.lock holds its metrics.json as it is now, whether this machine lacks
    its checkpoints (another machine's DVC cache) or has others (a teacher's best.pt brought back without last.pt):
    `dvc commit` would record those over the run's own. Changed results or no lock entry are committed."""
    import hashlib

    res = tmp_path / "results"
    res.mkdir()
    (res / "metrics.json").write_text('{"acc1": 0.8}')
    md5 = hashlib.md5(b'{"acc1": 0.8}').hexdigest()
    lock = {"stages": {"st@ref-1": {"outs": [{"path": f"{res}/metrics.json", "hash": "md5", "md5": md5}]}}}
    assert runner.recorded(lock, "st@ref-1", str(res))
    assert not runner.recorded(lock, "st@ref-2", str(res))  # not in dvc.lock
    (res / "metrics.json").write_text('{"acc1": 0.9}')
    assert not runner.recorded(lock, "st@ref-1", str(res))  # results changed since


def test_runs_this_machine_must_not_make_are_left_out_before_anything_starts(monkeypatch):
    """On the committed results: confirm_55k_40ep's finished runs were made on an NVIDIA H200 and teacher_strength_3k's
    on a CPU (AMD EPYC), whose own teacher's checkpoint is not here. An H200 may run confirm_55k_40ep's remaining runs,
    an H100 none of them (plan.yaml rules.machine), unless --other-machine (a replicate); on the H200 every
    teacher_strength_3k run is another machine's, on its CPU only the cells of its lost teacher are left out."""
    from odevit.repro import study_teacher

    plan = P.load("plan.yaml")
    real_dirs = study_teacher.dirs
    monkeypatch.setattr(study_teacher, "dirs", lambda s: ("/nonexistent/teacher", real_dirs(s)[1]))
    todo = [("confirm_55k_40ep", "ce", seed) for seed in (200, 201)] + [
        ("teacher_strength_3k", c, 712) for c in ("ref", "ref_strong", "ce", "ce_strong")]
    asked = []

    def on(device):
        return lambda: asked.append(device) or device

    why = runner.refusals(plan, todo, device=on("NVIDIA H200"))
    assert set(why) == set(todo[2:]) and asked == ["NVIDIA H200"]  # asked once
    assert "made on AMD EPYC, this machine is NVIDIA H200" in why[todo[2]]
    why = runner.refusals(plan, todo, device=on("NVIDIA H100 80GB HBM3"))
    assert set(why) == set(todo) and "made on NVIDIA H200" in why[todo[0]]
    why = runner.refusals(plan, todo, device=on("AMD EPYC"))
    assert set(why) == {("teacher_strength_3k", "ref_strong", 712), ("teacher_strength_3k", "ce_strong", 712),
                        *todo[:2]}
    assert "/nonexistent/teacher/best.pt, is recorded (results) but not on this machine" in why[todo[3]]
    why = runner.refusals(plan, todo, other_machine=True, device=on("NVIDIA H100 80GB HBM3"))
    assert set(why) == {todo[3], todo[5]}  # a replicate: only the lost teacher's cells
    monkeypatch.setattr(study_teacher, "dirs", lambda s: (real_dirs(s)[1], real_dirs(s)[1]))  # a best.pt-less folder
    assert runner.refusals(plan, todo[3:4], device=on("AMD EPYC"))  # still refused: no best.pt there either


def test_a_fresh_clone_without_the_default_teacher_stops_with_the_command_that_rebuilds_it(tmp_path, monkeypatch,
                                                                                            capsys):
    """Every study cell loads 02_teacher's best.pt, which a fresh clone lacks (no DVC remote): the runner stops
    before starting anything and names `python -m odevit.repro.restore`; with the file there, or nothing to run, it
    does not."""
    from odevit.repro import pipeline

    monkeypatch.setattr(pipeline, "TEACHER_CKPT", str(tmp_path / "02_teacher"))
    assert "odevit.repro.restore" in runner.missing_teacher([("confirm_3k", "free", 100)])
    assert runner.missing_teacher([]) is None
    monkeypatch.setattr(runner, "finished", lambda s, c, seed: False)
    monkeypatch.setattr(runner, "run_all", lambda *a: pytest.fail("nothing may start"))
    assert runner.main(["confirm_3k", "--cells", "free"]) == 2
    assert "02_teacher/best.pt is not on this machine" in capsys.readouterr().err
    (tmp_path / "02_teacher").mkdir()
    (tmp_path / "02_teacher" / "best.pt").write_bytes(b"")
    assert runner.missing_teacher([("confirm_3k", "free", 100)]) is None


def test_left_out_runs_are_listed_and_the_others_go_on(monkeypatch, capsys):
    seeds = P.load("plan.yaml")["studies"]["confirm_3k"]["seeds"]
    monkeypatch.setattr(runner, "finished", lambda s, c, seed: False)
    monkeypatch.setattr(runner, "missing_teacher", lambda todo: None)
    monkeypatch.setattr(runner, "refusals", lambda plan, todo, other: {("confirm_3k", "free", seeds[0]): "why"})
    started = []
    monkeypatch.setattr(runner, "run_all", lambda todo, *a: started.extend(todo) or [(*t, 0) for t in todo])
    assert runner.main(["confirm_3k", "--cells", "free"]) == 0  # left out is not failed
    assert [t[2] for t in started] == [(s,) for s in seeds[1:]]
    assert f"not run here (1): confirm_3k@free-{seeds[0]}: why" in capsys.readouterr().err


def test_a_study_teacher_is_kept_in_git_and_brought_back_only_to_the_students_it_taught(tmp_path, monkeypatch):
    """A study teacher exists once (a new training is another teacher): the runner keeps its best.pt byte for byte in
    weights/study_teachers/STUDY (git), and on a machine without it copies it back, only where its training is
    recorded and only if it is the teacher the study's finished students recorded (teacher_sha256)."""
    import hashlib
    import os

    from odevit.repro import study_teacher
    from odevit.repro.config import ConfigError

    monkeypatch.chdir(tmp_path)
    recorded = {"yes": True}
    monkeypatch.setattr(study_teacher, "finished", lambda s: recorded["yes"])
    ckpt = tmp_path / "checkpoints/studies/S/teacher/best.pt"
    assert runner.keep_teacher("S") is None  # nothing trained yet
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"teacher weights")
    assert runner.keep_teacher("S") == "weights/study_teachers/S/best.pt"
    assert (tmp_path / runner.kept_path("S")).read_bytes() == b"teacher weights"
    assert runner.keep_teacher("S") is None  # kept already
    assert runner.bring_back_teacher("S") is None  # here already
    ckpt.unlink()
    recorded["yes"] = False
    assert runner.bring_back_teacher("S") is None and not ckpt.exists()  # its training is not recorded
    recorded["yes"] = True
    student = tmp_path / "results/studies/S/ref_strong/s1/metrics.json"
    student.parent.mkdir(parents=True)
    student.write_text(json.dumps({"teacher_sha256": "0123456789abcdef"}))
    with pytest.raises(ConfigError, match="not their teacher"):
        runner.bring_back_teacher("S")
    assert not ckpt.exists() and not any(p.name.startswith("best.pt.tmp") for p in ckpt.parent.iterdir())
    student.write_text(json.dumps({"teacher_sha256": hashlib.sha256(b"teacher weights").hexdigest()[:16]}))
    assert runner.bring_back_teacher("S") == "checkpoints/studies/S/teacher/best.pt"
    assert ckpt.read_bytes() == b"teacher weights" and os.listdir(ckpt.parent) == ["best.pt"]
    # another training's best.pt here: never kept, never over the kept one, and its cells are left out
    ckpt.write_bytes(b"another training")
    with pytest.raises(ConfigError, match="is not the one its finished students recorded"):
        runner.keep_teacher("S")
    assert (tmp_path / runner.kept_path("S")).read_bytes() == b"teacher weights"
    student.unlink()  # no student recorded one: still never over the kept teacher
    with pytest.raises(ConfigError, match="never replaced"):
        runner.keep_teacher("S")
    assert (tmp_path / runner.kept_path("S")).read_bytes() == b"teacher weights"


def test_another_training_of_a_study_teacher_or_a_study_on_two_devices_is_refused(tmp_path, monkeypatch):
    """teacher_strength_3k's students recorded teacher 85a8e43b...: a best.pt of another training in its place leaves
    its cells out, as a missing one does. A study whose runs are on two devices already takes no run on either; an
    unfinished run's device counts (its checkpoint folder's provenance records), not only the finished runs'."""
    from odevit.repro import provenance, study_teacher

    plan = P.load("plan.yaml")
    real_dirs = study_teacher.dirs
    (tmp_path / "best.pt").write_bytes(b"another training")
    monkeypatch.setattr(study_teacher, "dirs", lambda s: (str(tmp_path), real_dirs(s)[1]))
    todo = [("teacher_strength_3k", "ref_strong", 712), ("teacher_strength_3k", "ref", 712)]
    why = runner.refusals(plan, todo, device=lambda: "AMD EPYC")
    assert list(why) == [todo[0]] and "is not the one its finished students recorded (85a8e43b24a44dcb)" in why[todo[0]]
    monkeypatch.setattr(runner, "study_devices", lambda plan, s: {"AMD EPYC", "NVIDIA H200"})
    why = runner.refusals(plan, todo, device=lambda: "AMD EPYC")
    assert set(why) == set(todo) and "on 2 devices already" in why[todo[1]]
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner, "finished", lambda s, c, seed: False)
    rec = tmp_path / "checkpoints/studies/confirm_3k/ref/s100"
    rec.mkdir(parents=True)
    (rec / provenance.FILE).write_text(json.dumps([{"cpu_model": "Intel Xeon", "cuda_device": "NVIDIA H100"}]))
    assert runner.study_devices(plan, "confirm_3k") == {"NVIDIA H100"}


def test_device_script_checks_its_arguments_before_anything(tmp_path):
    """docs/evidence/device_runs.sh (a lent GPU machine without network or DVC): bash parses it, and a call without
    its study and cells, or without $OUT, stops with one line saying what is missing, before it touches anything."""
    import os
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "docs/evidence/device_runs.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    r = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "usage: device_runs.sh STUDY CELL" in r.stderr
    r = subprocess.run(["bash", str(script), "confirm_55k_40ep", "ce"], cwd=tmp_path, env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0 and "OUT: the folder whose files come back" in r.stderr and not any(tmp_path.iterdir())


def test_preflight_names_what_a_new_study_lacks_before_anything_trains(tmp_path):
    """A user's new study, checked before any run starts (each case once with the fault, once fixed): dvc.yaml's
    study stages generated from this plan (`python -m odevit.repro.stages`; a stale dvc.yaml lacks the study's stage),
    every plan.yaml key its stage reads (a missing `base` made `dvc commit` fail after the training), a budget of at
    least one batch (64 images at batch 128 crashed every run with a bare StopIteration) and enough epochs for the
    convergence rule (with 1 every row reads not converged)."""
    import copy
    import shutil

    import yaml

    from odevit.repro import stages
    from odevit.repro.config import ConfigError

    plan = P.load("plan.yaml")
    mine = copy.deepcopy(plan["studies"]["confirm_1k"])
    mine["budget"] = {"train_limit": 256, "epochs": 4}
    plan["studies"]["mine"] = mine
    dvc = tmp_path / "dvc.yaml"
    shutil.copy("dvc.yaml", dvc)
    with pytest.raises(ConfigError, match=r"dvc.yaml: its study stages are not plan.yaml's \(lacks mine\): run "
                                          r"`python -m odevit.repro.stages`"):
        runner.preflight(plan, ["mine"], dvc_file=str(dvc))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    assert stages.main(["--plan", str(tmp_path / "plan.yaml"), "--dvc", str(dvc)]) == 0  # as the docs say
    runner.preflight(plan, ["mine"], dvc_file=str(dvc))  # passes
    base = mine.pop("base")
    with pytest.raises(ConfigError, match=r"plan.yaml: studies.mine.base is missing: its stage reads it"):
        runner.preflight(plan, ["mine"], dvc_file=str(dvc), running=False)  # also before --commit
    mine["base"] = base
    batch = yaml.safe_load(open("params.yaml"))["base"]["batch_size"]
    mine["budget"]["train_limit"] = batch // 2
    with pytest.raises(ConfigError, match=rf"train_limit = {batch // 2} images, less than one batch"):
        runner.preflight(plan, ["mine"], dvc_file=str(dvc))
    runner.preflight(plan, ["mine"], dvc_file=str(dvc), running=False)  # nothing to train: not asked
    mine["budget"]["train_limit"] = batch
    mine["budget"]["epochs"] = 1
    with pytest.raises(ConfigError, match="studies.mine.budget.epochs = 1: the convergence rule"):
        runner.preflight(plan, ["mine"], dvc_file=str(dvc))
    mine["budget"]["epochs"] = 2
    runner.preflight(plan, ["mine"], dvc_file=str(dvc))


def test_every_committed_study_passes_preflight():
    plan = P.load("plan.yaml")
    runner.preflight(plan, list(plan["studies"]))


def test_a_failed_dvc_commit_is_named_as_such(monkeypatch, capsys):
    """`dvc commit` failing (e.g. a params key missing) was reported as 'asking torch for this machine's device
    failed' with an empty message: the runner now says the commit failed and points at DVC's message."""
    import subprocess

    monkeypatch.setattr(runner, "preflight", lambda *a, **k: None)
    monkeypatch.setattr(runner, "finished", lambda s, c, seed: (s, c, seed) == ("confirm_3k", "free", 100))
    monkeypatch.setattr(runner.pipeline, "read_json", lambda p: {"source": "x", "plan_hash": None})
    monkeypatch.setattr(runner, "equivalent_sources", lambda s: {"x"})
    monkeypatch.setattr(runner, "recorded", lambda *a: False)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 3))
    assert runner.main(["confirm_3k", "--commit"]) == 2
    err = capsys.readouterr().err
    assert "error: `dvc commit` of 1 run(s) failed (exit 3): DVC's message is above" in err and "torch" not in err


def test_commit_notes_runs_trained_under_another_plan_version(monkeypatch, capsys):
    monkeypatch.setattr(runner, "finished", lambda s, c, seed: (c, seed) == ("free", 100))
    monkeypatch.setattr(runner.pipeline, "read_json", lambda p: {"source": "x", "plan_hash": "0ld0ld0ld0ld"})
    monkeypatch.setattr(runner, "equivalent_sources", lambda s: {"x"})
    monkeypatch.setattr(runner, "recorded", lambda *a: True)  # nothing for dvc to do
    runner.commit(P.load("plan.yaml"), ["confirm_3k"])
    err = capsys.readouterr().err
    assert "note: 1 run(s) of confirm_3k (free/s100) were trained under another version of its plan block" in err
    monkeypatch.setattr(runner.pipeline, "read_json", lambda p: {"source": "x", "plan_hash": P.study_hash(
        P.load("plan.yaml"), "confirm_3k")})
    runner.commit(P.load("plan.yaml"), ["confirm_3k"])
    assert "note:" not in capsys.readouterr().err


FAKE_RUN = """# a stand-in for a training run: it starts a helper in its process group (as a DataLoader starts its
# workers) that ignores SIGTERM, so that only SIGKILL ends it; each marks itself up in the folder argv[1], then sleeps
import os, signal, subprocess, sys, time
if sys.argv[2:] == ["helper"]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    subprocess.Popen([sys.executable, __file__, sys.argv[1], "helper"])
open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
time.sleep(120)
"""


def _running(marker: str) -> list:
    """The pids of the live processes (not zombies) whose command line holds `marker`, from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cmdline").read_bytes().decode(errors="replace") \
                    and (d / "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX":
                out.append(int(d.name))
        except OSError:
            continue  # ended while read
    return out


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stop_signal_ends_every_run_the_runner_started_and_their_process_groups(tmp_path, monkeypatch, sig):
    """`runner.main` with two runs at a time (each a session of its own, with a helper in its group that ignores
    SIGTERM) is sent a stop signal while they run: it ends both groups (the helpers by SIGKILL after GRACE_S), waits
    for them and exits 128 + the signal with one line saying they resume from their last.pt. Without the handler the
    runner dies alone and the runs train on: the test fails on the survivors. The runner is a fork of this process
    (its imports done: a fresh interpreter would spend ~10 s importing torch); only the command it starts is faked."""
    seeds = P.load("plan.yaml")["studies"]["confirm_3k"]["seeds"]
    assert len(seeds) > 2  # two running, the others waiting: none of those may start after the signal
    up = tmp_path / "up"
    up.mkdir()
    (tmp_path / "fake_run.py").write_text(FAKE_RUN)
    monkeypatch.setattr(runner, "finished", lambda s, c, seed: False)
    monkeypatch.setattr(runner, "missing_teacher", lambda todo: None)
    monkeypatch.setattr(runner, "refusals", lambda *a: {})
    monkeypatch.setattr(runner, "cell_dir", lambda kind, c, seed, s: str(tmp_path / kind / c / f"s{seed}"))
    monkeypatch.setattr(runner, "command", lambda s, c, seeds: [sys.executable, str(tmp_path / "fake_run.py"), str(up)])
    monkeypatch.setattr(runner, "GRACE_S", 1.0)
    out = tmp_path / "runner.txt"

    def the_runner():
        sys.stdout = sys.stderr = open(out, "w", buffering=1)
        sys.exit(runner.main(["confirm_3k", "--cells", "free", "--jobs", "2", "--threads", "1"]))

    proc = multiprocessing.get_context("fork").Process(target=the_runner)
    proc.start()
    try:
        t0 = time.monotonic()
        while len(os.listdir(up)) < 4:  # both runs and their helpers are up
            assert proc.is_alive() and time.monotonic() - t0 < 60, out.read_text()
            time.sleep(0.05)
        os.kill(proc.pid, sig)
        proc.join(30)
        assert not proc.is_alive(), "the runner did not exit"
        assert _running(str(up)) == [], f"{sig.name}: the runner's runs survive it"
        text = out.read_text()
        assert proc.exitcode == 128 + sig, text
        assert len(os.listdir(up)) == 4  # no run started after the signal
        line = text.strip().splitlines()[-1]
        assert line.startswith(f"runner stopped by {sig.name}: 2 running process(es) ended and waited for "
                               f"(confirm_3k@free-{seeds[0]}, confirm_3k@free-{seeds[1]})"), text
        assert "every stopped run resumes from its last.pt next time" in line
    finally:
        for pid in _running(str(up)):  # a failed test leaves nothing behind
            os.kill(pid, signal.SIGKILL)
        if proc.is_alive():
            proc.kill()
