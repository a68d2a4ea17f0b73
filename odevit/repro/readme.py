"""The README's result sections, generated from the committed results files (no hand-copied number can drift).

    python -m odevit.repro.readme            # rewrite every <!-- NAME --> ... <!-- /NAME --> section of README.md
                                             # and of the docs pages in PAGES
    python -m odevit.repro.readme --check    # exit 1 and name the sections that differ from the results files
    python -m odevit.repro.readme --record-run T0   # results/run.json: wall time since T0 (epoch s) of the `dvc repro`
                                              # that just ended, and the machine (make repro calls it)

`make repro` runs it after `dvc repro`; tests/test_readme.py fails when a section is stale.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import sys
from typing import Any, Callable, Dict, Iterable, List, Tuple

import pandas as pd
import yaml

from . import stats
from .bench import VIT, activation_markdown, bf16_skipped
from .evidence import BUDGETS, EVIDENCE, STRONG_TEACHER, n_converged, progress
from .machine import machine_info
from .pipeline import write_json
from .report import to_markdown
from .study import collect


def _json(path: str) -> Dict:
    with open(path) as f:
        return json.load(f)


def _yaml(path: str) -> Dict:
    with open(path) as f:
        return yaml.safe_load(f) or {}


def _reference(root: str) -> str:
    """study.reference of the run's params.yaml (the cell every comparison is made against)."""
    with open(os.path.join(root, "params.yaml")) as f:
        return yaml.safe_load(f)["study"]["reference"]


def _num(x: float, signed: bool = False, digits: int = 3) -> str:
    return f"{x:+.{digits}g}" if signed else f"{x:.{digits}g}"


def _interval(lo: float, hi: float) -> str:
    """' [lo, hi]' signed, or '' where there is no interval (a row of one seed)."""
    return "" if pd.isna(lo) else f" [{lo:+.2f}, {hi:+.2f}]"


def _ci(lo: float, hi: float, signed: bool, digits: int = 3) -> str:
    return "–" if pd.isna(lo) else f"[{_num(lo, signed, digits)}, {_num(hi, signed, digits)}]"


def _digits(unit: str) -> int:
    """Significant digits of a claims row: 4 for a ratio (near 1, 3 would print 1.0038 as 1), else 3."""
    return 4 if unit == "ratio" else 3


def _predicts(r: Any) -> str:
    """What the paper predicts for a claims.csv row, in words ("> 0", "0 ± 1", "error ≤ bound", ...)."""
    if r.direction == "greater" and r.null != 0 and not pd.isna(r.paper_value):  # non-inferiority to the paper's
        return f"> {r.null:.3g} (the paper's − margin)"
    return {"greater": f"> {r.null:g}", "less": f"< {r.null:g}", "equivalent": f"{r.null:.3g} ± {r.margin:.2g}",
            "bound": "error ≤ bound", "fact": "fact", "none": "(not a claim)"}.get(r.direction, r.direction)


def _tests(r: Any) -> str:
    """ " (Holm p 0.012 · replicates 0.64)": the family's Holm-adjusted p, a per-class correlation's largest p over
    the classes (`stats.verdict`'s unit_p) and the probability that a replicate on another machine decides what the
    intervals decide (`stats.replication`), where the row has them."""
    parts = ([] if pd.isna(r.holm_p) else [f"Holm p {r.holm_p:.3f}"]) + (
        [] if pd.isna(getattr(r, "unit_p", math.nan)) else [f"largest p over the classes and seeds {r.unit_p:.3g}"]) + (
        [] if pd.isna(getattr(r, "replication", math.nan)) else [f"replicates {r.replication:.2f}"])
    return f" ({' · '.join(parts)})" if parts else ""


def claims_table(root: str = ".", measured_only: bool = False) -> str:
    """The claims table (results/07_report/claims.csv): each claim, its source, the side the paper predicts, ours with
    its interval, the paper's number and where it lies, the computed verdict; then the verdict counts. measured_only:
    without the rows whose cells the run did not train (a study of the headline cells only)."""
    from .report import summary_line

    c = pd.read_csv(os.path.join(root, "results/07_report/claims.csv"), keep_default_na=False,
                    na_values=[""]).fillna({"vs_paper": "", "finding": ""})
    counts = summary_line(c)
    if measured_only:
        c = c[c.verdict != stats.NOT_MEASURED]
    rows = ["| claim | source | paper predicts | ours (mean ± std) | seeds | 95 % CI | paper | vs paper | verdict |",
            "|---|---|---|---|---|---|---|---|---|"]
    for r in c.itertuples():
        signed = r.unit in ("pt", "%", "r", "exponent")
        pred = _predicts(r)
        k = _digits(r.unit)
        ours = "–" if pd.isna(r.ours_mean) else _num(r.ours_mean, signed, k) + (
            "" if pd.isna(r.ours_std) else f" ± {r.ours_std:.2g}")
        holm = _tests(r)
        note = f"; {r.finding}" if r.direction == "none" and r.finding else ""
        rows.append(f"| `{r.claim}` | {r.source} | {pred} | {ours} {r.unit} | {r.seeds} | "
                    f"{_ci(r.ci_low, r.ci_high, signed, k)} | {r.paper} | {r.vs_paper or '–'} | "
                    f"**{r.verdict}**{holm}{note} |")
    cells = collect(os.path.join(root, "results"))
    cells = cells[cells.cell == _reference(root)]
    return ("\n".join(rows) + f"\n\nVerdicts of this run: **{counts}**. The reference's seed spread here is "
            f"{100 * cells.acc1.std(ddof=1):.2f} pt (std of Acc@1 over its {len(cells)} seeds).")


def claims_summary(root: str = ".") -> str:
    """The README's first screen: the run's budget and verdict counts, then one line per claim (what the paper
    predicts, its number, ours with the 95 % interval, the computed verdict) from results/07_report/claims.csv."""
    from .report import summary_line

    c = pd.read_csv(os.path.join(root, "results/07_report/claims.csv"), keep_default_na=False,
                    na_values=[""]).fillna({"vs_paper": "", "finding": ""})
    cells = collect(os.path.join(root, "results"))
    ref = cells[cells.cell == _reference(root)]
    conv = n_converged(cells)
    with open(os.path.join(root, "params.yaml")) as f:
        params = yaml.safe_load(f)
    window, delta = params["base"]["converge_window"], params["distill"]["min_delta_pts"]
    head = (f"**{summary_line(c)}** — the default run (`make repro`): Fashion-MNIST, a from-scratch 6-layer ViT "
            f"teacher, {ref.seed.nunique()} seeds × {cells.cell.nunique()} cells, each cell "
            f"{int(ref.train_images.iloc[0]):,} training images × {int(ref.epochs.iloc[0])} epochs, model selection "
            f"on {ref.selected_on.iloc[0] if 'selected_on' in ref else 'test'} data; {conv} of {len(cells)} runs "
            f"converged by the validation rule (the last {window} epochs gained < {delta:g} pt"
            + (f"; it needs at least {window + 1} epochs, and the cells ran {int(cells.epochs_run.max())}"
               if "epochs_run" in cells and cells.epochs_run.max() < window + 1 else "") + "). "
            + ("A quick run whose students are still learning: every verdict here, *contradicts* included, is about "
               "this budget, not about the method at convergence." if conv < len(cells)
               else "Every run converged by that rule.")
            + f" The teacher ({100 * _json(os.path.join(root, 'results/02_teacher/metrics.json'))['acc1']:.2f} % test "
            f"Acc@1) {'converged' if _json(os.path.join(root, 'results/02_teacher/metrics.json')).get('converged') else 'had not converged either'}. "
            "An equivalence row's ± is our margin (`study.equivalence_margin_pts`), not the paper's error bar; an "
            "ablation row whose interval excludes 0 stays inconclusive unless its Holm-adjusted p (shown) is < 0.05, "
            "and the per-class correlation (r over 10 classes) unless every seed's test over the classes has p < 0.05; "
            f"and no decisive verdict stands unless a replicate on another machine would reach it again with probability "
            f"≥ {stats.REPLICATION:g} (“replicates”, `stats.replication`: floating-point noise treated as a fresh "
            "draw of every seed; it is the probability that the replicate's intervals decide what ours decide, Holm "
            "not included, so an inconclusive row can show a high one), so a verdict that another CPU type could "
            "flip reads inconclusive.")
    rows = ["| claim | paper predicts | paper's number | ours [95 % CI] | verdict |", "|---|---|---|---|---|"]
    for r in c.itertuples():
        signed = r.unit in ("pt", "%", "r", "exponent")
        pred = _predicts(r)
        ours = "–" if pd.isna(r.ours_mean) else _num(r.ours_mean, signed)
        ci = "" if pd.isna(r.ci_low) else " " + _ci(r.ci_low, r.ci_high, signed)
        value = "–" if pd.isna(r.paper_value) else _num(r.paper_value, signed)
        holm = _tests(r)
        rows.append(f"| `{r.claim}` | {pred} | {value} | {ours}{ci} {r.unit} | **{r.verdict}**{holm} |")
    return head + "\n\n" + "\n".join(rows)


