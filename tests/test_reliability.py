"""Faults made cheap and clear: bad params, interrupted runs, corrupt or unsafe checkpoints, divergence, bad data."""
import contextlib
import copy
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import yaml

from odevit.repro import config, data, pipeline, train

ROOT = Path(__file__).resolve().parents[1]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
PLAIN_CE = config.Scratch(label_smoothing=0.0, jasmin_weight=0.0)  # CE alone

BAD = [  # (stage, block, key, value, expected message fragment)
    ("02_teacher", "teacher", "depht", 6, "teacher.depht is not a known key"),
    ("02_teacher", "teacher", "epochs", "three", "teacher.epochs = 'three': expected int"),
    ("02_teacher", "teacher", "num_heads", 5, "teacher.num_heads = 5 must divide embed_dim 128"),
    ("02_teacher", "teacher", "weights_file", "/nonexistent/dino.pth", "teacher.weights_file = '/nonexistent/dino.pth' does not exist"),
    ("02_teacher", "teacher", "lr", -1.0, "teacher.lr = -1.0 must be > 0"),
    ("01_data", "base", "dataset", "mnist", "base.dataset = 'mnist' is not one of"),
    ("01_data", "base", "device", "tpu", "base.device = 'tpu' is not one of"),
    ("02_teacher", "base", "precision", "fp16", "base.precision = 'fp16' is not one of ['auto', 'fp32', 'bf16']"),
    ("01_data", "base", "channels", 2, "base.channels = 2 for 1-channel fashion_mnist"),
    ("02_teacher", "base", "image_size", 4, "base.image_size = 4 is smaller than teacher.patch_size 7"),
    ("cell", "distill", "num_steps", 0, "distill.num_steps = 0 must be > 0"),
    ("cell", "distill", "solver", "euler", "distill.solver = 'euler' is not one of"),
    ("cell", "distill", "norm", "batchnorm", "distill.norm = 'batchnorm' is not one of"),
    ("cell", "distill", "mlp_ratio", 0, "distill.mlp_ratio = 0.0 must be > 0"),
    ("cell", "distill", "spectral_init_qkv", "yes", "distill.spectral_init_qkv = 'yes': expected bool"),
    ("01_data", "distill", "tau", 0, "distill.tau = 0.0 must be > 0"),  # the first stage checks every block
    ("cell", "distill", "tau", 0, "distill.tau = 0.0 must be > 0"),
    ("cell", "distill", "num_steps", 4, "distill.num_steps = 4 is fewer than the 6 teacher checkpoints"),
    ("cell", "distill", "freeze", ["blocks"], "distill.freeze = ['blocks'] not in"),
    ("cell", "distill", "distance_tokens", "patches", "distill.distance_tokens = 'patches' is not one of"),
    # a plan cell (an ablation is one edit of a study's cells): checked by the first stage, before any training
    ("01_data", "cells", "x", {"solver": "euler"}, "(in studies.v2_10k.cells.x)"),
    ("01_data", "cells", "x", {"free": "yes"}, "studies.v2_10k.cells.x.free = 'yes'"),
    ("01_data", "cells", "p", {"preset": "nope.yaml"}, "preset file 'nope.yaml' does not exist"),
    ("01_data", "cells", "s", {"num_steps": 4}, "studies.v2_10k.cells.s.num_steps = 4 is fewer than the 6 teacher"),
    ("01_data", "seeds", None, [2300, 2300], "studies.v2_10k.seeds: 2300 is not a fresh integer seed"),
]


def _params_with(tmp_path, block, key, value):
    """params.yaml with one value changed: a knob (block.key), or in the plan's study v2_10k its cell `key`
    (block "cells") or its seeds (block "seeds")."""
    p = copy.deepcopy(PARAMS)
    if block == "cells":
        p["studies"]["v2_10k"]["cells"][key] = value
    elif block == "seeds":
        p["studies"]["v2_10k"]["seeds"] = value
    else:
        p[block][key] = value
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(p))
    return str(path)


@pytest.mark.parametrize("stage,block,key,value,msg", BAD, ids=[f"{b[1]}.{b[2]}" for b in BAD])
def test_bad_params_one_clear_line(tmp_path, stage, block, key, value, msg):
    path = _params_with(tmp_path, block, key, value)
    with pytest.raises(config.ConfigError) as e:
        config.check_stage(stage, path)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_bad_params_cli_stops_in_seconds_with_one_line(tmp_path):
    path = _params_with(tmp_path, "distill", "solver", "euler")
    os.replace(path, tmp_path / "params.yaml")
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "odevit.repro.config", "cell"], cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 2 and time.time() - t0 < 30
    assert r.stderr.strip().count("\n") == 0 and "distill.solver = 'euler' is not one of" in r.stderr
    assert not list(tmp_path.glob("results*")) and not list(tmp_path.glob("checkpoints*"))


