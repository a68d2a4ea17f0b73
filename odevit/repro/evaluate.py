"""Evaluate a published model on its test set: Acc@1/3/5, offline, fp32 on CPU.

    python -m odevit.repro.evaluate odevit_small_patch7_28.fmnist55k_distill         # the trained N
    python -m odevit.repro.evaluate odevit_small_patch7_28.fmnist55k_distill --num-steps 24
    python -m odevit.repro.evaluate --list

Registered tags load through `timm.create_model(TAG, pretrained=True)`; the file's sha256 is checked against
its folder's manifest (weights/quick or weights/evidence) first. At the trained N the result equals the manifest's
Acc@1 (measured the same way when the tag was published) and is within publish.ACC1_TOLERANCE of the run's own
evaluation (results/.../metrics.json; a GPU run rounds differently).
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional

import torch

from .. import hub
from . import data, train
from ..model import ODEViT
from ..hub import create, entry


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Acc@1/3/5 of a published odevit model on its test set")
    ap.add_argument("tag", nargs="?", help="a published tag (--list), e.g. odevit_small_patch7_28.fmnist55k_distill")
    ap.add_argument("--num-steps", type=int, default=None, help="solver steps N at evaluation (ODE models only)")
    ap.add_argument("--limit", type=int, default=None, help="first n test images only")
    ap.add_argument("--data-root", default=None, help="default: the run's base.data_root")
    ap.add_argument("--list", action="store_true", help="list the published tags with their recorded metrics")
    args = ap.parse_args(argv)
    try:
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
    except (hub.WeightsError, data.DatasetError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    e = entries[args.tag]
    steps = f", N = {args.num_steps}" if args.num_steps else ""
    print(f"{args.tag}{steps}: Acc@1 {m['acc1']:.4f}  Acc@3 {m['acc3']:.4f}  Acc@5 {m['acc5']:.4f}")
    if args.num_steps is None and args.limit is None:
        same = m["acc1"] == e["metrics"]["acc1"]
        run = (e.get("run_metrics") or e["metrics"])["acc1"]
        print(f"published (weights/{hub.TAGS[args.tag][2]}/{hub.MANIFEST}): Acc@1 {e['metrics']['acc1']:.4f} "
              f"({'identical' if same else 'DIFFERS'}); the run's own evaluation ({e['metrics_file']}): {run:.4f}")
        return 0 if same else 1
    return 0


def evaluate_tag(tag: str, num_steps: Optional[int] = None, root: Optional[str] = None, data_root: Optional[str] = None,
                 limit: Optional[int] = None) -> Dict[str, float]:
    """Acc@1/3/5 of a published model on the test split it was evaluated on (its manifest's data block), in fp32
    on CPU, through `create` (timm.create_model for a registered architecture; it checks the file)."""
    d = entry(tag, root)["data"]
    model = create(tag, root)
    if num_steps is not None and not isinstance(model, ODEViT):
        raise ValueError(f"--num-steps: {tag} is a discrete ViT (fixed depth), not an ODE model")
    return evaluate_on_test(model, d, num_steps, data_root, limit)


def evaluate_on_test(model: torch.nn.Module, d: Dict[str, Any], num_steps: Optional[int] = None,
                     data_root: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, float]:
    """Acc@1/3/5 of `model` on the test split a manifest's data block `d` names (publish._data_spec), fp32 on CPU."""
    split = data.load_split(d["dataset"], "test", data_root or d["data_root"], download=False,
                            synthetic_size=d["synthetic_size"], seed=d["seed"])
    tf = data.batch_transform(d["dataset"], d["image_size"], d["channels"], d["normalize"])
    loader = data.Loader(split, d["eval_batch_size"], tf, limit=limit if limit is not None else (d["test_limit"] or None))
    train.set_precision("fp32")
    return train.evaluate(model, loader, torch.device("cpu"), num_steps=num_steps)


if __name__ == "__main__":
    sys.exit(main())
