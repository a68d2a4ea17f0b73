"""Training loop pieces: LR schedule, determinism of a tiny run, atomic checkpoints, config and preset validation."""
import json

import pytest
import torch

from odevit.repro import config, pipeline, train

CE_JASMIN = config.Scratch(label_smoothing=0.1, jasmin_weight=1.0, jasmin_k=2)  # stage 03's default loss
CE = config.Scratch(label_smoothing=0.0, jasmin_weight=0.0)  # plain CE


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
    b = config.parse("base", dict(dataset="synthetic", synthetic_size=64, val_size=16, batch_size=16, device="cpu"))
    s = config.parse("scratch", dict(embed_dim=16, num_heads=2, num_steps=3, epochs=2))
    train.seed_everything(0)
    tr, te = pipeline.loaders(b)
    model = pipeline.build_scratch(b, s)
    obj = pipeline.ode_scratch(CE_JASMIN)
    hist = train.fit(model, tr, te, obj, train.TrainConfig(epochs=2, device="cpu"), str(tmp_path / name))
    return hist, model


def test_tiny_training_is_deterministic_and_checkpoints(tmp_path):
    h1, m1 = _tiny_run(tmp_path, "a")
    h2, _ = _tiny_run(tmp_path, "b")
    timed = ("epoch_time_s", "eval_time_s", "img_per_s")
    strip = lambda h: [{k: v for k, v in r.items() if k not in timed} for r in h]  # noqa
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


def test_saved_bytes_of_a_known_graph():
    """linear saves its input (the weight is a parameter: left out), ReLU its output: 4 bytes x (B*10 + B*20)."""
    from odevit.repro.runtime import saved_bytes

    lin = torch.nn.Linear(10, 20)
    x = torch.randn(7, 10)
    assert saved_bytes(lambda: torch.relu(lin(x)), lin) == 4 * (7 * 10 + 7 * 20)


def test_training_that_cannot_fit_stops_with_its_estimate(tmp_path, monkeypatch):
    """Before the first step: a run whose measured activations exceed the free memory stops with the estimate
    (MemoryEstimateError), writes no checkpoint, and leaves the RNG as it found it."""
    from odevit.repro.runtime import MemoryEstimateError

    b = config.parse("base", dict(dataset="synthetic", synthetic_size=64, val_size=16, batch_size=16, device="cpu"))
    s = config.parse("scratch", dict(embed_dim=16, num_heads=2, num_steps=3, epochs=1))
    tr, te = pipeline.loaders(b)
    model = pipeline.build_scratch(b, s)
    obj = pipeline.ode_scratch(CE_JASMIN)
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


def test_epochs_without_gain_known_answers():
    accs = [0.50, 0.60, 0.601, 0.6015]  # gains: +10 pt, then +0.1 and +0.15 pt over the best (0.60)
    assert train.epochs_without_gain(accs, 0.2) == 2
    assert train.epochs_without_gain(accs, 0.1) == 1  # 0.601 is a 0.1-pt gain; 0.6015 only +0.05 over it
    assert train.epochs_without_gain([0.5, 0.502], 0.2) == 0  # exactly 0.2 pt counts, despite floating point


def _scripted(monkeypatch, curves):
    """train.evaluate returning the next value of curves[split name] (the loader's `name` attribute) per call."""
    calls = {k: 0 for k in curves}

    def fake(model, loader, device, num_steps=None, ks=(1, 3, 5), per_sample=False):
        name = loader.name
        v = curves[name][calls[name]]
        calls[name] += 1
        return {f"acc{k}": v for k in ks}

    monkeypatch.setattr(train, "evaluate", fake)
    return calls


def _tiny_fit(tmp_path, evals, **cfg):
    b = config.parse("base", dict(dataset="synthetic", synthetic_size=64, val_size=16, batch_size=16, device="cpu"))
    s = config.parse("scratch", dict(embed_dim=16, num_heads=2, num_steps=2, epochs=1))
    train.seed_everything(0)
    tr, va, te = pipeline.data_loaders(b)
    va.name, te.name = "val", "test"
    loaders = {k: {"val": va, "test": te}[k] for k in evals}
    model = pipeline.build_scratch(b, s)
    out = str(tmp_path)
    hist = train.fit(model, tr, loaders, pipeline.ode_scratch(CE), train.TrainConfig(device="cpu", **cfg), out)
    return hist, torch.load(tmp_path / "best.pt", weights_only=True)["epoch"]


def test_early_stop_epoch(tmp_path, monkeypatch):
    calls = _scripted(monkeypatch, {"val": [0.5, 0.6, 0.601, 0.6015, 0.9, 0.9]})
    hist, best = _tiny_fit(tmp_path, ["val"], epochs=6, patience=2, min_delta_pts=0.2)
    assert len(hist) == 4 and calls["val"] == 4  # epochs 3 and 4 gained < 0.2 pt: stop before epoch 5
    assert best == 4  # best.pt follows the best value (0.6015), gain threshold or not; patience counts gains >= 0.2
    assert [h["val_acc1"] for h in hist] == [0.5, 0.6, 0.601, 0.6015]


def test_select_on_test_reproduces_test_selection(tmp_path, monkeypatch):
    curves = {"val": [0.5, 0.7, 0.6], "test": [0.6, 0.5, 0.8]}
    _scripted(monkeypatch, curves)
    hist, best = _tiny_fit(tmp_path / "val", ["val"], epochs=3)
    assert best == 2 and "test_acc1" not in hist[0]  # validation selection; the test set is not scored per epoch
    calls = _scripted(monkeypatch, curves)
    hist, best = _tiny_fit(tmp_path / "test", ["val", "test"], epochs=3, select_on="test")
    assert best == 3 and calls == {"val": 3, "test": 3}  # the authors' switch: best epoch by test Acc@1


def test_val_size_zero_requires_test_selection():
    with pytest.raises(config.ConfigError, match=r"base.val_size = 0 leaves no validation split: set "
                                                 r"base.select_on: test"):
        config.parse("base", dict(val_size=0))
    assert config.parse("base", dict(val_size=0, select_on="test")).select_on == "test"
    with pytest.raises(config.ConfigError, match=r"teacher.patience = -1 must be >= 0"):
        config.parse("teacher", dict(patience=-1))
