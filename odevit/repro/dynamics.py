"""Dynamics and interpretability of a trained ODE-ViT: Lyapunov exponents, the Euler error bound (Prop. 1),
teacher-student distances, attention over time, CLS trajectories, adaptive halting; then 06_dynamics' figures and
computed closing summary (the notebook only calls these). Every analysis follows the model's OWN discrete dynamics
(its solver and step h = T/N), unlike the published notebook, which integrated the tangent dynamics with RK4 while
the model used Euler. Every figure says in its title which cell, seeds and how many images it rests on; compared
maps share one colour scale with a colour bar; legends sit outside the axes, so they cover no data.
"""
from __future__ import annotations

import contextlib
import functools
import math
import warnings
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
import torch.nn as nn
from matplotlib import animation
from matplotlib.figure import Figure
from scipy import stats as st
from scipy.special import logsumexp
from torch.func import jvp, vjp
from torchdiffeq import odeint

from ..layers import CenterNorm
from ..model import ODEViT
from ..solvers import get_solver
from ..teacher import hidden_states

# torch's forward-mode AD loads its decompositions on the first jvp through torch.jit.script, which warns that
# torch.jit.script is deprecated (torch's own call, not ours): load them here, once, with that one notice silenced.
with warnings.catch_warnings(), contextlib.suppress(ImportError):  # a torch without the module: nothing to load
    warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.* is deprecated", category=FutureWarning)
    from torch._decomp import decompositions_for_jvp  # noqa: F401

Step = Callable[[torch.Tensor], torch.Tensor]


@contextlib.contextmanager
def explicit_attention(model: ODEViT, float64: bool = False) -> Iterator[ODEViT]:
    """Use the explicit softmax attention (forward-mode AD through it is always defined); `float64`: and a float64
    field (float32 again after)."""
    attn = model.field.attn
    old, attn.fused = attn.fused, False
    if float64:
        model.field.double()
    try:
        yield model
    finally:
        attn.fused = old
        if float64:
            model.field.float()


def step_map(model: ODEViT, num_steps: Optional[int] = None) -> Tuple[Step, float, int]:
    """The model's one-step map X_k -> X_{k+1} (its solver, h = T/N), with h and N."""
    N = num_steps or model.num_steps
    h = model.horizon / N
    return (lambda x: model.solver.step(model.field, x, h)), h, N


# ----------------------------------------------------------------------------------------------- Lyapunov exponents
def cls_lyapunov(model: ODEViT, x0: torch.Tensor, num_steps: Optional[int] = None, seed: int = 0) -> torch.Tensor:
    """Largest finite-time exponent of the CLS row, per sample (the published quantity, made consistent): a tangent
    v, zero but for a random unit CLS row, is pushed through the model's step map with jvp; each step the growth
    n_k = ||v[CLS]|| is logged and the whole v divided by n_k, keeping its direction (the published code rescaled
    only the CLS row). lambda = sum_k log n_k / T: per unit of time (T = L). x0 (B, T, D). Returns (B,)."""
    step, h, N = step_map(model, num_steps)
    g = torch.Generator().manual_seed(seed)
    v = torch.zeros_like(x0)
    v[:, 0] = torch.randn(x0.shape[0], x0.shape[-1], generator=g).to(x0)
    v[:, 0] /= v[:, 0].norm(dim=-1, keepdim=True)
    total = torch.zeros(x0.shape[0], dtype=torch.float64, device=x0.device)
    x = x0
    with explicit_attention(model), torch.no_grad():
        for _ in range(N):
            x, v = jvp(step, (x,), (v,))
            n = v[:, 0].norm(dim=-1).clamp_min(1e-30)
            total += torch.log(n.double())
            v = v / n[:, None, None]
    return (total / (N * h)).float()


# --------------------------------------------------------------------------------------- Proposition 1: Euler bound
LN10 = math.log(10.0)


def log_prop1_bound(lipschitz: torch.Tensor, t: torch.Tensor, h: float, sup_acc: torch.Tensor) -> torch.Tensor:
    """Natural log of Proposition 1's bound (e^{L t_n} - 1) / (2 L) * h * sup||X''|| at every t_n, float64, finite at
    any L t: log(e^{L t_n} - 1) - log(2 L) + log(h M) (-> log(t_n h M / 2) as L -> 0; -inf at t_n = 0, where the
    bound is 0). lipschitz, sup_acc (B,); t (N+1,). Returns (B, N+1); compare in log space."""
    L = torch.as_tensor(lipschitz, dtype=torch.float64).reshape(-1, 1)
    M = torch.as_tensor(sup_acc, dtype=torch.float64).reshape(-1, 1)
    t = torch.as_tensor(t, dtype=torch.float64).reshape(1, -1)
    Ls = L.clamp_min(1e-300)
    Lt, ln2 = Ls * t, math.log(2.0)  # log(e^x - 1) without overflow: x + log1p(-e^-x) above log 2, log(expm1) below
    log_expm1 = torch.where(Lt > ln2, Lt + torch.log1p(-torch.exp(-Lt.clamp_min(ln2))),
                            torch.log(torch.expm1(Lt.clamp_max(ln2))))
    growth = torch.where(L > 0, log_expm1 - torch.log(2 * Ls), torch.log(t / 2))
    return growth + math.log(h) + torch.log(M)


@torch.no_grad()
def convergence_study(model: ODEViT, x0: torch.Tensor, steps: Sequence[int], lipschitz: float = 0.5,
                      solver: str = "parallel", measured_lipschitz: Optional[float] = None) -> Dict[str, object]:
    """Error ||X_N - X(T)|| (mean over samples; X(T) by dopri5 in float64, tolerances 1e-7) against the Euler bound at
    T, for N in `steps`, along `solver` (default 'parallel': unsplit Euler, the scheme Prop. 1 bounds). M = sup_k
    ||X_{k+1} - 2 X_k + X_{k-1}|| / h^2 over the N+1 states (the published code's empirical variant). Per N: error,
    log10 of the mean bound with `lipschitz` (and the bound, inf past 1e300) and, if given, with `measured_lipschitz`
    (log space: finite at any L T). Returns {"rows", "order": slope of log error vs log h, 3 smallest h}."""
    with explicit_attention(model, float64=True):
        t = torch.tensor([0.0, model.horizon], dtype=torch.float64)
        ref = odeint(model.field, x0.double(), t, method="dopri5", rtol=1e-7, atol=1e-7)[-1].float()
    rows = []
    sol = get_solver(solver)
    t_end = torch.tensor([model.horizon])
    for N in steps:
        states = sol.integrate(model.field, x0, N, model.horizon)
        err = (states[-1] - ref).flatten(1).norm(dim=-1)
        h = model.horizon / N
        row = {"N": N, "h": h, "error": err.mean().item()}
        X = torch.stack([s.float() for s in states])  # (N+1, B, T, D)
        acc = (X[2:] - 2 * X[1:-1] + X[:-2]) / h ** 2  # Frobenius norm over tokens x features, sup over k: M (B,)
        M = acc.flatten(2).norm(dim=-1).amax(0).double().cpu() if N >= 2 else None
        for key, L in (("", lipschitz), ("_measured_L", measured_lipschitz)):
            if key and L is None:
                continue
            lb = None if M is None else log_prop1_bound(torch.full_like(M, float(L)), t_end, h, M)[:, 0].numpy()
            row[f"log10_bound{key}"] = math.nan if lb is None else float((logsumexp(lb) - math.log(len(lb))) / LN10)
        row["bound"] = 10.0 ** row["log10_bound"] if row["log10_bound"] < 300 else math.inf  # see log10_bound
        rows.append(row)
    fine = sorted(rows, key=lambda r: r["h"])[:3]  # the asymptotic regime (the 55k student's error rises at N = 2 to 4)
    order = float(np.polyfit(np.log([r["h"] for r in fine]), np.log([r["error"] for r in fine]), 1)[0])
    return {"rows": rows, "order": order}


