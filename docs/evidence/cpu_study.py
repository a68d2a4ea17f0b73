"""The fuller study on the CPU: the README's one command, timed, and its results kept as evidence.

    python docs/evidence/cpu_study.py        # in a clone whose default run is done (DVC cache / checkpoints)

Runs `dvc exp run -S study.train_limit=20000 -S '+study.cells.strang={solver: strang}'` (every study cell plus
Strang, 20k training images x the default 2 epochs, the default seeds; the teacher and data stages come from the
cache), times it, and writes into docs/evidence/:
  study_cpu_20000x2.csv    one row per (cell, seed): the cell's metrics.json (odevit.repro.study.collect)
  claims_cpu_20000x2.csv   results/07_report/claims.csv of that experiment
  study_cpu_20000x2.json   the command, its wall-clock time, the machine, the date and the commit
The experiment's results stay in the workspace (and in `dvc exp show`); `git checkout . && dvc checkout` returns to
the default run's. `python -m odevit.repro.readme` renders these files in the README.
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import torch

root = os.getcwd()
sys.path.insert(0, root)
from odevit.repro import study  # noqa: E402

CMD = ["dvc", "exp", "run", "-S", "study.train_limit=20000", "-S", "+study.cells.strang={solver: strang}"]
OUT = os.path.join(root, "docs", "evidence")

commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
t0 = time.time()
subprocess.run(CMD, check=True)
wall = time.time() - t0
cells = study.collect("results").drop(columns=["source"])
cells.to_csv(os.path.join(OUT, "study_cpu_20000x2.csv"), index=False)
shutil.copyfile("results/07_report/claims.csv", os.path.join(OUT, "claims_cpu_20000x2.csv"))
meta = {"command": " ".join(CMD[:6]) + f" '{CMD[6]}'", "wall_s": round(wall, 1), "commit": commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, "
                   + (torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"),
        "date": time.strftime("%Y-%m-%d")}
with open(os.path.join(OUT, "study_cpu_20000x2.json"), "w") as f:
    json.dump(meta, f, indent=2)
    f.write("\n")
print(f"{meta['command']}: {wall / 60:.1f} min; wrote docs/evidence/*_cpu_20000x2.*", flush=True)
