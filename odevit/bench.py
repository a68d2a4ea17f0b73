"""Side-by-side benchmark: ODE-ViT vs timm's VisionTransformer of equal FLOPs (depth = N), on this machine.

    python -m odevit.bench                 # writes results/bench/bench.json and bench.md
    python -m odevit.bench --quick         # default config only

Per config and dtype (fp32, bf16 autocast): training step (forward + backward + AdamW) and inference images/s as
the median of timed repetitions after warm-up (with min and max), FLOPs per image counted by
torch.utils.flop_counter.FlopCounterMode, achieved GFLOP/s over this machine's large-matmul GFLOP/s measured in the
same run (roofline ratio), training-step memory (CUDA: peak allocated; CPU: bytes of tensors autograd saves +
parameters, gradients and optimiser state), and a distillation step (teacher forward + student step) vs a scratch
step.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Any, Callable, Dict, List

import timm
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from .model import ODEViT
from .objectives import distill, ode_scratch
from .pipeline import write_json
from .report import write_text
from .schedule import checkpoint_indices
from .teacher import student_from_teacher

CONFIGS = {  # name: (img, patch, in_chans, D, heads, mlp_ratio, N, batch on CPU, batch on CUDA)
    "default (28/7, D128, r1, N12)": (28, 7, 1, 128, 4, 1.0, 12, 128, 256),
    "paper Small (224/16, D768, r1, N35)": (224, 16, 3, 768, 12, 1.0, 35, 2, 64),
    "paper Base (224/16, D768, r4, N35)": (224, 16, 3, 768, 12, 4.0, 35, 2, 32),
}


def timed(fn: Callable[[], Any], reps: int, warmup: int, device: torch.device) -> Dict[str, float]:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts)}


def matmul_roof(device: torch.device, dtype: torch.dtype, n: int = 2048, reps: int = 5) -> float:
    """GFLOP/s of a large square matmul in `dtype` (the machine's roof for dense math)."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    t = timed(lambda: a @ b, reps, 2, device)
    return 2 * n ** 3 / t["median_s"] / 1e9


def flops(fn: Callable[[], Any]) -> float:
    with FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


def train_memory(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device, amp: bool) -> float:
    """MB used by one training step (see module docstring)."""
    opt = torch.optim.AdamW(model.parameters(), 1e-4)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    saved = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast(device.type, torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(x).float(), y)
    loss.backward()
    opt.step()
    if device.type == "cuda":
        return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return (saved[0] + 4 * params) / 2 ** 20  # saved activations + weights, grads, Adam m and v


def bench_pair(name: str, spec: tuple, device: torch.device, amp: bool, reps: int) -> List[Dict[str, Any]]:
    img, patch, C, D, H, r, N, b_cpu, b_gpu = spec
    B = b_gpu if device.type == "cuda" else b_cpu
    x = torch.randn(B, C, img, img, device=device)
    y = torch.randint(0, 10, (B,), device=device)
    ode = ODEViT(img_size=img, patch_size=patch, in_chans=C, num_classes=10, embed_dim=D, num_heads=H, mlp_ratio=r,
                 num_steps=N, horizon=12.0).to(device)
    vit = timm.create_model("vit_base_patch16_224", img_size=img, patch_size=patch, in_chans=C, num_classes=10,
                            embed_dim=D, depth=N, num_heads=H, mlp_ratio=r).to(device)
    rows = []
    for label, model in (("ODE-ViT", ode), ("timm ViT (depth = N)", vit)):
        opt = torch.optim.AdamW(model.parameters(), 1e-4)

        def step() -> None:
            with torch.autocast(device.type, torch.bfloat16, enabled=amp):
                loss = F.cross_entropy(model(x).float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        def infer() -> None:
            with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, enabled=amp):
                model(x)

        model.train()
        t_train = timed(step, reps, 1, device)
        model.eval()
        t_inf = timed(infer, reps, 1, device)
        model.train()
        f_train = flops(lambda: F.cross_entropy(model(x[:1]).float(), y[:1]).backward())
        rows.append({
            "config": name, "model": label, "dtype": "bf16" if amp else "fp32", "batch": B,
            "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
            "train_img_s": B / t_train["median_s"], "train_img_s_min": B / t_train["max_s"],
            "train_img_s_max": B / t_train["min_s"], "infer_img_s": B / t_inf["median_s"],
            "infer_img_s_min": B / t_inf["max_s"], "infer_img_s_max": B / t_inf["min_s"],
            "train_gflop_per_img": f_train / 1e9, "achieved_gflop_s": f_train * B / t_train["median_s"] / 1e9,
            "train_mem_mb": train_memory(model, x, y, device, amp),
        })
    return rows


def bench_distill(spec: tuple, device: torch.device, reps: int) -> Dict[str, Any]:
    """Distillation step (teacher forward + student step) vs a scratch step, same student."""
    img, patch, C, D, H, r, N, B, _ = spec
    teacher = timm.create_model("vit_base_patch16_224", img_size=img, patch_size=patch, in_chans=C, num_classes=10,
                                embed_dim=D, depth=6, num_heads=H).to(device).eval()
    student = student_from_teacher(teacher, num_steps=N, mlp_ratio=r).to(device)
    c = checkpoint_indices([1.0] * 6, N, mode="uniform")
    x = torch.randn(B, C, img, img, device=device)
    y = torch.randint(0, 10, (B,), device=device)
    opt = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], 1e-4)
    out = {}
    for label, obj in (("scratch", ode_scratch(0.1, 1.0, 2)), ("distill", distill(teacher, c, ce_weight=1.0))):
        def step(obj=obj) -> None:
            loss, _ = obj(student, x, y, 0)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        out[label] = timed(step, reps, 1, device)
    out["distill_over_scratch"] = out["distill"]["median_s"] / out["scratch"]["median_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="default config only")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default="results/bench")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    roof = {"fp32": matmul_roof(device, torch.float32), "bf16": matmul_roof(device, torch.bfloat16)}
    rows: List[Dict[str, Any]] = []
    for name, spec in CONFIGS.items():
        if args.quick and not name.startswith("default"):
            continue
        reps = args.reps if name.startswith("default") or device.type == "cuda" else 3
        for amp in (False, True):
            for r in bench_pair(name, spec, device, amp, reps):
                r["roof_ratio"] = r["achieved_gflop_s"] / roof[r["dtype"]]
                rows.append(r)
                print(f"{r['config']:38s} {r['model']:22s} {r['dtype']}  train {r['train_img_s']:8.1f} img/s  "
                      f"infer {r['infer_img_s']:8.1f} img/s  roof {r['roof_ratio']:.2f}  mem {r['train_mem_mb']:.0f} MB",
                      flush=True)
    dist = bench_distill(CONFIGS["default (28/7, D128, r1, N12)"], device, args.reps)
    print(f"distillation step / scratch step: {dist['distill_over_scratch']:.2f}", flush=True)
    meta = {"device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
            "threads": torch.get_num_threads(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
            "matmul_roof_gflop_s": roof}
    write_json({"meta": meta, "rows": rows, "distill": dist}, os.path.join(args.out, "bench.json"))
    write_text(to_markdown(meta, rows, dist), os.path.join(args.out, "bench.md"))


def to_markdown(meta: Dict[str, Any], rows: List[Dict[str, Any]], dist: Dict[str, Any]) -> str:
    lines = [f"Machine: {meta['device']}, {meta['threads']} threads, torch {meta['torch']}, {meta['date']}; "
             f"large-matmul roof {meta['matmul_roof_gflop_s']['fp32']:.0f} GFLOP/s fp32, "
             f"{meta['matmul_roof_gflop_s']['bf16']:.0f} GFLOP/s bf16.", "",
             "| config | model | dtype | batch | params (M) | train img/s (min–max) | infer img/s | GFLOP/img (train) "
             "| roof ratio | train mem (MB) | ODE/ViT train |", "|" + "---|" * 11]
    by = {(r["config"], r["dtype"], r["model"]): r for r in rows}
    for r in rows:
        other = by.get((r["config"], r["dtype"], "timm ViT (depth = N)"))
        ratio = f"{r['train_img_s'] / other['train_img_s']:.2f}" if r["model"] == "ODE-ViT" and other else ""
        lines.append(f"| {r['config']} | {r['model']} | {r['dtype']} | {r['batch']} | {r['params_m']:.2f} | "
                     f"{r['train_img_s']:.1f} ({r['train_img_s_min']:.1f}–{r['train_img_s_max']:.1f}) | "
                     f"{r['infer_img_s']:.1f} | {r['train_gflop_per_img']:.2f} | {r['roof_ratio']:.2f} | "
                     f"{r['train_mem_mb']:.0f} | {ratio} |")
    lines += ["", f"Distillation step (teacher forward + student step) / scratch step, default config: "
                  f"{dist['distill_over_scratch']:.2f}"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
