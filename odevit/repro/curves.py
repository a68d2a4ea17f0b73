"""Learning curves of the study cells, together: where each cell's validation Acc@1 stopped rising.

    h = curves.histories("results", ["ref", "ce", "free"])    # one row per (cell, seed, epoch)
    curves.plot(h, ax)                                       # one line per cell: mean over seeds, band = their range

Used by 02_teacher (its own history) and evidence.py's snapshot curves.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

import pandas as pd


def histories(results: str = "results", cells: Optional[Sequence[str]] = None,
              seeds: Optional[Sequence[int]] = None) -> pd.DataFrame:
    """The history.csv of every finished (cell, seed) under results/cells, stacked: columns cell, seed, epoch and the
    history's (train_* losses, val_acc1, test_acc1 under select_on test, lr, times). `cells`/`seeds` restrict it
    (in that cell order); FileNotFoundError when none is found."""
    root = os.path.join(results, "cells")
    names = list(cells) if cells is not None else sorted(os.listdir(root)) if os.path.isdir(root) else []
    frames = []
    for name in names:
        d = os.path.join(root, name)
        runs = sorted(os.listdir(d), key=lambda s: int(s[1:])) if os.path.isdir(d) else []
        for run in runs:
            seed, path = int(run[1:]), os.path.join(d, run, "history.csv")
            if (seeds is None or seed in seeds) and os.path.isfile(path):
                frames.append(pd.read_csv(path).assign(cell=name, seed=seed))
    if not frames:
        raise FileNotFoundError(f"{root}: no history.csv for cells {names} (dvc repro)")
    h = pd.concat(frames, ignore_index=True)
    h["cell"] = pd.Categorical(h.cell, categories=[c for c in names if c in set(h.cell)], ordered=True)
    return h


def metric(h: pd.DataFrame) -> str:
    """The curve a history selects on: val_acc1 where a validation split was scored, else test_acc1."""
    return "val_acc1" if "val_acc1" in h and h.val_acc1.notna().any() else "test_acc1"


def plot(h: pd.DataFrame, ax: Any, y: Optional[str] = None, title: Optional[str] = None) -> Any:
    """One line per cell (hue; a single line without a `cell` column): the mean over seeds with a band spanning the
    seeds' range, markers at the epochs; y in % for accuracy columns. The default title names the split, the seeds
    and the training images (when the caller passes them in `title`, it is used as is)."""
    import seaborn as sns

    y = y or metric(h)
    d = h.copy()
    pct = y.endswith(("acc1", "acc3", "acc5"))
    if pct:
        d[y] = 100 * d[y]
    hue = "cell" if "cell" in d else None
    sns.lineplot(data=d, x="epoch", y=y, hue=hue, errorbar=("pi", 100), marker="o", ax=ax)
    split = "validation" if y.startswith("val_") else "test" if y.startswith("test_") else ""
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{split} Acc@{y[-1]} (%)".strip() if pct else y.replace("train_", "training "))
    ax.xaxis.get_major_locator().set_params(integer=True)
    n_seeds = d.seed.nunique() if "seed" in d else 1
    ax.set_title(title or f"{split or y}: mean over {n_seeds} seed{'s' if n_seeds > 1 else ''} (band: their range)",
                 fontsize=10)
    if hue:
        many = d[hue].nunique() > 4  # a long legend goes beside the axes, where it covers no curve
        ax.legend(title=None, fontsize=8, **(dict(loc="upper left", bbox_to_anchor=(1.01, 1)) if many else {}))
    return ax
