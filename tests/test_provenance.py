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
