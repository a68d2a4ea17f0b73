"""`make test`'s own wall time, added to results/tests/latest/suite.json by the Makefile's test recipe after pytest:
`python tests/make_wall.py T0`, where T0 is the time `make` started (the Makefile reads it when it starts, before
the install from the lock that a machine without .venv needs). Only where this `make test` wrote suite.json (a run
of the whole suite: tests/conftest.py); `install_in_run` says whether the install was part of it (the .venv's stamp
newer than T0)."""
import json
import sys
import time
from pathlib import Path

from odevit.repro.files import read_json, write_text

ROOT = Path(__file__).resolve().parents[1]


def main(argv, root: Path = ROOT) -> int:
    t0 = float(argv[0])
    SUITE, STAMP = root / "results/tests/latest/suite.json", root / ".venv/.installed"
    if not SUITE.exists() or SUITE.stat().st_mtime < t0:
        print("make test: results/tests/latest/suite.json not written by this run (part of the suite), wall not recorded")
        return 0
    run = read_json(str(SUITE))
    run["make_test"] = {"wall_s": round(time.time() - t0, 1),
                        "install_in_run": STAMP.exists() and STAMP.stat().st_mtime >= t0}
    write_text(json.dumps(run, indent=1), str(SUITE))  # suite.json's layout (tests/conftest.py), written whole
    print(f"make test: {run['make_test']['wall_s']:.0f} s"
          f"{', the install from the lock included' if run['make_test']['install_in_run'] else ''} (results/tests/latest/suite.json)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
