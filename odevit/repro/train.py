"""The plain training loop (one model; DDP under torchrun; K seeds at once are `fast.fit`'s): AdamW, warm-up + cosine (optionally with hard restarts), gradient clipping,
best-and-last checkpoints written atomically every epoch, one progress line per epoch, seeded and deterministic.

    objective = pipeline.cross_entropy(label_smoothing=0.1)
    history = fit(model, train_loader, val_loader, objective, TrainConfig(epochs=3), out_dir="checkpoints/x")

Model selection and early stopping read the selection split's Acc@1 (`TrainConfig.select_on`: the validation split
by default; 'test' reproduces the authors' test-set selection). The test set is then scored once, by the caller, at
the selected checkpoint (best.pt).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import random
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
from tqdm import tqdm  # text bar in a terminal; disabled under papermill (one line per epoch)

from . import runtime
from ..losses import topk_hits
from .runtime import autocast, set_precision  # noqa: F401  (set_precision: train.set_precision, the stages')

Objective = Callable[..., Tuple[torch.Tensor, Dict[str, torch.Tensor]]]  # (model, x, y, epoch[, idx]) -> (loss, logged parts)


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
    select_on: str = "val"  # the split whose Acc@1 picks best.pt and drives early stopping (history: <name>_acc1)
    patience: int = 0  # stop after this many epochs without a gain >= min_delta_pts (0 = run all epochs)
    min_delta_pts: float = 0.2  # Acc@1 gain in percentage points that counts as progress


def epochs_without_gain(accs: Sequence[float], min_delta_pts: float) -> int:
    """Epochs since the last one that beat the best before it by >= min_delta_pts points (the first epoch always
    counts as a gain). Accuracies are fractions, the threshold is in points: 0.80 -> 0.802 is a 0.2-point gain."""
    best, since = -math.inf, 0
    for a in accs:
        if 100.0 * (a - best) >= min_delta_pts - 1e-9:  # tolerance: 0.2 pt must count as 0.2 pt in floating point
            best, since = a, 0
        else:
            since += 1
    return since


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


@torch.inference_mode()
def evaluate(
    model: nn.Module, loader: Iterable, device: torch.device, num_steps: Optional[int] = None,
    ks: Sequence[int] = (1, 3, 5), per_sample: bool = False,
) -> Dict[str, Any]:
    """Top-k accuracy over a loader (sample-weighted, unlike the published per-batch mean), in inference mode (the
    model's fused attention kernel: no attention maps are requested). A loader sharded under torchrun: every process
    scores its slice and the counts are summed. `per_sample`: also 'correct1', a bool tensor (this process's samples
    in loader order), so a sub-range's Acc@1 can be read off without a second pass."""
    model.eval()
    total, n, correct = torch.zeros(len(ks), dtype=torch.int64, device=device), 0, []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        with autocast(device):
            logits = model(x, num_steps=num_steps) if num_steps is not None else model(x)
        total += topk_hits(logits.float(), y, ks)  # counts stay on the device: one host sync per pass, not per batch
        if per_sample:
            correct.append(logits.float().topk(1, dim=-1).indices[:, 0] == y)  # as topk_hits
        n += len(y)
    hits = total.tolist()
    if getattr(loader, "world", 1) > 1:
        counts = runtime.all_reduce_sum(torch.tensor(hits + [n], dtype=torch.float64)).long().tolist()
        hits, n = counts[:-1], counts[-1]
    out: Dict[str, Any] = {f"acc{k}": h / n for k, h in zip(ks, hits)}
    if per_sample:
        out["correct1"] = torch.cat(correct).cpu() if correct else torch.zeros(0, dtype=torch.bool)
    return out


class CheckpointError(RuntimeError):
    """A checkpoint is missing, truncated/corrupt, or carries pickled code; the message names the file."""


def save_atomic(obj: Any, path: str) -> None:
    """torch.save to a temporary file, then rename: a crash never leaves a truncated checkpoint."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str) -> Dict[str, Any]:
    """torch.load(weights_only=True) with one clear error for a missing, corrupt or unsafe file."""
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint '{path}' does not exist (run the stage that writes it)")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        if "weights_only" in str(e) or "Unsupported global" in str(e):
            raise CheckpointError(
                f"checkpoint '{path}' refused: it holds pickled objects/code, not just tensors (weights_only=True)"
            ) from None
        raise CheckpointError(f"checkpoint '{path}' is corrupt or truncated ({e}); delete it to start over") from None
    except (RuntimeError, EOFError, OSError, ValueError) as e:
        raise CheckpointError(f"checkpoint '{path}' is corrupt or truncated ({type(e).__name__}: {e}); "
                              "delete it to start over") from None


def load_weights(model: nn.Module, path: str) -> nn.Module:
    """Load the weights of a checkpoint written by `fit` (or a bare state dict)."""
    ckpt = load_checkpoint(path)
    model.load_state_dict(ckpt["model"] if "model" in ckpt else ckpt)
    return model


def _rng_state() -> Dict[str, Any]:
    np_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [torch.from_numpy(np_state[1].astype(np.int64)), int(np_state[2]), int(np_state[3]),
                  float(np_state[4])],
        "python": torch.tensor(random.getstate()[1], dtype=torch.int64),  # Mersenne Twister words
    }


def _set_rng_state(st: Dict[str, Any]) -> None:
    torch.set_rng_state(st["torch"])
    if st["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])
    keys, pos, has_gauss, gauss = st["numpy"]
    np.random.set_state(("MT19937", keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    random.setstate((3, tuple(st["python"].tolist()), None))


# the source a run's weights depend on: the layer (odevit/*.py) and these files of the lab; a checkpoint resumes only
# under the same text of all of them (the study cells' DVC dependencies, tests/test_layout.py), while an edit to the
# report, the README or a plot leaves an interrupted run resumable
TRAINING_SOURCES = ("repro/config.py", "repro/data.py", "repro/runtime.py", "repro/plan.py",
                    "repro/files.py", "repro/pipeline.py", "repro/train.py")


def history_seconds(history: Sequence[Dict[str, float]]) -> float:
    """Seconds a history's epochs took: their training loops and per-epoch evaluations."""
    return float(sum(r["epoch_time_s"] + r.get("eval_time_s", 0.0) for r in history))


def fingerprint(*configs: Any) -> str:
    """Hash of the stage's configs and of the training source (odevit/*.py and TRAINING_SOURCES): a checkpoint
    resumes only the run it came from."""
    h = hashlib.sha256(json.dumps([asdict(c) if hasattr(c, "__dataclass_fields__") else c for c in configs],
                                  sort_keys=True, default=str).encode())
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # odevit/
    files = sorted(n for n in os.listdir(pkg) if n.endswith(".py")) + list(TRAINING_SOURCES)
    for rel in files:
        h.update(rel.encode())
        with open(os.path.join(pkg, rel), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def probe_memory(model: nn.Module, loader: Any, objective: Objective, device: torch.device) -> int:
    """Before training: the activation bytes of one training sample (the objective's forward at batch 1, measured)
    times the batch, plus weights, gradients and AdamW state;
    MemoryEstimateError if that exceeds the free memory, so a run that cannot fit stops with its estimate instead of
    being killed. RNG states are restored: training draws exactly what it would have drawn without the probe."""
    rng = _rng_state()
    try:
        x, y, idx = next(iter(loader.batches(0, with_index=True)))
        model.train()
        x, y = x[:1].to(device), y[:1].to(device)
        with autocast(device):
            per_sample = runtime.saved_bytes(lambda: objective(model, x, y, 0, idx[:1]), model)
    finally:
        _set_rng_state(rng)
    return runtime.check_fits(model, per_sample, loader.batch_size, device)


class _Method(nn.Module):
    """torch.func.functional_call's target: forward = one method of the wrapped model."""

    def __init__(self, model: nn.Module, method: str):
        super().__init__()
        self.m, self.method = model, method

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.m, self.method)(*args, **kwargs)


class OneOfMany:
    """What an objective calls when `fast.fit` trains K models as one: inside torch.func.vmap, one model's slice of
    the stacked parameters and buffers, applied by torch.func.functional_call of the first model (same
    architecture). Offers what the objectives call: `model(x)` and `model.forward_trajectory(x, ...)`."""

    def __init__(self, template: nn.Module, params: Dict[str, torch.Tensor], buffers: Dict[str, torch.Tensor]):
        self.calls = {m: _Method(template, m) for m in ("forward", "forward_trajectory")}
        self.state = {**{f"m.{k}": v for k, v in params.items()}, **{f"m.{k}": v for k, v in buffers.items()}}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return torch.func.functional_call(self.calls["forward"], self.state, args, kwargs)

    def forward_trajectory(self, *args: Any, **kwargs: Any) -> Any:
        return torch.func.functional_call(self.calls["forward_trajectory"], self.state, args, kwargs)


@dataclass
class Run:
    """One model's training in `fit`: its loader and evaluation loaders, optimiser, schedule, checkpoints, history."""
    model: nn.Module
    loader: Any
    evals: Dict[str, Any]
    opt: torch.optim.Optimizer
    sched: Any
    run_id: str
    last_path: Optional[str]
    out_dir: Optional[str]
    times: Optional[Dict[str, float]]
    history: List[Dict[str, float]]
    best: float = -1.0
    start: int = 0
    params: Optional[List[torch.Tensor]] = None


def new_run(model: nn.Module, loader: Any, eval_loaders: Any, cfg: TrainConfig, device: torch.device,
            run_id: str = "", out_dir: Optional[str] = None, times: Optional[Dict[str, float]] = None) -> Run:
    """One model's training state as `fit` starts it: on the device, AdamW with two parameter groups (weight decay
    on matrices, none on vectors), warm-up + cosine schedule over `cfg.epochs` x the loader's batches."""
    evals = dict(eval_loaders) if isinstance(eval_loaders, dict) else {cfg.select_on: eval_loaders}
    if cfg.select_on not in evals:
        raise ValueError(f"select_on: '{cfg.select_on}' has no loader (given: {sorted(evals)})")
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
                             {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}], lr=cfg.lr)
    total = cfg.epochs * len(loader)
    warm = int(cfg.warmup * total)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, total, warm, cfg.cycles))
    # the training data is part of the run: a checkpoint of the same configs on other images must not be resumed
    rid = f"{run_id}/{getattr(loader, 'n', '?')} images/{len(loader)} batches"
    last = os.path.join(out_dir, "last.pt") if out_dir else None
    return Run(model, loader, evals, opt, sched, rid, last, out_dir, times, [], params=params)


