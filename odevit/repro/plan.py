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
from typing import Any, Dict, Iterator, List, Optional, Tuple

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
PLAN_KEYS = ("version", "rules", "teacher", "studies", "publish", "plan_v3")  # params.yaml's blocks that are plans
V3_RULE_KEYS = {"alpha", "primary_family", "interval", "decide", "selection", "schedule", "convergence", "fairness",
                "tau_rule", "precision", "machine", "remedy_draws", "power", "rounding", "made_by"}
V3_QUESTION_KEYS = (QUESTION_KEYS - {"null", "margin_rule"}) | {"replicates", "delta", "delta_reason"}
RESULTS_OF = {2: "results/v2", 3: "results/v3"}  # each plan's runs and claims (plan v3 uses plan v2's teacher)


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


def _read(path: str) -> Dict[str, Any]:
    import yaml

    if not os.path.exists(path):
        raise PlanError(f"{path}: no such plan file")
    with open(path) as f:
        params = yaml.safe_load(f)
    _need(isinstance(params, dict), f"{path}: a mapping of blocks expected")
    return params


def versions(path: str = PLAN_FILE) -> List[int]:
    """The plans params.yaml holds, in the order they were fixed: [2] or [2, 3]."""
    return [2] + ([3] if "plan_v3" in _read(path) else [])


def load(path: str = PLAN_FILE, version: int = 2) -> Dict[str, Any]:
    """One plan of params.yaml, checked (PlanError naming the key on the first problem). Plan v2: its top-level blocks
    (version, rules, teacher, studies, publish; the teacher block whole: its shape keys sit beside the recipe).
    Plan v3: the `plan_v3` block's rules and studies, with the same teacher block (plan v2's teacher)."""
    params = _read(path)
    if version == 2:
        plan = {k: params[k] for k in PLAN_KEYS if k in params and k != "plan_v3"}
        check(plan, path)
        if "plan_v3" in params:  # a later plan in the file is checked with the first (one error, before any work)
            load(path, 3)
        return plan
    _need(version == 3 and isinstance(params.get("plan_v3"), dict), f"{path}: plan_v3: no such block (plan {version})")
    v3 = params["plan_v3"]
    plan = {"version": v3.get("version"), "rules": v3.get("rules"), "teacher": params.get("teacher"),
            "studies": v3.get("studies")}
    check_v3(plan, path, {int(x) for s in (params.get("studies") or {}).values() for x in s.get("seeds", [])})
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
        cells = _check_study(where, name, s, seen, set(), 4)
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


def _check_study(where: str, name: str, s: Any, seen: Dict[int, str], earlier_seeds: set, min_epochs: int
                 ) -> Dict[str, Any]:
    """A study's keys, budget (at least `min_epochs`), fresh seeds (none seen in this plan or `earlier_seeds`) and
    cells (distill overrides; teacher strong | weak; free true | false); returns its cells."""
    _need(isinstance(s, dict) and set(s) <= STUDY_KEYS, f"{where}: keys must be among {sorted(STUDY_KEYS)}")
    b = s.get("budget") or {}
    _need(set(b) == {"train_limit", "epochs"} and b["train_limit"] >= 0 and b["epochs"] >= min_epochs,
          f"{where}.budget: train_limit >= 0 and epochs >= {min_epochs} (the floor window needs >= 2 epochs)")
    for x in s["seeds"]:
        _need(isinstance(x, int) and x not in seen and x not in earlier_seeds, f"{where}.seeds: {x} is not a fresh "
              f"integer seed (already {seen.get(x, 'plan v2')}'s)")
        seen[x] = name
    cells = s.get("cells") or {}
    for c, ov in cells.items():
        _need(ov is None or (isinstance(ov, dict) and ov.get("teacher", "strong") in ("strong", "weak")),
              f"{where}.cells.{c}: a dict of distill overrides; teacher: strong (default) | weak")
        _need(isinstance((ov or {}).get("free", False), bool),
              f"{where}.cells.{c}.free = {(ov or {}).get('free')!r}: expected true or false")
    return cells


