"""The paper's numbers and claims (odevit/repro/paper.yaml, read by odevit.repro.pages): each number computed from
the authors' table by its operation, the file checked when read, docs/paper.md equal to what the data give."""
from pathlib import Path

import pytest


def test_paper_numbers_and_their_arithmetic():
    from odevit.repro import pages as paper

    c = paper.CLAIMS
    assert c["ts_minus_free"].value == pytest.approx(86.7 - 80.9) and "+7.8 pt" in c["ts_minus_free"].arithmetic
    assert c["ts_ce_minus_free"].value == pytest.approx(72.1 - 57.9)
    assert c["ts_ce_minus_free_rel"].value == pytest.approx(100 * (0.721 / 0.579 - 1), abs=1e-5)
    assert c["retention"].value == pytest.approx(0.867 / 0.923, abs=1e-6) and c["retention"].direction == "greater"
    assert c["r1_minus_r4"].value == pytest.approx(-1.8) and c["r1_minus_r4"].direction == "less"
    assert c["compression_total"].value == pytest.approx(85 / 3.8, abs=1e-6)
    assert c["jasmin_on_minus_off_lyapunov"].value == pytest.approx(0.2379 - 0.4045)
    assert not any("§" in v.source or "§" in v.statement for v in c.values())  # no section number nobody can check
    doc = Path(__file__).resolve().parents[1] / "docs" / "paper.md"
    assert doc.read_text() == paper.markdown(), "python -m odevit.repro.pages --paper, then commit docs/paper.md"


def test_paper_yaml_is_checked_when_read():
    """The claims are data (odevit/repro/paper.yaml): a value's operation and a claim's direction outside the allowed
    ones stop with the file's name; a value is computed from the table, so the table's numbers move it."""
    from odevit.repro import pages as paper

    with pytest.raises(ValueError, match=r"paper\.yaml: value\.op 'typed'"):
        paper.paper_value({"op": "typed", "terms": [["small", "cifar10", "free", "cifar10"]]})
    good = {"id": "x", "statement": "s", "source": "{tldr}", "direction": "greater", "statistic": "t", "unit": "pt"}
    assert paper._claim(good).source == paper.TLDR
    with pytest.raises(ValueError, match=r"paper\.yaml: claim x: direction 'bigger'"):
        paper._claim(dict(good, direction="bigger"))
    value, text = paper.paper_value({"op": "diff_pt", "label": "L", "terms": [["base", "cifar10", "small", "cifar10"]]})
    assert value == pytest.approx(100 * (0.885 - 0.867)) and text == "L: 0.885 − 0.867 = +1.8 pt"
