"""The published weights (weights/v2): publish the plan's teacher and students, evaluate any tag on its test set.

    python -m odevit.repro.weights --list                        # tags, sizes, published Acc@1
    python -m odevit.repro.weights TAG [--num-steps N] [--limit n] # Acc@1/3/5 of a tag on its test set (fp32, CPU)
    python -m odevit.repro.weights --publish                     # the teacher, finished publish rows -> weights/v2

The runs' best.pt files are the trainer's (checkpoints/v2): publish on the machine that trained them.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
from typing import Any, Dict, List, Optional, Tuple

import torch
from safetensors.torch import save_file

from .. import hub
from ..hub import (ARCH_KWARGS, MANIFEST, TAGS, TEACHER_ARCH, V2, WEIGHTS_DIR, WeightsError, create, entry, sha256,
                   weights_path)
from ..model import ODEViT
from . import config, data, pipeline, train
from . import plan as plan_mod


# How far the published Acc@1 (fp32 on this CPU) may be from the run's own (fp32 on its GPU rounds differently, flipping
# an image or two: confirm_55k ce s102 0.8762 here, 0.8761 on the H100); more than 10 of 10,000 images is other weights.
ACC1_TOLERANCE = 0.001


def v2_sources(plan_file: str = "params.yaml") -> Tuple[Dict[str, Dict[str, Any]], Dict[str, str]]:
    """What `--publish` writes and what it cannot yet (pending: tag -> why): plan v2's selected teacher (the best.pt in
    git, sha256 checked), then each `publish` row's cell at its best validation seed (ties: the plan's first)."""
    def selection(seeds: List[int], ms: Dict[int, Dict[str, Any]]) -> str:
        return (f"best validation Acc@1 of seeds {seeds} (ties: the first in the plan's order): "
                + ", ".join(f"s{s} {100 * m['val_acc1']:.2f}" for s, m in ms.items()))
    p = config.Plan(plan_file)
    selected = f"{config.RESULTS}/teacher/selected.json"
    if not os.path.isfile(selected):
        raise FileNotFoundError(f"{selected}: missing (the plan's teacher is not trained and selected yet: dvc repro 02_teacher)")
    sel = pipeline.read_json(selected)
    seed = int(sel["seed"])
    if not os.path.isfile(config.KEPT_TEACHER) or sha256(config.KEPT_TEACHER) != sel["sha256"]:
        raise WeightsError(f"{config.KEPT_TEACHER}: missing or not the selected teacher's weights "
                           f"(sha256 {sel['sha256']}, {selected})")
    seeds = [int(s) for s in p.plan["teacher"]["seeds"]]
    runs = {s: pipeline.read_json(f"{config.RESULTS}/teacher/s{s}/metrics.json") for s in seeds}
    b, tc = dataclasses.replace(p.base, seed=seed), p.teacher_cfg
    out = {f"{TEACHER_ARCH}.fmnist_v2": dict(
        kind="teacher", checkpoint=config.KEPT_TEACHER, metrics=f"{config.RESULTS}/teacher/s{seed}/metrics.json",
        builder=tc.name or pipeline.GENERIC_VIT, model_kwargs=pipeline.teacher_kwargs(b, tc), cell=None, seed=seed,
        study=None, plan_hash=runs[seed].get("plan_hash"), selection=selection(seeds, runs), data=_data_spec(b, seed))}
    pending: Dict[str, str] = {}
    for i, r in enumerate(p.plan.get("publish") or []):
        tag, study, cell = r["tag"], r["study"], r["cell"]
        seeds = [int(x) for x in p.plan["studies"][study]["seeds"]]
        files = {x: f"{config.RESULTS}/{study}/{cell}/s{x}/metrics.json" for x in seeds}
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
        m, c = ms[seed], pipeline.build(config.cell_of(p, study, cell), p, [seed])  # the model as train_cell builds it
        b, model = dataclasses.replace(p.base, seed=seed), c.models[0]
        out[tag] = dict(kind="free" if c.free else "student",
                        checkpoint=f"{config.CKPTS}/{study}/{cell}/s{seed}/best.pt", metrics=files[seed],
                        builder="odevit.ODEViT", model_kwargs=pipeline.arch_kwargs(model), cell=cell, seed=seed,
                        study=study, plan_hash=m.get("plan_hash"), selection=selection(seeds, ms), seeds_compared=seeds,
                        val_acc1=m["val_acc1"], epochs_run=m.get("epochs_run"),
                        converged_plan=dict(converged=m.get("converged"), gain_floor_pts=m.get("gain_floor_pts"),
                                            threshold_pts=m.get("threshold_pts")), data=_data_spec(b, seed))
    return out, pending


def _data_spec(b: Any, seed: Optional[int]) -> Dict[str, Any]:
    return dict(dataset=b.dataset, image_size=b.image_size, channels=b.channels, normalize=b.normalize,
                eval_batch_size=b.eval_batch_size, test_limit=b.test_limit, data_root=b.data_root,
                synthetic_size=b.synthetic_size, seed=seed)


def publish(params_file: str = "params.yaml", root: Optional[str] = None) -> Dict[str, Any]:
    """Write ROOT/TAG.safetensors + ROOT/manifest.json (weights/v2) from the runs' best checkpoints, in ROOT.staging
    until every tag, reloaded as users load it, reproduces its run's Acc@1: a failure leaves ROOT untouched."""
    root = root or os.path.join(WEIGHTS_DIR, V2)
    src, pending = v2_sources(params_file)
    inputs = {}  # every input read (and checked) before anything is written
    for tag, e in src.items():
        if not os.path.isfile(e["checkpoint"]):
            raise FileNotFoundError(f"{e['checkpoint']}: missing ({tag}'s weights; its run: {e['metrics']})")
        sd = train.load_checkpoint(e["checkpoint"])  # the weights, contiguous
        inputs[tag] = ({k: v.contiguous() for k, v in sd.get("model", sd).items()}, pipeline.read_json(e["metrics"]))
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
                                # metrics (set below): what `weights TAG` gives; run_metrics: the run's own evaluation
                                run_metrics={k: m[k] for k in ("acc1", "acc3", "acc5") if k in m},
                                schedule=m.get("checkpoints"),  # a distilled student's c_1..c_L (06 on these weights)
                                **{k: v for k, v in e.items() if k != "metrics"}, metrics_file=e["metrics"])
        manifest = {"format": "safetensors state_dict (weights only)", "weights": entries,
                    **({"pending": pending} if pending else {})}  # plan rows whose runs are not finished: named
        pipeline.write_json(manifest, os.path.join(staging, MANIFEST))
        for tag, e in entries.items():
            got, run = evaluate_tag(tag, root=staging), e["run_metrics"]["acc1"]
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