def train_step(objective: Objective, r: Run, batch: Tuple[torch.Tensor, ...], epoch: int, device: torch.device,
               clip: float, replica: Any = None, step: int = 0) -> Dict[str, torch.Tensor]:
    """One optimiser step (the model, or `replica` under torchrun): the objective, backward, clipping, one host sync
    for the finiteness check (FloatingPointError naming the run's last good checkpoint, before any weight changes),
    AdamW and schedule steps. Returns the logged parts and the loss, float64 on the device (no host sync)."""
    x, y, idx = batch
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    with autocast(device):
        loss, parts = objective(r.model if replica is None else replica, x, y, epoch, idx)
    r.opt.zero_grad(set_to_none=True)
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(r.params, clip)
    if not bool(torch.isfinite(loss) & torch.isfinite(gnorm)):  # the step's one host sync
        good = r.last_path if r.last_path and os.path.exists(r.last_path) else "none"
        raise FloatingPointError(f"non-finite {'loss' if not torch.isfinite(loss) else 'gradient'} at epoch "
                                 f"{epoch + 1}, step {step + 1}: training stopped (lower lr or raise clip); last good "
                                 f"checkpoint: {good}")
    r.opt.step()
    r.sched.step()
    return {key: v.detach().double() for key, v in dict(parts, loss=loss).items()}


