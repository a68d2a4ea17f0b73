"""The one trainer of the notebooks: K seeds of a cell trained as one stacked model, every step on the device.

What K runs of the plain loop (`train.fit`) compute, without its per-step host work: the K models' parameters live stacked (K, ...) as
the optimiser's leaves (one AdamW over them is K AdamWs: it is elementwise); the training images, labels and the
teacher's cached CLS states sit on the device and each step gathers its batch there from the indices the plain
loader would serve (`data.Loader.indices`: the same batches, in the same order); clipping is per model on the
stacked gradients; the finiteness check is read once an epoch, not once a step; on CUDA the whole step (batch
gather, vmapped objective, backward, clipping, AdamW) is captured once as a CUDA graph and replayed. Evaluation
scores the K models at once (vmap) on large batches. On the CPU the same code runs eagerly: it equals the plain path
to floating-point rounding (tests/test_fast.py). Below the trainer: the plan driver (`run_plan`: the notebooks'
cells, each reused by its run key or trained, resumable); its benchmark is benchmarks/bench.py.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import CKPTS, RESULTS, Plan, cell_of, tau_by_rule
from .files import study_machines
from .train import OneOfMany, load_checkpoint, save_atomic

Objective = Callable[..., Tuple[torch.Tensor, Dict[str, torch.Tensor]]]


def lr_factor(step: int, total: int, warmup_steps: int, floor: float = 0.0, floor_frac: float = 0.0) -> float:
    """Linear warm-up from 0, cosine from 1 down to `floor` over the steps up to (1 - floor_frac) of `total`, then
    constant at `floor` (plan v2's schedule: the last `floor_frac` of the steps at a fixed, non-negligible LR, where a
    run still learning keeps gaining). floor 0, floor_frac 0: `train.lr_factor` (one cycle), value for value."""
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    end = total - int(round(floor_frac * total))
    progress = (step - warmup_steps) / max(1, end - warmup_steps)
    if progress >= 1.0:
        return floor
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


@dataclass
class Data:
    """A split resident on the device: normalised images (n, C, H, W) and labels (n,)."""
    x: torch.Tensor
    y: torch.Tensor

    @staticmethod
    def of(loader: Any, device: torch.device) -> "Data":
        """Every image of a loader in index order (no augmentation), moved to the device once."""
        xs, ys = zip(*loader.batches(0, ordered=True))
        return Data(torch.cat(xs).to(device), torch.cat(ys).to(device))


def in_order(loader: Any, batch_size: int = 2048) -> Any:
    """The same images as a training loader (its first `n`), unshuffled, in batches of `batch_size`: what the
    resident split and the teacher's cache are read from."""
    return loader.__class__(loader.split, batch_size, loader.transform, limit=loader.n)


def augment(x: torch.Tensor, g: torch.Generator, pad: int = 2) -> torch.Tensor:
    """Random crop (zero padding `pad`) + horizontal flip per image of a (..., C, H, W) batch, on x's device; the
    draws come from the CPU generator g (seeded per run: a resumed run draws what it would have drawn)."""
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    xb = x.reshape(-1, c, h, w)
    n = xb.shape[0]
    off = torch.randint(0, 2 * pad + 1, (n, 2), generator=g).to(x.device)
    flip = torch.randint(0, 2, (n,), generator=g).to(x.device).bool()
    xp = F.pad(xb, (pad, pad, pad, pad))
    rows = (off[:, 0:1] + torch.arange(h, device=x.device)).view(n, 1, h, 1).expand(n, c, h, w + 2 * pad)
    xr = xp.gather(2, rows)
    cols = (off[:, 1:2] + torch.arange(w, device=x.device)).view(n, 1, 1, w).expand(n, c, h, w)
    xc = xr.gather(3, cols)
    return torch.where(flip.view(n, 1, 1, 1), xc.flip(-1), xc).reshape(*lead, c, h, w)


def _fused_off(model: nn.Module) -> None:
    """Switch the fused attention kernels off for good (their backward fails under vmap on CUDA; the stacked
    template is only ever called under vmap)."""
    for m in model.modules():
        for attr in ("fused", "fused_attn"):
            if isinstance(getattr(m, attr, None), bool):
                setattr(m, attr, False)


class Stacked:
    """K models of one architecture as one: stacked parameters and buffers, called under torch.func.vmap."""

    def __init__(self, models: Sequence[nn.Module], device: torch.device):
        self.template = models[0]
        self.names = [n for n, _ in self.template.named_parameters()]
        self.trainable = {n for n, p in self.template.named_parameters() if p.requires_grad}
        self.ndim = {n: p.ndim for n, p in self.template.named_parameters()}
        with torch.no_grad():
            self.params = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models]).to(device)
                           .requires_grad_(n in self.trainable) for n in self.names}
            self.buffers = {n: torch.stack([b.detach() for b in [dict(m.named_buffers())[n] for m in models]]).to(device)
                            for n, _ in self.template.named_buffers()}
        self.K = len(models)
        _fused_off(self.template)

    def leaves(self) -> List[torch.Tensor]:
        return [self.params[n] for n in self.names if n in self.trainable]

    def vmap(self, fn: Callable[..., Any], *args: Any, in_dims: Any = 0) -> Any:
        """fn(model_k, *args_k) for every k at once: model_k is the template under model k's parameters
        (`train.OneOfMany`, what the objectives call)."""
        template = self.template

        def one(p: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor], *a: Any) -> Any:
            return fn(OneOfMany(template, p, b), *a)

        dims = (0, 0) + (tuple(in_dims) if isinstance(in_dims, (list, tuple)) else (in_dims,) * len(args))
        return torch.func.vmap(one, in_dims=dims, randomness="same")(self.params, self.buffers, *args)


@dataclass
class Optim:
    lr: float
    weight_decay: float
    warmup: float
    clip: float
    epochs: int
    floor: float = 0.0
    floor_frac: float = 0.0


