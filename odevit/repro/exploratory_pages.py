"""The exploratory studies' generated sections (docs/exploratory.md: the converged study, the budget curve, the
float noise), each filled into its template (docs/templates/NAME.md.j2) from its snapshot under docs/evidence/."""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List

import pandas as pd

from . import stats
from .evidence import BUDGETS, EVIDENCE, STRONG_TEACHER, progress
from .report import summary_line, to_markdown
from .results_pages import claims_table, cpu
from .study import collect
from .wording import ci, fill, num, read_json, read_yaml

CONVERGED = f"{EVIDENCE}/converged_fmnist"


def converged_study(root: str = ".") -> str:
    """The converged study (docs/evidence/converged_fmnist, written by `odevit.repro.evidence snapshot`): its
    claims table once every run and stage is in; until then the runs finished so far and their validation curves."""
    path = os.path.join(root, CONVERGED)
    if not os.path.isfile(os.path.join(path, "study.json")):
        return ("Not run yet: `dvc exp run $(python -m odevit.repro.preset presets/converged_fmnist.yaml)`, then "
                "`python -m odevit.repro.evidence snapshot converged_fmnist --clone . --command ...`.")
    meta = read_json(os.path.join(path, "study.json"))
    head = (f"`{meta['command']}` (commit {meta['commit']}) on {cpu(meta['machine'])}, {meta['machine'].get('cuda_device') or 'no GPU'}, {meta['date']}: "
            f"**{meta['runs_finished']} of {meta['runs_planned']} runs finished, {meta['runs_converged']} converged** "
            f"by the validation rule; {meta['train_s'] / 3600:.1f} h of training "
            + ("in all" if meta["complete"] else "so far")
            + (f", {meta['wall_s'] / 3600:.1f} h wall" if "wall_s" in meta else "") + "."
            + (f" Its {len(meta['notes'])} hand-written run notes (how the runs were made before the code recorded "
               f"it) are in [{CONVERGED}/study.json]({CONVERGED}/study.json)." if meta.get("notes") else ""))
    params = yaml.safe_load(open(os.path.join(path, "params.yaml"))) if os.path.isfile(os.path.join(path, "params.yaml")) else {}
    limit = (params.get("study") or {}).get("robustness_test_limit")
    test = (params.get("base") or {}).get("test_limit")
    runs = (to_markdown(progress(path).fillna("–")) + "\n\nAcc@1 at N/2, N, 2N: the trained model integrated with "
            "that many solver steps, on the first " + (f"{limit:,}" if limit else "`study.robustness_test_limit`")
            + " test images (`study.robustness_test_limit`; N = the trained steps); test Acc@1 on "
            + (f"the first {test:,} test images." if test else "the whole test split.")
            + f"\n\n![validation curves]({CONVERGED}/curves.png)")
    if meta["complete"]:
        from .report import summary_line

        c = pd.read_csv(os.path.join(path, "results/07_report/claims.csv"))
        skipped = c.claim[c.verdict == stats.NOT_MEASURED].tolist()
        t = read_json(os.path.join(path, "results/02_teacher/metrics.json"))["acc1"]
        cells = collect(os.path.join(path, "results"))
        best = cells.groupby("cell").acc1.mean()
        return (f"**{summary_line(c)}** — converged students (every run stopped by the validation rule), 3 seeds each. "
                f"{len(skipped)} claims need cells this study did not train (ablations, the published recipe) and are "
                "left out here; the quick run ([docs/results.md](docs/results.md)) tests them at its budget. The verdict rule "
                "is the quick run's (stated under its table there). Retention is measured against the "
                f"default run's teacher ({100 * t:.2f} % test Acc@1, trained from scratch on the same images and not "
                f"converged): the distilled students keep {100 * best.drop('free', errors='ignore').min() / t:.0f}–"
                f"{100 * best.drop('free', errors='ignore').max() / t:.0f} % of it, and the free ODE "
                f"({100 * best.get('free', float('nan')):.2f} %) beats it, so retention here says the students match a "
                "weak teacher, not that distillation helps.\n\n"
                + claims_table(path, measured_only=True)
                + (f"\n\n![the converged study's claims: ours (mean and 95 % interval over the seeds) against the paper's "
                   f"value, coloured by verdict]({CONVERGED}/results/07_report/claims.png)"
                   if os.path.isfile(os.path.join(path, "results/07_report/claims.png")) else "")
                + "\n\n" + head + "\n\nIts runs:\n\n" + runs)
    return head + " **In progress: no verdict is drawn from it until every seed and stage is in.**\n\n" + runs