def fit(
    model: nn.Module,
    train_loader: Any,
    eval_loaders: Any,
    objective: Objective,
    cfg: TrainConfig,
    out_dir: Optional[str] = None,
    on_epoch: Optional[Callable[[int, nn.Module], None]] = None,
    run_id: str = "",
    times: Optional[Dict[str, float]] = None,
) -> List[Dict[str, float]]:
    """Train `model` with `objective`; score Acc@1/3/5 on the evaluation loaders after every epoch.

    `eval_loaders`: one loader (the split named `cfg.select_on`, normally the validation split) or {split name:
    loader}; history rows get `<name>_acc1` etc. `out_dir/best.pt` is the epoch of the best `<select_on>_acc1`
    (validation by default; 'test' = the authors' test-set selection), `out_dir/last.pt` (model, optimiser, scheduler,
    RNG states, epoch, best metric, history) is written every epoch, both atomically. With `cfg.patience` > 0 training
    stops once `patience` epochs in a row brought no selection gain >= `cfg.min_delta_pts` points
    (`epochs_without_gain`); `cfg.epochs` is then the maximum. If `out_dir/last.pt` exists with the same
    `run_id` (see `fingerprint`) and the same number of training images and batches, training resumes after its
    epoch and ends exactly as an uninterrupted run would (CPU); a checkpoint of another run is set aside with a
    notice, a corrupt one stops with its path.
    `on_epoch(epoch, model)` runs before each epoch (e.g. the CE curriculum unfreezing the head). `times`: on a
    resume, times['resumed_s'] = the earlier processes' epoch and evaluation seconds (from the resumed history).
    Raises FloatingPointError on a non-finite loss or gradient, before the step: no non-finite weights are saved.
    Under torchrun (`runtime.init()` first, loaders built after it) the model runs in DistributedDataParallel,
    logged losses and accuracies are averaged over the processes, and only rank 0 writes checkpoints (the RNG
    state saved is rank 0's). Returns one dict per epoch: epoch, train_* losses, <split>_acc1/3/5, lr, epoch_time_s
    (training loop), eval_time_s (the per-epoch evaluation), img_per_s. (K seeds at once: `fast.fit`.)
    """
    rank, world = runtime.rank_world()
    sel = f"{cfg.select_on}_acc1"
    device = resolve_device(cfg.device)
    quiet = in_notebook_run() or rank > 0
    r = new_run(model, train_loader, eval_loaders, cfg, device, run_id, out_dir, times)
    replica: Any = model  # what the objective calls: the model, or its DDP replica under torchrun

    def begin_epoch(epoch: int) -> None:
        nonlocal replica
        if on_epoch is not None:
            on_epoch(epoch, model)  # may unfreeze parameters: they join the optimiser and the clipping
        r.params = [p for p in model.parameters() if p.requires_grad]
        r.opt.param_groups[0]["params"] = [p for p in r.params if p.ndim >= 2]
        r.opt.param_groups[1]["params"] = [p for p in r.params if p.ndim < 2]
        if world > 1 and (replica is model or replica.stale()):
            replica = runtime.Replica(model, device)

    _resume(r, cfg, rank, begin_epoch)
    if r.start < cfg.epochs:
        probe_memory(model, r.loader, objective, device)
    for epoch in range(r.start, cfg.epochs):
        if _patience_spent(r.history, cfg, sel, epoch, rank):
            break
        begin_epoch(epoch)
        model.train()
        sums, n_batches, train_time = _train_epoch(objective, r, epoch, cfg, device, replica, quiet)
        _score_and_save(r, sums, n_batches, train_time, epoch, device, world, rank, sel)
        runtime.barrier()  # no process runs ahead of the checkpoint
        if rank == 0:
            _print_epoch(r, epoch, cfg, sel, train_time)
    return r.history


