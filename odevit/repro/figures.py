"""The notebooks' tables and figures (02–05, 07), from the run files (results/v2, results/v3) and the plan (params.yaml).

Every verdict shown is computed by the one verdict writer (`verdicts.judge`, plan v3's `verdicts.judge_v3`) on the runs
as they are when the notebook runs, never decided here; 07_verdicts writes them to results/vN/claims.csv. A cell or row whose runs are not there
yet says "not measured yet" and appears once its files exist. Nothing here trains or imports the training code.
"""
from __future__ import annotations

import json
import math
import os
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from . import plan as plan_mod
from . import pages
from .files import write_csv  # noqa: F401  (the notebooks write their tables through figures)
from . import verdicts
from .pages import budget_images, row_label  # a row id in words (docs/templates/words.yaml v2_labels), as docs/v2.md names it
from .pages import fill  # docs/templates: the machine-shift sentence, as docs/v2.md gives it
from .pages import pt  # a signed difference in pt, never "-0.00": every difference these tables print

RESULTS, RESULTS_V3 = verdicts.RESULTS, verdicts.RESULTS_V3
NOT_MEASURED = "not measured yet"
HEADLINE_CELLS = plan_mod.HEADLINE
CELL_NAMES = {  # plain words for the plan's cell ids
    "ref": "label-free student (MSE + JaSMin)",
    "ce": "student with CE (MSE + JaSMin + CE)",
    "free": "free ODE (from scratch, no teacher)",
    "remedy": "remedy (N drawn from {6, 8, 12, 16, 24})",
    "layernorm": "student with LayerNorm",
    "jasmin_off": "student without JaSMin",
    "ref_weak": "student of plan 1's 3-epoch teacher",
}
COLORS = {"ref": "#1b9e77", "ce": "#7570b3", "free": "#d95f02", "remedy": "#e7298a", "layernorm": "#66a61e",
          "jasmin_off": "#e6ab02", "ref_weak": "#a6761d", "teacher": "#444444"}
VERDICT_COLUMN = "verdict (odevit.repro.verdicts)"
WORDS_COLUMN = "row in words"
seed_ids = verdicts.seed_ids  # "2300–2305" (a run of consecutive seeds) or "2900, 2901, 2902"


from .config import chdir_root  # noqa: E402,F401  (the notebooks call v2.chdir_root)

images = plan_mod.images  # a study's training images (train_limit 0 = all 55,000)


def load(results: str = RESULTS, plan_file: str = plan_mod.PLAN_FILE, version: int = 2) -> Dict[str, Any]:
    """What a notebook reads: the plan, the student runs, the selected teacher, its seeds' runs and every row's
    verdict on these runs (plan v2: `verdicts.judge`, with the machine shift measured by the reruns beside them;
    plan v3, runs in results/v3: `verdicts.judge_v3`, its interval columns the deciding interval)."""
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

def rows(claims: pd.DataFrame, questions: Optional[Sequence[str]] = None, family: Optional[str] = None
         ) -> pd.DataFrame:
    """The rows asked for (by question id, in that order, or a whole family), with their verdicts from claims.csv."""
    if questions is not None:
        c = claims.set_index("question").loc[list(questions)].reset_index()
    else:
        c = claims[claims.family == family] if family else claims
    out = pd.DataFrame({
        "row": c.question, WORDS_COLUMN: [row_label(q) for q in c.question], "claim": c.claim,
        "training images": [f"{budget_images(b):,}" for b in c.budget],
        "seeds": [f"{int(n)} of {int(s)}" for n, s in zip(c.n, c.seeds)],
        "mean difference (pt)": [_num(x) for x in c["mean"]],
        "interval (pt)": [f"[{_num(lo)}, {_num(hi)}]" if _finite(lo) else "–" for lo, hi in zip(c.ci_low, c.ci_high)],
        "test": [f"{t}" + (f", margin {m:.2f} pt" if t != "superiority" else "") for t, m in zip(c.test, c.margin)],
        # the runs of a row with no measured seed are those of one cell only: no count until the row has a seed
        "runs converged": [v if int(n) > 0 else "–" for v, n in zip(c.converged, c.n)], VERDICT_COLUMN: c.verdict})
    return out.reset_index(drop=True)


