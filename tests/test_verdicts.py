"""Verdicts from the plan: hand-computed intervals, each verdict flipping when the data do, the convergence rule, and
the post hoc label flipping both ways with the plan."""
import copy
import json
import math

import pandas as pd
import pytest

from odevit.repro import plan as P
from odevit.repro import verdicts as V

Q = dict(id="q", claim="c", kind="paired", a="ref", b="free", metric="acc1", unit="pt", test="superiority",
         direction="greater")


def test_superiority_interval_by_hand_and_flips():
    x = [2.0, 2.5, 3.0]  # mean 2.5, sd 0.5; alpha 0.05: t(0.975, 2) = 4.302653
    e = V.decide(x, Q, 0.05)
    half = 4.302652729911275 * 0.5 / math.sqrt(3)
    assert (e["mean"], e["sd"]) == (2.5, 0.5) and e["ci_low"] == pytest.approx(2.5 - half)
    assert e["verdict"] == V.SUPPORTS
    assert V.decide([-v for v in x], Q, 0.05)["verdict"] == V.CONTRADICTS
    assert V.decide([1.0, -1.0, 0.5], Q, 0.05)["verdict"] == V.INCONCLUSIVE
    # a stricter family level widens the interval: alpha 0.001, t(0.9995, 2) = 31.6 -> half 9.1 -> inconclusive
    assert V.decide(x, Q, 0.001)["verdict"] == V.INCONCLUSIVE
    less = dict(Q, direction="less")
    assert V.decide(x, less, 0.05)["verdict"] == V.CONTRADICTS


def test_non_inferiority_and_equivalence_flip():
    ni = dict(Q, test="non_inferiority", margin=5.6)
    assert V.decide([-1.0, -0.5, -1.5], ni, 0.05)["verdict"] == V.SUPPORTS          # well above -5.6
    assert V.decide([-9.0, -8.5, -9.5], ni, 0.05)["verdict"] == V.CONTRADICTS       # entirely below -5.6
    assert V.decide([-5.0, -7.0, -6.0], ni, 0.05)["verdict"] == V.INCONCLUSIVE
    eq = dict(Q, test="equivalence", direction="none", margin=1.0)
    assert V.decide([0.1, -0.1, 0.0, 0.05, -0.05], eq, 0.05)["verdict"] == V.SUPPORTS
    assert V.decide([-65.0, -60.0, -70.0], eq, 0.05)["verdict"] == V.CONTRADICTS
    assert V.decide([0.5, -1.5, 1.0], eq, 0.05)["verdict"] == V.INCONCLUSIVE


def test_convergence_rule_by_hand():
    # 8 epochs, window 25 % -> last 2; best before 0.880, best of the last two 0.884: gain 0.4 pt;
    # threshold = SE at 0.884 on 5000 images = 100 sqrt(0.884 * 0.116 / 5000) = 0.4529 pt -> converged
    accs = [0.70, 0.80, 0.85, 0.86, 0.87, 0.880, 0.883, 0.884]
    conv, gain, thr = V.convergence(accs, 5000, 0.25, 1.0)
    assert gain == pytest.approx(0.4) and thr == pytest.approx(100 * math.sqrt(0.884 * 0.116 / 5000))
    assert conv
    accs[-1] = 0.890  # a 1 pt gain in the schedule's tail: still learning
    assert not V.convergence(accs, 5000, 0.25, 1.0)[0]


def _tree(root, study, hashes, acc, epochs_acc=None):
    """results/studies/STUDY/{ref,free}/sSEED: metrics.json + history.csv."""
    for cell, base in (("ref", acc), ("free", 0.80)):
        for i, seed in enumerate((100, 101, 102)):
            d = root / "studies" / study / cell / f"s{seed}"
            d.mkdir(parents=True, exist_ok=True)
            a = base + 0.001 * i
            m = dict(cell=cell, seed=seed, acc1=a, acc1_half_n=a, acc1_sub_n=a, acc1_double_n=a, epochs_run=4,
                     best_epoch=4, val_images=5000, plan_hash=hashes[i], provenance={})
            (d / "metrics.json").write_text(json.dumps(m))
            pd.DataFrame({"epoch": [1, 2, 3, 4], "val_acc1": epochs_acc or [0.5, 0.7, 0.8, 0.801]}).to_csv(
                d / "history.csv", index=False)
    (root / "02_teacher").mkdir(exist_ok=True)
    (root / "02_teacher" / "metrics.json").write_text(json.dumps({"acc1": 0.85}))


