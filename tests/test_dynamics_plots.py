"""06_dynamics figures on small constructed inputs: they draw, share one colour scale, say what they rest on; the
closing text follows the metrics (direction words flip when the signs do)."""
import copy

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from odevit.repro import dynamics as P  # noqa: E402


def test_attention_steps_share_one_colour_scale_and_bar():
    att = torch.rand(5, 2, 2, 3, 3)  # (N, B, H, g, g)
    att[4, 1] *= 10  # one panel far brighter: it must not get its own scale
    fig = P.attention_steps_figure(att, [0, 2, 4], "ref", 0)
    ims = [im for ax in fig.axes for im in ax.images]
    assert len(ims) == 6 and len({im.get_clim() for im in ims}) == 1
    lo, hi = ims[0].get_clim()
    a = att.mean(2)
    assert lo == pytest.approx(float(a[[0, 2, 4]].min())) and hi == pytest.approx(float(a[[0, 2, 4]].max()))
    assert len(fig.axes) == 7  # 6 panels + one colour bar
    assert "seed 0" in fig._suptitle.get_text() and "2 test images" in fig._suptitle.get_text()
    plt.close(fig)


def test_attention_overlay_and_gif(tmp_path):
    att = torch.rand(3, 2, 2, 2, 2)
    fig = P.attention_overlay_figure(torch.rand(2, 1, 8, 8), att[-1], "ref", 1)
    overlays = [ax.images[1] for ax in fig.axes if len(ax.images) == 2]
    assert len(overlays) == 2 and len({im.get_clim() for im in overlays}) == 1 and len(fig.axes) == 3
    plt.close(fig)
    P.attention_gif(att, str(tmp_path / "a.gif"))
    assert (tmp_path / "a.gif").stat().st_size > 0


def test_trajectories_axes_name_explained_variance():
    fig = P.trajectories_figure(np.zeros((3, 5, 2)), np.ones((3, 4, 2)), np.array([0.612, 0.2]), "ref", 0)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "PC 1 (61.2 % of variance)" and ax.get_ylabel() == "PC 2 (20.0 % of variance)"
    assert "3 test images" in ax.get_title()
    plt.close(fig)


def _prop1_inputs():
    rows, tight = [], []
    for s in (0, 1):
        for n in (1, 2, 3):
            for k, v in {"error": -1.0, "bound_measured_L": 40.0 * n, "error_parallel": -0.9,
                         "bound_parallel_measured_L": 41.0 * n, "bound_paper_L": 0.5}.items():
                rows.append({"seed": s, "step": n, "t": n / 2, "series": k, "log10_value": v})
            tight += [{"seed": s, "step": n, "t": n / 2, "series": q, "log10_tightness": 41.0 * n}
                      for q in ("min", "median")]
    met = {f"seed{s}": {"n_images": 4, "solver": "lie_trotter", "L_max": 39.8} for s in (0, 1)}
    return pd.DataFrame(rows), pd.DataFrame(tight), met


def test_prop1_figure_draws_log10_lines_without_inf():
    per_step, tight, met = _prop1_inputs()
    fig = P.prop1_figure(per_step, tight, met, "ref")
    ys = np.concatenate([ln.get_ydata() for ln in fig.axes[0].lines if len(ln.get_ydata())])
    assert np.isfinite(ys).all() and ys.max() == 123.0  # log10 values: 10^123 drawn, not overflowed
    title = fig._suptitle.get_text()
    assert "seeds 0, 1" in title and "4 images" in title and "lie_trotter" in title
    zoom = np.concatenate([ln.get_ydata() for ln in fig.axes[1].lines if len(ln.get_ydata())])
    assert zoom.max() == 0.5  # the zoom leaves the measured-L bounds out
    plt.close(fig)


def test_euler_bound_figure_draws_bound_beside_error():
    tab = pd.DataFrame({"N": [2, 4, 2, 4], "h": [0.5, 0.25] * 2, "error": [1.0, 0.5, 0.8, 0.4],
                        "bound": [3.0, 1.5, 2.0, 1.0], "log10_bound": np.log10([3.0, 1.5, 2.0, 1.0]),
                        "log10_bound_measured_L": [90.0, 88.0, 91.0, 89.0],
                        "series": ["euler_parallel"] * 2 + ["model_lie_trotter"] * 2})
    fig = P.euler_bound_figure(tab, {"order_parallel": -1.0, "order_model_solver": -1.0}, "ref", 0, 4, 0.5, 39.8)
    labels = [ln.get_label() for ln in fig.axes[0].lines]
    assert sum(lab.startswith("bound") for lab in labels) == 2 and sum(lab.startswith("error") for lab in labels) == 2
    assert "10^88 to 10^91" in fig.axes[0].get_title()
    plt.close(fig)


