"""The one page writer: the generated sections of README.md and the docs pages, and docs/paper.md, from the results
files and the plan, worded by the templates in docs/templates (data, not code).

    python -m odevit.repro.pages            # rewrite every <!-- NAME --> ... <!-- /NAME --> section of the PAGES
    python -m odevit.repro.pages --check    # exit 1 and name the sections that differ from the results files
    python -m odevit.repro.pages --paper    # docs/paper.md from odevit/repro/paper.yaml (the paper's numbers)

07_verdicts runs it; `--check` (and tests/test_cite.py) fail when a section is stale.
"""
from __future__ import annotations

import argparse
import ast
import glob
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import jinja2
import jinja2.ext
import pandas as pd

from .files import read_json, read_yaml, study_machines, write_text


TEMPLATES = Path(__file__).resolve().parents[2] / "docs" / "templates"


def na(x: Any) -> bool:
    """Missing: None or NaN (a blank CSV cell)."""
    return x is None or (pd.api.types.is_scalar(x) and bool(pd.isna(x)))


def pt(x: float, digits: int = 2) -> str:
    """A signed difference in pt to `digits` decimals, never a negative zero: -0.0013 is -0.001 (a decimal more
    where it rounds to zero), -0.0004 is 0.000 (unsigned where that rounds to zero too), zero is 0.00."""
    if x == 0:
        return f"{0:.{digits}f}"
    for d in (digits, digits + 1):
        s = f"{x:+.{d}f}"
        if float(s) != 0:
            return s
    return f"{0:.{digits + 1}f}"


