"""The analysis plan, read from params.yaml: its rules, teacher recipe, studies (cells, seeds, budgets, questions),
checked, hashed and its power table (`python -m odevit.repro.plan`).

A family may span studies (the primary family holds the headline rows of every budget; a question may name its own
family); the teacher recipe has seeds; the schedule ends at a floor LR judged by a slope rule; tau follows a rule.
Each run records `study_hash` of the study it belongs to; a plan edited after its runs shows in that hash."""
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

TESTS = ("superiority", "non_inferiority", "equivalence")
DIRECTIONS = ("greater", "less", "none")
KINDS = ("paired", "within", "teacher_gap")
POWER_MIN = 0.8  # the power every question of a confirmatory family must reach at the paper's effect


class PlanError(ValueError):
    """A plan that cannot be used: the message names the file and the key."""



PLAN_FILE = "params.yaml"
RULE_KEYS = {"alpha", "primary_family", "interval", "selection", "schedule", "convergence", "fairness", "tau_rule",
             "precision", "machine", "power", "made_by"}
STUDY_KEYS = {"status", "family", "description", "budget", "cells", "seeds", "questions", "robustness"}
QUESTION_KEYS = {"id", "family", "claim", "kind", "a", "b", "metric", "metric_b", "unit", "test", "direction", "null",
                 "margin", "margin_rule", "margin_reason", "paper", "pilot"}
TEACHER_KEYS = {"epochs", "augment", "lr", "weight_decay", "label_smoothing"}  # the recipe the plan fixes
PLAN_TEACHER = TEACHER_KEYS | {"seeds", "weak"}  # the teacher block's keys the plan hash covers (the rest: its shape)
HEADLINE = ("ref", "ce", "free")  # the headline cells: the budget curve (notebook 03_budget trains and draws them)
PLAN_KEYS = ("version", "rules", "teacher", "studies", "publish")  # params.yaml's blocks that are the plan


def images(study: Dict[str, Any]) -> int:
    """A study's training images (train_limit 0 = all 55,000), as the plan writes a
    study's budget alike)."""
    return int(study["budget"]["train_limit"] or 55000)


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


def _need(cond: bool, msg: str) -> None:
    if not cond:
        raise PlanError(msg)


def load(path: str = PLAN_FILE) -> Dict[str, Any]:
    """The plan's blocks of params.yaml (PLAN_KEYS; the teacher block whole: its shape keys sit beside the recipe),
    checked (PlanError naming the key on the first problem)."""
    import yaml

    if not os.path.exists(path):
        raise PlanError(f"{path}: no such plan file")
    with open(path) as f:
        params = yaml.safe_load(f)
    _need(isinstance(params, dict), f"{path}: a mapping of blocks expected")
    plan = {k: params[k] for k in PLAN_KEYS if k in params}
    check(plan, path)
    return plan


