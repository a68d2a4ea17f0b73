"""Every result number in the generated sections of the README and the docs pages equals what the committed results
files give."""
import shutil
from pathlib import Path

from odevit.repro import readme, report, stats
from test_study import _results

ROOT = Path(__file__).resolve().parents[1]


def test_readme_result_sections_match_the_results_files():
    assert readme.stale(str(ROOT / "README.md"), str(ROOT)) == [], "python -m odevit.repro.readme, then commit"


def test_every_section_is_on_exactly_one_page():
    where = readme.placement(str(ROOT))
    assert set(where) == set(readme.SECTIONS) and where["claims-summary"] == "README.md"


def test_the_first_screen_is_the_answer():
    """The README opens with what this is and the claims with their verdicts, before any mechanics: first the plan's
    (fresh seeds, analysis fixed before the runs), then the exploratory converged study's, then the quick run's."""
    text = (ROOT / "README.md").read_text()
    plan = text.index("## The plan's verdicts")
    conv, quick = text.index("## Exploratory: the converged study"), text.index("## The quick run")
    assert plan < 2000 and plan < text.index("<!-- plan-verdicts -->") < conv
    assert conv < text.index("<!-- converged-study -->") < quick < text.index("## Two commands") < text.index("## Read on")
    assert text.index("| `ts_minus_free` |") < text.index("<!-- converged-study -->") + 2500
    end = text.index("<!-- /claims-summary -->")
    assert end < text.index("](results/07_report/claims.png)") < end + 200  # the quick run's claims figure under its table
    assert text.index("<!-- converged-study -->") < text.index("](docs/evidence/converged_fmnist/results/07_report/"
                                                               "claims.png)") < quick  # the converged study's in its
    for page in ("usage", "results", "pipeline", "paper", "published_code", "performance", "reproducibility"):
        assert f"(docs/{page}.md)" in text and (ROOT / f"docs/{page}.md").is_file()


def test_a_changed_number_is_caught(tmp_path):
    text = (ROOT / "README.md").read_text()
    claims = text.split("<!-- claims-summary -->")[1].split("<!-- /claims-summary -->")[0]
    row = next(line for line in claims.splitlines() if line.startswith("| `retention`"))
    cells = row.split(" | ")
    cells[3] = "0.999 [0.998, 0.9999] ratio"  # a hand edit of our retention
    (tmp_path / "README.md").write_text(text.replace(row, " | ".join(cells)))
    assert readme.stale(str(tmp_path / "README.md"), str(ROOT)) == ["claims-summary"]


def test_claims_section_shows_verdicts_and_follows_them(tmp_path):
    for name, teacher in [("a", 0.852), ("b", 0.95)]:  # b: retention 0.84, below 0.939 - 1 pt / teacher
        root = tmp_path / name
        _results(root / "results", teacher=teacher)
        c = report.claims(str(root / "results"))
        (root / "results/07_report").mkdir()
        c.to_csv(root / "results/07_report/claims.csv", index=False)
        (root / "params.yaml").write_text("study: {reference: ref}\n")
        text = readme.claims_table(str(root))
        row = next(line for line in text.splitlines() if line.startswith("| `retention`"))
        want = stats.SUPPORTS if name == 'a' else stats.CONTRADICTS
        assert row.endswith(f"**{want}** (replicates {c.set_index('claim').replication['retention']:.2f}) |")
        assert f"> {0.867 / 0.923 - 0.01 / teacher:.3g} (the paper's − margin)" in row and "authors' README table" in row
        assert f"Verdicts of this run: **{report.summary_line(c)}**" in text
        assert "(Holm p " in next(line for line in text.splitlines() if line.startswith("| `centernorm"))
