"""The quick run's generated sections (docs/results.md: its dynamics, the CPU and GPU studies, the run's time;
docs/performance.md: the benchmark; an exploratory snapshot's claims table), each filled into its template
(docs/templates/NAME.md.j2); and
the record of a `make quick` run that the run-time section reads (results/run.json, `readme --record-run`)."""
from __future__ import annotations

import glob
import math
import os
import sys
from typing import Any, Callable, Dict

import pandas as pd

from . import stats
from .results import VIT, activation_markdown, bf16_skipped, collect
from .evidence import EVIDENCE
from .machine import machine_info
from .paper import claim
from .report import comparisons, summary_line, to_markdown
from .wording import WORDS, fill, read_json, read_yaml, write_json

SIGNED = ("pt", "%", "r", "exponent")  # units printed with a sign


def _reference(root: str) -> str:
    """study.reference of the run's params.yaml (the cell every comparison is made against)."""
    return read_yaml(os.path.join(root, "params.yaml"))["study"]["reference"]


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


def _claims(root: str) -> pd.DataFrame:
    return pd.read_csv(os.path.join(root, "results/07_report/claims.csv"), keep_default_na=False,
                       na_values=[""]).fillna({"vs_paper": "", "finding": ""})


def claims_table(root: str = ".", measured_only: bool = False) -> str:
    """An exploratory snapshot's claims table (`root`/results/07_report/claims.csv): each claim, its source, the side
    the paper predicts, ours with its interval, the paper's number and where it lies, the computed verdict; then the
    verdict counts. measured_only:
    without the rows whose cells the run did not train (a study of the headline cells only)."""
    c = _claims(root)
    cells = collect(os.path.join(root, "results"))
    return fill("claims-table", counts=summary_line(c), SIGNED=SIGNED, predicts=_predicts, tests=_tests,
                rows=list((c[c.verdict != stats.NOT_MEASURED] if measured_only else c).itertuples()),
                ref=cells[cells.cell == _reference(root)])


def dynamics_summary(root: str = ".") -> str:
    m, ref = read_json(os.path.join(root, "results/06_dynamics/metrics.json")), _reference(root)
    return fill("dynamics-summary", ref=ref, ly=m["lyapunov"][ref], p1=m["prop1"], fid=m["fidelity"])


ACTIVATION_FILE = "results/bench/activation_memory.json"  # python -m odevit.repro.bench --activation-only


def bench_tables(root: str = ".") -> str:
    """results/bench/bench.md as `python -m odevit.repro.bench` wrote it (and activation_memory.md, from
    `--activation-only`, when bench.md has no activation table)."""
    with open(os.path.join(root, "results/bench/bench.md")) as f:
        text = f.read().strip()
    if "Activation memory" not in text and os.path.isfile(os.path.join(root, ACTIVATION_FILE)):
        act = read_json(os.path.join(root, ACTIVATION_FILE))
        text += (f"\n\n{act['date']}, `python -m odevit.repro.bench --activation-only`: "
                 + activation_markdown(act["activation_memory"]))
    return text


def bench_summary(root: str = ".") -> str:
    """The ratios the README's performance bullets quote, computed from results/bench/bench.json."""
    b = read_json(os.path.join(root, "results/bench/bench.json"))
    by = {(r["config"], r["dtype"], r["model"]): r for r in b["rows"]}
    configs = list(dict.fromkeys(r["config"] for r in b["rows"]))
    pairs = {d: [(c, by[(c, d, "ODE-ViT")], by[(c, d, VIT)]) for c in configs
                 if (c, d, "ODE-ViT") in by and (c, d, VIT) in by] for d in ("fp32", "bf16")}
    ode = {(r["config"], r["dtype"]): r["train_img_s"] for r in b["rows"] if r["model"] == "ODE-ViT"}
    acts = b.get("activation_memory") or (read_json(os.path.join(root, ACTIVATION_FILE))["activation_memory"]
                                          if os.path.isfile(os.path.join(root, ACTIVATION_FILE)) else [])
    comp = b.get("compiled")
    return fill("bench-summary", by_dtype=pairs.items(), b=b, acts=acts, comp=comp, vit=VIT, d=b["distill"],
                ratio=[ode[(c, "bf16")] / ode[(c, "fp32")] for c in configs
                       if (c, "bf16") in ode and (c, "fp32") in ode],
                bf16_skipped=bf16_skipped(b["meta"].get("bf16_probe_gflop_s"), False),
                r={x["variant"]: x["train_img_s"] for x in (comp or {}).get("rows", [])})


def _vs_ref(cells: pd.DataFrame) -> Dict[str, Any]:
    """Every cell of a study against its reference (report.comparisons): the table, the free ODE's row, the cells
    resolved better / worse than the reference and those not resolved (docs/templates/_cells-vs-ref.md.j2)."""
    table = comparisons(cells, "ref")
    return dict(table=to_markdown(table.round(3)), free=table.set_index("cell").loc["free"],
                better=list(table[table.resolved & (table.diff_mean < 0)].itertuples()),
                worse=list(table[table.resolved & (table.diff_mean > 0) & (table.cell != "free")].itertuples()),
                unresolved=list(table[~table.resolved].cell), paper=claim("ts_ce_minus_free").value)


def gpu_study(root: str = ".") -> str:
    """The GPU study's seed spread and every cell against the reference, recomputed from its committed CSVs."""
    spread = pd.read_csv(os.path.join(root, EVIDENCE, "seed_spread_gpu.csv"))
    spread = spread[spread.cell == "ref"].groupby(["limit", "epochs"]).acc1.agg(["std", "size"]).reset_index()
    cells = pd.read_csv(os.path.join(root, EVIDENCE, "study_gpu_20000x2.csv"))
    return fill("gpu-study", spread=spread, vs=_vs_ref(cells),
                ok=spread[spread["std"] * 100 <= 0.5].assign(cost=lambda t: t.limit * t.epochs).sort_values("cost"))


