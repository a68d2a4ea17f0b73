"""The independent recomputation of plan v2's rows (docs/evidence/recompute_v2.py, written from the plan's text
without the package) agrees with results/v2/claims.csv, and says so when it does not."""
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "docs/evidence/recompute_v2.py"


def _run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)


def test_every_v2_row_recomputes_from_the_raw_files():
    r = _run(ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    n = len(pd.read_csv(ROOT / "results/v2/claims.csv"))
    assert r.stdout.strip().splitlines()[-1] == f"rows: {n}; matched {n}; mismatched 0"
    assert "import odevit" not in SCRIPT.read_text() and "from odevit" not in SCRIPT.read_text()
    # docs/v2.md quotes its committed output: the same lines as now (regenerate it when claims.csv changes)
    shown = [ln[2:] for ln in (ROOT / "docs/evidence/recompute_v2.md").read_text().splitlines() if ln.startswith("- ")]
    assert shown == r.stdout.strip().splitlines()


def test_a_changed_verdict_or_run_is_a_mismatch(tmp_path):
    """A verdict edited in claims.csv, or one run's test accuracy changed, and the script names the row and exits 1."""
    for d in ("results/v2", "results/v2_cpu"):
        shutil.copytree(ROOT / d, tmp_path / d)
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    claims = tmp_path / "results/v2/claims.csv"
    c = pd.read_csv(claims, dtype=str, keep_default_na=False)
    c.loc[c.question == "unseen_free", "verdict"] = "supports"
    c.to_csv(claims, index=False)
    r = _run(tmp_path)
    assert r.returncode == 1 and "mismatched 1" in r.stdout
    assert any(ln.startswith("unseen_free") and ln.endswith("MISMATCH") for ln in r.stdout.splitlines())
    shutil.copy(ROOT / "results/v2/claims.csv", claims)  # the file as committed, and one run changed instead
    m = tmp_path / "results/v2/v2_1k/free/s2100/metrics.json"
    m.write_text(m.read_text().replace('"acc1": 0.', '"acc1": 0.0', 1))
    r = _run(tmp_path)
    assert r.returncode == 1 and "MISMATCH" in r.stdout
