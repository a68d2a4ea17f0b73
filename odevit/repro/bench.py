"""Side-by-side benchmark: ODE-ViT vs timm's VisionTransformer of equal FLOPs (depth = N), on this machine.

    python -m odevit.repro.bench                 # writes results/bench/bench.json and bench.md
    python -m odevit.repro.bench --quick         # default config only
    python -m odevit.repro.bench --jasmin "paper Small (224/16, D768, r1, N35)"   # its JaSMin step, compiled or not

Per config and dtype (fp32; bf16 autocast where this device's bf16 matmuls are native): training step (forward +
backward + AdamW) and inference images/s as the median of timed repetitions after warm-up (with min and max), FLOPs per image counted by
torch.utils.flop_counter.FlopCounterMode, achieved GFLOP/s over this machine's large-matmul GFLOP/s measured in the
same run (roofline ratio), training-step memory (CUDA: peak allocated; CPU: bytes of tensors autograd saves +
parameters, gradients and optimiser state). At the default config also: the ODE-ViT step with each speed-up
switched on in turn and at half/double batch, the profiler's split of step time into matmul / attention / other
(what bounds the roofline ratio), both models eager and under torch.compile (`--no-compile` skips it), and a distillation step (teacher per batch, or its cached CLS states) vs a
scratch step of the same student. Budget: <= 5 minutes on 2 CPU cores (paper shapes at batch 1 and 3 repetitions
there).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import platform
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import timm
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from .config import Distill, Scratch
from .machine import machine_info
from ..model import ODEViT
from .objectives import distill, ode_scratch
from .pipeline import write_json
from .files import write_text
from .results import VIT, activation_markdown, bf16_skipped  # noqa: F401  (bench.VIT: the tests' name)
from ..schedule import checkpoint_indices
from ..teacher import hidden_states, student_from_teacher

# the loss configs the benchmarks time: CE (no label smoothing) + JaSMin; the distillation's MSE + JaSMin + CE
JASMIN_ONLY = Scratch(label_smoothing=0.0, jasmin_weight=1.0, jasmin_k=2)
MSE_JASMIN_CE = Distill(ce_weight=1.0, label_smoothing=0.0)

CONFIGS = {  # name: (img, patch, in_chans, D, heads, mlp_ratio, N, batch on CPU, batch on CUDA)
    "default (28/7, D128, r1, N12)": (28, 7, 1, 128, 4, 1.0, 12, 128, 256),
    "paper Small (224/16, D768, r1, N35)": (224, 16, 3, 768, 12, 1.0, 35, 1, 64),
    "paper Base (224/16, D768, r4, N35)": (224, 16, 3, 768, 12, 4.0, 35, 1, 32),
}
DEFAULT = "default (28/7, D128, r1, N12)"
def _clock(fn: Callable[[], Any], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t


def summary(ts: List[float]) -> Dict[str, float]:
    return {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts)}


def timed(fn: Callable[[], Any], reps: int, warmup: int, device: torch.device) -> Dict[str, float]:
    for _ in range(warmup):
        fn()
    return summary([_clock(fn, device) for _ in range(reps)])


def timed_together(fns: Dict[str, Callable[[], Any]], reps: int, warmup: int,
                   device: torch.device) -> Dict[str, Dict[str, float]]:
    """Time several functions round-robin (a, b, a, b, ...): what is compared shares the machine's slow and fast
    moments, so the ratios are steadier than the absolute figures on a shared VM."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    ts: Dict[str, List[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            ts[k].append(_clock(fn, device))
    return {k: summary(v) for k, v in ts.items()}


