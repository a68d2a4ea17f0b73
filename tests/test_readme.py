"""Every result number in the README's generated sections equals what the committed results files give."""
import shutil
from pathlib import Path

from odevit.repro import readme, report, stats
from test_study import _results

ROOT = Path(__file__).resolve().parents[1]


def test_readme_result_sections_match_the_results_files():
    assert readme.stale(str(ROOT / "README.md"), str(ROOT)) == [], "python -m odevit.repro.readme, then commit README.md"


def test_a_changed_number_is_caught(tmp_path):
    text = (ROOT / "README.md").read_text()
    claims = text.split("<!-- claims-table -->")[1].split("<!-- /claims-table -->")[0]
    row = next(line for line in claims.splitlines() if line.startswith("| `retention`"))
    cells = row.split(" | ")
    cells[3] = "0.999 ± 0.0001 ratio"  # a hand edit of our retention
    (tmp_path / "README.md").write_text(text.replace(row, " | ".join(cells)))
    assert readme.stale(str(tmp_path / "README.md"), str(ROOT)) == ["claims-table"]


def test_claims_section_shows_verdicts_and_follows_them(tmp_path):
    for name, teacher in [("a", 0.852), ("b", 0.95)]:  # b: retention 0.84, outside 0.939 +- 1 pt / teacher
        root = tmp_path / name
        _results(root / "results", teacher=teacher)
        c = report.claims(str(root / "results"))
        (root / "results/07_report").mkdir()
        c.to_csv(root / "results/07_report/claims.csv", index=False)
        (root / "params.yaml").write_text("study: {reference: ref}\n")
        text = readme.claims_table(str(root))
        row = next(line for line in text.splitlines() if line.startswith("| `retention`"))
        assert row.endswith(f"**{stats.SUPPORTS if name == 'a' else stats.CONTRADICTS}** |")
        assert f"0.939 ± {0.01 / teacher:.2g}" in row and "authors' README table" in row
        assert f"Verdicts of this run: **{report.summary_line(c)}**" in text
        assert "(Holm p " in next(line for line in text.splitlines() if line.startswith("| `centernorm"))
