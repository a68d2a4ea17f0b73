"""tests/conftest.py's per-test durations: a run of the whole suite writes results/tests/latest/durations.csv (every test's
setup, call and teardown seconds, slowest first) and results/tests/latest/suite.json (the run's wall, outcomes, machine); a
run of part of it leaves both as they were. Checked on a small
suite of its own in a temporary folder with this conftest.py, by a pytest of its own (no time is judged)."""
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SUITE = '''
import time
import pytest


@pytest.fixture
def slow_setup():
    time.sleep(0.2)
    yield


def test_slow(slow_setup):
    time.sleep(0.1)


def test_fails():
    assert 0


@pytest.mark.skip(reason="not here")
def test_skipped():
    pass
'''


def _pytest(root: Path, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=root,
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr  # test_fails fails, the rest run
    return r.stdout


def test_a_whole_suite_run_writes_every_phase_slowest_first_and_a_partial_run_writes_nothing(tmp_path):
    (tmp_path / "tests").mkdir()
    for name in ("conftest.py", "tiny_pipeline.py"):  # conftest offers tiny_pipeline's session fixture
        shutil.copy(Path(__file__).with_name(name), tmp_path / "tests" / name)
    (tmp_path / "tests" / "test_a.py").write_text(SUITE)
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    out = tmp_path / "results" / "tests" / "latest" / "durations.csv"

    assert "not written (part of the suite was asked for: tests/test_a.py" in _pytest(tmp_path, "tests/test_a.py")
    assert "not written (tests were deselected" in _pytest(tmp_path, "-k", "fails")
    assert not out.exists()

    assert "per-test durations: results/tests/latest/durations.csv (8 test phases" in _pytest(tmp_path)  # as `make test`
    rows = list(csv.DictReader(out.open()))
    assert [r for r in rows if r["phase"] == "call" and r["nodeid"].endswith("test_fails")][0]["outcome"] == "failed"
    assert {(r["nodeid"].split("::")[1], r["phase"]) for r in rows} == {
        (t, p) for t in ("test_slow", "test_fails") for p in ("setup", "call", "teardown")} | {
        ("test_skipped", "setup"), ("test_skipped", "teardown")}  # a skipped test has no call phase
    seconds = [float(r["seconds"]) for r in rows]
    assert seconds == sorted(seconds, reverse=True)
    assert sorted(p.name for p in out.parent.iterdir()) == ["durations.csv", "suite.json"]  # no temporary file left
    run = json.loads((out.parent / "suite.json").read_text())
    assert run["outcomes"] == {"passed": 1, "failed": 1, "skipped": 1}
    assert run["pytest_wall_s"] >= 0.3 and run["machine"]["cpu_count"] == os.cpu_count()  # test_slow's 0.3 s at least
    assert 0 <= run["cores_busy_share"] <= 1

    before = out.read_text(), (out.parent / "suite.json").read_text()
    _pytest(tmp_path, "-x")  # stops at the first failure: part of the suite
    assert (out.read_text(), (out.parent / "suite.json").read_text()) == before


def test_make_test_adds_its_wall_and_whether_it_installed_to_the_suite_record(tmp_path):
    """tests/make_wall.py, which the Makefile's test recipe runs after pytest with the time make started: it adds
    `make test`'s wall (install included where the .venv's stamp is newer) to a suite.json this run wrote, and leaves
    one an earlier run wrote as it is."""
    import time

    import make_wall

    assert "; $(BIN)/python tests/make_wall.py $(MAKE_T0); exit $$rc" in (Path(__file__).parents[1] / "Makefile").read_text()
    suite = tmp_path / "results/tests/latest/suite.json"
    suite.parent.mkdir(parents=True)
    (tmp_path / ".venv").mkdir()
    t0 = time.time()
    suite.write_text(json.dumps({"pytest_wall_s": 1.0}))
    os.utime(suite, (t0 - 10, t0 - 10))  # an earlier run's record
    assert make_wall.main([str(t0)], tmp_path) == 0 and json.loads(suite.read_text()) == {"pytest_wall_s": 1.0}
    os.utime(suite, (t0 + 1, t0 + 1))  # this run's
    (tmp_path / ".venv/.installed").touch()
    os.utime(tmp_path / ".venv/.installed", (t0 - 10, t0 - 10))  # installed before: not part of this run
    make_wall.main([str(t0 - 5)], tmp_path)
    run = json.loads(suite.read_text())
    assert run["pytest_wall_s"] == 1.0 and run["make_test"]["install_in_run"] is False
    assert 5 <= run["make_test"]["wall_s"] < 60
    os.utime(tmp_path / ".venv/.installed", (t0, t0))
    os.utime(suite, (t0 + 1, t0 + 1))
    make_wall.main([str(t0 - 5)], tmp_path)
    assert json.loads(suite.read_text())["make_test"]["install_in_run"] is True
    assert sorted(p.name for p in suite.parent.iterdir()) == ["suite.json"]  # no temporary file left
