"""The study's arithmetic and builders: seed statistics (known answers), the matched free model, preset recipes,
the degenerate-schedule warning, the Lipschitz estimator (linear field of known norm)."""
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from odevit.repro import analysis, config, report, stats, study
from odevit.schedule import DegenerateSchedule, checkpoint_indices
from odevit.teacher import create_teacher

ROOT = Path(__file__).resolve().parents[1]


def test_mean_ci_known_answer():
    r = stats.mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729911275 / math.sqrt(3)  # t(0.975, 2) * std 1 / sqrt 3
    assert (r["n"], r["mean"], r["std"]) == (3, 2.0, 1.0)
    assert r["ci_low"] == pytest.approx(2 - half) and r["ci_high"] == pytest.approx(2 + half)
    one = stats.mean_ci([0.5])
    assert one["mean"] == 0.5 and math.isnan(one["ci_low"]) and not stats.resolved(one["ci_low"], one["ci_high"])


def test_paired_difference_and_resolution():
    # d = [2, 2.5, 3]: mean 2.5, CI 2.5 -/+ 1.242 -> excludes 0
    p = stats.paired([12.0, 12.5, 13.0], [10.0, 10.0, 10.0])
    assert p["diff_mean"] == 2.5 and p["diff_std"] == 0.5 and p["resolved"]
    assert p["ci_low"] == pytest.approx(2.5 - 4.302652729911275 * 0.5 / math.sqrt(3))
    assert (p["mean_a"], p["mean_b"], p["std_b"]) == (12.5, 10.0, 0.0)
    # d = [1, 2, 3]: CI 2 -/+ 2.484 contains 0
    assert not stats.paired([11.0, 12.0, 13.0], [10.0, 10.0, 10.0])["resolved"]
    # d = [1, -1, 0.5]: the interval contains 0 -> not resolved
    q = stats.paired([1.0, -1.0, 0.5], [0.0, 0.0, 0.0])
    assert q["ci_low"] < 0 < q["ci_high"] and not q["resolved"]
    with pytest.raises(ValueError, match="equal-length"):
        stats.paired([1.0, 2.0], [1.0])


def test_effect_sizes_known_answers():
    assert stats.auc([1, 2, 3, 4], [False, False, True, True]) == 1.0
    assert stats.auc([1, 1], [True, False]) == 0.5  # a tie counts half
    assert stats.auc([3, 1, 2], [False, True, False]) == 0.0
    r = stats.point_biserial([0.0, 0.0, 1.0, 1.0, 0.0, 1.0], [0, 0, 1, 1, 0, 1])
    assert r["r"] == pytest.approx(1.0) and r["ci_low"] > 0.9
    r = stats.point_biserial([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1, 0, 1, 0, 1, 0])
    assert r["r"] == pytest.approx(-0.29277002188455997) and r["ci_low"] < 0 < r["ci_high"]


def test_comparisons_pairs_by_seed():
    cells = pd.DataFrame({"cell": ["ref"] * 3 + ["x"] * 3, "seed": [0, 1, 2, 2, 1, 0],
                          "acc1": [0.80, 0.81, 0.82, 0.79, 0.785, 0.78]})  # x listed in another seed order
    t = report.comparisons(cells, "ref")
    assert t.cell.tolist() == ["x"] and t.seeds.iloc[0] == 3
    assert t.diff_mean.iloc[0] == pytest.approx(2.5) and t.diff_std.iloc[0] == pytest.approx(0.5)
    assert t.resolved.iloc[0] and t.finding.iloc[0] == "differs: ref higher"
    assert t.p_vs_null.iloc[0] == pytest.approx(stats.p_value([2.0, 2.5, 3.0]))


FAMILY = ["parallel", "jasmin_off", "layernorm", "uniform", "qkv_xavier", "mlp4"]


