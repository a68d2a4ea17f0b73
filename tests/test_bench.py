"""The benchmark script runs end to end on a tiny config (its numbers are measured by `python -m odevit.bench`)."""
import torch

from odevit import bench


def test_bench_pair_and_markdown(monkeypatch):
    spec = (8, 4, 1, 16, 2, 1.0, 2, 4, 4)
    rows = bench.bench_pair("tiny", spec, torch.device("cpu"), amp=False, reps=1)
    assert {r["model"] for r in rows} == {"ODE-ViT", "timm ViT (depth = N)"}
    for r in rows:
        assert r["train_img_s"] > 0 and r["train_gflop_per_img"] > 0 and r["train_mem_mb"] > 0
    # equal FLOPs by construction: same tokens, width, mlp ratio, depth = N (the ViT has biases and its norms)
    f_ode, f_vit = (r["train_gflop_per_img"] for r in rows)
    assert abs(f_ode - f_vit) / f_vit < 0.1
    meta = {"device": "cpu", "threads": 1, "torch": torch.__version__, "date": "x",
            "matmul_roof_gflop_s": {"fp32": 1.0, "bf16": 1.0}}
    for r in rows:
        r["roof_ratio"] = 0.1
    md = bench.to_markdown(meta, rows, {"distill_over_scratch": 1.1})
    assert "| tiny | ODE-ViT | fp32 |" in md and "1.10" in md