@dataclass
class Group:
    """The training state of K stacked models: parameters, one AdamW, the step count and every model's history."""
    stacked: Stacked
    opt: torch.optim.Optimizer
    cfg: Optim
    steps_per_epoch: int
    histories: List[List[Dict[str, float]]] = field(default_factory=list)
    best: List[float] = field(default_factory=list)
    epoch: int = 0
    best_params: Dict[str, torch.Tensor] = field(default_factory=dict)  # each model's best-validation weights
    key: Dict[str, Any] = field(default_factory=dict)  # what its last.pt may be continued by (`run_key`)
    resumed_key: Optional[Dict[str, Any]] = None  # the key of the last.pt it continued (None: none, or keyless)


class ResumeError(ValueError):
    """A last.pt written for another run (its configuration, training source or trainer): never continued."""


def run_key(**parts: Any) -> Dict[str, Any]:
    """What a group's last.pt must have been written under to be continued: the group's configuration (`parts`, plain
    JSON values: plan study, cell, seeds, images, teacher, the base / distill / optimiser configs; `config` is their
    hash), the training source (`source`: train.fingerprint, the layer and the lab's training files) and this
    trainer's code (`trainer`: fast.py without its comments and docstrings). `commit` (the checkout's git commit, if
    any) only says where to find that code. Recorded in last.pt and in every run's metrics.json."""
    from . import train

    plain = json.loads(json.dumps(parts))  # a value that is not plain JSON fails here, not in a later comparison
    return {"config": hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()[:16], "parts": plain,
            "source": train.fingerprint(), "trainer": trainer_hash(), "commit": _git_commit()}


def trainer_hash() -> str:
    """fast.py's code, its comments and docstrings aside (an edit of those keeps its last.pt files resumable)."""
    import ast

    with open(os.path.abspath(__file__), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def _git_commit() -> Optional[str]:
    import subprocess

    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (r.stdout.strip() or None) if r.returncode == 0 else None


def _parts_differ(theirs: Dict[str, Any], mine: Dict[str, Any]) -> str:
    """The run-key parts two keys disagree on, named ("not recorded" where `theirs` has none)."""
    a, b = theirs.get("parts") or {}, mine.get("parts") or {}
    return ", ".join(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)) or "not recorded"


def key_mismatch(theirs: Dict[str, Any], mine: Dict[str, Any]) -> List[str]:
    """What keeps today's run from continuing a last.pt written under `theirs`: the configuration parts that differ,
    or the trainer's code or the training source, where no checked equivalence record (docs/evidence/
    source_equivalence.json: runs of its `old` code are reproduced by its `new` code) makes theirs today's."""
    bad = []
    if theirs.get("config") != mine.get("config"):
        bad.append(f"configuration ({_parts_differ(theirs, mine)})")
    for part, what in (("trainer", "trainer code (fast.py "), ("source", "training source (")):
        if theirs.get(part) != mine.get(part) and theirs.get(part) not in equivalent(mine[part], part):
            bad.append(f"{what}{theirs.get(part)}, today {mine[part]}; no record in {EQUIVALENCE} makes it today's)")
    return bad


EQUIVALENCE = "docs/evidence/source_equivalence.json"


def equivalent(code: str, of: str = "source", path: str = EQUIVALENCE) -> set:
    """The training sources (`of` 'source': train.fingerprint) or trainer codes ('trainer': trainer_hash) whose runs
    today's `code` reproduces: the chain of checked old -> new records ending at it (each record: runs retrained with
    the new code, bit-identical to the old code's; a record without `of` is a source's)."""
    ok, recs = {code}, [r for r in (json.load(open(path)) if os.path.isfile(path) else []) if r.get("of", "source") == of]
    changed = True
    while changed:
        changed = False
        for r in recs:
            if r["new"] in ok and r["old"] not in ok:
                ok.add(r["old"])
                changed = True
    return ok


def _base_part(base: Any) -> Dict[str, Any]:
    """The base config as a run-key part: what shapes the training (data, sizes, batches, precision), not where it
    runs (device, data_root)."""
    import dataclasses

    return {k: v for k, v in dataclasses.asdict(base).items() if k not in ("device", "data_root")}


def new_group(models: Sequence[nn.Module], cfg: Optim, steps_per_epoch: int, device: torch.device) -> Group:
    """Stack the models; AdamW with `train.new_run`'s two groups (weight decay on matrices, none on vectors)."""
    s = Stacked(models, device)
    leaves = [(n, s.params[n]) for n in s.names if n in s.trainable]
    cuda = device.type == "cuda"
    lr = torch.tensor(cfg.lr, device=device) if cuda else cfg.lr
    opt = torch.optim.AdamW([{"params": [p for n, p in leaves if s.ndim[n] >= 2], "weight_decay": cfg.weight_decay},
                             {"params": [p for n, p in leaves if s.ndim[n] < 2], "weight_decay": 0.0}], lr=lr,
                            capturable=cuda, foreach=cuda)
    return Group(s, opt, cfg, steps_per_epoch, [[] for _ in models], [-1.0] * len(models))


def _clip_(leaves: List[torch.Tensor], clip: float) -> torch.Tensor:
    """Per-model gradient clipping of stacked gradients, as torch.nn.utils.clip_grad_norm_ does per model; returns
    the K total norms (before clipping)."""
    norms = torch.stack([torch.linalg.vector_norm(p.grad.flatten(1), 2, dim=1) for p in leaves])  # (P, K)
    total = torch.linalg.vector_norm(norms, 2, dim=0)
    coef = torch.clamp(clip / (total + 1e-6), max=1.0)
    for p in leaves:
        p.grad.mul_(coef.view(-1, *([1] * (p.grad.ndim - 1))))
    return total


