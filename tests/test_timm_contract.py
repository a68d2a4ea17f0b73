"""The timm model contract, asserted identically of timm's own ViT and of ODE-ViT (solver steps = layers).

Every test runs on both models: what holds of `vit_tiny_patch16_224` must hold of `odevit_tiny_patch4_32`.
"""
import pytest
import timm
import timm.optim
import torch
import torch.fx

import odevit  # noqa: F401  (registers the odevit_* models)
from odevit.repro.memory import saved_bytes

L, D, P, S = 4, 192, 8, 32  # layers (= solver steps), width, patch, image side: 4 x 4 patches
SHAPE = dict(img_size=S, patch_size=P, num_classes=10)
MODELS = {
    "vit_tiny_patch16_224": dict(SHAPE, depth=L),
    "odevit_tiny_patch4_32": dict(SHAPE, num_steps=L, reg_tokens=2),  # registers too: they must stay out of NCHW
}


@pytest.fixture(params=list(MODELS))
def name(request):
    return request.param


def make(name, **kw):
    torch.manual_seed(0)
    return timm.create_model(name, **{**MODELS[name], **kw}).eval()


@pytest.fixture
def x():
    return torch.randn(2, 3, S, S, generator=torch.Generator().manual_seed(1))


def test_widths_and_features(name, x):
    m = make(name)
    assert m.num_features == m.head_hidden_size == m.embed_dim == D
    f = m.forward_features(x)
    assert f.shape[0] == 2 and f.shape[-1] == D and f.shape[1] >= 1 + (S // P) ** 2
    torch.testing.assert_close(m.forward_head(f), m(x))
    assert m.forward_head(f, pre_logits=True).shape == (2, D)


def test_reset_classifier(name, x):
    m = make(name)
    m.reset_classifier(5)
    assert m.num_classes == 5 and m(x).shape == (2, 5) and m.get_classifier().out_features == 5
    m.reset_classifier(0)
    torch.testing.assert_close(m(x), m.forward_head(m.forward_features(x), pre_logits=True))
    m.reset_classifier(3, "avg")  # average pooling = mean of the patch tokens of the final (normed) state
    last = m.forward_intermediates(x, indices=1, norm=True, output_fmt="NLC", intermediates_only=True)[0]
    torch.testing.assert_close(m.forward_head(m.forward_features(x), pre_logits=True), last.mean(1))


def test_forward_intermediates(name, x):
    m = make(name)
    final, inter = m.forward_intermediates(x)
    torch.testing.assert_close(final, m.forward_features(x))
    assert len(inter) == L and all(t.shape == (2, D, S // P, S // P) for t in inter)
    for k in (0, L - 1):
        one = m.forward_intermediates(x, indices=[k], intermediates_only=True)
        torch.testing.assert_close(one[0], inter[k])
    last2 = m.forward_intermediates(x, indices=2, intermediates_only=True, stop_early=True)
    torch.testing.assert_close(last2, inter[-2:])
    nlc = m.forward_intermediates(x, indices=[-1], output_fmt="NLC", intermediates_only=True)[0]
    torch.testing.assert_close(nlc.transpose(1, 2).reshape(2, D, S // P, S // P), inter[-1])
    pairs = m.forward_intermediates(x, indices=[0], return_prefix_tokens=True, intermediates_only=True)
    spatial, prefix = pairs[0]
    torch.testing.assert_close(spatial, inter[0])
    assert prefix.shape[1] + (S // P) ** 2 == final.shape[1]  # every token is spatial or prefix, none twice
    with pytest.raises(Exception):
        m.forward_intermediates(x, indices=[L])  # out of range


def test_prune_intermediate_layers(name, x):
    m = make(name)
    want = m.forward_intermediates(x, indices=[1], intermediates_only=True)
    assert m.prune_intermediate_layers([1]) == [1]
    torch.testing.assert_close(m.forward_intermediates(x, indices=[1], intermediates_only=True), want)
    assert m(x).shape == m.forward_features(x).shape  # head pruned: forward returns the unpooled tokens


def test_features_only(name, x):
    torch.manual_seed(0)
    f = timm.create_model(name, features_only=True, out_indices=(1, 3), **MODELS[name]).eval()
    assert f.feature_info.channels() == [D, D] and f.feature_info.reduction() == [P, P]
    feats = f(x)
    ref = make(name).forward_intermediates(x, indices=[1, 3], intermediates_only=True)
    torch.testing.assert_close(feats, ref)


def test_optimizer_factory(name):
    m = make(name)
    names = dict(m.named_parameters())
    assert m.no_weight_decay() & set(names) >= {"pos_embed", "cls_token"}
    opt = timm.optim.create_optimizer_v2(m, "adamw", lr=1e-3, weight_decay=0.05)
    no_decay = {id(p) for g in opt.param_groups if g["weight_decay"] == 0 for p in g["params"]}
    assert id(names["pos_embed"]) in no_decay and id(names["cls_token"]) in no_decay
    groups = timm.models.group_parameters(m, m.group_matcher())
    assert sorted(n for ns in groups.values() for n in ns) == sorted(names)  # every parameter in one group
    opt = timm.optim.create_optimizer_v2(m, "adamw", lr=1e-3, weight_decay=0.05, layer_decay=0.75)
    assert sum(len(g["params"]) for g in opt.param_groups) == len(names)


def _saved_bytes(m, x):
    out = []
    return saved_bytes(lambda: out.append(m(x).square().sum()), m), out[0]


def test_grad_checkpointing(name, x):
    m, x = make(name).train().double(), x.double()  # float64: the checkpointed path may compute in another order
    full, loss = _saved_bytes(m, x)
    loss.backward()
    g0 = {k: p.grad.clone() for k, p in m.named_parameters()}
    m.zero_grad()
    m.set_grad_checkpointing(True)
    ckpt, loss = _saved_bytes(m, x)
    loss.backward()
    assert ckpt < 0.5 * full  # the inside of every layer/step is recomputed, not stored
    for k, p in m.named_parameters():
        torch.testing.assert_close(p.grad, g0[k], msg=k)


def test_fx_compile_export(name, x):
    m = make(name)
    want = m(x)
    torch.testing.assert_close(torch.fx.symbolic_trace(m)(x), want)
    from torchvision.models.feature_extraction import create_feature_extractor

    torch.testing.assert_close(create_feature_extractor(m, return_nodes={"head": "out"})(x)["out"], want)
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(m, fullgraph=True, backend="eager")(x), want)  # no graph break
    torch.testing.assert_close(torch.export.export(m, (x,)).module()(x), want)
