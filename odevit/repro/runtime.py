"""Where and how a run computes: its processes (data-parallel training under torchrun: one process per device, gloo
on CPU, nccl on CUDA), its numeric precision (fp32 / bf16 autocast, process-wide: objectives need not import train)
and its activation memory (the bytes autograd saves for backward at batch 1, measured before training, times the
batch, plus weights, gradients and AdamW's moments: a run that would not fit stops with the estimate instead of being
killed).

Under torchrun `base.batch_size` stays the *global* batch: every process draws the same shuffled order from
`seed + epoch`, takes its 1/world slice of each global batch (`data.Loader`), and DistributedDataParallel averages
the gradients, so one optimiser step sees the same samples and mean loss as the single-process step (up to the order
of floating-point sums). Evaluation splits the test set and sums the hits; only rank 0 writes files.
"""
from __future__ import annotations

import datetime
import os
from typing import Any, Callable, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.autograd.graph import saved_tensors_hooks
from torch.nn.parallel import DistributedDataParallel


def initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank_world() -> Tuple[int, int]:
    """(rank, world size) of this process; (0, 1) outside torchrun."""
    return (dist.get_rank(), dist.get_world_size()) if initialized() else (0, 1)


def is_main() -> bool:
    return rank_world()[0] == 0


def init(device: str = "auto") -> Tuple[int, int]:
    """Join the process group torchrun describes in the environment (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_*).

    No-op for a single process. CUDA: nccl, one GPU per local rank; CPU: gloo."""
    if initialized() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return rank_world()
    use_cuda = device != "cpu" and torch.cuda.is_available()
    if use_cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=datetime.timedelta(minutes=30))
    return rank_world()


def shutdown() -> None:
    if initialized():
        dist.barrier()
        dist.destroy_process_group()


def barrier() -> None:
    if initialized():
        dist.barrier()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """In-place sum over processes (identity for one process). CPU tensors go through gloo; on nccl, the device."""
    if initialized():
        if dist.get_backend() == "nccl" and t.device.type != "cuda":
            u = t.cuda()
            dist.all_reduce(u)
            t.copy_(u.cpu())
        else:
            dist.all_reduce(t)
    return t


class _Dispatch(nn.Module):
    """DDP calls `forward`; this forward calls any method of the wrapped model, so that objectives using
    `model.forward_trajectory(...)` still go through DDP (which readies the gradient all-reduce)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.model, method)(*args, **kwargs)


class Replica:
    """What an objective sees under torchrun: `replica(x)` and `replica.method(...)` run through
    DistributedDataParallel; other attributes are the model's own. DDP reduces the parameters that were trainable
    when it was built: `stale()` says the trainable set has changed since (then build a new Replica)."""

    def __init__(self, model: nn.Module, device: torch.device):
        self.model = model
        self.trainable = [id(p) for p in model.parameters() if p.requires_grad]
        ids = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else None
        self.ddp = DistributedDataParallel(_Dispatch(model), device_ids=ids, find_unused_parameters=True)

    def stale(self) -> bool:
        return self.trainable != [id(p) for p in self.model.parameters() if p.requires_grad]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.ddp("forward", *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.model, name)
        if callable(attr) and not isinstance(attr, nn.Module) and hasattr(type(self.model), name):
            return lambda *args, **kwargs: self.ddp(name, *args, **kwargs)
        return attr


PRECISION = "auto"  # process-wide, like torch.set_float32_matmul_precision; set by set_precision / pipeline.setup


def set_precision(name: str) -> None:
    """'auto' = bf16 autocast on CUDA and fp32 on CPU (on the 2-core CPUs we measured, bf16 trained 3-5x slower
    with native bf16 and its matmuls ran ~100x slower without: the retired benchmark, tag retired-plan1-quick-exploratory), 'fp32' everywhere, or
    'bf16' autocast everywhere."""
    global PRECISION
    if name not in ("auto", "fp32", "bf16"):
        raise ValueError(f"precision: '{name}' is not one of ['auto', 'fp32', 'bf16']")
    PRECISION = name


def autocast(device: torch.device):
    """The autocast context of the current precision policy (training, evaluation, teacher caches)."""
    bf16 = PRECISION == "bf16" or (PRECISION == "auto" and device.type == "cuda")
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)


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
