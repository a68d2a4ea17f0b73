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

import pandas as pd

from . import config, pipeline, provenance, train
from . import plan as plan_mod
from .config import Base, ConfigError, Distill, Teacher


def dirs(study: str) -> Tuple[str, str]:
    """(checkpoint folder, results folder) of a study's teacher."""
    return f"checkpoints/studies/{study}/teacher", f"results/studies/{study}/teacher"


def stage(study: str) -> str:
    """The DVC stage that trains the study's teacher."""
    return f"{study}_teacher"


def finished(study: str, params_file: str = "params.yaml", plan_file: str = plan_mod.PLAN_FILE) -> bool:
    """Whether the study's teacher is trained under its plan block as it is now: its metrics.json exists and records
    the teacher config and precision the plan gives today. A teacher of an earlier block is not finished: the runner
    trains it again and the cells refuse it."""
    path = f"{dirs(study)[1]}/metrics.json"
    if not os.path.isfile(path):
        return False
    b, t, _, _ = configs(study, params_file, plan_file)
    m = pipeline.read_json(path)
    return m.get("teacher") == dataclasses.asdict(t) and m.get("precision") == b.precision


def identity(study: str) -> str:
    """sha256 (16 hex digits) of the study teacher's best.pt: part of its students' run ids and metrics, so that a
    student never resumes, or is recorded, against another training of the same teacher config."""
    with open(f"{dirs(study)[0]}/best.pt", "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def configs(study: str, params_file: str = "params.yaml", plan_file: str = plan_mod.PLAN_FILE
            ) -> Tuple[Base, Teacher, Distill, str]:
    """(base, teacher, distill) configs of the study's teacher run and the study's plan hash; ConfigError when the
    study has no teacher block."""
    cfg = config.check_stage("cell", params_file)
    plan = plan_mod.load(plan_file)
    if study not in plan["studies"]:
        raise ConfigError(f"{plan_file}: study '{study}' is not one of {list(plan['studies'])}")
    s = plan["studies"][study]
    if not s.get("teacher"):
        raise ConfigError(f"{plan_file}: studies.{study} has no teacher block (its cells use 02_teacher's teacher)")
    base = dataclasses.replace(cfg["base"], **(s.get("base") or {}))
    teacher = config.merged(cfg["teacher"], **s["teacher"], patience=0)  # the plan's rule: the whole schedule
    return base, teacher, cfg["distill"], plan_mod.study_hash(plan, study)


def run(study: str, params_file: str = "params.yaml", plan_file: str = plan_mod.PLAN_FILE) -> Dict[str, Any]:
    """Train (or resume) the study's teacher; write its checkpoints, history, distances, metrics and timing."""
    start = pipeline.process_start()
    ph: Dict[str, float] = {"startup": time.time() - start}
    clock = time.perf_counter()
    source = train.fingerprint()  # the code this process trains with, even if the checkout changes meanwhile
    b, t, d, plan_hash = configs(study, params_file, plan_file)
    device = pipeline.setup(b)
    ckpt, out = dirs(study)
    tr, va, te = pipeline.data_loaders(b, augment=t.augment)
    ph["data"] = time.perf_counter() - clock
    model = pipeline.build_teacher(b, t)
    print(f"study {study}'s teacher {t.name or '(a ViT of the shape keys)'}: {t.epochs} epochs"
          f"{', augmented' if t.augment else ''}, lr {t.lr}; {tr.n} training images, selected on {b.select_on}",
          flush=True)
    with provenance.Monitor(ckpt, start) as mon:
        hist = pipeline.fit_teacher(model, b, t, tr, pipeline.eval_loaders(b, va, te), out_dir=ckpt)
        clock = time.perf_counter()
        train.load_weights(model, f"{ckpt}/best.pt")
        metrics = train.evaluate(model, te, device)  # the test set, once, at the selected epoch
        ph["test_eval"] = time.perf_counter() - clock
        dist = pipeline.teacher_distances(model.to(device).eval(), tr, d.distance_batches, d.distance_tokens, device)
    metrics.update(**pipeline.run_summary(hist, b, t), study=study, plan_hash=plan_hash, precision=b.precision,
                   teacher=dataclasses.asdict(t), params_m=pipeline.params_m(model), epochs=t.epochs,
                   train_images=tr.n, val_images=va.n if va is not None else 0, provenance=mon.summary(),
                   source=source)
    pipeline.write_csv(pd.DataFrame(hist), f"{out}/history.csv")
    pipeline.write_csv(pd.DataFrame({"layer": range(1, len(dist) + 1), "distance": dist}), f"{out}/distances.csv")
    pipeline.write_json(pipeline.timing(ph, hist, start), f"{out}/timing.json")
    pipeline.write_json(metrics, f"{out}/metrics.json")  # last: its presence marks the run finished
    return metrics


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