class Stepper:
    """One optimiser step of a group: inputs are written into static tensors, the step runs eagerly (CPU, or the
    first CUDA steps) or as a replayed CUDA graph (captured per distinct objective key)."""

    def __init__(self, group: Group, objective: Callable[[Any], Objective], device: torch.device, graphs: bool):
        self.g, self.objective, self.device = group, objective, device
        self.use_graphs = graphs and device.type == "cuda"
        self.sums: Dict[str, torch.Tensor] = {}
        self.bad = torch.zeros((), dtype=torch.bool, device=device)
        self.static: Dict[Any, Dict[str, torch.Tensor]] = {}
        self.warm: Dict[Any, int] = {}

    def _compute(self, key: Any, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor, epoch: int
                 ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        obj = self.objective(key)
        s = self.g.stacked
        losses, parts = s.vmap(lambda m, xk, yk, ik: obj(m, xk, yk, epoch, ik), x, y, idx)
        for p in s.leaves():
            p.grad = None  # backward writes fresh gradients (inside a captured graph: from its memory pool)
        losses.sum().backward()
        norms = _clip_(s.leaves(), self.g.cfg.clip)
        self.g.opt.step()
        out = {k: v.detach().double() for k, v in dict(parts, loss=losses).items()}
        out["_bad"] = ~(torch.isfinite(losses).all() & torch.isfinite(norms).all())
        return losses, out

    def step(self, key: Any, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor, epoch: int, lr: float) -> None:
        for grp in self.g.opt.param_groups:
            if torch.is_tensor(grp["lr"]):
                grp["lr"].fill_(lr)
            else:
                grp["lr"] = lr
        if not self.use_graphs:
            _, out = self._compute(key, x, y, idx, epoch)
        else:
            out = self._graph_step(key, x, y, idx, epoch)
        for k, v in out.items():
            if k == "_bad":
                self.bad |= v
            else:
                self.sums[k] = self.sums[k] + v if k in self.sums else v.clone()

    def _graph_step(self, key: Any, x: torch.Tensor, y: torch.Tensor, idx: torch.Tensor, epoch: int
                    ) -> Dict[str, torch.Tensor]:
        gkey = (key, tuple(x.shape))
        if gkey not in self.static:
            n = self.warm.get(gkey, 0)
            if n < 3:  # eager warm-up steps on a side stream (real steps of the run), then capture
                self.warm[gkey] = n + 1
                st = torch.cuda.Stream()
                st.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(st):
                    _, out = self._compute(key, x, y, idx, epoch)
                torch.cuda.current_stream().wait_stream(st)
                return out
            sx, sy, si = x.clone(), y.clone(), idx.clone()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                _, out = self._compute(key, sx, sy, si, epoch)
            self.static[gkey] = {"x": sx, "y": sy, "idx": si, "graph": graph, "out": out}
        s = self.static[gkey]
        s["x"].copy_(x)
        s["y"].copy_(y)
        s["idx"].copy_(idx)
        s["graph"].replay()
        return {k: v.clone() for k, v in s["out"].items()}

    def end_epoch(self, n_batches: int) -> List[Dict[str, float]]:
        """The epoch's mean logged parts per model (one host read); FloatingPointError if any step was non-finite."""
        if bool(self.bad):
            raise FloatingPointError("non-finite loss or gradient during this epoch: training stopped (lower lr or "
                                     "raise clip); the last good checkpoint is the previous epoch's last.pt")
        per = {k: (v / max(1, n_batches)).tolist() for k, v in self.sums.items()}
        self.sums = {}
        return [{f"train_{k}": v[i] for k, v in per.items()} for i in range(self.g.stacked.K)]


@torch.no_grad()
def evaluate(stacked: Stacked, data: Data, num_steps: Optional[int] = None, batch: Optional[int] = None,
             ks: Sequence[int] = (1, 3, 5)) -> List[Dict[str, Any]]:
    """Top-k accuracy of the K stacked models on one resident split, all K at once (vmap over the models, the images
    shared), in eval mode. One host read per call. `batch`: images per vmapped pass (default 2,500 on a GPU, 256 on
    the CPU, where it ran 2.2 x faster than 2,500 with the same accuracies: 4 stacked students, 2026-12-02)."""
    if batch is None:
        batch = 2500 if data.x.device.type == "cuda" else 256
    stacked.template.eval()
    K, n = stacked.K, len(data.y)
    hits = torch.zeros(K, len(ks), dtype=torch.int64, device=data.x.device)
    kw = {} if num_steps is None else {"num_steps": num_steps}
    for i in range(0, n, batch):
        x, y = data.x[i : i + batch], data.y[i : i + batch]
        logits = stacked.vmap(lambda m, xx: m(xx, **kw), x, in_dims=None).float()  # (K, B, C)
        top = logits.topk(min(max(ks), logits.shape[-1]), dim=-1).indices  # (K, B, kmax): k > classes = all
        hit = top == y.view(1, -1, 1)
        hits += torch.stack([hit[..., :k].any(-1).sum(-1) for k in ks], 1)
    stacked.template.train()
    h = hits.cpu().tolist()
    return [{f"acc{k}": h[m][j] / n for j, k in enumerate(ks)} for m in range(K)]


def fit(group: Group, objective: Callable[[Any], Objective], train_loaders: Sequence[Any], train: Data,
        val: Data, out_dirs: Sequence[Optional[str]], device: torch.device, cache_key: Callable[[int, int], Any],
        aug: Optional[Sequence[torch.Generator]] = None, graphs: bool = True, label: str = "",
        deadline: Optional[float] = None, resume: Optional[str] = None, max_epochs: Optional[int] = None) -> bool:
    """Train the group's K models for its remaining epochs: model k walks `train_loaders[k]`'s batches (its seed's
    order), gathered from the resident `train` split; `cache_key(epoch, step)` names the objective of a step (e.g.
    its drawn N); `aug[k]`: model k's augmentation generator (None: no augmentation). After every epoch: validation
    Acc@1/3/5 of all K (one vmapped pass), best.pt per model where it improved, one last.pt for the group (`resume`),
    a line of progress with the time left. Returns False if `deadline` (time.time()) came first, or after
    `max_epochs` epochs of this call (resumable: last.pt is written then)."""
    stepper = Stepper(group, objective, device, graphs)
    K, cfg = group.stacked.K, group.cfg
    total = cfg.epochs * group.steps_per_epoch
    warm = int(0.0 if cfg.warmup <= 0 else cfg.warmup * total)
    t_start, e_start = time.time(), group.epoch
    last_save, save_every = time.time(), 60.0  # last.pt at most once a minute, and at the end or the deadline
    for epoch in range(group.epoch, cfg.epochs):
        if (deadline is not None and time.time() > deadline) or (max_epochs is not None
                                                                 and epoch - e_start >= max_epochs):
            return False
        t0 = time.perf_counter()
        plans = [l.indices(epoch) for l in train_loaders]
        n_batches = len(plans[0])
        for b in range(n_batches):
            idx = torch.stack([p[b][0] for p in plans]).to(device, non_blocking=True)  # (K, B)
            x = train.x[idx]
            if aug is not None:
                x = torch.stack([augment(x[k], aug[k]) for k in range(K)])
            step = epoch * group.steps_per_epoch + b
            stepper.step(cache_key(epoch, b), x, train.y[idx], idx, epoch,
                         cfg.lr * lr_factor(step, total, warm, cfg.floor, cfg.floor_frac))
        rows = stepper.end_epoch(n_batches)
        t_train = time.perf_counter() - t0
        t1 = time.perf_counter()
        scores = evaluate(group.stacked, val)
        lr_now = cfg.lr * lr_factor((epoch + 1) * group.steps_per_epoch - 1, total, warm, cfg.floor, cfg.floor_frac)
        for k in range(K):
            row = {"epoch": epoch + 1, **rows[k], **{f"val_{m}": v for m, v in scores[k].items()}, "lr": lr_now,
                   "epoch_time_s": t_train / K, "eval_time_s": (time.perf_counter() - t1) / K,
                   "img_per_s": n_batches * len(plans[0][0][0]) * K / t_train}
            group.histories[k].append(row)
            if row["val_acc1"] > group.best[k]:
                group.best[k] = row["val_acc1"]
                with torch.no_grad():  # kept on the device; best.pt files are written at save points
                    for n, t in {**group.stacked.params, **group.stacked.buffers}.items():
                        group.best_params.setdefault(n, t.detach().clone())[k].copy_(t[k])
        group.epoch = epoch + 1
        if resume and (group.epoch == cfg.epochs or time.time() - last_save > save_every
                       or (deadline is not None and time.time() > deadline)
                       or (max_epochs is not None and group.epoch - e_start >= max_epochs)):
            save_group(group, out_dirs, resume, aug)
            last_save = time.time()
        done = group.epoch - e_start
        left = (time.time() - t_start) / done * (cfg.epochs - group.epoch)
        accs = " ".join(f"{h[-1]['val_acc1'] * 100:.2f}" for h in group.histories)
        print(f"{label} epoch {group.epoch}/{cfg.epochs} x{K}  val acc@1 {accs}  "
              f"({t_train:.1f}s, {group.histories[0][-1]['img_per_s']:.0f} img/s, ~{left:.0f}s left)", flush=True)
    return True


def save_group(group: Group, out_dirs: Sequence[Optional[str]], resume: str,
               aug: Optional[Sequence[torch.Generator]] = None) -> None:
    """best.pt of every model (its best validation epoch so far, the plain path's format) and the group's last.pt."""
    for k, o in enumerate(out_dirs):
        if o and group.best_params:
            sd = {n: t[k].detach().cpu().clone() for n, t in group.best_params.items()}
            h = group.histories[k]
            e = max(range(len(h)), key=lambda i: h[i]["val_acc1"])
            save_atomic({"model": {n: sd[n] for n in group.stacked.template.state_dict()}, "epoch": e + 1,
                         "val_acc1": h[e]["val_acc1"]}, os.path.join(o, "best.pt"))
    save_atomic({"device": device_kind(next(iter(group.stacked.params.values())).device),
                 "params": {n: t.detach().cpu() for n, t in group.stacked.params.items()},
                 "buffers": {n: t.detach().cpu() for n, t in group.stacked.buffers.items()},
                 "best_params": {n: t.detach().cpu() for n, t in group.best_params.items()},
                 "optimizer": group.opt.state_dict(), "histories": group.histories, "best": group.best,
                 "epoch": group.epoch, "aug": [g.get_state() for g in aug] if aug else None, "key": group.key}, resume)


def device_kind(device: torch.device) -> str:
    """The machine kind a run is bound to: the GPU's name, or the CPU's model."""
    from .machine import cpu_model

    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU: {cpu_model()}"


def load_resume(group: Group, path: str, aug: Optional[Sequence[torch.Generator]] = None) -> bool:
    """Continue a group from its last.pt (same K models, same configuration: the caller's run id checks that)."""
    if not os.path.exists(path):
        return False
    ck = load_checkpoint(path)  # weights_only=True; a corrupt file stops with its path
    here = device_kind(next(iter(group.stacked.params.values())).device)
    if ck.get("device", here) != here:  # a run never mixes machines: it starts over here
        print(f"{path}: started on {ck['device']}, this is {here}: the group starts over", flush=True)
        return False
    theirs = ck.get("key") or {}
    if group.key and not theirs.get("parts"):  # no key, or the first key format (hashes only, 2026-11-28)
        print(f"{path}: written before groups recorded their run key; continued unchecked", flush=True)
        theirs = {}
    elif group.key:
        bad = key_mismatch(theirs, group.key)
        if bad:
            raise ResumeError(f"{path}: written for another run: {'; '.join(bad)}. Continue it with the plan and code it "
                              f"was written under (commit {theirs.get('commit') or 'not recorded'}), or move it away to "
                              "start the group over")
    group.resumed_key = theirs or None
    with torch.no_grad():
        for n, t in group.stacked.params.items():
            t.copy_(ck["params"][n])
        for n, t in group.stacked.buffers.items():
            t.copy_(ck["buffers"][n])
    group.opt.load_state_dict(ck["optimizer"])
    group.histories, group.best, group.epoch = ck["histories"], ck["best"], ck["epoch"]
    dev = next(iter(group.stacked.params.values())).device
    group.best_params = {n: t.to(dev) for n, t in ck.get("best_params", {}).items()}
    if aug and ck.get("aug"):
        for g, s in zip(aug, ck["aug"]):
            g.set_state(s)
    return True


# ---------------------------------------------------------------------------------------------------------------------
# The plan driver: `run_plan` (the notebooks' stages call it for their studies and cells; `python -m odevit.repro.fast`
# for all of them) makes every run of the plan in params.yaml (its teacher seeds, then each study's cells), each cell's
# seeds as one group, resumable from the group's last.pt, reusing a cell whose committed runs match its run key.

UNSEEN, INSIDE, BELOW = (4, 5, 7, 9, 10), (7, 9, 10), (4, 5)


def floor_slope(val_acc: Sequence[float], floor_frac: float, val_images: int, se_multiple: float = 1.0
                ) -> Tuple[bool, float, float]:
    """Plan v2's convergence rule on one run's validation Acc@1 (fractions, one per epoch): the least-squares slope
    over the last `floor_frac` of the epochs (the constant floor LR), times their number, is the gain the floor phase
    still makes; converged iff it is below se_multiple x the binomial SE at the best accuracy. Returns (converged,
    gain in pt, threshold in pt)."""
    n = len(val_acc)
    w = max(2, int(round(floor_frac * n)))
    if n < w or w < 2:
        raise ValueError(f"floor_slope: {n} epochs, a floor window of {w}: need at least 2 epochs in it")
    y = torch.tensor(val_acc[-w:], dtype=torch.float64) * 100
    x = torch.arange(w, dtype=torch.float64)
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    p = max(val_acc)
    thr = se_multiple * math.sqrt(p * (1 - p) / val_images) * 100
    return slope * w < thr, slope * w, thr


def _provenance(t0: float, device: torch.device, history: Sequence[Dict[str, float]],
                resumed: Optional[bool] = None) -> Dict[str, Any]:
    """Where and how long: the device, torch, threads; train_s = this run's share of the training loops and
    evaluations of every epoch (from its history, so right also when the group was resumed by another process);
    process_* = the process that wrote the file (it may only have resumed a finished group)."""
    import platform

    return {"device": device_kind(device), "torch": torch.__version__, "host": platform.node(), "threads": torch.get_num_threads(),
            "train_s": round(sum(h["epoch_time_s"] + h["eval_time_s"] for h in history), 1),
            "process_started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
            "process_wall_s": round(time.time() - t0, 1), "process_cpu_s": round(time.process_time(), 1),
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2), "resumed_from_last_pt": resumed}


