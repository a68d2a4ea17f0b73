"""The fast path (odevit/repro/fast.py): on the CPU its K stacked seeds compute what K separate runs of the plain
path (`train.fit`) compute, to floating-point rounding; its schedule, convergence rule, augmentation and evaluation
against hand-computed cases."""
import json
import math
import os
import sys
from pathlib import Path

import pytest
import torch

from odevit.model import ODEViT
from odevit.repro import config, data, fast, pipeline, train

ROOT = Path(__file__).resolve().parents[1]

RTOL = 1e-4  # relative: batched matrix products and the stacked norm sum in another order (~1e-6 a step)


def _model(seed: int, **kw) -> ODEViT:
    torch.manual_seed(seed)
    return ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=4, embed_dim=16, num_heads=2, mlp_ratio=1.0,
                  num_steps=4, horizon=2.0, **kw)


def _loaders(seed: int, n: int = 48):
    g = torch.Generator().manual_seed(7)  # the same images for every seed; the seed orders them
    split = data.Split(torch.randint(0, 256, (n + 16, 1, 8, 8), generator=g, dtype=torch.uint8),
                       torch.arange(n + 16) % 4)
    tr_split, va_split = data.holdout(split, 16)
    tf = data.batch_transform("synthetic", 8, 1, "dataset")
    return (data.Loader(tr_split, 16, tf, shuffle=True, drop_last=True, seed=seed),
            data.Loader(va_split, 16, tf))


def _teacher_objective():
    teacher = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=4, embed_dim=16, num_heads=2, num_steps=2,
                     horizon=2.0)
    # the student's states at steps 2 and 4 pass through the teacher's two states (the objective's cache path)
    tr, _ = _loaders(0)
    cache = torch.stack([teacher.forward_trajectory(tr.transform(tr.split.images[:tr.n].float() / 255 * 255))
                         ["states"][i][:, 0] for i in (1, 2)], 1).detach()
    return pipeline.distill(teacher, [2, 4], config.Distill(jasmin_weight=1.0, ce_weight=0.5, label_smoothing=0.0),
                            cache=cache)


def test_lr_factor_is_train_lr_factor_without_floor():
    for total, warm in ((100, 5), (37, 0), (10, 3)):
        for s in range(total + 2):
            assert fast.lr_factor(s, total, warm) == pytest.approx(train.lr_factor(s, total, warm), abs=1e-15)


def test_lr_factor_floor_phase():
    total, warm = 100, 5
    f = [fast.lr_factor(s, total, warm, floor=0.1, floor_frac=0.25) for s in range(total)]
    assert f[:6] == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert all(v == 0.1 for v in f[75:])  # the last quarter at the floor
    assert f[74] > 0.1 and all(a >= b for a, b in zip(f[5:75], f[6:76]))  # cosine down to it, never below
    assert fast.lr_factor(40, total, warm, 0.1, 0.25) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))


def test_floor_slope_by_hand_and_flips():
    flat = [0.5, 0.8, 0.85, 0.86, 0.86, 0.861, 0.859, 0.86]  # floor window = 2 epochs: [0.859, 0.86]
    conv, gain, thr = fast.floor_slope(flat, 0.25, 5000)
    assert gain == pytest.approx(0.2, abs=1e-9)  # slope 0.1 pt/epoch (85.9 -> 86.0) x the 2 floor epochs
    assert thr == pytest.approx(100 * math.sqrt(0.861 * 0.139 / 5000))
    assert conv
    rising = flat[:-2] + [0.861, 0.875]  # +1.4 pt over the window: still learning
    conv, gain, _ = fast.floor_slope(rising, 0.25, 5000)
    assert gain == pytest.approx(2 * 1.4, abs=1e-9) and not conv
    with pytest.raises(ValueError, match="floor window"):
        fast.floor_slope([0.5], 0.25, 5000)


def test_tau_rule():
    assert fast.tau_by_rule([4.5, 10.0, 53.5], 30 / 49) == pytest.approx(30.0)
    with pytest.raises(ValueError, match="no span"):
        fast.tau_by_rule([2.0, 2.0], 0.6)


