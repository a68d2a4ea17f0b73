"""The study's arithmetic and builders: seed statistics (known answers), the matched free model, preset recipes,
the degenerate-schedule warning, the Lipschitz estimator (linear field of known norm)."""
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from odevit import analysis, config, report, stats, study
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
    assert t.resolved.iloc[0] and t.verdict.iloc[0] == "ref higher (resolved)"


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


def test_cell_scores_the_test_set_once_and_times_its_phases(tmp_path, monkeypatch):
    """A free cell end to end (tiny synthetic data, a fresh teacher file): per-epoch evaluation on the validation split
    only, the test set once at best.pt, the Acc@1-vs-N point at the trained N read off that pass, timing phases."""
    from odevit import pipeline, train

    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["base"].update(dataset="synthetic", synthetic_size=96, val_size=16, batch_size=16, eval_batch_size=8,
                     device="cpu")
    p["teacher"].update(name=None, patch_size=7, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0)
    p["distill"].update(num_steps=4, epochs=2)
    p["study"].update(train_limit=32, robustness_steps=[1, 8], robustness_test_limit=16,
                      cells={"ref": {}, "free": {"free": True}})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    monkeypatch.chdir(tmp_path)
    cfg = config.check_stage("cell")
    train.save_atomic({"model": pipeline.build_teacher(cfg["base"], cfg["teacher"]).state_dict()},
                      "checkpoints/02_teacher/best.pt")
    pipeline.write_csv(pd.DataFrame({"layer": [1, 2], "distance": [1.0, 2.0]}), "results/02_teacher/distances.csv")
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

    from odevit import readme

    for path, t in (("results/cells/ref/s0", {"train": 10.0, "data": 1.0, "total": 15.0, "train_time_s": 10.0}),
                    ("results/cells/free/s1", {"train": 20.0, "data": 2.0, "total": 25.0}),
                    ("results/02_teacher", {"train": 100.0, "startup": 3.0, "total": 120.0})):
        (tmp_path / path).mkdir(parents=True)
        (tmp_path / path / "timing.json").write_text(json.dumps(t))
    (tmp_path / "outputs").mkdir()
    for name, d in (("02_teacher", 130.0), ("03_ode_scratch", 7.5)):
        (tmp_path / f"outputs/{name}.ipynb").write_text(json.dumps({"metadata": {"papermill": {"duration": d}}}))
    s = readme.stage_times(str(tmp_path))
    assert s["phases_s"] == {"train": 130.0, "data": 3.0, "startup": 3.0}
    assert s["cells_s"] == 40.0 and s["cells"] == 2 and s["notebooks_s"] == {"02_teacher": 130.0, "03_ode_scratch": 7.5}
    assert s["stages_s"] == 177.5
