"""Execute one numbered notebook as a pipeline stage: `python -m odevit.repro.notebook 06_dynamics` (what dvc.yaml runs).

1. validate the params the stage reads (`config.check_stage`: one line, exit 2, before the kernel starts; the
   notebooks that read the plan, 02–05 and 07, are checked as 01_data is: every block, the plan and its cells);
2. papermill-execute `notebooks/STAGE.ipynb` into `outputs/STAGE.ipynb` from the repository root, injecting only
   the params.yaml blocks that notebook's parameters cell declares;
3. strip the run's timestamps and durations from `outputs/STAGE.ipynb` (`stabilise`): a rerun that changes no
   result leaves the executed notebook byte-identical (run times live in the stages' timing.json files);

The console shows one line per stage and what the cells print (one line per epoch, real warnings); papermill's
per-cell banners, its echo of every cell's value, its progress bar and the kernel's transport notice are left out.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any, Dict

import yaml

from . import config
from .files import write_text

PLAN = ("02_teacher", "03_budget", "04_steps", "05_design", "07_verdicts")  # read the plan (params.yaml), no block
NOTEBOOKS = tuple(sorted(("01_data", "06_dynamics") + PLAN))  # in reading order


def _kernel_manager():
    """jupyter_client's kernel manager over IPC sockets: the kernel's "running over TCP without encryption" notice
    (printed once per notebook) has nothing to say for a local kernel, and IPC is the transport it recommends."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _default_transport(self) -> str:
            return "ipc"

    return IPCKernelManager


RUN_KEYS = ("start_time", "end_time", "duration")  # papermill's per-notebook and per-cell clock readings


def strip_run_metadata(nb: Dict[str, Any]) -> Dict[str, Any]:
    """Remove what differs between two runs that compute the same thing, in place: papermill's start/end time and
    duration (notebook and cells), the kernel's per-cell `execution` timestamps, and the random id papermill gives
    its injected-parameters cell (set to "injected-parameters"). Returns `nb`."""
    for meta in [nb.get("metadata", {})] + [c.get("metadata", {}) for c in nb.get("cells", [])]:
        for k in RUN_KEYS:
            meta.get("papermill", {}).pop(k, None)
        meta.pop("execution", None)
    for cell in nb.get("cells", []):
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []) and "id" in cell:
            cell["id"] = "injected-parameters"
    return nb


def stabilise(path: str) -> None:
    """Rewrite the executed notebook at `path` without its run timestamps (strip_run_metadata)."""
    import nbformat

    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    nbformat.write(strip_run_metadata(nb), path)


TIMES = ".dvc/tmp/notebook_times.json"  # stage -> wall s of its last run (kernel start included); untracked


def record_time(stage: str, seconds: float, path: str = TIMES) -> None:
    """The stage's wall time into `path` (the executed notebook no longer carries it: `stabilise`); entries of
    stages that are no longer notebooks (renamed or removed) are dropped."""
    import json

    times = {}
    if os.path.isfile(path):
        with open(path) as f:
            times = {k: v for k, v in json.load(f).items() if k in NOTEBOOKS}
    times[stage] = round(seconds, 1)
    write_text(json.dumps(dict(sorted(times.items())), indent=2), path)


def declared_parameters(path: str) -> list:
    """Names assigned in the notebook's cell tagged `parameters` (papermill's own inspection)."""
    import papermill

    return list(papermill.inspect_notebook(path))


def execute(stage: str, params_file: str = "params.yaml", out_dir: str = "outputs") -> str:
    if stage not in NOTEBOOKS:
        raise config.ConfigError(f"notebook '{stage}' is not one of {list(NOTEBOOKS)}")
    config.check_stage("01_data" if stage in PLAN else stage, params_file)  # every block and the plan: one line, exit 2
    import papermill

    src, dst = f"notebooks/{stage}.ipynb", f"{out_dir}/{stage}.ipynb"
    with open(params_file) as f:
        params: Dict[str, Any] = yaml.safe_load(f) or {}
    wanted = declared_parameters(src)
    t0 = time.time()
    print(f"[{stage}] executing {src} -> {dst}", flush=True)
    papermill.execute_notebook(
        src, dst, parameters={k: v for k, v in params.items() if k in wanted}, kernel_name="python3",
        cwd=".", progress_bar=False, log_output=False, stdout_file=sys.stdout, stderr_file=sys.stderr,
        kernel_manager_class=_kernel_manager())
    stabilise(dst)
    record_time(stage, time.time() - t0)
    print(f"[{stage}] done in {time.time() - t0:.0f} s", flush=True)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stage", choices=NOTEBOOKS)
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    logging.getLogger("papermill").setLevel(logging.WARNING)  # its INFO lines are the per-cell banners
    try:
        execute(args.stage, args.params)
    except (config.ConfigError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
