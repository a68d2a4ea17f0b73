"""JaSMin and trajectory MSE against hand-computed values; checkpoint schedule against the published indices; the
published-code switches (JaSMin map count, schedule multiplier, maps after dropout) against ours on known cases; the
label-free default objective never reads the labels; the distillation objective as the sum of the registered
terms, and a new term added by one function and one config field."""
import dataclasses
import math

import pytest
import torch

from odevit import losses
from odevit.losses import EPS, attention_l1, jasmin, jasmin_map_count, jasmin_rows, topk_correct, trajectory_mse
from odevit.schedule import checkpoint_indices, layer_distances

PUBLISHED_D = [19.99450625, 12.949505, 5.35348687, 4.86699219, 4.81463781, 4.52093875, 5.21054063, 5.69734125,
               6.1311925, 6.05176188, 6.4614325, 53.514895]


def test_published_checkpoints():
    assert checkpoint_indices(PUBLISHED_D, num_steps=35, tau=30) == [3, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 35]
    assert checkpoint_indices(PUBLISHED_D, num_steps=23, tau=30) == [2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 23]


# N where the published multiplier N + 1 ("grid_points") gives other checkpoints than ours (N) for the published
# distances at tau 30, over N = 12..100 (33 of 89; the authors' code and ours agree at N = 23 and 35)
GRID_POINTS_DIFFER = [15, 19, 24, 25, 26, 32, 36, 40, 41, 42, 43, 46, 57, 58, 59, 60, 67, 72, 73, 74, 75, 76, 77, 78,
                      85, 88, 89, 90, 92, 93, 94, 95, 98]


def test_schedule_points_published_multiplier():
    # N = 24: w * 24 rounds the 9th-11th layers' 1.455, 1.451, 1.471 down to 1; w * 25 gives 1.515, 1.511, 1.532 -> 2
    assert checkpoint_indices(PUBLISHED_D, num_steps=24, tau=30) == [2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 24]
    assert checkpoint_indices(PUBLISHED_D, num_steps=24, tau=30, points="grid_points") == \
        [2, 4, 5, 6, 7, 8, 9, 10, 12, 14, 16, 24]
    for n in (23, 35):  # where the numerical cross-check found the two codes equal
        assert checkpoint_indices(PUBLISHED_D, n, 30, points="grid_points") == checkpoint_indices(PUBLISHED_D, n, 30)
    differ = [n for n in range(12, 101)
              if checkpoint_indices(PUBLISHED_D, n, 30, points="grid_points") != checkpoint_indices(PUBLISHED_D, n, 30)]
    assert differ == GRID_POINTS_DIFFER
    with pytest.raises(ValueError, match="schedule_points: 'grid_points' applies to schedule 'softmax' only"):
        checkpoint_indices(PUBLISHED_D, 35, 30, mode="uniform", points="grid_points")
    with pytest.raises(ValueError, match="schedule_points: 'grid' is not one of"):
        checkpoint_indices(PUBLISHED_D, 35, 30, points="grid")


def test_uniform_checkpoints_and_errors():
    assert checkpoint_indices([1.0] * 4, num_steps=8, mode="uniform") == [2, 4, 6, 8]
    assert checkpoint_indices([1.0] * 3, num_steps=3, mode="uniform") == [1, 2, 3]
    with pytest.raises(ValueError, match="num_steps: 11 is fewer than the 12"):
        checkpoint_indices(PUBLISHED_D, num_steps=11)
    with pytest.raises(ValueError, match="tau: 0"):
        checkpoint_indices(PUBLISHED_D, num_steps=35, tau=0)


def test_layer_distances_by_hand():
    h0 = torch.zeros(2, 3, 4)
    h1 = h0.clone()
    h1[:, 0, 0] = 3.0  # CLS moves by 3
    h1[:, 1, 1] = 4.0  # a patch moves by 4
    hs = [h0, h1, h1 + 1.0]  # second step: every entry +1 -> CLS distance 2, all-token distance sqrt(12)
    assert layer_distances([hs]) == pytest.approx([3.0, 2.0])
    assert layer_distances([hs], tokens="all") == pytest.approx([5.0, math.sqrt(12)])