def _plan():
    plan = P.load("plan.yaml")
    st = plan["studies"]["confirm_3k"]
    st["seeds"] = [100, 101, 102]
    st["budget"] = dict(st["budget"], epochs=4)  # the runs of _tree: 4 epochs
    st["cells"] = {"ref": {}, "free": {"free": True}}
    st["questions"] = [dict(q, exploratory=None) for q in st["questions"] if q["a"] == "ref"]
    return plan


def test_rows_follow_data_convergence_and_plan_hash(tmp_path):
    plan = _plan()
    h = P.study_hash(plan, "confirm_3k")
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.83)  # ref 3 pt above free in every seed
    row = V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0]
    assert row.verdict == V.SUPPORTS and not row.post_hoc and row.n == 3 and row["mean"] == pytest.approx(3.0)
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.77)  # now 3 pt below: the verdict flips with the data
    assert V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].verdict == V.CONTRADICTS
    # one run trained under another version of the study's plan: post hoc; back to this plan's hash: not
    _tree(tmp_path, "confirm_3k", [h, h, "0123456789ab"], acc=0.77)
    row = V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0]
    assert row.post_hoc and row.verdict == f"{V.CONTRADICTS} (post hoc)"
    edited = copy.deepcopy(plan)
    edited["studies"]["confirm_3k"]["questions"][0]["claim"] += " (reworded after the runs)"
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.77)
    assert V.judge(edited, "confirm_3k", str(tmp_path)).iloc[0].post_hoc       # plan changed after the runs
    assert not V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].post_hoc
    # still learning in the schedule's tail -> not converged, no verdict
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.77, epochs_acc=[0.5, 0.6, 0.7, 0.8])
    assert V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].verdict == V.NOT_CONVERGED


def test_missing_seeds_say_incomplete_and_family_size_is_fixed(tmp_path):
    plan = _plan()
    h = P.study_hash(plan, "confirm_3k")
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.83)
    import shutil
    shutil.rmtree(tmp_path / "studies/confirm_3k/free/s102")
    row = V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0]
    assert row.verdict == "incomplete (2 of 3 seeds)"
    assert row.alpha_each == pytest.approx(0.05 / len(plan["studies"]["confirm_3k"]["questions"]))
    assert V.judge(plan, "confirm_1k", str(tmp_path)).verdict.eq(V.NOT_MEASURED).any()
    # a run that records fewer epochs than its study's budget is not one of its runs: that seed is missing too
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.83)
    assert V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].verdict == V.SUPPORTS
    _edit(tmp_path, "confirm_3k", "ref", 101, epochs_run=3)
    assert V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].verdict == "incomplete (2 of 3 seeds)"


def test_plan_verdicts_take_every_figures_colours():
    from odevit.repro import report, stats

    for plan_v, report_v in ((V.SUPPORTS, stats.SUPPORTS), (V.CONTRADICTS, stats.CONTRADICTS),
                             (V.INCONCLUSIVE, stats.INCONCLUSIVE), (V.NOT_CONVERGED, stats.NOT_CONVERGED),
                             (V.NOT_MEASURED, stats.NOT_MEASURED)):
        assert V.color(plan_v) == report.VERDICT_COLORS[report_v], plan_v
    assert len({V.color(x) for x in (V.SUPPORTS, V.CONTRADICTS, V.INCONCLUSIVE, V.INCOMPLETE)}) == 4


