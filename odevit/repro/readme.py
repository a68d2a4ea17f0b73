"""The README's result sections, generated from the committed results files (no hand-copied number can drift).

    python -m odevit.repro.readme            # rewrite every <!-- NAME --> ... <!-- /NAME --> section of README.md
                                             # and of the docs pages in PAGES
    python -m odevit.repro.readme --check    # exit 1 and name the sections that differ from the results files
    python -m odevit.repro.readme --record-run T0   # results/run.json: wall time since T0 (epoch s) of the `dvc repro`
                                              # that just ended, and the machine (make quick calls it)

`make quick` runs it after `dvc repro`; tests/test_readme.py fails when a section is stale. Each section is a
function that reads its results files into its template, docs/templates/NAME.md.j2 (the wording, `wording.fill`);
the README's own and the small pages' sections are here, the others in a module per page: v2_pages (the
README's claims table, docs/v2.md), results_pages
(docs/results.md, docs/performance.md), exploratory_pages (docs/exploratory.md), plan1_pages (docs/plan1.md).
"""
from __future__ import annotations

import argparse
import ast
import glob
import math
import os
import re
import sys
from typing import Any, Callable, Dict, List

import pandas as pd

from . import exploratory_pages, plan1_pages, results_pages, v2_pages
from .report import to_markdown
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
    """One row per published tag (weights/v2, weights/evidence, weights/quick): what `evaluate` gives, the run it came
    from."""
    rows = []
    for folder in ("v2", "evidence", "quick"):
        path = os.path.join(root, "weights", folder, "manifest.json")
        for tag, e in (read_json(path)["weights"] if os.path.isfile(path) else {}).items():
            m = read_json(os.path.join(root, e["metrics_file"]))
            half = m.get("acc1_half_n")
            on = f" (all {m.get('test_images', 0):,})" if folder == "v2" else ""  # plan v2: N/2 on every test image
            rows.append(dict(tag=tag, folder=folder, e=e, half="–" if half is None else f"{100 * half:.2f} %{on}"))
    return rows


def _weights_source(r: Dict[str, Any]) -> str:
    e = r["e"]
    if e.get("study") and r["folder"] == "v2":
        c = e["converged_plan"]
        state = "converged" if c["converged"] else f"still learning at the LR floor: +{c['gain_floor_pts']:.2f} pt"
        return f"plan v2 {e['study']} {e['cell']} s{e['seed']} (best validation of {len(e['seeds_compared'])} seeds; {state})"
    if e.get("study"):
        c = e["converged_plan"]
        state = ("converged" if c["converged"] else
                 f"not converged: +{c['gain_last_pts']:.2f} pt in its last quarter, threshold {c['threshold_pts']:.2f}")
        return f"{e['study']} {e['cell']} s{e['seed']} (best validation of {len(e['seeds_compared'])} seeds; {state})"
    if r["folder"] == "v2":
        return f"plan v2's teacher s{e['seed']} ({e['selection'].split(' (')[0]})"
    if e["kind"] == "teacher" and r["folder"] == "evidence":
        return "exploratory snapshot, trained in its own clone (" + os.path.dirname(os.path.dirname(os.path.dirname(
            e["metrics_file"]))) + "/study.json)"
    return "stage 02_teacher" if e["cell"] is None else f"quick run, cell {e['cell']} s{e['seed']}"


def _half_label(root: str) -> str:
    sub = read_yaml(os.path.join(root, "params.yaml"))["study"]["robustness_test_limit"]
    return f"at N/2 (first {sub:,} test images)" if sub else "at N/2"


def weights_table(root: str = ".") -> str:
    v2 = os.path.join(root, "weights", "v2", "manifest.json")
    pending = read_json(v2).get("pending", {}) if os.path.isfile(v2) else {}
    return to_markdown(pd.DataFrame([{
        "tag": f"`{r['tag']}`", "what": r["e"]["description"],
        "Acc@1 (test)": f"{100 * r['e']['metrics']['acc1']:.2f} %", _half_label(root): r["half"],
        "parameters": f"{r['e']['parameters']:,}", "file": f"{r['e']['bytes'] / 2**20:.2f} MiB",
        "run": _weights_source(r), "metrics": f"`{r['e']['metrics_file']}`"}
        for r in _weights_rows(root)])) + "".join(
        f"\n\n`{tag}`: not published yet, its runs still train ({why})." for tag, why in pending.items())


ASSUMED_GPU_TFLOP_S = 300.0  # an assumption (sustained bf16 on one H100), not a measurement


def gpu_estimate(root: str = ".") -> str:
    """Paper-scale training time from the benchmark's FLOP count per training image (FlopCounterMode, forward +
    backward) and an assumed GPU throughput: 300 epochs of CIFAR's 50k images."""
    b = read_json(os.path.join(root, "results/bench/bench.json"))
    return fill("gpu-estimate", tflops=ASSUMED_GPU_TFLOP_S, rows={
        r["config"]: r for r in b["rows"] if r["model"] == "ODE-ViT" and r["dtype"] == "fp32"
        and r["config"].startswith("paper")})


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
    "weights-table": weights_table, "cite": cite, "module-map": module_map, "gpu-estimate": gpu_estimate,
    **v2_pages.SECTIONS, **results_pages.SECTIONS, **exploratory_pages.SECTIONS, **plan1_pages.SECTIONS}

PAGES = ("README.md", "docs/v2.md", "docs/usage.md", "docs/results.md", "docs/pipeline.md", "docs/performance.md",
         "docs/exploratory.md", "docs/plan1.md")  # generated parts


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
    ap.add_argument("--record-run", type=float, metavar="T0", help="write results/run.json for a run started at T0")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--save-run-baseline", action="store_true", help=f"keep results/run.json (and its cells' "
                    f"medians) as {results_pages.RUN_BEFORE}: the run-time table's 'before'")
    args = ap.parse_args(argv)
    if args.save_run_baseline:
        rec = results_pages.save_run_baseline()
        print(f"{results_pages.RUN_BEFORE}: the run of commit {rec['commit']} ({rec['wall_s']:.0f} s) is the baseline")
        return 0
    if args.record_run is not None:
        results_pages.record_run(args.record_run)
        return 0
    if args.check:
        bad = stale(args.readme)
        if bad:
            print(f"stale sections {bad} (python -m odevit.repro.readme)", file=sys.stderr)
        return 1 if bad else 0
    write_pages()
    return 0


if __name__ == "__main__":
    sys.exit(main())
