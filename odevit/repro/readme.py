"""The README's result sections, generated from the committed results files (no hand-copied number can drift).

    python -m odevit.repro.readme            # rewrite every <!-- NAME --> ... <!-- /NAME --> section of README.md
                                             # and of the docs pages in PAGES
    python -m odevit.repro.readme --check    # exit 1 and name the sections that differ from the results files

The 07_verdicts stage runs it; tests/test_readme.py fails when a section is stale. Each section is a
function that reads its results files into its template, docs/templates/NAME.md.j2 (the wording, `wording.fill`);
the README's own and the small pages' sections are here, the claims' in v2_pages (the README's claims table,
docs/v2.md).
"""
from __future__ import annotations

import argparse
import ast
import glob
import os
import re
import sys
from typing import Any, Callable, Dict, List

import pandas as pd

from . import v2_pages
from .wording import WORDS, fill, read_json, read_yaml


def _first_sentence(path: str) -> str:
    """The first sentence of a module's docstring, on one line."""
    with open(path) as f:
        doc = (ast.get_docstring(ast.parse(f.read())) or "").strip()
    para = " ".join(doc.split("\n\n")[0].split())
    m = re.search(r"^.*?\.(?=\s+[A-Z`(]|$)", para)
    return (m.group(0) if m else para) or "(no docstring)"


def module_map(root: str = ".") -> str:
    """One line per module, from its docstring: the layer (odevit/) and the lab (odevit/repro/)."""
    return fill("module-map", packages=[(d, what, [(os.path.relpath(f, root), _first_sentence(f)) for f in
                                                   sorted(glob.glob(os.path.join(root, d, "*.py")))])
                                        for d, what in WORDS["packages"].items()])


def _weights_rows(root: str = ".") -> List[Dict[str, Any]]:
    """One row per published tag (weights/v2): what `evaluate` gives, the run it came from (N/2 on every test image)."""
    path = os.path.join(root, "weights", "v2", "manifest.json")
    rows = []
    for tag, e in (read_json(path)["weights"] if os.path.isfile(path) else {}).items():
        m = read_json(os.path.join(root, e["metrics_file"]))
        half = m.get("acc1_half_n")
        rows.append(dict(tag=tag, e=e, half="–" if half is None else
                         f"{100 * half:.2f} % (all {m.get('test_images', 0):,})"))
    return rows


def _weights_source(r: Dict[str, Any]) -> str:
    e = r["e"]
    if e.get("study"):
        c = e["converged_plan"]
        state = "converged" if c["converged"] else f"still learning at the LR floor: +{c['gain_floor_pts']:.2f} pt"
        return f"plan v2 {e['study']} {e['cell']} s{e['seed']} (best validation of {len(e['seeds_compared'])} seeds; {state})"
    return f"plan v2's teacher s{e['seed']} ({e['selection'].split(' (')[0]})"


def weights_table(root: str = ".") -> str:
    v2 = os.path.join(root, "weights", "v2", "manifest.json")
    pending = read_json(v2).get("pending", {}) if os.path.isfile(v2) else {}
    return (pd.DataFrame([{
        "tag": f"`{r['tag']}`", "what": r["e"]["description"],
        "Acc@1 (test)": f"{100 * r['e']['metrics']['acc1']:.2f} %", "at N/2": r["half"],
        "parameters": f"{r['e']['parameters']:,}", "file": f"{r['e']['bytes'] / 2**20:.2f} MiB",
        "run": _weights_source(r), "metrics": f"`{r['e']['metrics_file']}`"}
        for r in _weights_rows(root)]).to_markdown(index=False)) + "".join(
        f"\n\n`{tag}`: not published yet, its runs still train ({why})." for tag, why in pending.items())


