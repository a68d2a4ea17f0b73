"""odevit.repro.profile: one study step, as train.fit runs it, split into labelled phases (tiny synthetic run)."""
import json
from pathlib import Path

import pandas as pd
import yaml

from odevit.model import ODEViT
from odevit.repro import config, objectives, pipeline, profile, train

ROOT = Path(__file__).resolve().parents[1]


def test_profile_splits_a_study_step_into_its_phases(tmp_path, monkeypatch):
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["base"].update(dataset="synthetic", synthetic_size=96, val_size=16, batch_size=16, eval_batch_size=8, device="cpu")
    p["teacher"].update(name=None, patch_size=7, embed_dim=16, depth=2, num_heads=2, mlp_ratio=2.0)
    p["distill"].update(num_steps=4, epochs=2)
    p["study"].update(train_limit=32, cells={"ref": {}, "jasmin_off": {"jasmin_weight": 0.0}, "free": {"free": True}})
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(p))
    monkeypatch.chdir(tmp_path)
    cfg = config.check_stage("cell")
    train.save_atomic({"model": pipeline.build_teacher(cfg["base"], cfg["teacher"]).state_dict()},
                      "checkpoints/02_teacher/best.pt")
    pipeline.write_csv(pd.DataFrame({"layer": [1, 2], "distance": [1.0, 2.0]}), "results/02_teacher/distances.csv")
    before = (ODEViT.forward_trajectory, objectives.jasmin, objectives.trajectory_mse)
    res = profile.main(["--steps", "2", "--out", "out"])
    assert (ODEViT.forward_trajectory, objectives.jasmin, objectives.trajectory_mse) == before  # labels removed
    cells = {c["cell"]: c for c in res["cells"]}
    assert set(cells) == {"ref", "jasmin_off", "free"}
    for c in cells.values():
        assert all(c["phases"][ph]["host_ms"] > 0 for ph in ("student trajectory", "loss terms", "backward",
                                                              "optimiser step", "data"))
        assert c["step_ms_median"] > 0 and c["img_per_s"] > 0 and c["host_syncs_per_step"] >= 3
    # ref: .item() of mse and jasmin, loss.item() and the isfinite checks; jasmin_off: one .item() fewer
    assert cells["ref"]["host_syncs_per_step"] == cells["jasmin_off"]["host_syncs_per_step"] + 1
    saved = json.loads((tmp_path / "out/profile_cpu.json").read_text())
    assert saved["machine"]["cpu_model"] and saved["threads"] >= 1 and saved["date"]
    md = (tmp_path / "out/profile_cpu.md").read_text()
    assert "| student trajectory (ms) |" in md and "host syncs per step" in md
