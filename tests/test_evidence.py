"""odevit.repro.evidence: a study run in another clone, committed run by run, read back by the README."""
import hashlib
import json
from pathlib import Path
from typing import Optional

import pandas as pd
import pytest
import yaml

from odevit.repro import evidence, exploratory_pages, report, results_pages, stats
from test_study import _results


def _params(clone: Path, cells, seeds=(0, 1, 2)) -> None:
    clone.mkdir(parents=True, exist_ok=True)
    (clone / "params.yaml").write_text(yaml.safe_dump({"study": {"cells": {c: {} for c in cells}, "seeds": list(seeds),
                                                                  "reference": "ref", "train_limit": 0,
                                                                  "equivalence_margin_pts": 1.0}}))


def _lock(clone: Path, stale=(), train_limit=0) -> None:
    """dvc.lock for every metrics.json under the clone: each stage with the params it ran with (train_limit 6000 for
    the (cell, seed) in `stale`: a run of another study left in the workspace) and the file's md5."""
    stages = {}
    for m in sorted(clone.glob("results/cells/*/s*/metrics.json")):
        cell, seed = m.parts[-3], int(m.parts[-2][1:])
        stages[f"cell@{cell}-{seed}"] = {
            "params": {"params.yaml": {f"study.cells.{cell}": {},
                                       "study.train_limit": 6000 if (cell, seed) in stale else train_limit}},
            "outs": [{"path": f"results/cells/{cell}/s{seed}/metrics.json", "md5": hashlib.md5(m.read_bytes()).hexdigest()}]}
    (clone / "dvc.lock").write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))


def _run(clone: Path, cell: str, seed: int, acc: float, epochs: int, converged: bool) -> None:
    d = clone / f"results/cells/{cell}/s{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "metrics.json").write_text(json.dumps({"cell": cell, "seed": seed, "acc1": acc, "val_acc1": acc + 0.01,
                                                "epochs_run": epochs, "best_epoch": epochs - 3,
                                                "converged": converged}))
    pd.DataFrame({"epoch": range(1, epochs + 1), "val_acc1": [acc * e / epochs for e in range(1, epochs + 1)]}
                 ).to_csv(d / "history.csv", index=False)
    (d / "timing.json").write_text(json.dumps({"total": 600.0}))


def test_snapshot_keeps_finished_runs_and_says_what_is_missing(tmp_path):
    clone, out = tmp_path / "clone", tmp_path / "repo/docs/evidence"
    _params(clone, ["ref", "ce", "free"])
    _run(clone, "ref", 0, 0.80, 9, True)
    _run(clone, "ref", 1, 0.82, 12, False)
    _run(clone, "free", 0, 0.78, 10, True)
    _run(clone, "ce", 1, 0.70, 2, False)  # left by an earlier study with other params (the lock says so)
    _run(clone, "free", 2, 0.70, 2, False)  # edited after the lock: its md5 differs
    (clone / "results/cells/ce/s0").mkdir(parents=True)  # a run under way: no metrics.json yet
    with pytest.raises(FileNotFoundError, match="no dvc.lock"):
        evidence.snapshot("conv", str(clone), "x", out=str(out))
    _lock(clone, stale=[("ce", 1)])
    (clone / "results/cells/free/s2/metrics.json").write_text('{"cell": "free", "seed": 2, "acc1": 0.99}')
    meta = evidence.snapshot("conv", str(clone), "dvc exp run -S x=1", out=str(out), note="CPU shared.")
    assert (meta["runs_planned"], meta["runs_finished"], meta["runs_converged"]) == (9, 3, 2)
    assert not (out / "conv/results/cells/ce").exists() and not (out / "conv/results/cells/free/s2").exists()
    assert meta["train_s"] == 1800.0 and not meta["complete"] and not meta["stages"] and meta["notes"] == ["CPU shared."]
    assert evidence.snapshot("conv", str(clone), "x", out=str(out), note="More.")["notes"] == ["CPU shared.", "More."]
    assert evidence.add_note("conv", "Later.", out=str(out)) == ["CPU shared.", "More.", "Later."]
    assert evidence.add_note("conv", "Later.", out=str(out)) == ["CPU shared.", "More.", "Later."]  # once
    assert json.loads((out / "conv/study.json").read_text())["runs_finished"] == 3  # the rest kept
    with pytest.raises(FileNotFoundError, match="no such snapshot"):
        evidence.add_note("absent", "x", out=str(out))
    dest = out / "conv"
    assert (dest / "results/cells/ref/s1/history.csv").is_file() and (dest / "curves.png").is_file()
    p = evidence.progress(str(dest)).set_index("cell")
    assert p.loc["ref", "runs"] == "2 of 3" and p.loc["ref", "test Acc@1 (%)"] == "81.00 ± 1.41"
    assert p.loc["ref", "epochs run"] == "9/12" and p.loc["ref", "converged"] == "1 of 2"
    assert p.loc["ce", "runs"] == "0 of 3" and p.loc["free", "min per run"] == "10"
    with pytest.raises(ValueError, match="6 of the study's runs have not finished"):
        evidence.snapshot("conv", str(clone), "x", stages=True, out=str(out))
    assert exploratory_pages.converged_study(str(tmp_path / "repo")).startswith("Not run yet")  # it reads converged_fmnist only


