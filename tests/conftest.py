"""Suite-wide memory: freed memory goes back to the OS after each test that left this process's resident memory
RELEASE_GROWTH above the last release (`_release_memory`), and the terminal summary gives the suite's peak
memory — every process of the run summed (pytest and the dvc, papermill, training and preset processes the tests
start; pytest-xdist workers too, where someone runs the suite with -n), as proportional set size (PSS: a page shared
by k processes counts 1/k in each), read from /proc every half second — and the tests that were running at the
highest peaks (`make test` must stay within 8 GB; `-m "not bigmem"` deselects any case marked as needing more).

Suite-wide durations: a run of the whole suite (`make test`) writes every test's setup, call and teardown seconds to
results/tests/latest/durations.csv (`Durations`), slowest first (untracked: make test leaves the checkout as it found
it): where the suite's time goes; and the run as a whole to results/tests/latest/suite.json (pytest's wall seconds, the tests by
outcome, the machine). Nothing is judged against a time."""
import csv
import ctypes
import gc
import io
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest
from tiny_pipeline import repro  # noqa: F401  (the tiny pipeline, made once a session for every module that asks)

INTERVAL_S = 0.5


def _children() -> Dict[int, list]:
    """Every live process's children, from /proc/PID/stat (a process that ends while read is skipped)."""
    kids: Dict[int, list] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])  # after "(comm) state": the parent's pid
            kids.setdefault(ppid, []).append(int(d.name))
    return kids


def _tree(root: int) -> Iterator[int]:
    kids, todo = _children(), [root]
    while todo:
        pid = todo.pop()
        yield pid
        todo.extend(kids.get(pid, []))


def _pss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


class TreeMemory:
    """A daemon thread in the controlling pytest process that samples the summed PSS of its process tree."""

    def __init__(self) -> None:
        self.running: Set[str] = set()  # test ids started and not finished (on any worker)
        self.peak = 0
        self.peak_tests: Set[str] = set()
        self.by_test: Dict[str, int] = {}  # test id -> highest suite total seen while it ran
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="suite-memory", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        root = os.getpid()
        while not self._stop.wait(INTERVAL_S):
            total = sum(_pss_bytes(pid) for pid in _tree(root))
            with self._lock:
                for test in self.running:
                    self.by_test[test] = max(self.by_test.get(test, 0), total)
                if total > self.peak:
                    self.peak, self.peak_tests = total, set(self.running)

    def start(self, nodeid: str) -> None:
        with self._lock:
            self.running.add(nodeid)

    def finish(self, nodeid: str) -> None:
        with self._lock:
            self.running.discard(nodeid)

    def summary(self) -> str:
        self._stop.set()
        self._thread.join()
        top = sorted(self.by_test.items(), key=lambda kv: -kv[1])[:5]
        return (f"peak memory of the suite (every process of this run, PSS, sampled every {INTERVAL_S} s): "
                f"{self.peak / 2**30:.2f} GB, while running {', '.join(sorted(self.peak_tests)) or '-'}; highest "
                "while running: " + (", ".join(f"{t} ({b / 2**30:.2f} GB)" for t, b in top) or "-"))