def evaluate_tag(tag: str, num_steps: Optional[int] = None, root: Optional[str] = None, data_root: Optional[str] = None,
                 limit: Optional[int] = None) -> Dict[str, float]:
    """Acc@1/3/5 of a published model on its manifest's test split, fp32 on CPU, through `create` (file checked)."""
    d, model = entry(tag, root)["data"], create(tag, root)
    if num_steps is not None and not isinstance(model, ODEViT):
        raise ValueError(f"--num-steps: {tag} is a discrete ViT (fixed depth), not an ODE model")
    split = data.load_split(d["dataset"], "test", data_root or d["data_root"], download=False,
                            synthetic_size=d["synthetic_size"], seed=d["seed"])
    tf = data.batch_transform(d["dataset"], d["image_size"], d["channels"], d["normalize"])
    loader = data.Loader(split, d["eval_batch_size"], tf,
                         limit=limit if limit is not None else (d["test_limit"] or None))
    train.set_precision("fp32")
    return train.evaluate(model, loader, torch.device("cpu"), num_steps=num_steps)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="The published weights: evaluate a tag on its test set, list them, publish")
    ap.add_argument("tag", nargs="?", help="a published tag (--list), e.g. odevit_small_patch7_28.fmnist_v2_distill")
    ap.add_argument("--num-steps", type=int, default=None, help="solver steps N at evaluation (ODE models only)")
    ap.add_argument("--limit", type=int, default=None, help="first n test images only")
    ap.add_argument("--data-root", default=None, help="default: the run's base.data_root")
    ap.add_argument("--list", action="store_true", help="list the published tags with their recorded metrics")
    ap.add_argument("--publish", action="store_true", help="publish the plan's finished cells to weights/v2")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args(argv)
    errors = ((config.ConfigError, plan_mod.PlanError, train.CheckpointError, FileNotFoundError, WeightsError)
              if args.publish else (WeightsError, data.DatasetError, ValueError))
    try:
        if args.publish:
            publish(args.params)
            return 0
        entries = hub.published()
        if args.list or not args.tag:
            for tag, e in entries.items():
                print(f"{tag:42s} {e['kind']:8s} {e['parameters'] / 1e6:.3f}M  Acc@1 {e['metrics']['acc1']:.4f}  "
                      f"({e['metrics_file']})")
            for tag, why in hub.pending().items():
                print(f"{tag:42s} pending: {why}")
            return 0
        if args.num_steps is not None and args.num_steps < 1:
            raise ValueError(f"--num-steps: {args.num_steps} must be >= 1")
        m = evaluate_tag(args.tag, num_steps=args.num_steps, data_root=args.data_root, limit=args.limit)
    except errors as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    e = entries[args.tag]
    steps = f", N = {args.num_steps}" if args.num_steps else ""
    print(f"{args.tag}{steps}: Acc@1 {m['acc1']:.4f}  Acc@3 {m['acc3']:.4f}  Acc@5 {m['acc5']:.4f}")
    if args.num_steps is None and args.limit is None:
        same, run = m["acc1"] == e["metrics"]["acc1"], (e.get("run_metrics") or e["metrics"])["acc1"]
        print(f"published (weights/{hub.TAGS[args.tag][2]}/{hub.MANIFEST}): Acc@1 {e['metrics']['acc1']:.4f} "
              f"({'identical' if same else 'DIFFERS'}); the run's own evaluation ({e['metrics_file']}): {run:.4f}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