def matmul_roof(device: torch.device, dtype: torch.dtype, n: int = 2048, reps: int = 10) -> float:
    """GFLOP/s of a square n x n matmul in `dtype` (the machine's roof for dense math): the best of `reps` timed
    repetitions, since a VM pause can only slow a repetition down, never speed it up."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    t = timed(lambda: a @ b, reps, 2, device)
    return 2 * n ** 3 / t["min_s"] / 1e9


DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
NATIVE_BF16 = 0.1  # bf16 counts as native where its matmul runs at >= this fraction of the fp32 matmul's GFLOP/s


def native_bf16(device: torch.device) -> Tuple[bool, Dict[str, float]]:
    """(native, probe): whether this device has fast bf16 matmuls, from a 256 x 256 matmul in each dtype (a second
    even where bf16 is emulated: CPUs without AVX512-BF16/AMX run it ~100x slower than fp32, CUDA GPUs natively)."""
    probe = {d: matmul_roof(device, dt, 256) for d, dt in DTYPES.items()}
    return probe["bf16"] >= NATIVE_BF16 * probe["fp32"], probe


def flops(fn: Callable[[], Any]) -> float:
    with FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


def batch_size(spec: tuple, device: torch.device) -> int:
    return spec[8] if device.type == "cuda" else spec[7]


def batch(spec: tuple, device: torch.device, size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Random images and labels of a config: `size` or the config's batch for this device."""
    B = size or batch_size(spec, device)
    return torch.randn(B, spec[2], spec[0], spec[0], device=device), torch.randint(0, 10, (B,), device=device)


def make_pair(spec: tuple, device: torch.device) -> Dict[str, nn.Module]:
    """ODE-ViT and timm's VisionTransformer with the same D, heads, mlp ratio, tokens and depth = N."""
    img, patch, C, D, H, r, N = spec[:7]
    ode = ODEViT(img_size=img, patch_size=patch, in_chans=C, num_classes=10, embed_dim=D, num_heads=H, mlp_ratio=r,
                 num_steps=N, horizon=12.0)
    vit = timm.create_model("vit_base_patch16_224", img_size=img, patch_size=patch, in_chans=C, num_classes=10,
                            embed_dim=D, depth=N, num_heads=H, mlp_ratio=r)
    return {"ODE-ViT": ode.to(device), VIT: vit.to(device)}


def train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device,
               amp: bool) -> Tuple[Callable[[], None], Callable[[], float]]:
    """(step, memory_step): a training step (forward + backward + AdamW) and one that also returns its memory in
    MB (CUDA: peak allocated; CPU: bytes autograd saves for backward + parameters, gradients and Adam state)."""
    opt = torch.optim.AdamW(model.parameters(), 1e-4)

    def step() -> None:
        with torch.autocast(device.type, torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def memory_step() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            step()
            return (torch.cuda.max_memory_allocated() - base) / 2 ** 20
        saved = [0]

        def pack(t: torch.Tensor) -> torch.Tensor:
            saved[0] += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            step()
        params = sum(p.numel() * p.element_size() for p in model.parameters())
        return (saved[0] + 4 * params) / 2 ** 20  # saved activations + weights, grads, Adam m and v

    return step, memory_step


def bench_pair(name: str, spec: tuple, device: torch.device, amps: Sequence[bool], reps: int) -> List[Dict[str, Any]]:
    """Both models of one config in each dtype, timed round-robin; FLOPs per image counted once per model."""
    x, y = batch(spec, device)
    B = len(x)
    models = make_pair(spec, device)
    fl = {}
    for label, model in models.items():
        fl[label] = flops(lambda: F.cross_entropy(model(x[:1]).float(), y[:1]).backward())
        model.zero_grad(set_to_none=True)
    rows = []
    for amp in amps:
        steps, mem = {}, {}
        for label, model in models.items():
            steps[label], memory_step = train_step(model, x, y, device, amp)
            model.train()
            mem[label] = memory_step()  # also the warm-up step
        t_train = timed_together(steps, reps, 0, device)

        def infer(model: nn.Module) -> Callable[[], None]:
            def run() -> None:
                with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, enabled=amp):
                    model(x)
            return run

        for model in models.values():
            model.eval()
        t_inf = timed_together({k: infer(m) for k, m in models.items()}, reps, 1, device)
        for label, model in models.items():
            model.train()
            tt, ti = t_train[label], t_inf[label]
            rows.append({
                "config": name, "model": label, "dtype": "bf16" if amp else "fp32", "batch": B,
                "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
                "train_img_s": B / tt["median_s"], "train_img_s_min": B / tt["max_s"], "train_img_s_max": B / tt["min_s"],
                "infer_img_s": B / ti["median_s"], "infer_img_s_min": B / ti["max_s"], "infer_img_s_max": B / ti["min_s"],
                "train_gflop_per_img": fl[label] / 1e9, "achieved_gflop_s": fl[label] * B / tt["median_s"] / 1e9,
                "train_mem_mb": mem[label],
            })
    return rows