# ----------------------------------------------------------------------------------------------- attention / PCA
@torch.no_grad()
def cls_attention_over_time(model: ODEViT, x: torch.Tensor) -> torch.Tensor:
    """CLS -> patch attention of every step, (N, B, H, grid, grid); register columns dropped (rows not renormalised)."""
    out = model.forward_trajectory(x, return_attn=True)
    M = model.num_patches
    g = int(round(M ** 0.5))
    A = torch.stack([a[:, :, 0, 1 : 1 + M] for a in out["attn"]])  # (N, B, H, M)
    return A.reshape(*A.shape[:3], g, g)


def pca_2d_explained(*groups: torch.Tensor) -> Tuple[List[np.ndarray], np.ndarray]:
    """Project several (n_i, D) point sets on the top-2 principal axes of their union; also the fraction of the
    union's variance each axis explains, (2,)."""
    X = torch.cat([g.double() for g in groups])
    mu = X.mean(0, keepdim=True)
    _, S, V = torch.linalg.svd(X - mu, full_matrices=False)
    explained = (S[:2] ** 2 / (S ** 2).sum()).numpy()
    return [((g.double() - mu) @ V[:2].T).numpy() for g in groups], explained


# ---------------------------------------------------------------------------------------------- adaptive halting
@torch.no_grad()
def step_trace(model: ODEViT, x: torch.Tensor, num_steps: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per step k = 1..N: CLS increment ||X_k - X_{k-1}||_CLS (N, B) and the prediction from X_k (N, B)."""
    states = model.forward_trajectory(x, num_steps=num_steps)["states"]
    inc = torch.stack([(b[:, 0] - a[:, 0]).norm(dim=-1) for a, b in zip(states[:-1], states[1:])])
    pred = torch.stack([model.forward_head(model.norm(s)).argmax(-1) for s in states[1:]])
    return inc, pred


def halting_steps(inc: torch.Tensor, pred: torch.Tensor, eps: float, stable: int = 0) -> torch.Tensor:
    """First step k (1-based) at which a sample halts: its CLS increment < eps, or (stable > 0) its prediction has
    not changed for `stable` steps; N if never. Integration is per sample, so halting a sample early gives exactly
    the prediction it had at that step. Returns (B,) long."""
    stop = inc < eps
    if stable > 0:
        same = torch.zeros_like(pred, dtype=torch.long)
        for k in range(1, inc.shape[0]):
            same[k] = torch.where(pred[k] == pred[k - 1], same[k - 1] + 1, 0)
        stop |= same >= stable
    stop[-1] = True
    return stop.float().argmax(0) + 1


@torch.no_grad()
# ------------------------------------------------------------------- Proposition 1 with a measured Lipschitz constant
def jacobian_sigma_max(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, iters: int = 20,
                       seed: int = 0) -> torch.Tensor:
    """Largest singular value of the Jacobian of f at x, per sample (f acts on each sample of x (B, ...)
    independently), by power iteration on J^T J with jvp and vjp. A lower bound on f's Lipschitz constant
    near x (the supremum of sigma_max over a region is the constant there). Returns (B,)."""
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(x.shape, generator=g, dtype=x.dtype).to(x.device)
    v = v / v.flatten(1).norm(dim=1).view(-1, *[1] * (x.dim() - 1))
    _, pullback = vjp(f, x)
    sigma = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
    for _ in range(iters):
        _, u = jvp(f, (x,), (v,))  # J v
        sigma = u.flatten(1).norm(dim=1)
        (w,) = pullback(u)  # J^T J v
        v = w / w.flatten(1).norm(dim=1).clamp_min(1e-30).view(-1, *[1] * (x.dim() - 1))
    return sigma.detach()


def mlp_lipschitz_upper(model: ODEViT) -> float:
    """An upper bound on the Lipschitz constant of F from the weights: Lip(CenterNorm) * ||W1|| * max|GELU'| *
    ||W2||, with Lip(CenterNorm) = max|gamma| * D/(D-1) (centring is a projection, norm 1) and max GELU' = 1.129.
    (G has no such bound: dot-product attention is not globally Lipschitz, Kim et al. 2021.)"""
    f = model.field
    n = f.norm2
    lip_norm = float(n.weight.detach().abs().max()) * n.scale if isinstance(n, CenterNorm) else math.inf
    w1 = torch.linalg.matrix_norm(f.mlp.fc1.weight.detach().double(), ord=2).item()
    w2 = torch.linalg.matrix_norm(f.mlp.fc2.weight.detach().double(), ord=2).item()
    return lip_norm * w1 * 1.1289 * w2


@torch.no_grad()
def prop1_per_step(model: ODEViT, x0: torch.Tensor, lipschitz: Optional[float] = None, iters: int = 20,
                   rtol: float = 1e-7, atol: float = 1e-7, solver: Optional[str] = None,
                   m_refine: int = 4) -> Dict[str, np.ndarray]:
    """Proposition 1 at every step n, in float64, along the model's own solver and along unsplit Euler (the
    scheme the proposition is stated for), with the model's N and h = T/N:
        error_n = ||X_n - X(t_n)||   (X(t) by dopri5 at every t_n; Frobenius norm over tokens x features)
        bound_n = (e^{L t_n} - 1) / (2 L) * h * M,   M = sup_t ||X''(t)|| along the exact solution,
    X'' = J_psi(X) psi(X) exact (by jvp, psi = F + G), its sup on a grid `m_refine` times finer than the steps. L per
    sample = the largest sigma_max(J_psi) met along the reference and the scheme's states (power iteration: a measured
    lower bound on the local Lipschitz constant; the proof needs L on the region between them), or the given `lipschitz`
    for both schemes. Returns (B, N+1) arrays error, error_parallel, log10_bound (never inf), log10_bound_parallel; (B,)
    L, L_parallel, M; sigma (B, S) every sigma_max met; t (N+1,); `solver` (the name)."""
    N, T = model.num_steps, model.horizon
    h = T / N
    name = solver or model.solver_name
    with explicit_attention(model, float64=True):
        field = model.field
        x0 = x0.double()
        t = torch.linspace(0.0, T, N + 1, dtype=torch.float64, device=x0.device)
        tf = torch.linspace(0.0, T, m_refine * N + 1, dtype=torch.float64, device=x0.device)
        ref_fine = odeint(field, x0, tf, method="dopri5", rtol=rtol, atol=atol)  # (m N + 1, B, T, D)
        ref = ref_fine[::m_refine]  # X(t_n)
        own = get_solver(name).integrate(field, x0, N, T)
        par = get_solver("parallel").integrate(field, x0, N, T)
        psi = functools.partial(field, None)  # psi(X) = F(X) + G(X)
        M = torch.zeros(x0.shape[0], dtype=torch.float64, device=x0.device)
        for X in ref_fine:
            _, acc = jvp(psi, (X,), (psi(X),))  # X'' = J psi
            M = torch.maximum(M, acc.flatten(1).norm(dim=1))

        def sigmas(states: Sequence[torch.Tensor]) -> torch.Tensor:
            with torch.enable_grad():
                return torch.stack([jacobian_sigma_max(psi, X, iters) for X in states], 1)  # (B, S)

        s_ref, s_own, s_par = sigmas(ref), sigmas(own[1:]), sigmas(par[1:])
        L_own = torch.maximum(s_ref.amax(1), s_own.amax(1))
        L_par = torch.maximum(s_ref.amax(1), s_par.amax(1))
        out = {}
        for key, states, L in (("", own, L_own), ("_parallel", par, L_par)):
            Lb = L if lipschitz is None else torch.full_like(L, float(lipschitz))
            err = torch.stack([(e - r).flatten(1).norm(dim=1) for e, r in zip(states, ref)], 1)  # (B, N+1)
            out[f"error{key}"] = err.cpu().numpy()
            out[f"log10_bound{key}"] = (log_prop1_bound(Lb.cpu(), t.cpu(), h, M.cpu()) / LN10).numpy()
    return {**out, "L": L_own.cpu().numpy(), "L_parallel": L_par.cpu().numpy(), "M": M.cpu().numpy(),
            "sigma": torch.cat([s_ref, s_own, s_par], 1).cpu().numpy(), "t": t.cpu().numpy(), "solver": name}


def _log10(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log10(x)


def _pow10(x: float) -> Optional[float]:
    """10^x as a float, None where it would overflow (x >= 308: keep the log10)."""
    return 10.0 ** x if x < 308 or math.isnan(x) else None


def prop1_summary(error: np.ndarray, log10_bound: np.ndarray) -> Dict[str, float]:
    """Over images and steps n >= 1, compared in log10: the fraction of (image, step) pairs with error <= bound
    (`holds` when all are), the tightness bound / error (min, median, and their log10; pairs with error 0 left out),
    `vacuous` when the median pair has bound >= 10 x error (informative at a few pairs at most), the largest bound."""
    le, lb = _log10(error[:, 1:]), log10_bound[:, 1:]
    ratio = (lb - le)[np.isfinite(le)]  # log10 tightness
    lo = float(ratio.min()) if ratio.size else math.nan
    med = float(np.median(ratio)) if ratio.size else math.nan
    within = float((le <= lb).mean())
    return {"fraction_within": within, "holds": bool(within == 1.0), "log10_tightness_min": lo,
            "log10_tightness_median": med, "tightness_min": _pow10(lo), "tightness_median": _pow10(med),
            "vacuous": bool(med >= 1.0), "log10_bound_max": float(lb.max())}


# ------------------------------------------------------------------- 06_dynamics: tables over (cell, seed) models
# Each returns tidy frames (one row per point; `series` names the line a point belongs to, for the figures and for
# `dvc plots`) and the metrics it adds to results/06_dynamics/metrics.json, keyed "seed<s>".
def seed_key(seed: int) -> str:
    return f"seed{seed}"


STABLE_DIGITS = 4  # what 06_dynamics writes and draws: float noise between CPU kinds (≤ 1e-6 relative) stays below it


def stable(obj, digits: int = STABLE_DIGITS):
    """`obj` with every float (in tuples, lists, dicts, DataFrames, arrays, tensors) rounded to `digits` significant
    digits, in decimal: the same on every machine. 06_dynamics rounds each study's results with it before writing or
    drawing them, so CPU kinds' float32 noise (AMD against Intel: up to 5e-7 relative) leaves its files identical."""
    sig = np.vectorize(lambda v: float(f"{v:.{digits - 1}e}") if math.isfinite(v) and v != 0.0 else v, otypes=[float])
    if isinstance(obj, (float, np.floating)):
        return float(sig(float(obj)))
    if isinstance(obj, (dict, list, tuple)):
        items = [(k, stable(v, digits)) for k, v in (obj.items() if isinstance(obj, dict) else enumerate(obj))]
        return dict(items) if isinstance(obj, dict) else type(obj)(v for _, v in items)
    if isinstance(obj, pd.DataFrame):
        return obj.apply(lambda c: c.map(lambda v: float(sig(v))) if pd.api.types.is_float_dtype(c) else c)
    if isinstance(obj, torch.Tensor) and obj.is_floating_point():
        return torch.from_numpy(stable(obj.detach().cpu().numpy(), digits)).to(obj.dtype)
    if isinstance(obj, np.ndarray) and np.issubdtype(obj.dtype, np.floating):
        return sig(obj.astype(np.float64)).astype(obj.dtype) if obj.size else obj
    return obj  # bool, int, str, None, integer tensors: as they are