def _resume(r: Run, cfg: TrainConfig, rank: int, begin_epoch: Callable[[int], None]) -> None:
    """Load r's last.pt if it is this run's (same run id): weights, optimiser, schedule, RNG state, best metric and
    history, the curriculum replayed (`begin_epoch`) so the parameter groups match; r.start = its epoch. A last.pt
    of another run is set aside with a notice; a corrupt one stops."""
    if not (r.last_path and os.path.exists(r.last_path)):
        return
    ckpt = load_checkpoint(r.last_path)  # corrupt -> CheckpointError naming the file, never a silent restart
    if ckpt.get("run_id") == r.run_id and "optimizer" in ckpt:
        r.start = int(ckpt["epoch"])
        for e in range(min(r.start, cfg.epochs)):
            begin_epoch(e)  # replay the curriculum so the parameter groups match
        r.model.load_state_dict(ckpt["model"])
        r.opt.load_state_dict(ckpt["optimizer"])
        r.sched.load_state_dict(ckpt["scheduler"])
        _set_rng_state(ckpt["rng"])
        r.best, r.history = float(ckpt["best"]), list(ckpt["history"])
        if r.times is not None:
            r.times["resumed_s"] = history_seconds(r.history)
        if rank == 0:
            print(f"resuming from {r.last_path} after epoch {r.start}/{cfg.epochs}", flush=True)
    elif rank == 0:
        print(f"{r.last_path} belongs to another configuration: starting this run from scratch", flush=True)


