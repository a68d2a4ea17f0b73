"""Suite-wide memory: freed memory goes back to the OS after each test, and the terminal summary gives the suite's peak
memory — every process of the run summed (pytest and the dvc, papermill, training and preset processes the tests
start; pytest-xdist workers too, where someone runs the suite with -n), as proportional set size (PSS: a page shared
by k processes counts 1/k in each), read from /proc every half second — and the tests that were running at the
highest peaks (`make test` must stay within 8 GB; `-m "not bigmem"` deselects any case marked as needing more)."""
import ctypes
import gc
import os
import sys
import threading
from pathlib import Path
from typing import Dict, Iterator, Set

import pytest

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


_MEMORY: Dict[str, TreeMemory] = {}


def pytest_configure(config):
    if sys.platform.startswith("linux") and not hasattr(config, "workerinput"):  # the controller, or a serial run
        _MEMORY["tree"] = TreeMemory()


def pytest_runtest_logstart(nodeid, location):  # under pytest-xdist, the controller's hook for every worker's test
    if "tree" in _MEMORY:
        _MEMORY["tree"].start(nodeid)


def pytest_runtest_logfinish(nodeid, location):
    if "tree" in _MEMORY:
        _MEMORY["tree"].finish(nodeid)


@pytest.fixture(autouse=True)
def _release_memory():
    """glibc keeps freed arenas mapped; gc + malloc_trim after each test keep one test's models (a ViT-B teacher in
    each paper preset) from adding to the next one's peak."""
    yield
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass


def pytest_terminal_summary(terminalreporter):
    if "tree" in _MEMORY:
        terminalreporter.write_line(_MEMORY.pop("tree").summary())
