"""Every result number in the README's generated sections equals what the committed results files give."""
import shutil
from pathlib import Path

from odevit import readme

ROOT = Path(__file__).resolve().parents[1]


def test_readme_result_sections_match_the_results_files():
    assert readme.stale(str(ROOT / "README.md"), str(ROOT)) == [], "python -m odevit.readme, then commit README.md"


def test_a_changed_number_is_caught(tmp_path):
    text = (ROOT / "README.md").read_text()
    claims = text.split("<!-- claims-table -->")[1].split("<!-- /claims-table -->")[0]
    row = next(line for line in claims.splitlines() if line.startswith("| `retention`"))
    cells = row.split(" | ")
    cells[2] = "0.999 ± 0.0001"  # a hand edit of our retention
    (tmp_path / "README.md").write_text(text.replace(row, " | ".join(cells)))
    assert readme.stale(str(tmp_path / "README.md"), str(ROOT)) == ["claims-table"]