def wrap(text: str, width: int = 118, indent: str = "") -> str:
    """Lines of at most `width` characters (hyphenated words kept whole), later lines indented by `indent`."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False))


class _Joined(jinja2.ext.Extension):
    """A line ending in a backslash continues on the next, whose indentation is dropped (long prose, short lines)."""

    def preprocess(self, source: str, name: Any, filename: Any = None) -> str:
        return re.sub(r"\\\n[ \t]*", "", source)


ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), trim_blocks=True, lstrip_blocks=True,
                         undefined=jinja2.StrictUndefined, autoescape=False, extensions=[_Joined])
ENV.filters.update(pt=pt, fmt=format, wrap=wrap, apply=lambda xs, f: [f(x) for x in xs],
                   interval=lambda r: "" if pd.isna(r.ci_low) else f" [{pt(r.ci_low)}, {pt(r.ci_high)}]")
ENV.tests["na"] = na


def fill(name: str, **context: Any) -> str:
    """docs/templates/NAME.md.j2 rendered with `context`, without the newlines around it."""
    return ENV.get_template(f"{name}.md.j2").render(**context).strip("\n")


WORDS: Dict[str, Any] = read_yaml(str(TEMPLATES / "words.yaml"))  # names printed for the results files' keys

PAPER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paper.yaml")
_DATA = read_yaml(PAPER_FILE)
SOURCES: Dict[str, str] = _DATA["sources"]
TLDR = SOURCES["tldr"]
# the authors' README results table (github.com/Bycarkos/ODE-ViT, README.md at b41824d); accuracies as fractions
TABLE = pd.DataFrame(_DATA["table"], columns=["Model", "Dataset", "Params (M)", "Losses", "Acc@1", "Acc@3", "Acc@5"])
# mean CLS exponent of the authors' two CIFAR-100 files (jasmin, no_jasmin; they also differ in CE supervision)
LYAPUNOV_C100: Dict[str, float] = _DATA["lyapunov_c100"]
ROWS: Dict[str, str] = _DATA["rows"]

# a value's op -> (the README table's column, the number of the two rows' x and y, its arithmetic)
OPS: Dict[str, Tuple[str, Callable[[float, float], float], str]] = {
    "diff_pt": ("Acc@1", lambda x, y: 100 * (x - y), "{x:.3f} − {y:.3f} = {v:+.1f} pt"),
    "rel": ("Acc@1", lambda x, y: 100 * (x / y - 1), "{x:.3f} / {y:.3f} − 1 = {v:+.1f} %"),
    "ratio": ("Acc@1", lambda x, y: x / y, "{x:.3f} / {y:.3f} = {v:.3f}"),
    "params_ratio": ("Params (M)", lambda x, y: x / y, "{x:g}M / {y:g}M = {v:.1f}x")}


def _term(op: str, t: List[str]) -> Tuple[float, str]:
    """(the number, its arithmetic) of a value's term [row, dataset, row, dataset(, tag)]: two README table cells, the
    rows named by paper.yaml `rows` (KeyError naming a row the table lacks)."""
    column, f, text = OPS[op]
    xy = []
    for model, dataset in ((ROWS[t[0]], t[1]), (ROWS[t[2]], t[3])):
        r = TABLE[(TABLE.Model == model) & (TABLE.Dataset == dataset)]
        if r.empty:
            raise KeyError(f"no README row ({model!r}, {dataset!r})")
        xy.append(float(r[column].iloc[0]))
    x, y = xy
    return round(f(x, y), 6), text.format(x=x, y=y, v=f(x, y))


def paper_value(spec: Optional[Dict[str, Any]]) -> Tuple[Optional[float], str]:
    """(the paper's number, its arithmetic) of a claim's `value` block of paper.yaml: the first term's result, every
    term shown ("LABEL: TAG arithmetic; TAG arithmetic"); (None, "") for a claim the paper gives no number for."""
    if not spec:
        return None, ""
    if spec["op"] == "lyapunov":
        a, b = LYAPUNOV_C100["jasmin"], LYAPUNOV_C100["no_jasmin"]
        return round(a - b, 6), f"{spec['label']}: {a:.4f} − {b:.4f} = {a - b:+.3f} {spec['note']}"
    if spec["op"] not in OPS:
        raise ValueError(f"{PAPER_FILE}: value.op '{spec['op']}' is not one of {sorted(OPS) + ['lyapunov']}")
    parts = [(t[4] if len(t) > 4 else "", _term(spec["op"], t)) for t in spec["terms"]]
    text = "; ".join(f"{tag} {arith}".strip() for tag, (_, arith) in parts)
    return parts[0][1][0], (f"{spec['label']}: {text}" if spec.get("label") else text)


@dataclass(frozen=True)
class Claim:
    """One claim of the paper (paper.yaml): what it says, its source, the direction predicted, the paper's number."""
    id: str
    statement: str
    source: str
    direction: str  # greater | less | equivalent | bound | fact | none
    statistic: str
    unit: str
    value: Optional[float] = None
    arithmetic: str = ""


DIRECTIONS = ("greater", "less", "equivalent", "bound", "fact", "none")


def _claim(c: Dict[str, Any]) -> Claim:
    if c.get("direction") not in DIRECTIONS:
        raise ValueError(f"{PAPER_FILE}: claim {c.get('id')}: direction '{c.get('direction')}' is not one of "
                         f"{DIRECTIONS}")
    value, arithmetic = paper_value(c.get("value"))
    return Claim(c["id"], c["statement"], c["source"].format(**SOURCES), c["direction"], c["statistic"], c["unit"],
                 value, arithmetic)


CLAIMS: Dict[str, Claim] = {c.id: c for c in map(_claim, _DATA["claims"])}


def markdown() -> str:
    """docs/paper.md (docs/templates/paper.md.j2): the README table, the claims, the Lyapunov files' numbers."""
    reg = pd.DataFrame([{"claim": f"`{c.id}`", "the claim": c.statement, "source": c.source,
                         "paper predicts": c.direction, "statistic (unit)": f"{c.statistic} ({c.unit})",
                         "paper's value": "–" if c.value is None else f"{c.value:.4g}",
                         "arithmetic": c.arithmetic or "–"} for c in CLAIMS.values()])
    return fill("paper", table=TABLE.astype(object).where(TABLE.notna(), "–").to_markdown(index=False),
                claims=reg.to_markdown(index=False), lyapunov=LYAPUNOV_C100) + "\n"


CLAIMS_FILE = "results/v2/claims.csv"
OURS = ("our extension", "not in the paper")  # words.yaml v2_claims paper_text of the claims that are ours
# the decided rows' headings (label, verdict, whether the claim is ours: read against our prediction, not the paper's)
DECIDED = [(f"{v.capitalize()} {whose}", v, ours) for v in ("supports", "contradicts")
           for whose, ours in (("the paper", False), ("our extension of it", True))]


def _prefix(q: str, table: Dict[str, Any]) -> Optional[str]:
    """The longest key of `table` that is question id `q` or begins it before an underscore; None if none does."""
    return next((k for k in sorted(table, key=len, reverse=True) if q == k or q.startswith(k + "_")), None)


def row_label(q: str) -> str:
    """Plan v2's question id in words (words.yaml v2_labels), as docs/v2.md and the notebooks name it."""
    key = _prefix(q, WORDS["v2_labels"])
    if key is None:
        return q
    who = WORDS["v2_who"].get(q[len(key) + 1:].split("_")[-1], "")
    return WORDS["v2_labels"][key] + (f", {who}" if who and key in WORDS["v2_step_questions"] else "")


def _read_claims(root: str, name: str = CLAIMS_FILE) -> Optional[pd.DataFrame]:
    """A claims.csv as the pages read it, or None (not written yet): `still_learning` "" where empty."""
    path = os.path.join(root, name)
    if not os.path.exists(path):
        return None
    return pd.read_csv(path, dtype={"still_learning": str}).fillna({"still_learning": ""})


def v2_verdicts(root: str = ".") -> str:
    """docs/v2.md: plan v2's rows in sentences, then the table (primary family first), its legend and figures."""
    c = _read_claims(root)
    if c is None:
        return fill("v2-verdicts", c=None)
    c = pd.concat([c[c.primary], c[~c.primary]])
    t = read_json(os.path.join(root, "results/v2/teacher/selected.json"))
    ours_of = {r["question"]: g["is_ours"] for g in claim_groups(c) for r in g["rows"]}
    learning = c[c.verdict.str.startswith("not converged")]
    waiting = c[c.verdict.str.startswith("not measured")]
    # made, on two machine kinds whose shift is not measured yet; bool: an empty object-typed mask selects columns
    shifted = waiting.verdict.map(awaits_shift).astype(bool)
    return fill("v2-verdicts", c=list(c.itertuples()), t=t, all_converged=all(t["converged"]), label=row_label,
                images=lambda r: budget_images(r.budget),
                decided=[(label, [r for r in c.itertuples() if r.verdict == v and ours_of[r.question] == ours])
                         for label, v, ours in DECIDED],
                learning=list(learning.itertuples()), rest=list(c[c.verdict == "inconclusive"].itertuples()),
                learning_cells=sorted({cell for s in learning.still_learning for cell in re.findall(r"(\S+) \d+/", s)}),
                waiting=list(waiting.itertuples()), families=list(dict.fromkeys(c.family)),
                shifted=list(waiting[shifted].itertuples()),
                two_kinds=list(c[c.machine_shift.notna()].itertuples()) if "machine_shift" in c else [],
                alphas=", ".join(f"{f.replace('v2_', '')} {a:.4g}"
                                 for f, a in c.groupby("family", sort=False).alpha_each.first().items()))


def awaits_shift(verdict: str) -> bool:
    """A "not measured yet (machine shift between A and B)" row: its runs are made, on two machine kinds."""
    return verdict.startswith("not measured") and "machine shift" in verdict


def budget_images(budget: str) -> int:
    """The training images of a claims.csv `budget` ("N images x E epochs", as verdicts writes it)."""
    return int(budget.split(" ")[0])


def _short(r: Dict[str, Any]) -> str:
    """A row's place within its claim's line: its budget, or its cell and N (words.yaml v2_short)."""
    key = _prefix(r["question"], WORDS["v2_short"])
    if key is None:
        return r["question"]
    who = WORDS["v2_who"].get(r["question"].split("_")[-1], "")
    return WORDS["v2_short"][key].format(images=f"{budget_images(r['budget']) // 1000}k", who=who)


def _word(r: Dict[str, Any]) -> str:
    """The row's verdict shortened for the table: "not converged (2 of 6)", "not measured yet (machine shift)"."""
    v = r["verdict"]
    if v.startswith("not converged"):
        return v.replace(" runs)", ")")
    if v.startswith("not measured"):
        return "not measured yet (machine shift)" if awaits_shift(v) else "not measured yet"
    return "unfair" if v.startswith("unfair") else v


def _ours(r: Dict[str, Any]) -> str:
    """A row in the claims table: where, its mean [interval] (none while its runs are still learning), its verdict."""
    mean = "" if pd.isna(r["mean"]) else f" {pt(r['mean'])}"
    ci = "" if not mean or r["verdict"].startswith("not converged") else f" [{pt(r['ci_low'])}, {pt(r['ci_high'])}]"
    return f"{_short(r)}{mean}{ci} *{_word(r)}*"


def claim_groups(c: pd.DataFrame) -> List[Dict[str, Any]]:
    """The claims of the README's table (words.yaml v2_claims), each with its claims.csv rows (as dicts), the paper's
    number (claims.csv paper_effect) or words, and `is_ours` (read against our prediction); every row in one claim."""
    c = c.set_index("question", drop=False)
    groups = []
    for g in WORDS["v2_claims"]:
        rows = [c.loc[q].to_dict() for q in g["rows"]]
        eff = rows[0]["paper_effect"]
        paper = (f"{eff:+.1f} pt ({g['paper_setting']})" if g.get("paper_setting") and not pd.isna(eff)
                 else g["paper_text"])
        groups.append(dict(g, rows=rows, paper=paper, is_ours=g.get("paper_text") in OURS))
    missing = set(c.question) - {r["question"] for g in groups for r in g["rows"]}
    if missing:
        raise ValueError(f"docs/templates/words.yaml v2_claims: rows of {CLAIMS_FILE} in no claim: {sorted(missing)}")
    return groups


def findings(c: pd.DataFrame, shown: str) -> str:
    """The README's claims that notebook `shown` ("outputs/03_budget.ipynb") shows, in sentences: its opening answer."""
    return fill("v2-findings", groups=[g for g in claim_groups(c) if g["shown"] == shown], short=_short, word=_word)


def v2_claims(root: str = ".", decided: bool = False) -> str:
    """Plan v2's claims with the paper's numbers and ours (docs/v2.md); `decided`: rows decided, why not (README)."""
    c = _read_claims(root)
    if c is None:
        return fill("v2-claims", c=None, decided=decided)
    c = c.set_index("question", drop=False)
    rows = [r.to_dict() for _, r in c.iterrows()]
    learning = [r for r in rows if r["verdict"].startswith("not converged")]
    groups = claim_groups(c)
    found = [f"{g['claim']}: " + ", ".join(f"{_short(r)} *{_word(r)}*" for r in g["rows"]
                                           if _word(r) in ("supports", "contradicts"))
             for g in groups if any(_word(r) in ("supports", "contradicts") for r in g["rows"])]
    return fill("v2-claims", c=c, groups=groups, ours=_ours, found=found, decided=decided,
                stem=lambda p: os.path.splitext(os.path.basename(p))[0],
                test_alone={v: sum(r["verdict_test"] == v for r in learning)
                            for v in ("supports", "contradicts", "inconclusive")},
                learning=learning,
                waiting=[r for r in rows if r["verdict"].startswith("not measured")], **_levels_and_margins(c),
                undecided=[r for r in rows if _word(r) in ("inconclusive", "unfair")])


def _levels_and_margins(c: pd.DataFrame) -> Dict[str, Any]:
    """The interval levels (highest first) and the equivalence and non-inferiority margins, for both keys."""
    return dict(levels=[f"{100 * (1 - a):.4g} %" for a in sorted(set(c.alpha_each), reverse=True)],
                margins=sorted({float(m) for m in c.margin[c.test == "equivalence"]}),
                ni_margins=sorted({round(float(m), 2) for m in c.margin[c.test == "non_inferiority"]}))


def v2_key(root: str = ".") -> str:
    """The claims table's key in full (README): the setting, the words, the intervals and the margins."""
    c = _read_claims(root)
    if c is None:
        return fill("v2-key", c=None)
    return fill("v2-key", c=c, t=read_json(os.path.join(root, "results/v2/teacher/selected.json")),
                seeds=" or ".join(str(n) for n in sorted({int(x) for x in c.seeds})),
                awaiting=any(map(awaits_shift, c.verdict)),  # a row waiting on the machine shift; unmade: on its runs
                unmade=any(v.startswith("not measured") and not awaits_shift(v) for v in c.verdict),
                **_levels_and_margins(c))


V3_CLAIMS = "results/v3/claims.csv"
V3_KEY = fill("v3-key")  # the v3 table's key (docs/templates/v3-key.md.j2)


def v3_progress(root: str = ".") -> List[Tuple[str, int, int, List[str]]]:
    """Per plan v3 study: (name, runs made, runs planned, its finished runs' machine types) from its run folders."""
    from . import plan as plan_mod

    studies = plan_mod.load(os.path.join(root, "params.yaml"), 3)["studies"]
    return [(name, sum(os.path.exists(os.path.join(root, "results/v3", name, c, f"s{x}", "metrics.json"))
                       for c in st["cells"] for x in st["seeds"]), len(st["cells"]) * len(st["seeds"]),
             study_machines(os.path.join(root, "results/v3", name))) for name, st in studies.items()]


def v3_table(c: pd.DataFrame) -> List[str]:
    """Plan v3's rows (claims.csv) as the lines of a table: the deciding interval beside each verdict."""
    lines = ["| row | training images | seeds | mean difference, pt | deciding interval | smallest effect / margin | "
             "verdict | against plan v2 |", "|---|---|---|---|---|---|---|---|"]
    for r in c.itertuples():
        bound = (f"δ {r.delta:g} pt" if r.test == "superiority" else f"±{r.margin:g} pt")
        decide = "–" if pd.isna(r.decide_low) else f"[{r.decide_low:+.2f}, {r.decide_high:+.2f}]"
        lines.append(f"| {row_label(r.question)} (`{r.question}`) | {budget_images(r.budget):,} | {r.n} of {r.seeds} | "
                     + (f"{pt(r.mean)} | {decide} ({r.level:.1%})" if not na(r.mean) and r.n >= 2 else "– | –")
                     + f" | {bound} | {_verdict(r)} | {r.against_v2} |")
    return lines


def v3_claims(root: str = ".") -> str:
    """The README's first results: how many of plan v3's runs are made, its decided rows, the others in one line."""
    prog = v3_progress(root)
    made, total = sum(p[1] for p in prog), sum(p[2] for p in prog)
    head = wrap((f"Plan v3's runs: all {total} made (" if made == total else
                 f"Plan v3's runs finished so far: {made} of {total} (") + ", ".join(f"{n} {a} of {b}" + (
        f", the rest on its machine type, {', '.join(m)}" if m and a < b else "") for n, a, b, m in prog)
        + (")." if made == total else "); `dvc repro` makes the rest, resumable.") + " Rows: [docs/v3.md](docs/v3.md).")
    c = _read_claims(root, V3_CLAIMS)
    if c is None:
        return head
    decided = c[c.verdict.isin(["supports", "contradicts"])]
    rest = c[~c.index.isin(decided.index)]  # each with its mean difference where two seeds or more are made
    others = "; ".join(f"`{r.question}`" + (f" {pt(r.mean)} pt" if r.n >= 2 and not na(r.mean) else "")
                       + f" {_verdict(r)}" for r in rest.itertuples())
    lines = [head, "", wrap(f"**Decided**: {len(decided)} of {len(c)} rows"
                            + (f"; the others (in docs/v3.md): {others}." if len(rest) else "."))]
    if len(decided):
        lines += [""] + v3_table(decided) + ["", wrap(V3_KEY)]
    return "\n".join(lines)


def _verdict(r: Any) -> str:
    """A plan v3 (or v2) row's verdict as the tables print it."""
    return f"*{r.verdict}*" + (" (gain below δ)" if getattr(r, "effect_vs_delta", "") == "gain below delta" else "")


def budget_glance(root: str = ".") -> str:
    """The README's first screen: each question of the plans' primary (headline) family once, its verdict and mean per
    budget from plan v3's row where plan v3 has one, else plan v2's (each cell names its plan)."""
    cells: Dict[str, Dict[int, str]] = {}
    for plan, c in ((2, _read_claims(root)), (3, _read_claims(root, V3_CLAIMS))):  # v3's row replaces v2's
        for r in (c[c.primary].itertuples() if c is not None else []):  # its mean where two seeds or more are made
            cells.setdefault(_prefix(r.question, WORDS["v2_labels"]), {})[budget_images(r.budget)] = _verdict(r) + (
                f" {pt(r.mean)}" if r.n >= 2 and not na(r.mean) else "") + f" (v{plan})"
    budgets = sorted({b for row in cells.values() for b in row})
    return "\n".join([" | ".join(["| mean difference, pt (plan)"] + [f"{b // 1000}k" for b in budgets]) + " |",
                      "|---" * (len(budgets) + 1) + "|"] + [" | ".join([f"| {row_label(q)}"] + [
                          row.get(b, "–") for b in budgets]) + " |" for q, row in cells.items()])


def v3_rows(root: str = ".") -> str:
    """docs/v3.md: every plan v3 row (results/v3/claims.csv), measured or waiting for its runs."""
    c = _read_claims(root, V3_CLAIMS)
    if c is None:
        return "No row is computed yet (notebook 07_verdicts writes results/v3/claims.csv)."
    return "\n".join(v3_table(c) + ["", wrap(V3_KEY)])


def _first_sentence(path: str) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = (ast.get_docstring(ast.parse(Path(path).read_text())) or "").strip()
    para = " ".join(doc.split("\n\n")[0].split())
    m = re.search(r"^.*?\.(?=\s+[A-Z`(]|$)", para)
    return (m.group(0) if m else para) or "(no docstring)"


def module_map(root: str = ".") -> str:
    """One line per module, from its docstring: the layer (odevit/) and the lab (odevit/repro/)."""
    return fill("module-map", packages=[(d, what, [(os.path.relpath(f, root), _first_sentence(f)) for f in
                                                   sorted(glob.glob(os.path.join(root, d, "*.py")))])
                                        for d, what in WORDS["packages"].items()])


def _weights_source(e: Dict[str, Any]) -> str:
    """The run a published tag came from (its weights/v2/manifest.json entry)."""
    if e.get("study"):
        c = e["converged_plan"]
        state = "converged" if c["converged"] else f"still learning at the LR floor: +{c['gain_floor_pts']:.2f} pt"
        return (f"plan v2 {e['study']} {e['cell']} s{e['seed']} (best validation of {len(e['seeds_compared'])} seeds; "
                f"{state})")
    return f"plan v2's teacher s{e['seed']} ({e['selection'].split(' (')[0]})"


def weights_table(root: str = ".") -> str:
    """One row per published tag (weights/v2): what `evaluate` gives, at N/2 too, and its run; then those pending."""
    path = os.path.join(root, "weights", "v2", "manifest.json")
    manifest = read_json(path) if os.path.isfile(path) else {"weights": {}}
    rows = []
    for tag, e in manifest["weights"].items():
        m = read_json(os.path.join(root, e["metrics_file"]))
        h = m.get("acc1_half_n")
        rows.append({"tag": f"`{tag}`", "what": e["description"], "Acc@1 (test)": f"{100 * e['metrics']['acc1']:.2f} %",
                     "at N/2": "–" if h is None else f"{100 * h:.2f} % (all {m.get('test_images', 0):,})",
                     "parameters": f"{e['parameters']:,}", "file": f"{e['bytes'] / 2**20:.2f} MiB",
                     "run": _weights_source(e), "metrics": f"`{e['metrics_file']}`"})
    pending = "".join(f"\n\n`{tag}`: not published yet, its runs still train ({why})."
                      for tag, why in manifest.get("pending", {}).items())
    return pd.DataFrame(rows).to_markdown(index=False) + pending


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
    "weights-table": weights_table, "cite": cite, "module-map": module_map, "v2-claims": v2_claims, "v2-key": v2_key,
    "v2-decided": lambda r: v2_claims(r, True), "v2-verdicts": v2_verdicts, "v3-claims": v3_claims, "v3-rows": v3_rows,
    "budget-glance": budget_glance}