def test_jasmin_uniform_rows():
    n = 4
    p = torch.full((n,), 1 / n)
    # g_1 = 1/n (1 - 1/n + 1/n) = 1/n ; g_k (k < n) = 1/n  ; g_n = 1/n (1 - 1/n)
    assert jasmin_rows(p, k=1).item() == pytest.approx(math.log(1 / n + EPS))
    assert jasmin_rows(p, k=2).item() == pytest.approx(0.0, abs=1e-6)
    assert jasmin_rows(p, k=4).item() == pytest.approx(math.log(1 / (1 - 1 / n)), abs=1e-6)


def test_jasmin_two_point_rows():
    p = torch.tensor([0.5, 0.5, 0.0])
    # clamped to 1e-12 and renormalised; g_1 = .5(1-.5+.5) = .5, g_2 = .5(1 - .5 + 1e-12) = .25
    assert jasmin_rows(p, k=1).item() == pytest.approx(math.log(0.5), abs=1e-6)
    assert jasmin_rows(p, k=2).item() == pytest.approx(math.log(2.0), abs=1e-6)


def test_jasmin_one_hot_row():
    n = 5
    p = torch.zeros(n)
    p[2] = 1.0
    # after clamp/renorm: p1 = 1/(1+(n-1)e), p2 = e/(1+(n-1)e); g_1 = p1 (1 - p1 + p2) = p1 * n e/(1+(n-1)e) ~ n e
    e = EPS
    p1, p2 = 1 / (1 + (n - 1) * e), e / (1 + (n - 1) * e)
    g1 = p1 * (1 - p1 + p2)
    assert jasmin_rows(p.double(), k=1).item() == pytest.approx(math.log(g1 + e), rel=1e-3)
    assert jasmin_rows(p, k=1).item() < -20  # a one-hot row has a near-zero softmax Jacobian


def test_jasmin_reduction_max_rows_mean_heads_last_steps():
    # 2 maps; with last_frac .5 only the last counts. Rows: uniform (log 1/2) and two-point-ish.
    a_first = torch.full((1, 1, 2, 2), 0.5)
    a_last = torch.tensor([[[[0.5, 0.5], [0.9, 0.1]]]])
    g1 = lambda p: p[0] * (1 - p[0] + p[1])  # noqa: E731
    rows = [math.log(g1([0.5, 0.5])), math.log(g1([0.9, 0.1]))]
    assert jasmin([a_first, a_last], k=1, last_frac=0.5).item() == pytest.approx(max(rows), abs=1e-5)


def test_jasmin_map_count_published_vs_ours():
    assert (jasmin_map_count(35), jasmin_map_count(35, maps_from="grid_points")) == (29, 30)
    assert (jasmin_map_count(12), jasmin_map_count(12, maps_from="grid_points")) == (10, 11)
    assert jasmin_map_count(1) == jasmin_map_count(1, maps_from="grid_points") == 1
    # the reference's count: the two rules differ for 50 of N = 1..60
    assert sum(jasmin_map_count(n) != jasmin_map_count(n, maps_from="grid_points") for n in range(1, 61)) == 50
    with pytest.raises(ValueError, match="jasmin_maps_from: 'grid' is not one of"):
        jasmin_map_count(12, maps_from="grid")