def _selected(hist: Sequence[Dict[str, float]], p: Plan, val_images: int) -> Dict[str, Any]:
    """A run's best validation epoch (its best.pt) and plan v2's convergence rule on its validation curve."""
    conv, gain, thr = floor_slope([h["val_acc1"] for h in hist], p.optim["floor_frac"], val_images)
    return dict(best_epoch=1 + max(range(len(hist)), key=lambda i: hist[i]["val_acc1"]),
                val_acc1=max(h["val_acc1"] for h in hist), converged=conv, gain_floor_pts=gain, threshold_pts=thr)


def _loaders(base: Any, limit: int, seeds: Sequence[int]) -> Tuple[List[Any], Any, Any]:
    """One training loader per seed over the first `limit` training images (0 = all), the validation and test
    loaders: `pipeline.data_loaders`' splits, its batches in each seed's order."""
    import copy
    import dataclasses

    from . import pipeline

    tr, va, te = pipeline.data_loaders(dataclasses.replace(base, seed=int(seeds[0])), train_limit=limit)
    out = []
    for s in seeds:
        l = copy.copy(tr)
        l.seed = int(s)
        out.append(l)
    return out, va, te


def _write_run(out: str, metrics: Dict[str, Any], history: List[Dict[str, float]]) -> None:
    import pandas as pd

    from .pipeline import write_csv, write_json

    write_csv(pd.DataFrame(history), f"{out}/history.csv")
    write_json(metrics, f"{out}/metrics.json")


