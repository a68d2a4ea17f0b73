"""A study run in another clone, kept in the repository as evidence that needs no DVC cache to read.

    python -m odevit.repro.evidence snapshot converged_fmnist --clone ../run --command "dvc exp run ..." [--stages]
    python -m odevit.repro.evidence show converged_fmnist      # runs finished so far, per cell
    python -m odevit.repro.evidence note converged_fmnist "..."  # a remark added after the clone moved on
    python -m odevit.repro.evidence budget     # the budget curve (student - free vs training images, per teacher)
    python -m odevit.repro.evidence audit      # where each 55k run stopped: learning rate, training-loss rises
    python -m odevit.repro.evidence claims converged_fmnist   # its claims.csv / claims.png with today's report code

`snapshot` copies from the clone, into docs/evidence/NAME/, the same layout the pipeline writes (so that the report
and README functions that take a `root` read it unchanged):
  params.yaml                                 the clone's params (the experiment's values)
  results/cells/CELL/sSEED/{metrics.json, history.csv, timing.json}   every finished (cell, seed) of its study
  results/06_dynamics/ (csv, json, png), results/run.json   with --stages: once `dvc exp run` ran every stage on them,
  results/07_report/claims.{csv,png}          and then the claims table computed from them (`write_claims`)
  curves.png                                  the validation curves of the finished runs, one panel per cell
  study.json                                  command, commit, machine, date, runs planned / finished / converged,
                                              training time; wall_s when --t0 (the start, epoch s) is given
The machine recorded is the snapshotting process's (`machine_info`): run it on the machine that ran the study, with
its thread settings. A run counts as finished only when the clone's dvc.lock holds it with the clone's current params
(a metrics.json left by an earlier study does not). Run it whenever a run finishes: a long study is committed run by run, and `complete` says when every planned run
and every stage is in.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pandas as pd
import yaml

from . import files, report, stats
from .machine import machine_info
from .results import collect, lock_holds

EVIDENCE = "docs/evidence"
RUN_FILES = ("metrics.json", "history.csv", "timing.json")
TEACHER_FILES = ("results/02_teacher/metrics.json", "results/02_teacher/history.csv", "results/02_teacher/distances.csv")
STAGE_GLOBS = ("results/0[3-7]_*/*.csv", "results/0[3-7]_*/*.json", "results/0[3-7]_*/*.png", "results/run.json")
CLAIMS = "results/07_report/claims.csv"  # a snapshot's claims table (the path the removed 07_report stage wrote)


def n_converged(runs: pd.DataFrame) -> int:
    """How many rows of a `study.collect` frame converged by the validation rule (a missing flag counts as no)."""
    return int(runs.converged.fillna(False).astype(bool).sum()) if "converged" in runs else 0


def run_seconds(timing: Dict[str, float]) -> float:
    """A run's seconds from its timing.json. After a resume `total` covers only the last process while `train` and
    `val_eval` sum every epoch of the history (so `other` < 0): then the sum of the phases, which misses only the
    earlier processes' start-up and teacher cache."""
    total = float(timing.get("total", math.nan))
    return total - min(0.0, float(timing.get("other", 0.0)))


def planned(params: Dict[str, Any]) -> List[tuple]:
    """(cell, seed) of every run the params' study plans."""
    return [(c, int(s)) for c in params["study"]["cells"] for s in params["study"]["seeds"]]