def speedups(spec: tuple, device: torch.device, reps: int) -> List[Dict[str, Any]]:
    """ODE-ViT fp32 training step at the default config with each speed-up switched on in turn, and by batch
    (separate copies of one initialisation, timed round-robin)."""
    B0 = batch_size(spec, device)
    ode = make_pair(spec, device)["ODE-ViT"]
    variants = {"explicit softmax attention, CenterNorm every step": (False, False, B0),
                "+ fused attention (SDPA)": (True, False, B0),
                "+ CenterNorm folded into Q/K/V and fc1 (default)": (True, True, B0),
                "default, batch / 2": (True, True, B0 // 2),
                "default, batch x 2": (True, True, B0 * 2)}
    steps = {}
    for label, (fused, fold, B) in variants.items():
        m = copy.deepcopy(ode)
        m.field.attn.fused, m.field.fold = fused, fold
        steps[label] = train_step(m, *batch(spec, device, B), device, False)[0]
    t = timed_together(steps, reps, 1, device)
    return [{"variant": k, "batch": B, "train_img_s": B / t[k]["median_s"], "train_img_s_min": B / t[k]["max_s"],
             "train_img_s_max": B / t[k]["min_s"]} for k, (_, _, B) in variants.items()]


def compiled(spec: tuple, device: torch.device, reps: int) -> Dict[str, Any]:
    """Both models' fp32 training steps at the default config, eager and under `torch.compile` (inductor, default
    mode), four copies of one initialisation timed round-robin; the seconds each compiled model's first two steps
    took (tracing and code generation). A machine where inductor cannot build (no C++ compiler, say) records why."""
    x, y = batch(spec, device)
    models = make_pair(spec, device)
    steps, compile_s = {}, {}
    try:
        for label, model in models.items():
            steps[label] = train_step(model, x, y, device, False)[0]
            c = torch.compile(copy.deepcopy(model))
            steps[label + ", torch.compile"] = step = train_step(c, x, y, device, False)[0]
            t = time.perf_counter()
            step(), step()
            compile_s[label] = time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - the reason is the result: reported, nothing else depends on it
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    t = timed_together(steps, reps, 1, device)
    B = len(x)
    return {"batch": B, "compile_s": compile_s,
            "rows": [{"variant": k, "train_img_s": B / v["median_s"], "train_img_s_min": B / v["max_s"],
                      "train_img_s_max": B / v["min_s"]} for k, v in t.items()]}


MODES = ("eager", "default", "max-autotune-no-cudagraphs", "reduce-overhead")  # torch.compile modes; eager: none


def jasmin_step(spec: tuple, device: torch.device, reps: int, amp: bool,
                modes: Sequence[str] = MODES) -> Dict[str, Any]:
    """An ODE-ViT training step with the loss terms of a study's scratch run (CE + JaSMin on every step's attention
    map, so the explicit-softmax attention path: `ode_scratch` of JASMIN_ONLY, no label smoothing; forward + backward +
    AdamW), at `spec`'s shape and batch, bf16 autocast when `amp`: eager, and the loss under `torch.compile` in each
    mode (`reduce-overhead`: CUDA graphs), each a copy of one initialisation, timed round-robin. Per variant images/s
    and GFLOP/s (FLOPs of the eager step counted at batch 1) and the seconds of its first two steps (tracing and code
    generation; inductor's on-disk caches can shorten a later mode's). A mode that fails here records why, and the
    others are timed."""
    x, y = batch(spec, device)
    base = make_pair(spec, device)["ODE-ViT"].train()
    obj = ode_scratch(JASMIN_ONLY)
    fl = flops(lambda: obj(base, x[:1], y[:1], 0)[0].backward())
    base.zero_grad(set_to_none=True)
    steps: Dict[str, Callable[[], None]] = {}
    first_s: Dict[str, float] = {}
    errors: Dict[str, str] = {}
    for mode in modes:
        model = copy.deepcopy(base)
        opt = torch.optim.AdamW(model.parameters(), 1e-4)

        def loss_fn(xb: torch.Tensor, yb: torch.Tensor, model: nn.Module = model) -> torch.Tensor:
            with torch.autocast(device.type, torch.bfloat16, enabled=amp):
                return obj(model, xb, yb, 0)[0]

        try:
            fn = loss_fn if mode == "eager" else torch.compile(loss_fn, mode=None if mode == "default" else mode)

            def step(fn: Callable = fn, opt: torch.optim.Optimizer = opt) -> None:
                loss = fn(x, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()

            first_s[mode] = _clock(lambda: (step(), step()), device)
        except Exception as e:  # noqa: BLE001 - the reason is the result: reported, the other modes still timed
            errors[mode] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            continue
        steps[mode] = step
    t = timed_together(steps, reps, 1, device) if steps else {}
    B = len(x)
    return {"batch": B, "dtype": "bf16" if amp else "fp32", "gflop_per_img": fl / 1e9, "first_two_steps_s": first_s,
            "errors": errors,
            "rows": [{"mode": k, "train_img_s": B / v["median_s"], "train_img_s_min": B / v["max_s"],
                      "train_img_s_max": B / v["min_s"], "achieved_gflop_s": fl * B / v["median_s"] / 1e9}
                     for k, v in t.items()]}


def jasmin_markdown(result: Dict[str, Any]) -> str:
    """The `--jasmin` table: each variant's images/s, GFLOP/s and its share of the same run's matmul roof."""
    meta, j = result["meta"], result["jasmin"]
    roof = meta["matmul_roof_gflop_s"][j["dtype"]]
    eager = next((r["train_img_s"] for r in j["rows"] if r["mode"] == "eager"), float("nan"))
    lines = [f"ODE-ViT training step with JaSMin (CE + JaSMin on every step's attention map: the loss terms of a "
             f"study's scratch run), {result['config']}, {j['dtype']}, batch {j['batch']}, {j['gflop_per_img']:.1f} GFLOP per "
             f"image. Machine: {meta['device']}, {meta['threads']} threads, torch {meta['torch']}, {meta['date']}; "
             f"large-matmul roof {roof:.0f} GFLOP/s {j['dtype']} (best of the run's two measurements); whole run "
             f"{meta['wall_s']:.0f} s.", "",
             "| torch.compile mode | train img/s (min–max) | / eager | GFLOP/s | roof ratio | first two steps (s) |",
             "|---|---|---|---|---|---|"]
    for r in j["rows"]:
        lines.append(f"| {r['mode']} | {_rate(r['train_img_s'])} ({_rate(r['train_img_s_min'])}–"
                     f"{_rate(r['train_img_s_max'])}) | {r['train_img_s'] / eager:.2f} | {r['achieved_gflop_s']:.0f} | "
                     f"{r['achieved_gflop_s'] / roof:.2f} | {j['first_two_steps_s'][r['mode']]:.1f} |")
    failed = {m: e.replace("|", "\\|") for m, e in j["errors"].items()}  # a | of the message would split the cell
    lines += [f"| {m} | failed: {e} | | | | |" for m, e in failed.items()]
    return "\n".join(lines)


def activation_memory(device: torch.device) -> List[Dict[str, Any]]:
    """Bytes autograd saves per image in one training forward (CE + JaSMin maps, as ode_scratch trains), at every
    config, with and without gradient checkpointing of the solver steps (`set_grad_checkpointing`); measured at
    batch 1 with `odevit.repro.memory.saved_bytes` (device-independent: the same tensors are saved on CPU and GPU)."""
    from .memory import saved_bytes
    from .objectives import ode_scratch

    out = []
    for name, spec in CONFIGS.items():
        m = make_pair(spec, device)["ODE-ViT"].train()
        x, y = batch(spec, device, 1)
        row: Dict[str, Any] = {"config": name}
        for ckpt in (False, True):
            m.set_grad_checkpointing(ckpt)
            for jasmin in (0.0, 1.0):
                obj = ode_scratch(dataclasses.replace(JASMIN_ONLY, jasmin_weight=jasmin))
                row[f"mib_{'ckpt' if ckpt else 'full'}{'_jasmin' if jasmin else ''}"] = \
                    saved_bytes(lambda: obj(m, x, y, 0)[0], m) / 2 ** 20
        out.append(row)
        print(f"{name:38s} activations/img: {row['mib_full']:.1f} MiB -> {row['mib_ckpt']:.1f} MiB checkpointed "
              f"(with JaSMin maps: {row['mib_full_jasmin']:.1f} -> {row['mib_ckpt_jasmin']:.1f})", flush=True)
    return out


def time_shares(spec: tuple, device: torch.device) -> Dict[str, Dict[str, float]]:
    """Share of a default-config fp32 training step's operator time in matmuls, attention kernels and the rest
    (torch.profiler, 2 steps): what bounds the roofline ratio at this size."""
    from torch.profiler import ProfilerActivity, profile

    x, y = batch(spec, device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    out = {}
    for label, model in make_pair(spec, device).items():
        step = train_step(model, x, y, device, False)[0]
        step()
        with profile(activities=acts, with_flops=True) as prof:
            for _ in range(2):
                step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        share = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
        mm_flops = 0
        for e in prof.key_averages():
            t = e.self_device_time_total if device.type == "cuda" else e.self_cpu_time_total
            kind = ("matmul" if e.key in ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
                    else "attention" if "scaled_dot_product" in e.key else "other")
            share[kind] += t
            mm_flops += e.flops if kind == "matmul" else 0
        total = sum(share.values())
        out[label] = {k: v / total for k, v in share.items()}
        out[label]["matmul_gflop_s"] = mm_flops / max(share["matmul"], 1e-9) / 1e3  # flops per microsecond / 1e3
    return out


def bench_distill(spec: tuple, device: torch.device, reps: int) -> Dict[str, Any]:
    """Student step under the scratch objective (CE + JaSMin) vs distillation (MSE + JaSMin + CE) with the teacher
    run per batch, and with its CLS states read from the once-per-dataset cache (the pipeline's default)."""
    img, patch, C, D, H, r, N = spec[:7]
    teacher = timm.create_model("vit_base_patch16_224", img_size=img, patch_size=patch, in_chans=C, num_classes=10,
                                embed_dim=D, depth=6, num_heads=H).to(device).eval()
    student = student_from_teacher(teacher, num_steps=N, mlp_ratio=r).to(device)
    c = checkpoint_indices([1.0] * 6, N, mode="uniform")
    x, y = batch(spec, device)
    idx = torch.arange(len(x))
    with torch.no_grad():
        cache = torch.stack([s[:, 0] for s in hidden_states(teacher, x)[1:]], 1).float().cpu()  # (B, L, D)
    opt = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], 1e-4)

    def step(obj: Callable) -> Callable[[], None]:
        def run() -> None:
            loss, _ = obj(student, x, y, 0, idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return run

    out: Dict[str, Any] = timed_together({
        "scratch": step(ode_scratch(Scratch(label_smoothing=0.1, jasmin_weight=1.0, jasmin_k=2))),
        "distill": step(distill(teacher, c, MSE_JASMIN_CE)),
        "distill_cached": step(distill(teacher, c, MSE_JASMIN_CE, cache=cache))}, reps, 1, device)
    out["distill_over_scratch"] = out["distill"]["median_s"] / out["scratch"]["median_s"]
    out["distill_cached_over_scratch"] = out["distill_cached"]["median_s"] / out["scratch"]["median_s"]
    return out


def run_meta(device: torch.device, t0: float, **measured: Any) -> Dict[str, Any]:
    """A bench run's first line: the device, threads, torch and date, what the run `measured` about the machine (its
    roof), the run's wall seconds since `t0` and the machine record."""
    return {"device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
            "threads": torch.get_num_threads(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
            **measured, "wall_s": time.perf_counter() - t0, "machine_info": machine_info()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="default config only")
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions (CPU paper shapes: 3)")
    ap.add_argument("--dtypes", default="auto", choices=("auto", "fp32", "fp32,bf16"),
                    help="fp32,bf16 | fp32 | auto (default: bf16 rows only where bf16 matmuls are native)")
    ap.add_argument("--out", default="results/bench")
    ap.add_argument("--no-compile", dest="compile", action="store_false",
                    help="skip the torch.compile comparison (its compilation takes about 80 s on 2 CPU cores)")
    ap.add_argument("--jasmin", metavar="CONFIG", choices=list(CONFIGS),
                    help="only the training step with JaSMin at CONFIG, eager and under torch.compile's modes, against "
                         "the roof, in bf16 where this device's bf16 is native, else fp32 (--dtypes does not apply): "
                         "jasmin.json / .md")
    ap.add_argument("--modes", default=",".join(MODES), help=f"with --jasmin: of {', '.join(MODES)}")
    ap.add_argument("--activation-only", action="store_true",
                    help="only the activation-memory table (seconds): activation_memory.json / .md")
    args = ap.parse_args()
    t0 = time.perf_counter()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.activation_only:
        acts = activation_memory(device)
        write_json({"date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "activation_memory": acts,
                    "machine_info": machine_info()},
                   os.path.join(args.out, "activation_memory.json"))
        write_text(activation_markdown(acts), os.path.join(args.out, "activation_memory.md"))
        return
    torch.manual_seed(0)
    if args.jasmin:
        modes = args.modes.split(",")
        bad = [m for m in modes if m not in MODES]
        if bad:
            raise SystemExit(f"--modes: {bad} not among {list(MODES)}")
        native = native_bf16(device)[0]
        dtype = "bf16" if native else "fp32"
        roof = matmul_roof(device, DTYPES[dtype])
        j = jasmin_step(CONFIGS[args.jasmin], device, args.reps, native, modes)
        roof = max(roof, matmul_roof(device, DTYPES[dtype]))  # its best, as the main run's ratios
        for r in j["rows"]:
            print(f"{r['mode']:28s} train {r['train_img_s']:9.1f} img/s  roof {r['achieved_gflop_s'] / roof:.2f}", flush=True)
        for m, e in j["errors"].items():
            print(f"{m:28s} failed: {e}", flush=True)
        meta = run_meta(device, t0, matmul_roof_gflop_s={dtype: roof})
        result = {"meta": meta, "config": args.jasmin, "jasmin": j}
        write_json(result, os.path.join(args.out, "jasmin.json"))
        write_text(jasmin_markdown(result), os.path.join(args.out, "jasmin.md"))
        print(f"wrote {args.out}/jasmin.json and jasmin.md ({meta['wall_s']:.0f} s)", flush=True)
        return
    native, probe = native_bf16(device)
    dtypes = args.dtypes.split(",") if args.dtypes != "auto" else ["fp32"] + (["bf16"] if native else [])
    if "bf16" not in dtypes:
        print(bf16_skipped(probe, native).replace("`", ""), flush=True)
    roof = {d: matmul_roof(device, DTYPES[d]) for d in dtypes}
    rows: List[Dict[str, Any]] = []
    for name, spec in CONFIGS.items():
        if args.quick and name != DEFAULT:
            continue
        reps = args.reps if name == DEFAULT or device.type == "cuda" else 3
        for r in bench_pair(name, spec, device, [d == "bf16" for d in dtypes], reps):
            rows.append(r)  # roof_ratio is set at the end, against the best roof of the run
            print(f"{r['config']:38s} {r['model']:22s} {r['dtype']}  train {r['train_img_s']:8.1f} img/s  "
                  f"infer {r['infer_img_s']:8.1f} img/s  roof {r['achieved_gflop_s'] / roof[r['dtype']]:.2f}  "
                  f"mem {r['train_mem_mb']:.0f} MB",
                  flush=True)
    acts = activation_memory(device)
    spec = CONFIGS[DEFAULT]
    ups = speedups(spec, device, args.reps)
    comp = compiled(spec, device, args.reps) if args.compile else None
    shares = time_shares(spec, device)
    dist = bench_distill(spec, device, args.reps)
    print(f"distillation step / scratch step: {dist['distill_over_scratch']:.2f} (teacher per batch), "
          f"{dist['distill_cached_over_scratch']:.2f} (cached teacher states)", flush=True)
    # the roof again at the end, its best kept: a slow moment of the VM at either end must not inflate the ratios
    roof = {d: max(v, matmul_roof(device, DTYPES[d])) for d, v in roof.items()}
    for r in rows:
        r["roof_ratio"] = r["achieved_gflop_s"] / roof[r["dtype"]]
    for v in shares.values():
        v["matmul_roof_ratio"] = v["matmul_gflop_s"] / roof["fp32"]
    meta = run_meta(device, t0, matmul_roof_gflop_s=roof, bf16_probe_gflop_s=probe, bf16_native=native)
    result = {"meta": meta, "rows": rows, "speedups": ups, "compiled": comp, "time_shares": shares, "distill": dist,
              "activation_memory": acts}
    write_json(result, os.path.join(args.out, "bench.json"))
    write_text(to_markdown(result), os.path.join(args.out, "bench.md"))
    print(f"wrote {args.out}/bench.json and bench.md ({meta['wall_s']:.0f} s)", flush=True)


def _rate(x: float) -> str:
    """img/s with 3 significant digits at least (0.237, 389.4): paper-shape rows on a CPU are below 1 img/s."""
    return f"{x:.1f}" if x >= 100 else f"{x:.3g}"


def to_markdown(result: Dict[str, Any]) -> str:
    meta, rows, dist = result["meta"], result["rows"], result["distill"]
    lines = [f"Machine: {meta['device']}, {meta['threads']} threads, torch {meta['torch']}, {meta['date']}; "
             f"large-matmul roof {meta['matmul_roof_gflop_s']['fp32']:.0f} GFLOP/s fp32, "
             + (f"{meta['matmul_roof_gflop_s']['bf16']:.0f} GFLOP/s bf16" if "bf16" in meta["matmul_roof_gflop_s"]
                else bf16_skipped(meta["bf16_probe_gflop_s"], meta["bf16_native"])) + f"; whole run {meta['wall_s']:.0f} s.", "",
             "| config | model | dtype | batch | params (M) | train img/s (min–max) | infer img/s | GFLOP/img (train) "
             "| roof ratio | train mem (MB) | ODE/ViT train |", "|" + "---|" * 11]
    by = {(r["config"], r["dtype"], r["model"]): r for r in rows}
    for r in rows:
        other = by.get((r["config"], r["dtype"], VIT))
        ratio = f"{r['train_img_s'] / other['train_img_s']:.2f}" if r["model"] == "ODE-ViT" and other else ""
        lines.append(f"| {r['config']} | {r['model']} | {r['dtype']} | {r['batch']} | {r['params_m']:.2f} | "
                     f"{_rate(r['train_img_s'])} ({_rate(r['train_img_s_min'])}–{_rate(r['train_img_s_max'])}) | "
                     f"{_rate(r['infer_img_s'])} | {r['train_gflop_per_img']:.2f} | {r['roof_ratio']:.2f} | "
                     f"{r['train_mem_mb']:.0f} | {ratio} |")
    if result.get("speedups"):
        lines += ["", "ODE-ViT training step, default config, fp32:", "",
                  "| variant | batch | train img/s (min–max) |", "|---|---|---|"]
        lines += [f"| {u['variant']} | {u['batch']} | {u['train_img_s']:.1f} ({u['train_img_s_min']:.1f}–"
                  f"{u['train_img_s_max']:.1f}) |" for u in result["speedups"]]
    comp = result.get("compiled")
    if comp and "error" in comp:
        lines += ["", f"torch.compile could not run here: {comp['error']}"]
    elif comp:
        eager = {r["variant"]: r["train_img_s"] for r in comp["rows"]}
        lines += ["", "Eager vs `torch.compile` (inductor, default mode), default config, fp32, timed together "
                  "(first two compiled steps, tracing and code generation: "
                  + ", ".join(f"{k} {v:.0f} s" for k, v in comp["compile_s"].items()) + "):", "",
                  "| model | batch | train img/s (min–max) | compiled / eager | ÷ timm ViT eager |", "|---|---|---|---|---|"]
        for r in comp["rows"]:
            base = r["variant"].split(", torch.compile")[0]
            lines.append(f"| {r['variant']} | {comp['batch']} | {r['train_img_s']:.1f} ({r['train_img_s_min']:.1f}–"
                         f"{r['train_img_s_max']:.1f}) | {r['train_img_s'] / eager[base]:.2f} | "
                         f"{r['train_img_s'] / eager[VIT]:.2f} |")
    if result.get("time_shares"):
        lines += ["", "Where a default-config fp32 training step spends its operator time (torch.profiler):", "",
                  "| model | matmul | attention kernel | other (norms, GELU, adds, copies, optimiser) "
                  "| the matmuls alone: GFLOP/s (of the roof) |", "|---|---|---|---|---|"]
        lines += [f"| {k} | {v['matmul']:.0%} | {v['attention']:.0%} | {v['other']:.0%} | "
                  f"{v['matmul_gflop_s']:.0f} ({v.get('matmul_roof_ratio', float('nan')):.2f}) |"
                  for k, v in result["time_shares"].items()]
    if result.get("activation_memory"):
        lines += ["", activation_markdown(result["activation_memory"])]
    lines += ["", "Distillation step (MSE + JaSMin + CE) / scratch step (CE + JaSMin), same student, default config: "
                  f"{dist['distill_over_scratch']:.2f} with the teacher run per batch, "
                  f"{dist['distill_cached_over_scratch']:.2f} with its CLS states cached once per dataset (pipeline "
                  "default when augmentation is off)."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
