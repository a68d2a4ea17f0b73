"""The notebooks' tables and figures (02–05, 07), from the run files (results/v2, results/v3) and the plan (params.yaml).

Every verdict shown is computed by the one verdict writer (`verdicts.judge`, plan v3's `verdicts.judge_v3`) on the runs
as they are when the notebook runs, never decided here; 07_verdicts writes them to results/vN/claims.csv. A cell or
row whose runs are not there yet says "not measured yet" and appears once its files exist. Nothing here trains or
imports the training code.
"""
from __future__ import annotations

import glob
import json
import math
import os
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Dict, Iterator, Optional, Sequence

import numpy as np
import pandas as pd

from . import pages, verdicts
from . import plan as plan_mod
from .config import chdir_root  # noqa: F401  (the notebooks call fg.chdir_root)
from .files import read_json, save_figure, write_csv  # noqa: F401  (the notebooks write tables, figures through it)
from .pages import budget_images, fill, pt, row_label  # row_label: a row id in words, as docs/v2.md names it

RESULTS, RESULTS_V3 = verdicts.RESULTS, verdicts.RESULTS_V3
NOT_MEASURED = "not measured yet"
HEADLINE_CELLS = plan_mod.HEADLINE
CELL_NAMES = {"ref": "label-free student (MSE + JaSMin)", "ce": "student with CE (MSE + JaSMin + CE)",  # in words
              "free": "free ODE (from scratch, no teacher)", "remedy": "remedy (N drawn from {6, 8, 12, 16, 24})",
              "layernorm": "student with LayerNorm", "jasmin_off": "student without JaSMin",
              "ref_weak": "student of plan 1's 3-epoch teacher"}
COLORS = {"ref": "#1b9e77", "ce": "#7570b3", "free": "#d95f02", "remedy": "#e7298a", "layernorm": "#66a61e",
          "jasmin_off": "#e6ab02", "ref_weak": "#a6761d", "teacher": "#444444"}
VERDICT_COLUMN = "verdict (odevit.repro.verdicts)"
WORDS_COLUMN = "row in words"
seed_ids = verdicts.seed_ids  # "2300–2305" (a run of consecutive seeds) or "2900, 2901, 2902"
images = plan_mod.images  # a study's training images (train_limit 0 = all 55,000)
families = plan_mod.families  # family -> its questions' ids, in the plan's order
Json = Dict[str, Any]  # a plan, a study's plan entry, a metrics.json
Names = Optional[Sequence[str]]  # question ids or cell ids asked for, in that order (None: all)


def load(results: str = RESULTS, plan_file: str = plan_mod.PLAN_FILE, version: int = 2) -> Json:
    """What a notebook reads: the plan, the runs, the selected teacher and every row's verdict on these runs (plan v2:
    `verdicts.judge`, with the measured machine shift; plan v3: `verdicts.judge_v3`, ci_* its deciding interval)."""
    plan = plan_mod.load(plan_file, version)
    runs = verdicts.runs(results)
    t_root = results if version == 2 else os.path.join(os.path.dirname(os.path.normpath(results)), "v2")
    teacher = verdicts.teacher(t_root)  # plan v3 keeps plan v2's teacher (results/v2/teacher beside results/v3)
    if version == 3:
        claims = verdicts.judge_v3(plan, runs, teacher, results).round(4)
        claims = claims.assign(ci_low=claims.decide_low, ci_high=claims.decide_high)
    else:
        claims = verdicts.judge(plan, runs, teacher, shift=verdicts.measured_shifts(results, runs)).round(4)
    with open(os.path.join(t_root, "teacher", "selected.json")) as f:
        selected = json.load(f)
    return dict(plan=plan, runs=runs, teacher=teacher, selected=selected, claims=claims, results=results)


# --- the verdict rows, as claims.csv gives them -------------------------------------------------------------------
def _asked(claims: pd.DataFrame, questions: Names, family: Optional[str]) -> pd.DataFrame:
    """The rows asked for: by question id (in that order), a whole family, or all."""
    if questions is not None:
        return claims.set_index("question").loc[list(questions)].reset_index()
    return claims[claims.family == family] if family else claims


