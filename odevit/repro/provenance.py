"""What a run was made on and under which load, recorded by the code (never narrated): each process that works on a
run appends its record to the run's checkpoint folder (processes.json), so resumes and interruptions are counted.

    with Monitor(ckpt_dir, resumed_from_epoch=...) as mon:
        ...train...
    record = mon.summary()   # this process + every earlier one: machine, threads, wall, CPU time, load, resumes

A process's record is written when it starts (ended: null), brought up to date every `heartbeat_s` seconds (its
wall and CPU seconds so far, `last_seen`) and completed when it ends; SIGTERM (a deadline, `kill`) ends it like an
exception, so it is completed too (completed: false). A record still without an end is a process killed outright
(SIGKILL, power): its wall and CPU seconds are those of its last heartbeat. The machine's load (1-minute load average / cores, sampled every `every_s` s while
the run works) is the contention measure: near 1/cores = alone on the machine's cores, > 1 = oversubscribed.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

from . import machine

FILE = "processes.json"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def read(ckpt_dir: str) -> List[Dict[str, Any]]:
    path = os.path.join(ckpt_dir, FILE)
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return json.load(f)


def _write(ckpt_dir: str, records: List[Dict[str, Any]]) -> None:
    os.makedirs(ckpt_dir, exist_ok=True)
    path = os.path.join(ckpt_dir, FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(records, f, indent=1)
    os.replace(tmp, path)


def _terminated(signum: int, frame: Any) -> None:
    sys.exit(128 + signum)  # SystemExit through the training loop: context managers (Monitor) close normally


class Monitor:
    """Samples the machine's load while a run works and records this process beside the run's earlier ones."""

    def __init__(self, ckpt_dir: str, process_start: Optional[float] = None, every_s: float = 5.0,
                 heartbeat_s: float = 60.0, trained_with: Optional[List[str]] = None):
        """process_start: epoch seconds this process started (its start-up and data loading count in wall_s; CPU
        seconds are always the whole process's). trained_with: the other runs this process trains at the same
        time (`train.fit_many`), recorded so that its wall and CPU seconds are read as shared by all of them."""
        self.dir, self.every, self.start, self.heartbeat = ckpt_dir, every_s, process_start, heartbeat_s
        self.trained_with = list(trained_with or [])
        self.loads: List[float] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the heartbeat thread and the main thread both write processes.json
        self._thread: Optional[threading.Thread] = None
        self._old_term: Any = None
        self.record: Dict[str, Any] = {}

    def __enter__(self) -> "Monitor":
        import torch

        m = machine.machine_info()
        self.record = {"pid": os.getpid(), "host": os.uname().nodename, "started": _now(), "ended": None,
                       "cpu_model": m["cpu_model"], "cpu_capability": m["cpu_capability"], "cores": m["cpu_count"],
                       "threads": torch.get_num_threads(), "cuda_device": m["cuda_device"], "torch": m["torch_build"],
                       "lock_sha256": m["lock_sha256"]}
        if self.trained_with:
            self.record["trained_with"] = self.trained_with
        self._records = read(self.dir) + [self.record]
        _write(self.dir, self._records)
        self._t0 = self.start if self.start is not None else time.time()
        self._sample()
        if threading.current_thread() is threading.main_thread():  # SIGTERM -> SystemExit: __exit__ records the end
            self._old_term = signal.signal(signal.SIGTERM, _terminated)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        self.loads.append(os.getloadavg()[0] / (os.cpu_count() or 1))

    def _update(self) -> None:
        """The record's times and load so far."""
        self.record.update(wall_s=round(time.time() - self._t0, 1), cpu_s=round(_cpu_s(), 1),
                           load_per_core_mean=round(sum(self.loads) / len(self.loads), 3),
                           load_per_core_max=round(max(self.loads), 3))

    def _loop(self) -> None:
        last = time.time()
        while not self._stop.wait(self.every):
            self._sample()
            if time.time() - last >= self.heartbeat:
                last = time.time()
                with self._lock:
                    if self._stop.is_set():
                        return
                    self._update()
                    self.record["last_seen"] = _now()
                    _write(self.dir, self._records)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
        self._sample()
        with self._lock:
            self._update()
            self.record.update(ended=_now(), completed=exc[0] is None)
            self.record.pop("last_seen", None)
            _write(self.dir, self._records)

    def summary(self) -> Dict[str, Any]:
        """The run's provenance for its metrics.json: every process's record, the resumes (processes after the first),
        interrupted processes (no end), and wall / CPU seconds summed over the processes."""
        recs = self._records
        shared = max([len(r.get("trained_with") or []) + 1 for r in recs])
        return {"processes": recs, "resumes": len(recs) - 1, "interrupted": sum(r.get("ended") is None for r in recs),
                **({"shared_by_runs": shared} if shared > 1 else {}),  # trained together: wall and CPU are the
                # whole process's, shared by that many runs
                "wall_s": round(sum(r.get("wall_s", 0.0) for r in recs), 1),
                "cpu_s": round(sum(r.get("cpu_s", 0.0) for r in recs), 1),
                "machines": sorted({f"{r['cpu_model']} / {r['cuda_device'] or 'no GPU'}" for r in recs})}
