"""The one page writer: the generated sections of README.md and the docs pages, and docs/paper.md, from the results
files and the plan, worded by the templates in docs/templates (data, not code).

    python -m odevit.repro.pages            # rewrite every <!-- NAME --> ... <!-- /NAME --> section of the PAGES
    python -m odevit.repro.pages --check    # exit 1 and name the sections that differ from the results files
    python -m odevit.repro.pages --paper    # docs/paper.md from odevit/repro/paper.yaml (the paper's numbers)

07_verdicts runs it; tests/test_cite.py and `--check` fail when a section is stale. In this file, in order: the wording
(templates, formatters), the paper's numbers and claims (`TABLE`, `CLAIMS`, from paper.yaml), the plan's sections (the
README's claims table, docs/v2.md's rows), and the README's own sections with the page loop.
"""
from __future__ import annotations

import argparse
import ast
import glob
import math
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
import yaml

from .files import read_json, read_yaml, write_text


TEMPLATES = Path(__file__).resolve().parents[2] / "docs" / "templates"


def na(x: Any) -> bool:
    """Missing: None or NaN (a blank CSV cell)."""
    return x is None or (pd.api.types.is_scalar(x) and bool(pd.isna(x)))


def num(x: float, signed: bool = False, digits: int = 3) -> str:
    return f"{x:+.{digits}g}" if signed else f"{x:.{digits}g}"


def pt(x: float, digits: int = 2) -> str:
    """A signed difference in pt to `digits` decimals; one that rounds to zero gets one more decimal (-0.0013 is
    -0.001, never "-0.00"), one that rounds to zero at that too is unsigned (-0.0004 is 0.000, never "-0.000"), and
    zero itself is 0.00: a reader never sees a negative zero."""
    if x == 0:
        return f"{0:.{digits}f}"
    for d in (digits, digits + 1):
        s = f"{x:+.{d}f}"
        if float(s) != 0:
            return s
    return f"{0:.{digits + 1}f}"


def interval(lo: float, hi: float) -> str:
    """' [lo, hi]' signed, or '' where there is no interval (a row of one seed)."""
    return "" if pd.isna(lo) else f" [{pt(lo)}, {pt(hi)}]"


def ci(lo: float, hi: float, signed: bool, digits: int = 3) -> str:
    return "–" if pd.isna(lo) else f"[{num(lo, signed, digits)}, {num(hi, signed, digits)}]"


def dash(x: Any, spec: str) -> str:
    """`x` formatted by `spec`, or – where it is missing."""
    return "–" if na(x) else format(x, spec)


def wrap(text: str, width: int = 118, indent: str = "") -> str:
    """Lines of at most `width` characters (hyphenated words kept whole), later lines indented by `indent`."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent=indent, break_on_hyphens=False))


class _Joined(jinja2.ext.Extension):
    """A line ending in a backslash continues on the next, whose indentation is dropped (long prose, short lines;
    an error names the line of the joined text)."""

    def preprocess(self, source: str, name: Any, filename: Any = None) -> str:
        return re.sub(r"\\\n[ \t]*", "", source)


ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), trim_blocks=True, lstrip_blocks=True,
                         undefined=jinja2.StrictUndefined, autoescape=False, extensions=[_Joined])
ENV.filters.update(num=num, pt=pt, ci=ci, dash=dash, fmt=format, wrap=wrap, interval=lambda r: interval(r.ci_low, r.ci_high),
                   apply=lambda xs, f: [f(x) for x in xs])
ENV.tests["na"] = na


def fill(name: str, **context: Any) -> str:
    """docs/templates/NAME.md.j2 rendered with `context`, without the newlines around it."""
    return ENV.get_template(f"{name}.md.j2").render(**context).strip("\n")


WORDS: Dict[str, Any] = read_yaml(str(TEMPLATES / "words.yaml"))  # names printed for the results files' keys


PAPER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paper.yaml")


def _load(path: str = PAPER_FILE) -> Dict[str, Any]:
    with open(path) as f:
        return yaml.safe_load(f)


_DATA = _load()
SOURCES: Dict[str, str] = _DATA["sources"]
README_TABLE, ABSTRACT, TLDR = SOURCES["readme_table"], SOURCES["abstract"], SOURCES["tldr"]
LYAPUNOV_FILES, CODE = SOURCES["lyapunov_files"], SOURCES["code"]

# the authors' README results table (github.com/Bycarkos/ODE-ViT, README.md at b41824d); accuracies as fractions
TABLE = pd.DataFrame(_DATA["table"], columns=["Model", "Dataset", "Params (M)", "Losses", "Acc@1", "Acc@3", "Acc@5"])

# mean CLS exponent of the two CIFAR-100 files the authors ship (with JaSMin: "1-Attention_L1"; without:
# "NO_JASMIN_add_supervision_at_the_end"; 10,000 test images each; the two runs also differ in CE supervision)
LYAPUNOV_C100: Dict[str, float] = _DATA["lyapunov_c100"]
ROWS: Dict[str, str] = _DATA["rows"]
TEACHER, FREE, SMALL, BASE = ROWS["teacher"], ROWS["free"], ROWS["small"], ROWS["base"]


def acc1(model: str, dataset: str) -> float:
    """Acc@1 of one row of the authors' README table (KeyError naming the row if absent)."""
    r = TABLE[(TABLE.Model == model) & (TABLE.Dataset == dataset)]
    if r.empty:
        raise KeyError(f"no README row ({model!r}, {dataset!r})")
    return float(r["Acc@1"].iloc[0])