def _patience_spent(history: List[Dict[str, float]], cfg: TrainConfig, sel: str, epoch: int, rank: int) -> bool:
    """Whether `cfg.patience` epochs in a row brought no selection gain (also right after resuming a run that had
    stopped); says so on rank 0."""
    if not (cfg.patience and history and epochs_without_gain([h[sel] for h in history], cfg.min_delta_pts)
            >= cfg.patience):
        return False
    if rank == 0:
        print(f"early stop after epoch {epoch}: {cfg.patience} epochs without a {cfg.select_on} Acc@1 gain "
              f">= {cfg.min_delta_pts:g} pt (best {max(h[sel] for h in history):.4f})", flush=True)
    return True


def _train_epoch(objective: Objective, r: Run, epoch: int, cfg: TrainConfig, device: torch.device, replica: Any,
                 quiet: bool) -> Tuple[Dict[str, torch.Tensor], int, float]:
    """One epoch of optimiser steps (`train_step`): (the logged parts and loss summed over the epoch's steps, float64
    on the device, read once an epoch; the number of steps; the loop's seconds)."""
    t0 = time.perf_counter()
    sums: Dict[str, torch.Tensor] = {}
    n_batches = 0
    bar = tqdm(r.loader.batches(epoch, with_index=True), total=len(r.loader), desc=f"epoch {epoch + 1}/{cfg.epochs}",
               disable=quiet, leave=False, mininterval=1.0)
    for batch in bar:
        logged = train_step(objective, r, batch, epoch, device, cfg.clip, replica, n_batches)
        n_batches += 1
        for key, v in logged.items():
            sums[key] = sums[key] + v if key in sums else v
        if not quiet and n_batches % 20 == 0:
            bar.set_postfix(loss=f"{sums['loss'].item() / n_batches:.4f}")
    return sums, n_batches, time.perf_counter() - t0


def _score_and_save(r: Run, sums: Dict[str, torch.Tensor], n_batches: int, train_time: float, epoch: int,
                    device: torch.device, world: int, rank: int, sel: str) -> None:
    """After an epoch, the run's history row (mean train_* losses, over the processes under torchrun; the scores on
    its evaluation loaders; lr and seconds), then (rank 0) best.pt where the selection metric improved and last.pt."""
    s = {key: float(v) for key, v in sums.items()}
    if world > 1:  # mean over the processes of their mean losses (equal slices)
        keys = list(s)  # the same order on every process (same objective)
        tot = runtime.all_reduce_sum(torch.tensor([s[key] for key in keys], dtype=torch.float64)) / world
        s = dict(zip(keys, tot.tolist()))
    row = {"epoch": epoch + 1, **{f"train_{key}": v / max(1, n_batches) for key, v in s.items()}}
    t1 = time.perf_counter()
    for name, loader in r.evals.items():
        row.update({f"{name}_{key}": v for key, v in evaluate(r.model, loader, device).items()})
    row.update(lr=r.opt.param_groups[0]["lr"], epoch_time_s=train_time, eval_time_s=time.perf_counter() - t1,
               img_per_s=n_batches * r.loader.batch_size / train_time)
    r.history.append(row)
    improved = row[sel] > r.best
    r.best = max(r.best, row[sel])
    if r.out_dir and rank == 0:
        weights = {"model": r.model.state_dict(), "epoch": epoch + 1, sel: row[sel]}
        if improved:
            save_atomic(weights, os.path.join(r.out_dir, "best.pt"))
        save_atomic({**weights, "optimizer": r.opt.state_dict(), "scheduler": r.sched.state_dict(),
                     "rng": _rng_state(), "best": r.best, "history": r.history, "run_id": r.run_id}, r.last_path)


def _print_epoch(r: Run, epoch: int, cfg: TrainConfig, sel: str, train_time: float) -> None:
    """One line: the epoch's losses and selection Acc@1 (and, outside papermill, the loop's seconds: under papermill
    the times go to history.csv only, so a rerun that changes no result leaves the executed notebook byte-identical)."""
    row = r.history[-1]
    extra = "  ".join(f"{k[6:]} {v:.4f}" for k, v in row.items() if k.startswith("train_") and k != "train_loss")
    print(f"epoch {epoch + 1}/{cfg.epochs}  loss {row['train_loss']:.4f}  {extra}  {cfg.select_on} acc@1 {row[sel]:.4f}"
          + (f"  ({train_time:.0f}s, {row['img_per_s']:.0f} img/s)" if not in_notebook_run() else ""), flush=True)