def test_jasmin_averages_the_published_number_of_maps():
    # N = 12 maps: the first two have the row (0.9, 0.1) (g_1 = 0.9 (1 - 0.9 + 0.1) = 0.18), the others (0.5, 0.5)
    # (g_1 = 0.5). Ours averages the last 10 (all uniform), the published code the last 11 (one 0.18 map).
    sharp, flat = torch.tensor([[[[0.9, 0.1]]]]), torch.full((1, 1, 1, 2), 0.5)
    maps = [sharp, sharp] + [flat] * 10
    assert jasmin(maps, k=1).item() == pytest.approx(math.log(0.5), abs=1e-6)
    assert jasmin(maps, k=1, maps_from="grid_points").item() == pytest.approx(
        (math.log(0.18) + 10 * math.log(0.5)) / 11, abs=1e-6)


def test_jasmin_gradient_flows_unless_detached():
    logits = torch.randn(2, 3, 5, 5, requires_grad=True)
    jasmin([logits.softmax(-1)], k=2).backward()
    assert logits.grad.abs().sum() > 0
    logits.grad = None
    out = jasmin([logits.softmax(-1)], k=2, detach=True)
    assert not out.requires_grad  # the published no-op
    assert torch.isfinite(out)


def test_trajectory_mse_by_hand():
    B, D = 2, 3
    states = [torch.zeros(B, 5, D) for _ in range(5)]  # N = 4, 1 CLS + 2 patches + 2 registers
    states[2][:, 0] = 1.0
    states[4][:, 1] = 2.0  # a patch token differs at the last checkpoint
    teacher = [torch.zeros(B, 3, D) for _ in range(3)]  # h_0, h_1, h_2
    c = [2, 4]
    assert trajectory_mse(states, teacher, c).item() == pytest.approx(1.0)  # CLS: (1-0)^2 at c_1, 0 at c_2
    # all tokens: layer 1 -> mean over 3 tokens: 1/3; layer 2 -> 4/3
    assert trajectory_mse(states, teacher, c, tokens="all").item() == pytest.approx(1 / 3 + 4 / 3)


def test_attention_l1_zero_for_identical_and_positive_otherwise():
    torch.manual_seed(0)
    a = torch.randn(2, 3, 5, 5).softmax(-1)
    assert attention_l1(a, a, grid=2, student_threshold=0.6, teacher_threshold=0.6).item() == pytest.approx(0.0)
    b = torch.randn(2, 3, 5, 5).softmax(-1)
    assert attention_l1(a, b, grid=2).item() > 0


def test_topk():
    logits = torch.tensor([[0.1, 0.5, 0.4], [0.9, 0.05, 0.05]])
    assert topk_correct(logits, torch.tensor([2, 0]), ks=(1, 2, 3)) == [1, 2, 2]


def test_cached_teacher_states_give_the_same_loss():
    """Distillation with the teacher's CLS states cached once equals running the teacher per batch."""
    import timm

    from odevit import student_from_teacher
    from odevit.repro import config, data, pipeline

    torch.manual_seed(0)
    t = timm.create_model("vit_tiny_patch16_224", img_size=8, patch_size=4, in_chans=1, embed_dim=16, depth=2,
                          num_heads=2, num_classes=3).eval()
    s = student_from_teacher(t, num_steps=4, mlp_ratio=1.0)
    split = data.Split(torch.randint(0, 255, (20, 1, 8, 8), dtype=torch.uint8), torch.randint(0, 3, (20,)))
    loader = data.Loader(split, 8, data.batch_transform("synthetic", 8), shuffle=True, seed=1)
    cache = pipeline.teacher_cls_cache(t, loader, torch.device("cpu"))
    assert cache.shape == (20, 2, 16)
    live = pipeline.distill(t, [2, 4], config.Distill(ce_weight=1.0, label_smoothing=0.0))
    cached = pipeline.distill(t, [2, 4], config.Distill(ce_weight=1.0, label_smoothing=0.0),
                                cache=cache)
    for x, y, idx in loader.batches(3, with_index=True):
        a, _ = live(s, x, y, 0, idx)
        b, _ = cached(s, x, y, 0, idx)
        torch.testing.assert_close(a, b)


