"""Run provenance: every process that works on a run is recorded; resumes and killed processes are counted."""
import json
import time

from odevit.repro import provenance


def test_processes_resumes_and_interruptions_are_counted(tmp_path):
    d = str(tmp_path / "ckpt")
    with provenance.Monitor(d, process_start=time.time() - 3.0, every_s=0.05) as m:
        sum(i * i for i in range(200000))  # some CPU time
        time.sleep(0.12)
    first = m.summary()
    assert first["resumes"] == 0 and first["interrupted"] == 0
    rec = first["processes"][0]
    assert rec["completed"] and rec["wall_s"] >= 3.0 and rec["cpu_s"] > 0 and rec["threads"] >= 1
    assert len(m.loads) >= 2 and rec["load_per_core_mean"] >= 0  # sampled while it ran
    # a process that was killed leaves its record without an end
    recs = json.loads((tmp_path / "ckpt" / provenance.FILE).read_text())
    recs.append(dict(recs[0], pid=1, ended=None, completed=None))
    (tmp_path / "ckpt" / provenance.FILE).write_text(json.dumps(recs))
    with provenance.Monitor(d) as m2:
        pass
    s = m2.summary()
    assert s["resumes"] == 2 and s["interrupted"] == 1 and len(s["processes"]) == 3
    assert s["wall_s"] >= first["wall_s"]


def test_a_failing_run_is_recorded_as_not_completed(tmp_path):
    d = str(tmp_path / "ckpt")
    try:
        with provenance.Monitor(d):
            raise FloatingPointError("diverged")
    except FloatingPointError:
        pass
    rec = provenance.read(d)[0]
    assert rec["ended"] is not None and rec["completed"] is False


_CHILD = """
import sys, time
from odevit.repro import provenance
with provenance.Monitor(sys.argv[1], every_s=0.05, heartbeat_s=0.2):
    print("started", flush=True)
    time.sleep(60)
"""


def _child(d: str):
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", _CHILD, d], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "started"
    return p


def test_a_terminated_run_records_its_end_and_a_killed_one_its_last_heartbeat(tmp_path):
    """SIGTERM (the runner's deadline) ends the record like an exception; SIGKILL leaves the last heartbeat's times."""
    import signal

    term = str(tmp_path / "term")
    p = _child(term)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 128 + signal.SIGTERM
    rec = provenance.read(term)[0]
    assert rec["ended"] is not None and rec["completed"] is False and rec["wall_s"] >= 0.4 and "last_seen" not in rec
    killed = str(tmp_path / "killed")
    p = _child(killed)
    time.sleep(0.8)
    p.kill()
    p.wait(timeout=30)
    rec = provenance.read(killed)[0]
    assert rec["ended"] is None and rec["last_seen"] and rec["wall_s"] >= 0.2 and rec["cpu_s"] > 0