def test_readme_shows_progress_then_the_claims_table(tmp_path):
    repo, clone = tmp_path / "repo", tmp_path / "clone"
    out = repo / "docs/evidence"
    assert exploratory_pages.converged_study(str(repo)).startswith("Not run yet")
    _results(clone / "results")  # 3 seeds of every cell, the teacher's and 06's metrics
    cells = sorted(p.name for p in (clone / "results/cells").iterdir())
    _params(clone, cells)
    for c in cells:
        for s in range(3):
            pd.DataFrame({"epoch": [1, 2], "val_acc1": [0.5, 0.6]}).to_csv(clone / f"results/cells/{c}/s{s}/history.csv")
    _lock(clone)
    evidence.snapshot("converged_fmnist", str(clone), "dvc exp run $(preset)", out=str(out))
    text = exploratory_pages.converged_study(str(repo))
    assert "In progress" in text and f"{3 * len(cells)} of {3 * len(cells)} runs finished" in text
    with pytest.raises(FileNotFoundError):
        results_pages.claims_table(str(out / "converged_fmnist"))  # no claims.csv before the stages ran
    claims = report.claims(str(clone / "results"))  # what the snapshot computes itself from the runs it copies
    meta = evidence.snapshot("converged_fmnist", str(clone), "dvc exp run $(preset)", stages=True, t0=0.0, out=str(out))
    assert meta["complete"] and meta["wall_s"] > 0
    text = exploratory_pages.converged_study(str(repo))
    assert "In progress" not in text and "| `ts_minus_free` |" in text and report.summary_line(claims) in text
    assert text.index(report.summary_line(claims)) < text.index("Its runs:") < text.index("| cell ")  # then its runs
    assert text.startswith(f"**{report.summary_line(claims)}**") and "Retention is measured against the default run's teacher (" in text
    # a study of the headline cells only: the claims it could not measure are counted, not listed
    path = out / "converged_fmnist/results/07_report/claims.csv"
    c = pd.read_csv(path)
    c.loc[c.claim == "jasmin_on_minus_off", "verdict"] = stats.NOT_MEASURED
    c.to_csv(path, index=False)
    text = exploratory_pages.converged_study(str(repo))
    assert "| `jasmin_on_minus_off` |" not in text and "| `ts_minus_free` |" in text
    assert f"{(c.verdict == stats.NOT_MEASURED).sum()} claims need cells this study did not train" in text


def _study(out: Path, name: str, images: int, accs: dict, teacher: Optional[float] = None, planned: int = 0) -> None:
    """docs/evidence/NAME with one metrics.json per (cell, seed): accs = {cell: (acc of seed 0, 1, 2)}; `teacher`: an
    augmented teacher's test Acc@1 (its params and 02_teacher/metrics.json), else the default teacher's params;
    `planned`: the runs its study.json plans (0: those of accs, all finished)."""
    root = out / name
    _params(root, list(accs))
    if teacher is not None:
        params = yaml.safe_load((root / "params.yaml").read_text())
        (root / "params.yaml").write_text(yaml.safe_dump({**params, "teacher": {"augment": True}}))
        (root / "results/02_teacher").mkdir(parents=True)
        (root / "results/02_teacher/metrics.json").write_text(json.dumps({"acc1": teacher}))
    for cell, a in accs.items():
        for s, v in enumerate(a):
            (root / f"results/cells/{cell}/s{s}").mkdir(parents=True)
            (root / f"results/cells/{cell}/s{s}/metrics.json").write_text(json.dumps(
                {"cell": cell, "seed": s, "acc1": v, "train_images": images, "converged": True}))
    (root / "study.json").write_text(json.dumps({"complete": True, "runs_finished": 3 * len(accs),
                                                          "runs_planned": planned or 3 * len(accs)}))