def _device_setup(precision: str, device_name: str) -> torch.device:
    from . import train

    train.set_precision(precision)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (plan v2 rules.precision)
    torch.backends.cudnn.allow_tf32 = False
    return train.resolve_device(device_name)


def _done(out_dirs: Sequence[str]) -> bool:
    return all(os.path.exists(f"{o}/metrics.json") for o in out_dirs)


def train_teachers(p: Plan, device: torch.device, graphs: bool, deadline: Optional[float]) -> bool:
    """The plan's teacher seeds as one group (augmented, the v2 schedule); per seed metrics.json (test Acc@1 at its
    best validation epoch); the teacher selected on validation, its distances and tau: results/v2/teacher/."""
    import dataclasses

    from . import pipeline, train
    from ..hub import sha256

    t0 = time.time()
    tc, seeds = p.teacher_cfg, [int(s) for s in p.plan["teacher"]["seeds"]]
    outs = [f"{RESULTS}/teacher/s{s}" for s in seeds]
    ckpts = [f"{CKPTS}/teacher/s{s}" for s in seeds]
    if not _done(outs):
        loaders, va, te = _loaders(p.base, p.base.train_limit, seeds)  # params.yaml's base: all
        models = []
        for s in seeds:
            b = dataclasses.replace(p.base, seed=s)
            pipeline.setup(b)
            models.append(pipeline.build_teacher(b, tc))
        train.set_precision(p.base.precision)
        cfg = Optim(tc.lr, tc.weight_decay, tc.warmup, tc.clip, tc.epochs, **p.optim)
        g = new_group(models, cfg, len(loaders[0]), device)
        g.key = run_key(group="teacher", seeds=seeds, base=_base_part(p.base), teacher=dataclasses.asdict(tc),
                        optim=dataclasses.asdict(cfg))
        aug = [torch.Generator().manual_seed(s * 7919 + 1) for s in seeds]
        resume = f"{CKPTS}/teacher/last.pt"
        load_resume(g, resume, aug)
        trd, vad = Data.of(in_order(loaders[0]), device), Data.of(va, device)
        obj = pipeline.cross_entropy(tc.label_smoothing)
        ok = fit(g, lambda key: obj, loaders, trd, vad, ckpts, device, lambda e, b: 0,
                 aug=aug if tc.augment else None, graphs=graphs, label="teacher", deadline=deadline, resume=resume)
        if not ok:
            return False
        bests = [train.load_weights(pipeline.build_teacher(dataclasses.replace(p.base, seed=s), tc), f"{ck}/best.pt")
                 for s, ck in zip(seeds, ckpts)]
        scores = evaluate(Stacked(bests, device), Data.of(te, device))  # every seed at its best epoch, at once
        for k, s in enumerate(seeds):
            m, hist = scores[k], g.histories[k]
            m.update(**_selected(hist, p, len(vad.y)), seed=s, epochs=tc.epochs, sha256=sha256(f"{ckpts[k]}/best.pt"),
                     plan_hash=p.hash(None), provenance=_provenance(t0, device, hist), trained_together=seeds,
                     run_key=g.key, resumed_key=g.resumed_key)
            _write_run(outs[k], m, hist)
    return select_teacher(p, device)