def _first_sentence(path: str) -> str:
    """The first sentence of a module's docstring, on one line."""
    import ast

    with open(path) as f:
        doc = (ast.get_docstring(ast.parse(f.read())) or "").strip()
    para = " ".join(doc.split("\n\n")[0].split())
    m = re.search(r"^.*?\.(?=\s+[A-Z`(]|$)", para)
    return (m.group(0) if m else para) or "(no docstring)"


def module_map(root: str = ".") -> str:
    """One line per module, from its docstring: the layer (odevit/) and the lab (odevit/repro/)."""
    rows = []
    for d, what in (("odevit", "the ODE-ViT layer: what `import odevit` and `timm.create_model(\"odevit_…\")` give; "
                               "it never imports the lab"),
                    ("odevit/repro", "the lab that reproduces the paper (`python -m odevit.repro.…`)")):
        rows.append(f"**`{d}/`** — {what}\n")
        for f in sorted(glob.glob(os.path.join(root, d, "*.py"))):
            rows.append(f"- `{os.path.relpath(f, root)}` — {_first_sentence(f)}")
        rows.append("")
    return "\n".join(rows).strip("\n")


def main_table(root: str = ".") -> str:
    with open(os.path.join(root, "results/07_report/main_table.md")) as f:
        return f.read().strip()


def _weights_rows(root: str = ".") -> List[Dict[str, Any]]:
    """One row per published tag (weights/quick, weights/evidence): what `evaluate` gives, the run it came from."""
    rows = []
    for folder in ("evidence", "quick"):
        path = os.path.join(root, "weights", folder, "manifest.json")
        if not os.path.isfile(path):
            continue
        for tag, e in _json(path)["weights"].items():
            run = _json(os.path.join(root, e["metrics_file"]))
            conv = e.get("converged_plan")
            rows.append(dict(tag=tag, folder=folder, e=e, half=run.get("acc1_half_n"), conv=conv))
    return rows


def _weights_source(r: Dict[str, Any]) -> str:
    e = r["e"]
    if e.get("study"):
        c = r["conv"]
        state = ("converged" if c["converged"] else
                 f"not converged: +{c['gain_last_pts']:.2f} pt in its last quarter, threshold {c['threshold_pts']:.2f}")
        return f"{e['study']} {e['cell']} s{e['seed']} (best validation of {len(e['seeds_compared'])} seeds; {state})"
    if e["kind"] == "teacher" and r["folder"] == "evidence":
        return "exploratory snapshot, trained in its own clone (" + os.path.dirname(os.path.dirname(os.path.dirname(
            e["metrics_file"]))) + "/study.json)"
    return "stage 02_teacher" if e["cell"] is None else f"quick run, cell {e['cell']} s{e['seed']}"


def _half_label(root: str) -> str:
    sub = _yaml(os.path.join(root, "params.yaml"))["study"]["robustness_test_limit"]
    return f"at N/2 (first {sub:,} test images)" if sub else "at N/2"


def weights_table(root: str = ".") -> str:
    half = _half_label(root)
    df = pd.DataFrame([{"tag": f"`{r['tag']}`", "what": r["e"]["description"],
                        "Acc@1 (test)": f"{100 * r['e']['metrics']['acc1']:.2f} %",
                        half: "–" if r["half"] is None else f"{100 * r['half']:.2f} %",
                        "parameters": f"{r['e']['parameters']:,}", "file": f"{r['e']['bytes'] / 2**20:.2f} MiB",
                        "run": _weights_source(r), "metrics": f"`{r['e']['metrics_file']}`"}
                       for r in _weights_rows(root)])
    return to_markdown(df)


def weights_summary(root: str = ".") -> str:
    """The README's short table of the published tags: name, what, the Acc@1 `evaluate` reproduces, where from."""
    half = _half_label(root)
    rows = _weights_rows(root)
    df = pd.DataFrame([{"tag": f"`{r['tag']}`", "Acc@1": f"{100 * r['e']['metrics']['acc1']:.2f} %",
                        half: "–" if r["half"] is None else f"{100 * r['half']:.2f} %",
                        "from": _weights_source(r)} for r in rows])
    differ = []  # a run trained and scored on a GPU, reloaded and scored here on the CPU: a test image may flip
    for r in rows:
        mf = r["e"].get("metrics_file")
        if mf and os.path.isfile(os.path.join(root, mf)):
            own = _json(os.path.join(root, mf))["acc1"]
            if abs(own - r["e"]["metrics"]["acc1"]) > 1e-9:
                differ.append(f"`{r['tag']}` {100 * own:.2f} % in its run's `{mf}`")
    note = ("\n\nAcc@1 as the publish stage reloads and scores each tag on its machine; where the run scored itself "
            "on another (a GPU), the two differ by a test image or two: " + "; ".join(differ) + ".") if differ else ""
    return to_markdown(df) + note


def dynamics_summary(root: str = ".") -> str:
    m = _json(os.path.join(root, "results/06_dynamics/metrics.json"))
    ref = _reference(root)
    ly = m["lyapunov"][ref]
    p1, fid = m["prop1"], m["fidelity"]
    join = lambda vals, fmt: ", ".join(format(v, fmt) for v in vals)  # noqa: E731
    return (f"Per test image (every seed of `{ref}`): CLS exponent vs correctness point-biserial r = "
            + ", ".join(f"{v['r']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]" for v in ly.values())
            + f"; AUC (exponent predicting an error) = {join([v['auc'] for v in ly.values()], '.3f')}. "
            f"Proposition 1 with the **measured** L (max L = {join([v['L_max'] for v in p1.values()], '.2f')} per "
            f"seed; the MLP part alone has a weight bound of "
            f"{join([v['mlp_lipschitz_upper'] for v in p1.values()], '.1f')}; attention has none) holds at a fraction "
            f"{join([v['fraction_within'] for v in p1.values()], '.3f')} of the (image, step) pairs; with the "
            f"published L = {next(iter(p1.values()))['paper_L']}: "
            f"{join([v['fraction_within_paper_L'] for v in p1.values()], '.3f')}. Fidelity: the student's CLS sits "
            f"at {fid['student_rel_mean']:.3f} of ‖h_l‖ from the teacher's states at the checkpoints (mean over "
            f"layers and seeds), against the teacher's own relative step ‖h_l − h_(l−1)‖/‖h_l‖ of "
            f"{fid['teacher_step_rel_mean']:.3f} (`results/06_dynamics/fidelity.csv`): at this budget the student "
            + ("passes closer to the teacher's states than" if fid["student_rel_mean"] < fid["teacher_step_rel_mean"]
               else "does **not** pass through the teacher's states more closely than")
            + " one teacher layer's own step. The per-image correlation is "
            + ("**positive** in every seed (a larger exponent goes with a *correct* prediction, the opposite "
               "direction of the paper's per-class reading of Fig. 4)" if all(v["r"] > 0 for v in ly.values())
               else "negative in every seed (the direction of the paper's Fig. 4)" if all(v["r"] < 0 for v in ly.values())
               else "of mixed sign across the seeds") + ".")


def bench_tables(root: str = ".") -> str:
    """results/bench/bench.md as `python -m odevit.repro.bench` wrote it (and activation_memory.md, from
    `--activation-only`, when bench.md has no activation table)."""
    with open(os.path.join(root, "results/bench/bench.md")) as f:
        text = f.read().strip()
    if "Activation memory" not in text and os.path.isfile(os.path.join(root, ACTIVATION_FILE)):

        act = _json(os.path.join(root, ACTIVATION_FILE))
        text += (f"\n\n{act['date']}, `python -m odevit.repro.bench --activation-only`: "
                 + activation_markdown(act["activation_memory"]))
    return text


ACTIVATION_FILE = "results/bench/activation_memory.json"  # python -m odevit.repro.bench --activation-only


def _activation_rows(bench: Dict, root: str) -> List[Dict]:
    """The activation-memory rows: the full bench's, else those of `--activation-only`."""
    if bench.get("activation_memory"):
        return bench["activation_memory"]
    path = os.path.join(root, ACTIVATION_FILE)
    return _json(path)["activation_memory"] if os.path.isfile(path) else []