@torch.no_grad()
def lyapunov_table(model: ODEViT, loader: Iterable, device: torch.device) -> pd.DataFrame:
    """Per test image: label, prediction correct?, largest finite-time CLS exponent (`cls_lyapunov`)."""
    rows = []
    for x, y in loader:
        x = x.to(device)
        pred = model(x).argmax(-1).cpu()
        lam = cls_lyapunov(model, model.embed(x)).cpu()
        rows += [{"label": int(t), "correct": bool(p == t), "lyapunov": float(l)} for t, p, l in zip(y, pred, lam)]
    return pd.DataFrame(rows)


def lyapunov_study(models: Dict[Tuple[str, int], ODEViT], loader: Iterable,
                   device: torch.device) -> Tuple[pd.DataFrame, pd.DataFrame, Dict[str, Dict[str, dict]]]:
    """Per image (every model): the CLS exponent and correctness; per (cell, seed, class): mean exponent and Acc@1
    (the paper's Fig. 4); metrics[cell][seed<s>]: point-biserial r of exponent vs correctness with its Fisher-z
    95 % CI, AUC of the exponent for telling wrong from correct, mean exponent."""
    per_image = pd.concat([lyapunov_table(m, loader, device).assign(cell=c, seed=s) for (c, s), m in models.items()])
    metrics: Dict[str, Dict[str, dict]] = {}
    for (c, s), g in per_image.groupby(["cell", "seed"]):
        metrics.setdefault(c, {})[seed_key(s)] = {**point_biserial(g.lyapunov, g.correct),
                                                  "auc": auc(g.lyapunov, ~g.correct), "mean": float(g.lyapunov.mean())}
    return per_image, per_class_table(per_image), metrics