def select_teacher(p: Plan, device: torch.device) -> bool:
    """The teacher seed with the best validation Acc@1 (never the test set), its distances and tau by the rule."""
    import dataclasses
    import json

    import pandas as pd

    from . import pipeline, train
    from .pipeline import write_csv, write_json

    if os.path.exists(f"{RESULTS}/teacher/selected.json"):
        return True
    seeds = [int(s) for s in p.plan["teacher"]["seeds"]]
    ms = [json.load(open(f"{RESULTS}/teacher/s{s}/metrics.json")) for s in seeds]
    k = max(range(len(seeds)), key=lambda i: ms[i]["val_acc1"])  # a tie: the first seed of the plan's list
    b = dataclasses.replace(p.base, seed=seeds[k])
    t = train.load_weights(pipeline.build_teacher(b, p.teacher_cfg), f"{CKPTS}/teacher/s{seeds[k]}/best.pt").to(device)
    tr, _, _ = pipeline.data_loaders(b)
    d = pipeline.teacher_distances(t, tr, p.distill.distance_batches, p.distill.distance_tokens, device)
    write_csv(pd.DataFrame({"layer": range(1, len(d) + 1), "distance": d}), f"{RESULTS}/teacher/distances.csv")
    tau = tau_by_rule(d, float(p.plan["rules"]["tau_rule"]["ratio"]))
    accs = [m["acc1"] * 100 for m in ms]
    sd = float(torch.tensor(accs, dtype=torch.float64).std())
    write_json({"seed": seeds[k], "sha256": ms[k]["sha256"], "acc1": ms[k]["acc1"], "val_acc1": ms[k]["val_acc1"],
                "tau": tau, "seed_acc1_pts": accs, "seed_sd_pts": sd, "converged": [m["converged"] for m in ms]},
               f"{RESULTS}/teacher/selected.json")
    print(f"teacher: seed {seeds[k]} (val {ms[k]['val_acc1'] * 100:.2f} %, test {accs[k]:.2f} %; seeds' test "
          f"SD {sd:.2f} pt), tau {tau:.3f}", flush=True)
    return True


class MachineError(RuntimeError):
    """A study bound to one machine type (plan v3 rules.machine) asked to train on another."""


def machine_refusal(study_dir: str, here: str, study: str) -> str:
    """Plan v3's rule `machine: one_type_per_study`: the study's finished runs (metrics.json provenance.device) fix
    its machine type; on another type, the one line naming both (train_cell stops with it), else ""."""
    made = study_machines(study_dir)
    return (f"{study}: its runs were made on {', '.join(made)}; this machine is {here}. Plan v3's rule machine: "
            f"one_type_per_study keeps every run of a study on one machine type: train {study} there (its other studies "
            "may train here)") if made and made != [here] else ""


