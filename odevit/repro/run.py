"""Run a stage's training outside its notebook — with torchrun, data-parallel over processes or GPUs.

    torchrun --nproc_per_node=2 -m odevit.repro.run 02_teacher         # 2 processes (gloo on CPU, nccl on GPUs)
    torchrun --nproc_per_node=2 -m odevit.repro.run 04_distill         # the distill block's student, checkpoints/04_distill

02_teacher trains exactly what the stage's notebook trains (the same `pipeline.fit_teacher` call that the
notebook's `pipeline.train_teacher` makes, params.yaml, seed and run fingerprint) and writes the same checkpoints/02_teacher/{best,last}.pt; the notebook's `fit` then resumes
from last.pt with every epoch done. 04_distill trains the distill block's student (base.seed) on the whole
training split into checkpoints/04_distill, e.g. a paper-scale student on several GPUs; the pipeline's own
students are the study cells (`python -m odevit.repro.study CELL SEED`). `base.batch_size` is the global batch
(split evenly over the processes; see `odevit.repro.distributed`).
"""
from __future__ import annotations

import argparse
import sys

from . import config, distributed, pipeline, train

STAGES = ("02_teacher", "04_distill")


def run(stage: str, params_file: str = "params.yaml") -> None:
    cfg = config.check_stage(stage, params_file)  # one-line error before any process group or data
    b = cfg["base"]
    rank, world = distributed.init(b.device)
    if b.batch_size % world:
        raise config.ConfigError(f"params.yaml: base.batch_size = {b.batch_size} is the global batch; it must be a "
                                 f"multiple of the {world} processes")
    device = pipeline.setup(b)  # seed, precision, device
    if stage == "02_teacher":
        tr, va, te = pipeline.data_loaders(b, augment=cfg["teacher"].augment)
        pipeline.fit_teacher(pipeline.build_teacher(b, cfg["teacher"]), b, cfg["teacher"], tr,
                             pipeline.eval_loaders(b, va, te))
    else:
        t, d = cfg["teacher"], cfg["distill"]
        tr, va, te = pipeline.data_loaders(b, augment=d.augment)
        teacher = train.load_weights(pipeline.build_teacher(b, t), f"{pipeline.TEACHER_CKPT}/best.pt").to(device).eval()
        dist = pipeline.teacher_distances(teacher, tr, d.distance_batches, d.distance_tokens, device)
        pipeline.fit_student(pipeline.build_student(teacher, d), teacher, pipeline.schedule(dist, d), b, t, d, tr,
                             pipeline.eval_loaders(b, va, te), distances=dist)
    distributed.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stage", choices=STAGES)
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    try:
        run(args.stage, args.params)
    except (config.ConfigError, train.CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