def findings(claims: pd.DataFrame, name: str) -> str:
    """The README's claims (its table's wording) that notebook `name` shows, each with its rows' mean differences,
    intervals and verdicts from claims.csv, as sentences (pages.findings): the notebook's opening answer."""
    return pages.findings(claims, f"outputs/{name}.ipynb")


def rows_markdown(claims: pd.DataFrame, questions: Optional[Sequence[str]] = None, family: Optional[str] = None
                  ) -> str:
    """rows() as a markdown table (what the notebooks display; tests read its row and verdict columns back)."""
    t = rows(claims, questions, family)
    return markdown(t.drop(columns=["claim"])) + "\n\n" + "\n".join(
        f"- **{r.row}**: {r.claim}" for r in t.itertuples()) + _shift_lines(claims, t.row)


def rows_v3_markdown(claims: pd.DataFrame, questions: Optional[Sequence[str]] = None, family: Optional[str] = None
                     ) -> str:
    """Plan v3's rows asked for (by question id or a whole family) as the README and docs/v3.md give them
    (pages.v3_table: the deciding interval beside each verdict, and what it says of plan v2's row), with the key."""
    if questions is not None:
        c = claims.set_index("question").loc[list(questions)].reset_index()
    else:
        c = claims[claims.family == family] if family else claims
    return "\n".join(pages.v3_table(c) + ["", pages.wrap(pages.V3_KEY)])


def _shift_lines(claims: pd.DataFrame, questions: Sequence[str]) -> str:
    """For the rows made on two machine kinds: the shift measured between them and what the test alone reads under it
    (docs/templates/v2-shift.md.j2, the sentence docs/v2.md gives too)."""
    if "machine_shift" not in claims:
        return ""
    c = claims.set_index("question").loc[list(questions)]
    c = c[c.machine_shift.notna()]
    return "".join(f"\n\n**{q}** was made on two machine kinds. " + fill("v2-shift", r=r) for q, r in c.iterrows())


def markdown(table: pd.DataFrame) -> str:
    """A table as markdown, each cell as written (tabulate would reparse "+2.46" as 2.46 and "-7.50" as -7.5)."""
    return table.to_markdown(index=False, disable_numparse=True)