def check_v3(plan: Dict[str, Any], path: str, earlier_seeds: set) -> None:
    """Plan v3's block: its rules (every verdict rule inside), studies with fresh seeds (none of plan v2's), questions
    with a smallest effect of interest (superiority: delta) or a margin (equivalence), and the power its seeds reach."""
    w = f"{path}: plan_v3"
    _need(plan["version"] == 3, f"{w}.version: 3 expected")
    r = plan["rules"]
    _need(isinstance(r, dict) and set(r) == V3_RULE_KEYS, f"{w}.rules must give exactly {sorted(V3_RULE_KEYS)}")
    _need(isinstance(r["alpha"], float) and 0 < r["alpha"] < 0.5, f"{w}.rules.alpha must be in (0, 0.5)")
    _need(r["interval"] == "two_one_sided", f"{w}.rules.interval: two_one_sided (the deciding interval)")
    sch = r["schedule"]
    _need(isinstance(sch, dict) and 0 <= sch.get("lr_floor", -1) < 1 and 0 < sch.get("floor_frac", 0) < 1
          and sch.get("window") == "floor", f"{w}.rules.schedule: lr_floor in [0, 1), floor_frac in (0, 1), window: floor")
    c = r["convergence"]
    _need(isinstance(c, dict) and c.get("rule") == "learning_left" and 0 < c.get("alpha_row", 0) < 0.5
          and c.get("horizon", 0) > 0, f"{w}.rules.convergence: rule learning_left, alpha_row in (0, 0.5), horizon > 0")
    _need(r["machine"] == "one_type_per_study", f"{w}.rules.machine: one_type_per_study")
    _need(r["remedy_draws"] in ("per_seed", "shared"), f"{w}.rules.remedy_draws: per_seed | shared")
    _need(float(r["tau_rule"].get("ratio", 0)) > 0, f"{w}.rules.tau_rule.ratio must be > 0")
    _need(r["precision"] in ("fp32", "bf16", "auto"), f"{w}.rules.precision: fp32 | bf16 | auto")
    _need(0 < r["power"].get("target", 0) < 1 and 0 < r["power"].get("sd_confidence", 0) < 1,
          f"{w}.rules.power: target and sd_confidence in (0, 1)")
    studies = plan["studies"]
    _need(isinstance(studies, dict) and studies, f"{w}.studies must map names to studies")
    fams = families(plan)
    _need(r["primary_family"] in fams, f"{w}.rules.primary_family '{r['primary_family']}' has no question")
    seen: Dict[int, str] = {}
    for name, s in studies.items():
        where = f"{w}.studies.{name}"
        cells = _check_study(where, name, s, seen, earlier_seeds, 8)
        for q in s["questions"]:
            qw = f"{where}.questions[{q.get('id')}]"
            _need(set(q) <= V3_QUESTION_KEYS, f"{qw}: unknown key {sorted(set(q) - V3_QUESTION_KEYS)}")
            _need(q.get("kind") in ("paired", "within") and q.get("test") in ("superiority", "equivalence")
                  and q.get("direction") in DIRECTIONS, f"{qw}: kind paired | within, test superiority | equivalence")
            _need(q.get("a") in cells and (q["kind"] != "paired" or q.get("b") in cells),
                  f"{qw}: a (and b for paired) must be cells of the study")
            if q["test"] == "superiority":
                _need(q.get("direction") == "greater" and float(q.get("delta") or 0) > 0 and q.get("delta_reason"),
                      f"{qw}: superiority needs direction greater, delta > 0 (the smallest effect of interest) and "
                      "delta_reason")
            else:
                _need(float(q.get("margin") or 0) > 0 and q.get("margin_reason"), f"{qw}: equivalence needs margin > 0 "
                      "and margin_reason")
    for row in power_rows(plan):
        _need(row["test"] != "superiority" or row["power"] >= float(r["power"]["target"]),
              f"{w}.studies.{row['study']}: {row['id']} reaches power {row['power']:.2f} < {r['power']['target']} at "
              f"delta {row['delta']} with {row['seeds']} seeds (needs {row['seeds_needed']}): add seeds")


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
    """sha256 (12 hex) of rules + teacher + the study's block (None: the teacher's runs: rules + teacher), its cells
    those a question reads: an ablation cell, in no question, leaves the plan and its rows' hash as they were."""
    blob = {"rules": plan["rules"], "teacher": {k: v for k, v in plan["teacher"].items() if k in PLAN_TEACHER}}
    if name is not None:
        s, read = plan["studies"][name], {q.get(k) for q in plan["studies"][name].get("questions", []) for k in "ab"}
        blob["study"] = dict(s, cells={c: v for c, v in s["cells"].items() if c in read})
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]


def power_at_delta(delta: float, sd: float, n: int, alpha: float) -> float:
    """Plan v3's power of a superiority row: P(contradicts | true effect 0) = P(supports | true effect delta) for the
    (1 - 2 alpha) paired-t interval (high < delta, resp. low > 0): the one-sided t test's power at delta."""
    if n < 2 or sd <= 0:
        raise ValueError("power_at_delta: need n >= 2 and sd > 0")
    df = n - 1
    return float(1.0 - _cdf(float(st.t.ppf(1 - alpha, df)), df, delta / (sd / math.sqrt(n))))