def bench_summary(root: str = ".") -> str:
    """The ratios the README's performance bullets quote, computed from results/bench/bench.json."""
    b = _json(os.path.join(root, "results/bench/bench.json"))
    by = {(r["config"], r["dtype"], r["model"]): r for r in b["rows"]}
    configs = list(dict.fromkeys(r["config"] for r in b["rows"]))
    lines = []
    for dtype in ("fp32", "bf16"):
        pairs = [(c, by.get((c, dtype, "ODE-ViT")), by.get((c, dtype, VIT))) for c in configs]
        pairs = [(c, o, v) for c, o, v in pairs if o and v]
        if pairs:
            lines.append(f"* {dtype}, ODE-ViT / timm ViT of equal FLOPs — training images/s: "
                         + "; ".join(f"{c}: **{o['train_img_s'] / v['train_img_s']:.2f}×**" for c, o, v in pairs)
                         + ". Inference images/s: " + "; ".join(f"{o['infer_img_s'] / v['infer_img_s']:.2f}×" for _, o, v in pairs)
                         + ". Training memory, timm / ODE: " + "; ".join(f"{v['train_mem_mb'] / o['train_mem_mb']:.1f}×" for _, o, v in pairs)
                         + ". " + (("Fraction of the large-matmul roof (ODE-ViT): "
                                    + "; ".join(f"{o['roof_ratio']:.2f}" for _, o, _v in pairs) + ".")
                                   if all(o["roof_ratio"] <= 1 for _, o, _v in pairs) else
                                   "The roof measurement of this run is implausible (achieved > roof: the short "
                                   "matmul timing was disturbed), so no roof fraction is quoted."))
    ode = {(r["config"], r["dtype"]): r["train_img_s"] for r in b["rows"] if r["model"] == "ODE-ViT"}
    ratio = [ode[(c, "bf16")] / ode[(c, "fp32")] for c in configs if (c, "bf16") in ode and (c, "fp32") in ode]
    if ratio:
        lines.append(f"* bf16 autocast trains ODE-ViT at {min(ratio):.2f}–{max(ratio):.2f}× its fp32 images/s on this "
                     f"machine (large-matmul roof {b['meta']['matmul_roof_gflop_s']['bf16']:.0f} GFLOP/s bf16 vs "
                     f"{b['meta']['matmul_roof_gflop_s']['fp32']:.0f} fp32).")
    elif not b["meta"].get("bf16_native", True):
        lines.append(f"* bf16: {bf16_skipped(b['meta']['bf16_probe_gflop_s'], False)}. The pipeline's precision `auto` trains in fp32 on CPU.")
    acts = _activation_rows(b, root)
    if acts:
        lines.append("* Gradient checkpointing of the solver steps saves activation memory per image (fp32): "
                     + "; ".join(f"{a['config']}: {a['mib_full']:.1f} → {a['mib_ckpt']:.1f} MiB "
                                 f"({a['mib_full'] / a['mib_ckpt']:.1f}×; with JaSMin's maps "
                                 f"{a['mib_full_jasmin']:.1f} → {a['mib_ckpt_jasmin']:.1f})" for a in acts) + ".")
    comp = b.get("compiled")
    if comp and "rows" in comp:
        r = {x["variant"]: x["train_img_s"] for x in comp["rows"]}
        ode_c, vit_c = r["ODE-ViT, torch.compile"], r[VIT + ", torch.compile"]
        lines.append(f"* `torch.compile` (inductor), default config: ODE-ViT compiled / eager **{ode_c / r['ODE-ViT']:.2f}×**, "
                     f"timm ViT {vit_c / r[VIT]:.2f}×; compiled ODE-ViT ÷ eager timm ViT {ode_c / r[VIT]:.2f}×, ÷ compiled "
                     f"timm ViT {ode_c / vit_c:.2f}× (after {comp['compile_s']['ODE-ViT']:.0f} s of compilation).")
    elif comp:
        lines.append(f"* `torch.compile` could not run on this machine: {comp['error']}.")
    d = b["distill"]
    lines.append(f"* A distillation step costs {d['distill_over_scratch']:.2f}× a scratch step of the same student "
                 f"with the teacher run per batch, {d['distill_cached_over_scratch']:.2f}× with the teacher's CLS "
                 "states cached once per dataset (the pipeline's default when augmentation is off).")
    return "\n".join(lines)


ASSUMED_GPU_TFLOP_S = 300.0  # an assumption (sustained bf16 on one H100), not a measurement


def gpu_estimate(root: str = ".") -> str:
    """Paper-scale training time from the benchmark's FLOP count per training image (FlopCounterMode, forward +
    backward) and an assumed GPU throughput: 300 epochs of CIFAR's 50k images."""
    b = _json(os.path.join(root, "results/bench/bench.json"))
    rows = {r["config"]: r for r in b["rows"] if r["model"] == "ODE-ViT" and r["dtype"] == "fp32"
            and r["config"].startswith("paper")}
    out = []
    for name, r in rows.items():
        eflop = r["train_gflop_per_img"] * 1e9 * 50_000 * 300 / 1e18
        out.append(f"{name}: {r['train_gflop_per_img']:.1f} GFLOP per training image → {eflop:.2f} EFLOP for 300 "
                   f"epochs of 50k images → ≈ {eflop * 1e18 / (ASSUMED_GPU_TFLOP_S * 1e12) / 3600:.1f} h")
    return ("; ".join(out) + f" on one GPU at an **assumed** {ASSUMED_GPU_TFLOP_S:.0f} TFLOP/s sustained (bf16, H100 "
            "class): an estimate, not a measurement; ImageNet-100 (≈ 126k images) takes ≈ 2.5× that.")


def _verdicts(cells: pd.DataFrame) -> str:
    """Every cell against the reference (report.comparisons) as a table, and one sentence: the headline claim and
    which cells are resolved better / worse than the reference, and which are not resolved."""
    from .paper import claim
    from .report import comparisons

    table = comparisons(cells, "ref")
    free = table.set_index("cell").loc["free"]
    better = table[table.resolved & (table.diff_mean < 0)]
    worse = table[table.resolved & (table.diff_mean > 0) & (table.cell != "free")]
    unresolved = table[~table.resolved]
    return (to_markdown(table.round(3)) + "\n\n"
            f"There, teacher–student (that study's ref was trained with CE: today's `ce` cell) − free = "
            f"{free.diff_mean:+.1f} pt [{free.ci_low:+.1f}, {free.ci_high:+.1f}] "
            f"({'resolved' if free.resolved else 'not resolved'}; compare `ts_ce_minus_free`, whose paper value is "
            f"{claim('ts_ce_minus_free').value:+.1f} pt on CIFAR-100, docs/paper.md). Without a multiplicity "
            "correction (these tables predate the verdicts and Holm), resolved and **better** than the reference at "
            "this budget: "
            + (", ".join(f"{r.cell} ({-r.diff_mean:+.1f} pt)" for r in better.itertuples()) or "none")
            + "; resolved and worse: " + (", ".join(f"{r.cell} ({-r.diff_mean:+.1f} pt)" for r in worse.itertuples()) or "none")
            + "; not resolved at this budget: " + (", ".join(unresolved.cell) or "none") + ".")


def gpu_study(root: str = ".") -> str:
    """The GPU study's seed spread and every cell against the reference, recomputed from its committed CSVs."""
    spread = pd.read_csv(os.path.join(root, EVIDENCE, "seed_spread_gpu.csv"))
    spread = spread[spread.cell == "ref"].groupby(["limit", "epochs"]).acc1.agg(["std", "size"]).reset_index()
    ok = spread[spread["std"] * 100 <= 0.5].assign(cost=lambda t: t.limit * t.epochs).sort_values("cost")
    spread_txt = ", ".join(f"{100 * r['std']:.2f} pt ({int(r.limit) // 1000}k × {int(r.epochs)})"
                           for _, r in spread.iterrows())
    return (f"{int(spread['size'].iloc[0])} seeds of the reference at {len(spread)} budgets give a std of Acc@1 of "
            f"{spread_txt}; the cheapest with std ≤ 0.5 pt is "
            + (f"**{int(ok.limit.iloc[0]) // 1000}k × {int(ok.epochs.iloc[0])}**" if len(ok) else "none") + ".\n\n"
            + _verdicts(pd.read_csv(os.path.join(root, EVIDENCE, "study_gpu_20000x2.csv"))))


def cpu_study(root: str = ".") -> str:
    """The fuller study run on the CPU by `docs/evidence/cpu_study.py`: its measured time, the reference's seed
    spread, every cell against the reference and the claims it resolves, from its committed files."""
    path = os.path.join(root, EVIDENCE, "study_cpu_20000x2")
    if not os.path.exists(path + ".json"):
        return "Not run yet: `python docs/evidence/cpu_study.py` in a clone whose default run is done."
    meta = _json(path + ".json")
    cells = pd.read_csv(path + ".csv")
    claims = pd.read_csv(os.path.join(root, EVIDENCE, "claims_cpu_20000x2.csv"))
    ref = cells[cells.cell == "ref"].acc1
    if "verdict" in claims:  # a claims table with computed verdicts (report.claims since issue 20)
        from .report import summary_line

        told = f"has the verdicts **{summary_line(claims)}**."
    else:  # an older one: intervals that exclude the null ("resolved"), no verdicts
        resolved = claims[claims.resolved.astype(bool)].claim
        told = (f"resolves {len(resolved)} of {len(claims)} rows (an interval that excludes the null, whichever side; "
                "no verdicts): " + ", ".join(f"`{c}`" for c in resolved) + ".")
    return (f"`{meta['command']}` (via `python docs/evidence/cpu_study.py`, commit {meta['commit']}) took "
            f"**{meta['wall_s'] / 60:.0f} min** on {meta['machine']}, {meta['date']} (the teacher and data stages "
            f"from the default run's cache). The reference's seed spread there: std of Acc@1 "
            f"**{100 * ref.std():.2f} pt** over {len(ref)} seeds (mean {100 * ref.mean():.2f} %).\n\n"
            + _verdicts(cells) + "\n\n"
            f"Its claims table (`docs/evidence/claims_cpu_20000x2.csv`) {told}")


CONVERGED = f"{EVIDENCE}/converged_fmnist"


def _cpu(info: Dict[str, Any], model: str = "?") -> str:
    """"AMD EPYC (AVX2 kernels, 2 threads)" from a machine_info record (`model` where it names no CPU)."""
    n = info.get("threads")
    threads = "" if n is None else f", {n} thread{'' if n == 1 else 's'}"  # a study's runs: its notes say
    return f"{info.get('cpu_model', model)} ({info.get('cpu_capability', '?')} kernels{threads})"