def budget_curve(root: str = ".") -> str:
    """The budget curve (docs/evidence/budget_curve.csv, `python -m odevit.repro.evidence budget`): student − free
    ODE at each training-set size and teacher setup, with intervals and verdicts, and its figure."""
    path = os.path.join(root, EVIDENCE, "budget_curve.csv")
    if not os.path.isfile(path):
        return ("Not run yet: the points are `presets/budget_fmnist_{1k,3k,10k}.yaml` and the converged study (55k), "
                "the stronger teacher's `presets/strong_teacher_*.yaml`; "
                "`python -m odevit.repro.evidence budget` draws the curve from their snapshots.")
    t = pd.read_csv(path)
    rows = ["| training images | teacher (test Acc@1 %) | schedule c (τ) | student − free | seeds | student Acc@1 (%) | "
            "free Acc@1 (%) | difference [95 % CI] (pt) | Holm p | replicates | converged | all runs in | "
            "verdict (> 0: the teacher helps) |", "|" + "---|" * 13]
    borrowed = {}
    for r in t.itertuples():
        mark = ""
        if isinstance(getattr(r, "free_from", None), str) and r.free_from != r.study:
            mark = borrowed.setdefault(r.free_from, "†" * (len(borrowed) + 1))
        c = getattr(r, "schedule", "–")
        tau = getattr(r, "tau", math.nan)
        sched = f"{c}" + ("" if pd.isna(tau) else f" ({tau:g})") + (" **degenerate**" if getattr(r, "degenerate", False) is True else "")
        rows.append(f"| {r.train_images:,} | {_teacher(r)} | {sched} | {r.student} − free | {r.seeds} | {r.student_acc1:.2f} | "
                    f"{r.free_acc1:.2f}{mark} | {num(r.diff_mean, True)} {ci(r.ci_low, r.ci_high, True)} | "
                    f"{'–' if pd.isna(r.holm_p) else f'{r.holm_p:.3f}'} | "
                    f"{'–' if pd.isna(getattr(r, 'replication', math.nan)) else f'{r.replication:.2f}'} | {r.converged} | {'yes' if r.all_runs_in else 'no'} | "
                    f"**{r.verdict}** |")
    notes = "".join(f"\n\n{m} free runs of `{EVIDENCE}/{s}/` (same params but the teacher's and the schedule's: "
                    "a free ODE has no teacher)." for s, m in borrowed.items())
    shown = set(t.study)
    absent = [f"`{n}`" + (" (snapshotted, no pair finished yet)" if os.path.isfile(os.path.join(root, EVIDENCE, n, "study.json"))
                          else "") for n in BUDGETS + STRONG_TEACHER if n not in shown]
    todo = f"\n\nNot in the table yet: {', '.join(absent)} (`presets/<name>.yaml`)." if absent else ""
    rules = stopping_rules(t, root)
    return ("\n".join(rows) + notes + todo + "\n\n" + (rules + "\n\n" if rules else "") + budget_reading(t)
            + f"\n\n![budget curve]({EVIDENCE}/budget_curve.png)" + teacher_strength(root))


def stopping_rules(t: pd.DataFrame, root: str = ".") -> str:
    """The stopping rule of each budget-curve point, read from its snapshots' params.yaml (distill.epochs: the cap;
    distill.patience; distill.min_delta_pts), one entry per training-set size (per study where they differ); '' when
    no snapshot's params.yaml is there."""
    by_size: Dict[int, Dict[tuple, List[str]]] = {}
    for study, n in t.groupby("study", sort=False).train_images.first().items():
        path = os.path.join(root, EVIDENCE, study, "params.yaml")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            d = yaml.safe_load(f)["distill"]
        by_size.setdefault(int(n), {}).setdefault((d["epochs"], d["patience"], d["min_delta_pts"]), []).append(study)
    deltas = {r[2] for rules in by_size.values() for r in rules}
    if not deltas:
        return ""
    parts = []
    for n, rules in sorted(by_size.items()):
        for (cap, patience, delta), studies in rules.items():
            who = "" if len(rules) == 1 else f" ({', '.join(studies)})"
            gain = "" if len(deltas) == 1 else f" (gain ≥ {delta:g} pt)"
            parts.append(f"{n:,}{who}: at most {cap} epochs, patience {patience}{gain}")
    return ("Each point's stopping rule (its snapshot's `params.yaml`; patience: epochs without a validation Acc@1 "
            + (f"gain of {deltas.pop():g} pt" if len(deltas) == 1 else "gain") + "): " + "; ".join(parts) + ".")