def test_budget_curve_verdicts_follow_the_data(tmp_path):
    free = (0.70, 0.71, 0.69)
    _study(tmp_path, "small", 1000, {"ref": (0.75, 0.765, 0.74), "ce": (0.76, 0.775, 0.75), "free": free})
    _study(tmp_path, "large", 55000, {"ref": (0.701, 0.705, 0.69), "ce": (0.66, 0.672, 0.65), "free": free}, planned=12)
    _study(tmp_path, "strong", 1000, {"ref": (0.80, 0.815, 0.79), "ce": (0.69, 0.70, 0.71), "free": free}, teacher=0.91)
    _study(tmp_path, "running", 10000, {"ref": (0.8, 0.81, 0.79)})  # under way: no free run has finished
    both = evidence.budget_curve(["small", "large", "strong", "running", "absent"], out=str(tmp_path))
    assert 10000 not in set(both.train_images)
    assert list(both.teacher) == ["default"] * 4 + ["augmented"] * 2  # the default teacher's rows first
    strong = both[both.teacher == "augmented"].set_index("student")
    assert strong.teacher_acc1.tolist() == [91.0, 91.0] and both[both.teacher == "default"].teacher_acc1.isna().all()
    assert strong.loc["ref", "diff_mean"] == pytest.approx(30.5 / 3) and strong.loc["ref", "verdict"] == "supports"
    assert strong.loc["ce", "diff_mean"] == pytest.approx(0) and strong.loc["ce", "verdict"].startswith("inconclusive")
    t = evidence.budget_curve(["small", "large", "absent"], out=str(tmp_path)).set_index(["student", "train_images"])
    assert t.loc[("ref", 1000), "diff_mean"] == pytest.approx((5 + 5.5 + 5) / 3) and t.loc[("ref", 1000), "seeds"] == 3
    assert t.loc[("ref", 1000), "verdict"] == "supports"  # +5.2 pt, Holm over the 4 rows
    assert t.loc[("ref", 55000), "verdict"] == "inconclusive at this budget"  # -0.13 pt, seeds disagree
    assert t.loc[("ce", 55000), "verdict"] == "contradicts"  # about -4 pt in every seed
    assert t.loc[("ce", 1000), "holm_p"] >= t.loc[("ce", 1000), "p_vs_null"]
    png = evidence.budget_figure(both, str(tmp_path / "curve.png"))
    assert Path(png).stat().st_size > 0
    assert exploratory_pages.budget_curve(str(tmp_path)).startswith("Not run yet")
    (tmp_path / "docs/evidence").mkdir(parents=True)
    both.to_csv(tmp_path / "docs/evidence/budget_curve.csv", index=False)
    text = exploratory_pages.budget_curve(str(tmp_path))
    assert "| 1,000 | default | – | ref − free | 3 |" in text and "**contradicts**" in text and "budget_curve.png" in text
    rows = {line.split(" | ")[0] + line.split(" | ")[3]: line.split(" | ")[-2] for line in text.splitlines()
            if line.startswith("| 1,000 | default") or line.startswith("| 55,000 |")}  # the "all runs in" column
    assert rows == {"| 1,000ref − free": "yes", "| 1,000ce − free": "yes", "| 55,000ref − free": "no",
                    "| 55,000ce − free": "no"}  # "large" has 9 of its 12 planned runs
    assert "| 1,000 | augmented (91.00) | – | ref − free | 3 | 80.17 | 70.00 | +10.2" in text
    assert "- default teacher, ref − free: 1k +5.17 pt (helps), 55k -0.13 pt (no verdict)." in text
    assert "- default teacher, ce − free: 1k +6.17 pt (helps), 55k -3.93 pt (hurts); it stops helping between 1k and 55k images." in text
    assert "- augmented teacher, ce − free: 1k +0.00 pt (no verdict)." in text