def test_default_params_are_valid():
    for stage in config.STAGE_BLOCKS:
        config.check_stage(stage, str(ROOT / "params.yaml"))


def test_stage_blocks_agree_with_dvc_yaml():
    """config.STAGE_BLOCKS is checked against dvc.yaml, not typed twice and left to drift: a dvc.yaml stage with an
    entry there checks exactly the knob blocks its `params` list names (01_data, the first stage, every knob block; the
    notebooks that read the plan are checked as 01_data is, and the plan with them, before their kernel starts), and the entry that is no dvc.yaml stage
    is the trainer's (`cell`: odevit.repro.fast, publish, run)."""
    from odevit.repro import plan

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for stage, blocks in config.STAGE_BLOCKS.items():
        if stage not in stages:
            assert stage == "cell", f"config.STAGE_BLOCKS names '{stage}', which is no dvc.yaml stage"
            continue
        plan_only = set(plan.PLAN_KEYS) - {"teacher"}  # the teacher block holds knobs and the plan's recipe
        named = {p.split(".")[0] for p in stages[stage].get("params", []) if isinstance(p, str)} - plan_only
        assert named == set(blocks), stage
        if stage == "01_data":  # every knob block
            assert named == set(params) - plan_only
    assert config.STAGE_BLOCKS["02_teacher"] == ["base", "teacher", "distill"]  # it reads distill.distance_batches


def test_code_defaults_equal_params_yaml():
    """A block parsed from nothing is the block params.yaml writes out, key by key (one source of truth: a user who
    deletes a key gets the documented value), and params.yaml names every key of every block."""
    import dataclasses

    from odevit.repro import plan

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert set(params) == {"base", "teacher", "distill", "dynamics"} | set(plan.PLAN_KEYS)
    for block in ("base", "teacher", "distill", "dynamics"):
        values = config._knobs(block, params[block])  # the teacher block's plan-only keys (seeds, weak) aside
        default = config.parse(block, {})
        assert {f.name for f in dataclasses.fields(default)} == set(values), block
        for key, value in values.items():
            assert getattr(default, key) == value, f"{block}.{key}: code {getattr(default, key)!r}, params.yaml {value!r}"


TRAIN_SCRIPT = textwrap.dedent("""
    import json, sys
    from odevit.repro import config, pipeline, train
    out = sys.argv[1]
    b = config.parse("base", dict(dataset="synthetic", synthetic_size=384, val_size=64, batch_size=16, device="cpu"))
    s = config.parse("scratch", dict(embed_dim=16, num_heads=2, num_steps=4, epochs=4, dropout=0.1))
    train.seed_everything(0)
    tr, te = pipeline.loaders(b)
    model = pipeline.build_scratch(b, s)
    hist = train.fit(model, tr, te, pipeline.ode_scratch(s), pipeline.train_config(b, s), out,
                     run_id=train.fingerprint(b, s))
    json.dump([{k: v for k, v in r.items() if k not in ("epoch_time_s", "eval_time_s", "img_per_s")} for r in hist],
              open(out + "/metrics.json", "w"), sort_keys=True)
""")