def _attention_pair(p: float):
    from odevit.layers import Attention

    torch.manual_seed(0)
    ours = Attention(8, 2, attn_drop=p)
    published = Attention(8, 2, attn_drop=p, maps_after_dropout=True)
    published.load_state_dict(ours.state_dict())
    return ours, published


def test_attention_maps_after_dropout_are_the_dropped_maps():
    """Train mode, dropout 0.5: the switch returns exactly the maps that multiplied V (zeros where dropped, the rest
    x 1/(1-p)), as nn.MultiheadAttention does; the attention output is the same under both rules (same RNG)."""
    p = 0.5
    ours, published = _attention_pair(p)
    x = torch.randn(3, 6, 8)
    torch.manual_seed(1)
    out_o, maps_o = ours(x, need_weights=True)
    torch.manual_seed(1)
    out_p, maps_p = published(x, need_weights=True)
    torch.testing.assert_close(out_p, out_o)
    torch.testing.assert_close(maps_o.sum(-1), torch.ones(3, 2, 6))  # ours: softmax rows, before dropout
    kept = maps_p != 0
    assert 0.3 < 1 - kept.float().mean().item() < 0.7  # about half dropped
    torch.testing.assert_close(maps_p, maps_o * kept / (1 - p))
    # the returned maps are the ones the output was computed with
    q, k, v = published.qkv(x).reshape(3, 6, 3, 2, 4).permute(2, 0, 3, 1, 4).unbind(0)
    torch.testing.assert_close(out_p, published.proj((maps_p @ v).transpose(1, 2).reshape(3, 6, 8)))
    ours.eval(), published.eval()  # eval mode: no dropout, the same maps
    torch.testing.assert_close(published(x, need_weights=True)[1], ours(x, need_weights=True)[1])


def test_attention_maps_after_dropout_change_nothing_at_dropout_0():
    from odevit import ODEViT

    kw = dict(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=8, num_heads=2, num_steps=4)
    torch.manual_seed(0)
    ours = ODEViT(**kw).train()
    published = ODEViT(**kw, attn_maps_after_dropout=True).train()
    published.load_state_dict(ours.state_dict())
    assert published.field.attn.maps_after_dropout and not ours.field.attn.maps_after_dropout
    x = torch.randn(2, 1, 8, 8)
    a, b = ours.forward_trajectory(x, return_attn=True), published.forward_trajectory(x, return_attn=True)
    for m, n in zip(a["attn"], b["attn"]):
        torch.testing.assert_close(m, n, rtol=0, atol=0)
    torch.testing.assert_close(a["logits"], b["logits"], rtol=0, atol=0)


def _tiny_teacher():
    import timm

    torch.manual_seed(0)
    return timm.create_model("vit_tiny_patch16_224", img_size=8, patch_size=4, in_chans=1, embed_dim=16, depth=2,
                             num_heads=2, num_classes=3).eval()


def test_label_free_default_never_reads_labels_and_the_frozen_teacher_head_classifies():
    """The default distill block (ce_weight 0, the paper's MSE + JaSMin): permuted labels give the same loss and the
    same gradients; the head and its norm are the teacher's, frozen. With ce_weight 1 the labels matter."""
    from odevit.repro import config, pipeline

    t = _tiny_teacher()
    cfg = config.parse("distill", dict(num_steps=4))
    assert cfg.ce_weight == 0.0
    torch.manual_seed(1)
    s = pipeline.build_student(t, cfg)
    assert not any(p.requires_grad for m in (s.head, s.norm) for p in m.parameters())
    torch.testing.assert_close(s.head.weight, t.head.weight)
    x, y = torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 0])
    out = s.forward_trajectory(x)
    torch.testing.assert_close(out["logits"], t.head(t.norm(out["states"][-1][:, 0])))  # the teacher's head and norm

    def loss_and_grads(c, labels):
        s.zero_grad()
        loss, parts = pipeline.distill(t, [2, 4], c)(s, x, labels, 0)
        loss.backward()
        return loss.item(), parts, [p.grad.clone() for p in s.parameters() if p.requires_grad]

    l1, parts, g1 = loss_and_grads(cfg, y)
    l2, _, g2 = loss_and_grads(cfg, y.flip(0))
    assert "ce" not in parts and set(parts) == {"mse", "jasmin"} and l1 == l2
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    ce = config.merged(cfg, ce_weight=1.0)
    assert loss_and_grads(ce, y)[0] != loss_and_grads(ce, y.flip(0))[0]