def per_class_table(per_image: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, seed, class) of a per-image table (columns cell, seed, label, correct, lyapunov): the mean
    exponent, the class Acc@1 and the number of images; `series` = the cell (for `dvc plots`)."""
    return (per_image.groupby(["cell", "seed", "label"])
            .agg(lyapunov=("lyapunov", "mean"), acc1=("correct", "mean"), n=("correct", "size"))
            .reset_index().assign(series=lambda t: t.cell))


def lyapunov_class_correlation(per_class: pd.DataFrame) -> Dict[str, Dict[str, dict]]:
    """The paper's unit (Fig. 4 caption: per class): per (cell, seed), Pearson r of the class mean exponent vs the
    class Acc@1 over the classes, its two-sided p value and n_classes: {cell: {"seed<s>": {r, p_value, n_classes}}}.
    r < 0 is the paper's reading (classes with larger exponents are classified worse); r and p are NaN with fewer
    than 3 classes or a constant column."""
    out: Dict[str, Dict[str, dict]] = {}
    for (c, s), g in per_class.groupby(["cell", "seed"]):
        n = len(g)
        if n < 3 or g.lyapunov.nunique() < 2 or g.acc1.nunique() < 2:
            r, p = math.nan, math.nan
        else:
            res = st.pearsonr(g.lyapunov.to_numpy(np.float64), g.acc1.to_numpy(np.float64))
            r, p = float(res.statistic), float(res.pvalue)
        out.setdefault(c, {})[seed_key(s)] = {"r": r, "p_value": p, "n_classes": int(n)}
    return out


def _log10_mean(log10_values: np.ndarray, axis: int = 0) -> np.ndarray:
    """log10 of the mean of 10^values along `axis`, without leaving log space (logsumexp)."""
    return (logsumexp(log10_values * LN10, axis=axis) - math.log(log10_values.shape[axis])) / LN10


def prop1_study(models: Dict[int, ODEViT], x: torch.Tensor, iters: int,
                paper_lipschitz: float) -> Tuple[pd.DataFrame, pd.DataFrame, Dict[str, dict]]:
    """`prop1_per_step` for each seed's model on the same images. per_step (seed, step n >= 1, series; log10 of the
    mean over the images; step 0, where error and bound are 0, left out): 'error' and 'bound_measured_L' (model's
    solver), 'error_parallel' and 'bound_parallel_measured_L' (unsplit Euler), 'bound_paper_L' (L = paper_lipschitz;
    M is the exact solution's, so it serves both schemes). tightness (seed, step, series 'min' / 'median' over the
    images): log10(bound / error), model's solver. metrics["seed<s>"]: `prop1_summary` (model's solver, measured L),
    fraction_within_parallel, tightness_min_parallel, fraction_within_paper_L, L_max / L_median (per-image largest
    sigma_max), sigma_max_median (of every sigma_max met: L = 1/2 is no Lipschitz constant of psi when it is
    larger), M_max, paper_L, mlp_lipschitz_upper, solver, n_images."""
    rows, tight, metrics = [], [], {}
    for s, m in models.items():
        x0 = m.embed(x).detach()
        r = prop1_per_step(m, x0, iters=iters)
        h = m.horizon / m.num_steps
        lb_paper = (log_prop1_bound(torch.full((len(r["M"]),), float(paper_lipschitz)), torch.from_numpy(r["t"]), h,
                                    torch.from_numpy(r["M"])) / LN10).numpy()
        own = prop1_summary(r["error"], r["log10_bound"])
        par = prop1_summary(r["error_parallel"], r["log10_bound_parallel"])
        metrics[seed_key(s)] = {
            **own, "fraction_within_parallel": par["fraction_within"], "tightness_min_parallel": par["tightness_min"],
            "fraction_within_paper_L": prop1_summary(r["error"], lb_paper)["fraction_within"],
            "L_max": float(r["L"].max()), "L_median": float(np.median(r["L"])),
            "sigma_max_median": float(np.median(r["sigma"])), "M_max": float(r["M"].max()),
            "paper_L": float(paper_lipschitz), "mlp_lipschitz_upper": mlp_lipschitz_upper(m), "solver": r["solver"],
            "n_images": int(x.shape[0])}
        series = {"error": _log10(r["error"]), "bound_measured_L": r["log10_bound"],
                  "error_parallel": _log10(r["error_parallel"]), "bound_parallel_measured_L": r["log10_bound_parallel"],
                  "bound_paper_L": lb_paper}
        means = {k: _log10_mean(v) for k, v in series.items()}
        ratio = r["log10_bound"][:, 1:] - _log10(r["error"][:, 1:])  # (B, N), log10 tightness of steps 1..N
        for n in range(1, r["error"].shape[1]):
            t_n = float(r["t"][n])
            rows += [{"seed": s, "step": n, "t": t_n, "series": k, "log10_value": float(v[n])}
                     for k, v in means.items()]
            ok = ratio[:, n - 1][np.isfinite(ratio[:, n - 1])]
            if ok.size:
                tight += [{"seed": s, "step": n, "t": t_n, "series": "min", "log10_tightness": float(ok.min())},
                          {"seed": s, "step": n, "t": t_n, "series": "median", "log10_tightness": float(np.median(ok))}]
    return pd.DataFrame(rows), pd.DataFrame(tight), metrics


def convergence_table(model: ODEViT, x0: torch.Tensor, steps: Sequence[int], lipschitz: float,
                      measured_lipschitz: Optional[float] = None) -> Tuple[pd.DataFrame, Dict[str, float]]:
    """`convergence_study` for unsplit Euler and for the model's own solver (explicit attention, as in training):
    series 'euler_parallel' and 'model_<solver>' (error, bound, log10_bound, log10_bound_measured_L per N); the
    observed orders."""
    out, orders = [], {}
    with explicit_attention(model):
        for series, solver in (("euler_parallel", "parallel"), (f"model_{model.solver_name}", model.solver_name)):
            r = convergence_study(model, x0, steps, lipschitz=lipschitz, solver=solver,
                                  measured_lipschitz=measured_lipschitz)
            out.append(pd.DataFrame(r["rows"]).assign(series=series))
            orders[series] = r["order"]
    return pd.concat(out, ignore_index=True), {"order_parallel": orders["euler_parallel"],
                                               "order_model_solver": orders[f"model_{model.solver_name}"]}


@torch.no_grad()
def fidelity_study(models: Dict[int, ODEViT], teacher: nn.Module, loader: Iterable, checkpoints: Sequence[int],
                   device: torch.device) -> Tuple[pd.DataFrame, Dict[str, float]]:
    """Per (seed, layer l), means over the loader's images of the CLS token: series 'student' ||X_{c_l} - h_l|| /
    ||h_l|| and 'teacher_step' (the teacher's own step) ||h_l - h_{l-1}|| / ||h_l||; metrics: both means over seeds
    and layers. A student well below the teacher's relative step passes through h_l more closely than the
    teacher's neighbouring layer does."""
    rows = []
    for s, m in models.items():
        rel_s, rel_t, n = 0.0, 0.0, 0
        for x, _ in loader:
            x = x.to(device)
            states = m.forward_trajectory(x)["states"]
            hs = hidden_states(teacher, x)
            norm = torch.stack([h[:, 0].norm(dim=-1) for h in hs[1:]], 1)  # (B, L)
            ds = torch.stack([(states[c][:, 0] - h[:, 0]).norm(dim=-1) for c, h in zip(checkpoints, hs[1:])], 1)
            dt = torch.stack([(b[:, 0] - a[:, 0]).norm(dim=-1) for a, b in zip(hs[:-1], hs[1:])], 1)
            rel_s = rel_s + (ds / norm).sum(0)
            rel_t = rel_t + (dt / norm).sum(0)
            n += x.shape[0]
        for series, rel in (("student", rel_s), ("teacher_step", rel_t)):
            rows += [{"seed": s, "layer": l + 1, "checkpoint": checkpoints[l], "series": series, "relative_distance": v}
                     for l, v in enumerate((rel / n).tolist())]
    fid = pd.DataFrame(rows)
    means = fid.groupby("series").relative_distance.mean()
    return fid, {"student_rel_mean": float(means["student"]), "teacher_step_rel_mean": float(means["teacher_step"])}


@torch.no_grad()
def halting_study(model: ODEViT, loader: Iterable, device: torch.device, rel_eps: Sequence[float], stable: int,
                  tolerance_pts: float = 0.3) -> Tuple[pd.DataFrame, Dict[str, object]]:
    """Adaptive halting on every image of the loader: stop when the increment ||X_{k+1} - X_k|| falls below
    eps = rel_eps x its median over all steps and images (series 'increment'), or also when the prediction has
    been stable for `stable` steps (series 'increment_or_stable'). Per rule and eps: mean evaluations of psi,
    saving, Acc@1 and its loss against all N steps; metrics: the largest saving within `tolerance_pts`."""
    traces = [(*step_trace(model, xb.to(device)), yb) for xb, yb in loader]  # (inc, pred, labels) per batch
    inc, pred = (torch.cat([tr[i].cpu() for tr in traces], 1) for i in (0, 1))
    y = torch.cat([tr[2] for tr in traces])
    med, N = float(inc.median()), inc.shape[0]
    full_acc = float((pred[-1] == y).float().mean())
    rows = []
    for rel in rel_eps:
        for stab in sorted({0, stable}):
            k = halting_steps(inc, pred, rel * med, stab)
            acc = float((pred[k - 1, torch.arange(len(y))] == y).float().mean())
            rows.append({"series": "increment_or_stable" if stab else "increment", "rel_eps": rel, "stable": stab,
                         "mean_evals": k.float().mean().item(), "saving": 1 - k.float().mean().item() / N,
                         "acc1": acc, "acc_loss_pts": (full_acc - acc) * 100})
    halt = pd.DataFrame(rows)
    best = halt[halt.acc_loss_pts <= tolerance_pts].sort_values("saving", ascending=False)
    return halt, {"full_acc1": full_acc, "N": N, "tolerance_pts": tolerance_pts,
                  "best_within_tolerance": best.iloc[0].to_dict() if len(best) else None}


# --- effect sizes of a per-sample quantity against correctness (the Lyapunov exponent against a correct answer)
def point_biserial(values: Sequence[float], flag: Sequence[bool], level: float = 0.95) -> Dict[str, float]:
    """Correlation of a per-sample quantity with a binary flag (e.g. correct): r, its p value, and the Fisher-z
    interval (z = atanh r ± z_q / sqrt(n - 3))."""
    v, f = np.asarray(values, dtype=np.float64), np.asarray(flag, dtype=np.float64)
    n = len(v)
    if n < 4 or f.min() == f.max():
        return {"n": n, "r": math.nan, "p_value": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    r, p = st.pointbiserialr(f, v)
    half = float(st.norm.ppf(0.5 + level / 2)) / math.sqrt(n - 3)
    z = math.atanh(max(min(r, 1 - 1e-12), -1 + 1e-12))
    return {"n": n, "r": float(r), "p_value": float(p), "ci_low": math.tanh(z - half), "ci_high": math.tanh(z + half)}


def auc(values: Sequence[float], flag: Sequence[bool]) -> float:
    """P(value of a flagged sample > value of an unflagged one), ties counted half (scipy's Mann-Whitney U / n1 n0)."""
    v, f = np.asarray(values, dtype=np.float64), np.asarray(flag, dtype=bool)
    return float(st.mannwhitneyu(v[f], v[~f]).statistic / (f.sum() * (~f).sum())) if f.any() and (~f).any() else math.nan


# --- the figures and the closing summary (06_dynamics) ------------------------------------------------------------
def seeds_label(seeds: Sequence[int]) -> str:
    """'seed 0' or 'seeds 0, 1, 2'."""
    seeds = sorted(seeds)
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s) for s in seeds)


