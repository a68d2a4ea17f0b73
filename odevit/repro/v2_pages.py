"""Plan v2's sections: the README's claims table (one line per claim of the paper, its rows' means and verdicts, the
notebook that shows them) and docs/v2.md's table of every row; both read results/v2/claims.csv (`python -m
odevit.repro.verdicts2`) and results/v2/teacher/selected.json, the wording from docs/templates (v2-claims, v2-verdicts)
and words.yaml (v2_claims, v2_labels, v2_short)."""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Tuple

import pandas as pd

from .wording import WORDS, fill, pt, read_json

CLAIMS = "results/v2/claims.csv"
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


def _v2_against(v2: str, p1: Any) -> str:
    """What plan v2's verdict did to plan 1's (computed from the two, never typed)."""
    if pd.isna(p1):
        return "new"
    if v2 not in ("supports", "contradicts", "inconclusive"):
        return "open"
    if p1 not in ("supports", "contradicts", "inconclusive"):
        return "new verdict"
    return "replicated" if v2 == p1 else ("overturned" if {v2, p1} == {"supports", "contradicts"} else "changed")


def _read_claims(path: str) -> pd.DataFrame:
    """results/v2/claims.csv as both pages read it: `still_learning` "" where no run is still learning, and a
    `teacher_minus_free` column of NaN in a file from before the fairness check."""
    c = pd.read_csv(path)
    c["still_learning"] = c.still_learning.fillna("")
    if "teacher_minus_free" not in c:
        c["teacher_minus_free"] = math.nan
    for k in ("plan1_verdict", "plan1_differs"):  # plan 1 is retired (docs/history.md): no row compares with it
        if k not in c:
            c[k] = math.nan
    return c


def _learning_parts(still_learning: str) -> List[Tuple[str, str, str]]:
    """(cell, k, n) of each part of a claims.csv `still_learning` value, as verdicts2 writes it ("ref 2/6, ce 1/6":
    k of the cell's n runs still learning); none for ""."""
    parts = []
    for part in filter(None, still_learning.split(", ")):
        cell, frac = part.split(" ")
        k, n = frac.split("/")
        parts.append((cell, k, n))
    return parts


def v2_verdicts(root: str = ".") -> str:
    """Plan v2's rows (results/v2/claims.csv, `python -m odevit.repro.verdicts2`): what they say in sentences, then
    the table (primary family first) with its legend, one figure per family."""
    path = os.path.join(root, CLAIMS)
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
                against=_v2_against, images=lambda r: budget_images(r.budget),
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
    """A "not measured yet" row whose runs are made, on two machine kinds whose shift is not measured yet (verdicts2
    writes "not measured yet (machine shift between A and B)"), not one whose runs are missing."""
    return verdict.startswith("not measured") and "machine shift" in verdict


def budget_images(budget: str) -> int:
    """The training images of a claims.csv `budget` ("N images x E epochs", as verdicts2 writes it)."""
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
    paper's number (plan_v2.yaml's, via claims.csv paper_effect) or words, and whether the claim is ours (`is_ours`:
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
        raise ValueError(f"docs/templates/words.yaml v2_claims: rows of {CLAIMS} in no claim: {sorted(missing)}")
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
    """The README's findings and claims table: the rows that decided (supports, contradicts) in words, with the same
    claim's other rows; how many have no verdict yet and why (and what the test alone would read for those still
    learning: claims.csv verdict_test); then per claim (words.yaml v2_claims) the paper's number (plan_v2.yaml's, via
    claims.csv paper_effect) or words, our rows' means with intervals and their verdicts, and the notebook that
    shows them."""
    path = os.path.join(root, CLAIMS)
    if not os.path.exists(path):
        return fill("v2-claims", c=None)
    c = _read_claims(path).set_index("question", drop=False)
    groups = claim_groups(c)
    group_of = {r["question"]: g for g in groups for r in g["rows"]}
    rows = [r.to_dict() for _, r in c.iterrows()]
    learning = [r for r in rows if r["verdict"].startswith("not converged")]
    return fill("v2-claims", c=c, groups=groups, ours=_ours, short=_short, against=_v2_against,
                claim_of={q: g["claim"] for q, g in group_of.items()},
                shown={q: g["shown"] for q, g in group_of.items()},
                others={q: [f"{_short(o)} *{_word(o)}*" for o in g["rows"] if o["question"] != q
                            and _word(o) in ("supports", "contradicts", "inconclusive")]  # the table has the rest
                        for q, g in group_of.items()},
                stem=lambda p: os.path.splitext(os.path.basename(p))[0],
                decided=[(label, [r for r in rows if r["verdict"] == v and group_of[r["question"]]["is_ours"] == ours])
                         for label, v, ours in DECIDED],
                test_alone={v: sum(r["verdict_test"] == v for r in learning) for v in ("supports", "contradicts", "inconclusive")},
                n_families=c.family.nunique(), learning=learning, blocking=_blocking(learning), waiting=[r for r in rows if r["verdict"].startswith("not measured")], **_levels_and_margins(c),
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
    path = os.path.join(root, CLAIMS)
    if not os.path.exists(path):
        return fill("v2-key", c=None)
    c = pd.read_csv(path)
    return fill("v2-key", c=c, t=read_json(os.path.join(root, "results/v2/teacher/selected.json")),
                seeds=" or ".join(str(n) for n in sorted({int(x) for x in c.seeds})),
                awaiting=any(awaits_shift(v) for v in c.verdict),  # the *machine shift* case, where a row is in it
                **_levels_and_margins(c))


row_label = _v2_label  # the same words for plan v2's notebooks (odevit.repro.v2_figures)

SECTIONS: Dict[str, Callable[[str], str]] = {"v2-claims": v2_claims, "v2-key": v2_key, "v2-verdicts": v2_verdicts}