def params_m(model: str, dataset: str = "cifar10") -> float:
    r = TABLE[(TABLE.Model == model) & (TABLE.Dataset == dataset)]
    return float(r["Params (M)"].iloc[0])


def _pair(t: List[str]) -> Tuple[Tuple[str, str], Tuple[str, str]]:
    return (ROWS[t[0]], t[1]), (ROWS[t[2]], t[3])


def _diff_pt(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = acc1(*a), acc1(*b)
    return round(100 * (x - y), 6), f"{x:.3f} − {y:.3f} = {100 * (x - y):+.1f} pt"


def _rel(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = acc1(*a), acc1(*b)
    return round(100 * (x / y - 1), 6), f"{x:.3f} / {y:.3f} − 1 = {100 * (x / y - 1):+.1f} %"


def _ratio(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = acc1(*a), acc1(*b)
    return round(x / y, 6), f"{x:.3f} / {y:.3f} = {x / y:.3f}"


def _params_ratio(a: Tuple[str, str], b: Tuple[str, str]) -> Tuple[float, str]:
    x, y = params_m(*a), params_m(*b)
    return round(x / y, 6), f"{x:g}M / {y:g}M = {x / y:.1f}x"


OPS: Dict[str, Callable[[Tuple[str, str], Tuple[str, str]], Tuple[float, str]]] = {
    "diff_pt": _diff_pt, "rel": _rel, "ratio": _ratio, "params_ratio": _params_ratio}


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
    parts = [(t[4] if len(t) > 4 else "", OPS[spec["op"]](*_pair(t))) for t in spec["terms"]]
    text = "; ".join(f"{tag} {arith}".strip() for tag, (_, arith) in parts)
    return parts[0][1][0], (f"{spec['label']}: {text}" if spec.get("label") else text)


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: what the paper says, where a reader can check it, which way the paper predicts our
    statistic to fall (greater / less than `null`, equivalent within the margin, fact, none = not a claim), the
    statistic and its unit, and the paper's own number with the arithmetic that gives it (None if it gives none)."""
    id: str
    statement: str
    source: str
    direction: str  # greater | less | equivalent | bound | fact | none
    statistic: str
    unit: str
    value: Optional[float] = None
    arithmetic: str = ""
    family: bool = False  # member of the ablation family (Holm-adjusted)
    per_unit: bool = False  # a per-seed correlation over a handful of units: each seed's test over them gates it

    @property
    def paper(self) -> str:
        """The `paper` column of claims.csv: the paper's number with its arithmetic (its source is the `source`
        column), or "no number"."""
        return self.arithmetic or "no number"


DIRECTIONS = ("greater", "less", "equivalent", "bound", "fact", "none")


def _claim(c: Dict[str, Any]) -> Claim:
    if c.get("direction") not in DIRECTIONS:
        raise ValueError(f"{PAPER_FILE}: claim {c.get('id')}: direction '{c.get('direction')}' is not one of "
                         f"{DIRECTIONS}")
    value, arithmetic = paper_value(c.get("value"))
    return Claim(c["id"], c["statement"], c["source"].format(**SOURCES), c["direction"], c["statistic"], c["unit"],
                 value, arithmetic, bool(c.get("family", False)), bool(c.get("per_unit", False)))


CLAIMS: Dict[str, Claim] = {c.id: c for c in map(_claim, _DATA["claims"])}


def claim(cid: str) -> Claim:
    if cid not in CLAIMS:
        raise KeyError(f"paper.CLAIMS has no claim {cid!r}: one of {sorted(CLAIMS)}")
    return CLAIMS[cid]


def registry() -> pd.DataFrame:
    """The registry as a table (docs/paper.md mirrors it)."""
    return pd.DataFrame([{"claim": c.id, "statement": c.statement, "source": c.source, "direction": c.direction,
                          "statistic": c.statistic, "unit": c.unit, "paper_value": c.value, "arithmetic": c.arithmetic}
                         for c in CLAIMS.values()])


HEADER = """# The paper's numbers and claims, with verifiable sources

ODE-ViT (Boned Riera, Romero Sánchez, Ramos Terrades; arXiv 2511.16501v1, Nov 2025); official code
github.com/Bycarkos/ODE-ViT (README and code read at b41824d). Generated from `odevit/repro/paper.yaml`
(`python -m odevit.repro.pages --paper`; tests/test_pages.py checks this file equals it). The plan's questions
(params.yaml `studies.*.questions[].paper`) quote these numbers with the same sources.

**What can be checked.** The paper's body (its sections, tables, equations) was not available to us. A reader can
check: the **abstract** and the **Fig. 1 caption** (arxiv.org/abs/2511.16501), the **summary (sciencestack TL;DR)**
(sciencestack.ai/paper/2511.16501, AI-written), and the authors' repository: the **authors' README table**, the
**authors' code** (file named where it matters) and the **authors' Lyapunov data files** (`lyapunov_results/`).
No section number is cited, because none can be checked.

Quoted from the abstract: the ODE system "satisfies the conditions for well-posed and stable dynamics"; ODE-ViT is
"stable, interpretable, and competitive … with up to one order of magnitude fewer parameters"; the teacher–student
framework "improves performance by more than 10% compared to training a free ODE-ViT from scratch". Quoted from the
summary (sciencestack TL;DR): "enforce local Lipschitz continuity and use center normalization", "Lie–Trotter based
decomposition splits the attention block into learnable subflows", "MSE and JaSMin losses", "robustness to step
count". Proposition 1 (an Euler error bound) is named by the summaries; its statement is reconstructed from the
authors' code (`compute_upper_bound_by_fininte_difference`, L = 1/2): ||X_N − X(1)|| <= (e^L − 1)/(2 L N) ·
sup ||X''||.
"""

TABLE_NOTE = """
Acc@k: top-k accuracy on the test split (the authors' code selects the checkpoint on it). "Small" = MLP ratio 1
(3.8M), "Base" = MLP ratio 4 (7M), both counted as total trainable parameters. The Small rows and the CIFAR-10 /
ImageNet-100 Base rows are label-free (MSE + JaSMin); only the CIFAR-100 Base row adds CE.
"""

LYAPUNOV_NOTE = f"""
## Authors' Lyapunov data files

Mean CLS finite-time Lyapunov exponent over the 10,000 CIFAR-100 test images of the two files the authors ship:
with JaSMin ("…1-Attention_L1") {LYAPUNOV_C100['jasmin']}, without ("…NO_JASMIN_add_supervision_at_the_end")
{LYAPUNOV_C100['no_jasmin']}. The two runs also differ in CE supervision: not a clean ablation.
"""


def markdown() -> str:
    """docs/paper.md: the README table, the claim registry (source, predicted direction, the paper's number and its
    arithmetic), the Lyapunov files' numbers."""
    t = TABLE.astype(object).where(TABLE.notna(), "–")
    reg = pd.DataFrame([{"claim": f"`{c.id}`", "the claim": c.statement, "source": c.source,
                         "paper predicts": c.direction, "statistic (unit)": f"{c.statistic} ({c.unit})",
                         "paper's value": "–" if c.value is None else f"{c.value:.4g}",
                         "arithmetic": c.arithmetic or "–"} for c in CLAIMS.values()])
    return (HEADER + "\n## Authors' README table\n\n" + t.to_markdown(index=False) + "\n" + TABLE_NOTE
            + "\n## The paper's claims\n\n"
            "Direction: greater / less = the paper predicts the statistic above / below the null (0 for a "
            "difference; for retention, non-inferiority: above the paper's ratio minus a margin); equivalent = "
            "inside ± a margin of the null (the plan's questions set their margins, with the reason); fact = a fixed quantity "
            "(no test); bound = Proposition 1 (can fail: any error above the bound contradicts it; a bound whose median "
            "tightness, bound / error over the (image, step) pairs, is >= 10 in some seed holds, vacuous); none = not a claim of the paper.\n\n"
            + reg.to_markdown(index=False) + "\n" + LYAPUNOV_NOTE)




CLAIMS_FILE = "results/v2/claims.csv"
OURS = ("our extension", "not in the paper")  # words.yaml v2_claims paper_text of the claims that are ours
# the decided rows' headings (label, verdict, whether the claim is ours): a row of a claim the paper does not make (our
# extension, our remedy) is read against our prediction, not the paper's
DECIDED = [(f"{v.capitalize()} {whose}", v, ours) for v in ("supports", "contradicts")
           for whose, ours in (("the paper", False), ("our extension of it", True))]


def _v2_label(q: str) -> str:
    """Plan v2's question id in words (docs/templates/words.yaml v2_labels, the longest matching prefix)."""
    labels = WORDS["v2_labels"]
    for key in sorted(labels, key=len, reverse=True):
        if q == key or q.startswith(key + "_"):
            who = WORDS["v2_who"].get(q[len(key) + 1:].split("_")[-1], "")
            return labels[key] + (f", {who}" if who and key in WORDS["v2_step_questions"] else "")
    return q


def _read_claims(path: str) -> pd.DataFrame:
    """results/v2/claims.csv as both pages read it: `still_learning` "" where no run is still learning, and a
    `teacher_minus_free` column of NaN in a file from before the fairness check."""
    c = pd.read_csv(path)
    c["still_learning"] = c.still_learning.fillna("")
    if "teacher_minus_free" not in c:
        c["teacher_minus_free"] = math.nan
    return c


def _learning_parts(still_learning: str) -> List[Tuple[str, str, str]]:
    """(cell, k, n) of each part of a claims.csv `still_learning` value, as verdicts writes it ("ref 2/6, ce 1/6":
    k of the cell's n runs still learning); none for ""."""
    parts = []
    for part in filter(None, still_learning.split(", ")):
        cell, frac = part.split(" ")
        k, n = frac.split("/")
        parts.append((cell, k, n))
    return parts


def v2_verdicts(root: str = ".") -> str:
    """Plan v2's rows (results/v2/claims.csv, `python -m odevit.repro.verdicts`): what they say in sentences, then
    the table (primary family first) with its legend, one figure per family."""
    path = os.path.join(root, CLAIMS_FILE)
    if not os.path.exists(path):
        return fill("v2-verdicts", c=None)
    c = _read_claims(path)
    c = pd.concat([c[c.primary], c[~c.primary]])
    t = read_json(os.path.join(root, "results/v2/teacher/selected.json"))
    ours_of = {r["question"]: g["is_ours"] for g in claim_groups(c) for r in g["rows"]}
    learning = c[c.verdict.str.startswith("not converged")]
    waiting = c[c.verdict.str.startswith("not measured")]
    # made, on two machine kinds whose shift is not measured yet; bool even when empty (an empty object-typed mask would
    # select columns, not rows)
    shifted = waiting.verdict.map(awaits_shift).astype(bool)
    unmade = waiting[~shifted]
    return fill("v2-verdicts", c=list(c.itertuples()), t=t, all_converged=all(t["converged"]), label=_v2_label,
                images=lambda r: budget_images(r.budget),
                decided=[(label, [r for r in c.itertuples() if r.verdict == v and ours_of[r.question] == ours])
                         for label, v, ours in DECIDED],
                learning=list(learning.itertuples()), rest=list(c[c.verdict == "inconclusive"].itertuples()),
                learning_cells=sorted({cell for s in learning.still_learning for cell, _, _ in _learning_parts(s)}),
                waiting=list(waiting.itertuples()), families=list(dict.fromkeys(c.family)),
                waiting_studies=", ".join(sorted({f"{q.study} ({q.seeds} seeds)" for q in unmade.itertuples()})),
                in_progress=sorted(p for q in set(unmade.study) for p in _resume_files(root, q)),
                shifted=list(waiting[shifted].itertuples()),
                two_kinds=list(c[c.machine_shift.notna()].itertuples()) if "machine_shift" in c else [],
                alphas=", ".join(f"{f.replace('v2_', '')} {a:.4g}"
                                 for f, a in c.groupby("family", sort=False).alpha_each.first().items()))


def _resume_files(root: str, study: str) -> List[str]:
    """The resume files (last.pt of each cell group, `odevit.repro.fast`) of a study still training that git holds
    (`git ls-files`): a local file of a run in progress elsewhere is not what a reader of the committed page gets."""
    import subprocess

    try:
        r = subprocess.run(["git", "-C", root, "ls-files", "--", f"checkpoints/v2/{study}"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted(f for f in r.stdout.split() if f.endswith("/last.pt")) if r.returncode == 0 else []


def awaits_shift(verdict: str) -> bool:
    """A "not measured yet" row whose runs are made, on two machine kinds whose shift is not measured yet (verdicts
    writes "not measured yet (machine shift between A and B)"), not one whose runs are missing."""
    return verdict.startswith("not measured") and "machine shift" in verdict


def budget_images(budget: str) -> int:
    """The training images of a claims.csv `budget` ("N images x E epochs", as verdicts writes it)."""
    return int(budget.split(" ")[0])


def _short(r: Dict[str, Any]) -> str:
    """A row's place within its claim's line: its budget, or its cell and N (words.yaml v2_short)."""
    images = budget_images(r["budget"])
    for key in sorted(WORDS["v2_short"], key=len, reverse=True):
        if r["question"] == key or r["question"].startswith(key + "_"):
            who = WORDS["v2_who"].get(r["question"].split("_")[-1], "")
            return WORDS["v2_short"][key].format(images=f"{images // 1000}k", who=who)
    return r["question"]


def _word(r: Dict[str, Any]) -> str:
    """The row's verdict as results/v2/claims.csv says it, shortened for the table: "not converged (2 of 6)" (runs:
    the legend says so), "not measured yet" (its seed count is in docs/v2.md), "not measured yet (machine shift)"
    (its runs are made, on two machine kinds whose shift is not measured yet)."""
    v = r["verdict"]
    if v.startswith("not converged"):
        return v.replace(" runs)", ")")
    if v.startswith("not measured"):
        return "not measured yet (machine shift)" if awaits_shift(v) else "not measured yet"
    return "unfair" if v.startswith("unfair") else v


def _ours(r: Dict[str, Any]) -> str:
    """A row in the claims table: where, its mean [interval] and its verdict; a row whose runs are still learning
    gives its mean without the interval (no verdict is read from it; docs/v2.md and the notebooks give it)."""
    if pd.isna(r["mean"]):
        return f"{_short(r)} *{_word(r)}*"
    if r["verdict"].startswith("not converged"):
        return f"{_short(r)} {pt(r['mean'])} *{_word(r)}*"
    return f"{_short(r)} {pt(r['mean'])} [{pt(r['ci_low'])}, {pt(r['ci_high'])}] *{_word(r)}*"


def claim_groups(c: pd.DataFrame) -> List[Dict[str, Any]]:
    """The claims of the README's table (words.yaml v2_claims), each with its claims.csv rows (as dicts) and the
    paper's number (params.yaml's, via claims.csv paper_effect) or words, and whether the claim is ours (`is_ours`:
    an extension of the paper or our remedy, read against our prediction); every row of `c` in exactly one claim."""
    c = c.set_index("question", drop=False)
    groups = []
    for g in WORDS["v2_claims"]:
        rows = [c.loc[q].to_dict() for q in g["rows"]]
        eff = rows[0]["paper_effect"]
        paper = f"{eff:+.1f} pt ({g['paper_setting']})" if g.get("paper_setting") and not pd.isna(eff) else g["paper_text"]
        groups.append(dict(g, rows=rows, paper=paper, is_ours=g.get("paper_text") in OURS))
    missing = set(c.question) - {r["question"] for g in groups for r in g["rows"]}
    if missing:
        raise ValueError(f"docs/templates/words.yaml v2_claims: rows of {CLAIMS_FILE} in no claim: {sorted(missing)}")
    return groups


def findings(c: pd.DataFrame, shown: str) -> str:
    """The README's claims whose rows notebook `shown` (e.g. "outputs/03_budget.ipynb") shows, as sentences: the
    claim in the README's words, the paper's number, then each row's mean difference, interval and verdict from
    claims.csv (docs/templates/v2-findings.md.j2): what a reader who arrives from the README's table finds at the top
    of the notebook."""
    groups = [g for g in claim_groups(c) if g["shown"] == shown]
    return fill("v2-findings", groups=groups, short=_short, word=_word)


def _blocking(learning: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The cells whose runs still learning keep rows from a verdict (claims.csv `still_learning`, e.g. "ref 2/6"),
    each with its budget and how many of the not-converged rows it holds back, most first: a reader sees that most of
    them wait on the same few seeds."""
    words = {**WORDS["v2_who"], **WORDS["cells"]}
    held: Dict[str, int] = {}
    for r in learning:
        for cell, k, m in _learning_parts(r["still_learning"]):
            key = f"{budget_images(r['budget']) // 1000}k {words.get(cell, cell)} {k} of {m}"
            held[key] = held.get(key, 0) + 1
    return [dict(cell=key, rows=n) for key, n in sorted(held.items(), key=lambda kv: -kv[1])]


def v2_claims(root: str = ".") -> str:
    """The README's claims table: how many rows have no verdict yet and why (and what the test alone would read for
    those still learning: claims.csv verdict_test); then per claim (words.yaml v2_claims) the paper's number
    (params.yaml's, via claims.csv paper_effect) or words, our rows' means with intervals and their verdicts at each
    budget, and the notebook that shows them: each claim once."""
    path = os.path.join(root, CLAIMS_FILE)
    if not os.path.exists(path):
        return fill("v2-claims", c=None)
    c = _read_claims(path).set_index("question", drop=False)
    rows = [r.to_dict() for _, r in c.iterrows()]
    learning = [r for r in rows if r["verdict"].startswith("not converged")]
    groups = claim_groups(c)
    found = [f"{g['claim']}: " + ", ".join(f"{_short(r)} *{_word(r)}*" for r in g["rows"]
                                           if _word(r) in ("supports", "contradicts"))
             for g in groups if any(_word(r) in ("supports", "contradicts") for r in g["rows"])]
    return fill("v2-claims", c=c, groups=groups, ours=_ours, found=found,
                stem=lambda p: os.path.splitext(os.path.basename(p))[0],
                test_alone={v: sum(r["verdict_test"] == v for r in learning) for v in ("supports", "contradicts", "inconclusive")},
                learning=learning, blocking=_blocking(learning),
                waiting=[r for r in rows if r["verdict"].startswith("not measured")], **_levels_and_margins(c),
                undecided=[r for r in rows if _word(r) in ("inconclusive", "unfair")])


def _levels_and_margins(c: pd.DataFrame) -> Dict[str, Any]:
    """The interval levels (1 - alpha per row, highest first) and the margins of claims.csv's equivalence and
    non-inferiority rows, for the claims table's short key and the full key."""
    return dict(levels=[f"{100 * (1 - a):.4g} %" for a in sorted(set(c.alpha_each), reverse=True)],
                margins=sorted({float(m) for m in c.margin[c.test == "equivalence"]}),
                ni_margins=sorted({round(float(m), 2) for m in c.margin[c.test == "non_inferiority"]}))


def v2_key(root: str = ".") -> str:
    """The claims table's key in full (README, after the snippets): the setting, the words, the intervals and the
    margins of results/v2/claims.csv."""
    path = os.path.join(root, CLAIMS_FILE)
    if not os.path.exists(path):
        return fill("v2-key", c=None)
    c = pd.read_csv(path)
    return fill("v2-key", c=c, t=read_json(os.path.join(root, "results/v2/teacher/selected.json")),
                seeds=" or ".join(str(n) for n in sorted({int(x) for x in c.seeds})),
                awaiting=any(awaits_shift(v) for v in c.verdict),  # the *machine shift* case, where a row is in it
                **_levels_and_margins(c))


row_label = _v2_label  # the same words for the notebooks (odevit.repro.figures)

V3_CLAIMS = "results/v3/claims.csv"


def v3_progress(root: str = ".") -> List[Tuple[str, int, int]]:
    """Per plan v3 study: (name, runs made, runs planned) from the run folders (metrics.json)."""
    from . import plan as plan_mod

    plan = plan_mod.load(os.path.join(root, "params.yaml"), 3)
    out = []
    for name, st in plan["studies"].items():
        made = sum(os.path.exists(os.path.join(root, "results/v3", name, c, f"s{x}", "metrics.json"))
                   for c in st["cells"] for x in st["seeds"])
        out.append((name, made, len(st["cells"]) * len(st["seeds"])))
    return out


def v3_table(c: pd.DataFrame) -> List[str]:
    lines = ["| row | training images | seeds | mean difference, pt | deciding interval | smallest effect / margin | "
             "verdict | against plan v2 |", "|---|---|---|---|---|---|---|---|"]
    for r in c.itertuples():
        bound = (f"δ {r.delta:g} pt" if r.test == "superiority" else f"±{r.margin:g} pt")
        measured = not na(r.mean) and r.n >= 2
        lines.append(f"| {_v2_label(r.question)} (`{r.question}`) | {budget_images(r.budget):,} | {r.n} of {r.seeds} | "
                     + (f"{pt(r.mean)} | {ci(r.decide_low, r.decide_high, True, 2)} ({r.level:.1%})" if measured
                        else "– | –") + f" | {bound} | *{r.verdict}*"
                     + (" (gain below δ: not the claim's size)" if getattr(r, "effect_vs_delta", "") == "gain below delta"
                        else "") + f" | {r.against_v2} |")
    return lines


V3_KEY = ("*Deciding interval*: the paired-t interval at 1 − 2α (α = 0.05 / the rows of its family) that the plan's "
          "rules decide on. *supports*: it lies above 0 (\"beats\" rows) or inside ±margin (\"robust\" rows); "
          "*contradicts*: it lies below the smallest effect of interest δ (any gain is smaller than δ) or outside "
          "±margin; *inconclusive*: neither; *unsettled*: a run still learning could flip the row (by how much is "
          "given); *unfair*: the teacher is not above the free ODE at that budget; *not measured yet*: some of its "
          "runs are not finished (the numbers are those of the seeds made). Rules, δ and seeds: "
          "[docs/plan.md](docs/plan.md#plan-v3).")


def v3_claims(root: str = ".") -> str:
    """The README's first results: how many of plan v3's runs are made and its rows that decided (or that the learning
    left could still flip), each with its deciding interval and what it says of the plan v2 row it replicates; every
    row: docs/v3.md (v3_rows)."""
    prog = v3_progress(root)
    made, total = sum(p[1] for p in prog), sum(p[2] for p in prog)
    head = wrap(f"Plan v3's runs finished so far: {made} of {total} (groups still training not counted; " + ", ".join(f"{n} {a} of {b}" for n, a, b in prog)
                + "); `dvc repro` makes the rest, resumable, each study on one machine type. Every row, made or not: "
                "[docs/v3.md](docs/v3.md).")
    path = os.path.join(root, V3_CLAIMS)
    if not os.path.exists(path):
        return head
    c = _read_claims(path)
    shown = c[c.verdict.isin(["supports", "contradicts", "inconclusive"]) | c.verdict.str.startswith("unsettled")]
    decided = c[c.verdict.isin(["supports", "contradicts"])]
    lines = [head, "", f"**Decided**: {len(decided)} of {len(c)} rows"
             + (f"; {len(shown) - len(decided)} measured without a verdict." if len(shown) > len(decided) else ".")]
    if len(shown):
        lines += [""] + v3_table(shown) + ["", wrap(V3_KEY)]
    return "\n".join(lines)


def v3_rows(root: str = ".") -> str:
    """docs/v3.md: every plan v3 row (results/v3/claims.csv), measured or waiting for its runs."""
    path = os.path.join(root, V3_CLAIMS)
    if not os.path.exists(path):
        return "No row is computed yet (notebook 07_verdicts writes results/v3/claims.csv)."
    return "\n".join(v3_table(_read_claims(path)) + ["", wrap(V3_KEY)])


PLAN_SECTIONS: Dict[str, Callable[[str], str]] = {"v2-claims": v2_claims, "v2-key": v2_key, "v2-verdicts": v2_verdicts,
                                                  "v3-claims": v3_claims, "v3-rows": v3_rows}


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
    "weights-table": weights_table, "cite": cite, "module-map": module_map, **PLAN_SECTIONS}

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
