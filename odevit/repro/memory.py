"""Activation memory, measured rather than guessed: the bytes autograd saves for backward.

    per_sample = saved_bytes(lambda: objective(model, x[:1], y[:1], 0, idx[:1])[0])
    check_fits(...)   # before training: stop with the estimate instead of being killed by the OOM killer

The bytes saved for backward in one forward pass at batch 1, times the batch size, plus parameters, gradients and
AdamW's two moments, is what training holds at its peak (to within the allocator's slack and the transient
buffers of one kernel). `python -m odevit.repro.bench` reports it at the paper's shapes with and without gradient
checkpointing.
"""
from __future__ import annotations

import os
from typing import Callable, Optional

import torch
import torch.nn as nn
from torch.autograd.graph import saved_tensors_hooks


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def saved_bytes(fn: Callable[[], object], model: Optional[nn.Module] = None) -> int:
    """Bytes of the tensors autograd saves while `fn()` runs, each storage once; the parameters of `model` (saved by
    every linear map, but not per sample) are left out."""
    params = {_storage(p) for p in model.parameters()} if model is not None else set()
    seen = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage(t)
        if key not in params:
            seen[key] = max(seen.get(key, 0), t.untyped_storage().nbytes())
        return t

    with saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def available_bytes(device: torch.device) -> Optional[int]:
    """Free memory of the device: CUDA's free bytes, or the host's MemAvailable (None where unknown)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class MemoryEstimateError(MemoryError):
    """Training would not fit in the device's memory; the message gives the measured estimate."""


def check_fits(model: nn.Module, per_sample: int, batch: int, device: torch.device, what: str = "training",
               margin: float = 0.9) -> int:
    """Estimate = batch x per-sample activations + 4 x trainable parameter bytes (weights, grads, AdamW moments);
    raise MemoryEstimateError when it exceeds `margin` of the free memory. Returns the estimate in bytes."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    need = batch * per_sample + params + 3 * trainable
    free = available_bytes(device)
    if os.environ.get("ODEVIT_MEMORY_LIMIT"):  # tests, or a user sharing the machine: a tighter limit in bytes
        limit = int(float(os.environ["ODEVIT_MEMORY_LIMIT"]))
        free = limit if free is None else min(free, limit)
    if free is not None and need > margin * free:
        gib = 2 ** 30
        raise MemoryEstimateError(
            f"{what} needs about {need / gib:.1f} GiB on {device.type} ({per_sample / 2**20:.1f} MiB of activations "
            f"per sample x batch {batch} = {batch * per_sample / gib:.1f} GiB, + {(params + 3 * trainable) / gib:.2f} "
            f"GiB of weights, gradients and AdamW state) but {free / gib:.1f} GiB is free: lower base.batch_size, "
            "base.image_size or distill.num_steps, or use a larger device")
    return need
