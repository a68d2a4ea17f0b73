"""Publish the plan's weights (odevit.hub) to weights/v2:

    python -m odevit.repro.publish    # the plan's teacher and params.yaml's publish rows whose runs are all finished
                                      # (their best.pt files are the trainer's, checkpoints/v2: on the machine that
                                      # trained them) -> weights/v2

Each writes safetensors (weights only) with FOLDER/manifest.json (sha256, size, architecture, constructor arguments,
source checkpoint, cell, seed, how the seed was selected, data, metrics), then reloads every tag the way users do
(odevit.hub) and fails unless it reproduces its run's Acc@1.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
from typing import Any, Dict, Optional, Tuple

import torch
from safetensors.torch import load_file, save_file

from . import config, data, pipeline, train
from . import plan as plan_mod
from ..hub import ARCH_KWARGS, MANIFEST, TAGS, TEACHER_ARCH, V2, WEIGHTS_DIR, WeightsError, sha256, weights_path
from .evaluate import evaluate_tag


# How far the published Acc@1 (fp32 on this CPU: what users get from `evaluate`) may be from the run's own evaluation
# on its machine: fp32 on another device (the plan's runs: a GPU) rounds differently and flips a borderline image or
# two (confirm_55k ce s102: 0.8762 here, 0.8761 on the H100); more than 10 of 10,000 test images is other weights.
ACC1_TOLERANCE = 0.001


def v2_sources(plan_file: str = "params.yaml") -> Tuple[Dict[str, Dict[str, Any]], Dict[str, str]]:
    """What `--v2` publishes (weights/v2), and what it cannot yet: plan v2's teacher, the seed selected on validation
    (results/v2/teacher/selected.json), from the best.pt kept in git (weights/v2_teacher/best.pt), which must be that
    seed's (sha256); then plan_v2.yaml's `publish` rows, each a study's cell at the seed with the best validation
    Acc@1 (ties: the first in the plan's order; the test set is never looked at). A row whose cell has not finished
    every seed is returned as pending (tag -> why) and left out, never published from part of its seeds."""
    from . import fast

    p = fast.Plan(plan_file)
    selected = f"{fast.RESULTS}/teacher/selected.json"
    if not os.path.isfile(selected):
        raise FileNotFoundError(f"{selected}: missing (plan v2's teacher is not trained and selected yet: make plan-v2)")
    sel = pipeline.read_json(selected)
    seed = int(sel["seed"])
    if not os.path.isfile(fast.KEPT_TEACHER) or sha256(fast.KEPT_TEACHER) != sel["sha256"]:
        raise WeightsError(f"{fast.KEPT_TEACHER}: missing or not the selected teacher's weights (sha256 {sel['sha256']}, "
                           f"{selected})")
    seeds = [int(s) for s in p.plan["teacher"]["seeds"]]
    runs = {s: pipeline.read_json(f"{fast.RESULTS}/teacher/s{s}/metrics.json") for s in seeds}
    b, tc = dataclasses.replace(p.base, seed=seed), p.teacher_cfg
    out = {f"{TEACHER_ARCH}.fmnist_v2": dict(
        kind="teacher", checkpoint=fast.KEPT_TEACHER, metrics=f"{fast.RESULTS}/teacher/s{seed}/metrics.json",
        builder=tc.name or pipeline.GENERIC_VIT, model_kwargs=pipeline.teacher_kwargs(b, tc), cell=None, seed=seed,
        study=None, plan_hash=runs[seed].get("plan_hash"),
        selection=f"best validation Acc@1 of seeds {seeds} (ties: the first in the plan's order): "
                  + ", ".join(f"s{s} {100 * m['val_acc1']:.2f}" for s, m in runs.items()),
        data=_data_spec(b, seed))}
    pending: Dict[str, str] = {}
    for i, r in enumerate(p.plan.get("publish") or []):
        tag, study, cell = r["tag"], r["study"], r["cell"]
        s = p.plan["studies"][study]
        seeds = [int(x) for x in s["seeds"]]
        files = {x: f"{fast.RESULTS}/{study}/{cell}/s{x}/metrics.json" for x in seeds}
        todo = [x for x, f in files.items() if not os.path.isfile(f)]
        if todo:
            pending[tag] = (f"{study}/{cell}: none of its seeds {seeds} finished" if len(todo) == len(seeds) else
                            f"{study}/{cell}: seeds {todo} of {seeds} not finished")
            continue
        if tag not in TAGS or TAGS[tag][2] != V2:
            raise config.ConfigError(f"{plan_file}: publish[{i}].tag '{tag}' is not one of the v2 tags of "
                                     f"odevit.hub.TAGS ({sorted(t for t, v in TAGS.items() if v[2] == V2)})")
        ms = {x: pipeline.read_json(f) for x, f in files.items()}
        seed = max(seeds, key=lambda x: (ms[x]["val_acc1"], -seeds.index(x)))
        m = ms[seed]
        c = fast.cell_of(p, study, cell)
        fast._teacher_weights(c.teacher, c.checkpoint)
        b = dataclasses.replace(p.base, seed=seed)
        model = pipeline.build_cell(pipeline.load_teacher(b, p.teacher_cfg, torch.device("cpu"), c.checkpoint),
                                    c.distill, c.free)  # as train_cell builds it
        out[tag] = dict(kind="free" if c.free else "student", checkpoint=f"{fast.CKPTS}/{study}/{cell}/s{seed}/best.pt",
                        metrics=files[seed], builder="odevit.ODEViT", model_kwargs=pipeline.arch_kwargs(model), cell=cell,
                        seed=seed, study=study, plan_hash=m.get("plan_hash"),
                        selection=f"best validation Acc@1 of seeds {seeds} (ties: the first in the plan's order): "
                                  + ", ".join(f"s{x} {100 * ms[x]['val_acc1']:.2f}" for x in seeds),
                        seeds_compared=seeds, val_acc1=m["val_acc1"], epochs_run=m.get("epochs_run"),
                        converged_plan=dict(converged=m.get("converged"), gain_floor_pts=m.get("gain_floor_pts"),
                                            threshold_pts=m.get("threshold_pts")),
                        data=_data_spec(b, seed))
    return out, pending


def _data_spec(b: Any, seed: Optional[int]) -> Dict[str, Any]:
    return dict(dataset=b.dataset, image_size=b.image_size, channels=b.channels, normalize=b.normalize,
                eval_batch_size=b.eval_batch_size, test_limit=b.test_limit, data_root=b.data_root,
                synthetic_size=b.synthetic_size, seed=seed)


def _state_dict(path: str) -> Dict[str, torch.Tensor]:
    """A checkpoint's weights (train's .pt, or a weights-only .safetensors), contiguous."""
    sd = load_file(path) if path.endswith(".safetensors") else train.load_checkpoint(path)
    return {k: v.contiguous() for k, v in (sd["model"] if "model" in sd else sd).items()}


def publish(params_file: str = "params.yaml", root: Optional[str] = None) -> Dict[str, Any]:
    """Write ROOT/TAG.safetensors + ROOT/manifest.json from the runs' best checkpoints (weights/v2). Everything is
    written to ROOT.staging and checked there — every tag reloaded the way users load it must reproduce its run's
    Acc@1 — before it replaces ROOT: a failure leaves the previous weights untouched and nothing half-written."""
    root = root or os.path.join(WEIGHTS_DIR, V2)
    src, pending = v2_sources(params_file)
    # every input read (and checked) before anything is written
    inputs = {}
    for tag, e in src.items():
        if not os.path.isfile(e["checkpoint"]):
            raise FileNotFoundError(f"{e['checkpoint']}: missing ({tag}'s weights; its run: {e['metrics']})")
        inputs[tag] = (_state_dict(e["checkpoint"]), pipeline.read_json(e["metrics"]))
    staging = root.rstrip("/") + ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    try:
        entries: Dict[str, Any] = {}
        for tag, e in src.items():
            sd, m = inputs[tag]
            path = weights_path(tag, staging)
            save_file(sd, path, metadata={"tag": tag})  # one key: safetensors orders several at random
            os.chmod(path, 0o644)
            entries[tag] = dict(file=os.path.basename(path), sha256=sha256(path), bytes=os.path.getsize(path),
                                # None: this run's architecture is not the registered one (load with hub.load)
                                architecture=TAGS[tag][0] if e["model_kwargs"] == ARCH_KWARGS[TAGS[tag][0]] else None,
                                description=TAGS[tag][1], parameters=int(sum(v.numel() for v in sd.values())),
                                # metrics: what `python -m odevit.repro.evaluate TAG` gives (fp32, CPU), set below;
                                # run_metrics: the run's own evaluation (on its machine)
                                run_metrics={k: m[k] for k in ("acc1", "acc3", "acc5") if k in m},
                                schedule=m.get("checkpoints"),  # a distilled student's c_1..c_L (06 on these weights)
                                **{k: v for k, v in e.items() if k != "metrics"}, metrics_file=e["metrics"])
        manifest = {"format": "safetensors state_dict (weights only)", "weights": entries}
        if pending:  # plan rows whose runs are not finished: named, not published
            manifest["pending"] = pending
        pipeline.write_json(manifest, os.path.join(staging, MANIFEST))
        for tag, e in entries.items():
            got = evaluate_tag(tag, root=staging)
            run = e["run_metrics"]["acc1"]
            if abs(got["acc1"] - run) > ACC1_TOLERANCE + 1e-12:
                raise WeightsError(f"{tag}: reloaded weights give Acc@1 {got['acc1']} where {e['metrics_file']} says "
                                   f"{run} (more than {ACC1_TOLERANCE} apart: not the run's weights)")
            e["metrics"] = {k: got[k] for k in ("acc1", "acc3", "acc5")}
            print(f"{tag}: {e['bytes'] / 2**20:.2f} MiB, sha256 {e['sha256'][:12]}..., Acc@1 {got['acc1']:.4f} "
                  f"(fp32, CPU; {e['metrics_file']}: {run:.4f})", flush=True)
        for tag, why in pending.items():
            print(f"{tag}: not published yet ({why})", flush=True)
        pipeline.write_json(manifest, os.path.join(staging, MANIFEST))  # with the Acc@1 that evaluate reproduces
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(root, ignore_errors=True)
    os.replace(staging, root)
    return manifest


def main(argv: Optional[list] = None) -> None:
    ap = argparse.ArgumentParser(description=f"Publish the plan's teacher and students to weights/{V2}")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    try:
        publish(args.params)
    except (config.ConfigError, plan_mod.PlanError, train.CheckpointError, FileNotFoundError, WeightsError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