PAGES = ("README.md", "docs/v2.md", "docs/v3.md", "docs/usage.md", "docs/pipeline.md")  # generated parts


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
        text = Path(root, page).read_text()
        for name in (n for n in SECTIONS if _pattern(n).search(text)):
            if name in where:
                raise ValueError(f"<!-- {name} --> is in both {where[name]} and {page}")
            where[name] = page
    missing = [n for n in SECTIONS if n not in where]
    if missing:
        raise ValueError(f"sections {missing} are on none of {list(PAGES)}")
    return where


def stale(readme: str = "README.md", root: str = ".") -> List[str]:
    """Names of the sections that differ from what the results files give (`readme` replaces README.md)."""
    out = []
    for name, page in placement(root).items():
        text = Path(readme if page == "README.md" else os.path.join(root, page)).read_text()
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
        text = Path(path).read_text()
        out = render(text, root, names, page)
        if out != text:
            write_text(out.rstrip("\n"), path)  # a page ends with one newline
            changed.append(page)
    return changed


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the pages' generated sections from the results files")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--paper", action="store_true", help="write docs/paper.md from odevit/repro/paper.yaml")
    args = ap.parse_args(argv)
    if args.paper:
        write_text(markdown().rstrip("\n"), "docs/paper.md")  # write_text ends the file with one newline
        return 0
    if args.check:
        bad = stale(args.readme)
        if bad:
            print(f"stale sections {bad} (python -m odevit.repro.pages)", file=sys.stderr)
        return 1 if bad else 0
    write_pages()
    return 0


if __name__ == "__main__":
    sys.exit(main())