def _distill_case():
    from odevit.repro import config, pipeline

    t = _tiny_teacher()
    cfg = config.parse("distill", dict(num_steps=4, ce_weight=1.0, label_smoothing=0.0))
    torch.manual_seed(1)
    return t, pipeline.build_student(t, cfg), cfg, torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 0])


def test_the_objective_is_the_weighted_sum_of_the_registered_terms_in_order():
    """MSE + JaSMin + CE at weights 0.5, 2, 0.25: the loss is, bit for bit, the sum in TERMS' order of weight x the
    loss functions called by hand; the logged parts are the unweighted terms."""
    from odevit.repro import config, pipeline

    t, s, cfg, x, y = _distill_case()
    cfg = config.merged(cfg, mse_weight=0.5, jasmin_weight=2.0, ce_weight=0.25)
    assert list(losses.active_terms(cfg)) == ["mse", "jasmin", "ce"]
    loss, parts = pipeline.distill(t, [2, 4], cfg)(s, x, y, 0)
    out = s.forward_trajectory(x, return_attn=True)
    from odevit.teacher import hidden_states

    mse = trajectory_mse(out["states"], hidden_states(t, x), [2, 4])
    js = jasmin(out["attn"], k=cfg.jasmin_k)
    ce = torch.nn.functional.cross_entropy(out["logits"].float(), y)
    torch.testing.assert_close(loss, 0.5 * mse + 2.0 * js + 0.25 * ce, rtol=0, atol=0)
    assert list(parts) == ["mse", "jasmin", "ce"]
    torch.testing.assert_close(parts["ce"], ce, rtol=0, atol=0)
    # the curriculum: before ce_from_epoch the CE term is left out of the sum and the log
    late = config.merged(cfg, ce_from_epoch=3)
    assert list(pipeline.distill(t, [2, 4], late)(s, x, y, 2)[1]) == ["mse", "jasmin"]
    assert list(pipeline.distill(t, [2, 4], late)(s, x, y, 3)[1]) == ["mse", "jasmin", "ce"]