def test_augment_crops_and_flips_within_the_pad():
    x = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).view(2, 1, 6, 6)
    a = fast.augment(x, torch.Generator().manual_seed(0), pad=2)
    b = fast.augment(x, torch.Generator().manual_seed(0), pad=2)
    assert torch.equal(a, b) and a.shape == x.shape  # the generator fixes the draws
    xp = torch.nn.functional.pad(x, (2, 2, 2, 2))
    for i in range(2):  # every output is one of the 25 crops of the padded image, flipped or not
        cands = [c for dy in range(5) for dx in range(5) for c in (xp[i, :, dy:dy + 6, dx:dx + 6],
                                                                    xp[i, :, dy:dy + 6, dx:dx + 6].flip(-1))]
        assert any(torch.equal(a[i], c) for c in cands)
    assert torch.equal(fast.augment(x, torch.Generator().manual_seed(1), pad=0).abs().sum(), x.abs().sum())


def _fast_fit(seeds, objective, epochs=2, lr=3e-3):
    ms, lo = [], [_loaders(s) for s in seeds]
    for s in seeds:
        ms.append(_model(s))
    g = fast.new_group(ms, fast.Optim(lr, 0.05, 0.05, 1.0, epochs), len(lo[0][0]), torch.device("cpu"))
    tr = fast.Data.of(fast.in_order(lo[0][0], 16), torch.device("cpu"))
    va = fast.Data.of(lo[0][1], torch.device("cpu"))
    assert fast.fit(g, lambda key: objective, [l[0] for l in lo], tr, va, [None] * len(seeds), torch.device("cpu"),
                    lambda e, b: 0, graphs=False)
    return g


def _plain_fit(seeds, objective, epochs=2, lr=3e-3):
    """K separate plain runs (train.fit, one model each), each from the same initial model as the stacked one."""
    cfg = train.TrainConfig(epochs=epochs, lr=lr, weight_decay=0.05, warmup=0.05, clip=1.0, device="cpu")
    ms = [_model(s) for s in seeds]
    return ms, [train.fit(m, *_loaders(s), objective, cfg) for m, s in zip(ms, seeds)]


@pytest.mark.parametrize("kind", ["free", "distilled", "no_maps"])
def test_fast_equals_plain_path_on_cpu(kind):
    """no_maps: CE only, no attention maps requested, so the plain runs use the fused attention kernel and the
    stacked one the explicit softmax (the fused kernel's backward fails under vmap on CUDA)."""
    obj = {"free": lambda: pipeline.ode_scratch(config.Scratch(label_smoothing=0.1, jasmin_weight=1.0)),
           "distilled": _teacher_objective,
           "no_maps": lambda: pipeline.ode_scratch(config.Scratch(label_smoothing=0.1, jasmin_weight=0.0))}[kind]()
    seeds = [3, 4]
    g = _fast_fit(seeds, obj)
    ms, hs = _plain_fit(seeds, obj)
    for k, m in enumerate(ms):
        for n, p in m.named_parameters():
            assert torch.allclose(g.stacked.params[n][k], p.detach(), rtol=RTOL, atol=1e-6), (k, n)
        for a, b in zip(g.histories[k], hs[k]):
            assert a["train_loss"] == pytest.approx(b["train_loss"], rel=RTOL)
            assert a["val_acc1"] == pytest.approx(b["val_acc1"], abs=1 / 16 + 1e-9)  # at most one image flips
    assert ms[0].field.attn.fused  # the plain runs keep the model's own attention kernel
    # the two seeds really differ (initialisation and order), so the comparison is not vacuous
    assert not torch.allclose(g.stacked.params["field.attn.qkv.weight"][0], g.stacked.params["field.attn.qkv.weight"][1])


def test_fast_path_differs_when_the_arithmetic_does():
    """The equivalence test can fail: another learning rate gives other weights."""
    obj = pipeline.ode_scratch(config.Scratch(label_smoothing=0.1, jasmin_weight=0.0))
    g = _fast_fit([3, 4], obj, lr=3e-3)
    ms, _ = _plain_fit([3, 4], obj, lr=1e-3)
    n, p = next(iter(ms[0].named_parameters()))
    assert not torch.allclose(g.stacked.params[n][0], p.detach(), rtol=RTOL, atol=1e-6)