def test_cell_mean_convergence_tolerates_one_borderline_run_not_a_learning_cell(tmp_path):
    plan = _plan()
    h = P.study_hash(plan, "confirm_3k")
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.83)
    # one ref run gains 0.6 pt in its last epoch (threshold there ~0.56 pt), the other two 0.1 pt
    hist = tmp_path / "studies/confirm_3k/ref/s101/history.csv"
    pd.DataFrame({"epoch": [1, 2, 3, 4], "val_acc1": [0.5, 0.7, 0.800, 0.806]}).to_csv(hist, index=False)
    assert V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].verdict == V.NOT_CONVERGED  # level run: any run
    cell = copy.deepcopy(plan)
    cell["studies"]["confirm_3k"]["convergence"] = "cell_mean"
    h2 = P.study_hash(cell, "confirm_3k")
    assert h2 != h  # the level is part of the study's plan
    _tree(tmp_path, "confirm_3k", [h2] * 3, acc=0.83)
    pd.DataFrame({"epoch": [1, 2, 3, 4], "val_acc1": [0.5, 0.7, 0.800, 0.806]}).to_csv(hist, index=False)
    row = V.judge(cell, "confirm_3k", str(tmp_path)).iloc[0]
    assert row.verdict == V.SUPPORTS and row.converged == "5/6"  # mean gain (0.1 + 0.6 + 0.1) / 3 < ~0.56
    # every ref run still learning: the cell's mean gain is above its threshold -> not converged
    _tree(tmp_path, "confirm_3k", [h2] * 3, acc=0.83)
    for seed in (100, 101, 102):
        pd.DataFrame({"epoch": [1, 2, 3, 4], "val_acc1": [0.5, 0.7, 0.800, 0.806]}).to_csv(
            tmp_path / f"studies/confirm_3k/ref/s{seed}/history.csv", index=False)
    assert V.judge(cell, "confirm_3k", str(tmp_path)).iloc[0].verdict == V.NOT_CONVERGED
    # one run still learning (+1.8 pt) beside two that fell (-0.6 pt each): a fall is no gain, so the mean is 0.6
    # pt, above the ~0.55 pt threshold (raw gains would average 0.2 pt and pass)
    for seed, accs in ((100, [0.5, 0.7, 0.800, 0.818]), (101, [0.5, 0.7, 0.806, 0.800]),
                       (102, [0.5, 0.7, 0.806, 0.800])):
        pd.DataFrame({"epoch": [1, 2, 3, 4], "val_acc1": accs}).to_csv(
            tmp_path / f"studies/confirm_3k/ref/s{seed}/history.csv", index=False)
    assert V.judge(cell, "confirm_3k", str(tmp_path)).iloc[0].verdict == V.NOT_CONVERGED
    bad = copy.deepcopy(plan)
    bad["studies"]["confirm_3k"]["convergence"] = "majority"
    path = tmp_path / "plan.yaml"
    path.write_text(__import__("yaml").safe_dump(bad))
    with pytest.raises(P.PlanError, match="convergence must be one of"):
        P.load(str(path))


def _run(root, study, cell, seed, procs, machine, together=None, images=100, epochs=2):
    d = root / "studies" / study / cell / f"s{seed}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "metrics.json").write_text(json.dumps(dict(cell=cell, seed=seed, train_images=images, epochs_run=epochs,
                                                    trained_together=together,
                                                    provenance=dict(machines=[machine], processes=procs))))


def _proc(pid, start_s, wall_s, ended=True):
    """A process record: started at 12:00:00 + start_s (after start-up), wall_s counting its start-up."""
    t = pd.Timestamp("2026-11-26T12:00:00+00:00")
    return dict(host="h", pid=pid, started=(t + pd.Timedelta(seconds=start_s)).isoformat(), wall_s=wall_s,
                ended=(t + pd.Timedelta(seconds=start_s + wall_s)).isoformat() if ended else None)