def converged_study(root: str = ".") -> str:
    """The converged study (docs/evidence/converged_fmnist, written by `odevit.repro.evidence snapshot`): its
    claims table once every run and stage is in; until then the runs finished so far and their validation curves."""
    path = os.path.join(root, CONVERGED)
    if not os.path.isfile(os.path.join(path, "study.json")):
        return ("Not run yet: `dvc exp run $(python -m odevit.repro.preset presets/converged_fmnist.yaml)`, then "
                "`python -m odevit.repro.evidence snapshot converged_fmnist --clone . --command ...`.")
    meta = _json(os.path.join(path, "study.json"))
    head = (f"`{meta['command']}` (commit {meta['commit']}) on {_cpu(meta['machine'])}, {meta['machine'].get('cuda_device') or 'no GPU'}, {meta['date']}: "
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
        t = _json(os.path.join(path, "results/02_teacher/metrics.json"))["acc1"]
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
                    f"{r.free_acc1:.2f}{mark} | {_num(r.diff_mean, True)} {_ci(r.ci_low, r.ci_high, True)} | "
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
                    f"{_num(r.diff_mean, True)} {_ci(r.ci_low, r.ci_high, True)} | "
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
    meta = _json(os.path.join(path, "study.json"))
    runs, cells = (pd.read_csv(os.path.join(path, f"replicate_{k}.csv")) for k in ("runs", "cells"))
    claims = pd.read_csv(os.path.join(path, "replicate_claims.csv"))
    decided = claims[~claims.primary_intervals.isin([stats.FACT, stats.NOT_A_CLAIM])]
    t = runs[runs.cell == "teacher"].iloc[0]
    per_seed = {c: "/".join(f"{d:+.2f}" for d in g.sort_values("seed").diff_pt) for c, g in runs.groupby("cell")}
    seeds = "/".join(str(x) for x in sorted(runs[runs.cell != "teacher"].seed.unique()))
    decisive = lambda col: decided[col].isin([stats.SUPPORTS, stats.CONTRADICTS])  # noqa: E731
    head = (f"`{meta['command']}` (commit {meta['commit']}, {meta['date']}, {_cpu(meta['machine'])}): "
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


RUN_BEFORE = f"{EVIDENCE}/run_time_before.json"  # an earlier run's record (`--save-run-baseline`): before/after


def cell_medians(root: str = ".") -> Dict[str, float]:
    """Median seconds per study cell of each phase of its timing.json, and of everything outside its training loop
    (`outside_train` = total - train: the per-cell overhead)."""
    ts = [_json(p) for p in sorted(glob.glob(os.path.join(root, "results/cells/*/s*/timing.json")))]
    keys = [k for k in ts[0] if k not in ("train_time_s",)] if ts else []
    out = {k: float(pd.Series([t.get(k, 0.0) for t in ts]).median()) for k in keys}
    if ts:
        out["outside_train"] = float(pd.Series([t.get("total", 0.0) - t.get("train", 0.0) for t in ts]).median())
    return {k: round(v, 2) for k, v in out.items()}


def save_run_baseline(root: str = ".", out: str = RUN_BEFORE) -> Dict[str, Any]:
    """Keep the committed run's record (results/run.json, its cells' medians, the commit) as the 'before' of the
    run-time table, so a later run shows what a change saved, phase by phase."""
    import subprocess

    run = _json(os.path.join(root, "results/run.json"))
    commit = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h", "--", "results/run.json"],
                            capture_output=True, text=True).stdout.strip()
    rec = {**run, "cell_medians_s": cell_medians(root), "commit": commit}
    write_json(rec, os.path.join(root, out))
    return rec


def _phase_rows(run: Dict[str, Any]) -> Dict[str, float]:
    """A run record's seconds by the README's rows (label -> s)."""
    ph, nb = run["phases_s"], run.get("notebooks_s", {})
    labels = {"train": "training loops (teacher + every cell)", "val_eval": "per-epoch validation",
              "test_eval": "final test evaluation", "robustness": "Acc@1-vs-N curves",
              "teacher_cache": "teacher CLS states (per cell)", "teacher": "teacher loading (per cell)",
              "startup": "interpreter start + imports (cells, 02)", "data": "data loading (cells, 02)",
              "write": "writing results", "other": "rest inside the cells and 02 (distances, figures, ...)"}
    rows = {label: ph[k] for k, label in labels.items() if k in ph}
    rows["notebook stages other than 02 (03–07 analyses, report)"] = sum(v for k, v in nb.items() if k != "02_teacher")
    rows["DVC and the rest (process starts, hashing, publish)"] = run["dvc_other_s"]
    rows["**wall-clock of `dvc repro`**"] = run["wall_s"]
    return rows


def run_time(root: str = ".") -> str:
    """The wall-clock time of the `make repro` whose outputs are committed (results/run.json, written by make repro):
    where it went by phase (each stage's timing.json summed, the notebook stages' wall time, DVC and the rest) and
    the training share; the machine it ran on. With an earlier run's record (RUN_BEFORE) of another wall time, each
    phase before and now, and the per-cell medians."""
    run = _json(os.path.join(root, "results/run.json"))
    info = run.get("machine_info", {})
    cpu = _cpu(info, run["machine"])
    if run.get("dvc_other_s", 0.0) >= 0:
        head = (f"`make repro` on a fresh clone, {run['machine']}, {cpu}, {run['date']}: **{run['wall_s'] / 60:.1f} "
                f"min wall-clock** for `dvc repro` (`results/run.json`).")
    else:  # some stages' outputs came from an earlier run (see `outside` below)
        head = (f"`make repro`, {run['machine']}, {cpu}, {run['date']}: its stages' own timings add up to "
                f"**{(run['wall_s'] - run['dvc_other_s']) / 60:.1f} min** (`stages_s`), what a whole run from a fresh clone takes at least; "
                f"the recorded `dvc repro` took {run['wall_s'] / 60:.1f} min wall-clock (`results/run.json`), some of "
                "its stages having been committed by an earlier run.")
    if "phases_s" not in run:  # a record from before the phase breakdown
        return head
    wall, train = run["wall_s"], run["phases_s"].get("train", 0.0)
    now, med = _phase_rows(run), cell_medians(root)
    path = os.path.join(root, RUN_BEFORE)
    before = _json(path) if os.path.isfile(path) else None
    if before is not None and before["wall_s"] == wall:
        before = None  # the baseline is this run
    if before is None:
        rows = ["| where the time went | s | share |", "|---|---:|---:|"]
        rows += [f"| {k} | {v:.0f} | {100 * v / wall:.0f} % |" for k, v in now.items() if not k.startswith("**")]
    else:
        old, bw = _phase_rows(before), before["wall_s"]
        rows = [f"| where the time went | before (commit {before.get('commit', '?')}, {before['date']}): s | share "
                "| this run: s | share |", "|---|---:|---:|---:|---:|"]
        rows += [f"| {k} | {old.get(k, 0.0):.0f} | {100 * old.get(k, 0.0) / bw:.0f} % | {v:.0f} | {100 * v / wall:.0f} % |"
                 for k, v in now.items()]
        bm = before.get("cell_medians_s", {})
        keys = [k for k in ("startup", "teacher_cache", "val_eval", "test_eval", "robustness", "outside_train") if k in med]
        rows += ["", "Median seconds per study cell (`timing.json`):", "",
                 "| phase | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys),
                 "| before | " + " | ".join(f"{bm.get(k, float('nan')):.1f}" for k in keys) + " |",
                 "| this run | " + " | ".join(f"{med[k]:.1f}" for k in keys) + " |"]
    out_cell = med.get("outside_train", float("nan"))
    met = lambda ok: "met" if ok else "not met"  # noqa: E731
    # wall - the stages' sum < 0: some stage times were written by processes outside this dvc repro
    outside = ("" if run.get("dvc_other_s", 0.0) >= 0 else
               f" **Not a breakdown of this wall-clock:** the stages' own timings add up to {wall - run['dvc_other_s']:.0f} s, "
               f"more than the {wall:.0f} s of this `dvc repro` (so \"DVC and the rest\", wall − stages, is negative): "
               "some were written by processes outside it (stages committed from an earlier run, a resumed run's "
               "earlier processes), and the shares below are of the wall-clock, not of the run that made them.")
    return (head + f" Training loops are **{100 * train / wall:.0f} %** of it; a study cell spends a median "
            f"{out_cell:.0f} s outside its training loop ({run['cells']} cells). The performance targets (non-training "
            f"share ≤ 25 %: {met(1 - train / wall <= 0.25)}; ≤ 10 s per cell outside training: {met(out_cell <= 10)})."
            + outside + " Phases as the stages timed them (`timing.json`, `results/notebook_times.json`):\n\n"
            + "\n".join(rows))


def _bib_key(ref: Dict) -> str:
    first = re.sub(r"[^a-z]", "", ref["authors"][0]["family-names"].lower())
    word = re.sub(r"[^a-z0-9]", "", ref["title"].split()[0].lower())
    return f"{first}{ref['year']}{word}"


def cite(root: str = ".") -> str:
    """The paper as BibTeX and this repository, from CITATION.cff (its preferred-citation and its own fields)."""
    with open(os.path.join(root, "CITATION.cff"), encoding="utf-8") as f:
        cff = yaml.safe_load(f)
    ref = cff["preferred-citation"]
    authors = " and ".join(f"{a['family-names']}, {a['given-names']}" for a in ref["authors"])
    arxiv = next((i["value"] for i in ref.get("identifiers", []) if str(i["value"]).startswith("arXiv:")), None)
    fields = {"title": ref["title"].replace("&", r"\&"), "author": authors,
              "journal": f"{ref['journal']} {arxiv}" if arxiv else ref["journal"], "year": ref["year"],
              "doi": ref.get("doi"), "url": ref.get("url")}
    bib = ",\n".join(f"  {k:<7} = {{{v}}}" for k, v in fields.items() if v is not None)
    repo_authors = ", ".join(a.get("name") or f"{a['given-names']} {a['family-names']}" for a in cff["authors"])
    return (f"{cff['message']} The paper:\n\n```bibtex\n@article{{{_bib_key(ref)},\n{bib}\n}}\n```\n\n"
            f"This repository: {repo_authors}, *{cff['title']}*, version {cff['version']}, {cff['license']} license "
            "(`LICENSE`); `CITATION.cff` holds both (GitHub's \"Cite this repository\" reads it).")


def plan_verdicts(root: str = ".") -> str:
    """The plan's questions (plan.yaml, fixed before the runs) with their computed verdicts, confirmatory beside
    exploratory (results/evidence/claims.csv), and how many of the planned runs exist (results/evidence/runs.csv)."""
    c = pd.read_csv(os.path.join(root, "results/evidence/claims.csv"))
    runs = pd.read_csv(os.path.join(root, "results/evidence/runs.csv"))

    def cell(r: Any) -> str:
        if not r.n:
            return f"– (0 of {r.planned} seeds) **{r.verdict}**"
        return f"{r['mean']:+.2f}{_interval(r.ci_low, r.ci_high)} {r.unit}, n = {r.n}: **{r.verdict}**"

    rows = ["| study | question | test | confirmatory (fresh seeds, this plan) | exploratory (seeds 0-2, rules chosen after; "
            "judged here by this plan) | replicated? |", "|---|---|---|---|---|---|"]
    reps = replications(c)
    for (study, q), g in c.groupby(["study", "question"], sort=False):
        conf = g[g.status != "exploratory"]
        expl = g[g.status == "exploratory"]
        r0 = g.iloc[0]
        test = r0.test.replace("_", "-") + ("" if pd.isna(r0.margin) else f" ±{r0.margin:g}" if r0.test == "equivalence"
                                            else f" (margin {r0.margin:g})")
        rep = reps.get((study, q), "–")
        rows.append(f"| {study} | {r0.claim} (`{q}`) | {test}, α {r0.alpha_each:.3g} each | "
                    f"{cell(conf.iloc[0]) if len(conf) else '–'} | {cell(expl.iloc[0]) if len(expl) else '–'} | {rep} |")
    from . import plan as plan_mod

    plan = plan_mod.load(os.path.join(root, plan_mod.PLAN_FILE))
    planned = sum(_planned(st) for st in plan["studies"].values())
    machines = ", ".join(sorted(runs.machine.dropna().unique())) or "none yet"
    head = (f"{len(runs)} of {planned} planned confirmatory runs are in (machines: {machines}); "
            f"{int(runs.converged.sum())} converged by the plan's rule.\nIntervals at each question's level "
            "(α / the family's size); `python -m odevit.repro.verdicts` recomputes every row.")
    t = _json(os.path.join(root, "results/02_teacher/metrics.json"))
    test_images = _json(os.path.join(root, "results/01_data/metrics.json"))["test_size"]
    prm = _yaml(os.path.join(root, "params.yaml"))
    post = int(c.post_hoc.sum())
    mixed = int(c.verdict.astype(str).str.startswith(("mixed machines", "mixed teachers")).sum())
    setting = (f"Setting: Fashion-MNIST ({t['train_images']:,} training images, {t['val_images']:,} for validation, "
               f"{test_images:,} test images scored once; the step-count rows on the first {prm['study']['robustness_test_limit']:,})."
               f"\nThe teacher is a {t['depth']}-layer ViT trained from scratch "
               f"({t['epochs']} epochs, {100 * t['acc1']:.2f} % test Acc@1; "
               + ("converged by the validation rule" if t.get("converged") else
                  f"not converged: its last {prm['base']['converge_window']} of {t['epochs_run']} epochs raised validation "
                  f"Acc@1 by {t['val_gain_last_pts']:.1f} pt")
               + "); the student is the ODE of its width, trained at N = "
               f"{prm['distill']['num_steps']} solver steps; \"free\" is that ODE trained from scratch.\nEach question is tested at α = {plan['rules']['alpha']:g} / the number of questions of its "
               "study (\"α each\").\n*Not converged*: a run it rests on still gained one validation standard error "
               f"({runs.threshold_pts.min():.2f}–{runs.threshold_pts.max():.2f} pt by run) or more in the last quarter of its schedule "
               "(in a study with `convergence: cell_mean`: a cell's runs did on average); the row shows numbers, "
               "no verdict.\n*Incomplete (k of n seeds)*: fewer of the plan's seeds have every run the row needs "
               "(a run counts where it trained its study's whole budget); numbers, no verdict. *Mixed machines* / "
               "*mixed teachers*: the row's runs did their arithmetic on two "
               "devices (plan.yaml `rules.machine`: one machine type per study), or a cell's runs distilled from two "
               f"trainings of their teacher; no verdict (rows so marked: {mixed})."
               "\n*Post hoc* marks a row whose plan changed after its runs "
               f"(rows so marked: {post}); a study added after another's results is not post hoc "
               "but a new family on fresh seeds, planned before its own runs, and its description says why it was "
               "added.")
    figure = ("![the plan's verdicts, one panel per kind of question, each on its own scale, the side the paper "
              "predicts shaded per row](results/evidence/verdicts.png)")
    return (setting + "\n\n" + head + "\n\n" + "\n".join(rows) + "\n\n" + figure
            + "\n\n<details><summary>Per study: its description, rows in words, and the runs that missed the convergence "
            "rule</summary>\n\n" + findings(c, plan, runs) + "\n\n</details>")


DECIDED = ("supports", "contradicts")


def replication(confirmatory: str, exploratory: str) -> str:
    """Whether a confirmatory verdict replicates the exploratory one of the same question (both judged by the plan):
    replicated (the same decided verdict), reversed (the other one), decided only now (exploratory inconclusive),
    not replicated (exploratory decided, confirmatory inconclusive), neither decided, or not judged yet
    (confirmatory not measured, incomplete or not converged: numbers without a verdict)."""
    c, e = (str(v).replace(" (post hoc)", "") for v in (confirmatory, exploratory))
    if c not in DECIDED + ("inconclusive",):
        return "not judged yet"
    if c in DECIDED:
        return "replicated" if e == c else "reversed" if e in DECIDED else "decided only now"
    return "not replicated" if e in DECIDED else "neither decided"


def replications(c: pd.DataFrame) -> Dict[Tuple[str, str], str]:
    """`replication` of every (study, question) of claims.csv that has both a confirmatory and an exploratory row."""
    out = {}
    for (study, q), g in c.groupby(["study", "question"], sort=False):
        conf, expl = g[g.status != "exploratory"], g[g.status == "exploratory"]
        if len(conf) and len(expl):
            out[(study, q)] = replication(conf.iloc[0].verdict, expl.iloc[0].verdict)
    return out


def replication_summary(c: pd.DataFrame) -> str:
    """One sentence: how the confirmatory rows answered the exploratory verdicts they re-asked."""
    out: Dict[str, List[str]] = {}
    for (study, q), rep in replications(c).items():
        out.setdefault(rep, []).append(f"{study} `{q}`")
    if not out:
        return ""
    order = ["replicated", "decided only now", "reversed", "not replicated", "neither decided", "not judged yet"]
    return ("Against the exploratory runs (seeds 0-2, judged by the same plan): " + "; ".join(
        f"{k} {len(out[k])} ({', '.join(out[k])})" for k in order if k in out) + ".")


def _images(plan: Dict[str, Any], study: str, all_images: int, with_epochs: bool = False) -> str:
    budget = plan["studies"][study]["budget"]
    return f"{budget['train_limit'] or all_images:,} images" + (f" × {budget['epochs']} epochs" if with_epochs else "")


def _schedules_differ(plan: Dict[str, Any], studies: Iterable[str]) -> bool:
    """Whether two of these studies train on the same images for different epochs (a finding then names each
    study's epochs beside its images, so the two schedules read apart)."""
    budgets = {(plan["studies"][s]["budget"]["train_limit"], plan["studies"][s]["budget"]["epochs"])
               for s in studies if s in plan["studies"]}
    return len(budgets) != len({n for n, _ in budgets})


def _planned(study: Dict[str, Any]) -> int:
    """A plan study's runs: its cells x its seeds."""
    return len(study["cells"]) * len(study["seeds"])


def missing_runs(plan: Dict[str, Any], runs: pd.DataFrame, root: str = ".") -> str:
    """The plan's runs not made yet, per study: their cells and number, the one device they may be made on (that of
    the study's finished runs: plan.yaml rules.machine; `runner` leaves them out elsewhere), and the cells that also
    need the study's own teacher where its training is recorded but it is not kept in git (`runner.kept_path`: then
    only the machine whose DVC cache holds it can make them). '' when every run is in."""
    from . import config, study_teacher
    from .runner import kept_path
    from .verdicts import devices

    parts, total = [], 0
    for name, st in plan["studies"].items():
        done = runs[runs.study == name]
        have = set(zip(done.cell, done.seed.astype(int)))
        todo = [(c, s) for c in st["cells"] for s in st["seeds"] if (c, s) not in have]
        if not todo:
            continue
        total += len(todo)
        cells = list(dict.fromkeys(c for c, _ in todo))
        devs = sorted({d for m in done.machine.dropna() for d in devices(m)})
        where = f"only on {' or '.join(devs)}, the device of its other runs" if devs else "on any machine"
        trained = os.path.isfile(os.path.join(root, study_teacher.dirs(name)[1], "metrics.json"))  # recorded
        lost = [c for c in cells if trained and config.uses_study_teacher(st["cells"][c])
                and not os.path.isfile(os.path.join(root, kept_path(name)))]
        n = f"{len(todo)} run{'s' if len(todo) > 1 else ''}"
        parts.append(f"{name}, cell{'s' if len(cells) > 1 else ''} {', '.join(cells)}: {n}, {where}"
                     + (f"; {' and '.join(lost)} also need the study's own teacher, trained before the runner kept "
                        f"study teachers in git (no `{kept_path(name)}`): only the machine whose DVC cache holds it "
                        "can make them; without them their rows stay incomplete" if lost else ""))
    if not parts:
        return ""
    planned = sum(_planned(st) for st in plan["studies"].values())
    return (f"Runs not made yet ({total} of {planned}; `make evidence` lists and leaves out those its machine must "
            "not make, plan.yaml `rules.machine`): " + "; ".join(parts) + ".")


def key_findings(root: str = ".") -> str:
    """The README's opening: docs/findings.yaml's questions, each answered by its plan rows (confirmatory rows of
    results/evidence/claims.csv: number, interval at α each, verdict), grouped by the study's training images."""
    from . import plan as plan_mod

    plan = plan_mod.load(os.path.join(root, plan_mod.PLAN_FILE))
    claims = pd.read_csv(os.path.join(root, "results/evidence/claims.csv"))
    c = claims[claims.status == "confirmatory"].set_index(["study", "question"])
    t = _json(os.path.join(root, "results/02_teacher/metrics.json"))  # its training images: a study's "all"
    out = []
    for i, f in enumerate(_yaml(os.path.join(root, "docs/findings.yaml"))["findings"], 1):
        parts, last = [], None
        epochs = _schedules_differ(plan, {ref.split(".", 1)[0] for _, ref in f["rows"]})
        for label, ref in f["rows"]:
            study, q = ref.split(".", 1)
            if (study, q) not in c.index:
                raise ValueError(f"docs/findings.yaml: {ref} is not a confirmatory row of results/evidence/claims.csv")
            r = c.loc[(study, q)]
            num = "not run" if not r.n else f"{r['mean']:+.2f} {r.unit}" + _interval(r.ci_low, r.ci_high)
            where = _images(plan, study, t["train_images"], epochs)
            parts.append(("" if where == last else f"{where}: ") + f"{label} {num} *{r.verdict}*")
            last = where
        out.append(f"{i}. **{f['ask']}** " + "; ".join(parts) + "." + (f" {f['note']}" if f.get("note") else ""))
    runs = pd.read_csv(os.path.join(root, "results/evidence/runs.csv"))
    params = _yaml(os.path.join(root, "params.yaml"))
    n_steps, sub = params["distill"]["num_steps"], params["study"]["robustness_test_limit"]
    teacher = 100 * t["acc1"]
    names = {"ref": "label-free", "ce": "+CE", "free": "free ODE"}
    weak, first = False, True
    for name in [n for n, st in plan["studies"].items() if not st["budget"]["train_limit"]]:  # on all its images
        big = runs[runs.study == name]
        if not len(big):
            continue
        g = big.groupby("cell")[["acc1", "acc1_half_n", "acc1_sub_n"]].mean().reindex(
            [k for k in names if k in set(big.cell)])
        at_n = ", ".join(f"{names[k]} {v:.2f} %" for k, v in g.acc1.items())
        half = ", ".join(f"{names[k]} {h:.2f} % (at N on the same images {n:.2f} %)"
                         for k, h, n in zip(g.index, g.acc1_half_n, g.acc1_sub_n))
        weak = weak or ("free" in g.index and teacher < g.acc1["free"])
        epochs = plan["studies"][name]["budget"]["epochs"]
        out.append((f"\nFor scale, mean test Acc@1 at the trained N = {n_steps} steps: teacher {teacher:.2f} %; "
                    if first else "") + f"{name}'s runs ({epochs} epochs): {at_n}; at N/2 (first {sub:,} test images, "
                   f"as every step-count row): {half}.")
        first = False
    if weak:
        out[-1] += (" The teacher, trained from scratch on the same images, is weaker than the free ODE, so keeping "
                    "its accuracy is a low bar.")
    limit = {k: v["budget"]["train_limit"] for k, v in plan["studies"].items()}
    pending = sorted({(st, q) for st, q in c.index for st2, q2 in c.index  # same question, same images, no runs yet
                      if q == q2 and st2 != st and limit[st] == limit[st2] and c.loc[(st, q)].n == 0
                      and c.loc[(st2, q2)].verdict == "not converged"})
    if pending:
        out.append("\nPlanned and not run yet, asking not-converged questions again: " + ", ".join(
            f"{p} `{q}` ({plan['studies'][p]['budget']['epochs']} epochs"
            + (", convergence judged per cell" if plan["studies"][p].get("convergence") == "cell_mean" else "") + ")"
            for p, q in pending) + ".")
    missing = missing_runs(plan, runs, root)
    if missing:
        out.append(("\n" if not pending else "") + missing)
    rep = replication_summary(claims)
    if rep:
        out.append("\n" + rep)
    shift = machine_shift_summary(root)
    if shift:
        out.append("\n" + shift)
    return ("\n".join(out) + "\n\nEach row: mean over paired seeds [interval at its study's α each] and the verdict on "
            "the direction the plan predicts (the paper's; for ours, ours). *not converged*: a run the row rests on was "
            "still improving at the end of its schedule (in a study judged per cell, `convergence: cell_mean`: a cell's "
            "runs on average), so the row gives numbers and no verdict; the teacher's convergence, stated in the "
            "setting, gates no row. Rows, seeds and runs are in the table below.")


def findings(c: pd.DataFrame, plan: Dict[str, Any], runs: pd.DataFrame) -> str:
    """One bullet per study of the plan: its description, then each question's claim, our number and its verdict
    (confirmatory rows only), in words a reader can quote; a study with runs that missed the convergence rule names
    them with their tail gain and threshold."""
    out = []
    for name, st in plan["studies"].items():
        g = c[(c.study == name) & (c.status != "exploratory")]
        if g.empty or not g.n.any():
            out.append(f"- **{name}** — {st['description']}: planned ({len(st['seeds'])} seeds), not run yet.")
            continue
        parts = []
        for r in g.itertuples():
            num = "no run" if not r.n else f"{r.mean:+.2f} {r.unit}" + _interval(r.ci_low, r.ci_high) + f", n = {r.n}"
            parts.append(f"  - {r.claim}: {num} — *{r.verdict}*")
        mine = runs[runs.study == name]
        late = mine[~mine.converged.astype(bool)]
        per_cell = st.get("convergence") == "cell_mean"  # then a run failing the rule withholds no row by itself
        why = [] if late.empty else [("  - failing the per-run rule (judged per cell, `convergence: cell_mean`: a "
                                      "row waits only for a cell whose runs fail it on average): " if per_cell else
                                      "  - not converged: ") + ", ".join(
            f"{r.cell} s{r.seed} (+{r.gain_last_pts:.3f} pt in its last quarter, threshold {r.threshold_pts:.3f})"
            for r in late.itertuples())]
        count = ("" if late.empty else  # the plan's description says what the budget was for
                 f" [{len(mine) - len(late)} of {len(mine)} runs converged by the plan's rule]")
        out.append("\n".join([f"- **{name}** — {st['description'].rstrip('.')}"
                               + (" (judged per cell: `convergence: cell_mean`)" if per_cell and "cell_mean" not in
                                  st["description"] else "") + count + ":"] + parts + why))
    return "\n".join(out)


def evidence_time(root: str = ".") -> str:
    """Where each study's runs trained and how fast, from their recorded provenance (results/evidence/run_time.csv,
    written by the evidence stage): per machine over every study, then per study."""
    t = pd.read_csv(os.path.join(root, "results/evidence/run_time.csv"))
    rows = ["| study | machine | runs (processes; most seeds in one) | training images | busy wall | "
            "process-seconds | images/s over the busy wall |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in pd.concat([t[t.study == "all"], t[t.study != "all"]]).itertuples():
        gone = f", {r.unrecorded} unrecorded" if r.unrecorded else ""
        rows.append(f"| {'**every study**' if r.study == 'all' else r.study} | {r.machine} | {r.runs} "
                    f"({r.processes}{gone}; {r.together_max}) | {r.train_images / 1e6:.2f} M | {r.busy_wall_s / 60:.1f} min "
                    f"| {r.process_s / 60:.1f} min | {r.img_per_s:,.0f}{' (at most)' if r.unrecorded else ''} |")
    return ("Every finished run of the plan, from the provenance each run records (`results/evidence/run_time.csv`, "
            "written by `dvc repro -s evidence`). *runs (processes; most seeds in one)*: a process trains one run, or "
            "with `--together K` up to K seeds of a cell; a resumed run adds a process. *busy wall*: the seconds at "
            "least one of the processes was running (each from its start-up to its end), so time between separate "
            "commands or sessions is left out and processes running at once count once. *process-seconds*: the "
            "processes' wall times summed. *unrecorded*: processes stopped before their first progress record, whose "
            "seconds no file holds; they are left out of the busy wall, so images/s is then an upper bound. "
            "*images/s*: training images over the busy wall, the machine's rate under that study's concurrency and "
            "budget (evaluation and start-up included), not one run's speed: rows run with other concurrency or "
            "budgets do not compare. The **every study** rows pool all runs on that machine type, from different "
            "days and machines of the kind; studies that shared a machine at once count the shared seconds once "
            "there.\n\n" + "\n".join(rows) + "\n\n" + _plan_time(root, t))


def _plan_time(root: str, t: pd.DataFrame) -> str:
    """The whole plan's training images (cells x seeds x images x epochs of every study, its teachers aside) and
    how long they take at each machine type's pooled rate of the table (its **every study** row): an extrapolation
    from measured rates, said as one."""
    from . import plan as plan_mod

    plan = plan_mod.load(os.path.join(root, plan_mod.PLAN_FILE))
    every = _json(os.path.join(root, "results/02_teacher/metrics.json"))["train_images"]  # train_limit 0: all
    runs = images = 0
    for st in plan["studies"].values():
        n = _planned(st)
        runs += n
        images += n * (st["budget"]["train_limit"] or every) * st["budget"]["epochs"]
    done = t[t.study != "all"].train_images.sum()
    mins = {r.machine: (images / r.img_per_s / 60, r.unrecorded) for r in t[t.study == "all"].itertuples()}
    at = "; ".join(f"{m} {'≥' if gone else '≈'} " + (f"{v:,.0f} min" if v < 120 else f"{v / 60:,.0f} h")
                   for m, (v, gone) in mins.items())  # an upper-bound rate ("at most"): a lower-bound time
    return (f"The whole plan is {runs} runs and {images / 1e6:.2f} M training images (its teachers aside), "
            f"{done / 1e6:.2f} M of them trained (the table). At each machine type's pooled rate above, all of it "
            f"would take: {at} — an extrapolation from the measured rates, not a measured run of the whole plan.")


def _short_machine(m: str) -> str:
    """A machine_shift.csv machine ('CPU / GPU (torch v)', several joined by '; ') as its GPUs, or 'CPU (no GPU)'
    where there is none, with its torch version."""
    name, _, torch_v = m.partition(" (torch ")
    parts = []
    for one in name.split("; "):
        cpu, _, gpu = one.partition(" / ")
        parts.append(f"{cpu} (no GPU)" if gpu in ("", "no GPU") else gpu)
    return "; ".join(parts) + (f", torch {torch_v.rstrip(')')}" if torch_v else "")


def _num_or_dash(x: float, fmt: str) -> str:
    return "–" if pd.isna(x) else format(x, fmt)


def machine_shift_summary(root: str = ".") -> str:
    """One line for the findings: per replicate how far each cell's runs moved (machine_shift.csv's cell rows)."""
    t = pd.read_csv(os.path.join(root, "results/evidence/machine_shift.csv"))
    t = t[t.kind == "cell"]
    parts = []
    for (_, study), g in t.groupby(["replicate", "study"], sort=False):
        there, here = _short_machine(g.machine_replicate.iloc[0]), _short_machine(g.machine_here.iloc[0])
        if there == here:  # the same GPU model with other host CPUs: the full records tell them apart
            there, here = g.machine_replicate.iloc[0], g.machine_here.iloc[0]
        n = int(g.n.sum())
        moved = (f"all {n} runs the same test Acc@1" if int(g.identical.sum()) == n else
                 "each run's test Acc@1 moved at most " + ", ".join(
                     f"{r.shift_max_abs:.2f} pt in cell {r.name} (its seed SD {_num_or_dash(r.sd_here, '.2f')})"
                     for r in g.itertuples()) + f" ({g.n.max()} seeds)")
        parts.append(f"{study} on {there} against {here}: {moved}")
    return ("Trained again on another machine type (the same cells and seeds, by code recorded as giving bit-identical "
            "runs; \"Does the machine move the results?\" below), one line each:\n"
            + "\n".join(f"- {p}." for p in parts)) if parts else ""


def machine_shift(root: str = ".") -> str:
    """The machine as a measured variance component (results/evidence/machine_shift.csv, written by the evidence
    stage from plan.yaml's `replicates`): per replicated cell and question, the shift of its runs against the seed
    spread."""
    t = pd.read_csv(os.path.join(root, "results/evidence/machine_shift.csv"))
    head = ("The plan has no machine gate; the machine is measured beside the verdicts: a study's runs trained again "
            "on another machine type with the same cells and seeds (plan.yaml `replicates`), compared seed by seed "
            "(`results/evidence/machine_shift.csv`, written by `dvc repro -s evidence`). Each side is named with its "
            "torch and the training sources its runs record (*source*: a hash of the training code; different "
            "sources are ones `docs/evidence/source_equivalence.json` shows to give bit-identical runs on one "
            "machine). `acc1_half_n` / `acc1_sub_n`: a run's test Acc@1 at N/2 / at N solver steps, both on the "
            "step-count rows' test images. *shift*: the "
            "replicate's test Acc@1 − the committed run's, in points, with its 95 % interval over the seeds; a "
            "*question* row shifts the per-seed statistic its verdict rests on (a shift common to both cells cancels "
            "there). *SD here*: the same quantity's SD over all of the study's seeds in the committed runs. If the "
            "other machine changed each run as much as a new seed does, the shift's SD would be about √2 × that "
            "(ratio ≈ 1.41; 0 = the same numbers); the ratio's top, from the top of the shift SD's 95 % interval, is "
            "what the seeds cannot rule out. A mean shift whose interval excludes 0 is a systematic machine effect, "
            "which no seed interval sees.")
    if t.empty:
        return head + "\n\nNo replicate measured yet."
    out = [head]
    for (rep, study), g in t.groupby(["replicate", "study"], sort=False):
        r0 = g.iloc[0]
        rows = [f"{study}, committed on {r0.machine_here}, source {r0.source_here} → replicate on "
                f"{r0.machine_replicate}, source {r0.source_replicate} (`{rep}`):", "",
                "| cell or question | seeds | shift: mean [95 % interval] | shift SD (95 % top) | largest \\|shift\\| "
                "| seeds identical | SD here | shift SD / SD here (top) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for r in g.itertuples():
            ok = r.sd_here > 0 and not pd.isna(r.shift_sd)
            ratio = f"{r.shift_sd / r.sd_here:.2f} ({r.shift_sd_upper / r.sd_here:.2f})" if ok else "–"
            rows.append(f"| {r.name} | {r.seeds} | {r.shift_mean:+.2f}{_interval(r.ci_low, r.ci_high)} pt | "
                        f"{_num_or_dash(r.shift_sd, '.2f')} ({_num_or_dash(r.shift_sd_upper, '.2f')}) pt | "
                        f"{r.shift_max_abs:.2f} pt | {r.identical} of {r.n} | {_num_or_dash(r.sd_here, '.2f')} pt | "
                        f"{ratio} |")
        out.append("\n".join(rows))
    return "\n\n".join(out)


V2_LABELS = {"ts_minus_free": "label-free − free ODE", "ce_minus_free": "+CE − free ODE",
             "retention": "label-free − its teacher", "half_n": "N/2 − N", "double_n": "2N − N",
             "unseen": "worst never-trained N − N", "unseen_inside": "worst never-trained N inside its range − N",
             "unseen_below": "worst N below its range − N", "centernorm_minus_layernorm": "CenterNorm − LayerNorm",
             "jasmin_on_minus_off": "JaSMin on − off", "strong_minus_weak_teacher": "v2 teacher − plan-1 teacher"}


def _v2_label(q: str) -> str:
    for key in sorted(V2_LABELS, key=len, reverse=True):
        if q == key or q.startswith(key + "_"):
            rest = q[len(key) + 1:]
            who = {"ref": "distilled", "free": "free ODE", "remedy": "remedy"}.get(rest.split("_")[-1], "")
            return V2_LABELS[key] + (f", {who}" if who and key in ("half_n", "double_n", "unseen", "unseen_inside",
                                                                  "unseen_below") else "")
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


def _v2_words(c: pd.DataFrame) -> List[str]:
    """The rows in sentences, grouped by what they say (computed from claims.csv)."""
    def name(r: Any) -> str:
        return f"{_v2_label(r.question)} at {int(r.budget.split(' ')[0]):,} images ({r.mean:+.2f} pt)"

    decided = c[c.verdict.isin(["supports", "contradicts"])]
    learning = c[c.verdict.str.startswith("not converged")]
    waiting = c[c.verdict.str.startswith("not measured")]
    out = []
    for v in ("supports", "contradicts"):
        rows = decided[decided.verdict == v]
        if len(rows):
            out.append(f"- **{v.capitalize()} the paper**: " + "; ".join(name(r) for r in rows.itertuples())
                       + ".")
    if len(learning):
        cells = sorted({x.split(" ")[0] for r in learning.itertuples() for x in r.still_learning.split(", ")})
        out.append(f"- **No verdict: some runs still learning at the floor LR** ({len(learning)} rows, all resting "
                   f"on cells {', '.join(cells)}; their means are in the table; each run trains once, so these rows "
                   "stay without a verdict: a longer schedule would be a new study).")
    rest = c[c.verdict == "inconclusive"]
    if len(rest):
        out.append(f"- **Inconclusive** ({len(rest)} rows): " + "; ".join(name(r) for r in rest.itertuples()) + ".")
    if len(waiting):
        studies = ", ".join(sorted({f"{q.study} ({q.seeds} seeds)" for q in waiting.itertuples()}))
        out.append(f"- **Not measured yet** ({len(waiting)} rows): their runs ({studies}) were not reached in the GPU "
                   "time of the session that made the others; `python -m odevit.repro.fast plan_v2.yaml` makes them.")
    return out


def v2_verdicts(root: str = ".") -> str:
    """Plan v2's rows (results/v2/claims.csv, `python -m odevit.repro.verdicts2`): what they say in sentences, then
    the table (primary family first) with its legend, one figure per family."""
    path = os.path.join(root, "results/v2/claims.csv")
    if not os.path.exists(path):
        return "Plan v2's verdicts: not computed yet (`python -m odevit.repro.verdicts2`)."
    c = pd.read_csv(path, keep_default_na=True)
    c["still_learning"] = c.still_learning.fillna("")
    c = pd.concat([c[c.primary], c[~c.primary]])
    t = _json(os.path.join(root, "results/v2/teacher/selected.json"))
    alphas = ", ".join(f"{f.replace('v2_', '')} {a:.4g}" for f, a in c.groupby("family", sort=False).alpha_each.first()
                       .items())
    import textwrap

    head = (f"The teacher: plan 1's 6-layer ViT trained 40 epochs with augmentation, test Acc@1 {100 * t['acc1']:.2f} % "
            f"(its 3 seeds' SD {t['seed_sd_pts']:.2f} pt, {'all' if all(t['converged']) else 'not all'} converged), "
            "selected on validation. What the rows say:")
    words = [w for b in _v2_words(c) for w in textwrap.wrap(b, 118, subsequent_indent="  ", break_on_hyphens=False)]
    lines = textwrap.wrap(head, 118, break_on_hyphens=False) + [""] + words + [
        "", "| family | row (`id` in claims.csv) | training images | n | ours, pt [interval] | verdict | "
        "teacher − free ODE, pt | plan 1 | v2 vs plan 1 |", "|---|---|---:|---:|---|---|---:|---|---|"]
    for r in c.itertuples():
        ours = "–" if pd.isna(r.mean) else f"{r.mean:+.2f}{_interval(r.ci_low, r.ci_high)}"
        verdict = (f"*not converged* ({r.still_learning} seeds)" if r.verdict.startswith("not converged")
                   else f"*{r.verdict}*")
        gap = "" if pd.isna(getattr(r, "teacher_minus_free", float("nan"))) else f"{r.teacher_minus_free:+.2f}"
        p1 = "–" if pd.isna(r.plan1_verdict) else str(r.plan1_verdict) + (
            f" ({r.plan1_differs})" if not pd.isna(r.plan1_differs) else "")
        lines.append(f"| {r.family.replace('v2_', '')} | {_v2_label(r.question)} (`{r.question}`) | "
                     f"{int(r.budget.split(' ')[0]):,} | {int(r.n)} | {ours} | {verdict} | {gap} | {p1} | "
                     f"{_v2_against(r.verdict, r.plan1_verdict)} |")
    figs = " · ".join(f"[{f.replace('v2_', '')}](results/v2/verdicts_{f}.png)" for f in dict.fromkeys(c.family))
    import textwrap

    legend = ("Legend: mean over n paired seeds of a difference in test Acc@1 (all 10,000 test images) [interval at "
              f"α / family size; α each: {alphas}]. N = solver steps (trained at 12). *not converged*: runs still "
              "gaining at the floor LR (cell, seeds). teacher − free ODE: the fairness check (a verdict only above 0). "
              "plan 1: the nearest plan-1 row (in brackets where it differs); *replicated* / *overturned* (supports ↔ "
              "contradicts) / *changed* / *open* (no v2 verdict) / *new*. Every row: "
              f"[results/v2/claims.md](results/v2/claims.md); figures: {figs}.")
    return "\n".join(lines + [""] + textwrap.wrap(legend, 118, break_on_hyphens=False))


SECTIONS: Dict[str, Callable[[str], str]] = {
    "v2-verdicts": v2_verdicts,
    "plan-verdicts": plan_verdicts, "key-findings": key_findings,
    "claims-summary": claims_summary, "module-map": module_map, "claims-table": claims_table, "main-table": main_table, "weights-table": weights_table,
    "weights-summary": weights_summary,
    "dynamics-summary": dynamics_summary, "bench-tables": bench_tables, "bench-summary": bench_summary,
    "cpu-study": cpu_study, "converged-study": converged_study, "budget-curve": budget_curve,
    "float-noise": float_noise, "gpu-estimate": gpu_estimate, "gpu-study": gpu_study, "run-time": run_time, "evidence-time": evidence_time,
    "machine-shift": machine_shift,
    "cite": cite,
}


def _pattern(name: str) -> "re.Pattern[str]":
    return re.compile(rf"(<!-- {name} -->\n)(.*?)(<!-- /{name} -->)", re.S)


PAGES = ("README.md", "docs/usage.md", "docs/results.md", "docs/pipeline.md", "docs/performance.md",
         "docs/exploratory.md", "docs/plan1.md")  # generated parts


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
        for name in SECTIONS:
            if _pattern(name).search(text):
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
        path = readme if page == "README.md" else os.path.join(root, page)
        with open(path) as f:
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


def stage_times(root: str = ".") -> Dict[str, Any]:
    """Where a run's time went, from what its stages wrote: the sum over stages of each phase of their timing.json
    (02_teacher and every cell), the cells' stage totals, the notebooks' wall time (papermill's duration in each
    notebook stage, results/notebook_times.json) and their sum `stages_s`."""
    phases: Dict[str, float] = {}
    timings = sorted(glob.glob(os.path.join(root, "results/cells/*/s*/timing.json")))
    cells_s = 0.0
    for path in timings + [os.path.join(root, "results/02_teacher/timing.json")]:
        if not os.path.isfile(path):
            continue
        t = _json(path)
        for k, v in t.items():
            if k not in ("train_time_s", "total"):
                phases[k] = round(phases.get(k, 0.0) + float(v), 1)
        if "/cells/" in path:
            cells_s += float(t.get("total", 0.0))
    times = os.path.join(root, "results/notebook_times.json")  # odevit.repro.notebook.record_time
    notebooks = {k: float(v) for k, v in _json(times).items()} if os.path.isfile(times) else {}
    return {"phases_s": phases, "cells_s": round(cells_s, 1), "cells": len(timings), "notebooks_s": notebooks,
            "stages_s": round(cells_s + sum(notebooks.values()), 1)}


def record_run(t0: float, out: str = "results/run.json") -> bool:
    """Write the machine and the wall time of the `dvc repro` started at t0, if it changed dvc.lock (a no-op run
    keeps the record of the run whose outputs are committed), with `stage_times` (phases summed over stages; the
    notebooks' and cells' wall times) and dvc_other_s = wall - the stages' sum (DVC's bookkeeping, process starts
    of the notebook kernels and whatever no stage timed)."""
    import platform
    import time

    import torch

    if not os.path.isfile("dvc.lock") or os.path.getmtime("dvc.lock") < t0:
        print("dvc repro changed nothing: results/run.json kept", file=sys.stderr)
        return False
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    machine = f"{platform.machine()}, {os.cpu_count()} CPU cores, {gpu}"
    wall = round(time.time() - t0, 1)
    times = stage_times()
    write_json({"date": time.strftime("%Y-%m-%d"), "machine": machine, "wall_s": wall, **times,
                "dvc_other_s": round(wall - times["stages_s"], 1), "machine_info": machine_info()}, out)
    return True


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the README's result sections from the results files")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--record-run", type=float, metavar="T0", help="write results/run.json for a run started at T0")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--save-run-baseline", action="store_true",
                    help=f"keep results/run.json (and its cells' medians) as {RUN_BEFORE}: the run-time table's 'before'")
    args = ap.parse_args(argv)
    if args.save_run_baseline:
        rec = save_run_baseline()
        print(f"{RUN_BEFORE}: the run of commit {rec['commit']} ({rec['wall_s']:.0f} s) is the baseline")
        return 0
    if args.record_run is not None:
        record_run(args.record_run)
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
