"""train.fit_many: K models trained together (stacked parameters under torch.func.vmap) compute what K separate
`fit` runs compute, to floating-point rounding, write the same files, and resume each other's last.pt."""
import dataclasses
import json
import time

import pandas as pd

import pytest
import torch

from odevit.model import ODEViT
from odevit.repro import config, data, pipeline, train

CE_JASMIN = config.Scratch(label_smoothing=0.1, jasmin_weight=1.0, jasmin_k=2)  # the free cells' loss
RTOL = 1e-4  # relative: batched matrix products sum in another order (measured ~1e-6 per step; a few steps here)


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


CFG = train.TrainConfig(epochs=2, lr=3e-3, device="cpu")


def _plain(seed, objective, out):
    m = _model(seed)
    tr, va = _loaders(seed)
    return m, train.fit(m, tr, va, objective, CFG, str(out), run_id="r")


class Stop(Exception):
    pass


def _together(seeds, objective, outs, stop_before=None):
    ms, rngs = [], []
    for s in seeds:
        ms.append(_model(s))
        rngs.append(train._rng_state())
    lo = [_loaders(s) for s in seeds]

    def interrupt(epoch, model):  # an interruption after epoch `stop_before` (its checkpoints written)
        if epoch == stop_before:
            raise Stop

    return ms, train.fit_many(ms, [l[0] for l in lo], [l[1] for l in lo], objective, CFG, [str(o) for o in outs],
                              on_epoch=interrupt, run_ids=["r"] * len(seeds), rngs=rngs)


def _close(h1, h2):
    assert len(h1) == len(h2)
    for a, b in zip(h1, h2):
        for k in a:
            if k.startswith("train_"):
                assert a[k] == pytest.approx(b[k], rel=RTOL), k
        assert a["val_acc1"] == pytest.approx(b["val_acc1"], abs=1 / 16 + 1e-9)  # at most one image flips


def _teacher_objective():
    teacher = ODEViT(img_size=8, patch_size=4, in_chans=1, num_classes=4, embed_dim=16, num_heads=2, num_steps=2,
                     horizon=2.0)
    # the student's states at steps 2 and 4 pass through the teacher's two states (the objective's cache path)
    tr, _ = _loaders(0)
    cache = torch.stack([teacher.forward_trajectory(tr.transform(tr.split.images[:tr.n].float() / 255 * 255))
                         ["states"][i][:, 0] for i in (1, 2)], 1).detach()
    return pipeline.distill(teacher, [2, 4], config.Distill(jasmin_weight=1.0, ce_weight=0.5, label_smoothing=0.0),
                              cache=cache)


@pytest.mark.parametrize("kind", ["ode_scratch", "distill", "no_maps"])
def test_seeds_trained_together_match_separate_runs(kind, tmp_path):
    """no_maps: CE only, no attention maps requested, so the separate runs use the fused attention kernel and the
    batched one the explicit softmax (the fused kernel's backward fails under vmap on CUDA)."""
    no_maps = config.Scratch(label_smoothing=0.1, jasmin_weight=0.0)
    obj = {"ode_scratch": lambda: pipeline.ode_scratch(CE_JASMIN), "distill": _teacher_objective,
           "no_maps": lambda: pipeline.ode_scratch(no_maps)}[kind]()
    seeds = [3, 4]
    plain = [_plain(s, obj, tmp_path / f"p{s}") for s in seeds]
    ms, hists = _together(seeds, obj, [tmp_path / f"t{s}" for s in seeds])
    for (m1, h1), m2, h2 in zip(plain, ms, hists):
        _close(h1, h2)
        for (n, p1), p2 in zip(m1.named_parameters(), m2.parameters()):
            torch.testing.assert_close(p2, p1, rtol=RTOL, atol=1e-6, msg=n)
    assert ms[0].field.attn.fused  # the explicit attention was for the batched objective only
    # the two seeds really differ (different init and order), so the comparison above is not vacuous
    assert not torch.allclose(ms[0].field.attn.qkv.weight, ms[1].field.attn.qkv.weight)
    # the same files as fit writes: best.pt and last.pt with its RNG state, history and run id
    for s in seeds:
        a, b = (train.load_checkpoint(str(tmp_path / f"{w}{s}" / "last.pt")) for w in "pt")
        assert a.keys() == b.keys() and a["run_id"] == b["run_id"] and a["epoch"] == b["epoch"] == 2
        assert all(torch.equal(a["rng"][k], b["rng"][k]) for k in ("torch", "python"))


def test_plain_fit_resumes_a_run_trained_together(tmp_path):
    obj = pipeline.ode_scratch(CE_JASMIN)
    with pytest.raises(Stop):
        _together([3, 4], obj, [tmp_path / "s3", tmp_path / "s4"], stop_before=1)  # stopped after epoch 1
    assert train.load_checkpoint(str(tmp_path / "s3" / "last.pt"))["epoch"] == 1
    m = _model(3)
    tr, va = _loaders(3)
    resumed = train.fit(m, tr, va, obj, CFG, str(tmp_path / "s3"), run_id="r")  # the plain path goes on
    m_ref, straight = _plain(3, obj, tmp_path / "ref")
    _close(straight, resumed)
    for p1, p2 in zip(m_ref.parameters(), m.parameters()):
        torch.testing.assert_close(p2, p1, rtol=RTOL, atol=1e-6)


def test_what_cannot_be_trained_together_is_refused(tmp_path):
    obj = pipeline.ode_scratch(config.Scratch(label_smoothing=0.0, jasmin_weight=0.0))
    with pytest.raises(ValueError, match="patience"):
        train.fit_many([_model(0), _model(1)], [_loaders(0)[0]] * 2, [_loaders(0)[1]] * 2, obj,
                       dataclasses.replace(CFG, patience=2), rngs=[{}, {}])
    with pytest.raises(ValueError, match="rngs"):
        train.fit_many([_model(0), _model(1)], [_loaders(0)[0]] * 2, [_loaders(0)[1]] * 2, obj, CFG)
    ms = [_model(0, attn_drop=0.1), _model(1, attn_drop=0.1)]  # dropout: a random draw per model, refused by vmap
    with pytest.raises(RuntimeError, match="random"):
        train.fit_many(ms, [_loaders(0)[0]] * 2, [_loaders(0)[1]] * 2, obj, CFG, rngs=[{}, {}])