def cpu_study(root: str = ".") -> str:
    """The fuller study run on the CPU by `docs/evidence/cpu_study.py`: its measured time, the reference's seed
    spread, every cell against the reference and the claims it resolves (an older claims table without verdicts:
    the rows whose interval excludes the null), from its committed files."""
    path = os.path.join(root, EVIDENCE, "study_cpu_20000x2")
    if not os.path.exists(path + ".json"):
        return fill("cpu-study", meta=None)
    cells = pd.read_csv(path + ".csv")
    claims = pd.read_csv(os.path.join(root, EVIDENCE, "claims_cpu_20000x2.csv"))
    return fill("cpu-study", meta=read_json(path + ".json"), ref=cells[cells.cell == "ref"].acc1, vs=_vs_ref(cells),
                claims=claims, counts="verdict" in claims and summary_line(claims),
                resolved=[] if "verdict" in claims else list(claims[claims.resolved.astype(bool)].claim))


def cpu(info: Dict[str, Any], model: str = "?") -> str:
    """"AMD EPYC (AVX2 kernels, 2 threads)" from a machine_info record (`model` where it names no CPU)."""
    n = info.get("threads")
    threads = "" if n is None else f", {n} thread{'' if n == 1 else 's'}"  # a study's runs: its notes say
    return f"{info.get('cpu_model', model)} ({info.get('cpu_capability', '?')} kernels{threads})"


RUN_BEFORE = f"{EVIDENCE}/run_time_before.json"  # an earlier run's record (`--save-run-baseline`): before/after


def cell_medians(root: str = ".") -> Dict[str, float]:
    """Median seconds per study cell of each phase of its timing.json, and of everything outside its training loop
    (`outside_train` = total - train: the per-cell overhead)."""
    ts = [read_json(p) for p in sorted(glob.glob(os.path.join(root, "results/cells/*/s*/timing.json")))]
    keys = [k for k in ts[0] if k not in ("train_time_s",)] if ts else []
    out = {k: float(pd.Series([t.get(k, 0.0) for t in ts]).median()) for k in keys}
    if ts:
        out["outside_train"] = float(pd.Series([t.get("total", 0.0) - t.get("train", 0.0) for t in ts]).median())
    return {k: round(v, 2) for k, v in out.items()}


def save_run_baseline(root: str = ".", out: str = RUN_BEFORE) -> Dict[str, Any]:
    """Keep the committed run's record (results/run.json, its cells' medians, the commit) as the 'before' of the
    run-time table, so a later run shows what a change saved, phase by phase."""
    import subprocess

    run = read_json(os.path.join(root, "results/run.json"))
    commit = subprocess.run(["git", "-C", root, "log", "-1", "--format=%h", "--", "results/run.json"],
                            capture_output=True, text=True).stdout.strip()
    rec = {**run, "cell_medians_s": cell_medians(root), "commit": commit}
    write_json(rec, os.path.join(root, out))
    return rec


def _phase_rows(run: Dict[str, Any]) -> Dict[str, float]:
    """A run record's seconds by the run-time table's rows (label -> s; labels: docs/templates/words.yaml)."""
    ph, nb = run["phases_s"], run.get("notebooks_s", {})
    rows = {label: ph[k] for k, label in WORDS["phases"].items() if k in ph}
    rows[WORDS["notebooks"]] = sum(v for k, v in nb.items() if k != "02_teacher")
    rows[WORDS["dvc_other"]] = run["dvc_other_s"]
    rows[WORDS["wall"]] = run["wall_s"]
    return rows


def run_time(root: str = ".") -> str:
    """The wall-clock time of the `make quick` whose outputs are committed (results/run.json, written by make quick):
    where it went by phase (each stage's timing.json summed, the notebook stages' wall time, DVC and the rest) and
    the training share; the machine it ran on. With an earlier run's record (RUN_BEFORE) of another wall time, each
    phase before and now, and the per-cell medians."""
    run, med = read_json(os.path.join(root, "results/run.json")), cell_medians(root)
    path = os.path.join(root, RUN_BEFORE)
    before = read_json(path) if os.path.isfile(path) else None
    before = None if before is None or before["wall_s"] == run["wall_s"] else before  # the baseline is this run
    return fill("run-time", run=run, cpu=cpu(run.get("machine_info", {}), run["machine"]), med=med, nan=math.nan,
                now=_phase_rows(run) if "phases_s" in run else None, before=before,
                old=None if before is None else _phase_rows(before),
                keys=[k for k in ("startup", "teacher_cache", "val_eval", "test_eval", "robustness", "outside_train")
                      if k in med])


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
        t = read_json(path)
        for k, v in t.items():
            if k not in ("train_time_s", "total"):
                phases[k] = round(phases.get(k, 0.0) + float(v), 1)
        if "/cells/" in path:
            cells_s += float(t.get("total", 0.0))
    times = os.path.join(root, "results/notebook_times.json")  # odevit.repro.notebook.record_time
    notebooks = {k: float(v) for k, v in read_json(times).items()} if os.path.isfile(times) else {}
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


SECTIONS: Dict[str, Callable[[str], str]] = {
    "dynamics-summary": dynamics_summary, "bench-tables": bench_tables, "bench-summary": bench_summary,
    "cpu-study": cpu_study, "gpu-study": gpu_study, "run-time": run_time}