def cite(root: str = ".") -> str:
    """The paper as BibTeX and this repository, from CITATION.cff (its preferred-citation and its own fields)."""
    cff = read_yaml(os.path.join(root, "CITATION.cff"))
    ref = cff["preferred-citation"]
    arxiv = next((i["value"] for i in ref.get("identifiers", []) if str(i["value"]).startswith("arXiv:")), None)
    key = (re.sub(r"[^a-z]", "", ref["authors"][0]["family-names"].lower()) + str(ref["year"])
           + re.sub(r"[^a-z0-9]", "", ref["title"].split()[0].lower()))
    fields = {"title": ref["title"].replace("&", r"\&"), "year": ref["year"], "doi": ref.get("doi"),
              "author": " and ".join(f"{a['family-names']}, {a['given-names']}" for a in ref["authors"]),
              "journal": f"{ref['journal']} {arxiv}" if arxiv else ref["journal"], "url": ref.get("url")}
    return fill("cite", cff=cff, key=key,
                fields={k: fields[k] for k in ("title", "author", "journal", "year", "doi", "url")},
                repo_authors=", ".join(a.get("name") or f"{a['given-names']} {a['family-names']}"
                                       for a in cff["authors"]))


SECTIONS: Dict[str, Callable[[str], str]] = {
    "weights-table": weights_table, "cite": cite, "module-map": module_map, **v2_pages.SECTIONS}

PAGES = ("README.md", "docs/v2.md", "docs/usage.md", "docs/pipeline.md")  # generated parts


def _pattern(name: str) -> "re.Pattern[str]":
    return re.compile(rf"(<!-- {name} -->\n)(.*?)(<!-- /{name} -->)", re.S)


_LINK = re.compile(r"\]\((?!https?:|#|\.\./|/)([^)\s]+)\)")


def relative_links(body: str, page: str) -> str:
    """A section's links (written from the repository root) as seen from `page`: docs/X -> X, Y -> ../Y under docs/."""
    depth = page.count("/")
    if not depth:
        return body
    home = os.path.dirname(page) + "/"
    return _LINK.sub(lambda m: "](" + (m.group(1)[len(home):] if m.group(1).startswith(home)
                                       else "../" * depth + m.group(1)) + ")", body)


def render(text: str, root: str = ".", names: List[str] | None = None, page: str = "README.md") -> str:
    """`text` (the page `page`) with each section of `names` (default: every section; each must be present)
    regenerated, its links made relative to the page."""
    for name in SECTIONS if names is None else names:
        pat = _pattern(name)
        if not pat.search(text):
            raise ValueError(f"no <!-- {name} --> ... <!-- /{name} --> section")
        body = relative_links(SECTIONS[name](root), page)
        text = pat.sub(lambda m: m.group(1) + body + "\n" + m.group(3), text)
    return text


def placement(root: str = ".") -> Dict[str, str]:
    """section -> the page (of PAGES) that holds it; ValueError if a section is on no page or on two."""
    where: Dict[str, str] = {}
    for page in PAGES:
        with open(os.path.join(root, page)) as f:
            text = f.read()
        for name in (n for n in SECTIONS if _pattern(n).search(text)):
            if name in where:
                raise ValueError(f"<!-- {name} --> is in both {where[name]} and {page}")
            where[name] = page
    missing = [n for n in SECTIONS if n not in where]
    if missing:
        raise ValueError(f"sections {missing} are on none of {list(PAGES)}")
    return where


def stale(readme: str = "README.md", root: str = ".") -> List[str]:
    """Names of the sections whose text differs from what the results files give (every page of PAGES; `readme`
    replaces README.md, e.g. an edited copy)."""
    out = []
    for name, page in placement(root).items():
        with open(readme if page == "README.md" else os.path.join(root, page)) as f:
            text = f.read()
        if _pattern(name).search(text).group(2) != _pattern(name).search(render(text, root, [name], page)).group(2):
            out.append(name)
    return out


def write_pages(root: str = ".") -> List[str]:
    """Regenerate every section in place, page by page (atomic writes); returns the pages that changed."""
    by_page: Dict[str, List[str]] = {}
    for name, page in placement(root).items():
        by_page.setdefault(page, []).append(name)
    changed = []
    for page, names in by_page.items():
        path = os.path.join(root, page)
        with open(path) as f:
            text = f.read()
        out = render(text, root, names, page)
        if out != text:
            with open(path + ".tmp", "w") as f:
                f.write(out)
            os.replace(path + ".tmp", path)
            changed.append(page)
    return changed


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the README's result sections from the results files")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--readme", default="README.md")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale(args.readme)
        if bad:
            print(f"stale sections {bad} (python -m odevit.repro.readme)", file=sys.stderr)
        return 1 if bad else 0
    write_pages()
    return 0


if __name__ == "__main__":
    sys.exit(main())
