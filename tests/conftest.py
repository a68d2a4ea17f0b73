"""Suite-wide memory: freed memory goes back to the OS after each test, and the terminal summary names the
tests that raised the process's peak resident memory (`make test` must stay within 8 GB; `-m "not bigmem"`
deselects any case marked as needing more)."""
import ctypes
import gc
import resource
import sys
from typing import List, Tuple

import pytest

_RAISED: List[Tuple[float, str]] = []  # (GB the test added to the peak, test id)


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _peak_gb()
    yield
    raised = _peak_gb() - before
    if raised > 0.05:
        _RAISED.append((raised, item.nodeid))


def pytest_terminal_summary(terminalreporter):
    top = sorted(_RAISED, reverse=True)[:5]
    terminalreporter.write_line(f"peak resident memory of this pytest process: {_peak_gb():.2f} GB; raised most by: "
                                + (", ".join(f"{n} (+{g:.2f} GB)" for g, n in top) or "-"))