def rows(claims: pd.DataFrame, questions: Names = None, family: Optional[str] = None) -> pd.DataFrame:
    """The rows asked for (by question id, in that order, or a whole family), with their verdicts from claims.csv."""
    c = _asked(claims, questions, family)
    return pd.DataFrame({
        "row": c.question, WORDS_COLUMN: [row_label(q) for q in c.question], "claim": c.claim,
        "training images": [f"{budget_images(b):,}" for b in c.budget],
        "seeds": [f"{int(n)} of {int(s)}" for n, s in zip(c.n, c.seeds)],
        "mean difference (pt)": [_num(x) for x in c["mean"]],
        "interval (pt)": [f"[{_num(lo)}, {_num(hi)}]" if _finite(lo) else "–" for lo, hi in zip(c.ci_low, c.ci_high)],
        "interval level (1 − α per row)": [f"{100 * (1 - a):.4g} %" for a in c.alpha_each],  # plan v2's, every test
        "test": [f"{t}" + (f", margin {m:.2f} pt" if t != "superiority" else "") for t, m in zip(c.test, c.margin)],
        # the runs of a row with no measured seed are those of one cell only: no count until the row has a seed
        "runs converged": [v if int(n) > 0 else "–" for v, n in zip(c.converged, c.n)], VERDICT_COLUMN: c.verdict}
    ).reset_index(drop=True)


def findings(claims: pd.DataFrame, name: str) -> str:
    """The README's claims notebook `name` shows, with their rows' numbers and verdicts (its opening answer)."""
    return pages.findings(claims, f"outputs/{name}.ipynb")


def rows_markdown(claims: pd.DataFrame, questions: Names = None, family: Optional[str] = None) -> str:
    """rows() as markdown (printed_rows reads it back), the claims, and the shift of a row made on two machine kinds."""
    t = rows(claims, questions, family)
    text = markdown(t.drop(columns=["claim"])) + "\n\n" + "\n".join(f"- **{r.row}**: {r.claim}" for r in t.itertuples())
    if "machine_shift" in claims:
        c = claims.set_index("question").loc[list(t.row)]
        text += "".join(f"\n\n**{q}** was made on two machine kinds. " + fill("v2-shift", r=r)
                        for q, r in c[c.machine_shift.notna()].iterrows())
    return text


def rows_v3_markdown(claims: pd.DataFrame, questions: Names = None, family: Optional[str] = None) -> str:
    """Plan v3's rows asked for as the README gives them (pages.v3_table: deciding interval, verdict), with the key."""
    return "\n".join(pages.v3_table(_asked(claims, questions, family)) + ["", pages.wrap(pages.V3_KEY)])


def markdown(table: pd.DataFrame) -> str:
    """A table as markdown, each cell as written (tabulate would reparse "+2.46" as 2.46 and "-7.50" as -7.5)."""
    return table.to_markdown(index=False, disable_numparse=True)


def acc(x: Any) -> str:
    """An Acc@1 in % to two decimals, a tie rounded up (a mean of six runs on 10,000 images can be exactly 82.955,
    which float rounding would print as 82.95 in one table and 82.96 in another), or – where missing."""
    return str(Decimal(f"{float(x):.9f}").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)) if _finite(x) else "–"


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _num(x: Any) -> str:
    return pt(float(x)) if _finite(x) else "–"


def printed_rows(markdown: str) -> Dict[str, str]:
    """{row id: verdict} read back from a markdown table rows_markdown wrote (the tests' reader)."""
    lines = [ln for ln in markdown.splitlines() if ln.startswith("|")]
    if not lines or VERDICT_COLUMN not in lines[0]:
        return {}
    head, *body = [[x.strip() for x in ln.strip("|").split("|")] for ln in lines[:1] + lines[2:]]
    i, j = head.index("row"), head.index(VERDICT_COLUMN)
    return {cells[i]: cells[j] for cells in body}


# --- which runs exist ---------------------------------------------------------------------------------------------
def _cell_runs(runs: pd.DataFrame, study: str, s: Json, cell: str) -> pd.DataFrame:
    """The runs of a study's cell (s: the study's plan entry) for the plan's seeds."""
    seeds = [int(x) for x in s["seeds"]]
    return runs[(runs.study == study) & (runs.cell == cell) & runs.seed.isin(seeds)] if len(runs) else runs


def _each_cell(plan: Json, runs: pd.DataFrame, studies: Sequence[str], cells: Names = None) -> Iterator[tuple]:
    """(study, its plan entry, cell, _cell_runs) per study asked for and per cell of `cells` it has (default: all)."""
    for name in studies:
        s = plan["studies"][name]
        for cell in (s["cells"] if cells is None else [c for c in cells if c in s["cells"]]):
            yield name, s, cell, _cell_runs(runs, name, s, cell)


