"""odevit.repro.profile: one study step, as train.fit runs it, split into labelled phases (tiny synthetic run)."""
import json

import torch.nn.functional as F

from odevit import losses
from odevit.model import ODEViT
from odevit.repro import objectives, profile
from test_study import tiny_study


def test_profile_splits_a_study_step_into_its_phases(tmp_path, monkeypatch):
    tiny_study(tmp_path, monkeypatch, {"ref": {}, "jasmin_off": {"jasmin_weight": 0.0}, "free": {"free": True}})
    def labelled():
        return (ODEViT.forward_trajectory, objectives.jasmin, losses.jasmin, losses.trajectory_mse,
                losses.attention_l1, F.cross_entropy)

    before = labelled()
    res = profile.main(["--steps", "2", "--out", "out", "--together", "1,2"])
    assert labelled() == before  # labels removed
    cells = {c["cell"]: c for c in res["cells"]}
    assert set(cells) == {"ref", "jasmin_off", "free"}
    for c in cells.values():
        assert all(c["phases"][ph]["host_ms"] > 0 for ph in ("student trajectory", "loss terms", "backward",
                                                              "optimiser step", "data"))
        assert c["step_ms_median"] > 0 and c["img_per_s"] > 0 and c["host_syncs_per_step"] >= 3
    # the objectives log their loss terms as tensors, read once an epoch: JaSMin's term adds no host sync (it added
    # one .item() a step before)
    assert cells["ref"]["host_syncs_per_step"] == cells["jasmin_off"]["host_syncs_per_step"]
    saved = json.loads((tmp_path / "out/profile_cpu.json").read_text())
    assert saved["machine"]["cpu_model"] and saved["threads"] >= 1 and saved["date"]
    md = (tmp_path / "out/profile_cpu.md").read_text()
    assert "| student trajectory (ms) |" in md and "host syncs per step" in md
    # seeds trained together vs one at a time: K = 1 is the same step both ways (train_step of one run)
    assert [t["seeds"] for t in res["together"]] == [1, 2] and "| ref | 2 |" in md
    assert all(t["together_ms"] > 0 and t["one_at_a_time_ms"] > 0 and t["speedup"] > 0 for t in res["together"])


def test_a_phase_labelled_on_host_and_device_keeps_both_times():
    """On CUDA the profiler gives a labelled range twice under one key: the CPU range and the GPU-side annotation
    (CPU time 0). The H200 profile of 2026-11-26 read the second only, so its phases' host column said 0.0."""
    from types import SimpleNamespace as E

    host, dev = profile.phase_times([E(key="backward", cpu_time_total=900.0, device_time_total=0.0),
                                     E(key="backward", cpu_time_total=0.0, device_time_total=400.0)],
                                    "device_time_total")
    assert host["backward"] == 900.0 and dev["backward"] == 400.0
