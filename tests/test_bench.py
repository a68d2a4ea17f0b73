"""The benchmark script runs end to end on a tiny config (its numbers are measured by `python -m odevit.repro.bench`)."""
import torch

from odevit.repro import bench

SPEC = (8, 4, 1, 16, 2, 1.0, 2, 4, 4)


def test_bench_pair_and_markdown():
    rows = bench.bench_pair("tiny", SPEC, torch.device("cpu"), amps=(False, True), reps=1)
    assert [(r["model"], r["dtype"]) for r in rows] == [("ODE-ViT", "fp32"), (bench.VIT, "fp32"),
                                                        ("ODE-ViT", "bf16"), (bench.VIT, "bf16")]
    for r in rows:
        assert r["train_img_s"] > 0 and r["train_gflop_per_img"] > 0 and r["train_mem_mb"] > 0
        r["roof_ratio"] = 0.1
    # equal FLOPs by construction: same tokens, width, mlp ratio, depth = N (the ViT has biases and its norms)
    f_ode, f_vit = rows[0]["train_gflop_per_img"], rows[1]["train_gflop_per_img"]
    assert abs(f_ode - f_vit) / f_vit < 0.1
    ups = bench.speedups(SPEC, torch.device("cpu"), reps=1)
    assert [u["batch"] for u in ups] == [4, 4, 4, 2, 8] and all(u["train_img_s"] > 0 for u in ups)
    shares = bench.time_shares(SPEC, torch.device("cpu"))
    for v in shares.values():
        assert abs(v["matmul"] + v["attention"] + v["other"] - 1) < 1e-9 and v["attention"] > 0 and v["matmul_gflop_s"] > 0
    dist = bench.bench_distill(SPEC[:6] + (6,) + SPEC[7:], torch.device("cpu"), reps=1)  # N >= 6 teacher layers
    meta = {"device": "cpu", "threads": 1, "torch": torch.__version__, "date": "x", "wall_s": 1.0,
            "matmul_roof_gflop_s": {"fp32": 1.0, "bf16": 1.0}}
    md = bench.to_markdown({"meta": meta, "rows": rows, "speedups": ups, "time_shares": shares,
                            "distill": dict(dist, distill_over_scratch=1.1)})
    assert "| tiny | ODE-ViT | fp32 |" in md and "1.10 with the teacher" in md and "| + fused attention" in md
    assert [bench._rate(x) for x in (0.2374, 3.14159, 389.44, 2430.73)] == ["0.237", "3.14", "389.4", "2430.7"]


def test_bf16_rows_are_skipped_with_the_probe_as_reason(monkeypatch):
    """Where bf16 matmuls are emulated (< NATIVE_BF16 of fp32's rate), the bench says so instead of timing bf16 for
    hours; where they are native, it measures them."""
    rates = {torch.float32: 100.0, torch.bfloat16: 1.0}
    monkeypatch.setattr(bench, "matmul_roof", lambda device, dtype, n=2048, reps=10: rates[dtype])
    native, probe = bench.native_bf16(torch.device("cpu"))
    assert not native and probe == {"fp32": 100.0, "bf16": 1.0}
    text = bench.bf16_skipped(probe, native)
    assert "1.0 GFLOP/s here, 1.0% of fp32's 100" in text
    rates[torch.bfloat16] = 10.0
    assert bench.native_bf16(torch.device("cpu"))[0]


def test_compiled_table_and_its_failure_reason(monkeypatch):
    """The torch.compile comparison: ratios against each model's eager step and timm's eager step, computed from the
    rows; where inductor cannot build, the reason is recorded and printed instead of a table (not compiled here:
    that takes a minute)."""
    meta = {"device": "cpu", "threads": 1, "torch": "x", "date": "x", "wall_s": 1.0, "matmul_roof_gflop_s": {"fp32": 1.0},
            "bf16_probe_gflop_s": {"fp32": 1.0, "bf16": 0.01}, "bf16_native": False}
    rows = [{"variant": k, "train_img_s": v, "train_img_s_min": v, "train_img_s_max": v} for k, v in
            (("ODE-ViT", 400.0), ("ODE-ViT, torch.compile", 420.0), (bench.VIT, 380.0), (bench.VIT + ", torch.compile", 400.0))]
    base = {"meta": meta, "rows": [], "distill": {"distill_over_scratch": 1.0, "distill_cached_over_scratch": 1.0}}
    md = bench.to_markdown(dict(base, compiled={"batch": 128, "compile_s": {"ODE-ViT": 42.0, bench.VIT: 36.0}, "rows": rows}))
    assert "| ODE-ViT, torch.compile | 128 | 420.0 (420.0–420.0) | 1.05 | 1.11 |" in md
    assert f"| {bench.VIT}, torch.compile | 128 | 400.0 (400.0–400.0) | 1.05 | 1.05 |" in md and "ODE-ViT 42 s" in md

    def broken(*a, **k):
        raise RuntimeError("no C++ compiler\nmore")

    monkeypatch.setattr(torch, "compile", broken)
    comp = bench.compiled(SPEC, torch.device("cpu"), reps=1)
    assert comp == {"error": "RuntimeError: no C++ compiler"}
    assert "torch.compile could not run here: RuntimeError: no C++ compiler" in bench.to_markdown(dict(base, compiled=comp))


