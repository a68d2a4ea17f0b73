import time, os
_f = open(os.environ.get("TL_OUT", "/tmp/tl/timeline.txt"), "w", buffering=1)
def pytest_runtest_logstart(nodeid, location):
    _f.write(f"{time.time():.2f} start {nodeid}\n")
def pytest_runtest_logfinish(nodeid, location):
    _f.write(f"{time.time():.2f} end {nodeid}\n")