def tost_power(sd: float, n: int, alpha: float, margin: float, effect: float = 0.0) -> float:
    """P(TOST passes at alpha) at a true `effect` (the (1 - 2 alpha) interval inside +-margin); the equivalence
    branch of `power`."""
    df, se = n - 1, sd / math.sqrt(n)
    tc = st.t.ppf(1 - alpha, df)
    return float(max(0.0, 1.0 - _cdf(tc, df, (effect + margin) / se) - _cdf(tc, df, (margin - effect) / se)))


def false_alarm(alpha_row: float, runs: int) -> float:
    """Plan v3's convergence rule on flat runs: the chance that any of a row's `runs` is flagged as still learning,
    each tested at alpha_row / runs (independent runs): 1 - (1 - alpha_row / runs) ** runs (<= alpha_row)."""
    return 1.0 - (1.0 - alpha_row / runs) ** runs


def row_runs(s: Dict[str, Any], q: Dict[str, Any]) -> int:
    """The runs a row uses: its cells' seeds (a paired row two cells, a within-run row one)."""
    return len(s["seeds"]) * (2 if q["kind"] == "paired" else 1)


def _each_question(plan: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, Any], Dict[str, Any], str, float]]:
    """(study name, study, question, its family, its alpha_each) for every question of the plan, in its order."""
    for name, s in plan["studies"].items():
        for q in s["questions"]:
            yield name, s, q, family_of(s, q), alpha_each(plan, family_of(s, q))


def power_rows(plan: Dict[str, Any]) -> List[Dict[str, Any]]:
    if plan.get("version") == 3:
        return _power_rows_v3(plan)
    rows = []
    for name, s, q, fam, a in _each_question(plan):
        n, pilot, paper = len(s["seeds"]), q["pilot"], q.get("paper") or {}
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


def _power_rows_v3(plan: Dict[str, Any]) -> List[Dict[str, Any]]:
    r = plan["rules"]
    target, conf = float(r["power"]["target"]), float(r["power"]["sd_confidence"])
    rows = []
    for name, s, q, fam, a in _each_question(plan):
        n, pilot = len(s["seeds"]), q["pilot"]
        sd = planning_sd(pilot["sd"], pilot["n"], conf)
        if q["test"] == "superiority":
            d = float(q["delta"])
            pw = power_at_delta(d, sd, n, a)
            need = next((k for k in range(2, 201) if power_at_delta(d, sd, k, a) >= target), None)
        else:
            d = float(q["margin"])
            pw = tost_power(sd, n, a, d)
            need = next((k for k in range(2, 201) if tost_power(sd, k, a, d) >= target), None)
        R = row_runs(s, q)
        mu, se, df = float(pilot["mean"]), sd / math.sqrt(n), n - 1
        tc = float(st.t.ppf(1 - a, df))  # P(the deciding interval lies outside the margin / below delta | pilot mean)
        outside = (_cdf(-tc, df, (mu + d) / se) + 1.0 - _cdf(tc, df, (mu - d) / se) if q["test"] == "equivalence"
                   else _cdf(-tc, df, (mu - d) / se))
        rows.append(dict(study=name, family=fam, id=q["id"], test=q["test"], seeds=n, alpha_each=a,
                         pilot_sd=pilot["sd"], planning_sd=sd, delta=d, power=pw, pilot_mean=mu,
                         power_contradicts_at_pilot=float(outside),
                         seeds_needed=need if need is not None else ">200", runs=R,
                         false_alarm=false_alarm(float(r["convergence"]["alpha_row"]), R)))
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Check the plan in params.yaml and print (or write) its power table")
    ap.add_argument("--plan", default=PLAN_FILE)
    ap.add_argument("--version", type=int, default=None, help="2 or 3 (default: the newest plan in the file)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    try:
        plan = load(a.plan, a.version or versions(a.plan)[-1])
    except PlanError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t = pd.DataFrame(power_rows(plan))
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        t.round(4).to_csv(a.out, index=False)
    cols = (["study", "family", "id", "test", "seeds", "alpha_each", "planning_sd", "delta", "power", "seeds_needed",
             "pilot_mean", "power_contradicts_at_pilot", "false_alarm"] if plan["version"] == 3 else
            ["study", "family", "id", "test", "seeds", "alpha_each", "planning_sd", "paper_effect", "power_paper",
             "pilot_effect", "power_pilot"])
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(f"plan v{plan['version']} ({a.plan}): every study's hash " + ", ".join(
            f"{k} {study_hash(plan, k)}" for k in plan["studies"]))
        print(t[cols].round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
