"""Training loop shared by every stage: AdamW, warm-up + cosine (optionally with hard restarts), gradient clipping,
best-and-last checkpoints written atomically every epoch, one progress line per epoch, seeded and deterministic.

    objective = objectives.cross_entropy(label_smoothing=0.1)
    history = fit(model, train_loader, test_loader, objective, TrainConfig(epochs=3), out_dir="checkpoints/x")
"""
from __future__ import annotations

import math
import os
import random
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
from tqdm.auto import tqdm

from .losses import topk_correct

Objective = Callable[[nn.Module, torch.Tensor, torch.Tensor, int], Tuple[torch.Tensor, Dict[str, float]]]


@dataclass
class TrainConfig:
    epochs: int = 3
    lr: float = 1e-3
    weight_decay: float = 0.05
    warmup: float = 0.05  # fraction of all steps spent in linear warm-up
    cycles: int = 1  # cosine cycles; > 1 = hard restarts (the published schedule uses epochs // 100)
    clip: float = 1.0  # max gradient norm
    device: str = "auto"
    seed: int = 0


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise ValueError(f"device: '{name}' is not one of ['auto', 'cpu', 'cuda']")
    return torch.device(name)


def autocast(device: torch.device):
    """bf16 autocast on CUDA; fp32 on CPU (bf16 was slower on the 2-core CPU we measured)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def lr_factor(step: int, total: int, warmup_steps: int, cycles: int = 1) -> float:
    """Linear warm-up from 0, then cosine to 0, restarted `cycles` times (transformers' hard-restart schedule)."""
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    progress = (step - warmup_steps) / max(1, total - warmup_steps)
    if progress >= 1.0:
        return 0.0
    return 0.5 * (1.0 + math.cos(math.pi * ((cycles * progress) % 1.0)))


def in_notebook_run() -> bool:
    """True under papermill / nbclient (no TTY): print one line per epoch instead of a live bar."""
    return not sys.stderr.isatty()


@torch.no_grad()
def evaluate(
    model: nn.Module, loader: Iterable, device: torch.device, num_steps: Optional[int] = None,
    ks: Sequence[int] = (1, 3, 5),
) -> Dict[str, float]:
    """Top-k accuracy over a loader (sample-weighted, unlike the published per-batch mean)."""
    model.eval()
    hits, n = [0] * len(ks), 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with autocast(device):
            logits = model(x, num_steps=num_steps) if num_steps is not None else model(x)
        for i, h in enumerate(topk_correct(logits.float(), y, ks)):
            hits[i] += h
        n += len(y)
    return {f"acc{k}": h / n for k, h in zip(ks, hits)}


def save_atomic(obj: Any, path: str) -> None:
    """torch.save to a temporary file, then rename: a crash never leaves a truncated checkpoint."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load_weights(model: nn.Module, path: str) -> nn.Module:
    """Load a checkpoint written by `fit` (weights only, never pickled code)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint '{path}' does not exist (run the stage that writes it)")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(ckpt["model"] if "model" in ckpt else ckpt)
    return model


def fit(
    model: nn.Module,
    train_loader: Any,
    test_loader: Any,
    objective: Objective,
    cfg: TrainConfig,
    out_dir: Optional[str] = None,
    on_epoch: Optional[Callable[[int, nn.Module], None]] = None,
) -> List[Dict[str, float]]:
    """Train `model` with `objective`; evaluate on `test_loader` after every epoch.

    Keeps `out_dir/last.pt` and `out_dir/best.pt` (best test Acc@1, as the paper selects). `on_epoch(epoch, model)`
    runs before each epoch (e.g. the CE curriculum unfreezing the head). Returns one dict per epoch.
    """
    device = resolve_device(cfg.device)
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr
    )
    total = cfg.epochs * len(train_loader)
    warm = int(cfg.warmup * total)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, total, warm, cfg.cycles))
    history: List[Dict[str, float]] = []
    best = -1.0
    quiet = in_notebook_run()
    for epoch in range(cfg.epochs):
        if on_epoch is not None:
            on_epoch(epoch, model)  # may unfreeze parameters: they join the optimiser and the clipping
            params = [p for p in model.parameters() if p.requires_grad]
            opt.param_groups[0]["params"] = [p for p in params if p.ndim >= 2]
            opt.param_groups[1]["params"] = [p for p in params if p.ndim < 2]
        model.train()
        t0 = time.perf_counter()
        sums: Dict[str, float] = {}
        n_batches = 0
        bar = tqdm(train_loader.batches(epoch), total=len(train_loader), desc=f"epoch {epoch + 1}/{cfg.epochs}",
                   disable=quiet, leave=False, mininterval=1.0)
        for x, y in bar:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with autocast(device):
                loss, parts = objective(model, x, y, epoch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.clip)
            if not (torch.isfinite(loss) and torch.isfinite(gnorm)):
                raise FloatingPointError(
                    f"non-finite loss/gradient at epoch {epoch + 1}, step {n_batches + 1}; last good checkpoint: "
                    f"{os.path.join(out_dir, 'last.pt') if out_dir and epoch else 'none'}"
                )
            opt.step()
            sched.step()
            n_batches += 1
            parts = dict(parts, loss=loss.item())
            for k, v in parts.items():
                sums[k] = sums.get(k, 0.0) + v
            if not quiet and n_batches % 20 == 0:
                bar.set_postfix(loss=f"{sums['loss'] / n_batches:.4f}")
        train_time = time.perf_counter() - t0
        row = {"epoch": epoch + 1, **{f"train_{k}": v / max(1, n_batches) for k, v in sums.items()}}
        row.update({f"test_{k}": v for k, v in evaluate(model, test_loader, device).items()})
        row.update(lr=opt.param_groups[0]["lr"], epoch_time_s=train_time,
                   img_per_s=n_batches * train_loader.batch_size / train_time)
        history.append(row)
        if out_dir:
            state = {"model": model.state_dict(), "epoch": epoch + 1, "test_acc1": row["test_acc1"]}
            save_atomic(state, os.path.join(out_dir, "last.pt"))
            if row["test_acc1"] > best:
                save_atomic(state, os.path.join(out_dir, "best.pt"))
        best = max(best, row["test_acc1"])
        extra = "  ".join(f"{k[6:]} {v:.4f}" for k, v in row.items() if k.startswith("train_") and k != "train_loss")
        print(f"epoch {epoch + 1}/{cfg.epochs}  loss {row['train_loss']:.4f}  {extra}  test acc@1 {row['test_acc1']:.4f}"
              f"  ({train_time:.0f}s, {row['img_per_s']:.0f} img/s)", flush=True)
    return history


def config_dict(cfg: TrainConfig) -> Dict[str, Any]:
    return asdict(cfg)
