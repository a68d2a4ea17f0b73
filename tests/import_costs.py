"""What a training process spends importing, before it trains: `python -X importtime` of the module a run stage
starts (`python -m odevit.repro.study`), each listed module's cumulative import seconds (with what it imports),
written to results/tests/imports.json with the machine. docs/tests.md ("Where its time goes") reads it.

    python tests/import_costs.py
"""
import json
import os
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from odevit.repro import machine  # the CPU name as every run's machine record gives it (this import is not measured)

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("odevit.repro.study", "odevit", "torch", "timm", "timm.layers._fx", "torchvision", "torch._dynamo",
           "odevit.repro.plan", "scipy.stats._stats_py", "pandas")


def main() -> None:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", "import odevit.repro.study"], cwd=ROOT,
                       capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    cumulative = {}
    for line in r.stderr.splitlines():  # "import time: self [us] | cumulative | imported package"
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cum, name = (x.strip() for x in line.split(":", 1)[1].split("|"))
            cumulative.setdefault(name, int(cum) / 1e6)  # the first import of a module is the one that costs
    out = {"command": "python -X importtime -c 'import odevit.repro.study'", "date": str(date.today()),
           "cpu": machine.cpu_model(), "cpu_count": os.cpu_count(),
           "process_wall_s": round(wall, 2),
           "imports": [{"module": m, "cumulative_s": round(cumulative[m], 2)} for m in MODULES if m in cumulative]}
    path = ROOT / "results/tests/imports.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