def test_sigkill_mid_training_then_rerun_equals_uninterrupted(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(TRAIN_SCRIPT)
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    subprocess.run([sys.executable, str(script), str(ref)], check=True, capture_output=True)
    p = subprocess.Popen([sys.executable, str(script), str(cut)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while not (cut / "last.pt").exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not (cut / "metrics.json").exists(), "the run finished before it could be killed"
    killed_at = torch.load(cut / "last.pt", weights_only=True)["epoch"]
    assert killed_at < 4
    r = subprocess.run([sys.executable, str(script), str(cut)], check=True, capture_output=True, text=True)
    assert f"resuming from {cut}/last.pt after epoch {killed_at}/4" in r.stdout
    assert (cut / "metrics.json").read_text() == (ref / "metrics.json").read_text()


def _tiny(train_limit=None):
    b = config.parse("base", dict(dataset="synthetic", synthetic_size=64, val_size=16, batch_size=16, device="cpu"))
    s = config.parse("scratch", dict(embed_dim=16, num_heads=2, num_steps=2, epochs=1))
    tr, te = pipeline.loaders(b, train_limit=train_limit)
    return pipeline.build_scratch(b, s), tr, te


def test_resumed_run_counts_the_earlier_epochs_in_its_total(tmp_path):
    """A resumed run counts the earlier process's epochs (times['resumed_s'] from the resumed history); a fresh run
    has no resumed_s."""
    model, tr, te = _tiny()
    fresh: dict = {}
    first = train.fit(model, tr, te, pipeline.ode_scratch(PLAIN_CE), train.TrainConfig(epochs=1, device="cpu"),
                      str(tmp_path), run_id="x", times=fresh)
    assert "resumed_s" not in fresh
    times: dict = {}
    hist = train.fit(model, tr, te, pipeline.ode_scratch(PLAIN_CE), train.TrainConfig(epochs=2, device="cpu"),
                     str(tmp_path), run_id="x", times=times)
    assert len(hist) == 2 and times["resumed_s"] == first[0]["epoch_time_s"] + first[0]["eval_time_s"]


def test_truncated_checkpoint_is_reported_never_used_or_replaced(tmp_path):
    model, tr, te = _tiny()
    train.fit(model, tr, te, pipeline.ode_scratch(PLAIN_CE), train.TrainConfig(epochs=1, device="cpu"), str(tmp_path))
    last = tmp_path / "last.pt"
    last.write_bytes(last.read_bytes()[:200])
    with pytest.raises(train.CheckpointError, match=f"checkpoint '{last}' is corrupt or truncated"):
        train.load_weights(model, str(last))
    with pytest.raises(train.CheckpointError, match="corrupt or truncated"):
        train.fit(model, tr, te, pipeline.ode_scratch(PLAIN_CE), train.TrainConfig(epochs=2, device="cpu"),
                  str(tmp_path))
    assert last.stat().st_size == 200  # not silently replaced by a fresh start


def test_pickled_callable_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "hook": os.system}, path)
    with pytest.raises(train.CheckpointError, match="refused: it holds pickled objects"):
        train.load_checkpoint(str(path))


def test_divergence_stops_with_epoch_step_and_last_good_checkpoint(tmp_path):
    model, tr, te = _tiny()
    train.fit(model, tr, te, pipeline.ode_scratch(PLAIN_CE), train.TrainConfig(epochs=1, device="cpu"), str(tmp_path),
              run_id="a")
    cfg = train.TrainConfig(epochs=3, lr=1e30, clip=1e30, device="cpu")
    with pytest.raises(FloatingPointError, match=rf"non-finite .* at epoch \d+, step \d+: .*last good checkpoint: "
                                                 rf"{tmp_path}/last.pt"):
        train.fit(model, tr, te, pipeline.ode_scratch(PLAIN_CE), cfg, str(tmp_path), run_id="b")
    for f in ("last.pt", "best.pt"):
        sd = torch.load(tmp_path / f, weights_only=True)["model"]
        assert all(torch.isfinite(v).all() for v in sd.values()), f


def _write_idx(path, dims, payload):
    header = bytes([0, 0, 0x08, len(dims)]) + b"".join(int(d).to_bytes(4, "big") for d in dims)
    path.write_bytes(header + payload)


def test_corrupt_dataset_file_is_named(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    _write_idx(raw / "train-images-idx3-ubyte", (3, 28, 28), bytes(3 * 28 * 28 - 10))  # truncated
    _write_idx(raw / "train-labels-idx1-ubyte", (3,), bytes(3))
    for f in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        (raw / f).write_bytes(b"")
    with pytest.raises(data.DatasetError, match="train-images-idx3-ubyte: corrupt or truncated IDX file"):
        data.load_split("fashion_mnist", "train", root=str(tmp_path), download=False)


def test_checkpoint_of_other_training_data_is_not_resumed(tmp_path):
    """Same configs and run_id on fewer images (e.g. `dvc exp run -S study.train_limit=...` over persistent cell
    checkpoints): the finished checkpoint must be set aside, not resumed as if it had been trained on these images."""
    cfg = train.TrainConfig(epochs=1, device="cpu")
    model, small, te = _tiny(train_limit=32)
    train.fit(model, small, te, pipeline.ode_scratch(PLAIN_CE), cfg, str(tmp_path), run_id="x")
    model, big, te = _tiny(train_limit=64)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        hist = train.fit(model, big, te, pipeline.ode_scratch(PLAIN_CE), cfg, str(tmp_path), run_id="x")
    assert "belongs to another configuration: starting this run from scratch" in out.getvalue()
    assert len(hist) == 1 and torch.load(tmp_path / "last.pt", weights_only=True)["epoch"] == 1
    model, big, te = _tiny(train_limit=64)
    with contextlib.redirect_stdout(out):  # the same data again resumes (here: nothing left to train)
        train.fit(model, big, te, pipeline.ode_scratch(PLAIN_CE), cfg, str(tmp_path), run_id="x")
    assert "resuming from" in out.getvalue()