def test_run_time_by_hand(tmp_path):
    """Two seeds trained together in one process [0, 100] s, a third run's process [50, 150] s and, in a later
    sitting, its resume [1000, 1040] s (stopped before writing `ended`: start + wall), one process with no heartbeat:
    busy = 150 + 40 s (the gap between sittings left out), process seconds 100 + 100 + 40, images 4 runs x 100 x 2;
    another study on the same machine at once adds its images to the machine's row but no busy second."""
    gpu, cpu = "X / GPU", "Y / no GPU"
    shared = _proc(1, 0, 100)
    _run(tmp_path, "a", "ref", 1, [shared], gpu, together=[1, 2])
    _run(tmp_path, "a", "ref", 2, [shared], gpu, together=[1, 2])
    _run(tmp_path, "a", "free", 1, [_proc(2, 50, 100), _proc(3, 1000, 40, ended=False)], gpu)
    _run(tmp_path, "a", "free", 2, [dict(host="h", pid=4, started="2026-11-26T12:00:10+00:00", ended=None)], gpu)
    _run(tmp_path, "b", "ref", 1, [_proc(5, 20, 30)], gpu)
    _run(tmp_path, "b", "ref", 2, [_proc(6, 0, 10)], cpu)
    plan = {"studies": {"a": {}, "b": {}}}
    t = V.run_time(plan, str(tmp_path)).set_index(["study", "machine"])
    a = t.loc[("a", gpu)]
    assert (a.runs, a.processes, a.unrecorded, a.together_max) == (4, 4, 1, 2)
    assert a.train_images == 800 and a.busy_wall_s == pytest.approx(190.0) and a.process_s == pytest.approx(240.0)
    assert a.img_per_s == round(800 / 190)
    g = t.loc[("all", gpu)]
    assert g.runs == 5 and g.train_images == 1000 and g.busy_wall_s == pytest.approx(190.0)  # b's [20, 50] inside
    assert t.loc[("b", cpu)].busy_wall_s == pytest.approx(10.0) and ("all", cpu) in t.index
    # the data decide: the later sitting moved next to the first, the gap closes and busy falls
    _run(tmp_path, "a", "free", 1, [_proc(2, 50, 100), _proc(3, 140, 40, ended=False)], gpu)
    assert V.run_time(plan, str(tmp_path)).set_index(["study", "machine"]).loc[("a", gpu)].busy_wall_s == pytest.approx(180.0)


def test_claims_carry_the_plans_power(tmp_path):
    """Each confirmatory row carries the power plan.power_table gives its question (at the paper's and the pilot's
    effect); an exploratory row none; more seeds in the plan, more power on the row."""
    plan = _plan()
    h = P.study_hash(plan, "confirm_3k")
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.83)
    claims = V.judge(plan, "confirm_3k", str(tmp_path))
    ex = claims.iloc[0].copy()
    ex["status"] = "exploratory"
    rows = V.with_power(pd.concat([claims, ex.to_frame().T], ignore_index=True), P.power_table(plan))
    want = P.power_table(plan).set_index(["study", "id"]).loc[("confirm_3k", claims.iloc[0].question)]
    assert list(rows.columns[rows.columns.get_loc("planned") + 1:][:2]) == ["power_paper", "power_pilot"]
    assert rows.iloc[0].power_pilot == pytest.approx(want.power_pilot) and 0 < want.power_pilot < 1
    assert math.isnan(rows.iloc[-1].power_pilot) and math.isnan(rows.iloc[-1].power_paper)
    more = copy.deepcopy(plan)
    more["studies"]["confirm_3k"]["seeds"] = list(range(100, 106))
    assert V.with_power(claims, P.power_table(more)).iloc[0].power_pilot > rows.iloc[0].power_pilot