def lyapunov_figure(per_image: pd.DataFrame, per_class: pd.DataFrame, class_corr: Dict[str, Dict[str, dict]],
                    reference: str, seed: int) -> Figure:
    """Left: the exponent of correct vs wrong images (reference cell, one seed). Right: per class (the unit of
    the paper's Fig. 4), every cell (colour) and seed (marker), with Pearson r per (cell, seed) in the legend."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), constrained_layout=True)
    g0 = per_image[(per_image.cell == reference) & (per_image.seed == seed)]
    sns.histplot(data=g0.assign(prediction=g0.correct.map({True: "correct", False: "wrong"})), x="lyapunov",
                 hue="prediction", hue_order=["correct", "wrong"], stat="density", common_norm=False,
                 element="step", ax=axes[0])
    axes[0].set(xlabel="CLS exponent λ (per unit time)",
                title=f"per image: {reference}, seed {seed}, {len(g0)} test images")
    sns.move_legend(axes[0], "upper right", frameon=False)
    sns.scatterplot(data=per_class, x="lyapunov", y="acc1", hue="cell", style="seed", s=45, ax=axes[1])
    h, lab = axes[1].get_legend_handles_labels()
    axes[1].get_legend().remove()
    rs = [f"{c} s{s}: r = {v['r']:+.2f} (p = {v['p_value']:.2g})" for c, d in class_corr.items() for s, v in
          ((k.removeprefix("seed"), v) for k, v in d.items())]
    axes[1].legend(h, lab, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    axes[1].text(1.02, 0.0, "Pearson r, class exponent\nvs class Acc@1:\n" + "\n".join(rs), fontsize=8, va="bottom",
                 transform=axes[1].transAxes)
    axes[1].set(xlabel="class mean CLS exponent λ", ylabel="class Acc@1")
    cells = sorted(per_class.cell.unique())
    n_img = int(per_class[(per_class.cell == cells[0]) & (per_class.seed == per_class.seed.min())].n.sum())
    axes[1].set_title(f"per class (Fig. 4 unit): {', '.join(cells)}; {seeds_label(per_class.seed.unique())}; "
                      f"{n_img} images each", fontsize=10)
    return fig


PROP1_STYLE = {  # series -> (label, colour, dashes)
    "error": ("error, model's solver", "C0", ""),
    "bound_measured_L": ("bound, measured L (model's solver)", "C0", (4, 2)),
    "error_parallel": ("error, parallel Euler", "C1", ""),
    "bound_parallel_measured_L": ("bound, measured L (parallel Euler)", "C1", (4, 2)),
    "bound_paper_L": ("bound, L = 1/2 (published code)", "C2", (1, 1.5))}


def prop1_figure(per_step: pd.DataFrame, tight: pd.DataFrame, metrics: Dict[str, dict], cell: str) -> Figure:
    """Left: log10 of the errors and of every bound per step (mean over the images), one line per seed and
    series. Middle: the same without the measured-L bounds (the errors and the L = 1/2 bound on their own scale).
    Right: log10(bound / error) of the model's solver with the measured L (min and median over the images); below
    0 the bound is violated, above 1 it holds but is vacuous (>= 10x the error). One legend, below the panels."""
    v0 = next(iter(metrics.values()))
    seeds = sorted(per_step.seed.unique())
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), constrained_layout=True)
    markers = ["o", "s", "^", "D", "v"]
    order = ["error_parallel", "bound_parallel_measured_L", "error", "bound_measured_L", "bound_paper_L"]
    for ax, series_shown in ((axes[0], order), (axes[1], [k for k in order if "measured" not in k])):
        for series in series_shown:  # parallel first, wider and paler: the model's solver stays visible on top
            label, colour, dash = PROP1_STYLE[series]
            wide = "parallel" in series
            for j, s in enumerate(seeds):
                d = per_step[(per_step.series == series) & (per_step.seed == s)]
                ax.plot(d.step, d.log10_value, color=colour, dashes=dash or (None, None), marker=markers[j % 5],
                        ms=3.5, lw=3 if wide else 1.3, alpha=0.55 if wide else 1.0,
                        label=label if (j == 0 and ax is axes[0]) else None)
        ax.set(xlabel="step n", ylabel="log10 ‖X_n − X(t_n)‖  or  log10 bound_n")
    axes[0].set_title("errors and bounds (log10, mean over images)", fontsize=10)
    axes[1].set_title("zoom: errors and the L = 1/2 bound", fontsize=10)
    for j, s in enumerate(seeds):
        axes[0].plot([], [], color="gray", marker=markers[j % 5], ls="none",
                     label=f"seed {s}: L_max = {metrics[f'seed{s}']['L_max']:.1f}")
    ax = axes[2]
    for j, s in enumerate(seeds):
        for q, ls in (("min", "-"), ("median", "--")):
            d = tight[(tight.seed == s) & (tight.series == q)]
            ax.plot(d.step, d.log10_tightness, ls, color="C4", marker=markers[j % 5], ms=3.5,
                    label=f"tightness, {q} over images" if j == 0 else None)
    ax.axhline(0, color="red", lw=1); ax.axhline(1, color="gray", lw=1, ls=":")
    lo, hi = ax.get_ylim()
    ax.set_ylim(min(lo, -0.5), max(hi, 1.5))
    ax.text(0.99, 0, "violated below ", color="red", va="top", ha="right", fontsize=8,
            transform=ax.get_yaxis_transform())
    ax.text(0.99, 1, "vacuous above (≥ 10×) ", color="gray", va="bottom", ha="right", fontsize=8,
            transform=ax.get_yaxis_transform())
    ax.set(xlabel="step n", ylabel="log10(bound / error), measured L")
    ax.set_title("tightness, model's solver", fontsize=10)
    (h0, l0), (h2, l2) = axes[0].get_legend_handles_labels(), ax.get_legend_handles_labels()
    fig.legend(h0 + h2, l0 + l2, loc="outside lower center", ncol=4, frameon=False, fontsize=8)
    fig.suptitle(f"Proposition 1 at every step: {cell}, {seeds_label(seeds)}, {v0['n_images']} images each, model's "
                 f"solver {v0['solver']} (parallel Euler: wide pale lines)", fontsize=11)
    return fig


def euler_bound_figure(table: pd.DataFrame, orders: Dict[str, float], cell: str, seed: int, n_images: int,
                       paper_L: float, measured_L: Optional[float]) -> Figure:
    """Error at T vs N (log-log) for each scheme, with the Prop. 1 bound at T beside it (same colour, dashed; L =
    `paper_L`, M by central differences). The measured-L bound is far off this scale: its log10 range is written in
    the title, not drawn."""
    fig, ax = plt.subplots(figsize=(8.5, 4.2), constrained_layout=True)
    for k, (series, d) in enumerate(table.groupby("series", sort=False)):
        ax.plot(d.N, d.error, "o-", color=f"C{k}", label=f"error, {series}")
        ok = d.log10_bound.notna()
        ax.plot(d.N[ok], 10.0 ** d.log10_bound[ok], "s--", color=f"C{k}", ms=4,
                label=f"bound, L = {paper_L:g}, {series}")
    ax.set_xscale("log", base=2); ax.set_yscale("log")
    ax.set(xlabel="N (steps)", ylabel="‖X_N − X(T)‖ and its bound (mean over images)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    t = (f"{cell}, seed {seed}, {n_images} images; observed order over the 3 finest N "
         f"{abs(orders['order_parallel']):.2f} (parallel), {abs(orders['order_model_solver']):.2f} (model's solver)")
    if measured_L is not None and "log10_bound_measured_L" in table:
        b = table.log10_bound_measured_L.dropna()
        t += f"\nwith the measured L = {measured_L:.1f} the bound is 10^{b.min():.0f} to 10^{b.max():.0f} (off scale)"
    ax.set_title(t, fontsize=10)
    return fig


def fidelity_figure(fid: pd.DataFrame, cell: str, n_images: int) -> Figure:
    """The student's and the teacher's own step's relative CLS distances per teacher layer (`fidelity_study`)."""
    fig, ax = plt.subplots(figsize=(8.5, 3.6), constrained_layout=True)
    names = {"student": "student ‖X_c − h_l‖ / ‖h_l‖", "teacher_step": "teacher ‖h_l − h_(l−1)‖ / ‖h_l‖"}
    sns.lineplot(data=fid.assign(series=fid.series.map(names)), x="layer", y="relative_distance", hue="series",
                 style="series", markers=True, errorbar="sd", ax=ax)
    ax.set(ylabel="relative distance (CLS)", xlabel="teacher layer l")
    band = " (band: sd over seeds)" if fid.seed.nunique() > 1 else ""
    ax.set_title(f"fidelity: {cell}, {seeds_label(fid.seed.unique())}{band}, {n_images} images each", fontsize=10)
    if ax.get_legend() is not None:
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    return fig