def test_budget_figure_says_seeds_images_teachers_and_verdicts_and_its_legend_covers_nothing(tmp_path):
    """The budget curve's title names the seeds per point, the test images and the teachers' training images (read
    from the studies' files); one panel per student; every point coloured by its verdict with the claims figure's
    colours; the legend (teacher setups by name, verdicts) sits below the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    free = (0.70, 0.71, 0.69)
    _study(tmp_path, "small", 1000, {"ref": (0.75, 0.765, 0.74), "ce": (0.76, 0.775, 0.75), "free": free})
    _study(tmp_path, "large", 55000, {"ref": (0.701, 0.705, 0.69), "ce": (0.66, 0.672, 0.65), "free": free})
    _study(tmp_path, "strong", 1000, {"ref": (0.80, 0.815, 0.79), "ce": (0.69, 0.70, 0.71), "free": free}, teacher=0.91)
    for name in ("small", "large", "strong"):
        root = tmp_path / name
        params = yaml.safe_load((root / "params.yaml").read_text())
        params["base"] = {"dataset": "fashion_mnist", "test_limit": 0}
        (root / "params.yaml").write_text(yaml.safe_dump(params))
        (root / "results/02_teacher").mkdir(parents=True, exist_ok=True)
        m = root / "results/02_teacher/metrics.json"
        old = json.loads(m.read_text()) if m.is_file() else {}
        m.write_text(json.dumps({**old, "train_images": 55000}))
    t = evidence.budget_curve(["small", "large", "strong"], out=str(tmp_path))
    fig = evidence.budget_plot(t, out=str(tmp_path))
    title = fig._suptitle.get_text()
    assert "n = 3 seeds per point" in title and "whole Fashion-MNIST test split" in title and "55k images" in title
    assert len(fig.axes) == 2 and {ax.get_title() for ax in fig.axes} == {"ref (distill block as is) − free ODE",
                                                                          "ce (distill block as is) − free ODE"}
    labels = [x.get_text() for x in fig.legends[0].get_texts()]
    assert labels[0] == "default teacher" and labels[1] == "augmented teacher (test Acc@1 91.0 %)"
    assert {f"verdict: {v}" for v in t.verdict} <= set(labels)
    fig.canvas.draw()
    leg = fig.legends[0].get_window_extent()
    assert all(leg.y1 <= ax.get_tightbbox().y0 for ax in fig.axes)  # below the panels, their tick labels included
    # each point's marker in its verdict's colour (report.VERDICT_COLORS: the claims and verdicts figures')
    ax = fig.axes[[a.get_title() for a in fig.axes].index("ref (distill block as is) − free ODE")]
    faces = [to_hex(ln.get_markerfacecolor()) for ln in ax.lines if ln.get_marker() in ("o", "s", "^", "D")
             and len(ln.get_xdata()) == 1]  # the points (caplines are '_', the setups' lines have several points)
    want = [report.VERDICT_COLORS[v] for v in t[t.student == "ref"].verdict]
    assert sorted(faces) == sorted(want) and len(set(want)) > 1  # supports and inconclusive, told apart
    plt.close(fig)
    t.loc[0, "seeds"] = 2  # seeds that differ between points: each point says its n
    fig = evidence.budget_plot(t, out=str(tmp_path))
    assert "n=2" in [x.get_text() for a in fig.axes for x in a.texts]
    plt.close(fig)


def test_replicate_compare_counts_the_flips_each_rule_lets_through(tmp_path):
    """The same runs on two floating-point paths: ts_minus_free is (1, 1.5, 0.8) pt on one, (1, 2.5, -0.2) on the
    other. The intervals alone flip it (supports -> inconclusive); the replication rule reads inconclusive on both."""
    ref = (0.80, 0.801, 0.799)
    a = _results(tmp_path / "a", ref=ref, free=tuple(r - d for r, d in zip(ref, (0.010, 0.015, 0.008))))
    b = _results(tmp_path / "b", ref=ref, free=tuple(r - d for r, d in zip(ref, (0.010, 0.025, -0.002))))
    t = evidence.replicate_compare(str(a), str(b))
    runs = t["runs"].set_index(["cell", "seed"])
    assert runs.loc[("free", 1), "diff_pt"] == pytest.approx(-1.0) and runs.loc[("teacher", -1), "diff_pt"] == 0
    cells = t["cells"].set_index("cell")
    assert cells.loc["free", "mean_abs_diff_pt"] == pytest.approx(2 / 3) and cells.loc["ref", "mean_abs_diff_pt"] == 0
    c = t["claims"].set_index("claim").loc["ts_minus_free"]
    assert (c.primary_intervals, c.replicate_intervals) == (report.stats.SUPPORTS, report.stats.INCONCLUSIVE)
    assert (c.primary_rule, c.replicate_rule) == (report.stats.INCONCLUSIVE, report.stats.INCONCLUSIVE)
    assert c.flips_intervals and not c.flips_rule


def test_readme_float_noise_section_counts_the_flips(tmp_path):
    ref = (0.80, 0.801, 0.799)
    a = _results(tmp_path / "a", ref=ref, free=tuple(r - d for r, d in zip(ref, (0.010, 0.015, 0.008))))
    b = _results(tmp_path / "b", ref=ref, free=tuple(r - d for r, d in zip(ref, (0.010, 0.025, -0.002))))
    dest = tmp_path / "repo" / exploratory_pages.FLOAT_NOISE
    assert "Not measured yet" in exploratory_pages.float_noise(str(tmp_path / "repo"))
    dest.mkdir(parents=True)
    for key, t in evidence.replicate_compare(str(a), str(b)).items():
        t.to_csv(dest / f"replicate_{key}.csv", index=False)
    (dest / "study.json").write_text(json.dumps({"command": "dvc repro", "commit": "abc", "date": "2026-11-23",
                                                 "machine": {"cpu_model": "AMD EPYC", "cpu_capability": "DEFAULT",
                                                             "threads": 1, "cuda_device": None}}))
    text = exploratory_pages.float_noise(str(tmp_path / "repo"))
    flips = pd.read_csv(dest / "replicate_claims.csv")
    decided = flips[~flips.primary_intervals.isin([report.stats.FACT, report.stats.NOT_A_CLAIM])]
    assert f"by the intervals alone {int(decided.flips_intervals.sum())} of {len(decided)} (" in text
    assert "free +0.00/-1.00/+1.00 pt (seeds 0/1/2" in text  # free moved by (0, -1, +1) pt in the fabricated replicate
    assert int(decided.flips_intervals.sum()) > int(decided.flips_rule.sum())  # ts_minus_free(_rel) at least
    row = next(line for line in text.splitlines() if line.startswith("| `ts_minus_free` |"))
    assert row == "| `ts_minus_free` | supports → **inconclusive at this budget** | inconclusive at this budget → " \
                  "inconclusive at this budget |"


def test_run_seconds_after_a_resume():
    assert evidence.run_seconds({"total": 600.0, "other": 2.0, "train": 500.0}) == 600.0
    # resumed: the last process lived 640 s, the history's epochs took 3424 + 84 s (other = 640 - phases < 0)
    assert evidence.run_seconds({"total": 640.0, "other": -2928.0}) == pytest.approx(3568.0)


def test_budget_curve_borrows_free_runs_only_with_the_same_free_params(tmp_path):
    """A stronger-teacher study without a free cell is paired with the free runs of a study whose params differ only
    in the teacher's training and the schedule; a schedule with shared steps is flagged degenerate."""
    free = (0.70, 0.71, 0.69)
    _study(tmp_path, "small", 1000, {"ref": (0.75, 0.765, 0.74), "free": free})
    _study(tmp_path, "strong", 1000, {"ref": (0.80, 0.815, 0.79)}, teacher=0.91)
    for name, distill in (("small", {"epochs": 150, "tau": 3.0}), ("strong", {"epochs": 150, "tau": 15.0})):
        path = tmp_path / name / "params.yaml"
        path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), "distill": distill}))
    for s in range(3):  # the strong teacher's students ran with a degenerate schedule
        m = tmp_path / f"strong/results/cells/ref/s{s}/metrics.json"
        m.write_text(json.dumps({**json.loads(m.read_text()), "checkpoints": [0, 0, 0, 0, 0, 12]}))
    t = evidence.budget_curve(["small", "strong"], students=("ref",), out=str(tmp_path)).set_index("study")
    assert t.loc["strong", "free_from"] == "small" and t.loc["strong", "diff_mean"] == pytest.approx(30.5 / 3)
    assert t.loc["strong", "degenerate"] and t.loc["strong", "setup"] == "augmented, tau 15, c degenerate"
    assert t.loc["small", "free_from"] == "small" and t.loc["small", "setup"] == "default"
    (tmp_path / "docs/evidence").mkdir(parents=True)
    evidence.budget_curve(["small", "strong"], students=("ref",), out=str(tmp_path)).to_csv(
        tmp_path / "docs/evidence/budget_curve.csv", index=False)
    text = exploratory_pages.budget_curve(str(tmp_path))
    assert "[0, 0, 0, 0, 0, 12] (15) **degenerate**" in text and "| 70.00† |" in text
    assert "† free runs of `docs/evidence/small/`" in text
    assert "- augmented teacher (τ 15, c degenerate), ref − free: 1k +10.17 pt" in text
    # the student rule differs (another epoch cap): the free runs are not the ones this study would have made
    path = tmp_path / "strong/params.yaml"
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), "distill": {"epochs": 20, "tau": 15.0}}))
    t = evidence.budget_curve(["small", "strong"], students=("ref",), out=str(tmp_path))
    assert list(t.study) == ["small"]