def check(plan: Any, path: str = PLAN_FILE) -> None:
    _need(isinstance(plan, dict) and plan.get("version") == 2, f"{path}: 'version: 2' expected (the plan's format)")
    r = plan.get("rules")
    _need(isinstance(r, dict) and set(r) == RULE_KEYS, f"{path}: rules must give exactly {sorted(RULE_KEYS)}")
    _need(isinstance(r["alpha"], float) and 0 < r["alpha"] < 0.5, f"{path}: rules.alpha must be in (0, 0.5)")
    sch = r["schedule"]
    _need(isinstance(sch, dict) and 0 <= sch.get("lr_floor", -1) < 1 and 0 < sch.get("floor_frac", 0) < 1,
          f"{path}: rules.schedule needs lr_floor in [0, 1) and floor_frac in (0, 1)")
    _need(r["convergence"].get("rule") == "floor_slope" and r["convergence"].get("se_multiple", 0) > 0,
          f"{path}: rules.convergence: rule floor_slope with se_multiple > 0")
    _need(float(r["tau_rule"].get("ratio", 0)) > 0, f"{path}: rules.tau_rule.ratio must be > 0")
    _need(r["precision"] in ("fp32", "bf16", "auto"), f"{path}: rules.precision: fp32 | bf16 | auto")
    t = plan.get("teacher")
    _need(isinstance(t, dict) and PLAN_TEACHER <= set(t), f"{path}: teacher: the plan's recipe needs the keys "
          f"{sorted(PLAN_TEACHER)}")
    _need(isinstance(t.get("seeds"), list) and len(t["seeds"]) >= 2, f"{path}: teacher.seeds: >= 2 seeds (its spread)")
    studies = plan.get("studies")
    _need(isinstance(studies, dict) and studies, f"{path}: 'studies' must map names to studies")
    seen: Dict[int, str] = {}
    fams = families(plan)
    _need(r["primary_family"] in fams, f"{path}: rules.primary_family '{r['primary_family']}' has no question")
    for name, s in studies.items():
        where = f"{path}: studies.{name}"
        _need(isinstance(s, dict) and set(s) <= STUDY_KEYS, f"{where}: keys must be among {sorted(STUDY_KEYS)}")
        b = s.get("budget") or {}
        _need(set(b) == {"train_limit", "epochs"} and b["train_limit"] >= 0 and b["epochs"] >= 4,
              f"{where}.budget: train_limit >= 0 and epochs >= 4 (the floor window needs >= 2 epochs)")
        for x in s["seeds"]:
            _need(isinstance(x, int) and x not in seen, f"{where}.seeds: {x} is not a fresh integer seed "
                  f"(already {seen.get(x)}'s)")
            seen[x] = name
        cells = s.get("cells") or {}
        for c, ov in cells.items():
            _need(ov is None or (isinstance(ov, dict) and ov.get("teacher", "strong") in ("strong", "weak")),
                  f"{where}.cells.{c}: a dict of distill overrides; teacher: strong (default) | weak")
            _need(isinstance((ov or {}).get("free", False), bool),
                  f"{where}.cells.{c}.free = {(ov or {}).get('free')!r}: expected true or false")
        for q in s["questions"]:
            qw = f"{where}.questions[{q.get('id')}]"
            _need(set(q) <= QUESTION_KEYS, f"{qw}: unknown key {sorted(set(q) - QUESTION_KEYS)}")
            _need(q.get("kind") in KINDS and q.get("test") in TESTS and q.get("direction") in DIRECTIONS,
                  f"{qw}: kind {KINDS}, test {TESTS}, direction {DIRECTIONS}")
            _need(q.get("a") in cells and (q["kind"] != "paired" or q.get("b") in cells),
                  f"{qw}: a (and b for paired) must be cells of the study")
            _need(q["test"] == "superiority" or q.get("margin") is not None, f"{qw}: margin needed for {q['test']}")
    for i, r in enumerate(plan.get("publish") or []):
        _need(isinstance(r, dict) and set(r) == {"tag", "study", "cell"} and r["study"] in studies
              and r["cell"] in (studies[r["study"]].get("cells") or {}),
              f"{path}: publish[{i}]: {{tag, study, cell}} with a study of the plan and one of its cells")
    for row in power_rows(plan):
        _need(row["power_paper"] >= POWER_MIN or bool(row["power_note"]),  # NaN (no paper number): a note too
              f"{path}: {row['study']}.{row['id']}: power {row['power_paper']:.2f} "
              f"< {POWER_MIN} at the paper's effect: add seeds, or say why in pilot.note")


def family_of(s: Dict[str, Any], q: Dict[str, Any]) -> str:
    return q.get("family", s["family"])


def families(plan: Dict[str, Any]) -> Dict[str, List[str]]:
    """family -> its questions' ids (across studies), in plan order: fixed by the plan, never grown."""
    out: Dict[str, List[str]] = {}
    for s in plan["studies"].values():
        for q in s["questions"]:
            out.setdefault(family_of(s, q), []).append(q["id"])
    return out


def alpha_each(plan: Dict[str, Any], family: str) -> float:
    """Bonferroni within the family."""
    return float(plan["rules"]["alpha"]) / len(families(plan)[family])


def study_hash(plan: Dict[str, Any], name: Optional[str]) -> str:
    """sha256 (12 hex) of rules + teacher + the study's block (None: the teacher's runs: rules + teacher)."""
    blob = {"rules": plan["rules"], "teacher": {k: v for k, v in plan["teacher"].items() if k in PLAN_TEACHER}}
    if name is not None:
        blob["study"] = plan["studies"][name]
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]


def power_rows(plan: Dict[str, Any]) -> List[Dict[str, Any]]:
    rows = []
    for name, s in plan["studies"].items():
        n = len(s["seeds"])
        for q in s["questions"]:
            fam = family_of(s, q)
            a = alpha_each(plan, fam)
            pilot, paper = q["pilot"], q.get("paper") or {}
            sd = planning_sd(pilot["sd"], pilot["n"])
            m, null = float(q.get("margin") or 0.0), float(q.get("null") or 0.0)
            eff = paper.get("effect")
            rows.append(dict(study=name, family=fam, id=q["id"], test=q["test"], seeds=n, alpha_each=a,
                             pilot_sd=pilot["sd"], planning_sd=sd, paper_effect=eff,
                             power_paper=power(float(eff) - null, sd, n, a, q["test"], m) if eff is not None else math.nan,
                             pilot_effect=pilot.get("mean"),
                             power_pilot=power(float(pilot["mean"]) - null, sd, n, a, q["test"], m),
                             power_note=pilot.get("note", "")))
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Check the plan in params.yaml and print (or write) its power table")
    ap.add_argument("--plan", default=PLAN_FILE)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    try:
        plan = load(a.plan)
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t = pd.DataFrame(power_rows(plan))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        t.round(4).to_csv(a.out, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(t[["study", "family", "id", "test", "seeds", "alpha_each", "planning_sd", "paper_effect", "power_paper",
                 "pilot_effect", "power_pilot"]].round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