HALTING_RULES = {"increment": "halt when ‖X_(k+1) − X_k‖ < ε",
                 "increment_or_stable": "… or when the prediction has not changed for {stable} steps"}


def halting_figure(halt: pd.DataFrame, metrics: dict, cell: str, seed: int, n_images: int,
                   seeds: Optional[Sequence[int]] = None) -> Figure:
    """Test Acc@1 (%) against the mean evaluations of ψ per image, one line per halting rule (`halting_study`'s
    series, named by `HALTING_RULES`), each point labelled with its ε (a multiple of the median increment), beside
    Acc@1 with all N steps. One model, `seed` of `cell`; the title names the other `seeds`, not halted."""
    fig, ax = plt.subplots(figsize=(8, 4.6), constrained_layout=True)
    N = metrics["N"]
    for k, (series, g) in enumerate(halt.groupby("series", sort=False)):
        stable = int(g.stable.iloc[0]) if "stable" in g else 0
        label = HALTING_RULES.get(series, series).format(stable=stable)
        ax.plot(g.mean_evals, 100 * g.acc1, marker="o", color=f"C{k}", label=label)
        # one label per point as drawn: the ε whose points coincide on the plot (to 0.1 evaluation and 0.1 pt) share it
        at = g.assign(x=g.mean_evals.round(1), y=(1000 * g.acc1).round())
        for (_, _), p in at.groupby(["x", "y"], sort=False):
            eps = ", ".join(f"{e:g}" for e in p.rel_eps)
            x, y = p.mean_evals.iloc[-1], 100 * p.acc1.iloc[-1]
            right = x > 0.8 * N  # near the right edge: the label to the left of the point
            ax.annotate(f"ε {eps}", (x, y), xytext=(-5 if right else 5, -11 if k else 5), textcoords="offset points",
                        ha="right" if right else "left", fontsize=7, color=f"C{k}")
    ax.axhline(100 * metrics["full_acc1"], ls="--", color="gray",
               label=f"no halting: all N = {N} steps ({100 * metrics['full_acc1']:.1f} %)")
    ax.set(xlim=(0, N + 0.8), xlabel=f"mean evaluations of ψ per image (of N = {N})", ylabel="test Acc@1 (%)")
    ax.margins(y=0.1)  # room for the points' labels
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False, fontsize=8, title_fontsize=8,
              title="ε: multiple of the median increment ‖X_(k+1) − X_k‖ over every step and image")
    others = sorted(set(seeds or ()) - {seed})
    one = (f"seed {seed} only (one model; not repeated for {seeds_label(others)})" if others
           else f"seed {seed} (one model)")
    ax.set_title(f"Adaptive halting (06_dynamics): {cell}, {one}, {n_images:,} test images", fontsize=10)
    return fig