def test_teacher_strength_pairs_students_of_the_same_rule_and_flips_with_the_data(tmp_path):
    """The stronger teacher's students against the default teacher's of the same seeds, budget and student rule:
    better in every seed supports "> 0", worse in every seed contradicts it, mixed seeds decide nothing; a default
    study with another student rule is not a baseline."""
    _study(tmp_path, "small", 1000, {"ref": (0.75, 0.765, 0.74), "ce": (0.76, 0.775, 0.75), "free": (0.7,) * 3})
    _study(tmp_path, "strong", 1000, {"ref": (0.80, 0.812, 0.795), "ce": (0.77, 0.765, 0.752)}, teacher=0.91)
    for name, tau in (("small", 3.0), ("strong", 15.0)):
        path = tmp_path / name / "params.yaml"
        path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), "distill": {"epochs": 150, "tau": tau}}))
    t = evidence.teacher_strength(["strong"], out=str(tmp_path), candidates=["small", "strong"]).set_index("student")
    assert list(t.baseline) == ["small", "small"] and list(t.seeds) == [3, 3]
    assert t.loc["ref", "diff_mean"] == pytest.approx((5 + 4.7 + 5.5) / 3) and t.loc["ref", "verdict"] == "supports"
    assert t.loc["ce", "diff_mean"] == pytest.approx((1 - 1 + 0.2) / 3)
    assert t.loc["ce", "verdict"] == "inconclusive at this budget"
    assert t.loc["ref", "holm_p"] == pytest.approx(2 * min(t.p_vs_null))  # Holm over the two rows
    for s, v in enumerate((0.70, 0.712, 0.695)):  # the stronger teacher's ref students now lose about 5 pt in every seed
        m = tmp_path / f"strong/results/cells/ref/s{s}/metrics.json"
        m.write_text(json.dumps({**json.loads(m.read_text()), "acc1": v}))
    t = evidence.teacher_strength(["strong"], out=str(tmp_path), candidates=["small", "strong"]).set_index("student")
    assert t.loc["ref", "diff_mean"] == pytest.approx(-(5 + 5.3 + 4.5) / 3) and t.loc["ref", "verdict"] == "contradicts"
    (tmp_path / "docs/evidence").mkdir(parents=True)
    t.reset_index().to_csv(tmp_path / "docs/evidence/teacher_strength.csv", index=False)
    text = exploratory_pages.teacher_strength(str(tmp_path))
    assert "| 1,000 | augmented, τ 15 (91.00) | – | ref | 3 | 70.23 | 75.17 (c = –) | -4.93 [" in text
    assert "**contradicts**" in text and "`docs/evidence/small/`" in text
    path = tmp_path / "strong/params.yaml"  # another student rule (epoch cap): the default study is no baseline
    path.write_text(yaml.safe_dump({**yaml.safe_load(path.read_text()), "distill": {"epochs": 20, "tau": 15.0}}))
    assert not len(evidence.teacher_strength(["strong"], out=str(tmp_path), candidates=["small", "strong"]))


