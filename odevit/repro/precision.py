"""Process-wide numeric precision policy (fp32 / bf16 autocast), shared by training, evaluation and
the teacher caches; its own module so that objectives need not import train.
"""
from __future__ import annotations

import torch


PRECISION = "auto"  # process-wide, like torch.set_float32_matmul_precision; set by set_precision / pipeline.setup


def set_precision(name: str) -> None:
    """'auto' = bf16 autocast on CUDA and fp32 on CPU (on the 2-core CPUs we measured, bf16 trained 3-5x slower
    with native bf16 and its matmuls ran ~100x slower without: `python -m odevit.repro.bench`), 'fp32' everywhere, or
    'bf16' autocast everywhere."""
    global PRECISION
    if name not in ("auto", "fp32", "bf16"):
        raise ValueError(f"precision: '{name}' is not one of ['auto', 'fp32', 'bf16']")
    PRECISION = name


def autocast(device: torch.device):
    """The autocast context of the current precision policy (training, evaluation, teacher caches)."""
    bf16 = PRECISION == "bf16" or (PRECISION == "auto" and device.type == "cuda")
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)