def teacher_strength(root: str = ".") -> str:
    """The stronger teacher's students against the default teacher's, same seeds, budget and student rule
    (docs/evidence/teacher_strength.csv, `evidence.teacher_strength`); '' before it exists."""
    path = os.path.join(root, EVIDENCE, "teacher_strength.csv")
    if not os.path.isfile(path):
        return ""
    t = pd.read_csv(path)
    rows = ["| training images | stronger teacher (test Acc@1 %) | its c | student | seeds | with it (%) | "
            "with the default teacher (%) | difference [95 % CI] (pt) | Holm p | replicates | converged | "
            "verdict (> 0: the stronger teacher helps) |", "|" + "---|" * 12]
    for r in t.itertuples():
        rows.append(f"| {r.train_images:,} | {r.setup.replace('tau', 'τ')} ({r.teacher_acc1:.2f}) | {r.schedule} | "
                    f"{r.student} | {r.seeds} | {r.student_acc1:.2f} | {r.baseline_acc1:.2f} (c = {r.baseline_schedule}) | "
                    f"{num(r.diff_mean, True)} {ci(r.ci_low, r.ci_high, True)} | "
                    f"{'–' if pd.isna(r.holm_p) else f'{r.holm_p:.3f}'} | "
                    f"{'–' if pd.isna(r.replication) else f'{r.replication:.2f}'} | {r.converged} | **{r.verdict}** |")
    base = ", ".join(f"`{EVIDENCE}/{b}/`" for b in dict.fromkeys(t.baseline))
    return ("\n\n**Teacher strength.** The same students distilled from the stronger teacher and from the default "
            f"one ({base}: same seeds, images and student rule; Holm over these rows):\n\n" + "\n".join(rows))


def _teacher(r) -> str:
    """'default (86.98, 3 ep, not converged)': a budget-curve row's teacher, its test Acc@1, epochs, convergence."""
    acc, ep, conv = (getattr(r, k, math.nan) for k in ("teacher_acc1", "teacher_epochs", "teacher_converged"))
    bits = ([] if pd.isna(acc) else [f"{acc:.2f}"]) + ([] if pd.isna(ep) else [f"{int(ep)} ep"]) + (
        [] if pd.isna(conv) else ["converged" if str(conv) == "True" else "not converged"])
    return getattr(r, "teacher", "default") + (f" ({', '.join(bits)})" if bits else "")


def budget_reading(t: pd.DataFrame) -> str:
    """What the budget curve shows, from its verdicts: per teacher setup and student, each budget's difference and
    what its verdict says (helps = supports, hurts = contradicts, no verdict), and between which budgets the teacher
    stops helping when a budget where it helps is followed by a larger one where it hurts."""
    say = {"supports": "helps", "contradicts": "hurts"}
    lines = []
    who = t["setup"] if "setup" in t else (t["teacher"] if "teacher" in t else pd.Series("default", index=t.index))
    for (su, student), g in t.groupby([who, "student"], sort=False):
        g = g.sort_values("train_images")
        word = [say.get(v, "no verdict") for v in g.verdict]
        kind, _, rest = su.replace("tau", "τ").partition(", ")
        line = f"- {kind} teacher{f' ({rest})' if rest else ''}, {student} − free: " + ", ".join(
            f"{n / 1000:g}k {d:+.2f} pt ({w})" for n, d, w in zip(g.train_images, g.diff_mean, word))
        helps = [n for n, w in zip(g.train_images, word) if w == "helps"]
        hurts = [n for n, w in zip(g.train_images, word) if w == "hurts" and helps and n > max(helps)]
        if helps and hurts:
            line += f"; it stops helping between {max(helps) / 1000:g}k and {min(hurts) / 1000:g}k images"
        n, d = list(g.train_images), list(g.diff_mean)
        flip = [(a, b) for a, b, x, y in zip(n, n[1:], d, d[1:]) if x > 0 > y]
        if flip and len(g) > 2:
            line += f"; its mean turns negative between {flip[0][0] / 1000:g}k and {flip[0][1] / 1000:g}k"
        lines.append(line + ".")
    return "What it shows (computed from the verdicts above):\n\n" + "\n".join(lines)


