"""Rebuild 02_teacher's checkpoint from its published weights, where this machine's DVC cache lacks it.

The checkpoints are DVC outputs kept in the local cache only (the repository has no DVC remote): a fresh clone, or a
new machine, has results/02_teacher/ (in git) but not checkpoints/02_teacher/best.pt, which every study cell loads
(free ones too: `study.run_many` builds each cell from it). The quick run publishes that best.pt's weights
(weights/quick, tag odevit_teacher_patch7_28.fmnist; its manifest names the checkpoint and the params blocks it came
from):

    python -m odevit.repro.restore          # -> checkpoints/02_teacher/best.pt

It refuses, writing nothing, unless the manifest's entry is 02_teacher's best.pt, its params fingerprint is that of
today's base and teacher blocks, the file is the manifest's (sha256, checked by `hub.create`), its tensors load
strictly into today's teacher, and the rebuilt teacher's test Acc@1 (fp32, this CPU) is results/02_teacher/
metrics.json's within `publish.ACC1_TOLERANCE`. The weights are the trained ones, bit for bit; a run that uses them does its arithmetic on
this machine (a replicate on another machine type: plan.yaml `replicates`). last.pt (optimiser state) is not
restored: stage 02_teacher still reads as changed to `dvc status`, and a plain `dvc repro` trains a new teacher over
it (then every study on that other teacher); run the cells with `python -m odevit.repro.runner STUDY` (or
`dvc repro -s STAGE`). The test split must be on disk (`make data`).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, Optional

from . import config, data, pipeline, publish, train
from ..hub import QUICK, TEACHER_ARCH, WEIGHTS_DIR, WeightsError, create, entry
from .evaluate import evaluate_on_test

TAG = f"{TEACHER_ARCH}.fmnist"  # the quick run's teacher: 02_teacher's best.pt
CKPT = f"{pipeline.TEACHER_CKPT}/best.pt"


def restore(params_file: str = "params.yaml", root: Optional[str] = None,
            metrics: str = "results/02_teacher/metrics.json",
            out: str = CKPT) -> Dict[str, Any]:
    """Check the published teacher against today's params and its committed run, then write `out` (atomically);
    returns {acc1, acc1_run, file}. WeightsError (or ConfigError) names what does not match."""
    root = root or os.path.join(WEIGHTS_DIR, QUICK)
    cfg = config.check_stage("publish", params_file)
    b, t = cfg["base"], cfg["teacher"]
    e = entry(TAG, root)
    if e.get("kind") != "teacher" or e.get("checkpoint") != CKPT:
        raise WeightsError(f"{root}/manifest.json: {TAG} is not 02_teacher's best.pt (kind {e.get('kind')}, checkpoint "
                           f"{e.get('checkpoint')})")
    today = publish._fingerprint(b, t)
    if e.get("params_fingerprint") != today:
        raise WeightsError(f"{root}/manifest.json: {TAG} was trained under other base/teacher blocks (fingerprint "
                           f"{e.get('params_fingerprint')}, today's {params_file}: {today}): "
                           f"train 02_teacher instead (dvc repro 02_teacher)")
    run = pipeline.read_json(metrics)
    model = create(TAG, root)  # checks the file's sha256 against the manifest
    teacher = pipeline.build_teacher(b, t)
    teacher.load_state_dict(model.state_dict(), strict=True)
    got = evaluate_on_test(teacher, e["data"])
    if abs(got["acc1"] - run["acc1"]) > publish.ACC1_TOLERANCE + 1e-12:
        raise WeightsError(f"{root}/{e['file']}: test Acc@1 {got['acc1']} where {metrics} says {run['acc1']} (more "
                           f"than {publish.ACC1_TOLERANCE} apart): not 02_teacher's weights")
    # what train.fit writes as best.pt: the weights, the epoch, the selection metric
    train.save_atomic({"model": teacher.state_dict(), "epoch": run["best_epoch"], "val_acc1": run["val_acc1"]}, out)
    return {"acc1": got["acc1"], "acc1_run": run["acc1"], "file": out}


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description="Rebuild checkpoints/02_teacher/best.pt from the published teacher "
                                             f"(weights/{QUICK}, tag {TAG}), checked against its run")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--root", default=None, help=f"published weights folder (default {WEIGHTS_DIR}/{QUICK})")
    args = ap.parse_args(argv)
    if os.path.exists(CKPT):
        print(f"error: {CKPT} exists: nothing to restore (remove it first to rebuild it)", file=sys.stderr)
        return 2
    try:
        r = restore(args.params, args.root)
    except (WeightsError, config.ConfigError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except data.DatasetError as e:
        print(f"error: {e} (the check evaluates on the test split: `make data` puts Fashion-MNIST in place)",
              file=sys.stderr)
        return 2
    print(f"{r['file']}: restored from {TAG}; test Acc@1 {r['acc1']:.4f} (its run: {r['acc1_run']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