def _history(root: Path, cell: str, seed: int, loss, val, lr, best: int) -> None:
    d = root / f"results/cells/{cell}/s{seed}"
    d.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"epoch": range(1, len(loss) + 1), "train_loss": loss, "val_acc1": val, "lr": lr}).to_csv(
        d / "history.csv", index=False)
    (d / "metrics.json").write_text(json.dumps({"cell": cell, "seed": seed, "acc1": 0.8, "best_epoch": best}))


def test_stopping_audit_reports_the_learning_rate_and_loss_rises_of_each_stop(tmp_path):
    root = tmp_path / "study"
    _params(root, ["ref"], seeds=(0, 1))
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump({**params, "distill": {"epochs": 5}}))
    _history(root, "ref", 0, loss=[3.0, 2.0, 2.5], val=[0.5, 0.6, 0.55], lr=[1.0, 0.8, 0.6], best=2)  # stopped early
    _history(root, "ref", 1, loss=[3.0, 2.0, 1.5, 1.2, 1.1], val=[0.5, 0.6, 0.62, 0.64, 0.65], lr=[1.0, 0.8, 0.5, 0.2, 0.1],
             best=5)
    t = evidence.stopping_audit(["study", "absent"], out=str(tmp_path)).set_index("seed")
    assert t.loc[0, "epochs_run"] == 3 and t.loc[0, "cap"] == 5 and t.loc[0, "best_epoch"] == 2
    assert t.loc[0, "lr_at_stop_pct"] == pytest.approx(60) and t.loc[0, "loss_rises"] == "3"
    assert t.loc[0, "max_loss_rise_pct"] == pytest.approx(25) and t.loc[0, "max_val_drop_pts"] == pytest.approx(5)
    assert t.loc[1, "loss_rises"] == "" and t.loc[1, "max_loss_rise_pct"] == 0 and t.loc[1, "max_val_drop_pts"] == 0
    s = evidence.audit_summary(t.reset_index()).iloc[0]
    assert (s.runs, s.stopped_at_high_lr, s.loss_rose) == (2, 1, 1)
    # the counts follow the data: a stop at 40 % of the peak is not a high-learning-rate stop, a falling loss no rise
    _history(root, "ref", 0, loss=[3.0, 2.0, 1.5], val=[0.5, 0.6, 0.55], lr=[1.0, 0.8, 0.4], best=2)
    s = evidence.audit_summary(evidence.stopping_audit(["study"], out=str(tmp_path))).iloc[0]
    assert (s.stopped_at_high_lr, s.loss_rose) == (0, 0)
    with pytest.raises(FileNotFoundError, match="absent"):
        evidence.stopping_audit(["absent"], out=str(tmp_path))


