"""python -m odevit.repro.compare on two fabricated results trees with hand-computed differences."""
import json
import subprocess

import pandas as pd
import pytest

from odevit.repro import compare

MACHINE = {"cpu_model": "AMD EPYC", "cpu_capability": "AVX2", "threads": 2, "lock_sha256": "ab"}


def _tree(root, ref, free, teacher, verdict, mean, machine=None):
    for cell, accs in (("ref", ref), ("free", free)):
        for seed, a in enumerate(accs):
            d = root / "results" / "cells" / cell / f"s{seed}"
            d.mkdir(parents=True)
            (d / "metrics.json").write_text(json.dumps({"cell": cell, "seed": seed, "acc1": a, "acc5": 0.99}))
    (root / "results/02_teacher").mkdir(parents=True)
    (root / "results/02_teacher/metrics.json").write_text(json.dumps({"acc1": teacher}))
    (root / "results/07_report").mkdir(parents=True)
    pd.DataFrame({"claim": ["ts_minus_free", "retention"], "ours_mean": [mean, 0.75], "ours_std": [0.5, 0.01],
                  "verdict": [verdict, "holds"], "resolved": [True, True]}).to_csv(
        root / "results/07_report/claims.csv", index=False)
    if machine:
        (root / "results/run.json").write_text(json.dumps({"wall_s": 1, "machine_info": machine}))
    return root


def test_differences_in_seed_std_and_changed_verdicts(tmp_path):
    a = _tree(tmp_path / "a", [0.60, 0.62, 0.64], [0.50, 0.50], 0.87, "holds", 1.0, MACHINE)
    b = _tree(tmp_path / "b", [0.62, 0.64, 0.66], [0.50, 0.50], 0.86, "does not hold", 2.0,
              {**MACHINE, "cpu_capability": "AVX512"})
    this, other = compare.load(str(a)), compare.load(str(b / "results"))  # a checkout, or its results/
    m = compare.metrics(this, other).set_index("metric")
    ref = m.loc["cell ref Acc@1 (mean of 3 | 3 seeds)"]
    # means 0.62 vs 0.64; each run's seed std 0.02, pooled 0.02 -> -0.02 / 0.02 = -1 seed std
    assert ref["diff"] == pytest.approx(-0.02) and ref.seed_std == pytest.approx(0.02)
    assert ref.diff_in_std == pytest.approx(-1.0)
    free = m.loc["cell free Acc@1 (mean of 2 | 2 seeds)"]
    assert free["diff"] == 0 and free.diff_in_std == 0  # no spread, no difference: 0, not 0/0
    assert m.loc["teacher Acc@1 (one run)", "diff"] == pytest.approx(0.01)
    claim = m.loc["claim ts_minus_free ours_mean"]
    assert claim["diff"] == pytest.approx(-1.0) and claim.diff_in_std == pytest.approx(-2.0)  # std 0.5 in both
    v = compare.verdicts(this, other)
    assert v.to_dict("records") == [{"claim": "ts_minus_free", "column": "verdict", "other": "does not hold",
                                     "this": "holds"}]
    text = compare.report(this, other)
    assert "machines differ in cpu_capability" in text and "3 of 5 metrics differ" in text
    assert "largest |diff| in seed std: 2.00" in text


def test_same_tree_is_bit_identical_and_a_git_revision_reads_committed_results(tmp_path, capsys):
    repo = _tree(tmp_path / "repo", [0.60, 0.62], [0.5, 0.52], 0.87, "holds", 1.0, MACHINE)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "results"], check=True)
    subprocess.run(git + ["commit", "-qm", "results"], check=True)
    # the working tree then changes: a rerun with another teacher
    (repo / "results/02_teacher/metrics.json").write_text(json.dumps({"acc1": 0.5}))
    committed = compare.load("HEAD", repo=str(repo))
    assert committed.teacher_acc1 == 0.87 and len(committed.cells) == 4 and committed.run["machine_info"] == MACHINE
    same = compare.report(committed, committed)
    assert "0 of 5 metrics differ (all bit-identical)" in same and "verdicts changed: none" in same
    assert "expect bit-identical numbers" in same
    assert compare.metrics(compare.load(str(repo)), committed).set_index("metric").loc[
        "teacher Acc@1 (one run)", "diff"] == pytest.approx(-0.37)


def test_cli_exit_codes(tmp_path, capsys, monkeypatch):
    a = _tree(tmp_path / "a", [0.6, 0.7], [0.5, 0.5], 0.8, "holds", 1.0)
    assert compare.main([str(a), "--this", str(a)]) == 0
    out = capsys.readouterr().out
    assert "cannot tell whether to expect bit-identical" in out and "cell ref" in out
    monkeypatch.chdir(tmp_path)
    assert compare.main(["no-such-rev", "--this", str(a)]) == 2
    assert "neither a directory nor a git revision" in capsys.readouterr().err
