"""Re-execute the stages that only read committed files, by their own dvc.yaml commands, one after another:

    python -m odevit.repro.reread 01_data evidence 03_v2_teacher ... html     # make repro's READ_STAGES

What `dvc repro --force --single-item STAGES` runs, without DVC's work around each stage: on the 2-core CPU one DVC
process spends ~15 s of CPU parsing the pipeline (its ~300 study runs and their lock entries) before each stage and
rewrites dvc.lock after it, which was most of make repro's stage time while each notebook ran in 20-30 s. dvc.lock
is not touched: `dvc status` then lists these stages as changed until `dvc commit STAGE...` records their new outputs
(5 min on 2 cores for make repro's 11 of 2026-11-27, which is why make repro leaves it to you). A stage that fails stops the rest,
with its name and exit status.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import List, Tuple

import yaml

DVC_FILE = "dvc.yaml"


def commands(stages: List[str], dvc_file: str = DVC_FILE) -> List[Tuple[str, str]]:
    """(stage, its command) from `dvc_file`, in the order given; ValueError naming a stage dvc.yaml lacks, or one
    that is a matrix or foreach stage (many runs: not a stage that reads committed files)."""
    with open(dvc_file) as f:
        defined = yaml.safe_load(f)["stages"]
    out = []
    for name in stages:
        if name not in defined:
            raise ValueError(f"{dvc_file}: no stage '{name}' (stages: {', '.join(defined)})")
        st = defined[name]
        if "matrix" in st or "foreach" in st or "${" in str(st.get("cmd", "")):
            raise ValueError(f"{dvc_file}: stage '{name}' is a matrix/foreach stage; reread runs single stages")
        out.append((name, st["cmd"]))
    return out


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stages", nargs="+")
    ap.add_argument("--dvc-file", default=DVC_FILE)
    a = ap.parse_args(argv)
    try:
        todo = commands(a.stages, a.dvc_file)
    except ValueError as e:
        print(f"reread: {e}", file=sys.stderr)
        return 2
    t_all = time.perf_counter()
    for i, (name, cmd) in enumerate(todo, 1):
        print(f"reread [{i}/{len(todo)}] {name}: {cmd}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.run(cmd, shell=True).returncode
        if rc:
            print(f"reread: stage '{name}' failed (exit {rc}); the stages after it did not run", file=sys.stderr)
            return rc
        print(f"reread [{i}/{len(todo)}] {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(f"reread: {len(todo)} stages in {time.perf_counter() - t_all:.0f} s; dvc.lock not updated (to record their "
          f"outputs: dvc commit {' '.join(a.stages)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
