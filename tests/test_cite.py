"""LICENSE, CITATION.cff and the README's cite section generated from it."""
import tomllib
from pathlib import Path

import yaml

from odevit.repro import pages as readme

ROOT = Path(__file__).resolve().parents[1]


def test_citation_cff_names_the_paper_and_the_license():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    ref = cff["preferred-citation"]
    assert ref["title"].startswith("ODE-ViT: Plug & Play Attention Layer") and ref["year"] == 2025
    assert [a["family-names"] for a in ref["authors"]] == ["Boned Riera", "Romero Sánchez", "Ramos Terrades"]
    assert {"type": "other", "value": "arXiv:2511.16501", "description": "arXiv identifier"} in ref["identifiers"]
    license_ = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert cff["license"] == license_ == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2026 odevit contributors\n")


def test_cite_section_is_read_from_citation_cff(tmp_path):
    text = readme.cite(str(ROOT))
    assert "@article{bonedriera2025odevit," in text
    assert "author  = {Boned Riera, Carlos and Romero Sánchez, David and Ramos Terrades, Oriol}" in text
    assert "Plug \\& Play" in text and "journal = {arXiv preprint arXiv:2511.16501}" in text
    # another CITATION.cff gives another section: nothing is hard-coded
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    cff["preferred-citation"]["year"] = 2031
    cff["preferred-citation"]["authors"][0] = {"family-names": "Doe", "given-names": "Jane"}
    (tmp_path / "CITATION.cff").write_text(yaml.safe_dump(cff, allow_unicode=True), encoding="utf-8")
    other = readme.cite(str(tmp_path))
    assert "@article{doe2031odevit," in other and "author  = {Doe, Jane and Romero" in other


def test_readme_cite_section_is_current():
    page = readme.placement(str(ROOT))["cite"]  # docs/usage.md (the README points there and to CITATION.cff)
    body = readme._pattern("cite").search((ROOT / page).read_text(encoding="utf-8")).group(2)
    assert body == readme.cite(str(ROOT)) + "\n"
