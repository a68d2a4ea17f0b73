"""Training loop pieces: LR schedule, determinism of a tiny run, atomic checkpoints, config and preset validation."""
import json

import pytest
import torch

from odevit import config, objectives, pipeline, train
from odevit.preset import flags


def test_lr_schedule_warmup_cosine_restarts():
    assert train.lr_factor(0, 100, 10) == 0.0
    assert train.lr_factor(5, 100, 10) == pytest.approx(0.5)
    assert train.lr_factor(10, 100, 10) == pytest.approx(1.0)
    assert train.lr_factor(55, 100, 10) == pytest.approx(0.5)
    assert train.lr_factor(100, 100, 10) == 0.0
    # 3 hard restarts: back to 1 at the start of each cycle
    assert train.lr_factor(40, 100, 10, cycles=3) == pytest.approx(1.0)
    assert train.lr_factor(25, 100, 10, cycles=3) == pytest.approx(0.5)


def _tiny_run(tmp_path, name):
    b = config.parse("base", dict(dataset="synthetic", synthetic_size=64, batch_size=16, device="cpu"))
    s = config.parse("scratch", dict(embed_dim=16, num_heads=2, num_steps=3, epochs=2))
    train.seed_everything(0)
    tr, te = pipeline.loaders(b)
    model = pipeline.build_scratch(b, s)
    obj = objectives.ode_scratch(0.1, 1.0, 2)
    hist = train.fit(model, tr, te, obj, train.TrainConfig(epochs=2, device="cpu"), str(tmp_path / name))
    return hist, model


def test_tiny_training_is_deterministic_and_checkpoints(tmp_path):
    h1, m1 = _tiny_run(tmp_path, "a")
    h2, _ = _tiny_run(tmp_path, "b")
    strip = lambda h: [{k: v for k, v in r.items() if k not in ("epoch_time_s", "img_per_s")} for r in h]  # noqa
    assert json.dumps(strip(h1)) == json.dumps(strip(h2))
    assert (tmp_path / "a" / "best.pt").is_file() and (tmp_path / "a" / "last.pt").is_file()
    assert not list(tmp_path.glob("a/*.tmp"))
    ckpt = torch.load(tmp_path / "a" / "last.pt", weights_only=True)
    assert ckpt["epoch"] == 2
    train.load_weights(m1, str(tmp_path / "a" / "best.pt"))


def test_precision_policy_sets_autocast():
    a, cpu = torch.randn(4, 4), torch.device("cpu")
    try:
        for name, dtype in (("auto", torch.float32), ("fp32", torch.float32), ("bf16", torch.bfloat16)):
            train.set_precision(name)
            with train.autocast(cpu):
                assert (a @ a).dtype == dtype, name  # auto: fp32 on CPU (bf16 on CUDA)
        with pytest.raises(ValueError, match="precision: 'fp16' is not one of"):
            train.set_precision("fp16")
    finally:
        train.set_precision("auto")


def test_config_errors_name_key_value_and_allowed():
    with pytest.raises(config.ConfigError, match=r"distill.solvr is not a known key \(allowed: .*solver"):
        config.parse("distill", {"solvr": "rk4"})
    with pytest.raises(config.ConfigError, match=r"distill.solver = 'euler' is not one of"):
        config.parse("distill", {"solver": "euler"})
    with pytest.raises(config.ConfigError, match=r"distill.num_steps = 0 must be > 0"):
        config.parse("distill", {"num_steps": 0})
    with pytest.raises(config.ConfigError, match=r"scratch.num_heads = 3 must divide embed_dim 128"):
        config.parse("scratch", {"num_heads": 3})
    with pytest.raises(config.ConfigError, match=r"teacher.epochs = 'three': expected int"):
        config.parse("teacher", {"epochs": "three"})
    assert config.parse("teacher", {"lr": "1e-3"}).lr == 1e-3  # YAML 1.1 reads 1e-3 as a string


def test_presets_validate_and_quote_safely(tmp_path):
    import glob
    for p in glob.glob("presets/*.yaml"):
        fl = flags(p)
        assert fl and all(" " not in f for f in fl), p
    bad = tmp_path / "bad.yaml"
    bad.write_text("distill: {solver: euler}\n")
    with pytest.raises(config.ConfigError, match="distill.solver = 'euler'"):
        flags(str(bad))


def test_saved_bytes_of_a_known_graph():
    """linear saves its input (the weight is a parameter: left out), ReLU its output: 4 bytes x (B*10 + B*20)."""
    from odevit.memory import saved_bytes

    lin = torch.nn.Linear(10, 20)
    x = torch.randn(7, 10)
    assert saved_bytes(lambda: torch.relu(lin(x)), lin) == 4 * (7 * 10 + 7 * 20)


def test_training_that_cannot_fit_stops_with_its_estimate(tmp_path, monkeypatch):
    """Before the first step: a run whose measured activations exceed the free memory stops with the estimate
    (MemoryEstimateError), writes no checkpoint, and leaves the RNG as it found it."""
    from odevit.memory import MemoryEstimateError

    b = config.parse("base", dict(dataset="synthetic", synthetic_size=64, batch_size=16, device="cpu"))
    s = config.parse("scratch", dict(embed_dim=16, num_heads=2, num_steps=3, epochs=1))
    tr, te = pipeline.loaders(b)
    model = pipeline.build_scratch(b, s)
    obj = objectives.ode_scratch(0.1, 1.0, 2)
    monkeypatch.setenv("ODEVIT_MEMORY_LIMIT", "100000")  # 100 kB
    with pytest.raises(MemoryEstimateError, match=r"training needs about .* GiB on cpu .* MiB of activations per "
                                                  r"sample x batch 16 .* lower base.batch_size"):
        train.fit(model, tr, te, obj, train.TrainConfig(epochs=1, device="cpu"), str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
    torch.manual_seed(5)
    a = torch.rand(3)
    torch.manual_seed(5)
    monkeypatch.delenv("ODEVIT_MEMORY_LIMIT")
    need = train.probe_memory(model, tr, obj, torch.device("cpu"))
    assert torch.equal(torch.rand(3), a) and need > 0