def _spread(v: pd.Series) -> Dict[str, float]:
    """The mean of v and its range (nan where v is empty)."""
    return dict(mean=float(v.mean()), low=float(v.min()), high=float(v.max()))


def _points(plan: Json, runs: pd.DataFrame, studies: Sequence[str], cells: Names = None) -> pd.DataFrame:
    """Per study and cell (_each_cell): seeds measured of those planned, mean test Acc@1, its range, runs converged."""
    return pd.DataFrame([dict(study=name, images=images(s), cell=cell, n=len(got), planned=len(s["seeds"]),
                              **_spread(got.acc1 if len(got) else pd.Series(dtype=float)),
                              converged=int(got.converged.sum()) if len(got) else 0)
                         for name, s, cell, got in _each_cell(plan, runs, studies, cells)])


def coverage(plan: Json, runs: pd.DataFrame, studies: Sequence[str], cells: Names = None) -> pd.DataFrame:
    """Per (study, cell): seeds measured, runs converged, mean test Acc@1, "not measured yet" if a seed is missing."""
    return pd.DataFrame([{"training images": p.images, "cell": p.cell, "what": CELL_NAMES.get(p.cell, p.cell),
                          "seeds": f"{p.n} of {p.planned}", "converged": f"{p.converged} of {p.n}" if p.n else "–",
                          "mean test Acc@1 (%)": acc(p.mean) if p.n else "–",
                          "status": "measured" if p.n == p.planned else f"{NOT_MEASURED} ({p.n} of {p.planned} seeds)"}
                         for p in _points(plan, runs, studies, cells or None).itertuples()])


def plan_v3(plan_file: str) -> Json:
    """Plan v3 (params.yaml plan_v3: its rules and studies, plan v2's teacher), checked."""
    return plan_mod.load(plan_file, 3)


def coverage_v3(plan_file: str, cells: Sequence[str]) -> pd.DataFrame:
    """Plan v3's `cells` (fast.notebook_cells) per study: seeds made, mean test Acc@1, best epochs and machine."""
    plan = plan_v3(plan_file)
    return pd.DataFrame([{"study": name, "training images": images(s), "cell": cell,
                          "seeds made": f"{len(got)} of {len(s['seeds'])}",
                          "mean test Acc@1 (%)": acc(got.acc1.mean()) if len(got) else "–",
                          "best epochs": ", ".join(str(int(e)) for e in got.best_epoch) if len(got) else "–",
                          "machine": ", ".join(sorted(set(got.device))) if len(got) else "–"}
                         for name, s, cell, got in _each_cell(plan, verdicts.runs(verdicts.RESULTS_V3), plan["studies"])
                         if cell in cells])


# --- 02: the teacher ----------------------------------------------------------------------------------------------
def teacher_runs(results: str = RESULTS) -> Dict[int, Json]:
    """Per teacher seed: its metrics.json and history.csv."""
    d = os.path.join(results, "teacher")
    files = {n: os.path.join(d, n, "metrics.json") for n in sorted(os.listdir(d)) if n.startswith("s")}
    return {int(m["seed"]): dict(metrics=m, history=pd.read_csv(os.path.join(d, n, "history.csv")))
            for n, m in ((n, read_json(f)) for n, f in files.items() if os.path.isfile(f))}


def floor_fit(val_acc_pts: Sequence[float], floor_frac: float) -> Dict[str, Any]:
    """The floor-slope rule's least-squares line over the last floor_frac of the epochs (params.yaml
    rules.convergence): its epochs (1-based), fitted values and its gain (slope x window) in points."""
    y = np.asarray(val_acc_pts, dtype=float)
    w = max(2, int(round(floor_frac * len(y))))
    slope, icpt = np.polyfit(np.arange(w), y[-w:], 1)
    return dict(epochs=np.arange(len(y) - w + 1, len(y) + 1), fit=icpt + slope * np.arange(w), gain=float(slope * w))


