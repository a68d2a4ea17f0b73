"""Data-parallel training under torchrun: one process per device, gloo on CPU, nccl on CUDA.

    torchrun --nproc_per_node=2 -m odevit.repro.run 02_teacher

Results semantics: `base.batch_size` stays the *global* batch. Every process draws the same shuffled order from
`seed + epoch`, takes its 1/world slice of each global batch (`Loader`), and DistributedDataParallel averages the
gradients, so one optimiser step sees the same samples and the same mean loss as the single-process step (up to
the order of floating-point sums). Evaluation splits the test set and sums the hits; only rank 0 writes files.
"""
from __future__ import annotations

import datetime
import os
from typing import Any, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn
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