def test_lyapunov_legend_sits_outside_the_axes():
    per_image = pd.DataFrame({"cell": "ref", "seed": 0, "label": [0, 0, 1, 1, 2, 2], "correct": [1, 1, 1, 0, 0, 0],
                              "lyapunov": [0.1, 0.1, 0.2, 0.2, 0.3, 0.3]}).astype({"correct": bool})
    from odevit.repro import dynamics as A

    pc = A.per_class_table(per_image)
    fig = P.lyapunov_figure(per_image, pc, A.lyapunov_class_correlation(pc), "ref", 0)
    fig.canvas.draw()
    ax = fig.axes[1]
    leg = ax.get_legend().get_window_extent()
    assert leg.x0 >= ax.get_window_extent().x1  # right of the data area: covers no point
    assert "6 images each" in ax.get_title() and "6 test images" in fig.axes[0].get_title()
    plt.close(fig)


def test_halting_figure_names_its_rules_in_words_and_says_it_shows_one_seed():
    rows = [{"series": ser, "rel_eps": e, "stable": st, "mean_evals": ev, "acc1": a}
            for ser, st, pts in (("increment", 0, [(0.0, 12.0, 0.56), (0.1, 12.0, 0.56), (0.5, 6.8, 0.43)]),
                                 ("increment_or_stable", 3, [(0.0, 4.4, 0.33), (0.5, 2.7, 0.30)]))
            for e, ev, a in pts]
    halt = pd.DataFrame(rows)
    fig = P.halting_figure(halt, {"N": 12, "full_acc1": 0.5616}, "ref", 0, 10000, seeds=[0, 1, 2])
    ax = fig.axes[0]
    labels = [x.get_text() for x in ax.get_legend().get_texts()]
    assert not {"increment", "increment_or_stable"} & set(labels)  # words, not the series' code names
    assert labels == ["halt when ‖X_(k+1) − X_k‖ < ε", "… or when the prediction has not changed for 3 steps",
                      "no halting: all N = 12 steps (56.2 %)"]
    title = ax.get_title()
    assert "seed 0 only" in title and "seeds 1, 2" in title and "10,000 test images" in title
    assert ax.get_ylabel() == "test Acc@1 (%)" and "of N = 12" in ax.get_xlabel()
    assert sorted(x.get_text() for x in ax.texts) == ["ε 0", "ε 0, 0.1", "ε 0.5", "ε 0.5"]  # coinciding ε share one
    fig.canvas.draw()
    assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0  # below the axes: covers no point
    plt.close(fig)
    fig = P.halting_figure(halt, {"N": 12, "full_acc1": 0.5616}, "ref", 0, 10000)  # the published weights: 1 seed
    assert "seed 0 (one model)" in fig.axes[0].get_title()
    plt.close(fig)


METRICS = {
    "lyapunov": {"ref": {"seed0": {"r": 0.05, "ci_low": -0.01, "ci_high": 0.11},
                         "seed1": {"r": 0.1, "ci_low": 0.04, "ci_high": 0.16}}},
    "lyapunov_class": {"ref": {"seed0": {"r": 0.4, "p_value": 0.2, "n_classes": 10},
                               "seed1": {"r": 0.6, "p_value": 0.05, "n_classes": 10}}},
    "prop1": {f"seed{s}": {"solver": "lie_trotter", "n_images": 16, "L_max": 10.0, "fraction_within": 1.0,
                           "tightness_min": 40.0, "tightness_median": 1e9, "holds": True, "vacuous": True,
                           "fraction_within_parallel": 1.0, "paper_L": 0.5, "fraction_within_paper_L": 0.9,
                           "sigma_max_median": 3.0} for s in (0, 1)},
    "fidelity": {"student_rel_mean": 0.7, "teacher_step_rel_mean": 0.5},
}


def test_summary_text_follows_the_metrics():
    t = P.what_this_run_shows(METRICS, "ref", 2000)
    assert t.count("positive in every seed") == 2 and "holds, vacuous, holds, vacuous" in t and "is not a" in t
    assert "excludes 0 in 1 of 2" in t and "p < 0.05 in 0 of 2" in t
    m = copy.deepcopy(METRICS)
    for d in (m["lyapunov"]["ref"], m["lyapunov_class"]["ref"]):
        for v in d.values():
            v["r"] = -v["r"]
            if "ci_low" in v:
                v["ci_low"], v["ci_high"] = -v["ci_high"], -v["ci_low"]
    for v in m["prop1"].values():
        v.update(holds=False, vacuous=False, L_max=0.4)
    t = P.what_this_run_shows(m, "ref", 2000)
    assert t.count("negative in every seed (the paper's reading)") == 2 and "violated, violated" in t
    assert "is not contradicted as a Lipschitz" in t
    assert "The same for" not in t  # one analysed cell: no other cell's sentence
    m["lyapunov"]["free"] = {"seed5": {"r": 0.14, "ci_low": 0.09, "ci_high": 0.18}}
    m["lyapunov_class"]["free"] = {"seed5": {"r": 0.64, "p_value": 0.047, "n_classes": 10}}
    t = P.what_this_run_shows(m, "ref", 2000)
    assert ("The same for free (1 seed(s)): per image r = 0.140, positive in every seed" in t
            and "excludes 0 in 1 of 1; per class r = 0.64 (p = 0.047)" in t), t
