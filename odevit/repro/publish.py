"""Publish the default run's weights to weights/ (DVC stage `publish`: python -m odevit.repro.publish).

Writes the teacher, the free ODE and the distilled student of the main seed (study.seeds[0]) as safetensors
(weights only) with weights/manifest.json (sha256, size, architecture, constructor arguments, source checkpoint,
cell, seed, params fingerprint, data, metrics), then reloads every tag the way users do (odevit.hub) and fails
unless it reproduces its run's Acc@1.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import sys
from typing import Any, Dict, Optional

import torch
from safetensors.torch import save_file

from . import config, data, pipeline, train
from ..hub import (ARCH_KWARGS, MANIFEST, STUDENT_ARCH, TAGS, TEACHER_ARCH, WEIGHTS_DIR, WeightsError, sha256,
                   weights_path)
from .evaluate import evaluate_tag


def _fingerprint(*blocks: Any) -> str:
    """sha256 (16 hex) of the params blocks a model came from (not of the source code)."""
    js = json.dumps([dataclasses.asdict(c) if dataclasses.is_dataclass(c) else c for c in blocks], sort_keys=True,
                    default=str)
    return hashlib.sha256(js.encode()).hexdigest()[:16]


def sources(params_file: str = "params.yaml") -> Dict[str, Dict[str, Any]]:
    """What the default run publishes: tag -> checkpoint, metrics file, builder, constructor kwargs, provenance."""
    from . import study as st

    cfg = config.check_stage("publish", params_file)
    b, t, d, s = cfg["base"], cfg["teacher"], cfg["distill"], cfg["study"]
    seed = s.seeds[0]
    free = [n for n, ov in s.cells.items() if (ov or {}).get("free") is True]
    if not free:
        raise config.ConfigError("publish: study.cells has no free cell ({free: true}) to publish")
    teacher = st.load_teacher(b, t, torch.device("cpu"))
    out = {f"{TEACHER_ARCH}.fmnist": dict(
        kind="teacher", checkpoint=f"{pipeline.TEACHER_CKPT}/best.pt", metrics="results/02_teacher/metrics.json",
        builder=t.name or pipeline.GENERIC_VIT, model_kwargs=pipeline.teacher_kwargs(b, t), params_fingerprint=_fingerprint(b, t), cell=None,
        seed=b.seed)}
    for tag, cell in ((f"{STUDENT_ARCH}.fmnist_distill", s.reference), (f"{STUDENT_ARCH}.fmnist_free", free[0])):
        dc, is_free = st.cell_config(d, s, cell)
        model = st.build_cell(teacher, dc, is_free)
        out[tag] = dict(kind="free" if is_free else "student", checkpoint=f"{st.cell_dir('checkpoints', cell, seed)}/best.pt",
                        metrics=f"{st.cell_dir('results', cell, seed)}/metrics.json", builder="odevit.ODEViT",
                        model_kwargs=st.arch_kwargs(model), cell=cell, seed=seed,
                        params_fingerprint=_fingerprint(b, t, dc, s.train_limit, cell, seed))
    data_spec = dict(dataset=b.dataset, image_size=b.image_size, channels=b.channels, normalize=b.normalize,
                     eval_batch_size=b.eval_batch_size, test_limit=b.test_limit, data_root=b.data_root,
                     synthetic_size=b.synthetic_size)
    for e in out.values():
        e["data"] = dict(data_spec, seed=e["seed"])  # a run's seed also draws the synthetic dataset
    return out


def publish(params_file: str = "params.yaml", root: str = WEIGHTS_DIR) -> Dict[str, Any]:
    """Write ROOT/TAG.safetensors + ROOT/manifest.json from the run's best checkpoints. Everything is written to
    ROOT.staging and checked there — every tag reloaded the way users load it must reproduce its run's Acc@1 —
    before it replaces ROOT: a failure leaves the previous weights untouched and nothing half-written."""
    src = sources(params_file)
    # every input read (and checked) before anything is written
    inputs = {tag: (train.load_checkpoint(e["checkpoint"]), pipeline.read_json(e["metrics"])) for tag, e in src.items()}
    staging = root.rstrip("/") + ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    try:
        entries: Dict[str, Any] = {}
        for tag, e in src.items():
            sd, m = inputs[tag]
            sd = {k: v.contiguous() for k, v in (sd["model"] if "model" in sd else sd).items()}
            path = weights_path(tag, staging)
            save_file(sd, path, metadata={"tag": tag})  # one key: safetensors orders several at random
            os.chmod(path, 0o644)
            entries[tag] = dict(file=os.path.basename(path), sha256=sha256(path), bytes=os.path.getsize(path),
                                # None: this run's architecture is not the registered one (load with hub.load)
                                architecture=TAGS[tag][0] if e["model_kwargs"] == ARCH_KWARGS[TAGS[tag][0]] else None,
                                description=TAGS[tag][1], parameters=int(sum(v.numel() for v in sd.values())),
                                metrics={k: m[k] for k in ("acc1", "acc3", "acc5") if k in m},
                                schedule=m.get("checkpoints"),  # a distilled student's c_1..c_L (06 on these weights)
                                **{k: v for k, v in e.items() if k != "metrics"}, metrics_file=e["metrics"])
        manifest = {"format": "safetensors state_dict (weights only)", "weights": entries}
        pipeline.write_json(manifest, os.path.join(staging, MANIFEST))
        for tag, e in entries.items():
            got = evaluate_tag(tag, root=staging)
            if got["acc1"] != e["metrics"]["acc1"]:
                raise WeightsError(f"{tag}: reloaded weights give Acc@1 {got['acc1']} where {e['metrics_file']} "
                                   f"says {e['metrics']['acc1']}")
            print(f"{tag}: {e['bytes'] / 2**20:.2f} MiB, sha256 {e['sha256'][:12]}..., Acc@1 {got['acc1']:.4f} "
                  f"(= {e['metrics_file']})", flush=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(root, ignore_errors=True)
    os.replace(staging, root)
    return manifest


def main(argv: Optional[list] = None) -> None:
    ap = argparse.ArgumentParser(description="Publish the default run's weights to weights/ (DVC stage publish)")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    try:
        publish(args.params)
    except (config.ConfigError, train.CheckpointError, FileNotFoundError, WeightsError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