def test_machine_shift_by_hand(tmp_path):
    """A replicate (the same study and seeds on another machine): per cell and per question the shift replicate -
    here, seed by seed. Here ref scores 85.0/85.1/85.2 and free 80.0/80.1/80.2; the replicate's ref 86.0/86.1/86.2 (+1
    each), its free the same runs bit for bit: ref mean +1, SD 0, no run identical; free 3 identical; the question
    ref - free (5 pt here, 6 there) shifts +1 at every seed. A replicate run that moves alone changes the SD and the
    interval, and a seed the replicate lacks is left out of the pairs."""
    here, there = tmp_path / "here", tmp_path / "there"
    _tree(here, "confirm_3k", ["h"] * 3, 0.85)
    _tree(there, "confirm_3k", ["h"] * 3, 0.86)
    for d, name, torch_version in ((here, "here", "2.11"), (there, "there", "2.14")):
        for m in (d / "studies" / "confirm_3k").glob("*/s*/metrics.json"):
            j = json.loads(m.read_text())
            j["provenance"] = {"machines": [name], "processes": [{"torch": torch_version}]}
            m.write_text(json.dumps(j))
    plan = _plan()
    plan["replicates"] = [{"study": "confirm_3k", "results": str(there)}]
    (q,) = plan["studies"]["confirm_3k"]["questions"]
    t = V.machine_shift(plan, str(here)).set_index("name")
    collected = {"confirm_3k": V.collect(str(here), "confirm_3k", plan["rules"]["convergence"])}
    pd.testing.assert_frame_equal(V.machine_shift(plan, "elsewhere", collected).set_index("name"), t)  # main's runs
    ref, free, diff = t.loc["ref"], t.loc["free"], t.loc[f"{q['id']} (ref − free)"]
    assert (ref.kind, ref.n, ref.seeds, ref.identical, diff.kind) == ("cell", 3, "100 101 102", 0, "question")
    assert ref.shift_mean == pytest.approx(1.0) and ref.shift_sd == pytest.approx(0.0, abs=1e-9)
    assert ref.shift_max_abs == pytest.approx(1.0) and ref.sd_here == pytest.approx(0.1)
    assert (free.identical, free.shift_mean, free.shift_sd) == (3, 0.0, 0.0)
    assert diff.shift_mean == pytest.approx(1.0) and diff.sd_here == pytest.approx(0.0, abs=1e-9)
    assert (ref.machine_here, ref.machine_replicate) == ("here (torch 2.11)", "there (torch 2.14)")
    assert (ref.source_here, ref.source_replicate) == ("unknown", "unknown")  # _tree's runs record no source
    # one replicate run moves by +2 instead of +1: shifts 2, 1, 1 -> mean 4/3, SD sqrt(1/3),
    # 95 % interval +- t(0.975, 2) sqrt(1/3) / sqrt(3) = +- 1.4342
    m = there / "studies" / "confirm_3k" / "ref" / "s100" / "metrics.json"
    j = json.loads(m.read_text())
    j["acc1"] = 0.87
    m.write_text(json.dumps(j))
    t = V.machine_shift(plan, str(here)).set_index("name")
    for r in (t.loc["ref"], t.loc[f"{q['id']} (ref − free)"]):
        assert r.shift_mean == pytest.approx(4 / 3) and r.shift_sd == pytest.approx(math.sqrt(1 / 3))
        assert r.ci_low == pytest.approx(4 / 3 - 4.302652729911275 * math.sqrt(1 / 3) / math.sqrt(3))
        # the SD's 95 % interval top: sd sqrt((n - 1) / chi2(0.025, 2)), chi2(0.025, 2) = -2 ln(0.975) = 0.0506356
        assert r.shift_sd_upper == pytest.approx(math.sqrt(1 / 3) * math.sqrt(2 / (-2 * math.log(0.975))))
    # the replicate without seed 102: two pairs
    import shutil
    shutil.rmtree(there / "studies" / "confirm_3k" / "ref" / "s102")
    t = V.machine_shift(plan, str(here)).set_index("name")
    assert (t.loc["ref"].n, t.loc["ref"].seeds, t.loc[f"{q['id']} (ref − free)"].n) == (2, "100 101", 2)
    assert t.loc["ref"].sd_here == pytest.approx(0.1)


def test_teacher_points_take_every_measured_confirmatory_teacher_row():
    """The headline figure's points: the confirmatory rows of ts_minus_free / ts_ce_minus_free with runs, each at its
    study's training images (train_limit, or the teacher's 55,000 where it is 0) and epochs; exploratory, unmeasured
    and other questions' rows are left out; the figure draws them (two schedules at 55,000 labelled)."""
    plan = {"studies": {"k1": {"budget": {"train_limit": 1000, "epochs": 150}},
                        "all20": {"budget": {"train_limit": 0, "epochs": 20}},
                        "all40": {"budget": {"train_limit": 0, "epochs": 40}}}}
    row = dict(status="confirmatory", n=5, mean=1.0, ci_low=0.5, ci_high=1.5, verdict=V.SUPPORTS)
    claims = pd.DataFrame([dict(row, study="k1", question="ts_minus_free"),
                           dict(row, study="k1", question="ts_minus_free", status="exploratory"),
                           dict(row, study="k1", question="retention"),
                           dict(row, study="all20", question="ts_ce_minus_free", verdict=V.NOT_CONVERGED),
                           dict(row, study="all40", question="ts_minus_free", mean=-2.0, verdict=V.CONTRADICTS),
                           dict(row, study="all40", question="ts_ce_minus_free", n=0, verdict=V.NOT_MEASURED)])
    p = V.teacher_points(claims, plan, 55_000)
    assert list(zip(p.study, p.question, p.images, p.epochs)) == [
        ("k1", "ts_minus_free", 1000, 150), ("all20", "ts_ce_minus_free", 55_000, 20),
        ("all40", "ts_minus_free", 55_000, 40)]
    assert list(p["mean"]) == [1.0, 1.0, -2.0]
    fig = V.teacher_figure(p)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sorted(texts) == ["20 ep.", "40 ep."]  # only where two schedules share the images