def train_cell(p: Plan, study: str, cell: str, device: torch.device, graphs: bool, deadline: Optional[float],
               data_cache: Dict[Any, Any], into: Optional[str] = None, only_seeds: Optional[Sequence[int]] = None,
               max_epochs: Optional[int] = None, dry: bool = False) -> bool:
    """One cell's seeds of a plan-v2 study as one group; metrics.json per seed with the step-count accuracies on all
    test images. Returns False if the deadline came first (the group resumes from its last.pt).
    `into` (a folder other than results/v2) reruns committed runs elsewhere, e.g. to measure a machine shift;
    `only_seeds` keeps a subset of the study's seeds (in the plan's order: the remedy's draws follow the first);
    `max_epochs`: stop after that many epochs of this call (last.pt written: the equivalence checks' few epochs)."""
    import dataclasses

    from . import pipeline, train
    from ..schedule import checkpoint_indices

    t0 = time.time()
    s = p.plan["studies"][study]
    seeds = [int(x) for x in s["seeds"]]
    if only_seeds:
        if not set(only_seeds) <= set(seeds):
            raise ValueError(f"--seeds {sorted(only_seeds)}: {study} has seeds {seeds}")
        seeds = [x for x in seeds if x in set(only_seeds)]
    root = into or p.results
    ck_root = p.ckpts if into is None else f"checkpoints/{os.path.basename(os.path.normpath(into))}"
    outs = [f"{root}/{study}/{cell}/s{x}" for x in seeds]
    ckpts = [f"{ck_root}/{study}/{cell}/s{x}" for x in seeds]
    c = cell_of(p, study, cell)
    d, free, which, dist, tsha = c.distill, c.free, c.teacher, c.distances, c.sha256
    cfg = Optim(d.lr, d.weight_decay, d.warmup, d.clip, d.epochs, **p.optim)
    choices = sorted(d.train_steps) or [d.num_steps]
    per_seed = len(choices) > 1 and p.plan["rules"].get("remedy_draws") == "per_seed"
    key = run_key(study=study, cell=cell, seeds=seeds, train_limit=s["budget"]["train_limit"], free=free,
                  teacher=None if free else which, teacher_sha256=None if free else tsha, base=_base_part(p.base),
                  distill=dataclasses.asdict(d), optim=dataclasses.asdict(cfg),
                  **({"draws": "per_seed"} if per_seed else {}))
    if reusable(f"{root}/{study}/{cell}", outs, key, f"{study} {cell}"):
        return True
    refused = p.plan["rules"].get("machine") == "one_type_per_study" and machine_refusal(
        f"{root}/{study}", device_kind(device), study)
    if dry:
        why = f"; refused here: {refused}" if refused else ""
        print(f"{study} {cell}: would train {len(seeds)} runs (seeds {seeds}, {s['budget']['epochs']} epochs, "
              f"{s['budget']['train_limit'] or 'all'} training images){why}", flush=True)
        return True
    if refused:
        raise MachineError(refused)
    pipeline.build(c, p, seeds, device)  # every seed's teacher and initial model
    limit = s["budget"]["train_limit"]
    loaders, va, te = _loaders(p.base, limit, seeds)
    train.set_precision(p.base.precision)
    dkey = ("data", limit)
    if dkey not in data_cache:
        data_cache[dkey] = (Data.of(in_order(loaders[0]), device), Data.of(va, device), Data.of(te, device))
    trd, vad, ted = data_cache[dkey]
    ckpt_of = lambda n: checkpoint_indices(dist, n, d.tau, d.schedule, d.schedule_points)  # noqa: E731
    # groups: the cell's seeds trained together (one vmapped model), or, where the remedy draws N per seed
    # (plan v3 rules.remedy_draws), each seed alone with its own draw sequence
    for grp in ([[x] for x in seeds] if per_seed else [seeds]):
        ks = [seeds.index(x) for x in grp]
        if per_seed and _done([outs[k] for k in ks]):
            continue
        models, teacher = [c.models[k] for k in ks], c.teachers[ks[0]]
        if free:
            obj = pipeline.ode_scratch(d)
            objective = lambda n: obj  # noqa: E731
        else:
            ckey = ("cache", which, limit)
            if ckey not in data_cache:
                data_cache[ckey] = pipeline.teacher_cls_cache(teacher, in_order(loaders[0]), device).to(device)
            objs: Dict[int, Objective] = {}

            def objective(n: int, objs=objs, teacher=teacher, ckey=ckey) -> Objective:
                if n not in objs:
                    objs[n] = pipeline.distill(teacher, ckpt_of(n), d, cache=data_cache[ckey],
                                                 num_steps=None if n == d.num_steps else n)
                return objs[n]
        draws: Dict[int, List[int]] = {}

        def step_n(epoch: int, b: int, first=grp[0], draws=draws) -> int:  # the remedy's N: one draw per step,
            if len(choices) == 1:  # shared by the group's seeds, from a generator seeded by its first seed
                return choices[0]
            if epoch not in draws:
                gen = torch.Generator().manual_seed(first * 1000003 + epoch)
                draws[epoch] = torch.randint(len(choices), (len(loaders[0]),), generator=gen).tolist()
            return choices[draws[epoch][b]]

        g = new_group(models, cfg, len(loaders[0]), device)
        g.key = key if not per_seed else {**key, "group": grp}
        resume = f"{ck_root}/{study}/{cell}/last.pt" if not per_seed else f"{ck_root}/{study}/{cell}/s{grp[0]}/last.pt"
        resumed = load_resume(g, resume)
        if not fit(g, objective, [loaders[k] for k in ks], trd, vad, [ckpts[k] for k in ks], device, step_n,
                   graphs=graphs, label=f"{study} {cell}" + (f" s{grp[0]}" if per_seed else ""), deadline=deadline,
                   resume=resume, max_epochs=max_epochs):
            return False
        for j, m in enumerate(models):  # every seed at its best validation epoch
            train.load_weights(m, f"{ckpts[ks[j]]}/best.pt")
        st = Stacked(models, device)
        res = evaluate(st, ted)
        steps = sorted(set(s.get("robustness", {}).get("steps", [])) | {d.num_steps // 2, d.num_steps, 2 * d.num_steps})
        curves = {n: res if n == d.num_steps else evaluate(st, ted, num_steps=n, ks=(1,)) for n in steps}  # N: read off
        for j, x in enumerate(grp):
            k = ks[j]
            hist = g.histories[j]
            m = dict(res[j], **_selected(hist, p, len(vad.y)))
            rob = {f"n{n}": curves[n][j]["acc1"] for n in steps}
            m.update({f"acc1_{key_}": v for key_, v in rob.items()})
            m.update(robustness=rob, acc1_half_n=rob[f"n{d.num_steps // 2}"], acc1_sub_n=rob[f"n{d.num_steps}"],
                     acc1_double_n=rob[f"n{2 * d.num_steps}"])
            for name, ns in (("unseen", UNSEEN), ("inside", INSIDE), ("below", BELOW)):
                if all(f"n{n}" in rob for n in ns):
                    m[f"acc1_min_{name}"] = min(rob[f"n{n}"] for n in ns)
            m.update(study=study, cell=cell, seed=x, free=free, teacher=None if free else which,
                     teacher_sha256=None if free else tsha, tau=d.tau, checkpoints=None if free else ckpt_of(d.num_steps),
                     train_steps=d.train_steps, epochs=d.epochs, epochs_run=len(hist), train_images=loaders[k].n,
                     val_images=len(vad.y), test_images=len(ted.y), plan_hash=p.hash(study), precision=p.base.precision, trained_together=grp,
                     provenance=_provenance(t0, device, hist, resumed), run_key=g.key, resumed_key=g.resumed_key)
            _write_run(outs[k], m, hist)
    pipeline.write_json({k: key[k] for k in ("config", "parts")}, f"{root}/{study}/{cell}/key.json")
    return True


def reusable(cell_dir: str, outs: Sequence[str], key: Dict[str, Any], label: str) -> bool:
    """Whether a cell's committed runs stand for today's params: every seed's metrics.json is there and the cell's run
    key (key.json, else the first seed's recorded run_key) names today's configuration (`key["config"]`). A cell made
    under another configuration is trained again (what differs is printed); code changes are not part of the key:
    the notebooks' DVC stages depend on the code, and tests/test_train.py checks the trainer's arithmetic."""
    if not all(os.path.exists(f"{o}/metrics.json") for o in outs):
        return False
    kf = f"{cell_dir}/key.json"
    theirs = json.load(open(kf)) if os.path.exists(kf) else (json.load(open(f"{outs[0]}/metrics.json")).get("run_key")
                                                               or {})
    if theirs.get("config") == key["config"]:
        print(f"{label}: reused ({len(outs)} committed runs, run key {key['config']})", flush=True)
        return True
    print(f"{label}: committed runs made under another configuration ({_parts_differ(theirs, key)}): trained again",
          flush=True)
    return False


def notebook_cells(path: str, group: str) -> List[str]:
    """The cell names a notebook trains: 'budget' the headline cells, 'steps' those drawing N per step
    (train_steps), 'design' every other cell of any study (where a cell a user adds is trained)."""
    from . import plan as plan_mod
    from .plan import HEADLINE

    studies = [s for v in plan_mod.versions(path) for s in plan_mod.load(path, v)["studies"].values()]
    names = list(dict.fromkeys(c for s in studies for c in s["cells"]))
    steps = {c for s in studies for c, ov in s["cells"].items() if (ov or {}).get("train_steps")}
    groups = {"budget": [c for c in names if c in HEADLINE], "steps": [c for c in names if c in steps],
              "design": [c for c in names if c not in HEADLINE and c not in steps]}
    if group not in groups:
        raise ValueError(f"notebook_cells: group {group!r} is not one of {list(groups)}")
    return groups[group]


def run_plan(path: str = "params.yaml", device_name: str = "auto", graphs: bool = True,
             deadline_s: Optional[float] = None, studies: Optional[Sequence[str]] = None,
             cells: Optional[Sequence[str]] = None, shard: Tuple[int, int] = (0, 1), teacher_only: bool = False,
             into: Optional[str] = None, only_seeds: Optional[Sequence[int]] = None, dry: bool = False) -> bool:
    """Every run of the plan, in order: the teacher seeds, then each study's cells (`dry`: only say which would train;
    `shard` (i, n): only the cell groups whose index in that order is i modulo n, for n processes sharing one GPU; the
    teacher must be done first: `teacher_only`). True when all its runs are done."""
    t0 = time.time()
    i, n = shard
    if not 0 <= i < n:
        raise ValueError(f"--shard {i}/{n}: expected 0 <= i < n")
    p = Plan(path)
    device = _device_setup(p.base.precision, device_name)
    deadline = t0 + deadline_s if deadline_s else None
    print(f"plan {path}: device {device}, deadline {deadline_s or 'none'} s" + (f", shard {i}/{n}" if n > 1 else ""),
          flush=True)
    if n > 1 and not os.path.exists(f"{RESULTS}/teacher/selected.json"):
        raise FileNotFoundError(f"{RESULTS}/teacher/selected.json: shards need the teacher first (--teacher-only)")
    if dry:
        done = all(os.path.exists(f"{RESULTS}/teacher/s{x}/metrics.json") for x in p.plan["teacher"]["seeds"])
        print("teacher: " + ("reused (committed runs)" if done else "would train its seeds"), flush=True)
    elif not train_teachers(p, device, graphs, deadline):
        print("deadline: stopped during the teacher (resumes from its last.pt)", flush=True)
        return False
    if teacher_only:
        return True
    cache: Dict[Any, Any] = {}
    from . import plan as plan_mod

    plans = [p] + [Plan(path, v) for v in plan_mod.versions(path)[1:] if into is None]  # plan v2, then plan v3
    groups = [(q, study, cell) for q in plans for study, s in q.plan["studies"].items() if not studies or study in studies
              for cell in s["cells"] if not cells or cell in cells]
    for j, (q, study, cell) in enumerate(groups):
        if j % n == i:
            if not train_cell(q, study, cell, device, graphs, deadline, cache, into, only_seeds, dry=dry):
                print(f"deadline: stopped in {study} {cell} (resumes from its last.pt)", flush=True)
                return False
    print(f"plan {path}: " + ("dry run, nothing trained" if dry else "every run done"), flush=True)  # no wall time (notebook)
    return True


def main(argv: Optional[List[str]] = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Make every run of the plan in params.yaml (resumable), on the GPU if any")
    ap.add_argument("plan", nargs="?", default="params.yaml")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--no-graphs", action="store_true", help="CUDA: run every step eagerly (no CUDA graphs)")
    ap.add_argument("--deadline", type=float, default=None, help="seconds: stop after the epoch that passes it")
    ap.add_argument("--studies", nargs="*", default=None)
    ap.add_argument("--cells", nargs="*", default=None)
    ap.add_argument("--shard", default="0/1", help="I/N: this process makes cell groups I, I+N, ... (N processes)")
    ap.add_argument("--teacher-only", action="store_true", help="make the teacher seeds and stop (before shards)")
    ap.add_argument("--into", default=None, help="rerun into this folder instead of results/v2 (a machine shift)")
    ap.add_argument("--seeds", nargs="*", type=int, default=None, help="only these seeds of each study")
    ap.add_argument("--dry", action="store_true", help="say which cells would train (their runs missing or made under "
                                                      "another configuration), train nothing")
    a = ap.parse_args(argv)
    if a.into and os.path.normpath(a.into) == os.path.normpath(RESULTS):
        ap.error(f"--into {a.into}: that is the plan's own results folder; leave --into out")
    if a.seeds and not a.into:
        ap.error("--seeds needs --into: the plan's own runs train every seed of a cell together")
    try:
        shard = tuple(int(v) for v in a.shard.split("/"))
        assert len(shard) == 2
    except (ValueError, AssertionError):
        ap.error(f"--shard {a.shard!r}: expected I/N, e.g. 0/3")
    try:
        done = run_plan(a.plan, a.device, not a.no_graphs, a.deadline, a.studies, a.cells, shard,
                        a.teacher_only, a.into, a.seeds, a.dry)
    except (ResumeError, MachineError) as e:  # one line naming the file or the machine, before that group trains
        print(e, file=sys.stderr)
        return 2
    return 0 if done else 3


if __name__ == "__main__":
    raise SystemExit(main())