def acc(x: Any) -> str:
    """An Acc@1 in % to two decimals, a tie rounded up (a mean of six runs on 10,000 images can be exactly 82.955,
    which float rounding would print as 82.95 in one table and 82.96 in another), or – where missing."""
    if not _finite(x):
        return "–"
    return str(Decimal(f"{float(x):.9f}").quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


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
    head = [h.strip() for h in lines[0].strip("|").split("|")]
    i, j = head.index("row"), head.index(VERDICT_COLUMN)
    out = {}
    for ln in lines[2:]:
        cells = [x.strip() for x in ln.strip("|").split("|")]
        out[cells[i]] = cells[j]
    return out


# --- which runs exist ---------------------------------------------------------------------------------------------

def coverage(plan: Dict[str, Any], runs: pd.DataFrame, studies: Sequence[str], cells: Optional[Sequence[str]] = None
             ) -> pd.DataFrame:
    """Per (study, cell) of the plan: its seeds measured of those planned, how many converged by the floor-slope
    rule, its mean test Acc@1; "not measured yet" where a seed is missing."""
    out = []
    for name in studies:
        s = plan["studies"][name]
        seeds = [int(x) for x in s["seeds"]]
        for cell in (cells or s["cells"]):
            if cell not in s["cells"]:
                continue
            got = runs[(runs.study == name) & (runs.cell == cell) & runs.seed.isin(seeds)] if len(runs) else runs
            n = len(got)
            out.append({"training images": images(s), "cell": cell, "what": CELL_NAMES.get(cell, cell),
                        "seeds": f"{n} of {len(seeds)}",
                        "converged": f"{int(got.converged.sum())} of {n}" if n else "–",
                        "mean test Acc@1 (%)": acc(got.acc1.mean()) if n else "–",
                        "status": "measured" if n == len(seeds) else f"{NOT_MEASURED} ({n} of {len(seeds)} seeds)"})
    return pd.DataFrame(out)


def plan_v3(plan_file: str) -> Dict[str, Any]:
    """Plan v3 (params.yaml plan_v3: its rules and studies, plan v2's teacher), checked."""
    return plan_mod.load(plan_file, 3)


def coverage_v3(plan_file: str, cells: Sequence[str]) -> pd.DataFrame:
    """Plan v3's `cells` (those a training notebook makes: fast.notebook_cells): per study and cell the seeds made of
    those planned, their mean test Acc@1, best epochs and machine (what 07_verdicts' rows wait for)."""
    plan = plan_mod.load(plan_file, 3)
    runs = verdicts.runs(verdicts.RESULTS_V3)
    out = []
    for name, s in plan["studies"].items():
        seeds = [int(x) for x in s["seeds"]]
        for cell in (c for c in s["cells"] if c in cells):
            got = runs[(runs.study == name) & (runs.cell == cell) & runs.seed.isin(seeds)] if len(runs) else runs
            out.append({"study": name, "training images": images(s), "cell": cell, "seeds made": f"{len(got)} of {len(seeds)}",
                        "mean test Acc@1 (%)": acc(got.acc1.mean()) if len(got) else "–",
                        "best epochs": ", ".join(str(int(e)) for e in got.best_epoch) if len(got) else "–",
                        "machine": ", ".join(sorted(set(got.device))) if len(got) else "–"})
    return pd.DataFrame(out)


# --- 08: the teacher ----------------------------------------------------------------------------------------------

def teacher_runs(results: str = RESULTS) -> Dict[int, Dict[str, Any]]:
    """Per teacher seed: its metrics.json and history.csv."""
    out = {}
    d = os.path.join(results, "teacher")
    for name in sorted(os.listdir(d)):
        m = os.path.join(d, name, "metrics.json")
        if name.startswith("s") and os.path.isfile(m):
            with open(m) as f:
                metrics = json.load(f)
            out[int(metrics["seed"])] = dict(metrics=metrics, history=pd.read_csv(os.path.join(d, name, "history.csv")))
    return out


def floor_fit(val_acc_pts: Sequence[float], floor_frac: float) -> Dict[str, Any]:
    """The floor-slope rule's least-squares line over the last floor_frac of the epochs (params.yaml
    rules.convergence): its epochs (1-based), fitted values and its gain (slope x window) in points."""
    y = np.asarray(val_acc_pts, dtype=float)
    w = max(2, int(round(floor_frac * len(y))))
    x = np.arange(w, dtype=float)
    yy = y[-w:]
    slope = float(((x - x.mean()) * (yy - yy.mean())).sum() / ((x - x.mean()) ** 2).sum())
    fit = yy.mean() + slope * (x - x.mean())
    return dict(epochs=np.arange(len(y) - w + 1, len(y) + 1), fit=fit, gain=slope * w)


def teacher_table(truns: Dict[int, Dict[str, Any]], selected: Dict[str, Any]) -> pd.DataFrame:
    """One row per teacher seed: its best epoch, validation and test Acc@1, the floor-phase gain against its
    threshold and the rule's result (metrics.json), and which seed was selected (best validation Acc@1)."""
    out = []
    for seed, t in sorted(truns.items()):
        m = t["metrics"]
        out.append({"seed": seed, "epochs": m["epochs"], "best epoch": m["best_epoch"],
                    "validation Acc@1 (%)": round(100 * m["val_acc1"], 2), "test Acc@1 (%)": round(100 * m["acc1"], 2),
                    "floor-phase gain (pt)": round(m["gain_floor_pts"], 2),
                    "threshold: 1 SE (pt)": round(m["threshold_pts"], 2),
                    "converged (floor-slope rule)": bool(m["converged"]),
                    "selected (best validation)": seed == int(selected["seed"])})
    return pd.DataFrame(out)


def selection_note(table: pd.DataFrame, selected: Dict[str, Any]) -> str:
    """One sentence on the selection (teacher_table's rows, selected.json): the seed that teaches, its accuracies,
    the seeds' spread, and a tie on validation Acc@1 where there is one (the plan's rule takes the first seed of its
    list)."""
    v = table["validation Acc@1 (%)"]
    tied = table[v == v.max()].seed.tolist()
    tie = (f" Seeds {', '.join(map(str, tied))} tie on validation Acc@1; the rule takes the first of the plan's list."
           if len(tied) > 1 else "")
    return (f"Selected: seed **{selected['seed']}** (validation Acc@1 {100 * selected['val_acc1']:.2f} %, test Acc@1 "
            f"{100 * selected['acc1']:.2f} %); the three seeds' test Acc@1 "
            f"{', '.join(f'{a:.2f}' for a in selected['seed_acc1_pts'])} %, SD {selected['seed_sd_pts']:.2f} pt; "
            f"converged by the floor-slope rule: {sum(selected['converged'])} of {len(selected['converged'])}.{tie}")


def teacher_figure(truns: Dict[int, Dict[str, Any]], plan: Dict[str, Any]):
    """Left: the teacher seeds' validation Acc@1 over all epochs, the floor phase shaded. Right: the floor phase
    alone, each seed's least-squares line (the floor-slope rule's fit)."""
    import matplotlib.pyplot as plt

    frac = float(plan["rules"]["schedule"]["floor_frac"])
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
    colors = plt.get_cmap("tab10")
    for i, (seed, t) in enumerate(sorted(truns.items())):
        h = t["history"]
        y = 100 * h.val_acc1.to_numpy()
        f = floor_fit(y, frac)
        c = colors(i)
        ax[0].plot(h.epoch, y, color=c, lw=1.4, label=f"seed {seed}")
        ax[1].plot(h.epoch[-len(f["epochs"]):], y[-len(f["epochs"]):], "o", color=c, ms=4, label=f"seed {seed}")
        ax[1].plot(f["epochs"], f["fit"], color=c, lw=1.5, ls="--")
    first = min(f["epochs"])
    ax[0].axvspan(first - 0.5, max(f["epochs"]) + 0.5, color="#dddddd", zorder=0, label="floor phase (constant LR)")
    for a in ax:
        a.set_xlabel("epoch")
        a.set_ylabel("validation Acc@1 (%)")
        a.grid(alpha=0.3)
    ax[0].set_title("all epochs", fontsize=9)
    ax[1].set_title("floor phase: dots = epochs, dashed = least-squares line", fontsize=9)
    fig.legend(handles=ax[0].get_legend_handles_labels()[0], fontsize=8, loc="outside lower center",
               ncol=len(truns) + 1)  # below the panels: it covers no point
    seeds = sorted(truns)
    n_img = 55000
    fig.suptitle(f"Plan v2 teacher (discrete ViT, depth 6): {len(seeds)} seeds ({', '.join(map(str, seeds))}), "
                 f"{n_img:,} training images x {plan['teacher']['epochs']} epochs, validation on 5,000 held-out images",
                 fontsize=10)
    return fig


def teacher_vs_free(plan: Dict[str, Any], runs: pd.DataFrame, teacher: Dict[str, Any], claims: pd.DataFrame
                    ) -> pd.DataFrame:
    """Per headline budget: the free ODE's mean test Acc@1 over its seeds, the teacher's, their difference, and the
    fairness the verdict file records for that budget's rows (claims.csv `fair`)."""
    out = []
    fam = plan["rules"]["primary_family"]
    for name, s in plan["studies"].items():
        if s.get("family") != fam or "free" not in s["cells"]:
            continue
        seeds = [int(x) for x in s["seeds"]]
        free = runs[(runs.study == name) & (runs.cell == "free") & runs.seed.isin(seeds)] if len(runs) else runs
        c = claims[(claims.study == name) & claims.question.str.contains("minus_free")]
        fair = c.fair.dropna()
        mean = float(free.acc1.mean()) if len(free) else math.nan
        out.append({"training images": images(s), "free ODE seeds": f"{len(free)} of {len(seeds)}",
                    "free ODE test Acc@1 (%)": acc(mean) if len(free) else NOT_MEASURED,
                    "teacher test Acc@1 (%)": acc(teacher["acc1"]),
                    "teacher - free (pt)": pt(teacher["acc1"] - mean) if len(free) else NOT_MEASURED,
                    "fair test (claims.csv)": (("yes" if str(fair.iloc[0]) == "True" else "no: teacher not above free")
                                               if len(fair) and len(free) == len(seeds) else NOT_MEASURED)})
    return pd.DataFrame(out)


def tau_table(results: str, selected: Dict[str, Any], plan: Dict[str, Any], runs: pd.DataFrame) -> pd.DataFrame:
    """The teacher's layer distances (distances.csv), tau by the plan's rule (ratio x their span) beside the tau its
    students recorded, and the checkpoint steps a student run recorded."""
    d = pd.read_csv(os.path.join(results, "teacher", "distances.csv"))
    ratio = float(plan["rules"]["tau_rule"]["ratio"])
    span = float(d.distance.max() - d.distance.min())
    taus = sorted({round(float(x), 6) for x in runs.tau.dropna()}) if len(runs) and "tau" in runs else []
    return pd.DataFrame([{"distance span (max - min)": round(span, 3), "ratio (plan)": ratio,
                          "tau by the rule": round(ratio * span, 3),
                          "tau recorded (selected.json)": round(float(selected["tau"]), 3),
                          "tau the students recorded": ", ".join(f"{t:.3f}" for t in taus) or NOT_MEASURED}])


def distances_figure(results: str, selected: Dict[str, Any]):
    """The selected teacher's per-layer distances (CLS, mean over a data sample) and the checkpoint steps (out of N)
    its students' schedule places at each layer."""
    import matplotlib.pyplot as plt

    d = pd.read_csv(os.path.join(results, "teacher", "distances.csv"))
    fig, ax = plt.subplots(figsize=(6.5, 3.4), layout="constrained")
    ax.bar(d.layer, d.distance, color=COLORS["teacher"])
    ax.set_xlabel("teacher layer")
    ax.set_ylabel("distance to the previous layer's state")
    ck = _checkpoints(results)
    if ck:
        for layer, step, dist in zip(d.layer, ck, d.distance):
            ax.text(layer, dist, f"step {step}", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, 1.15 * float(d.distance.max()))
    ax.set_title(f"Plan v2 teacher, selected seed {selected['seed']}: layer distances; label = the student's "
                 "checkpoint step (N = 12)", fontsize=9)
    return fig


def _checkpoints(results: str) -> List[int]:
    """The checkpoint steps the first strong-teacher student run recorded (metrics.json), or []."""
    import glob

    for f in sorted(glob.glob(os.path.join(results, "v2_*", "ref", "s*", "metrics.json"))):
        with open(f) as fh:
            m = json.load(fh)
        if m.get("teacher", "strong") == "strong" and m.get("checkpoints"):
            return [int(c) for c in m["checkpoints"]]
    return []


# --- 09: the budget curve -----------------------------------------------------------------------------------------

def budget_points(plan: Dict[str, Any], runs: pd.DataFrame, cells: Sequence[str] = HEADLINE_CELLS) -> pd.DataFrame:
    """Per headline budget and cell: seeds measured of those planned, mean test Acc@1 and its seeds' range."""
    out = []
    fam = plan["rules"]["primary_family"]
    for name, s in plan["studies"].items():
        if s.get("family") != fam:
            continue
        seeds = [int(x) for x in s["seeds"]]
        for cell in cells:
            if cell not in s["cells"]:
                continue
            got = runs[(runs.study == name) & (runs.cell == cell) & runs.seed.isin(seeds)] if len(runs) else runs
            out.append(dict(study=name, images=images(s), cell=cell, n=len(got), planned=len(seeds),
                            mean=float(got.acc1.mean()) if len(got) else math.nan,
                            low=float(got.acc1.min()) if len(got) else math.nan,
                            high=float(got.acc1.max()) if len(got) else math.nan,
                            converged=int(got.converged.sum()) if len(got) else 0))
    return pd.DataFrame(out)


def budget_figure(points: pd.DataFrame, claims: pd.DataFrame, teacher: Dict[str, Any], plan: Dict[str, Any]):
    """Left: test Acc@1 of the three headline cells by training images (mean, bar = the seeds' range), the teacher's
    line; a budget not measured yet is named at the bottom. Right: each headline row's paired difference with its
    interval from claims.csv, on its own scale."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(13, 4.6), layout="constrained", gridspec_kw={"width_ratios": [1.1, 1]})
    budgets = sorted(points.images.unique())
    off = {"ref": 0.96, "ce": 1.0, "free": 1.04}
    for cell, g in points.groupby("cell", sort=False):
        g = g[g.n > 0].sort_values("images")
        if not len(g):
            continue
        x = g.images * off.get(cell, 1.0)
        ax[0].errorbar(x, g["mean"], yerr=[g["mean"] - g.low, g.high - g["mean"]], color=COLORS[cell], marker="o",
                       ms=5, capsize=3, lw=1.5, label=CELL_NAMES[cell])
    ax[0].axhline(teacher["acc1"], color=COLORS["teacher"], ls="--", lw=1,
                  label=f"teacher {teacher['acc1']:.2f} % (55,000 images)")
    missing = [b for b in budgets if points[(points.images == b)].n.min() < points[(points.images == b)].planned.max()]
    for b in missing:
        ax[0].annotate(NOT_MEASURED.replace(" yet", "\nyet"), (b, 0.5), xycoords=("data", "axes fraction"),
                       ha="center", va="center", fontsize=8, color="#b00000")  # inside the panel, clear of its edge
    ax[0].set_xscale("log")
    ax[0].set_xticks(budgets)
    ax[0].set_xticklabels([f"{b:,}" for b in budgets])
    ax[0].minorticks_off()
    ax[0].set_xlim(min(budgets) / 1.5, max(budgets) * 1.5)
    ax[0].set_xlabel("training images the student sees")
    ax[0].set_ylabel("test Acc@1 (%), 10,000 images")
    ax[0].legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    ax[0].grid(alpha=0.3)
    ax[0].set_title("test Acc@1 by budget (dot = mean over seeds, bar = their range)", fontsize=9)
    fam, version = plan["rules"]["primary_family"], plan.get("version", 2)
    v3 = version == 3  # plan v3's rows: the deciding interval, delta dashed
    c = claims[claims.family == fam].reset_index(drop=True)  # every headline row, retention_55k included
    ylabels = []
    for i, r in c.iterrows():
        y = len(c) - 1 - i
        col = verdicts.COLORS.get(r.verdict, "#9e9e9e")
        if r.n >= 2:
            ax[1].plot([r.ci_low, r.ci_high], [y, y], color=col, lw=3)
            ax[1].plot(r["mean"], y, "o", color=col, mec="black", ms=6)
        if r.margin and r.test == "non_inferiority":
            ax[1].plot([-r.margin] * 2, [y - 0.35, y + 0.35], color="black", lw=1, ls=":")
        if v3 and r.test == "superiority":
            ax[1].plot([r.delta] * 2, [y - 0.35, y + 0.35], color="black", lw=1, ls="--")
        ax[1].text(1.01, y, r.verdict, transform=ax[1].get_yaxis_transform(), va="center", fontsize=8)
        ylabels.append(f"{row_label(r.question)}, {images(plan['studies'][r.study]):,} images")
    ax[1].axvline(0, color="black", lw=0.8)
    ax[1].set_yticks(range(len(c)))
    ax[1].set_yticklabels(ylabels[::-1], fontsize=8)
    ax[1].set_ylim(-0.6, len(c) - 0.4)  # the bottom row inside the panel, not on its edge
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


# --- 10: the step count -------------------------------------------------------------------------------------------

def trained_counts(plan: Dict[str, Any], study: str, cell: str, default_n: int = 12) -> List[int]:
    """The step counts a cell trained at (its train_steps, else the default N)."""
    ov = plan["studies"][study]["cells"].get(cell) or {}
    return [int(n) for n in ov.get("train_steps", [default_n])]


def step_points(plan: Dict[str, Any], runs: pd.DataFrame, study: str = "v2_10k",
                cells: Sequence[str] = ("ref", "free", "remedy")) -> pd.DataFrame:
    """Per cell and step count (the study's robustness counts and N = 12): test Acc@1 on all test images, mean over
    the seeds and their range, and whether the cell trained at that count."""
    s = plan["studies"][study]
    counts = sorted(set(int(n) for n in s["robustness"]["steps"]) | {12})
    seeds = [int(x) for x in s["seeds"]]
    out = []
    for cell in cells:
        got = runs[(runs.study == study) & (runs.cell == cell) & runs.seed.isin(seeds)] if len(runs) else runs
        tr = trained_counts(plan, study, cell)
        for n in counts:
            col = f"acc1_n{n}"
            v = got[col].dropna() if len(got) and col in got else pd.Series(dtype=float)
            out.append(dict(cell=cell, N=n, trained=n in tr, n=len(v), planned=len(seeds),
                            mean=float(v.mean()) if len(v) else math.nan,
                            low=float(v.min()) if len(v) else math.nan, high=float(v.max()) if len(v) else math.nan,
                            converged=f"{int(got.converged.sum())} of {len(got)}" if len(got) else "–"))
    return pd.DataFrame(out)


def step_figure(points: pd.DataFrame, plan: Dict[str, Any], study: str = "v2_10k"):
    """Left: test Acc@1 against the step count for each cell (filled = a count the cell trained at, open = never
    trained), bar = the seeds' range. Right: the same on 70-90 %, where the robust cells' small differences show."""
    import matplotlib.pyplot as plt

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
            for tr, mk in ((True, "o"), (False, "o")):
                h = g[g.trained == tr]
                a.plot(h.N + off.get(cell, 0), h["mean"], mk, ms=6, color=COLORS[cell],
                       mfc=COLORS[cell] if tr else "white", mec=COLORS[cell], ls="none")
    for a in ax:
        a.set_xticks(sorted(points.N.unique()))
        a.set_xlabel("solver steps N at test time (the model trained at N = 12 unless marked)")
        a.set_ylabel("test Acc@1 (%), all 10,000 images")
        a.grid(alpha=0.3)
    ax[1].set_ylim(70, 90)
    ax[0].set_title("every count (filled dot = a count the cell trained at, open = never trained)", fontsize=9)
    ax[1].set_title("the same, 70-90 % (points below are off this scale; see left)", fontsize=9)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=COLORS[c], marker="o", label=CELL_NAMES[c]) for c in points.cell.unique()]
    handles += [Line2D([], [], color="grey", marker="o", ls="none", label="trained at this count"),
                Line2D([], [], color="grey", marker="o", mfc="white", ls="none", label="never trained at it")]
    ax[0].legend(handles=handles, fontsize=8, loc="lower right")
    fig.suptitle(f"Plan v{plan.get('version', 2)}, step count ({study}): {len(s['seeds'])} seeds per cell ({seed_ids(s['seeds'])}), "
                 f"{images(s):,} training images, test on all 10,000 test images", fontsize=10)
    return fig


def step_table(points: pd.DataFrame) -> pd.DataFrame:
    """step_points as a table: one row per step count, one column per cell (its name in words and id), the mean test
    Acc@1 over its seeds through `acc`, the formatter coverage() uses: N = 12 reads the same runs' Acc@1 as the
    coverage table (metrics.json acc1_n12 is its acc1) and prints the same number."""
    t = points.pivot(index="N", columns="cell", values="mean")[list(dict.fromkeys(points.cell))]
    t = t.map(acc) if hasattr(t, "map") else t.applymap(acc)
    t.columns = pd.Index([f"{c}: {CELL_NAMES.get(c, c)}" for c in t.columns], name="mean test Acc@1 (%) of")
    return t


# --- 11: design choices ------------------------------------------------------------------------------------------

def paired_figure(plan: Dict[str, Any], runs: pd.DataFrame, claims: pd.DataFrame, questions: Sequence[str],
                  study: str = "v2_10k"):
    """One panel per paired row: each seed's test Acc@1 in the two cells, joined by a line (same seed), with the
    row's verdict from claims.csv in the title; a cell with no runs says "not measured yet"."""
    import matplotlib.pyplot as plt

    s = plan["studies"][study]
    seeds = [int(x) for x in s["seeds"]]
    qs = {q["id"]: q for q in s["questions"]}
    verdict = claims.set_index("question").verdict
    fig, axes = plt.subplots(1, len(questions), figsize=(4.2 * len(questions), 4.0), layout="constrained",
                             squeeze=False)
    for ax, qid in zip(axes[0], questions):
        q = qs[qid]
        a, b = q["a"], q["b"]
        va, vb = (runs[(runs.study == study) & (runs.cell == c) & runs.seed.isin(seeds)].set_index("seed").acc1
                  if len(runs) else pd.Series(dtype=float) for c in (a, b))
        for x, v, c in ((0, va, a), (1, vb, b)):
            if len(v):
                ax.plot([x] * len(v), v, "o", color=COLORS.get(c, "grey"), ms=5)
            else:
                ax.text(x, 0.5, NOT_MEASURED, transform=ax.get_xaxis_transform(), ha="center", fontsize=8,
                        color="#b00000")
        for sd in sorted(set(va.index) & set(vb.index)):
            ax.plot([0, 1], [va[sd], vb[sd]], color="grey", lw=0.8, alpha=0.7)
        ax.set_xticks([0, 1])
        ax.set_xticklabels([CELL_NAMES.get(a, a).replace(" (", "\n("), CELL_NAMES.get(b, b).replace(" (", "\n(")],
                           fontsize=8)
        ax.set_xlim(-0.5, 1.5)
        ax.set_ylabel("test Acc@1 (%), 10,000 images")
        ax.grid(alpha=0.3, axis="y")
        ax.set_title(f"{row_label(qid)} ({qid})\nverdict: {verdict[qid]}", fontsize=9)
    fig.suptitle(f"Plan v{plan.get('version', 2)}, design choices and teacher strength: {images(s):,} training images, seeds "
                 f"{seed_ids(seeds)} ({len(seeds)}), a line joins one seed's two runs", fontsize=10)
    return fig


# --- 12: every row ------------------------------------------------------------------------------------------------

def verdict_table(claims: pd.DataFrame) -> pd.DataFrame:
    """Every v2 row as claims.csv gives it: family, row, budget, seeds, mean and interval, margin, convergence,
    verdict, whether it holds across the four families, and plan 1's verdict for the row it revisits; rows grouped
    by family (in the file's order of families, each family's rows in the file's order)."""
    order = pd.Categorical(claims.family, categories=list(dict.fromkeys(claims.family))).codes
    claims = claims.iloc[np.argsort(order, kind="stable")]
    t = rows(claims)
    t.insert(0, "family", claims.family.str.replace("v2_", "").to_numpy())
    t["holds at alpha / 4 families"] = [("yes" if h else "no") if isinstance(h, (bool, np.bool_)) else
                                        ("yes" if str(h) == "True" else "no" if str(h) == "False" else "–")
                                        for h in claims.holds_across_families]
    return t


def verdict_markdown(claims: pd.DataFrame) -> str:
    """verdict_table as markdown (what notebook 08 displays), without the claims' sentences."""
    return markdown(verdict_table(claims).drop(columns=["claim"]))


def verdict_figure(claims: pd.DataFrame, family: str, plan: Dict[str, Any], out: str = RESULTS):
    """verdicts.figure for one family, rows named in words (row_label), saved as out/verdicts_<family>.png (the
    figure docs/v2.md links); returns it."""
    fig = verdicts.figure(claims, family, plan, label=row_label)
    save(fig, os.path.join(out, f"verdicts_{family}.png"))
    return fig


def save(fig: Any, path: str) -> str:
    """The figure as a PNG at path (written beside, then moved: a reader never sees half a file)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path + ".tmp.png", dpi=120, bbox_inches="tight", metadata={"Software": None})
    os.replace(path + ".tmp.png", path)
    return path


def families(plan: Dict[str, Any]) -> List[str]:
    """The plan's families, in its order (plan_mod.families)."""
    return list(plan_mod.families(plan))