def _edit(root, study, cell, seed, **keys):
    path = root / "studies" / study / cell / f"s{seed}" / "metrics.json"
    m = json.loads(path.read_text())
    path.write_text(json.dumps({**m, **keys}))


def test_a_row_of_runs_on_two_devices_or_two_teachers_gets_no_verdict(tmp_path):
    """plan.yaml rules.machine: a study's confirmatory runs on one machine type. A row whose runs did their arithmetic
    on two devices (the GPU; the CPU model without one) says *mixed machines*, and one whose cell distilled from two
    trainings of its teacher *mixed teachers*, instead of a verdict; one device (whatever the host CPU) and one
    teacher give the verdict back."""
    assert V.devices("Intel Xeon / NVIDIA H200; AMD EPYC / NVIDIA H200") == ["NVIDIA H200"]  # the GPU, not its host
    assert V.devices("AMD EPYC / no GPU; Intel Xeon / NVIDIA H200") == ["AMD EPYC", "NVIDIA H200"]
    assert V.devices("") == [] and V.devices(float("nan")) == []  # a CSV's empty cell
    plan = _plan()
    h = P.study_hash(plan, "confirm_3k")
    _tree(tmp_path, "confirm_3k", [h] * 3, acc=0.83)
    gpu = {"machines": ["Intel Xeon / NVIDIA H200"]}
    for cell in ("ref", "free"):
        for seed in (100, 101, 102):
            _edit(tmp_path, "confirm_3k", cell, seed, provenance=gpu)
    _edit(tmp_path, "confirm_3k", "free", 101, provenance={"machines": ["AMD EPYC / NVIDIA H200"]})  # same device
    assert V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].verdict == V.SUPPORTS
    _edit(tmp_path, "confirm_3k", "free", 102, provenance={"machines": ["AMD EPYC / no GPU"]})
    row = V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0]
    assert row.verdict == f"{V.MIXED_MACHINES} (2 devices: AMD EPYC, NVIDIA H200)" and row["mean"] == pytest.approx(3.0)
    _edit(tmp_path, "confirm_3k", "free", 102, provenance=gpu)
    for seed in (100, 101, 102):
        _edit(tmp_path, "confirm_3k", "ref", seed, teacher_sha256="85a8e43b24a44dcb")
    assert V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].verdict == V.SUPPORTS  # one teacher per cell
    _edit(tmp_path, "confirm_3k", "ref", 102, teacher_sha256="37a0b25b00000000")
    assert V.judge(plan, "confirm_3k", str(tmp_path)).iloc[0].verdict == f"{V.MIXED_TEACHERS} (cell ref: 2 teachers)"
    # as runs.csv reads back (empty cells: NaN, None where collect wrote them): the two teachers of cell ref, no more
    runs = V.collect(str(tmp_path), "confirm_3k", plan["rules"]["convergence"])
    runs.to_csv(tmp_path / "runs.csv", index=False)
    back = pd.read_csv(tmp_path / "runs.csv")
    assert V.mixed_runs(back) == V.mixed_runs(runs) == f"{V.MIXED_TEACHERS} (cell ref: 2 teachers)"
    mixed = pd.concat([runs[runs.cell == "free"], back[back.cell == "free"]])  # None and NaN: one, not two
    assert mixed.teacher_sha256.isna().all() and V.mixed_runs(mixed) is None