def test_evaluate_matches_train_evaluate():
    ms = [_model(s) for s in (1, 2)]
    _, va = _loaders(0)
    st = fast.Stacked(ms, torch.device("cpu"))
    got = fast.evaluate(st, fast.Data.of(va, torch.device("cpu")), ks=(1, 3))
    for m, r in zip(ms, got):
        want = train.evaluate(m, va, torch.device("cpu"), ks=(1, 3))
        assert r["acc1"] == pytest.approx(want["acc1"], abs=1 / 16 + 1e-9)
        assert r["acc3"] == pytest.approx(want["acc3"], abs=1 / 16 + 1e-9)
    two = fast.evaluate(st, fast.Data.of(va, torch.device("cpu")), num_steps=2, ks=(1,))
    assert two[0]["acc1"] == pytest.approx(train.evaluate(ms[0], va, torch.device("cpu"), num_steps=2, ks=(1,))["acc1"],
                                           abs=1 / 16 + 1e-9)


def test_resume_continues_where_it_stopped(tmp_path):
    """A group stopped at its deadline and resumed from last.pt ends where an uninterrupted one does."""
    obj = pipeline.ode_scratch(config.Scratch(label_smoothing=0.1, jasmin_weight=0.0))
    seeds = [5, 6]
    whole = _fast_fit(seeds, obj, epochs=3)
    lo = [_loaders(s) for s in seeds]
    cpu = torch.device("cpu")
    tr = fast.Data.of(fast.in_order(lo[0][0], 16), cpu)
    va = fast.Data.of(lo[0][1], cpu)
    last = str(tmp_path / "last.pt")
    outs = [str(tmp_path / f"s{s}") for s in seeds]

    def group():
        return fast.new_group([_model(s) for s in seeds], fast.Optim(3e-3, 0.05, 0.05, 1.0, 3), len(lo[0][0]), cpu)

    g1 = group()
    assert not fast.fit(g1, lambda k: obj, [l[0] for l in lo], tr, va, outs, cpu, lambda e, b: 0, graphs=False,
                        resume=last, max_epochs=1)  # stopped after one epoch of three, last.pt written
    g2 = group()
    assert fast.load_resume(g2, last) and g2.epoch == 1
    assert fast.fit(g2, lambda k: obj, [l[0] for l in lo], tr, va, outs, cpu, lambda e, b: 0, graphs=False, resume=last)
    for n, t in whole.stacked.params.items():
        assert torch.allclose(g2.stacked.params[n], t, rtol=1e-6, atol=1e-7), n
    assert [h["val_acc1"] for h in g2.histories[0]] == [h["val_acc1"] for h in whole.histories[0]]
    assert (tmp_path / "s5" / "best.pt").exists()


def test_a_group_resumes_only_the_run_it_was_written_for(tmp_path, monkeypatch, capsys):
    """last.pt records the group's run key (configuration, training source, trainer): a group with another
    configuration, or a trainer or training source that no equivalence record accepts, stops with one error naming
    the file and what differs (the configuration parts by name); the same key, or an older source or trainer that a
    checked equivalence record (docs/evidence/source_equivalence.json) makes today's, continues (not the other way
    round); a last.pt from before keys were recorded continues with a note."""
    import json

    from odevit.repro import train

    monkeypatch.chdir(ROOT)  # the equivalence records' path is the repository's
    cpu = torch.device("cpu")
    lo = _loaders(5)

    def group(key):
        g = fast.new_group([_model(5), _model(6)], fast.Optim(3e-3, 0.05, 0.05, 1.0, 2), len(lo[0]), cpu)
        g.key = key
        return g

    key = fast.run_key(study="v2_x", cell="ref", seeds=[5, 6], distill={"epochs": 2, "tau": 0.5})
    assert key["source"] == train.fingerprint() and len(key["trainer"]) == 16
    assert key["parts"] == {"study": "v2_x", "cell": "ref", "seeds": [5, 6], "distill": {"epochs": 2, "tau": 0.5}}
    other = fast.run_key(study="v2_x", cell="ref", seeds=[5, 7], distill={"epochs": 2, "tau": 0.5})
    assert other["config"] != key["config"] and other["source"] == key["source"]
    g = group(key)
    g.histories, g.epoch = [[{"val_acc1": 0.5}], [{"val_acc1": 0.5}]], 1
    last = tmp_path / "last.pt"
    fast.save_group(g, [None, None], str(last))
    g2 = group(dict(key))
    assert fast.load_resume(g2, str(last)) and g2.resumed_key == key
    with pytest.raises(fast.ResumeError, match=rf"{last}: written for another run: configuration \(seeds\)\. "
                                               rf"Continue it .* \(commit {key['commit']}\)"):
        fast.load_resume(group(other), str(last))
    with pytest.raises(fast.ResumeError, match=r"another run: trainer code \(fast.py "):
        fast.load_resume(group(dict(key, trainer="0" * 16)), str(last))
    with pytest.raises(fast.ResumeError, match=rf"another run: training source \({key['source']}, today 0{{16}}; .*source_equivalence"):
        fast.load_resume(group(dict(key, source="0" * 16)), str(last))
    recs = json.loads((ROOT / "docs/evidence/source_equivalence.json").read_text())
    ck = torch.load(last, weights_only=True)
    for part, what in (("source", "training source"), ("trainer", "trainer code")):
        rec = [r for r in recs if r.get("of", "source") == part][-1]
        ck["key"] = dict(key, **{part: rec["old"]})  # written by code that a checked record shows gives the same runs
        torch.save(ck, last)
        assert fast.load_resume(group(dict(key, **{part: rec["new"]})), str(last))
        ck["key"] = dict(key, **{part: rec["new"]})  # a record goes one way: old runs continued by new code, not back
        torch.save(ck, last)
        with pytest.raises(fast.ResumeError, match=what):
            fast.load_resume(group(dict(key, **{part: rec["old"]})), str(last))
    for old in (None, {k: v for k, v in key.items() if k in ("config", "source", "trainer")}):  # none; hashes only
        ck["key"] = old
        torch.save(ck, last)
        capsys.readouterr()
        g3 = group(dict(key, trainer="1" * 16))  # not checked: there is nothing to check it against
        assert fast.load_resume(g3, str(last)) and g3.resumed_key is None
        assert "written before groups recorded their run key; continued unchecked" in capsys.readouterr().out


