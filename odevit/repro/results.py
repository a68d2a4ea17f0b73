"""Where runs keep their results, and reading them back: the finished study cells as one table, whether dvc.lock
records a run's metrics, where a plan study's teacher lives, what a benchmark's rows say.

Below both the training side (study, study_teacher, runner, bench) and the narrating side (report, evidence, readme):
no torch, no model, no training code."""
from __future__ import annotations

import glob
import hashlib
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import pandas as pd

from .files import read_json

if TYPE_CHECKING:  # a type only: config imports the data module (torch)
    from .config import Study

KEPT = "weights/study_teachers"  # git-tracked: a study teacher's best.pt, kept when trained (no DVC remote)


def collect(results: str = "results", study: Optional[Study] = None) -> pd.DataFrame:
    """One row per finished (cell, seed) under results/cells (restricted to the study's cells and seeds if given)."""
    rows = []
    for path in sorted(glob.glob(f"{results}/cells/*/s*/metrics.json")):
        m = read_json(path)
        if study is not None and (m["cell"] not in study.cells or m["seed"] not in study.seeds):
            continue
        rob = m.pop("robustness", {})
        rows.append({**m, **{f"acc1_{k}": v for k, v in rob.items()}, "source": path})  # acc1_n8: Acc@1 at N = 8
    if not rows:
        raise FileNotFoundError(f"{results}/cells/*/s*/metrics.json: no finished cells (dvc repro)")
    return pd.DataFrame(rows).sort_values(["cell", "seed"]).reset_index(drop=True)


def lock_holds(stage: Optional[dict], path: str) -> bool:
    """Whether a dvc.lock stage entry records its metrics.json with the bytes of `path` now (DVC's md5 of a file is
    the md5 of its bytes)."""
    outs = (stage or {}).get("outs", [])
    md5 = next((o.get("md5") for o in outs if o.get("path", "").endswith("metrics.json")), None)
    if md5 is None or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        return md5 == hashlib.md5(f.read()).hexdigest()


def teacher_dirs(study: str) -> Tuple[str, str]:
    """(checkpoint folder, results folder) of a study's teacher."""
    return f"checkpoints/studies/{study}/teacher", f"results/studies/{study}/teacher"


def kept_path(study: str) -> str:
    """Where a study's trained teacher is kept in git (its best.pt's bytes)."""
    return f"{KEPT}/{study}/best.pt"


VIT = "timm ViT (depth = N)"  # the benchmark's name for the discrete ViT of equal FLOPs


def activation_markdown(acts: List[Dict[str, Any]]) -> str:
    lines = ["Activation memory per image of an ODE-ViT training forward (MiB saved for backward, fp32, measured at "
             "batch 1; multiply by the batch), without and with gradient checkpointing of the solver steps "
             "(`model.set_grad_checkpointing()`):", "",
             "| config | CE | CE, checkpointed | CE + JaSMin maps | CE + JaSMin, checkpointed |", "|---|---|---|---|---|"]
    lines += [f"| {a['config']} | {a['mib_full']:.1f} | {a['mib_ckpt']:.1f} | {a['mib_full_jasmin']:.1f} | "
              f"{a['mib_ckpt_jasmin']:.1f} |" for a in acts]
    return "\n".join(lines)


def bf16_skipped(p: Dict[str, float], native: bool) -> str:
    """Why a run has no bf16 rows: its probe (`native_bf16`), or --dtypes fp32 where bf16 is native."""
    if native:
        return "no bf16 rows (`--dtypes fp32`)"
    return (f"no bf16 rows: a 256² bf16 matmul runs at {p['bf16']:.1f} GFLOP/s here, {p['bf16'] / p['fp32']:.1%} of "
            f"fp32's {p['fp32']:.0f} (no native bf16 on this CPU; `--dtypes fp32,bf16` forces them)")
