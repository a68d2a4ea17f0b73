"""Figures and the computed summary of 06_dynamics (the notebook only calls these).

Every figure says in its title which cell, seeds and how many images it rests on; maps that are compared share one
colour scale with a colour bar; legends sit outside the axes, so they cover no data.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from matplotlib import animation
from matplotlib.figure import Figure


def seeds_label(seeds: Sequence[int]) -> str:
    """'seed 0' or 'seeds 0, 1, 2'."""
    seeds = sorted(seeds)
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(str(s) for s in seeds)


def _legend_outside(ax: plt.Axes, **kw) -> None:
    if ax.get_legend() is not None:
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, **kw)


# ------------------------------------------------------------------------------------------------------- Lyapunov
def lyapunov_figure(per_image: pd.DataFrame, per_class: pd.DataFrame, class_corr: Dict[str, Dict[str, dict]],
                    reference: str, seed: int) -> Figure:
    """Left: the exponent of correct vs wrong images (reference cell, one seed). Right: per class (the unit of
    the paper's Fig. 4), every cell (colour) and seed (marker), with Pearson r per (cell, seed) in the legend."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), constrained_layout=True)
    g0 = per_image[(per_image.cell == reference) & (per_image.seed == seed)]
    sns.histplot(data=g0.assign(prediction=g0.correct.map({True: "correct", False: "wrong"})), x="lyapunov",
                 hue="prediction", hue_order=["correct", "wrong"], stat="density", common_norm=False,
                 element="step", ax=axes[0])
    axes[0].set_xlabel("CLS exponent λ (per unit time)")
    axes[0].set_title(f"per image: {reference}, seed {seed}, {len(g0)} test images")
    sns.move_legend(axes[0], "upper right", frameon=False)
    sns.scatterplot(data=per_class, x="lyapunov", y="acc1", hue="cell", style="seed", s=45, ax=axes[1])
    h, lab = axes[1].get_legend_handles_labels()
    axes[1].get_legend().remove()
    rs = [f"{c} s{s}: r = {v['r']:+.2f} (p = {v['p_value']:.2g})" for c, d in class_corr.items() for s, v in
          ((k.removeprefix("seed"), v) for k, v in d.items())]
    axes[1].legend(h, lab, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    axes[1].text(1.02, 0.0, "Pearson r, class exponent\nvs class Acc@1:\n" + "\n".join(rs), transform=axes[1].transAxes,
                 fontsize=8, va="bottom")
    axes[1].set_xlabel("class mean CLS exponent λ"); axes[1].set_ylabel("class Acc@1")
    cells = sorted(per_class.cell.unique())
    n_img = int(per_class[(per_class.cell == cells[0]) & (per_class.seed == per_class.seed.min())].n.sum())
    axes[1].set_title(f"per class (Fig. 4 unit): {', '.join(cells)}; {seeds_label(per_class.seed.unique())}; "
                      f"{n_img} images each", fontsize=10)
    return fig


# -------------------------------------------------------------------------------------------------- Proposition 1
PROP1_STYLE = {  # series -> (label, colour, dashes)
    "error": ("error, model's solver", "C0", ""),
    "bound_measured_L": ("bound, measured L (model's solver)", "C0", (4, 2)),
    "error_parallel": ("error, parallel Euler", "C1", ""),
    "bound_parallel_measured_L": ("bound, measured L (parallel Euler)", "C1", (4, 2)),
    "bound_paper_L": ("bound, L = 1/2 (published code)", "C2", (1, 1.5)),
}


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
        ax.set_xlabel("step n"); ax.set_ylabel("log10 ‖X_n − X(t_n)‖  or  log10 bound_n")
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
    ax.set_xlabel("step n"); ax.set_ylabel("log10(bound / error), measured L")
    ax.set_title("tightness, model's solver", fontsize=10)
    h0, l0 = axes[0].get_legend_handles_labels()
    h2, l2 = ax.get_legend_handles_labels()
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
        ax.plot(d.N[ok], 10.0 ** d.log10_bound[ok], "s--", color=f"C{k}", ms=4, label=f"bound, L = {paper_L:g}, {series}")
    ax.set_xscale("log", base=2); ax.set_yscale("log")
    ax.set_xlabel("N (steps)"); ax.set_ylabel("‖X_N − X(T)‖ and its bound (mean over images)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    t = (f"{cell}, seed {seed}, {n_images} images; observed order {abs(orders['order_parallel']):.2f} (parallel), "
         f"{abs(orders['order_model_solver']):.2f} (model's solver)")
    if measured_L is not None and "log10_bound_measured_L" in table:
        b = table.log10_bound_measured_L.dropna()
        t += f"\nwith the measured L = {measured_L:.1f} the bound is 10^{b.min():.0f} to 10^{b.max():.0f} (off scale)"
    ax.set_title(t, fontsize=10)
    return fig


# ---------------------------------------------------------------------------------------------- fidelity, halting
def fidelity_figure(fid: pd.DataFrame, cell: str, n_images: int) -> Figure:
    fig, ax = plt.subplots(figsize=(8.5, 3.6), constrained_layout=True)
    names = {"student": "student ‖X_c − h_l‖ / ‖h_l‖", "teacher_step": "teacher ‖h_l − h_(l−1)‖ / ‖h_l‖"}
    sns.lineplot(data=fid.assign(series=fid.series.map(names)), x="layer", y="relative_distance", hue="series",
                 style="series", markers=True, errorbar="sd", ax=ax)
    ax.set_ylabel("relative distance (CLS)"); ax.set_xlabel("teacher layer l")
    band = " (band: sd over seeds)" if fid.seed.nunique() > 1 else ""
    ax.set_title(f"fidelity: {cell}, {seeds_label(fid.seed.unique())}{band}, {n_images} images each", fontsize=10)
    _legend_outside(ax, fontsize=8)
    return fig


HALTING_RULES = {"increment": "halt when ‖X_(k+1) − X_k‖ < ε",
                 "increment_or_stable": "… or when the prediction has not changed for {stable} steps"}


def halting_figure(halt: pd.DataFrame, metrics: dict, cell: str, seed: int, n_images: int,
                   seeds: Optional[Sequence[int]] = None) -> Figure:
    """Test Acc@1 (%) against the mean evaluations of ψ per image, one line per halting rule (named in words, the
    `HALTING_RULES`; `analysis.halting_study`'s series), each point labelled with its ε as a multiple of the median
    increment, beside Acc@1 with all N steps. One model: `seed` of `cell`; `seeds` (the cell's seeds the notebook
    has) makes the title say that the others were not halted. The legend sits below the axes."""
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
    ax.set_xlim(0, N + 0.8)
    ax.margins(y=0.1)  # room for the points' labels
    ax.set_xlabel(f"mean evaluations of ψ per image (of N = {N})")
    ax.set_ylabel("test Acc@1 (%)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False, fontsize=8,
              title="ε: multiple of the median increment ‖X_(k+1) − X_k‖ over every step and image",
              title_fontsize=8)
    others = sorted(set(seeds or ()) - {seed})
    one = (f"seed {seed} only (one model; not repeated for {seeds_label(others)})" if others
           else f"seed {seed} (one model)")
    ax.set_title(f"Adaptive halting (06_dynamics): {cell}, {one}, {n_images:,} test images", fontsize=10)
    return fig


# ---------------------------------------------------------------------------------------------- attention, PCA
def _mean_heads(att: torch.Tensor) -> np.ndarray:
    """(N, B, H, g, g) -> (N, B, g, g), mean over heads."""
    return att.mean(2).numpy()


def attention_steps_figure(att: torch.Tensor, steps: Sequence[int], cell: str, seed: int) -> Figure:
    """CLS -> patch attention (mean over heads) of images x steps, ONE colour scale for every panel, one bar."""
    a = _mean_heads(att)
    n_img = a.shape[1]
    vmin, vmax = float(a[list(steps)].min()), float(a[list(steps)].max())
    fig, axes = plt.subplots(n_img, len(steps), figsize=(1.35 * len(steps) + 1.2, 1.45 * n_img + 0.6), squeeze=False,
                             constrained_layout=True)
    for i in range(n_img):
        for j, k in enumerate(steps):
            im = axes[i, j].imshow(a[k, i], cmap="inferno", vmin=vmin, vmax=vmax)
            axes[i, j].set_xticks([]); axes[i, j].set_yticks([])
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
        img = raw[i].float()
        axes[0, i].imshow(img.permute(1, 2, 0).squeeze(-1).numpy(), cmap="gray")
        im = axes[0, i].imshow(up[i], alpha=0.6, cmap="inferno", vmin=vmin, vmax=vmax)
        axes[0, i].axis("off"); axes[0, i].set_title(f"image {i}", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.85, label="attention, last step")
    fig.suptitle(f"CLS attention at the last step: {cell}, seed {seed}, {n} test images (shared scale)", fontsize=10)
    return fig


def attention_gif(att: torch.Tensor, path: str, fps: int = 3) -> None:
    """An animation over the steps of every image's CLS attention map, one colour scale for all frames."""
    a = _mean_heads(att)
    N, n = a.shape[:2]
    vmin, vmax = float(a.min()), float(a.max())
    fig, axes = plt.subplots(1, n, figsize=(2.2 * n + 0.8, 2.4), squeeze=False)
    frames = []
    for k in range(N):
        frames.append([axes[0, i].imshow(a[k, i], cmap="inferno", vmin=vmin, vmax=vmax, animated=True)
                       for i in range(n)] + [axes[0, 0].text(0, -0.8, f"step {k + 1}/{N}", fontsize=8)])
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
    ax.set_xlabel(f"PC 1 ({100 * explained[0]:.1f} % of variance)")
    ax.set_ylabel(f"PC 2 ({100 * explained[1]:.1f} % of variance)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    ax.set_title(f"CLS trajectories, 2-D PCA fitted on {len(ps)} test images ({n} drawn): {cell}, seed {seed}",
                 fontsize=10)
    return fig


# ------------------------------------------------------------------------------------------------ summary text
def _join(vals: List[float], fmt: str) -> str:
    return ", ".join("n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt) for v in vals)


def _excluding_zero(seeds: dict) -> int:
    """How many seeds' 95 % intervals of the per-image correlation exclude 0."""
    return sum(v["ci_low"] > 0 or v["ci_high"] < 0 for v in seeds.values())


def what_this_run_shows(metrics: dict, reference: str, test_limit: int) -> str:
    """The notebook's closing text, computed from its metrics: per-image and per-class Lyapunov correlations with
    their direction against the paper's reading, Prop. 1 (holds? vacuous? along which solver), fidelity."""
    ly = metrics["lyapunov"][reference]
    lc = metrics["lyapunov_class"][reference]
    p1 = metrics["prop1"]
    v0 = next(iter(p1.values()))
    rs, rc = [v["r"] for v in ly.values()], [v["r"] for v in lc.values()]

    def direction(r: List[float]) -> str:
        if all(x > 0 for x in r):
            return "positive in every seed (larger exponent ↔ more often correct: against the paper's reading)"
        if all(x < 0 for x in r):
            return "negative in every seed (the paper's reading)"
        return "of mixed sign across the seeds"

    def p1_state(v: dict) -> str:
        return "violated" if not v["holds"] else "holds, vacuous" if v["vacuous"] else "holds"

    def other(cell: str) -> str:  # the other analysed cells' Lyapunov correlations (e.g. the free ODE beside ref)
        o, oc = metrics["lyapunov"][cell], metrics["lyapunov_class"].get(cell, {})
        r, c = [v["r"] for v in o.values()], [v["r"] for v in oc.values()]
        return (f" The same for {cell} ({len(o)} seed(s)): per image r = {_join(r, '.3f')}, {direction(r)}; its 95 % "
                f"interval excludes 0 in {_excluding_zero(o)} of {len(o)}"
                + (f"; per class r = {_join(c, '.2f')} (p = {_join([v['p_value'] for v in oc.values()], '.2g')}), "
                   f"{direction(c)}." if oc else "."))

    fid = metrics["fidelity"]
    others = "".join(other(c) for c, v in metrics["lyapunov"].items() if c != reference and v)  # cells with seeds
    return (f"**What this run shows** ({reference}, {len(ly)} seed(s), {test_limit} test images each). "
            f"Per image, CLS exponent vs correctness: point-biserial r = {_join(rs, '.3f')}, {direction(rs)}; "
            f"its 95 % interval excludes 0 in {_excluding_zero(ly)} of "
            f"{len(ly)}. Per class (Fig. 4's unit, {next(iter(lc.values()))['n_classes']} classes): Pearson r = "
            f"{_join(rc, '.2f')} (p = {_join([v['p_value'] for v in lc.values()], '.2g')}), {direction(rc)}; "
            f"p < 0.05 in {sum(v['p_value'] < 0.05 for v in lc.values())} of {len(lc)}.{others} "
            f"Prop. 1 along the model's solver ({v0['solver']}, {v0['n_images']} images) with the measured L (max "
            f"{_join([v['L_max'] for v in p1.values()], '.1f')}): within at a fraction "
            f"{_join([v['fraction_within'] for v in p1.values()], '.3f')} of (image, step) pairs, tightness (bound ÷ "
            f"error) min {_join([v['tightness_min'] for v in p1.values()], '.3g')}, median "
            f"{_join([v['tightness_median'] for v in p1.values()], '.3g')}: "
            f"{', '.join(p1_state(v) for v in p1.values())}; parallel Euler within at "
            f"{_join([v['fraction_within_parallel'] for v in p1.values()], '.3f')}. The published code's "
            f"L = {v0['paper_L']:g} gives {_join([v['fraction_within_paper_L'] for v in p1.values()], '.3f')}, but "
            f"σ_max(J_ψ) met along the trajectories has median {_join([v['sigma_max_median'] for v in p1.values()], '.2f')}"
            f" and max {_join([v['L_max'] for v in p1.values()], '.1f')}: L = {v0['paper_L']:g} "
            f"{'is not' if max(v['L_max'] for v in p1.values()) > v0['paper_L'] else 'is not contradicted as'} a "
            f"Lipschitz constant of ψ there. Fidelity: the student sits at {fid['student_rel_mean']:.3f} of ‖h_l‖ "
            f"from the teacher's states, against a teacher step of {fid['teacher_step_rel_mean']:.3f}.")
