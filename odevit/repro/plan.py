"""The analysis plan (plan.yaml): what each study asks, how it is judged, and on how many seeds — data, fixed before
the runs it judges.

    plan = load()                        # validated; PlanError (one line, naming the key) on a bad file
    study_hash(plan, "confirm_55k")      # sha256 of the study's block + the global rules: each run records it
    power_table(plan)                    # every question's power at its planned seeds (noncentral t, scipy)
    python -m odevit.repro.plan          # validate and print the power table (the evidence stage writes it to
                                         # results/evidence/power.csv)

A question is one pre-registered hypothesis: a statistic over the study's seeds (a paired difference of two cells, a
difference of two metrics of one cell, or a cell's Acc@1 minus its teacher's), a test (superiority, non-inferiority,
equivalence) with its margin and the margin's reason, a predicted direction and the paper's number with its source.
A study may train its own teacher (`teacher`: training keys over params.yaml's teacher block; stage STUDY_teacher,
`study_teacher`), from which its cells marked `teacher: study` distil. Every question of a study belongs to the
study's one family: its size is fixed here (Bonferroni at alpha / size; a
row without runs counts as not measured, never shrinking the family), so a verdict never moves because another row
arrived. A run trained under one plan and judged under another (the study's hash changed) is *post hoc*.

Power (`power`): the paired t test's power to reach a decision when the true effect is `effect`, at the family's
level, with the planning SD = the pilot's SD raised to its one-sided 80 % upper confidence bound (a 3-seed SD is
itself uncertain: chi-square with n - 1 degrees of freedom), so that a small pilot does not promise power it lacks.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional

import pandas as pd
from scipy import stats as st

from .config import ConfigError, parse, read_yaml, uses_study_teacher

PLAN_FILE = "plan.yaml"
TESTS = ("superiority", "non_inferiority", "equivalence")
DIRECTIONS = ("greater", "less", "none")
KINDS = ("paired", "within", "teacher_gap")
STATUSES = ("confirmatory", "exploratory")
CONVERGENCE_RULES = ("full_schedule",)
STUDY_KEYS = {"status", "family", "description", "budget", "cells", "seeds", "questions", "pilot_note", "base",
              "teacher", "convergence"}
# where rules.convergence is applied: `run` (default) = a row needs every run of its cells converged; `cell_mean` = each
# of its cells' runs' mean last-quarter gain below their mean threshold (a borderline run of many no longer voids a
# row by itself; a cell whose runs still learn does)
CONVERGENCE_LEVELS = ("run", "cell_mean")
BUDGET_KEYS = {"train_limit", "epochs"}
# a study's own teacher (stage STUDY_teacher, `odevit.repro.study_teacher`): its training keys, over params.yaml's
# teacher block; its architecture stays the default teacher's (the students' width and depth come from it)
TEACHER_KEYS = {"epochs", "lr", "weight_decay", "warmup", "cycles", "clip", "label_smoothing", "augment"}
QUESTION_KEYS = {"id", "claim", "kind", "a", "b", "metric", "metric_b", "unit", "test", "direction", "null", "margin",
                 "margin_reason", "paper", "pilot", "exploratory"}
POWER_MIN = 0.8  # the power every question of a confirmatory family must reach at the paper's effect


class PlanError(ValueError):
    """plan.yaml is malformed; the message names the key and what is allowed."""


def load(path: str = PLAN_FILE) -> Dict[str, Any]:
    """The validated plan (PlanError naming the key on the first problem)."""
    plan = read_yaml(path, PlanError, "the analysis plan; run from the repository root")
    check(plan, path)
    return plan


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise PlanError(msg)


def check(plan: Dict[str, Any], path: str = PLAN_FILE) -> None:
    """Validate the whole plan: rules, studies, budgets, cells, seeds, questions and their power."""
    _need(isinstance(plan.get("rules"), dict), f"{path}: 'rules' (alpha, convergence) is missing")
    r = plan["rules"]
    _need(isinstance(r.get("alpha"), float) and 0 < r["alpha"] < 0.5, f"{path}: rules.alpha must be in (0, 0.5)")
    conv = r.get("convergence") or {}
    _need(conv.get("rule") in CONVERGENCE_RULES, f"{path}: rules.convergence.rule must be one of {CONVERGENCE_RULES}")
    _need(isinstance(conv.get("window_frac"), float) and 0 < conv["window_frac"] < 1,
          f"{path}: rules.convergence.window_frac must be in (0, 1)")
    _need(isinstance(conv.get("se_multiple"), (int, float)) and conv["se_multiple"] > 0,
          f"{path}: rules.convergence.se_multiple must be > 0")
    for i, rep in enumerate(plan.get("replicates") or []):
        _need(isinstance(rep, dict) and rep.get("study") in (plan.get("studies") or {}) and isinstance(rep.get("results"), str),
              f"{path}: replicates[{i}] needs study (one of the studies) and results (its folder on another machine type)")
    studies = plan.get("studies")
    _need(isinstance(studies, dict) and studies, f"{path}: 'studies' must map study names to their plans")
    families: Dict[str, str] = {}
    for name, s in studies.items():
        where = f"{path}: studies.{name}"
        _need(isinstance(s, dict), f"{where}: expected a mapping")
        extra = set(s) - STUDY_KEYS
        _need(not extra, f"{where}: unknown key '{sorted(extra)[0] if extra else ''}' (allowed: {sorted(STUDY_KEYS)})")
        _need(s.get("status") in STATUSES, f"{where}.status must be one of {STATUSES}")
        fam = s.get("family")
        _need(isinstance(fam, str) and fam, f"{where}.family: a name")
        _need(fam not in families, f"{where}.family '{fam}' is already study {families.get(fam)}'s: a family is one "
              "study's question set (a later study is a new family, never a grown one)")
        families[fam] = name
        b = s.get("budget") or {}
        _need(set(b) == BUDGET_KEYS, f"{where}.budget must give exactly {sorted(BUDGET_KEYS)}")
        _need(isinstance(b["train_limit"], int) and b["train_limit"] >= 0, f"{where}.budget.train_limit: int >= 0")
        _need(isinstance(b["epochs"], int) and b["epochs"] > 0, f"{where}.budget.epochs: int > 0")
        teacher = s.get("teacher")
        _need(teacher is None or (isinstance(teacher, dict) and teacher and set(teacher) <= TEACHER_KEYS),
              f"{where}.teacher: the study's own teacher, a non-empty dict of teacher training keys "
              f"{sorted(TEACHER_KEYS)} (over params.yaml's teacher block)")
        if teacher is not None:
            try:  # the values, as params.yaml's teacher block checks them
                parse("teacher", teacher)
            except ConfigError as e:
                raise PlanError(f"{where}.teacher: {str(e).replace('params.yaml: teacher.', '')}") from None
        cells = s.get("cells")
        _need(isinstance(cells, dict) and cells, f"{where}.cells: name -> distill overrides")
        _need("teacher" not in cells, f"{where}.cells: 'teacher' names the study's teacher stage, not a cell")
        for c, ov in cells.items():
            _need(ov is None or isinstance(ov, dict), f"{where}.cells.{c}: expected a dict of distill keys")
            if isinstance(ov, dict) and "teacher" in ov:
                _need(ov["teacher"] == "study" and teacher is not None and not ov.get("free"),
                      f"{where}.cells.{c}.teacher: 'study' (distil from the study's own teacher: needs the "
                      "study's teacher block) in a distilled cell; leave it out for 02_teacher's teacher")
        _need(teacher is None or any(uses_study_teacher(ov) for ov in cells.values()),
              f"{where}.teacher: no cell distils from it (mark one `teacher: study`), so it would be trained for nothing")
        seeds = s.get("seeds")
        _need(isinstance(seeds, list) and len(seeds) >= 2 and len(set(seeds)) == len(seeds)
              and all(isinstance(x, int) for x in seeds), f"{where}.seeds: a list of >= 2 distinct integers")
        _need(s.get("convergence", "run") in CONVERGENCE_LEVELS,
              f"{where}.convergence must be one of {CONVERGENCE_LEVELS} (where rules.convergence is applied)")
        base = s.get("base") or {}
        _need(set(base) <= {"precision"}, f"{where}.base: only 'precision' may be set per study")
        qs = s.get("questions")
        _need(isinstance(qs, list) and qs, f"{where}.questions: a non-empty list")
        ids = set()
        for q in qs:
            _check_question(q, cells, f"{where}.questions[{q.get('id', '?') if isinstance(q, dict) else '?'}]")
            _need(q["id"] not in ids, f"{where}: question id '{q['id']}' twice")
            ids.add(q["id"])
        if s["status"] == "confirmatory":
            for row in _power_rows(plan, name):
                _need(row["power_paper"] >= POWER_MIN or row["power_note"],
                      f"{where}.questions[{row['id']}]: power {row['power_paper']:.2f} < {POWER_MIN} at the paper's "
                      f"effect with {len(seeds)} seeds: add seeds, or say why in pilot.note")


def _check_question(q: Any, cells: Dict[str, Any], where: str) -> None:
    _need(isinstance(q, dict), f"{where}: expected a mapping")
    extra = set(q) - QUESTION_KEYS
    _need(not extra, f"{where}: unknown key '{sorted(extra)[0] if extra else ''}' (allowed: {sorted(QUESTION_KEYS)})")
    for k in ("id", "claim", "kind", "a", "metric", "unit", "test", "direction"):
        _need(k in q, f"{where}: '{k}' is missing")
    _need(q["kind"] in KINDS, f"{where}.kind must be one of {KINDS}")
    _need(q["test"] in TESTS, f"{where}.test must be one of {TESTS}")
    _need(q["direction"] in DIRECTIONS, f"{where}.direction must be one of {DIRECTIONS}")
    _need(q["a"] in cells, f"{where}.a = '{q['a']}' is not one of the study's cells {list(cells)}")
    if q["kind"] == "paired":
        _need(q.get("b") in cells, f"{where}.b = '{q.get('b')}' is not one of the study's cells {list(cells)}")
    if q["kind"] == "teacher_gap":
        _need(not uses_study_teacher(cells[q["a"]]),
              f"{where}: a teacher_gap question is measured against 02_teacher's teacher; cell '{q['a']}' distils "
              "from the study's own teacher")
    if q["kind"] == "within":
        _need(isinstance(q.get("metric_b"), str), f"{where}.metric_b: the metric subtracted within the cell")
    if q["test"] in ("non_inferiority", "equivalence"):
        _need(isinstance(q.get("margin"), (int, float)) and q["margin"] > 0, f"{where}.margin: > 0 for {q['test']}")
        _need(isinstance(q.get("margin_reason"), str) and q["margin_reason"].strip(),
              f"{where}.margin_reason: why this margin (a margin without a reason is not a plan)")
    if q["test"] != "equivalence":
        _need(q["direction"] in ("greater", "less"), f"{where}.direction: greater or less for a {q['test']} test")
    p = q.get("paper") or {}
    _need(isinstance(p.get("source"), str), f"{where}.paper.source: where a reader checks the paper's claim")
    pilot = q.get("pilot") or {}
    _need(isinstance(pilot.get("sd"), (int, float)) and pilot["sd"] > 0 and isinstance(pilot.get("n"), int)
          and pilot["n"] >= 2 and isinstance(pilot.get("source"), str),
          f"{where}.pilot: sd (> 0), n (>= 2) and source of the measured seed SD the power is computed from")


def study_hash(plan: Dict[str, Any], name: str) -> str:
    """sha256 (first 12 hex digits) of the study's plan block and the global rules, as canonical JSON: what a run
    records, and what the report compares to decide whether a row is post hoc."""
    if name not in plan["studies"]:
        raise PlanError(f"plan: study '{name}' is not one of {list(plan['studies'])}")
    blob = json.dumps({"rules": plan["rules"], "study": plan["studies"][name]}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def family_alpha(plan: Dict[str, Any], name: str) -> float:
    """Each question's level: alpha / the family's fixed size (Bonferroni)."""
    return float(plan["rules"]["alpha"]) / len(plan["studies"][name]["questions"])


def planning_sd(sd: float, n: int, confidence: float = 0.8) -> float:
    """The pilot SD raised to its one-sided `confidence` upper bound: sd * sqrt((n - 1) / chi2.ppf(1 - conf, n - 1))."""
    return float(sd * math.sqrt((n - 1) / st.chi2.ppf(1 - confidence, n - 1)))


def power(effect: float, sd: float, n: int, alpha: float, test: str = "superiority", margin: float = 0.0) -> float:
    """Probability that the plan's test decides (supports or contradicts) at level `alpha` when the true mean of the
    n per-seed values is `effect` and their SD `sd` (paired t, noncentral t distribution).
    superiority / non-inferiority: the two-sided (1 - alpha) interval excludes the null (0, or -margin below it),
    either side; equivalence: TOST passes at alpha (a lower bound: 1 - both one-sided misses, clipped at 0) — at a
    true effect inside the margin that is the chance of *supports*."""
    if n < 2 or sd <= 0:
        raise ValueError("power: need n >= 2 and sd > 0")
    df, se = n - 1, sd / math.sqrt(n)
    tc2 = st.t.ppf(1 - alpha / 2, df)
    if test == "equivalence":  # supports: TOST passes; contradicts: the (1 - alpha) interval lies outside the margin
        tc = st.t.ppf(1 - alpha, df)
        passes = 1.0 - _cdf(tc, df, (effect + margin) / se) - _cdf(tc, df, (margin - effect) / se)
        outside = 1.0 - _cdf(tc2, df, (effect - margin) / se) + _cdf(-tc2, df, (effect + margin) / se)
        return float(min(1.0, max(0.0, passes) + outside))
    nc = (effect + (margin if test == "non_inferiority" else 0.0)) / se
    return float(min(1.0, 1.0 - _cdf(tc2, df, nc) + _cdf(-tc2, df, nc)))


def _cdf(x: float, df: int, nc: float) -> float:
    """Noncentral t cdf; where scipy's series gives no number (|nc| in the tens) the normal limit, which is then
    exact to many digits (the mass sits far from x)."""
    v = float(st.nct.cdf(x, df, nc))
    return v if math.isfinite(v) else float(st.norm.cdf(x - nc))


def _power_rows(plan: Dict[str, Any], name: str) -> List[Dict[str, Any]]:
    s = plan["studies"][name]
    n, a = len(s["seeds"]), family_alpha(plan, name)
    rows = []
    for q in s["questions"]:
        pilot, paper = q["pilot"], q.get("paper") or {}
        sd = planning_sd(pilot["sd"], pilot["n"])
        margin = float(q.get("margin") or 0.0)
        null = float(q.get("null") or 0.0)
        eff_paper = paper.get("effect")
        p_paper = (power(float(eff_paper) - null, sd, n, a, q["test"], margin) if eff_paper is not None else math.nan)
        p_pilot = power(float(pilot["mean"]) - null, sd, n, a, q["test"], margin) if "mean" in pilot else math.nan
        rows.append(dict(study=name, family=s["family"], id=q["id"], test=q["test"], seeds=n, alpha_each=a,
                         pilot_sd=pilot["sd"], pilot_n=pilot["n"], planning_sd=sd, paper_effect=eff_paper,
                         power_paper=p_paper, pilot_effect=pilot.get("mean"), power_pilot=p_pilot,
                         power_note=pilot.get("note", "")))
    return rows


def power_table(plan: Dict[str, Any]) -> pd.DataFrame:
    """One row per question of every study: seeds, level, planning SD, power at the paper's and the pilot's effect."""
    return pd.DataFrame([r for name in plan["studies"] for r in _power_rows(plan, name)])


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Validate plan.yaml and write its power table")
    ap.add_argument("--plan", default=PLAN_FILE)
    ap.add_argument("--out", default=None, help="also write the table to this CSV")
    args = ap.parse_args(argv)
    try:
        plan = load(args.plan)
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t = power_table(plan)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        t.round(4).to_csv(args.out, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(t[["study", "id", "test", "seeds", "alpha_each", "planning_sd", "paper_effect", "power_paper",
                 "pilot_effect", "power_pilot"]].round(3).to_string(index=False))
    print("hashes: " + ", ".join(f"{n} {study_hash(plan, n)}" for n in plan["studies"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