def test_jasmin_step_modes_and_table(monkeypatch):
    """`--jasmin`: the study's CE + JaSMin step eager and compiled (dynamo traced here, with the aot_eager backend:
    inductor's code generation takes a minute on 2 cores); a mode that fails (here the second) is reported with its
    reason and the modes after it are still timed, each through its own compiled function (2 first steps + 1 warm-up
    + reps calls each); the table's ratios are computed from the rows (hand-made rows, hand-computed ratios) and a |
    in an error message cannot split its table cell."""
    real = torch.compile
    calls = {}

    def traced(fn, mode=None):
        if mode is None:
            raise RuntimeError("no inductor | here\nmore")
        compiled = real(fn, backend="aot_eager")

        def counted(*a, **k):
            calls[mode] = calls.get(mode, 0) + 1
            return compiled(*a, **k)
        return counted

    monkeypatch.setattr(torch, "compile", traced)
    j = bench.jasmin_step(SPEC, torch.device("cpu"), reps=2, amp=False)
    assert [r["mode"] for r in j["rows"]] == ["eager", "max-autotune-no-cudagraphs", "reduce-overhead"]
    assert j["errors"] == {"default": "RuntimeError: no inductor | here"}
    assert calls == {"max-autotune-no-cudagraphs": 2 + 1 + 2, "reduce-overhead": 2 + 1 + 2}
    assert j["gflop_per_img"] > 0 and j["dtype"] == "fp32" and j["batch"] == SPEC[7]

    rows = [{"mode": m, "train_img_s": v, "train_img_s_min": v, "train_img_s_max": v, "achieved_gflop_s": 10 * v}
            for m, v in (("eager", 100.0), ("max-autotune-no-cudagraphs", 150.0))]
    meta = {"device": "gpu", "threads": 1, "torch": "x", "date": "x", "wall_s": 1.0, "matmul_roof_gflop_s": {"bf16": 2000.0}}
    md = bench.jasmin_markdown({"meta": meta, "config": "c", "jasmin": {
        "batch": 64, "dtype": "bf16", "gflop_per_img": 10.0,
        "first_two_steps_s": {"eager": 1.0, "max-autotune-no-cudagraphs": 30.0}, "errors": j["errors"], "rows": rows}})
    assert "| eager | 100.0 (100.0–100.0) | 1.00 | 1000 | 0.50 | 1.0 |" in md
    assert "| max-autotune-no-cudagraphs | 150.0 (150.0–150.0) | 1.50 | 1500 | 0.75 | 30.0 |" in md
    assert "| default | failed: RuntimeError: no inductor \\| here | | | | |" in md


def test_readme_bench_summary_quotes_the_measured_ratios(tmp_path):
    """The README's performance bullets are computed from bench.json: hand-made figures give hand-computed ratios."""
    import json

    from odevit.repro import results_pages

    def row(model, train, infer, mem):
        return {"config": "d", "dtype": "fp32", "model": model, "train_img_s": train, "infer_img_s": infer,
                "train_mem_mb": mem, "roof_ratio": 0.4}

    comp = {"batch": 128, "compile_s": {"ODE-ViT": 42.0, bench.VIT: 36.0},
            "rows": [{"variant": k, "train_img_s": v} for k, v in (("ODE-ViT", 400.0), ("ODE-ViT, torch.compile", 440.0),
                                                                   (bench.VIT, 320.0), (bench.VIT + ", torch.compile", 400.0))]}
    b = {"rows": [row("ODE-ViT", 390.0, 1200.0, 100.0), row(bench.VIT, 300.0, 1000.0, 150.0)],
         "meta": {"bf16_native": False, "bf16_probe_gflop_s": {"fp32": 100.0, "bf16": 1.0}, "matmul_roof_gflop_s": {"fp32": 120.0}},
         "activation_memory": [], "compiled": comp, "distill": {"distill_over_scratch": 1.3, "distill_cached_over_scratch": 1.0}}
    (tmp_path / "results/bench").mkdir(parents=True)
    (tmp_path / "results/bench/bench.json").write_text(json.dumps(b))
    text = results_pages.bench_summary(str(tmp_path))
    assert "d: **1.30×**" in text and "Training memory, timm / ODE: 1.5×" in text
    assert ("ODE-ViT compiled / eager **1.10×**, timm ViT 1.25×; compiled ODE-ViT ÷ eager timm ViT 1.38×, ÷ compiled "
            "timm ViT 1.10× (after 42 s of compilation)") in text
    b["compiled"] = {"error": "RuntimeError: no C++ compiler"}
    (tmp_path / "results/bench/bench.json").write_text(json.dumps(b))
    assert "`torch.compile` could not run on this machine: RuntimeError: no C++ compiler." in results_pages.bench_summary(str(tmp_path))
