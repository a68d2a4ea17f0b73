"""Compare a run retrained with new code (RERUN folder) with the committed run (COMMITTED folder): every metric except
provenance, source and timings, and every history column except the times and images/s, must be identical.

    python docs/evidence/source_equivalence/compare.py RERUN COMMITTED     # exit 0 = bit-identical
"""
import json
import os
import sys

import pandas as pd

SKIP = {"provenance", "source", "timing", "wall_s", "train_s"}


def main(rerun: str, committed: str) -> int:
    a, b = (json.load(open(os.path.join(d, "metrics.json"))) for d in (committed, rerun))
    diff = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if k not in SKIP and a.get(k) != b.get(k)}
    ha, hb = (pd.read_csv(os.path.join(d, "history.csv")) for d in (committed, rerun))
    cols = [c for c in ha.columns if not c.endswith("time_s") and c != "img_per_s"]
    same = list(ha.columns) == list(hb.columns) and ha[cols].equals(hb[cols])
    print(f"metrics differing: {diff or 'none'}; history columns {cols}: {'identical' if same else 'DIFFER'}; "
          f"source {a.get('source')} -> {b.get('source')}")
    return 0 if not diff and same else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