def _at(params: Dict[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        params = params[key]
    return params


def finished(clone: str, params: Dict[str, Any], cell: str, seed: int, lock: Dict[str, Any]) -> bool:
    """True when the clone's dvc.lock records stage cell@CELL-SEED with exactly the params the clone's params.yaml
    holds now and the metrics.json on disk is the one it locked: a file left by an earlier run with other params (the
    default run's, in a clone that ran it first) does not count."""
    stage = lock.get(f"cell@{cell}-{seed}")
    path = os.path.join(clone, f"results/cells/{cell}/s{seed}/metrics.json")
    if stage is None or not os.path.isfile(path):
        return False
    try:
        if any(_at(params, k) != v for k, v in stage.get("params", {}).get("params.yaml", {}).items()):
            return False
    except (KeyError, TypeError):
        return False
    return lock_holds(stage, path)


def snapshot(name: str, clone: str, command: str, stages: bool = False, t0: Optional[float] = None,
             out: str = EVIDENCE, note: Optional[str] = None) -> Dict[str, Any]:
    """Copy the clone's finished runs (and with `stages` its stage results) into out/name; returns study.json."""
    dest = os.path.join(out, name)
    params_path = os.path.join(clone, "params.yaml")
    if not os.path.isfile(params_path):
        raise FileNotFoundError(f"{params_path}: no params.yaml (--clone must be the study's repository clone)")
    with open(params_path) as f:
        params = yaml.safe_load(f)
    lock_path = os.path.join(clone, "dvc.lock")
    if not os.path.isfile(lock_path):
        raise FileNotFoundError(f"{lock_path}: no dvc.lock (the study must run through the pipeline: dvc exp run)")
    with open(lock_path) as f:
        lock = (yaml.safe_load(f) or {}).get("stages", {})
    runs = planned(params)
    done = [(c, s) for c, s in runs if finished(clone, params, c, s, lock)]
    if not done:
        raise FileNotFoundError(f"{clone}: none of the study's {len(runs)} runs has finished with its params "
                                "(dvc.lock and params.yaml disagree, or no metrics.json)")
    if os.path.isdir(dest):  # the snapshot is the clone's state now: a run redone since is replaced, none is kept stale
        shutil.rmtree(os.path.join(dest, "results"), ignore_errors=True)
    os.makedirs(dest, exist_ok=True)
    shutil.copyfile(params_path, os.path.join(dest, "params.yaml"))
    def copy(rel: str) -> None:  # clone/rel -> dest/rel, where it exists
        if os.path.isfile(os.path.join(clone, rel)):
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copyfile(os.path.join(clone, rel), os.path.join(dest, rel))

    for c, s in done:
        for f in RUN_FILES:
            copy(f"results/cells/{c}/s{s}/{f}")
    for f in TEACHER_FILES:  # the teacher its students were distilled from (the claims' retention reads it)
        copy(f)
    if stages:
        if len(done) < len(runs):
            raise ValueError(f"--stages: {len(runs) - len(done)} of the study's runs have not finished")
        for pattern in STAGE_GLOBS:
            for src in glob.glob(os.path.join(clone, pattern)):
                copy(os.path.relpath(src, clone))
        write_claims(dest)
    cells = collect(os.path.join(dest, "results"))
    timing = [files.read_json(os.path.join(dest, f"results/cells/{c}/s{s}/timing.json")) for c, s in done
              if os.path.isfile(os.path.join(dest, f"results/cells/{c}/s{s}/timing.json"))]
    commit = subprocess.run(["git", "-C", clone, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    machine = {k: v for k, v in machine_info().items() if k != "threads"}  # the snapshot's, not the runs' (notes say)
    meta = {"command": command, "commit": commit, "date": time.strftime("%Y-%m-%d"), "machine": machine,
            "runs_planned": len(runs), "runs_finished": len(done),
            "runs_converged": n_converged(cells),
            "train_s": round(sum(run_seconds(t) for t in timing), 1),
            "stages": os.path.isfile(os.path.join(dest, CLAIMS))}  # the claims table was computed on them
    if t0 is not None:
        meta["wall_s"] = round(time.time() - t0, 1)
    old = os.path.join(dest, "study.json")
    notes = files.read_json(old).get("notes", []) if os.path.isfile(old) else []
    meta["notes"] = notes + ([note] if note and note not in notes else [])
    meta["complete"] = meta["runs_finished"] == meta["runs_planned"] and meta["stages"]
    files.write_json(meta, old)
    curves_figure(dest)
    return meta


def add_note(name: str, note: str, out: str = EVIDENCE) -> List[str]:
    """Append a remark to docs/evidence/NAME/study.json's notes (once) when the clone has moved on and cannot be
    snapshotted again; returns the notes."""
    path = os.path.join(out, name, "study.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such snapshot (run `evidence snapshot {name}` first)")
    if not note.strip():
        raise ValueError("note: an empty remark")
    meta = files.read_json(path)
    meta["notes"] = meta.get("notes", []) + ([note] if note not in meta.get("notes", []) else [])
    files.write_json(meta, path)
    return meta["notes"]


def write_claims(dest: str) -> None:
    """A snapshot's claims table and figure (CLAIMS and claims.png beside it) from its runs and stage results, with this
    checkout's report code (`report.claims` with the snapshot's reference and margin; `report.claims_figure` titled
    by `report.budget_title`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    study = _params_of(dest)["study"]
    cwd = os.getcwd()
    os.chdir(dest)  # the table names its files relative to the results root, as in the clone
    try:
        c = report.claims(reference=study["reference"], margin_pts=study["equivalence_margin_pts"])
        files.write_csv(c, CLAIMS)
        fig = report.claims_figure(c, report.budget_title(reference=study["reference"]))
        files.save_figure(fig, os.path.join(os.path.dirname(CLAIMS), "claims.png"))
        plt.close(fig)
    finally:
        os.chdir(cwd)


def recompute_claims(name: str, out: str = EVIDENCE) -> List[str]:
    """A snapshot's claims table and figure recomputed from its committed runs (`write_claims`): for a change of the
    report code that the snapshot's clone can no longer rerun. Returns the claims.csv columns that changed."""
    dest = os.path.join(out, name)
    path = os.path.join(dest, CLAIMS)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: the snapshot has no claims table (snapshot it with --stages)")
    before = pd.read_csv(path)
    write_claims(dest)
    after = pd.read_csv(path)
    return [col for col in after.columns if col not in before or not after[col].equals(before[col])]


def curves_figure(root: str) -> str:
    """root/curves.png: validation Acc@1 against epoch of every finished run, one panel per cell (shared y axis)."""
    import matplotlib.pyplot as plt

    from . import curves

    with open(os.path.join(root, "params.yaml")) as f:
        order = list(yaml.safe_load(f)["study"]["cells"])  # the study's cell order (ref first)
    ran = set(os.listdir(os.path.join(root, "results", "cells")))
    h = curves.histories(os.path.join(root, "results"), [c for c in order if c in ran])
    names = list(h.cell.cat.categories)
    fig, axes = plt.subplots(1, len(names), figsize=(3.4 * len(names), 3.2), sharey=True, squeeze=False)
    for ax, name in zip(axes[0], names):
        one = h[h.cell == name].drop(columns="cell")
        curves.plot(one, ax, title=f"{name}: {one.seed.nunique()} seed(s), band = their range")
    fig.tight_layout()
    path = os.path.join(root, "curves.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def progress(root: str) -> pd.DataFrame:
    """One row per cell of the evidence's study: runs finished of planned, test Acc@1 mean and std (%), validation
    Acc@1 at the selected epoch, Acc@1 at N/2, N and 2N solver steps on the first `study.robustness_test_limit` test
    images, epochs run, runs converged, training minutes per run."""
    with open(os.path.join(root, "params.yaml")) as f:
        params = yaml.safe_load(f)
    cells = collect(os.path.join(root, "results"))
    rows = []
    for name in params["study"]["cells"]:
        c = cells[cells.cell == name]
        if not len(c):
            rows.append({"cell": name, "runs": f"0 of {len(params['study']['seeds'])}"})
            continue
        t = [run_seconds(files.read_json(p.replace("metrics.json", "timing.json")))
             for p in c.source if os.path.isfile(p.replace("metrics.json", "timing.json"))]
        def per_run(col: str) -> str:  # "9/12": one value per seed
            return "/".join(str(int(e)) for e in c[col]) if col in c and c[col].notna().all() else "–"

        rows.append({"cell": name, "runs": f"{len(c)} of {len(params['study']['seeds'])}",
                     "test Acc@1 (%)": f"{100 * c.acc1.mean():.2f}" + (f" ± {100 * c.acc1.std():.2f}" if len(c) > 1 else ""),
                     "val Acc@1 (%)": f"{100 * c.val_acc1.mean():.2f}" if "val_acc1" in c else "–",
                     **{f"Acc@1 at {k} (%)": (f"{100 * c[col].mean():.2f}" if col in c else "–")
                        for k, col in (("N/2", "acc1_half_n"), ("N", "acc1_sub_n"), ("2N", "acc1_double_n"))},
                     "epochs run": per_run("epochs_run"), "best epoch": per_run("best_epoch"),
                     "converged": f"{n_converged(c)} of {len(c)}",
                     "min per run": f"{sum(t) / len(t) / 60:.0f}" if t else "–"})
    return pd.DataFrame(rows)


BUDGETS = ("budget_fmnist_1k", "budget_fmnist_3k", "budget_fmnist_10k", "converged_fmnist")  # the curve's points
STRONG_TEACHER = ("strong_teacher_fmnist_1k", "strong_teacher_tau15_fmnist_1k",  # a stronger teacher: tau 3 (the
                  "strong_teacher_tau15_fmnist_55k")  # default; its schedule degenerates), tau 15 (scaled to it)
# what a free ODE's training does not read: the teacher's training and the checkpoint schedule (it has no teacher)
_NOT_FREE = {"teacher": ("epochs", "lr", "weight_decay", "warmup", "cycles", "clip", "label_smoothing", "augment",
                         "patience", "min_delta_pts"),
             "distill": ("tau", "schedule", "schedule_points", "distance_tokens", "distance_batches")}


AUDITED = ("converged_fmnist", "strong_teacher_tau15_fmnist_55k",  # the 55k studies, and the stronger teacher's +CE
           "strong_teacher_tau15_fmnist_55k_reruns/lr5e-4")  # students rerun at half the learning rate (its NOTES.md)


def stopping_audit(names: Sequence[str] = AUDITED, out: str = EVIDENCE) -> pd.DataFrame:
    """Where and why each finished run of the named snapshots stopped, from its history.csv: one row per (study, cell,
    seed) with epochs run of the cap (`distill.epochs`), best epoch, the learning rate of its last epoch as % of its
    peak (`lr_at_stop_pct`: a stop at a high learning rate ends a run before its schedule has decayed), the epochs whose
    mean training loss rose above the epoch before (`loss_rises`: the optimisation itself went backwards, which
    validation noise cannot do) with the largest such rise in % of the loss before it, the largest drop of validation
    Acc@1 below its best so far (pt) and the test Acc@1 (%)."""
    rows = []
    for name in names:
        root = os.path.join(out, name)
        if not os.path.isdir(os.path.join(root, "results", "cells")):
            continue
        cap = (_params_of(root).get("distill") or {}).get("epochs")
        for m in collect(os.path.join(root, "results")).to_dict("records"):
            h = pd.read_csv(m["source"].replace("metrics.json", "history.csv"))
            rise = h.train_loss.diff()
            rises = h.epoch[rise > 0].tolist()
            val_drop = (h.val_acc1.cummax() - h.val_acc1).max()
            rows.append({"study": name, **{k: v for k, v in teacher_of(root).items() if k in ("teacher", "tau")},
                         "cell": m["cell"], "seed": m["seed"], "epochs_run": len(h), "cap": cap,
                         "best_epoch": m.get("best_epoch"), "lr_at_stop_pct": 100 * h.lr.iloc[-1] / h.lr.max(),
                         "loss_rises": " ".join(map(str, rises)),
                         "max_loss_rise_pct": float(100 * (rise / h.train_loss.shift()).max()) if rises else 0.0,
                         "max_val_drop_pts": 100 * float(val_drop), "test_acc1": 100 * m["acc1"]})
    if not rows:
        raise FileNotFoundError(f"{out}: none of {', '.join(names)} has finished runs")
    return pd.DataFrame(rows)


def audit_summary(t: pd.DataFrame, high_lr_pct: float = 50.0) -> pd.DataFrame:
    """Per study: runs, runs stopped before the cap with the learning rate above `high_lr_pct` % of its peak, and runs
    whose training loss rose in some epoch."""
    g = t.assign(high=(t.epochs_run < t.cap) & (t.lr_at_stop_pct > high_lr_pct), rose=t.loss_rises != "")
    return g.groupby("study", sort=False).agg(runs=("seed", "size"), stopped_at_high_lr=("high", "sum"),
                                              loss_rose=("rose", "sum")).reset_index()


def _params_of(root: str) -> Dict[str, Any]:
    path = os.path.join(root, "params.yaml")
    return yaml.safe_load(open(path)) if os.path.isfile(path) else {}


def teacher_of(root: str) -> Dict[str, Any]:
    """The teacher a snapshot's students were distilled from: 'augmented' when its params trained the teacher with
    augmentation (presets/strong_teacher_*.yaml), else 'default'; with its test Acc@1 (%), epochs run, whether its
    validation curve had flattened (NaN / None without the stage) and the schedule temperature tau (distill.tau)."""
    params = _params_of(root)
    m = os.path.join(root, "results", "02_teacher", "metrics.json")
    t = files.read_json(m) if os.path.isfile(m) else {}
    return {"teacher": "augmented" if (params.get("teacher") or {}).get("augment") else "default",
            "teacher_acc1": 100 * t["acc1"] if "acc1" in t else math.nan,
            "teacher_epochs": t.get("epochs_run", math.nan), "teacher_converged": t.get("converged"),
            "tau": float((params.get("distill") or {}).get("tau", math.nan))}


def free_rule(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The params a free ODE's run depends on: all of them but the teacher's training and the schedule (`_NOT_FREE`),
    and only the study's seeds and training images."""
    out = {k: v for k, v in params.items() if k not in ("study", "dynamics", "report", "bench")}
    for section, keys in _NOT_FREE.items():
        out[section] = {k: v for k, v in (params.get(section) or {}).items() if k not in keys}
    study = params.get("study") or {}
    return {**out, "study": {k: study.get(k) for k in ("seeds", "train_limit")}}


def matched_runs(name: str, cell: str, cells: pd.DataFrame, out: str = EVIDENCE,
                 candidates: Sequence[str] = BUDGETS) -> Tuple[pd.DataFrame, Optional[str]]:
    """The runs of `cell` in the first `candidates` study (not `name`) whose params differ from `name`'s only in the
    teacher's training and the schedule (`free_rule`), with the same spec of `cell` where `name` has one, on as many
    training images as `cells` (the study's runs): the runs `name` would have made, or made with the other teacher.
    (empty, None) if none."""
    params = _params_of(os.path.join(out, name))
    rule, spec = free_rule(params), ((params.get("study") or {}).get("cells") or {}).get(cell)
    for other in candidates:
        root = os.path.join(out, other)
        if other == name or not os.path.isdir(os.path.join(root, "results", "cells", cell)):
            continue
        theirs = _params_of(root)
        if free_rule(theirs) != rule or (spec is not None and theirs["study"]["cells"].get(cell) != spec):
            continue
        c = collect(os.path.join(root, "results"))
        c = c[c.cell == cell]
        if set(c.train_images) == set(cells.train_images):  # and on the same images
            return c, other
    return cells.iloc[:0], None


def free_runs(name: str, cells: pd.DataFrame, free: str = "free", out: str = EVIDENCE,
              candidates: Sequence[str] = BUDGETS) -> Tuple[pd.DataFrame, Optional[str]]:
    """The free ODE runs a study's students are paired with, and the study they come from: its own, else (a
    stronger-teacher study without a free cell) those of a `candidates` study whose free runs read the same params
    (`matched_runs`: a free ODE has no teacher, they are the runs this study would have made). (empty, None) if
    none."""
    own = cells[cells.cell == free]
    return (own, name) if len(own) else matched_runs(name, free, cells, out, candidates)


def _schedule(g: pd.DataFrame) -> str:
    """The students' checkpoint schedule c ('[3, 4, 5, 7, 9, 12]'; '–' without it; 'varies' if the runs differ)."""
    cs = {str(list(c)) for c in g.get("checkpoints", pd.Series(dtype=object)) if isinstance(c, (list, tuple))}
    return cs.pop() if len(cs) == 1 else ("varies" if cs else "–")


def _decide(t: pd.DataFrame) -> None:
    """Holm-adjusted p over a family's rows (those with a p), each row's verdict and its replication probability, from
    the rows' estimates (`est`), in place."""
    ok = t.p_vs_null.notna()
    t["holm_p"] = math.nan
    t.loc[ok, "holm_p"] = stats.holm(t.p_vs_null[ok].to_numpy())
    t["verdict"] = [stats.verdict(r.est, None if math.isnan(r.holm_p) else r.holm_p) for r in t.itertuples()]
    t["replication"] = [stats.replication(r.est) for r in t.itertuples()]


def degenerate(schedule: str) -> bool:
    """Whether a checkpoint schedule ('[0, 0, 0, 0, 0, 12]', `_schedule`) puts two teacher layers at one step or one
    at step 0 (the student's input)."""
    steps = [int(x) for x in schedule.strip("[]").split(",")] if schedule.startswith("[") else []
    return bool(steps) and (len(set(steps)) < len(steps) or steps[0] == 0)


def budget_curve(names: Sequence[str] = BUDGETS + STRONG_TEACHER, students: Sequence[str] = ("ref", "ce"),
                 free: str = "free", out: str = EVIDENCE) -> pd.DataFrame:
    """When does a teacher help: for each evidence study of `names` that exists (one budget and teacher each) and each
    student, the paired difference student - free ODE in Acc@1 points over their common seeds (the free runs its own
    or, for a study without them, those of the default-teacher study with the same free params: `free_runs`), its 95 %
    t interval and the verdict on "the teacher helps" (> 0; p two-sided), Holm-adjusted over every (budget, teacher,
    student) row (no row before a seed of both has finished); with the budget's training images, the teacher
    (`teacher_of`), the schedule c and whether two teacher layers share a step in it (degenerate), the runs converged
    of those compared and whether every planned run is in."""
    rows = []
    for name in names:
        root = os.path.join(out, name)
        if not os.path.isfile(os.path.join(root, "study.json")):
            continue
        meta = files.read_json(os.path.join(root, "study.json"))
        cells = collect(os.path.join(root, "results"))
        f, free_from = free_runs(name, cells, free, out, candidates=names)
        f = f.set_index("seed")
        for student in students:
            g = cells[cells.cell == student].set_index("seed")
            seeds = sorted(set(g.index) & set(f.index))
            if not seeds:  # a study under way: no pair finished yet
                continue
            d = [100 * (g.acc1[s] - f.acc1[s]) for s in seeds]
            e = stats.estimate(d, "greater")
            both = pd.concat([g.loc[seeds], f.loc[seeds]])
            c = _schedule(g.loc[seeds])
            rows.append({"study": name, "train_images": int(g.train_images.max()), **teacher_of(root),
                         "schedule": c, "degenerate": degenerate(c),
                         "student": student, "seeds": len(seeds), "free_from": free_from,
                         "student_acc1": 100 * g.acc1[seeds].mean(), "free_acc1": 100 * f.acc1[seeds].mean(),
                         "diff_mean": e["mean"],
                         "ci_low": e["ci_low"], "ci_high": e["ci_high"], "p_vs_null": e["p_vs_null"],
                         "converged": f"{n_converged(both)}/{len(both)}", "all_runs_in": meta["runs_finished"] == meta["runs_planned"], "est": e})
    t = pd.DataFrame(rows)
    if not len(t):
        return t
    _decide(t)
    t["setup"] = [setup(r) for r in t.itertuples()]
    order = {s: i for i, s in enumerate(dict.fromkeys(sorted(t.setup, key=lambda s: (s != "default", s))))}
    return t.drop(columns="est").sort_values(["setup", "student", "train_images"],
                                             key=lambda c: c.map(order) if c.name == "setup" else c).reset_index(drop=True)


def teacher_strength(names: Sequence[str] = STRONG_TEACHER, students: Sequence[str] = ("ref", "ce"),
                     out: str = EVIDENCE, candidates: Sequence[str] = BUDGETS) -> pd.DataFrame:
    """Does a stronger teacher make a better student: for each stronger-teacher study of `names` that exists and each
    student, the paired difference (same seed) between its students and the default teacher's students of the same
    student rule and budget (`matched_runs` over `candidates`), in Acc@1 points, with its 95 % t interval and the
    verdict on "> 0" (p two-sided), Holm-adjusted over the rows; with the teacher setup (`setup`), both teachers'
    test Acc@1 and the runs converged of those compared."""
    rows = []
    for name in names:
        root = os.path.join(out, name)
        if not os.path.isfile(os.path.join(root, "study.json")):
            continue
        cells = collect(os.path.join(root, "results"))
        for student in students:
            g = cells[cells.cell == student].set_index("seed")
            if not len(g):
                continue
            base, base_from = matched_runs(name, student, cells, out, candidates)
            base = base.set_index("seed")
            seeds = sorted(set(g.index) & set(base.index))
            if not seeds:
                continue
            e = stats.estimate([100 * (g.acc1[s] - base.acc1[s]) for s in seeds], "greater")
            mine, theirs = teacher_of(root), teacher_of(os.path.join(out, base_from))
            c = _schedule(g.loc[seeds])
            rows.append({"study": name, "train_images": int(g.train_images.max()), "student": student,
                         "setup": setup(pd.Series({**mine, "degenerate": degenerate(c)})),
                         "schedule": c, "teacher_acc1": mine["teacher_acc1"], "baseline": base_from,
                         "baseline_schedule": _schedule(base.loc[seeds]), "baseline_teacher_acc1": theirs["teacher_acc1"],
                         "seeds": len(seeds), "student_acc1": 100 * g.acc1[seeds].mean(),
                         "baseline_acc1": 100 * base.acc1[seeds].mean(), "diff_mean": e["mean"],
                         "ci_low": e["ci_low"], "ci_high": e["ci_high"], "p_vs_null": e["p_vs_null"],
                         "converged": f"{n_converged(pd.concat([g.loc[seeds], base.loc[seeds]]))}/{2 * len(seeds)}",
                         "est": e})
    t = pd.DataFrame(rows)
    if not len(t):
        return t
    _decide(t)
    return t.drop(columns="est")


def setup(r: Any) -> str:
    """A budget-curve row's teacher setup: 'default', or the teacher kind with its tau and whether its schedule
    degenerates ('augmented, tau 3, c degenerate')."""
    if r.teacher == "default":
        return "default"
    return r.teacher + ("" if math.isnan(r.tau) else f", tau {r.tau:g}") + (", c degenerate" if r.degenerate else "")


def _images(n: int) -> str:
    return f"{n / 1000:g}k" if n >= 1000 else str(n)


def _setup_label(su: str, acc: float) -> str:
    """A teacher setup (`setup`) as the legend says it, with the teacher's test Acc@1 where known."""
    kind, *rest = su.replace("tau", "τ").split(", ")
    words = ", ".join([f"{kind} teacher"] + rest)
    return words + ("" if acc is None or math.isnan(acc) else f" (test Acc@1 {acc:.1f} %)")


def _cell_words(cell: str, t: pd.DataFrame, out: str) -> str:
    """' (ce_weight=1.0)': a study cell's overrides of the distill block, from the first of `t`'s studies whose
    params name it (' (distill block as is)' for none; '' where no study says)."""
    for name in dict.fromkeys(t.study) if "study" in t else ():
        cells = (_params_of(os.path.join(out, name)).get("study") or {}).get("cells") or {}
        if cell in cells:
            ov = cells[cell] or {}
            return " (" + (", ".join(f"{k}={v}" for k, v in ov.items()) or "distill block as is") + ")"
    return ""


def _budget_setting(studies: Sequence[str], out: str) -> Dict[str, str]:
    """What the budget curve's points rest on, read from the studies' own files (docs/evidence/NAME/params.yaml and
    results/02_teacher/metrics.json): 'test' (the test images, `report.test_images`) and 'teacher' (the teachers'
    training images); a key is left out where the studies differ or do not say."""
    tests, teachers = set(), set()
    for name in studies:
        base = _params_of(os.path.join(out, name)).get("base") or {}
        tests.add(report.test_images(base.get("test_limit", 0), base.get("dataset", "")) if base else None)
        m = os.path.join(out, name, "results", "02_teacher", "metrics.json")
        teachers.add(files.read_json(m).get("train_images") if os.path.isfile(m) else None)
    said = {}
    if len(tests) == 1 and None not in tests:
        said["test"] = tests.pop()
    if len(teachers) == 1 and None not in teachers:
        said["teacher"] = f"every teacher trained on {_images(int(teachers.pop()))} images"
    return said


def budget_figure(t: pd.DataFrame, path: str, out: str = EVIDENCE) -> str:
    """`budget_plot` written to `path`."""
    import matplotlib.pyplot as plt

    fig = budget_plot(t, out)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def budget_plot(t: pd.DataFrame, out: str = EVIDENCE):
    """Student - free ODE (points, mean and 95 % interval) against the student's training images (log axis, ticks at
    the budgets), one panel per student: line style and marker = the teacher setup (`setup`; solid circles = the
    default teacher), the point's colour = its verdict (`report.VERDICT_COLORS`, as in the claims and verdicts
    figures). The title says the seeds per point (or each point does, where they differ), the test images and the
    teachers' training images (read from the studies under `out`); the studies are named under the panels; one
    legend below the panels."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    t = t.assign(setup=t.setup if "setup" in t else "default")
    students = list(dict.fromkeys(t.student))
    setups = list(dict.fromkeys(t.setup))
    look = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-.")]
    style = {su: look[i % len(look)] for i, su in enumerate(setups)}
    shift = {su: 1.07 ** (i - (len(setups) - 1) / 2) for i, su in enumerate(setups)}  # side by side, not on top
    acc = {su: (g.teacher_acc1.dropna().iloc[0] if "teacher_acc1" in g and g.teacher_acc1.notna().any() else None)
           for su, g in t.groupby("setup", sort=False)}
    same_n = t.seeds.nunique() == 1
    fig, axes = plt.subplots(1, len(students), figsize=(4.6 * len(students) + 0.6, 4.6), sharey=True, squeeze=False)
    ticks = sorted(set(int(x) for x in t.train_images))
    for ax, student in zip(axes[0], students):
        for su in setups:
            g = t[(t.student == student) & (t.setup == su)].sort_values("train_images")
            if not len(g):
                continue
            marker, ls = style[su]
            x = g.train_images * shift[su]
            ax.plot(x, g.diff_mean, color="0.35", ls=ls, lw=1.2, zorder=1)
            for xi, r in zip(x, g.itertuples()):
                col = report.verdict_color(r.verdict)
                ax.errorbar(xi, r.diff_mean, yerr=[[r.diff_mean - r.ci_low], [r.ci_high - r.diff_mean]], color=col,
                            marker=marker, ms=7, mec="black", mew=0.7, capsize=3, elinewidth=1.6, zorder=2)
                if not same_n:
                    ax.annotate(f"n={r.seeds}", (xi, r.ci_high), xytext=(0, 3), textcoords="offset points",
                                ha="center", fontsize=7)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_xticks(ticks, [_images(x) for x in ticks])
        ax.minorticks_off()
        ax.set_xlim(min(ticks) / 1.6, max(ticks) * 1.6)
        ax.set_xlabel("student's training images (log scale)")
        ax.set_title(f"{student}{_cell_words(student, t, out)} − free ODE", fontsize=10)
        ax.grid(axis="y", lw=0.4, alpha=0.6)
    axes[0][0].set_ylabel("Acc@1 student − free ODE (pt)\nmean and 95 % t interval over the seeds")
    said = _budget_setting(list(dict.fromkeys(t.study)), out) if "study" in t else {}
    n = f"n = {int(t.seeds.iloc[0])} seeds per point (paired by seed)" if same_n else "n = seeds of each point (marked; paired by seed)"
    line2 = "; ".join(x for x in (n, said.get("test") and f"test Acc@1 on {said['test']}", said.get("teacher")) if x)
    fig.suptitle("Budget curve: when does the teacher help? > 0: the distilled student beats the free ODE\n" + line2,
                 fontsize=10)
    handles = [Line2D([], [], color="0.35", ls=style[su][1], marker=style[su][0], mfc="white", mec="black",
                      label=_setup_label(su, acc[su])) for su in setups]
    verdicts = [v for v in report.VERDICT_COLORS if v in set(t.verdict)]
    verdicts += [v for v in dict.fromkeys(t.verdict) if v not in verdicts]
    handles += [Line2D([], [], ls="", marker="o", ms=7, color=report.verdict_color(v), mec="black", mew=0.7,
                       label=f"verdict: {v}") for v in verdicts]
    ncol = 2
    rows = -(-len(handles) // ncol)
    studies = (f"points from the studies ({out}/): " + ", ".join(dict.fromkeys(t.study))) if "study" in t else ""
    h = fig.get_figheight()
    foot = 0.3 if studies else 0.0  # inches: the studies' line(s) at the bottom
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, foot / h), ncol=ncol, fontsize=8,
               frameon=False)
    if studies:
        fig.text(0.5, 0.03 / h, studies, ha="center", va="bottom", fontsize=7, color="0.3", wrap=True)
    fig.tight_layout(rect=(0, (foot + 0.08 + 0.19 * rows) / h, 1, 1))
    return fig


def replicate_compare(primary: str, replicate: str, margin_pts: float = 1.0) -> Dict[str, pd.DataFrame]:
    """The same runs on two floating-point paths (e.g. this machine and an emulated other CPU type), both `results`
    roots holding 02_teacher/metrics.json and cells/*/s*/metrics.json:
      runs:   every (cell, seed) in both (and the teacher, seed -1): Acc@1 on each, the difference in points;
      cells:  per cell, mean |difference| beside the primary's seed std (a fresh draw of both would give
              E|difference| = 2 std / sqrt(pi) = 1.13 std: the model `stats.replication` assumes);
      claims: every claim measured in the replicate, its verdict on each path by the intervals alone (Holm
              included) and by the replication rule (`stats.REPLICATION`), and whether each flipped."""
    a, b = collect(primary), collect(replicate)
    runs = a[["cell", "seed", "acc1"]].merge(b[["cell", "seed", "acc1"]], on=["cell", "seed"],
                                             suffixes=("_primary", "_replicate"))
    ta, tb = (files.read_json(os.path.join(r, "02_teacher/metrics.json"))["acc1"] for r in (primary, replicate))
    runs = pd.concat([pd.DataFrame([{"cell": "teacher", "seed": -1, "acc1_primary": ta, "acc1_replicate": tb}]), runs])
    runs["diff_pt"] = 100 * (runs.acc1_replicate - runs.acc1_primary)
    cells = runs[runs.cell != "teacher"].groupby("cell", sort=False).agg(
        runs=("seed", "size"), mean_abs_diff_pt=("diff_pt", lambda d: float(d.abs().mean()))).reset_index()
    cells["primary_seed_std_pt"] = [100 * float(a[a.cell == c].acc1.std(ddof=1)) for c in cells.cell]
    cells["ratio"] = cells.mean_abs_diff_pt / cells.primary_seed_std_pt
    rows = []
    both = {k: report.claims(r, margin_pts=margin_pts, replication_min=m) for k, r, m in
            [("primary_intervals", primary, 0.0), ("replicate_intervals", replicate, 0.0),
             ("primary_rule", primary, stats.REPLICATION), ("replicate_rule", replicate, stats.REPLICATION)]}
    measured = both["replicate_rule"].verdict != stats.NOT_MEASURED
    for i in both["replicate_rule"].index[measured]:
        r = {"claim": both["replicate_rule"].claim[i]}
        r.update({k: t.verdict[i] for k, t in both.items()})
        r["flips_intervals"] = r["primary_intervals"] != r["replicate_intervals"]
        r["flips_rule"] = r["primary_rule"] != r["replicate_rule"]
        rows.append(r)
    return {"runs": runs.reset_index(drop=True), "cells": cells, "claims": pd.DataFrame(rows)}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot", help="copy a clone's finished runs into docs/evidence/NAME")
    s.add_argument("name")
    s.add_argument("--clone", required=True, help="the repository clone the study runs in")
    s.add_argument("--command", required=True, help="the command that ran it (recorded)")
    s.add_argument("--stages", action="store_true", help="also the stage results (every run and stage done)")
    s.add_argument("--t0", type=float, help="the study's start (epoch seconds): records its wall time")
    s.add_argument("--note", help="a remark kept in study.json and shown in the README (e.g. what shared the CPU)")
    n = sub.add_parser("note", help="append a remark to docs/evidence/NAME/study.json (shown in the README)")
    n.add_argument("name")
    n.add_argument("text")
    w = sub.add_parser("show", help="the evidence's runs so far, per cell")
    w.add_argument("name")
    sub.add_parser("budget", help=f"the budget curve over {', '.join(BUDGETS + STRONG_TEACHER)}: {EVIDENCE}/budget_curve.csv and .png; the stronger teachers' students against the default's: {EVIDENCE}/teacher_strength.csv")
    a = sub.add_parser("audit", help=f"where and why each run of the named snapshots stopped (learning rate at the stop, "
                                     f"epochs whose training loss rose): {EVIDENCE}/stopping_audit.csv")
    a.add_argument("names", nargs="*", default=list(AUDITED), help="snapshots (default: the 55k ones); other names "
                   "print their table and leave stopping_audit.csv as it is")
    c = sub.add_parser("claims", help="recompute a snapshot's results/07_report/claims.csv and claims.png from its "
                                      "committed runs with this checkout's report code")
    c.add_argument("names", nargs="+")
    r = sub.add_parser("replicate", help="compare a snapshot of the same runs on another floating-point path with "
                                         "this repository's results: docs/evidence/NAME/replicate_{runs,cells,claims}.csv")
    r.add_argument("name")
    r.add_argument("--primary", default="results", help="the results root it replicates (default: results)")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "snapshot":
            meta = snapshot(args.name, args.clone, args.command, args.stages, args.t0, note=args.note)
            print(f"{EVIDENCE}/{args.name}: {meta['runs_finished']} of {meta['runs_planned']} runs "
                  f"({meta['runs_converged']} converged), stages {'in' if meta['stages'] else 'not yet'}")
        elif args.cmd == "note":
            print("\n".join(add_note(args.name, args.text)))
        elif args.cmd == "budget":
            t = budget_curve()
            if not len(t):
                raise FileNotFoundError(f"{EVIDENCE}: none of {', '.join(BUDGETS + STRONG_TEACHER)} has been snapshotted")
            t.to_csv(os.path.join(EVIDENCE, "budget_curve.csv"), index=False)
            budget_figure(t, os.path.join(EVIDENCE, "budget_curve.png"))
            print(t.to_markdown(index=False))
            s = teacher_strength()
            if len(s):  # the stronger teacher's students against the default teacher's
                s.to_csv(os.path.join(EVIDENCE, "teacher_strength.csv"), index=False)
                print("\n" + s.to_markdown(index=False))
        elif args.cmd == "audit":
            t = stopping_audit(args.names)
            if tuple(args.names) == AUDITED:  # the committed table covers the default names only
                t.to_csv(os.path.join(EVIDENCE, "stopping_audit.csv"), index=False, float_format="%.4g")
            print(t.to_markdown(index=False, floatfmt=".3g") + "\n\n" + audit_summary(t).to_markdown(index=False))
        elif args.cmd == "claims":
            for name in args.names:
                print(f"{EVIDENCE}/{name}/results/07_report: claims.csv columns changed: "
                      f"{', '.join(recompute_claims(name)) or 'none'}; claims.png redrawn")
        elif args.cmd == "replicate":
            dest = os.path.join(EVIDENCE, args.name)
            for key, t in replicate_compare(args.primary, os.path.join(dest, "results")).items():
                t.to_csv(os.path.join(dest, f"replicate_{key}.csv"), index=False)
                print(t.to_markdown(index=False), end="\n\n")
        else:
            print(progress(os.path.join(EVIDENCE, args.name)).to_markdown(index=False))
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