def attention_steps_figure(att: torch.Tensor, steps: Sequence[int], cell: str, seed: int) -> Figure:
    """CLS -> patch attention (mean over heads) of images x steps, ONE colour scale for every panel, one bar."""
    a = att.mean(2).numpy()  # (N, B, g, g)
    n_img = a.shape[1]
    vmin, vmax = float(a[list(steps)].min()), float(a[list(steps)].max())
    fig, axes = plt.subplots(n_img, len(steps), figsize=(1.35 * len(steps) + 1.2, 1.45 * n_img + 0.6), squeeze=False,
                             constrained_layout=True)
    for i in range(n_img):
        for j, k in enumerate(steps):
            im = axes[i, j].imshow(a[k, i], cmap="inferno", vmin=vmin, vmax=vmax)
            axes[i, j].set(xticks=[], yticks=[])
            if i == 0:
                axes[i, j].set_title(f"step {k + 1}", fontsize=8)
        axes[i, 0].set_ylabel(f"image {i}", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.8, label="CLS → patch attention (mean over heads)")
    fig.suptitle(f"attention over the steps: {cell}, seed {seed}, {n_img} test images (shared colour scale)",
                 fontsize=10)
    return fig


def attention_overlay_figure(raw: torch.Tensor, att_last: torch.Tensor, cell: str, seed: int) -> Figure:
    """Each test image with its last-step CLS attention (mean over heads, upsampled) on top, one shared scale."""
    a = att_last.mean(1)  # (B, g, g)
    up = torch.nn.functional.interpolate(a[:, None], size=raw.shape[-2:], mode="nearest")[:, 0].numpy()
    vmin, vmax = float(up.min()), float(up.max())
    n = raw.shape[0]
    fig, axes = plt.subplots(1, n, figsize=(2.3 * n + 1.0, 2.7), squeeze=False, constrained_layout=True)
    for i in range(n):
        axes[0, i].imshow(raw[i].float().permute(1, 2, 0).squeeze(-1).numpy(), cmap="gray")
        im = axes[0, i].imshow(up[i], alpha=0.6, cmap="inferno", vmin=vmin, vmax=vmax)
        axes[0, i].axis("off"); axes[0, i].set_title(f"image {i}", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.85, label="attention, last step")
    fig.suptitle(f"CLS attention at the last step: {cell}, seed {seed}, {n} test images (shared scale)", fontsize=10)
    return fig