def test_the_run_key_is_the_same_in_another_process_and_ignores_comments(tmp_path, monkeypatch):
    """The key a later session computes for the same run equals today's (another interpreter with another hash seed
    than this one's), and an edit of fast.py's comments or docstrings leaves its trainer part as it is, while a code
    edit changes it (trainer_hash reads the file at fast.__file__, here pointed at an edited copy)."""
    import subprocess
    import sys

    parts = dict(study="v2_x", cell="ref", seeds=[5, 6], base={"batch_size": 128, "image_size": 28})
    code = ("import json, sys; from odevit.repro import fast; "
            f"print(json.dumps(fast.run_key(**{parts!r})))")
    seed = "2" if os.environ.get("PYTHONHASHSEED") == "1" else "1"  # not this interpreter's
    out = subprocess.run([sys.executable, "-c", code], cwd=os.getcwd(), capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": seed}).stdout
    mine = fast.run_key(**parts)
    assert json_loads(out) == mine  # config, parts, source, trainer and commit alike
    src = (ROOT / "odevit/repro/fast.py").read_text()
    today = fast.trainer_hash()
    copy = tmp_path / "fast.py"
    for text, same in ((src.replace('"""', '"""Another docstring line. ', 1) + "\n# a comment\n", True),
                       (src + "\nX = 1\n", False)):
        copy.write_text(text)
        monkeypatch.setattr(fast, "__file__", str(copy))
        assert (fast.trainer_hash() == today) == same, text[-40:]


def json_loads(text):
    import json

    return json.loads(text)


def test_a_cell_group_carries_its_run_key_and_the_cli_stops_on_another_run(tmp_path, monkeypatch, capsys):
    """train_cell gives the group its key before any training (here `fit` is stopped at once): the configuration of
    its study, cell and seeds; another cell has another key. `python -m odevit.repro.fast` answers a last.pt of
    another run with one line and exit 2."""
    from odevit.repro import data

    if not os.path.isdir(data.DEBIAN_FASHION_MNIST):
        pytest.skip("Fashion-MNIST not installed (make data)")
    monkeypatch.chdir(ROOT)
    seen = []

    def stop(g, *a, **k):
        seen.append(g.key)
        return False  # as if the deadline came first: nothing is written

    monkeypatch.setattr(fast, "fit", stop)
    p = fast.Plan("params.yaml")
    into = tmp_path / "runs"
    for cell in ("free", "free", "ce"):
        assert not fast.train_cell(p, "v2_1k", cell, torch.device("cpu"), False, None, {}, into=str(into),
                                   only_seeds=[2100])
    a, b, c = seen
    assert a == b and a["parts"]["cell"] == "free" and a["parts"]["seeds"] == [2100]
    assert a["parts"]["train_limit"] == 1000 and "device" not in a["parts"]["base"]
    assert c["config"] != a["config"] and c["parts"]["teacher"] == "strong"

    def refuse(*a, **k):
        raise fast.ResumeError("checkpoints/v2/v2_x/ref/last.pt: written for another run: configuration (seeds)")

    monkeypatch.setattr(fast, "run_plan", refuse)
    assert fast.main(["params.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["checkpoints/v2/v2_x/ref/last.pt: written for another run: configuration (seeds)"]


def test_a_group_resumes_only_on_its_device_kind(tmp_path):
    cpu = torch.device("cpu")
    lo = _loaders(5)
    g = fast.new_group([_model(5), _model(6)], fast.Optim(3e-3, 0.05, 0.05, 1.0, 2), len(lo[0]), cpu)
    g.histories, g.epoch = [[{"val_acc1": 0.5}], [{"val_acc1": 0.5}]], 1
    last = str(tmp_path / "last.pt")
    fast.save_group(g, [None, None], last)
    assert fast.load_resume(fast.new_group([_model(5), _model(6)], g.cfg, len(lo[0]), cpu), last)
    ck = torch.load(last, weights_only=True)  # last.pt holds tensors and plain values only
    ck["device"] = "NVIDIA H200"  # started on another machine kind: this one starts the group over
    torch.save(ck, last)
    assert not fast.load_resume(fast.new_group([_model(5), _model(6)], g.cfg, len(lo[0]), cpu), last)
    with pytest.raises(ValueError, match="--shard 3/2"):
        fast.run_plan("params.yaml", shard=(3, 2))


def test_the_gpu_record_is_what_the_runs_histories_give():
    """results/bench/fast_v2_gpu.md is `python benchmarks/bench.py gpu-record` on the committed runs: its table
    (device, K, epochs, images/s of each GPU group's training loop) recomputes from the runs' own histories."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench

    table = bench.gpu_record(str(ROOT / "results/v2")).to_markdown(index=False)
    assert table in (ROOT / "results/bench/fast_v2_gpu.md").read_text()


def test_compute_sums_every_runs_history_by_plan_and_machine(tmp_path):
    """bench.compute: the time = the sum of epoch_time_s + eval_time_s over every run's epochs (each seed of a stacked
    group records its share), grouped by plan and machine; reruns outside the plans (results/v2_cpu) left out; and
    results/bench/compute.md's v2 rows (plan v2 is finished) are what the committed runs give."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench

    def run(rel, device, times, evals=None):
        d = tmp_path / rel
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({"provenance": {"device": device}}))
        cols = "epoch,epoch_time_s" + (",eval_time_s" if evals else "")
        lines = [f"{i},{t}" + (f",{evals[i]}" if evals else "") for i, t in enumerate(times)]
        (d / "history.csv").write_text("\n".join([cols] + lines) + "\n")

    run("results/v2/teacher/s1", "GPU", [1800.0, 1800.0], [0.0, 0.0])
    run("results/v2/v2_1k/ref/s10", "GPU", [900.0], [900.0])
    run("results/v2/v2_1k/ref/s11", "GPU", [1800.0], [0.0])
    run("results/v3/v3_1k/free/s20", "CPU", [3600.0, 3600.0])  # no eval column: loops only
    run("results/v3/v3_1k/free/s21", "other CPU", [360.0])
    run("results/v2_cpu/v2_10k/ref/s30", "CPU", [99999.0])  # a rerun outside the plans
    t = bench.compute(str(tmp_path)).set_index(["plan", "machine"])
    assert t.loc[("v2", "GPU")].to_dict() == {"groups": 2, "runs": 3, "hours": 2.0}
    assert t.loc[("v3", "CPU")].to_dict() == {"groups": 1, "runs": 1, "hours": 2.0}
    assert t.loc[("v3", "other CPU")].hours == 0.1 and len(t) == 3
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in
             (ROOT / "results/bench/compute.md").read_text().splitlines() if line.startswith("| v")]
    v2 = bench.compute(str(ROOT)).query("plan == 'v2'")
    assert len(v2) == 2 and all([r.plan, r.machine, str(r.groups), str(r.runs), f"{r.hours:.2f} h"] in cells
                                for r in v2.itertuples(index=False))
