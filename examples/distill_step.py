"""Distil any timm ViT into an ODE-ViT student with odevit's public API: the training step, in plain PyTorch.

    python examples/distill_step.py                                    # a small random ViT teacher, random images
    python examples/distill_step.py --teacher vit_base_patch16_224.dino --weights-file PATH   # DINO, from a file

The step is the paper's label-free objective (what `odevit.repro` trains as cell `ref`):
  1. the frozen teacher's hidden states h_0..h_L on the batch (odevit.hidden_states);
  2. the checkpoint schedule c_1..c_L: where the student's trajectory must pass through h_1..h_L, placed by the
     teacher's layer distances (odevit.layer_distances, odevit.checkpoint_indices; computed once, before training);
  3. the student's whole trajectory X_0..X_N and its attention maps (ODEViT.forward_trajectory);
  4. loss = sum_l MSE(X_{c_l}, h_l) over the CLS row (odevit.trajectory_mse) + JaSMin over the last maps
     (odevit.jasmin), optionally + cross-entropy on the labels (--ce-weight: the paper's "+CE" student).

Pretrained weights come from a local file (--weights-file: a .safetensors or state-dict .pth, e.g. DINO's), never
from the network here: a missing file stops with the file name and where to get it.
"""
from __future__ import annotations

import argparse
from typing import Dict, Optional, Sequence

import torch
import torch.nn.functional as F

import odevit


def distill_loss(student: odevit.ODEViT, teacher: torch.nn.Module, x: torch.Tensor, checkpoints: Sequence[int],
                 y: Optional[torch.Tensor] = None, jasmin_weight: float = 1.0, ce_weight: float = 0.0
                 ) -> Dict[str, torch.Tensor]:
    """The distillation loss of one batch and its parts (tensors; `loss` carries the gradient)."""
    with torch.no_grad():
        hs = odevit.hidden_states(teacher, x)  # h_0..h_L in the student's token layout
    out = student.forward_trajectory(x, return_attn=jasmin_weight > 0)
    parts = {"mse": odevit.trajectory_mse(out["states"], hs, checkpoints)}
    loss = parts["mse"]
    if jasmin_weight > 0:
        parts["jasmin"] = odevit.jasmin(out["attn"])
        loss = loss + jasmin_weight * parts["jasmin"]
    if ce_weight > 0:
        if y is None:
            raise ValueError("ce_weight > 0 needs the labels y")
        parts["ce"] = F.cross_entropy(out["logits"].float(), y)
        loss = loss + ce_weight * parts["ce"]
    parts["loss"] = loss
    return parts


def schedule(teacher: torch.nn.Module, batches: Sequence[torch.Tensor], num_steps: int, tau: float) -> list:
    """c_1..c_L from the teacher's mean CLS distances between consecutive layers on a few batches."""
    with torch.no_grad():
        hidden = [odevit.hidden_states(teacher, x) for x in batches]
    return odevit.checkpoint_indices(odevit.layer_distances(hidden), num_steps=num_steps, tau=tau)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--teacher", default="vit_tiny_patch16_224", help="any timm VisionTransformer name")
    ap.add_argument("--weights-file", default=None, help="local teacher weights (.safetensors or state-dict .pth)")
    ap.add_argument("--img-size", type=int, default=None, help="default: 32 without --weights-file, else the name's")
    ap.add_argument("--patch-size", type=int, default=None, help="default: 8 without --weights-file, else the name's")
    ap.add_argument("--depth", type=int, default=None, help="default: 4 without --weights-file, else the name's")
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--num-steps", type=int, default=8, help="the student's solver steps N")
    ap.add_argument("--tau", type=float, default=3.0, help="schedule temperature (30 for DINO's distances)")
    ap.add_argument("--ce-weight", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=3, help="optimiser steps")
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args(argv)
    torch.manual_seed(0)

    small = {} if args.weights_file else dict(img_size=32, patch_size=8, depth=4)  # a CPU-sized random teacher
    given = dict(img_size=args.img_size, patch_size=args.patch_size, depth=args.depth)
    shape = {**small, **{k: v for k, v in given.items() if v is not None}}
    teacher = odevit.create_teacher(args.teacher, num_classes=args.num_classes, weights_file=args.weights_file,
                                    **shape).eval().requires_grad_(False)
    student = odevit.student_from_teacher(teacher, num_steps=args.num_steps, mlp_ratio=1.0)
    size = teacher.patch_embed.img_size
    images = lambda: torch.randn(args.batch_size, 3, *size)  # noqa: E731  (your DataLoader's batches here)
    checkpoints = schedule(teacher, [images() for _ in range(2)], args.num_steps, args.tau)
    opt = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=1e-3, weight_decay=0.05)
    student.train()
    for step in range(args.steps):
        x, y = images(), torch.randint(args.num_classes, (args.batch_size,))
        parts = distill_loss(student, teacher, x, checkpoints, y, ce_weight=args.ce_weight)
        opt.zero_grad(set_to_none=True)
        parts["loss"].backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        print(f"step {step + 1}: " + "  ".join(f"{k} {v.item():.4f}" for k, v in parts.items()), flush=True)
    print(f"checkpoints c_1..c_L = {checkpoints} of N = {args.num_steps}")
    return {k: v.item() for k, v in parts.items()}


if __name__ == "__main__":
    main()