def test_committed_claims_md_prints_claims_csv_values_as_the_readme_does():
    """results/evidence/claims.md shows claims.csv's numbers to 2 decimals, formatted as the README formats them (a
    value on a rounding edge, e.g. -0.0650, read -0.06 in claims.md and -0.07 in the README when claims.md was
    rounded from the unrounded values)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "results/evidence"
    csv = pd.read_csv(root / "claims.csv")
    lines = [ln for ln in (root / "claims.md").read_text().splitlines()[2:] if ln.strip()]
    assert len(lines) == len(csv)
    for ln, r in zip(lines, csv.itertuples()):
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert cells[:3] == [r.study, r.question, r.status]
        for got, want in zip(cells[4:7], (r.mean, r.ci_low, r.ci_high)):
            assert got == ("nan" if math.isnan(want) else f"{want:.2f}"), (r.study, r.question, got, want)


def test_plan_figure_one_scale_per_question_kind_plain_labels_and_a_side_per_row():
    """results/evidence/verdicts.png: every question of plan.yaml sits in one panel (plan1_figure.yaml) under a plain
    label (no internal id); each row says on the right the side the paper predicts for it ('< 0' for r1_minus_r4,
    whose paper predicts Small below Base; '> 0' for the other superiority rows); a row past its panel's scale gets
    an arrow; an interval wider than an Acc@1 difference can be gets † and a note with its seeds and t quantile —
    and a narrow one does not. The figure fits one screen (at most 1600 px tall at the 120 dpi it is saved with)."""
    import matplotlib
    import yaml

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = P.load("plan.yaml")
    layout = yaml.safe_load(open(V.FIGURE_LAYOUT))
    panels = [q for col in layout["columns"] for p in col for q in p["questions"]]
    asked = {q["id"] for s in plan["studies"].values() for q in s["questions"]}
    assert sorted(panels) == sorted(set(panels)) and set(panels) == asked
    assert asked <= set(layout["labels"]) and set(plan["studies"]) <= set(layout["studies"])
    claims = pd.read_csv("results/evidence/claims.csv")
    fig = V.figure(claims, plan, layout)
    assert fig.get_figheight() * 120 <= 1600
    panels_ax = [ax for sub in fig.subfigs for ax in sub.axes]  # two columns of panels
    assert len(panels_ax) == sum(len(col) for col in layout["columns"])
    left = [t.get_text() for ax in panels_ax for t in ax.get_yticklabels()]
    assert len(left) == len(claims) and not any("_" in t for t in left)
    right = [t.get_text() for ax in panels_ax for sec in ax.child_axes for t in sec.get_yticklabels()]
    assert len(right) == len(claims)
    mlp = [r for r, l in zip(right, left) if l.startswith("MLP ratio 1")]
    assert mlp and all(r.startswith("paper: < 0") for r in mlp)
    assert sum(r.startswith("paper: > 0") for r in right) == (claims.test == "superiority").sum() - len(mlp)
    assert [r for r in right if "†" in r] == [r for r in right if "-124.37" in r]  # the exploratory half_n_ref
    notes = " ".join(ax.get_xlabel() for ax in panels_ax)
    assert "t(0.995, 2) = 9.92" in notes and "n = 3 seeds" in notes
    arrows = [l for ax in panels_ax for l in ax.lines if l.get_marker() in ("<", ">")]
    assert len(arrows) == ((claims.ci_low < -40) & claims.question.isin(["half_n_ref", "half_n_free"])).sum()
    plt.close(fig)
    # flips: the same row at a physical width loses its dagger and its note
    narrow = claims.copy()
    narrow.loc[narrow.ci_low < -100, "ci_low"] = -70.0
    fig = V.figure(narrow, plan, layout)
    panels_ax = [ax for sub in fig.subfigs for ax in sub.axes]
    assert not any("†" in t.get_text() for ax in panels_ax for sec in ax.child_axes for t in sec.get_yticklabels())
    assert "t(0.995" not in " ".join(ax.get_xlabel() for ax in panels_ax)
    plt.close(fig)
    assert V.predicted_side("non_inferiority", "greater", 5.6)[:2] == ("> −5.6", -5.6)
    assert V.predicted_side("equivalence", "none", 1.0) == ("within ±1", -1.0, 1.0)