@pytest.mark.parametrize("name", ["converged_fmnist", "budget_fmnist_1k"])
def test_a_snapshots_claims_table_is_what_the_report_code_computes_from_its_runs(name, tmp_path):
    """`evidence claims NAME` recomputes a snapshot's claims.csv (and figure) from its committed runs; on the committed
    snapshots it changes no column, so their budget column states the epochs that ran (not the cap)."""
    import shutil

    root = Path(__file__).resolve().parents[1] / evidence.EVIDENCE / name
    shutil.copytree(root, tmp_path / name, ignore=shutil.ignore_patterns("*.png", "history.csv", "*_per_*.csv"))
    assert evidence.recompute_claims(name, out=str(tmp_path)) == []
    budget = pd.read_csv(tmp_path / name / "results/07_report/claims.csv").set_index("claim").budget["ts_minus_free"]
    assert "(cap " in budget and "stopped on validation" in budget


def test_budget_curve_states_each_points_stopping_rule_from_its_params(tmp_path):
    """The README's budget curve names each point's cap and patience from its snapshot's params.yaml (the prose had
    said 'patience 15, at most 150, at 1k–10k' where 3k and 10k ran 6 / 60 and 4 / 30)."""
    for name, cap, patience in [("a_1k", 150, 15), ("a_10k", 30, 4), ("b_10k", 40, 4)]:
        (tmp_path / evidence.EVIDENCE / name).mkdir(parents=True)
        (tmp_path / evidence.EVIDENCE / name / "params.yaml").write_text(
            yaml.safe_dump({"distill": {"epochs": cap, "patience": patience, "min_delta_pts": 0.2}}))
    t = pd.DataFrame({"study": ["a_1k", "a_10k", "b_10k", "a_1k"], "train_images": [1000, 10000, 10000, 1000]})
    assert exploratory_pages.stopping_rules(t, str(tmp_path)) == (
        "Each point's stopping rule (its snapshot's `params.yaml`; patience: epochs without a validation Acc@1 gain of "
        "0.2 pt): 1,000: at most 150 epochs, patience 15; 10,000 (a_10k): at most 30 epochs, patience 4; "
        "10,000 (b_10k): at most 40 epochs, patience 4.")