def test_a_new_term_is_one_registered_function_and_one_config_field(monkeypatch):
    """How a new loss is added (docs/pipeline.md, "Which module a newcomer opens"): a `@losses.term` function and its weight in the distill config
    (here a subclass stands in for the new field of config.Distill). pipeline.py is not touched: at weight 0 the
    loss is the same as without the term; at weight 0.5 it adds 0.5 x the term, logged under its name, with a
    gradient."""
    import dataclasses

    from odevit.repro import config, pipeline

    monkeypatch.setattr(losses, "TERMS", dict(losses.TERMS))  # the registration is undone after the test

    @losses.term("cls_norm", weight="cls_norm_weight")
    def cls_norm(i, cfg):  # the mean squared norm of the final CLS state
        return i.states[-1][:, 0].pow(2).sum(-1).mean()

    @dataclasses.dataclass
    class WithNorm(config.Distill):
        cls_norm_weight: float = 0.0

    t, s, cfg, x, y = _distill_case()
    base = dataclasses.asdict(cfg)
    without, parts0 = pipeline.distill(t, [2, 4], WithNorm(**base))(s, x, y, 0)
    assert "cls_norm" not in parts0
    with_it, parts = pipeline.distill(t, [2, 4], WithNorm(**base, cls_norm_weight=0.5))(s, x, y, 0)
    norm = s.forward_trajectory(x)["states"][-1][:, 0].pow(2).sum(-1).mean()
    assert list(parts) == ["mse", "jasmin", "ce", "cls_norm"]
    torch.testing.assert_close(parts["cls_norm"], norm)
    torch.testing.assert_close(with_it, without + 0.5 * norm)
    with_it.backward()
    assert s.field.attn.qkv.weight.grad.abs().sum() > 0
    # the config's check refuses a negative weight of any registered term
    with pytest.raises(config.ConfigError, match=r"distill.mse_weight = -1.0 must be >= 0"):
        config.parse("distill", {"mse_weight": -1.0})
    # a term whose field the config lacks: one error naming both, when the objective is built (before any training)
    with pytest.raises(ValueError, match=r"term 'cls_norm': the config has no field 'cls_norm_weight'"):
        pipeline.distill(t, [2, 4], cfg)
    with pytest.raises(ValueError, match="'cls_norm' is already registered"):
        losses.term("cls_norm", weight="cls_norm_weight")(cls_norm)

    # a term that reads the teacher's attention map: the pipeline no longer caches the teacher's CLS states for it
    from odevit.repro import pipeline

    @losses.term("t_map", weight="t_map_weight", teacher_attn=True)
    def t_map(i, cfg):
        return i.teacher_attn.float().mean()

    @dataclasses.dataclass
    class WithMap(WithNorm):
        t_map_weight: float = 0.0

    assert pipeline.cache_usable(WithMap(**base)) and losses.wider_than_cls(WithMap(**base)) == []
    on = WithMap(**base, t_map_weight=1.0)
    assert not pipeline.cache_usable(on) and losses.wider_than_cls(on) == ["t_map"]
    loss, parts = pipeline.distill(t, [2, 4], on)(s, x, y, 0)  # the teacher per batch, its last map computed
    assert list(parts) == ["mse", "jasmin", "ce", "t_map"] and torch.isfinite(loss)
    with pytest.raises(ValueError, match=r"the terms \['t_map'\] need more"):
        pipeline.distill(t, [2, 4], on, cache=torch.zeros(4, 2, 16))


def test_every_registered_term_reads_fields_the_distill_config_has_and_presets_may_switch():
    from odevit.repro import config

    fields = {f.name for f in dataclasses.fields(config.Distill)}
    for name, t in losses.TERMS.items():
        for f in filter(None, (t.weight, t.from_epoch)):
            assert f in fields and f in config.SWITCH_KEYS, (name, f)


def test_the_teacher_cache_is_refused_for_terms_that_need_more_than_cls_states(monkeypatch):
    from odevit.repro import config, pipeline

    t, _, cfg, _, _ = _distill_case()
    cache = torch.zeros(4, 2, 16)
    with pytest.raises(ValueError, match=r"the terms \['attn_l1'\] need more"):
        pipeline.distill(t, [2, 4], config.merged(cfg, attn_l1_weight=0.5), cache=cache)
    with pytest.raises(ValueError, match=r"the terms \['mse'\] need more"):
        pipeline.distill(t, [2, 4], config.merged(cfg, mse_tokens="all"), cache=cache)
    pipeline.distill(t, [2, 4], cfg, cache=cache)  # CLS states: the cache stands in
    assert pipeline.cache_usable(cfg) and not pipeline.cache_usable(config.merged(cfg, attn_l1_weight=0.5))
    assert not pipeline.cache_usable(config.merged(cfg, mse_tokens="all"))
    assert not pipeline.cache_usable(config.merged(cfg, augment=True))
    monkeypatch.setattr(losses, "TERMS", {k: v for k, v in losses.TERMS.items() if not v.always})  # no MSE
    with pytest.raises(ValueError, match=r"switches on none of the terms \['jasmin', 'attn_l1', 'ce'\]"):
        losses.active_terms(config.merged(cfg, jasmin_weight=0.0, ce_weight=0.0))