def _cpu_times() -> Optional[Tuple[int, int]]:
    """The machine's CPU time so far, all cores, in clock ticks: (idle incl. I/O wait, total), from /proc/stat."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return ticks[3] + ticks[4], sum(ticks[:8])  # user nice system idle iowait irq softirq steal


DURATIONS = "results/tests/latest/durations.csv"  # under the rootdir; untracked (.gitignore): make test leaves git clean
SUITE = "results/tests/latest/suite.json"  # the same run as a whole: its wall, its outcomes, the machine


class Durations:
    """Every test phase's seconds (pytest's report.duration: setup, call, teardown), collected in the controlling
    process (under pytest-xdist the workers' reports reach it), and written at the end of the session, atomically
    (a temporary file renamed over the old one: a reader or an interrupted run never sees half a file).

    Written on a run of the whole suite only, not always: the file is meant to be committed, and a run of one file (or
    -k, -m, --lf, -x) would replace the suite's record with a part of it, and the next commit would show most tests'
    rows deleted. The whole suite = no paths given (testpaths) or the tests folder (or the root) itself, no
    deselection, and a session that ran to its end (failed tests included: their rows say so; an interrupted run,
    an internal or usage error, -x / --maxfail stopping early do not count). The terminal summary says which, and
    why not."""

    def __init__(self) -> None:
        self.rows: List[Tuple[str, str, float, str]] = []  # nodeid, phase, seconds, outcome
        self.started = time.time()
        self.cpu0 = _cpu_times()
        self.deselected = 0
        self.note = ""

    def add(self, report) -> None:
        self.rows.append((report.nodeid, report.when, float(report.duration), report.outcome))

    def partial(self, session, exitstatus) -> Optional[str]:
        """Why this session is not a run of the whole suite, or None."""
        config = session.config
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return f"the session ended with {pytest.ExitCode(exitstatus).name}"
        if session.shouldstop or session.shouldfail:
            return f"the session stopped early ({session.shouldstop or session.shouldfail})"
        opt = config.option
        if getattr(opt, "collectonly", False):
            return "--collect-only"
        if getattr(opt, "lf", False) or getattr(opt, "stepwise", False):  # they filter while collecting, unseen here
            return "--lf / --sw run the tests that failed last"
        if self.deselected or getattr(opt, "keyword", "") or getattr(opt, "markexpr", "") or getattr(opt, "deselect",
                                                                                                     None):
            return "tests were deselected (-k, -m, --deselect)"
        if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
            whole = {config.rootpath.resolve(), (config.rootpath / "tests").resolve()}
            if any(Path(config.invocation_params.dir, a).resolve() not in whole for a in config.args):
                return f"part of the suite was asked for: {' '.join(config.args)}"
        return None

    @staticmethod
    def _atomic(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(text)
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()

    def summary(self, session) -> dict:
        """The run as a whole (results/tests/latest/suite.json): its date, pytest's wall seconds, the tests by outcome (as
        pytest's summary line counts them) and the machine (CPU model, cores, load at the end)."""
        import datetime
        import platform

        from odevit.repro.machine import cpu_model

        stats = session.config.pluginmanager.get_plugin("terminalreporter").stats
        outcomes = {k: len(stats.get(k, [])) for k in ("passed", "failed", "error", "skipped", "xfailed", "xpassed")}
        cpu1 = _cpu_times()
        busy = (None if self.cpu0 is None or cpu1 is None or cpu1[1] == self.cpu0[1]
                else round(1 - (cpu1[0] - self.cpu0[0]) / (cpu1[1] - self.cpu0[1]), 3))
        return {"date": datetime.date.today().isoformat(), "pytest_wall_s": round(time.time() - self.started, 2),
                "outcomes": {k: n for k, n in sorted(outcomes.items()) if n},
                # the machine's cores busy over the run (all processes, this suite's and any other)
                "cores_busy_share": busy,
                "machine": {"cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
                            "load_avg_1m_at_end": round(os.getloadavg()[0], 2)}}

    def write(self, path: Path) -> None:
        order = {"setup": 0, "call": 1, "teardown": 2}
        rows = sorted(((n, w, round(d, 3), o) for n, w, d, o in self.rows),
                      key=lambda r: (-r[2], r[0], order.get(r[1], 3)))
        buf = io.StringIO()
        out = csv.writer(buf, lineterminator="\n")
        out.writerow(["nodeid", "phase", "seconds", "outcome"])
        out.writerows((n, w, f"{d:.3f}", o) for n, w, d, o in rows)
        self._atomic(path, buf.getvalue())

    def finish(self, session, exitstatus) -> None:
        why = self.partial(session, exitstatus)
        path = session.config.rootpath / DURATIONS
        if why:
            self.note = f"per-test durations: {DURATIONS} not written ({why}; it records whole-suite runs only)"
            return
        self.write(path)
        run = self.summary(session)
        self._atomic(session.config.rootpath / SUITE, json.dumps(run, indent=1) + "\n")
        total = sum(d for _, _, d, _ in self.rows)
        self.note = (f"per-test durations: {DURATIONS} ({len(self.rows)} test phases, {total:.0f} s in all, "
                     f"slowest first); the run: {SUITE} (pytest {run['pytest_wall_s']:.0f} s)")


_MEMORY: Dict[str, TreeMemory] = {}
_DURATIONS: Dict[str, Durations] = {}


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller records the suite
        return
    if sys.platform.startswith("linux"):  # the controller, or a serial run
        _MEMORY["tree"] = TreeMemory()
    _DURATIONS["run"] = Durations()


def pytest_runtest_logstart(nodeid, location):  # under pytest-xdist, the controller's hook for every worker's test
    if "tree" in _MEMORY:
        _MEMORY["tree"].start(nodeid)


def pytest_runtest_logfinish(nodeid, location):
    if "tree" in _MEMORY:
        _MEMORY["tree"].finish(nodeid)


def pytest_runtest_logreport(report):  # each phase of each test (the controller's hook for workers' tests too)
    if "run" in _DURATIONS:
        _DURATIONS["run"].add(report)


def pytest_deselected(items):
    if "run" in _DURATIONS:
        _DURATIONS["run"].deselected += len(items)


def pytest_sessionfinish(session, exitstatus):
    if "run" in _DURATIONS:
        _DURATIONS["run"].finish(session, exitstatus)


RELEASE_GROWTH = 256 * 2**20  # bytes of resident memory grown since the last release that trigger one
_RELEASED: Dict[str, int] = {}  # "rss": this process's resident bytes right after the last release


def _rss() -> int:
    """This process's resident bytes (/proc/self/statm: a read of one line, microseconds); 0 off Linux."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return 0


def _release() -> None:
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass


@pytest.fixture(autouse=True)
def _release_memory():
    """glibc keeps freed arenas mapped; gc + malloc_trim after a test keep one test's models (a ViT-B teacher in
    each paper preset) from adding to the next one's peak. Only after a test that left this process's resident memory
    more than RELEASE_GROWTH above where the last release left it (or where the session started): a full gc.collect
    walks every object the imports made (~0.5 M: torch, timm, pandas), 0.7-2 s a call, and after each of ~500 tests
    that was 350 s of the suite (results/tests/latest/durations.csv, teardown). A test that allocated little or gave its
    memory back has nothing worth releasing; growth that stays under the threshold adds up to at most RELEASE_GROWTH
    before the next release (the baseline follows the memory down, and up to what a release could not free: a model
    a fixture keeps alive)."""
    _RELEASED.setdefault("rss", _rss())
    yield
    now = _rss()
    if now > _RELEASED["rss"] + RELEASE_GROWTH:
        _release()
        now = _rss()
    _RELEASED["rss"] = min(_RELEASED["rss"], now) if now <= _RELEASED["rss"] + RELEASE_GROWTH else now


def pytest_terminal_summary(terminalreporter):
    if "tree" in _MEMORY:
        terminalreporter.write_line(_MEMORY.pop("tree").summary())
    if "run" in _DURATIONS and _DURATIONS["run"].note:
        terminalreporter.write_line(_DURATIONS.pop("run").note)


def _order(item) -> int:
    """0: the tests that do not read the tiny pipeline; 1: those that read it (`repro`: made once, by the first)."""
    return 1 if "repro" in getattr(item, "fixturenames", ()) else 0


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=_order)  # stable: the order within each group is the collection order