def _write(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def _results(root: Path, ref=(0.80, 0.801, 0.799), free=(0.75, 0.752, 0.749), teacher=0.852, drop=None,
             fraction=(1.0, 1.0, 1.0), tightness=(3.0, 4.0, 5.0), half=(-0.1, 0.1, 0.05),
             class_p=(0.01, 0.02, 0.03), converged=(True, True, True)) -> Path:
    """A fabricated results/ tree: 3 seeds of ref, free, ce and the ablation cells, the teacher's and 06's metrics.
    `drop` (Acc@1 points per cell) lowers a cell below ref by that much in every seed; unset cells get noise only."""
    noise = (0.3, -0.4, 0.1)
    drop = {"layernorm": 5.0, **(drop or {})}
    accs = {"ref": ref, "free": free, "ce": tuple(a + 0.01 for a in ref)}
    for c in FAMILY:
        accs[c] = tuple(r - (drop.get(c, 0.0) + n) / 100 for r, n in zip(ref, noise))
    for cell, acc in accs.items():
        for s, a in enumerate(acc):
            _write(root / f"cells/{cell}/s{s}/metrics.json",
                   {"cell": cell, "seed": s, "acc1": a, "acc3": a, "acc5": a, "acc1_sub_n": ref[s],
                    "acc1_half_n": ref[s] + half[s] / 100, "acc1_double_n": ref[s], "params_m": 0.1,
                    "encoder_params": 90000, "train_images": 6000, "epochs": 2, "converged": converged[s]})
    _write(root / "02_teacher/metrics.json", {"acc1": teacher, "params_m": 1.1, "encoder_params": 1080000})
    lyap = {c: {f"seed{s}": {"r": r, "mean": m, "n": 100} for s, (r, m) in
                enumerate(zip((-0.1, -0.12, -0.08), (0.1, 0.11, 0.12) if c == "ref" else (0.2, 0.22, 0.21)))}
            for c in ("ref", "jasmin_off")}
    _write(root / "06_dynamics/metrics.json", {
        "lyapunov": lyap, "lyapunov_class": {"ref": {f"seed{s}": {"r": r, "p_value": p, "n_classes": 10}
                                                     for s, (r, p) in enumerate(zip((0.4, 0.5, 0.45), class_p))}},
        "prop1": {f"seed{s}": {"fraction_within": f, "tightness_min": t / 10, "tightness_median": t, "L_max": 9.0,
                               "paper_L": 0.5, "fraction_within_paper_L": 1.0}
                  for s, (f, t) in enumerate(zip(fraction, tightness))}})
    return root


def _verdicts(root: Path) -> pd.Series:
    return report.claims(str(root)).set_index("claim").verdict


def test_claims_end_to_end_on_fabricated_results(tmp_path):
    c = report.claims(str(_results(tmp_path / "a")))
    assert list(c.columns[:6]) == ["claim", "statement", "source", "direction", "statistic", "unit"]
    assert c.claim.tolist() == list(report.paper.CLAIMS)
    v, row = c.set_index("claim").verdict, c.set_index("claim")
    assert v.ts_minus_free == stats.SUPPORTS and row.loc["ts_minus_free", "vs_paper"] == "below the paper's"
    assert row.loc["ts_minus_free", "ours_mean"] == pytest.approx(100 * (0.8 - 0.7503333333333333))
    assert row.loc["ts_minus_free", "paper"].startswith("Small − free: C10 0.867 − 0.809 = +5.8 pt")
    assert v.retention == stats.SUPPORTS  # 0.939: not below the paper's 0.939 - 1 pt / 0.852 (non-inferiority)
    assert (v.compression_total, v.compression_encoder) == (stats.FACT, stats.FACT)
    assert row.loc["compression_total", "ours_mean"] == pytest.approx(11.0) and math.isnan(row.loc["compression_total", "ci_low"])
    assert v.step_robustness_half == stats.SUPPORTS and v.step_robustness_double == stats.SUPPORTS  # exactly 0, no spread
    assert v.centernorm_minus_layernorm == stats.SUPPORTS and row.loc["centernorm_minus_layernorm", "holm_p"] < 0.05
    assert v.lie_trotter_minus_parallel == stats.INCONCLUSIVE
    fam = row[row.holm_p.notna()]
    assert sorted(fam.index) == sorted(["lie_trotter_minus_parallel", "jasmin_on_minus_off", "r1_minus_r4",
                                        "centernorm_minus_layernorm", "softmax_minus_uniform_schedule",
                                        "qkv_spectral_minus_xavier"])
    np.testing.assert_allclose(fam.holm_p, stats.holm(fam.p_vs_null))
    assert v.lyapunov_vs_correctness == stats.SUPPORTS and v.lyapunov_class_vs_accuracy == stats.CONTRADICTS
    assert v.jasmin_on_minus_off_lyapunov == stats.SUPPORTS and v.prop1_bound == stats.SUPPORTS
    assert v.ce_from_start_minus_published_curriculum == stats.NOT_MEASURED  # no data, whatever the direction
    assert row.loc["ce_from_start_minus_published_curriculum", "finding"] == stats.NOT_MEASURED  # no pub_curriculum
    assert "3/3 converged" in row.loc["ts_minus_free", "budget"] and "6000 images x 2 epochs" in row.loc["ts_minus_free", "budget"]
    # one run that had not finished learning: its claims show numbers without a verdict; facts stay facts
    nc = report.claims(str(_results(tmp_path / "nc", converged=(True, True, False)))).set_index("claim")
    assert nc.loc["ts_minus_free", "verdict"] == stats.NOT_CONVERGED and "2/3 converged" in nc.loc["ts_minus_free", "budget"]
    assert nc.loc["ts_minus_free", "ours_mean"] == pytest.approx(row.loc["ts_minus_free", "ours_mean"])
    assert nc.loc["compression_total", "verdict"] == stats.FACT
    counts = report.verdict_counts(c)
    assert counts["supports"] == (c.verdict == stats.SUPPORTS).sum() and counts["fact"] == 2
    assert report.summary_line(c).startswith(f"supports {counts['supports']} · contradicts {counts['contradicts']} · "
                                             f"inconclusive {counts['inconclusive']} (apart: ")


def test_per_class_correlation_needs_its_test_over_the_classes(tmp_path):
    """r over 10 classes, one per seed: a tight interval over the seeds is not enough; every seed's Pearson test over
    the classes must hold too (unit_p = the largest p), else inconclusive; shown in the README's test column."""
    row = report.claims(str(_results(tmp_path / "a"))).set_index("claim").loc["lyapunov_class_vs_accuracy"]
    assert row.verdict == stats.CONTRADICTS and row.unit_p == pytest.approx(0.03)
    row = report.claims(str(_results(tmp_path / "b", class_p=(0.01, 0.14, 0.03)))).set_index("claim")
    r = row.loc["lyapunov_class_vs_accuracy"]
    assert r.verdict == stats.INCONCLUSIVE and r.unit_p == pytest.approx(0.14) and "0.01/0.14/0.03" in r.note
    assert math.isnan(row.loc["lyapunov_vs_correctness", "unit_p"])  # per image: n in the hundreds, no gate
    from odevit.repro import results_pages

    assert results_pages._tests(r) == f" (largest p over the classes and seeds 0.14 · replicates {r.replication:.2f})"


def test_claims_verdicts_flip_when_the_fabricated_accuracies_do(tmp_path):
    v = _verdicts(_results(tmp_path / "b", free=(0.85, 0.852, 0.849), teacher=0.95, half=(-3.0, -3.5, -4.0),
                           drop={"layernorm": -5.0, "mlp4": -3.0}, fraction=(1.0, 0.98, 1.0)))
    assert v.ts_minus_free == stats.CONTRADICTS and v.retention == stats.CONTRADICTS  # 0.84 < 0.939 - 1 pt / 0.95
    # a student that keeps more of its teacher than the paper's did (0.8 / 0.81 = 0.99 > 0.939) supports "competitive"
    up = report.claims(str(_results(tmp_path / "e", teacher=0.81))).set_index("claim")
    assert up.loc["retention", "ours_mean"] > 0.98 and up.loc["retention", "vs_paper"] == "above the paper's"
    assert up.loc["retention", "verdict"] == stats.SUPPORTS
    assert v.step_robustness_half == stats.CONTRADICTS and v.centernorm_minus_layernorm == stats.CONTRADICTS
    assert v.r1_minus_r4 == stats.SUPPORTS and v.prop1_bound == stats.CONTRADICTS
    assert _verdicts(_results(tmp_path / "c", tightness=(3.0, 40.0, 5.0))).prop1_bound == stats.VACUOUS
    # a resolved ablation that Holm does not keep: 6 tests, raw p ~ 0.02 -> inconclusive
    w = report.claims(str(_results(tmp_path / "d", drop={"layernorm": 0.0, "parallel": 1.0}))).set_index("claim")
    r = w.loc["lie_trotter_minus_parallel"]
    assert r.ci_low > 0 and r.holm_p >= 0.05 and r.verdict == stats.INCONCLUSIVE
    with pytest.raises(ValueError, match="study.equivalence_margin_pts"):
        report.claims(str(tmp_path / "d"), margin_pts=0.0)


def test_no_verdict_is_typed_in_the_report():
    src = (ROOT / "odevit" / "repro" / "report.py").read_text()
    for word in (stats.SUPPORTS, stats.CONTRADICTS, stats.INCONCLUSIVE, stats.VACUOUS, stats.FACT, stats.NOT_A_CLAIM):
        assert f'"{word}"' not in src and f"'{word}'" not in src, word


def test_degenerate_schedule_warns_and_min1_rule():
    with pytest.warns(DegenerateSchedule, match=r"c = \[8, 8, 8, 8\]"):
        assert checkpoint_indices([100, 1, 1, 1], num_steps=8, tau=5) == [8, 8, 8, 8]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = checkpoint_indices([100, 1, 1, 1], num_steps=8, tau=5, mode="softmax_min1")
        assert c == [5, 6, 7, 8]  # 1 step each, the 4 others all to layer 1
        c = checkpoint_indices([3.0, 1.0, 2.0], num_steps=10, tau=1.0, mode="softmax_min1")
    steps = [c[0]] + [b - a for a, b in zip(c, c[1:])]
    assert min(steps) >= 1 and c[-1] == 10 and steps == [6, 1, 3]  # 1 + largest remainder of w (.665, .090, .245) x 7


def test_lipschitz_power_iteration_on_linear_field():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(8, 8, generator=g, dtype=torch.float64)
    f = lambda x: x @ A.T  # noqa: E731  psi(X) = X A^T row-wise: Jacobian norm = ||A||_2 for any state
    x = torch.randn(3, 5, 8, generator=g, dtype=torch.float64)
    sigma = analysis.jacobian_sigma_max(f, x, iters=200)
    torch.testing.assert_close(sigma, torch.full((3,), torch.linalg.matrix_norm(A, ord=2).item(), dtype=torch.float64))


def _teacher():
    torch.manual_seed(0)
    return create_teacher("vit_tiny_patch16_224", 10, img_size=28, patch_size=7, in_chans=1, embed_dim=32, depth=3,
                          num_heads=2)


def test_matched_free_model_has_the_students_architecture_and_nothing_of_the_teacher():
    t = _teacher()
    d = config.parse("distill", dict(num_steps=6, reg_tokens=2, dropout=0.1, solver="strang", spectral_init_qkv=False))
    student = study.pipeline.build_student(t, d)
    free = study.build_free(t, d)
    assert study.arch_kwargs(free) == study.arch_kwargs(student)
    assert study.arch_kwargs(free)["horizon"] == 3.0 and study.arch_kwargs(free)["head_norm"]
    assert all(p.requires_grad for p in free.parameters())
    assert not torch.equal(free.cls_token, student.cls_token) and not torch.equal(free.head.weight, t.head.weight)
    assert free.encoder_params() == student.encoder_params()
    assert free.field.attn.attn_drop.p == 0.1 and free.solver_name == "strang"


def test_published_preset_sets_every_switch_and_rescales_its_curriculum():
    path = ROOT / "presets" / "published_code.yaml"
    block = yaml.safe_load(path.read_text())["distill"]
    for key in ("solver", "jasmin_detach", "spectral_init_qkv", "head_norm", "attn_l1_weight", "mse_weight",
                "ce_from_epoch", "unfreeze_head_at", "label_smoothing", "cycles", "dropout"):
        assert key in block, key
    ov = study.preset_overrides(str(path), epochs=3)
    assert ov["ce_from_epoch"] == ov["unfreeze_head_at"] == 2 and "epochs" not in ov  # 200/300 of 3 epochs
    assert study.preset_overrides(str(path), epochs=300)["ce_from_epoch"] == 200
    s = config.parse("study", {"cells": {"ref": {}, "published": {"preset": str(path)}}})
    cfg, free = study.cell_config(config.parse("distill", {"epochs": 2}), s, "published")
    assert not free and cfg.solver == "parallel" and cfg.jasmin_detach and not cfg.head_norm and cfg.epochs == 2


def test_claims_figure_one_panel_per_unit_and_the_equivalence_rows_apart(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    root = _results(tmp_path / "e", drop={"parallel": 1.0})
    c = report.claims(str(root))
    fig = report.claims_figure(c, "x")
    shown = c[c.ours_mean.notna()]
    # one panel per unit, and the equivalence rows (0 ± margin) in a panel of their own beside their unit's
    equiv = shown[shown.direction == "equivalent"]
    assert len(equiv) and len(fig.axes) == shown.unit.nunique() + equiv.unit.nunique()
    equiv_ax = [ax for ax in fig.axes if ax.get_xlabel().endswith("equivalence rows")]
    assert [t.get_text() for ax in equiv_ax for t in ax.get_yticklabels()] == list(equiv.claim)
    assert sum(len(ax.get_yticks()) for ax in fig.axes) == len(shown)  # every claim with an estimate is drawn


def test_no_notebook_decides_a_verdict_itself_and_the_convergence_gate():
    """Verdicts come from report.decide (a study's claims table) or the plans' verdict files, never from a notebook
    calling stats.verdict; a run that had not finished learning turns a decided verdict into "not converged"."""
    notebooks = sorted(Path(__file__).parents[1].glob("notebooks/*.ipynb"))
    assert len(notebooks) >= 8  # every notebook is read
    for nb in notebooks:
        code = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        assert "stats.verdict(" not in code, f"{nb} decides a verdict itself: use report.decide"
    e = {"direction": "greater", "n": 3, "ci_low": 1.0, "ci_high": 2.0, "null": 0.0}
    assert report.decide(e, True) == stats.SUPPORTS and report.decide(e, False) == stats.NOT_CONVERGED
    assert report.gate(stats.FACT, False) == stats.FACT and report.gate(stats.NOT_MEASURED, False) == stats.NOT_MEASURED


def tiny_study(tmp_path: Path, monkeypatch, cells: dict) -> dict:
    """A tiny study in tmp_path (the working directory from now on): synthetic data, a fresh 2-block teacher saved as
    02_teacher's best.pt with its layer distances, the given study cells; returns the checked configs."""
    from odevit.repro import pipeline, train

    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["base"].update(dataset="synthetic", synthetic_size=96, val_size=16, batch_size=16, eval_batch_size=8,
                     device="cpu")
    p["teacher"].update(name=None, patch_size=7, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0)
    p["distill"].update(num_steps=4, epochs=2)
    p["study"].update(train_limit=32, robustness_steps=[1, 8], robustness_test_limit=16, cells=cells)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    monkeypatch.chdir(tmp_path)
    cfg = config.check_stage("cell")
    train.save_atomic({"model": pipeline.build_teacher(cfg["base"], cfg["teacher"]).state_dict()},
                      "checkpoints/02_teacher/best.pt")
    pipeline.write_csv(pd.DataFrame({"layer": [1, 2], "distance": [1.0, 2.0]}), "results/02_teacher/distances.csv")
    return cfg


def test_cell_scores_the_test_set_once_and_times_its_phases(tmp_path, monkeypatch):
    """A free cell end to end (tiny synthetic data, a fresh teacher file): per-epoch evaluation on the validation split
    only, the test set once at best.pt, the Acc@1-vs-N point at the trained N read off that pass, timing phases."""
    from odevit.repro import pipeline, train

    tiny_study(tmp_path, monkeypatch, {"ref": {}, "free": {"free": True}})
    calls, real = [], train.evaluate

    def counting(model, loader, device, num_steps=None, **kw):
        calls.append((len(loader.split), loader.n, num_steps))
        return real(model, loader, device, num_steps=num_steps, **kw)

    monkeypatch.setattr(train, "evaluate", counting)
    m = study.run("free", 0)
    test_size = 24  # synthetic: max(96 // 4, 16) test images; validation: the last 16 of the 96 training images
    assert [c for c in calls if c[0] == 16] == [(16, 16, None)] * 2  # validation, once per epoch
    assert [c for c in calls if c[0] == test_size and c[2] is None] == [(test_size, test_size, None)]  # test: once
    assert sorted(c[2] for c in calls if c[0] == test_size and c[2] is not None) == [1, 2, 8]  # N = 4 reused
    assert m["train_images"] == 32 and m["val_images"] == 16 and m["selected_on"] == "val"
    assert m["epochs_run"] == 2 and not m["stopped_early"] and m["converged"] is False  # 2 < window + 1 epochs
    assert m["val_gain_last_pts"] is None and m["best_epoch"] in (1, 2)
    hist = pd.read_csv("results/cells/free/s0/history.csv")
    assert {"val_acc1", "eval_time_s", "epoch_time_s", "lr", "img_per_s"} <= set(hist.columns)
    assert "test_acc1" not in hist.columns
    t = pipeline.read_json("results/cells/free/s0/timing.json")
    assert set(pipeline.PHASES) | {"total", "other", "train_time_s"} == set(t)
    assert t["train"] == pytest.approx(hist.epoch_time_s.sum(), abs=1e-3) and t["startup"] > 0
    assert sum(t[k] for k in pipeline.PHASES) + t["other"] == pytest.approx(t["total"], abs=0.01)


def test_stage_times_sums_phases_and_notebook_durations(tmp_path):
    import json

    from odevit.repro import results_pages

    for path, t in (("results/cells/ref/s0", {"train": 10.0, "data": 1.0, "total": 15.0, "train_time_s": 10.0}),
                    ("results/cells/free/s1", {"train": 20.0, "data": 2.0, "total": 25.0}),
                    ("results/02_teacher", {"train": 100.0, "startup": 3.0, "total": 120.0})):
        (tmp_path / path).mkdir(parents=True)
        (tmp_path / path / "timing.json").write_text(json.dumps(t))
    from odevit.repro import notebook

    for name, d in (("02_teacher", 130.0), ("06_dynamics", 7.5)):  # what each notebook stage records
        notebook.record_time(name, d, str(tmp_path / notebook.TIMES))
    s = results_pages.stage_times(str(tmp_path))
    assert s["phases_s"] == {"train": 130.0, "data": 3.0, "startup": 3.0}
    assert s["cells_s"] == 40.0 and s["cells"] == 2 and s["notebooks_s"] == {"02_teacher": 130.0, "06_dynamics": 7.5}
    assert s["stages_s"] == 177.5


def test_record_time_drops_stages_that_are_no_longer_notebooks(tmp_path):
    """A renamed notebook's old entry (12_v2_verdicts became 08_v2_verdicts) would be summed twice into stages_s."""
    import json

    from odevit.repro import notebook

    path = tmp_path / "times.json"
    path.write_text(json.dumps({"12_v2_verdicts": 9.1, "01_data": 10.0}))
    notebook.record_time("08_v2_verdicts", 8.0, str(path))
    assert json.loads(path.read_text()) == {"01_data": 10.0, "08_v2_verdicts": 8.0}


def test_run_time_shows_each_phase_before_and_now(tmp_path):
    """With a baseline record of another run, the run-time section gives every phase and the per-cell medians before
    and now, computed from the files (a baseline equal to the current run shows one column)."""
    import json
    import subprocess

    from odevit.repro import results_pages

    def run_record(wall: float, train: float, cells: dict) -> None:
        for (cell, seed), (total, tr, startup) in cells.items():
            d = tmp_path / f"results/cells/{cell}/s{seed}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "timing.json").write_text(json.dumps({"train": tr, "startup": startup, "total": total}))
        (tmp_path / "results/run.json").write_text(json.dumps({
            "date": "2026-01-01", "machine": "x86_64, 2 CPU cores, no GPU", "wall_s": wall,
            "phases_s": {"train": train, "startup": 9.0}, "notebooks_s": {"06_dynamics": 5.0}, "cells": len(cells),
            "dvc_other_s": wall - train - 14.0}))

    run_record(100.0, 50.0, {("ref", 0): (30.0, 20.0, 4.0), ("ref", 1): (34.0, 20.0, 5.0), ("free", 0): (40.0, 20.0, 6.0)})
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert results_pages.cell_medians(str(tmp_path))["outside_train"] == 14.0
    rec = results_pages.save_run_baseline(str(tmp_path))
    assert rec["cell_medians_s"]["startup"] == 5.0 and rec["wall_s"] == 100.0
    one = results_pages.run_time(str(tmp_path))
    assert "before" not in one and "| DVC and the rest (process starts, hashing, publish) | 36 | 36 % |" in one
    run_record(80.0, 50.0, {("ref", 0): (25.0, 20.0, 2.0), ("ref", 1): (27.0, 20.0, 3.0), ("free", 0): (30.0, 20.0, 3.0)})
    two = results_pages.run_time(str(tmp_path))
    assert "| training loops (teacher + every cell) | 50 | 50 % | 50 | 62 % |" in two
    assert "| DVC and the rest (process starts, hashing, publish) | 36 | 36 % | 16 | 20 % |" in two
    assert "| **wall-clock of `dvc repro`** | 100 | 100 % | 80 | 100 % |" in two
    assert "| before | 5.0 | 14.0 |" in two and "| this run | 3.0 | 7.0 |" in two
    assert "median 7 s outside its training loop" in two
    assert "(non-training share ≤ 25 %: not met; ≤ 10 s per cell outside training: met)" in two  # 38 %, 7 s
    assert "≤ 10 s per cell outside training: not met" in one  # 14 s
    assert "Not a breakdown" not in one + two
    # stage timings that add up to more than the wall-clock (stages committed from an earlier run): flagged
    run_record(40.0, 50.0, {("ref", 0): (25.0, 20.0, 2.0), ("ref", 1): (27.0, 20.0, 3.0), ("free", 0): (30.0, 20.0, 3.0)})
    three = results_pages.run_time(str(tmp_path))
    assert "| DVC and the rest (process starts, hashing, publish) | 36 | 36 % | -24 | -60 % |" in three
    assert ("**Not a breakdown of this wall-clock:** the stages' own timings add up to 64 s, more than the 40 s of "
            "this `dvc repro`") in three
    # ... and its headline is the stages' sum (what a whole run takes), not the shorter wall-clock
    assert "its stages' own timings add up to **1.1 min** (`stages_s`)" in three and "took 0.7 min wall-clock" in three
    assert "its stages' own timings add up" not in one + two


def test_budget_title_says_what_ran_when_early_stopping_cut_the_cap(tmp_path):
    """The figures' budget line and the claims' budget column: the epochs that ran (early stopping) in every cell
    rather than the cap, else the fixed budget (the converged study's figure read 9–16 epochs, the reference's
    alone, while its free cell ran 18; its claims.csv read the cap, 20)."""
    import json

    from odevit.repro.study import collect

    def write(cell, epochs_run):
        for s, e in enumerate(epochs_run):
            d = tmp_path / f"results/cells/{cell}/s{s}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "metrics.json").write_text(json.dumps({"cell": cell, "seed": s, "acc1": 0.8, "train_images": 55000,
                                                        "epochs": 20, "epochs_run": e, "converged": True}))

    write("ref", [16, 9, 15]), write("free", [18, 15, 18])
    assert report.budget_title(str(tmp_path / "results")) == (
        "3 seeds (paired), 55000 train images × 9–18 epochs (cap 20, stopped on validation) per cell")
    assert report.budget(collect(str(tmp_path / "results")), ["ref", "free"]) == (
        "ref: 55000 images x 9–16 epochs (cap 20, stopped on validation), 3/3 converged; "
        "free: 55000 images x 15–18 epochs (cap 20, stopped on validation), 3/3 converged")
    write("ref", [20, 20, 20]), write("free", [20, 20, 20])
    assert report.budget_title(str(tmp_path / "results")) == "3 seeds (paired), 55000 train images × 20 epochs per cell"
    assert report.budget(collect(str(tmp_path / "results")), ["ref"]) == "ref: 55000 images x 20 epochs, 3/3 converged"