def teacher_table(truns: Dict[int, Json], selected: Json) -> pd.DataFrame:
    """One row per teacher seed: its metrics.json (accuracies, the floor-slope rule) and whether it was selected."""
    ms = {seed: t["metrics"] for seed, t in sorted(truns.items())}
    return pd.DataFrame([{"seed": seed, "epochs": m["epochs"], "best epoch": m["best_epoch"],
                          "validation Acc@1 (%)": round(100 * m["val_acc1"], 2),
                          "test Acc@1 (%)": round(100 * m["acc1"], 2),
                          "floor-phase gain (pt)": round(m["gain_floor_pts"], 2),
                          "threshold: 1 SE (pt)": round(m["threshold_pts"], 2),
                          "converged (floor-slope rule)": bool(m["converged"]),
                          "selected (best validation)": seed == int(selected["seed"])} for seed, m in ms.items()])


def selection_note(table: pd.DataFrame, selected: Json) -> str:
    """One sentence on the selection (selected.json): the seed, its accuracies, the seeds' spread, a tie if any."""
    v = table["validation Acc@1 (%)"]
    tied = table[v == v.max()].seed.tolist()
    tie = (f" Seeds {', '.join(map(str, tied))} tie on validation Acc@1; the rule takes the first of the plan's list."
           if len(tied) > 1 else "")
    return (f"Selected: seed **{selected['seed']}** (validation Acc@1 {100 * selected['val_acc1']:.2f} %, test Acc@1 "
            f"{100 * selected['acc1']:.2f} %); the three seeds' test Acc@1 "
            f"{', '.join(f'{a:.2f}' for a in selected['seed_acc1_pts'])} %, SD {selected['seed_sd_pts']:.2f} pt; "
            f"converged by the floor-slope rule: {sum(selected['converged'])} of {len(selected['converged'])}.{tie}")


def teacher_figure(truns: Dict[int, Json], plan: Json):
    """Left: the teacher seeds' validation Acc@1 by epoch, the floor phase shaded; right: that phase and its fits."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    colors = plt.get_cmap("tab10")
    for i, (seed, t) in enumerate(sorted(truns.items())):
        h, c = t["history"], colors(i)
        y = 100 * h.val_acc1.to_numpy()
        f = floor_fit(y, float(plan["rules"]["schedule"]["floor_frac"]))
        ax[0].plot(h.epoch, y, color=c, lw=1.4, label=f"seed {seed}")
        ax[1].plot(h.epoch[-len(f["epochs"]):], y[-len(f["epochs"]):], "o", color=c, ms=4, label=f"seed {seed}")
        ax[1].plot(f["epochs"], f["fit"], color=c, lw=1.5, ls="--")
    ax[0].axvspan(min(f["epochs"]) - 0.5, max(f["epochs"]) + 0.5, color="#dddddd", zorder=0,
                  label="floor phase (constant LR)")
    for a in ax:
        a.set(xlabel="epoch", ylabel="validation Acc@1 (%)")
        a.grid(alpha=0.3)
    ax[0].set_title("all epochs", fontsize=9)
    ax[1].set_title("floor phase: dots = epochs, dashed = least-squares line", fontsize=9)
    fig.legend(handles=ax[0].get_legend_handles_labels()[0], fontsize=8, loc="outside lower center",
               ncol=len(truns) + 1)  # below the panels: it covers no point
    fig.suptitle(f"Plan v2 teacher (discrete ViT, depth 6): {len(truns)} seeds ({', '.join(map(str, sorted(truns)))}), "
                 f"55,000 training images x {plan['teacher']['epochs']} epochs, validation on 5,000 held-out images",
                 fontsize=10)
    return fig


def teacher_vs_free(plan: Json, runs: pd.DataFrame, teacher: Json, claims: pd.DataFrame) -> pd.DataFrame:
    """Per headline budget: the free ODE's and the teacher's test Acc@1, their difference, claims.csv's `fair`."""
    out = []
    for p in budget_points(plan, runs, ["free"]).itertuples():
        fair = claims[(claims.study == p.study) & claims.question.str.contains("minus_free")].fair.dropna()
        out.append({"training images": p.images, "free ODE seeds": f"{p.n} of {p.planned}",
                    "free ODE test Acc@1 (%)": acc(p.mean) if p.n else NOT_MEASURED,
                    "teacher test Acc@1 (%)": acc(teacher["acc1"]),
                    "teacher - free (pt)": pt(teacher["acc1"] - p.mean) if p.n else NOT_MEASURED,
                    "fair test (claims.csv)": (("yes" if str(fair.iloc[0]) == "True" else "no: teacher not above free")
                                               if len(fair) and p.n == p.planned else NOT_MEASURED)})
    return pd.DataFrame(out)