FLOAT_NOISE = f"{EVIDENCE}/emulated_cpu"  # `evidence snapshot emulated_cpu` + `evidence replicate emulated_cpu`


def float_noise(root: str = ".") -> str:
    """The default run's headline cells rerun on an emulated other CPU type (docs/evidence/emulated_cpu): how far each
    run moved against the seed spread, and which verdicts flipped by the intervals alone and by the replication rule."""
    path = os.path.join(root, FLOAT_NOISE)
    if not os.path.isfile(os.path.join(path, "replicate_claims.csv")):
        return ("Not measured yet: `python -m odevit.repro.evidence snapshot emulated_cpu --clone CLONE ...` on a clone "
                "that reran 02_teacher and the headline cells with another floating-point path, then "
                "`python -m odevit.repro.evidence replicate emulated_cpu`.")
    meta = read_json(os.path.join(path, "study.json"))
    runs, cells = (pd.read_csv(os.path.join(path, f"replicate_{k}.csv")) for k in ("runs", "cells"))
    claims = pd.read_csv(os.path.join(path, "replicate_claims.csv"))
    decided = claims[~claims.primary_intervals.isin([stats.FACT, stats.NOT_A_CLAIM])]
    t = runs[runs.cell == "teacher"].iloc[0]
    per_seed = {c: "/".join(f"{d:+.2f}" for d in g.sort_values("seed").diff_pt) for c, g in runs.groupby("cell")}
    seeds = "/".join(str(x) for x in sorted(runs[runs.cell != "teacher"].seed.unique()))
    decisive = lambda col: decided[col].isin([stats.SUPPORTS, stats.CONTRADICTS])  # noqa: E731
    head = (f"`{meta['command']}` (commit {meta['commit']}, {meta['date']}, {cpu(meta['machine'])}): "
            f"{len(runs) - 1} student runs ({', '.join(cells.cell)} × their seeds) plus their teacher, on the same "
            f"seeds and data as the default run. The teacher moved {t.diff_pt:+.2f} pt ({100 * t.acc1_primary:.2f} → "
            f"{100 * t.acc1_replicate:.2f} %); the students moved by "
            + ", ".join(f"{r.cell} {per_seed[r.cell]} pt (seeds {seeds}; mean |difference| {r.mean_abs_diff_pt:.2f} = "
                        f"{r.ratio:.2f} × its seed std {r.primary_seed_std_pt:.2f})" for r in cells.itertuples())
            + ". The rule's model, a fresh draw of every seed, predicts 1.13 × the std with independent signs. A "
            "cell far below that (the free ODE's float noise stayed small) is where the model is conservative; a "
            "cell above it whose seeds all moved one way suggests (3 seeds cannot show more) that the teacher the "
            "distilled students share carried its own change into all of them — which no seed interval of one "
            "teacher sees, so for claims on distilled students (ts_*, retention*, the ablations of ref) "
            "“replicates” may be optimistic. "
            f"**Verdicts that changed: by the intervals alone {int(decided.flips_intervals.sum())} of {len(decided)} "
            f"({int((decided.flips_intervals & decisive('primary_intervals')).sum())} of them decisive here); by the "
            f"replication rule {int(decided.flips_rule.sum())} "
            f"({int((decided.flips_rule & decisive('primary_rule')).sum())} decisive here).** The rule protects the "
            "decisive verdicts only: a row it keeps inconclusive here may read decisive on a machine whose draw "
            "lands further from the boundary."
            + "".join(f" {n}" for n in meta.get("notes", [])))
    rows = ["| claim | intervals alone: this machine → emulated | replication rule: this machine → emulated |",
            "|---|---|---|"]
    for r in decided.itertuples():
        mark = lambda a, b: f"{a} → {a if a == b else f'**{b}**'}"  # noqa: E731
        rows.append(f"| `{r.claim}` | {mark(r.primary_intervals, r.replicate_intervals)} | "
                    f"{mark(r.primary_rule, r.replicate_rule)} |")
    return head + "\n\n" + "\n".join(rows)


SECTIONS: Dict[str, Callable[[str], str]] = {
    "converged-study": converged_study, "budget-curve": budget_curve, "float-noise": float_noise}
