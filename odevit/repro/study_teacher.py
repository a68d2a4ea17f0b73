"""A plan study's own teacher: the default teacher's architecture (params.yaml's teacher block) trained under the
study's `teacher` block of plan.yaml (more epochs, augmentation: a stronger teacher), for the study's cells that say
`teacher: study`. One DVC stage per such study, STUDY_teacher, before its cells:

    python -m odevit.repro.study_teacher teacher_strength_3k
        # -> checkpoints/studies/teacher_strength_3k/teacher/{best,last}.pt (last.pt: an interrupted run resumes)
        #    results/studies/teacher_strength_3k/teacher/{metrics.json, history.csv, distances.csv, timing.json}

It trains as 02_teacher does (CE on every training image, best.pt on validation Acc@1, the test set scored once at
best.pt), at the study's precision and under the plan's whole-schedule rule (patience 0). Its distances d_1..d_L
(on the first `distill.distance_batches` training batches) set the checkpoint schedule of the cells distilled from
it. metrics.json records the study's plan hash, the training source and the provenance, as a study run does.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import sys
import time
from typing import Any, Dict, Optional, Tuple

from . import config, pipeline, train
from . import plan as plan_mod
from .config import Base, ConfigError, Distill, Teacher
from .results import teacher_dirs as dirs  # (checkpoint folder, results folder) of a study's teacher


def stage(study: str) -> str:
    """The DVC stage that trains the study's teacher."""
    return f"{study}_teacher"


def finished(study: str, params_file: str = "params.yaml", plan_file: str = plan_mod.PLAN_FILE) -> bool:
    """Whether the study's teacher is trained under its plan block as it is now (`current`). A teacher of an earlier
    block is not finished: the runner trains it again and the cells refuse it."""
    b, t, _, _ = configs(study, params_file, plan_file)
    return current(study, b, t)


def current(study: str, base: Base, teacher: Teacher) -> bool:
    """Whether the study teacher's metrics.json exists and records this teacher config and the base's precision."""
    path = f"{dirs(study)[1]}/metrics.json"
    if not os.path.isfile(path):
        return False
    m = pipeline.read_json(path)
    return m.get("teacher") == dataclasses.asdict(teacher) and m.get("precision") == base.precision


def identity(study: str) -> str:
    """sha256 (16 hex digits) of the study teacher's best.pt: part of its students' run ids and metrics, so that a
    student never resumes, or is recorded, against another training of the same teacher config."""
    with open(f"{dirs(study)[0]}/best.pt", "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def configs(study: str, params_file: str = "params.yaml", plan_file: str = plan_mod.PLAN_FILE,
            cfg: Optional[Dict[str, Any]] = None, plan: Optional[Dict[str, Any]] = None
            ) -> Tuple[Base, Teacher, Distill, str]:
    """(base, teacher, distill) configs of the study's teacher run and the study's plan hash; ConfigError when the
    study has no teacher block. `cfg` (params.yaml's checked configs) and `plan` (the loaded plan), where the caller
    has them already, are not read again."""
    cfg = cfg if cfg is not None else config.check_stage("cell", params_file)
    plan = plan if plan is not None else plan_mod.load(plan_file)
    if study not in plan["studies"]:
        raise ConfigError(f"{plan_file}: study '{study}' is not one of {list(plan['studies'])}")
    s = plan["studies"][study]
    if not s.get("teacher"):
        raise ConfigError(f"{plan_file}: studies.{study} has no teacher block (its cells use 02_teacher's teacher)")
    base = dataclasses.replace(cfg["base"], **(s.get("base") or {}))
    teacher = config.merged(cfg["teacher"], **s["teacher"], patience=0)  # the plan's rule: the whole schedule
    return base, teacher, cfg["distill"], plan_mod.study_hash(plan, study)


def run(study: str, params_file: str = "params.yaml", plan_file: str = plan_mod.PLAN_FILE) -> Dict[str, Any]:
    """Train (or resume) the study's teacher (`pipeline.train_teacher`, as 02_teacher does); write its checkpoints,
    history, distances, timing and metrics (the plan hash, teacher block, precision, provenance and source)."""
    start = pipeline.process_start()
    ph: Dict[str, float] = {"startup": time.time() - start}
    source = train.fingerprint()  # the code this process trains with, even if the checkout changes meanwhile
    b, t, d, plan_hash = configs(study, params_file, plan_file)
    ckpt, out = dirs(study)
    print(f"study {study}'s own teacher:", end=" ", flush=True)
    return pipeline.train_teacher(b, t, d, ckpt, out, ph, start, monitor=True,
                                  record=dict(study=study, plan_hash=plan_hash, precision=b.precision,
                                              teacher=dataclasses.asdict(t), source=source)).metrics


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description="Train a plan study's own teacher (plan.yaml: studies.STUDY.teacher)")
    ap.add_argument("study")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    try:
        m = run(args.study, args.params)
    except (ConfigError, plan_mod.PlanError, train.CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"study {args.study}'s teacher: test Acc@1 {m['acc1']:.4f} at epoch {m['best_epoch']} of {m['epochs_run']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