def tau_table(results: str, selected: Json, plan: Json, runs: pd.DataFrame) -> pd.DataFrame:
    """The span of the teacher's layer distances, tau by the plan's rule (ratio x span), and the taus recorded."""
    d = pd.read_csv(os.path.join(results, "teacher", "distances.csv"))
    ratio = float(plan["rules"]["tau_rule"]["ratio"])
    span = float(d.distance.max() - d.distance.min())
    taus = sorted({round(float(x), 6) for x in runs.tau.dropna()}) if len(runs) and "tau" in runs else []
    return pd.DataFrame([{"distance span (max - min)": round(span, 3), "ratio (plan)": ratio,
                          "tau by the rule": round(ratio * span, 3),
                          "tau recorded (selected.json)": round(float(selected["tau"]), 3),
                          "tau the students recorded": ", ".join(f"{t:.3f}" for t in taus) or NOT_MEASURED}])


def distances_figure(results: str, selected: Json):
    """The selected teacher's layer distances, labelled with the first strong-teacher student's checkpoint steps."""
    import matplotlib.pyplot as plt

    d = pd.read_csv(os.path.join(results, "teacher", "distances.csv"))
    fig, ax = plt.subplots(figsize=(6.5, 3.4), layout="constrained")
    ax.bar(d.layer, d.distance, color=COLORS["teacher"])
    ax.set(xlabel="teacher layer", ylabel="distance to the previous layer's state")
    students = (read_json(f) for f in sorted(glob.glob(os.path.join(results, "v2_*", "ref", "s*", "metrics.json"))))
    ck = next((m["checkpoints"] for m in students if m.get("teacher", "strong") == "strong" and m.get("checkpoints")),
              [])
    for layer, step, dist in zip(d.layer, ck, d.distance):
        ax.text(layer, dist, f"step {int(step)}", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, 1.15 * float(d.distance.max()))
    ax.set_title(f"Plan v2 teacher, selected seed {selected['seed']}: layer distances; label = the student's "
                 "checkpoint step (N = 12)", fontsize=9)
    return fig


# --- 03: the budget curve -----------------------------------------------------------------------------------------
def budget_points(plan: Json, runs: pd.DataFrame, cells: Sequence[str] = HEADLINE_CELLS) -> pd.DataFrame:
    """Per headline budget and cell: seeds measured of those planned, mean test Acc@1 and its seeds' range."""
    fam = plan["rules"]["primary_family"]
    return _points(plan, runs, [n for n, s in plan["studies"].items() if s.get("family") == fam], cells)