def attention_gif(att: torch.Tensor, path: str, fps: int = 3) -> None:
    """An animation over the steps of every image's CLS attention map, one colour scale for all frames."""
    a = att.mean(2).numpy()  # (N, B, g, g), mean over heads
    N, n = a.shape[:2]
    vmin, vmax = float(a.min()), float(a.max())
    fig, axes = plt.subplots(1, n, figsize=(2.2 * n + 0.8, 2.4), squeeze=False)
    frames = [[axes[0, i].imshow(a[k, i], cmap="inferno", vmin=vmin, vmax=vmax, animated=True) for i in range(n)]
              + [axes[0, 0].text(0, -0.8, f"step {k + 1}/{N}", fontsize=8)] for k in range(N)]
    for ax in axes.flat:
        ax.axis("off")
    fig.colorbar(frames[0][0], ax=list(axes.flat), shrink=0.8)
    animation.ArtistAnimation(fig, frames, interval=1000 // fps, blit=True).save(
        path, writer=animation.PillowWriter(fps=fps))
    plt.close(fig)


def trajectories_figure(ps: np.ndarray, pt: np.ndarray, explained: np.ndarray, cell: str, seed: int,
                        shown: int = 20) -> Figure:
    """CLS trajectories of student (N+1 states) and teacher (L+1 states) in the 2-D PCA of both; axes with the
    share of variance each component explains."""
    fig, ax = plt.subplots(figsize=(8, 5), constrained_layout=True)
    n = min(shown, len(ps))
    for i in range(n):
        ax.plot(ps[i, :, 0], ps[i, :, 1], "-", color="C1", alpha=0.5, lw=1,
                label=f"student ({ps.shape[1]} states)" if i == 0 else None)
        ax.plot(pt[i, :, 0], pt[i, :, 1], "o--", color="C0", alpha=0.6, ms=3, lw=0.8,
                label=f"teacher ({pt.shape[1]} states)" if i == 0 else None)
    ax.scatter(ps[:n, 0, 0], ps[:n, 0, 1], color="k", s=12, zorder=3, label="X(0)")
    ax.set(xlabel=f"PC 1 ({100 * explained[0]:.1f} % of variance)",
           ylabel=f"PC 2 ({100 * explained[1]:.1f} % of variance)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    ax.set_title(f"CLS trajectories, 2-D PCA fitted on {len(ps)} test images ({n} drawn): {cell}, seed {seed}",
                 fontsize=10)
    return fig


def _join(vals: Sequence[float] | Dict[str, dict], fmt: str, key: Optional[str] = None) -> str:
    """The values formatted and comma-joined, None and NaN as n/a; with `key`, vals is {seed<s>: metrics} and each
    seed's value under `key` is joined."""
    vals = [v[key] for v in vals.values()] if key else vals
    return ", ".join("n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt) for v in vals)


def _excluding_zero(seeds: dict) -> int:
    """How many seeds' 95 % intervals of the per-image correlation exclude 0."""
    return sum(v["ci_low"] > 0 or v["ci_high"] < 0 for v in seeds.values())


def what_this_run_shows(metrics: dict, reference: str, test_limit: int) -> str:
    """The notebook's closing text, computed from its metrics: per-image and per-class Lyapunov correlations with
    their direction against the paper's reading, Prop. 1 (holds? vacuous? along which solver), fidelity."""
    ly, lc = metrics["lyapunov"][reference], metrics["lyapunov_class"][reference]
    p1, fid = metrics["prop1"], metrics["fidelity"]
    v0 = next(iter(p1.values()))

    def direction(seeds: dict) -> str:  # the sign of each seed's r
        r = [v["r"] for v in seeds.values()]
        if all(x > 0 for x in r):
            return "positive in every seed (larger exponent ↔ more often correct: against the paper's reading)"
        if all(x < 0 for x in r):
            return "negative in every seed (the paper's reading)"
        return "of mixed sign across the seeds"

    def p1_state(v: dict) -> str:
        return "violated" if not v["holds"] else "holds, vacuous" if v["vacuous"] else "holds"

    def other(cell: str) -> str:  # the other analysed cells' Lyapunov correlations (e.g. the free ODE beside ref)
        o, oc = metrics["lyapunov"][cell], metrics["lyapunov_class"].get(cell, {})
        return (f" The same for {cell} ({len(o)} seed(s)): per image r = {_join(o, '.3f', 'r')}, {direction(o)}; its "
                f"95 % interval excludes 0 in {_excluding_zero(o)} of {len(o)}"
                + (f"; per class r = {_join(oc, '.2f', 'r')} (p = {_join(oc, '.2g', 'p_value')}), {direction(oc)}."
                   if oc else "."))

    others = "".join(other(c) for c, v in metrics["lyapunov"].items() if c != reference and v)  # cells with seeds
    n_sig = sum(v["p_value"] < 0.05 for v in lc.values())
    return (f"**What this run shows** ({reference}, {len(ly)} seed(s), {test_limit} test images each). Per image, CLS "
            f"exponent vs correctness: point-biserial r = {_join(ly, '.3f', 'r')}, {direction(ly)}; its 95 % interval "
            f"excludes 0 in {_excluding_zero(ly)} of {len(ly)}. Per class (Fig. 4's unit, "
            f"{next(iter(lc.values()))['n_classes']} classes): Pearson r = {_join(lc, '.2f', 'r')} (p = "
            f"{_join(lc, '.2g', 'p_value')}), {direction(lc)}; p < 0.05 in {n_sig} of {len(lc)}.{others} "
            f"Prop. 1 along the model's solver ({v0['solver']}, {v0['n_images']} images) with the measured L (max "
            f"{_join(p1, '.1f', 'L_max')}): within at a fraction {_join(p1, '.3f', 'fraction_within')} of (image, "
            f"step) pairs, tightness (bound ÷ error) min {_join(p1, '.3g', 'tightness_min')}, median "
            f"{_join(p1, '.3g', 'tightness_median')}: {', '.join(p1_state(v) for v in p1.values())}; parallel Euler "
            f"within at {_join(p1, '.3f', 'fraction_within_parallel')}. The published code's L = {v0['paper_L']:g} "
            f"gives {_join(p1, '.3f', 'fraction_within_paper_L')}, but σ_max(J_ψ) met along the trajectories has "
            f"median {_join(p1, '.2f', 'sigma_max_median')} and max {_join(p1, '.1f', 'L_max')}: L = {v0['paper_L']:g} "
            f"{'is not' if max(v['L_max'] for v in p1.values()) > v0['paper_L'] else 'is not contradicted as'} a "
            f"Lipschitz constant of ψ there. Fidelity: the student sits at {fid['student_rel_mean']:.3f} of ‖h_l‖ "
            f"from the teacher's states, against a teacher step of {fid['teacher_step_rel_mean']:.3f}.")
