"""Execute one numbered notebook as a pipeline stage: `python -m odevit.repro.notebook 06_dynamics` (what dvc.yaml runs).

Checks the stage's params (`config.check_stage`: one line, exit 2; 02–05 and 07 as 01_data), papermill-runs
`notebooks/STAGE.ipynb` into `outputs/STAGE.ipynb` with only the params.yaml blocks its parameters cell declares, then
strips the run's timestamps (`stabilise`). The console shows what the cells print, not papermill's per-cell banners.
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
from .files import read_json, write_json

PLAN = ("02_teacher", "03_budget", "04_steps", "05_design", "07_verdicts")  # read the plan (params.yaml), no block
NOTEBOOKS = tuple(sorted(("01_data", "06_dynamics") + PLAN))  # in reading order
RUN_KEYS = ("start_time", "end_time", "duration")  # papermill's per-notebook and per-cell clock readings
TIMES = ".dvc/tmp/notebook_times.json"  # stage -> wall s of its last run (kernel start included); untracked


def _kernel_manager():
    """jupyter_client's kernel manager over IPC sockets: no kernel notice "running over TCP without encryption"."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _default_transport(self) -> str:
            return "ipc"

    return IPCKernelManager


def strip_run_metadata(nb: Dict[str, Any]) -> Dict[str, Any]:
    """Remove, in place, what differs between two runs computing the same thing: clock readings, the parameters' id."""
    for node in [nb] + nb.get("cells", []):
        meta = node.get("metadata", {})
        for k in RUN_KEYS:
            meta.get("papermill", {}).pop(k, None)
        meta.pop("execution", None)
        if node is not nb and "injected-parameters" in meta.get("tags", []) and "id" in node:
            node["id"] = "injected-parameters"
    return nb


def stabilise(path: str) -> None:
    """Rewrite the executed notebook at `path` without its run timestamps (strip_run_metadata)."""
    import nbformat

    nbformat.write(strip_run_metadata(nbformat.read(path, as_version=nbformat.NO_CONVERT)), path)


def record_time(stage: str, seconds: float, path: str = TIMES) -> None:
    """The stage's wall time into `path` (not in the stabilised notebook), dropping stages no longer notebooks."""
    times = {k: v for k, v in read_json(path).items() if k in NOTEBOOKS} if os.path.isfile(path) else {}
    times[stage] = round(seconds, 1)
    write_json(times, path)


def execute(stage: str, params_file: str = "params.yaml", out_dir: str = "outputs") -> str:
    if stage not in NOTEBOOKS:
        raise config.ConfigError(f"notebook '{stage}' is not one of {list(NOTEBOOKS)}")
    config.check_stage("01_data" if stage in PLAN else stage, params_file)  # every block and the plan: one line, exit 2
    import papermill

    src, dst = f"notebooks/{stage}.ipynb", f"{out_dir}/{stage}.ipynb"
    with open(params_file) as f:
        params: Dict[str, Any] = yaml.safe_load(f) or {}
    wanted = list(papermill.inspect_notebook(src))  # the names the cell tagged `parameters` assigns
    t0 = time.time()
    print(f"[{stage}] executing {src} -> {dst}", flush=True)
    papermill.execute_notebook(src, dst, parameters={k: v for k, v in params.items() if k in wanted},
                               kernel_name="python3", cwd=".", progress_bar=False, log_output=False,
                               stdout_file=sys.stdout, stderr_file=sys.stderr, kernel_manager_class=_kernel_manager())
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