def budget_figure(points: pd.DataFrame, claims: pd.DataFrame, teacher: Json, plan: Json):
    """Left: test Acc@1 of the headline cells by training images (mean, bar = the seeds' range), the teacher's line, a
    budget not measured yet named. Right: each headline row's paired difference and interval (claims.csv)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(13, 4.6), layout="constrained", gridspec_kw={"width_ratios": [1.1, 1]})
    budgets = sorted(points.images.unique())
    off = {"ref": 0.96, "ce": 1.0, "free": 1.04}
    for cell, g in points.groupby("cell", sort=False):
        g = g[g.n > 0].sort_values("images")
        if len(g):
            ax[0].errorbar(g.images * off.get(cell, 1.0), g["mean"], yerr=[g["mean"] - g.low, g.high - g["mean"]],
                           color=COLORS[cell], marker="o", ms=5, capsize=3, lw=1.5, label=CELL_NAMES[cell])
    ax[0].axhline(teacher["acc1"], color=COLORS["teacher"], ls="--", lw=1,
                  label=f"teacher {teacher['acc1']:.2f} % (55,000 images)")
    for b in budgets:
        if points[points.images == b].n.min() < points[points.images == b].planned.max():
            ax[0].annotate(NOT_MEASURED.replace(" yet", "\nyet"), (b, 0.5), xycoords=("data", "axes fraction"),
                           ha="center", va="center", fontsize=8, color="#b00000")  # inside the panel, clear of its edge
    ax[0].set(xscale="log", xticks=budgets, xticklabels=[f"{b:,}" for b in budgets], xlim=(min(budgets) / 1.5,
              max(budgets) * 1.5), xlabel="training images the student sees", ylabel="test Acc@1 (%), 10,000 images")
    ax[0].minorticks_off()
    ax[0].legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    ax[0].grid(alpha=0.3)
    ax[0].set_title("test Acc@1 by budget (dot = mean over seeds, bar = their range)", fontsize=9)
    fam, version = plan["rules"]["primary_family"], plan.get("version", 2)
    v3 = version == 3  # plan v3's rows: the deciding interval, delta dashed
    c = claims[claims.family == fam].reset_index(drop=True)  # every headline row, retention_55k included
    verdicts.draw_rows(ax[1], c, v3)  # and its y limits
    ax[1].axvline(0, color="black", lw=0.8)
    ax[1].set_yticks(range(len(c)), [f"{row_label(q)}, {images(plan['studies'][st]):,} images"
                                     for q, st in zip(c.question, c.study)][::-1], fontsize=8)
    ax[1].set_xlabel("paired difference in test Acc@1 (pt, by seed): student − free ODE, or student − teacher\n"
                     + ("bar = the row's deciding interval, dashed = delta (the smallest effect of interest)" if v3 else
                        "bar = the row's interval, dotted = the non-inferiority margin"), fontsize=9)
    ax[1].set_title(f"the headline rows (verdicts by plan v{version}'s rules, as results/v{version}/claims.csv)",
                    fontsize=9)
    ax[1].grid(alpha=0.3, axis="x")
    seeds = ", ".join(f"{seed_ids(plan['studies'][s]['seeds'])} ({images(plan['studies'][s]):,})"
                      for s in dict.fromkeys(points.study))
    fig.suptitle(f"Plan v{version}, does a teacher help? Fashion-MNIST, teacher trained on 55,000 images\n"
                 f"seeds by training images: {seeds}", fontsize=10)
    return fig


# --- 04: the step count -------------------------------------------------------------------------------------------
def step_points(plan: Json, runs: pd.DataFrame, study: str = "v2_10k",
                cells: Sequence[str] = ("ref", "free", "remedy")) -> pd.DataFrame:
    """Per cell and step count (robustness steps and 12): mean test Acc@1, its range, whether the cell trained at it."""
    s = plan["studies"][study]
    counts = sorted(set(int(n) for n in s["robustness"]["steps"]) | {12})
    out = []
    for cell in cells:
        got = _cell_runs(runs, study, s, cell)
        trained = [int(n) for n in (s["cells"].get(cell) or {}).get("train_steps", [12])]
        for n in counts:
            v = got[f"acc1_n{n}"].dropna() if len(got) and f"acc1_n{n}" in got else pd.Series(dtype=float)
            out.append(dict(cell=cell, N=n, trained=n in trained, n=len(v), planned=len(s["seeds"]), **_spread(v),
                            converged=f"{int(got.converged.sum())} of {len(got)}" if len(got) else "–"))
    return pd.DataFrame(out)


def step_figure(points: pd.DataFrame, plan: Json, study: str = "v2_10k"):
    """Test Acc@1 by step count per cell (filled = a count it trained at, bar = the seeds' range); right: 70-90 %."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    s = plan["studies"][study]
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    off = {"ref": -0.12, "free": 0.0, "remedy": 0.12}
    for cell, g in points.groupby("cell", sort=False):
        g = g[g.n > 0]
        if not len(g):
            continue
        for a in ax:
            x = g.N + off.get(cell, 0)
            a.plot(x, g["mean"], color=COLORS[cell], lw=1, alpha=0.6)
            a.errorbar(x, g["mean"], yerr=[g["mean"] - g.low, g.high - g["mean"]], fmt="none", ecolor=COLORS[cell],
                       capsize=2, lw=1)
            for tr in (True, False):
                h = g[g.trained == tr]
                a.plot(h.N + off.get(cell, 0), h["mean"], "o", ms=6, color=COLORS[cell],
                       mfc=COLORS[cell] if tr else "white", mec=COLORS[cell], ls="none")
    for a in ax:
        a.set(xticks=sorted(points.N.unique()), ylabel="test Acc@1 (%), all 10,000 images",
              xlabel="solver steps N at test time (the model trained at N = 12 unless marked)")
        a.grid(alpha=0.3)
    ax[1].set_ylim(70, 90)
    ax[0].set_title("every count (filled dot = a count the cell trained at, open = never trained)", fontsize=9)
    ax[1].set_title("the same, 70-90 % (points below are off this scale; see left)", fontsize=9)
    handles = [Line2D([], [], color=COLORS[c], marker="o", label=CELL_NAMES[c]) for c in points.cell.unique()]
    handles += [Line2D([], [], color="grey", marker="o", ls="none", label="trained at this count"),
                Line2D([], [], color="grey", marker="o", mfc="white", ls="none", label="never trained at it")]
    ax[0].legend(handles=handles, fontsize=8, loc="lower right")
    fig.suptitle(f"Plan v{plan.get('version', 2)}, step count ({study}): {len(s['seeds'])} seeds per cell "
                 f"({seed_ids(s['seeds'])}), {images(s):,} training images, test on all 10,000 test images",
                 fontsize=10)
    return fig


def step_table(points: pd.DataFrame) -> pd.DataFrame:
    """step_points' mean test Acc@1 by N (rows) and cell (columns) through `acc`: N = 12 prints as coverage() does."""
    t = points.pivot(index="N", columns="cell", values="mean")[list(dict.fromkeys(points.cell))]
    t = t.map(acc) if hasattr(t, "map") else t.applymap(acc)
    t.columns = pd.Index([f"{c}: {CELL_NAMES.get(c, c)}" for c in t.columns], name="mean test Acc@1 (%) of")
    return t


# --- 05: design choices ------------------------------------------------------------------------------------------
def paired_figure(plan: Json, runs: pd.DataFrame, claims: pd.DataFrame, questions: Sequence[str],
                  study: str = "v2_10k"):
    """One panel per paired row: each seed's test Acc@1 in its two cells, joined by a line, the verdict in the title."""
    import matplotlib.pyplot as plt

    s = plan["studies"][study]
    qs = {q["id"]: q for q in s["questions"]}
    verdict = claims.set_index("question").verdict
    fig, axes = plt.subplots(1, len(questions), figsize=(4.2 * len(questions), 4.0), layout="constrained",
                             squeeze=False)
    for ax, qid in zip(axes[0], questions):
        a, b = qs[qid]["a"], qs[qid]["b"]
        va, vb = (_cell_runs(runs, study, s, c).set_index("seed").acc1 if len(runs) else pd.Series(dtype=float)
                  for c in (a, b))
        for x, v, c in ((0, va, a), (1, vb, b)):
            if len(v):
                ax.plot([x] * len(v), v, "o", color=COLORS.get(c, "grey"), ms=5)
            else:
                ax.text(x, 0.5, NOT_MEASURED, transform=ax.get_xaxis_transform(), ha="center", fontsize=8,
                        color="#b00000")
        for sd in sorted(set(va.index) & set(vb.index)):
            ax.plot([0, 1], [va[sd], vb[sd]], color="grey", lw=0.8, alpha=0.7)
        ax.set_xticks([0, 1], [CELL_NAMES.get(c, c).replace(" (", "\n(") for c in (a, b)], fontsize=8)
        ax.set(xlim=(-0.5, 1.5), ylabel="test Acc@1 (%), 10,000 images")
        ax.grid(alpha=0.3, axis="y")
        ax.set_title(f"{row_label(qid)} ({qid})\nverdict: {verdict[qid]}", fontsize=9)
    fig.suptitle(f"Plan v{plan.get('version', 2)}, design choices and teacher strength: {images(s):,} training images, "
                 f"seeds {seed_ids(s['seeds'])} ({len(s['seeds'])}), a line joins one seed's two runs", fontsize=10)
    return fig


def student_curves(plan: Json, study: str, cells: Sequence[str], results: str = RESULTS_V3):
    """Per cell, each seed's validation Acc@1 by epoch, best.pt's epoch (dot), the floor window (grey); a run the plan
    flags gets its floor line run on (dashed) and its gain: plan v3's learning left g (verdicts.learning_left at the
    largest alpha_row / R of the rows reading the cell: every run a row flags), plan v2's floor gain (not converged)."""
    import matplotlib.pyplot as plt

    s, conv, frac = plan["studies"][study], plan["rules"]["convergence"], float(plan["rules"]["schedule"]["floor_frac"])
    v3, hz = (True, float(conv["horizon"])) if conv["rule"] == "learning_left" else (False, 1.0)  # v2: slope x window
    fig, axes = plt.subplots(1, len(cells), figsize=(3.6 * len(cells), 4.0), layout="constrained", squeeze=False,
                             sharex=True, sharey=True)
    lims = [(100.0, 0.0)]  # (lowest second-half accuracy, highest point drawn) per run
    for ax, c in zip(axes[0], cells):
        rs = [plan_mod.row_runs(s, q) for q in s["questions"] if c in (q["a"], q.get("b"))] if v3 else []
        alpha = float(conv["alpha_row"]) / min(rs, default=math.inf) if v3 else 0.0  # no row reads it: none flagged
        hs = verdicts.histories(results, study, c, [int(x) for x in s["seeds"]])
        for i, (seed, h) in enumerate(sorted(hs.items())):
            y, col, e = 100 * np.asarray(h), plt.get_cmap("tab10")(i), len(h)
            if v3:
                ll = verdicts.learning_left(h, frac, alpha, hz)
            else:  # plan v2's floor-slope rule as the run's metrics.json recorded it, its line floor_fit's
                f, m = floor_fit(y, frac), read_json(os.path.join(results, study, c, f"s{seed}", "metrics.json"))
                ll = dict(flagged=not m["converged"], g=m["gain_floor_pts"], window=len(f["epochs"]),
                          slope=f["gain"] / len(f["epochs"]))
            flag = f": {'still learning' if v3 else 'not converged'}, +{ll['g']:.2f} pt" if ll["flagged"] else ""
            ax.plot(range(1, e + 1), y, color=col, lw=1.0, label=f"s{seed}{flag}")
            ax.plot(int(np.argmax(y)) + 1, y.max(), "o", color=col, ms=3)
            if ll["flagged"]:
                x = np.arange(e - ll["window"] + 1, e + 1 + int(round(hz * ll["window"])))
                line = y[-ll["window"]:].mean() + ll["slope"] * (x - e + (ll["window"] - 1) / 2)
                ax.plot(x, line, "--", color=col)
            lims.append((y[e // 2:].min(), max(y.max(), line[-1]) if ll["flagged"] else y.max()))  # top: a line's end
        if hs:  # the floor window: the same for every seed of the study
            ax.axvspan(e - ll["window"] + 0.5, e + 0.5, color="#e6e6e6", zorder=0)
            ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # below: it covers no curve
        else:
            ax.text(0.5, 0.5, NOT_MEASURED, transform=ax.transAxes, ha="center", color="#b00000")
        ax.set_title(CELL_NAMES.get(c, c), fontsize=9)
        ax.set(xlabel="epoch")
        ax.grid(alpha=0.3)
    axes[0][0].set(ylabel="validation Acc@1 (%)", ylim=(min(lo for lo, _ in lims) - 2, max(h for _, h in lims) + 0.5))
    fig.suptitle(f"Plan v{plan['version']} {study} ({images(s):,} training images x {s['budget']['epochs']} epochs; y "
                 "cut below the 2nd half): grey = floor window, dashed = its OLS line run on, " + (
                     "g = its end - best (dot)" if v3 else "the gain = its rise over as long again"), fontsize=9)
    return fig


# --- 07: every row ------------------------------------------------------------------------------------------------
def verdict_table(claims: pd.DataFrame) -> pd.DataFrame:
    """Every v2 row as rows() gives it, its family first and whether it holds across the families, by family."""
    order = pd.Categorical(claims.family, categories=list(dict.fromkeys(claims.family))).codes
    claims = claims.iloc[np.argsort(order, kind="stable")]
    t = rows(claims)
    t.insert(0, "family", claims.family.str.replace("v2_", "").to_numpy())
    t["holds at alpha / 4 families"] = [{"True": "yes", "False": "no"}.get(str(h), "–")
                                        for h in claims.holds_across_families]
    return t


def verdict_markdown(claims: pd.DataFrame) -> str:
    """verdict_table as markdown (what notebook 07 displays), without the claims' sentences."""
    return markdown(verdict_table(claims).drop(columns=["claim"]))


def verdict_figure(claims: pd.DataFrame, family: str, plan: Json, out: str = RESULTS):
    """verdicts.figure for one family, rows in words (row_label), saved as out/verdicts_<family>.png (docs/v2.md's)."""
    fig = verdicts.figure(claims, family, plan, label=row_label)
    save_figure(fig, os.path.join(out, f"verdicts_{family}.png"))
    return fig
