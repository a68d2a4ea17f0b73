"""docs/evidence/recompute_v3.py: the reviewer's independent recomputation of plan v3's verdict table.

A fake repository (params.yaml copied, plan v2's teacher as selected.json, synthetic plan-v3 runs for every study, cell
and seed) is given to the package (`odevit.repro.verdicts.write_v3`, run as a subprocess) and to the recompute script,
which must agree on every row; a changed verdict / a changed run must make it fail naming the row. The script itself
must not import the package.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "docs" / "evidence" / "recompute_v3.py"
PY = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv" / "bin" / "python").exists() else sys.executable
TEACHER_ACC = 0.95
DEVICE = "CPU: synthetic test machine"

# per study: base test Acc@1 (fraction) and per-cell offsets (pt) with the SD (pt) of their per-seed noise
CELL_PT = {
    "v3_1k": {"free": (0.0, 0.35), "ref": (5.0, 0.35), "ce": (0.5, 0.35)},      # ts supports, ce contradicts
    "v3_3k": {"free": (0.0, 0.3), "ref": (1.0, 0.3), "ce": (1.0, 0.3)},         # free above the teacher: unfair
    "v3_10k": {"free": (0.0, 1.4), "ref": (2.5, 0.1), "ce": (0.0, 0.2),         # ts inconclusive; ce climbs: unsettled
               "remedy": (0.0, 0.3), "layernorm": (1.7, 0.1),                   # supports, gain below delta
               "jasmin_off": (4.5, 0.35), "ref_weak": (-0.5, 0.35)},            # contradicts; supports
}
BASE = {"v3_1k": 0.80, "v3_3k": 0.955, "v3_10k": 0.86}
# per cell: step-count offsets (pt) of N = 6 and 24 and of the worst unseen counts, with their SD
STEPS_PT = {
    "ref": {"n6": (-20.0, 5.0), "n24": (-1.5, 0.4), "n4": (-60.0, 5.0), "n5": (-40.0, 5.0), "n7": (-3.0, 0.5),
            "n9": (-0.8, 0.2), "n10": (-0.5, 0.2)},
    "free": {"n6": (0.0, 0.08), "n24": (-0.2, 0.1), "n4": (-5.0, 1.0), "n5": (-2.0, 0.5), "n7": (-0.3, 0.1),
             "n9": (-0.1, 0.05), "n10": (-0.05, 0.05)},
    "remedy": {"n6": (0.0, 0.1), "n24": (-0.1, 0.1), "n4": (-40.0, 8.0), "n5": (-15.0, 4.0), "n7": (-0.1, 0.08),
               "n9": (-0.05, 0.05), "n10": (0.0, 0.05)},
}
# runs still climbing at the end of the floor window: (study, cell) -> slope in pt per epoch over the window
CLIMB = {("v3_10k", "ce"): 0.35, ("v3_10k", "remedy"): 0.08}


def _history(rng, epochs, window, plateau_pt, climb):
    e = np.arange(1, epochs + 1, dtype=float)
    v = plateau_pt - 40.0 * np.exp(-e / (epochs / 10.0))
    if climb:
        k = np.arange(epochs) - (epochs - window)
        v = v - climb * window + climb * np.clip(k, 0, None)
        v = v + 0.05 * rng.standard_normal(epochs)
    else:
        v = v + 0.15 * rng.standard_normal(epochs)
    val = np.round(np.clip(v, 0, 100) / 100 * 5000) / 5000  # counts / 5,000 validation images
    return pd.DataFrame({"epoch": e.astype(int), "train_loss": 1.0 / e, "val_acc1": val,
                         "lr": np.full(epochs, 1e-4)})


def make_fake_repo(root, seed=7):
    root = Path(root)
    shutil.copy(REPO / "params.yaml", root / "params.yaml")
    (root / "results" / "v2" / "teacher").mkdir(parents=True)
    (root / "results" / "v2" / "teacher" / "selected.json").write_text(json.dumps(  # selected.json's keys
        {"acc1": TEACHER_ACC, "converged": [True, True, True], "seed": 2900, "seed_acc1_pts": [95.0, 94.7, 94.5],
         "seed_sd_pts": 0.25166, "sha256": "0" * 64, "tau": 16.0, "val_acc1": 0.951}, indent=1))
    plan = yaml.safe_load((REPO / "params.yaml").read_text())["plan_v3"]
    rng = np.random.default_rng(seed)
    frac = plan["rules"]["schedule"]["floor_frac"]
    for sname, st in plan["studies"].items():
        epochs = st["budget"]["epochs"]
        window = int(np.floor(frac * epochs + 1e-9))
        seed_eff = {s: 0.6 * rng.standard_normal() for s in st["seeds"]}  # shared by the cells: the pairing
        for cell in st["cells"]:
            off, sd = CELL_PT[sname][cell]
            for s in st["seeds"]:
                acc_pt = 100 * BASE[sname] + off + seed_eff[s] + sd * rng.standard_normal()
                counts = {"n12": acc_pt}
                for k, (o, ksd) in STEPS_PT.get(cell, STEPS_PT["free"]).items():
                    counts[k] = acc_pt + o + ksd * rng.standard_normal()
                fr = {k: float(np.round(np.clip(v, 0, 100) / 100 * 10000) / 10000) for k, v in counts.items()}
                m = {"acc1": fr["n12"], "seed": s, "study": sname, "cell": cell, "plan_hash": "synthetic0000",
                     "provenance": {"device": DEVICE}, "test_images": 10000, "epochs": epochs,
                     "robustness": fr}
                for k, v in fr.items():
                    m[f"acc1_{k}"] = v
                m["acc1_min_unseen"] = min(fr[f"n{k}"] for k in (4, 5, 7, 9, 10))
                m["acc1_min_inside"] = min(fr[f"n{k}"] for k in (7, 9, 10))
                m["acc1_min_below"] = min(fr[f"n{k}"] for k in (4, 5))
                h = _history(rng, epochs, window, 100 * BASE[sname] + off + 1.0, CLIMB.get((sname, cell)))
                m["val_acc1"] = float(h["val_acc1"].max())
                d = root / "results" / "v3" / sname / cell / f"s{s}"
                d.mkdir(parents=True)
                (d / "metrics.json").write_text(json.dumps(m, indent=1))
                h.to_csv(d / "history.csv", index=False)
    return root


def run_package(root):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    code = ("from odevit.repro import verdicts, plan; "
            "verdicts.write_v3(plan.load('params.yaml', 3), 'results/v3', 'results/v3')")
    p = subprocess.run([PY, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (Path(root) / "results" / "v3" / "claims.csv").is_file()


def run_script(repo):
    p = subprocess.run([PY, str(SCRIPT), str(repo)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    root = make_fake_repo(tmp_path_factory.mktemp("fake_v3"))
    run_package(root)
    return root


@pytest.fixture
def fake_copy(fake, tmp_path):
    dst = tmp_path / "repo"
    shutil.copytree(fake, dst)
    return dst


def test_script_does_not_use_the_package():
    src = SCRIPT.read_text()
    assert "import odevit" not in src and "from odevit" not in src


def test_recompute_matches_the_package_on_synthetic_runs(fake):
    rc, out, err = run_script(fake)
    lines = out.strip().splitlines()
    n = len(pd.read_csv(fake / "results" / "v3" / "claims.csv"))
    assert lines[-1] == f"rows: {n}; matched {n}; mismatched 0", out + err
    assert rc == 0, out + err
    assert not any(line.rstrip().endswith("MISMATCH") for line in lines)
    # the synthetic runs exercise every kind of verdict
    verdicts = pd.read_csv(fake / "results" / "v3" / "claims.csv", keep_default_na=False)["verdict"].tolist()
    for v in ("supports", "contradicts", "inconclusive"):
        assert v in verdicts, verdicts
    assert any(v.startswith("unsettled: the learning left could make it") for v in verdicts), verdicts
    assert any(v.startswith("unfair") for v in verdicts), verdicts


def test_a_changed_verdict_is_a_mismatch_naming_its_row(fake_copy):
    p = fake_copy / "results" / "v3" / "claims.csv"
    df = pd.read_csv(p, dtype=str, keep_default_na=False)
    i = df.index[df["verdict"] == "supports"][0]
    qid = df.loc[i, "question"]
    df.loc[i, "verdict"] = "contradicts"
    df.to_csv(p, index=False)
    rc, out, _ = run_script(fake_copy)
    assert rc == 1
    row = [line for line in out.splitlines() if line.startswith(qid + " ")]
    assert row and row[0].rstrip().endswith("MISMATCH"), out
    assert out.strip().splitlines()[-1].endswith("mismatched 1")


def test_a_changed_run_is_a_mismatch_naming_its_rows(fake_copy):
    plan = yaml.safe_load((fake_copy / "params.yaml").read_text())["plan_v3"]
    seed = plan["studies"]["v3_1k"]["seeds"][0]
    mp = fake_copy / "results" / "v3" / "v3_1k" / "ref" / f"s{seed}" / "metrics.json"
    m = json.loads(mp.read_text())
    m["acc1"] -= 0.02  # 2 pt off one run: ts_minus_free_1k's mean moves by 0.4 pt
    mp.write_text(json.dumps(m))
    rc, out, _ = run_script(fake_copy)
    assert rc == 1
    row = [line for line in out.splitlines() if line.startswith("ts_minus_free_1k ")]
    assert row and row[0].rstrip().endswith("MISMATCH"), out
    others = [line for line in out.splitlines() if line.startswith("ce_minus_free_1k ")]
    assert others and others[0].rstrip().endswith("match") and not others[0].rstrip().endswith("MISMATCH")


def test_a_row_with_a_missing_run_and_a_row_on_two_machines(fake_copy):
    """One run not made (jasmin_off, one seed) and one run made on another machine type (ref_weak): both rows get the
    verdict the plan's rules give them, and every row matches: a row not measured yet shows the numbers of the seeds
    made so far (in both)."""
    plan = yaml.safe_load((fake_copy / "params.yaml").read_text())["plan_v3"]
    seeds = plan["studies"]["v3_10k"]["seeds"]
    res = fake_copy / "results" / "v3" / "v3_10k"
    shutil.rmtree(res / "jasmin_off" / f"s{seeds[2]}")
    mp = res / "ref_weak" / f"s{seeds[1]}" / "metrics.json"
    m = json.loads(mp.read_text())
    m["provenance"]["device"] = "NVIDIA H200"
    mp.write_text(json.dumps(m))
    run_package(fake_copy)
    rc, out, _ = run_script(fake_copy)
    lines = {line.split()[0]: line for line in out.splitlines() if line and not line.startswith(" ")}
    th = pd.read_csv(fake_copy / "results" / "v3" / "claims.csv", keep_default_na=False).set_index("question")
    want = f"not measured yet ({len(seeds) - 1} of {len(seeds)} seeds)"
    assert th.loc["jasmin_on_minus_off", "verdict"] == want
    assert f"verdict={want}  ||" in lines["jasmin_on_minus_off"]
    assert th.loc["strong_minus_weak_teacher", "verdict"].startswith("mixed machines")
    assert th.loc["jasmin_on_minus_off", "n"] == len(seeds) - 1  # the numbers of the seeds made so far
    assert lines["strong_minus_weak_teacher"].rstrip().endswith("-> match")
    for q in th.index:
        assert lines[q].rstrip().endswith("-> match"), lines[q]
    assert rc == 0


def test_a_missing_claims_table_fails(fake_copy):
    (fake_copy / "results" / "v3" / "claims.csv").unlink()
    rc, out, _ = run_script(fake_copy)
    assert rc == 1 and "does not exist" in out


def test_the_real_repository():
    if not (REPO / "results" / "v3" / "claims.csv").is_file():
        pytest.skip("results/v3/claims.csv does not exist yet: plan v3's runs are only partly made and its verdict "
                    "table is not written (dvc repro's 07_verdicts writes it)")
    rc, out, err = run_script(REPO)
    assert rc == 0, out + err
    assert out.strip().splitlines()[-1].endswith("mismatched 0"), out
