"""Teacher plug-in: hidden states, what student_from_teacher copies and freezes, loading weights from a local file."""
import pytest
import timm
import torch

from odevit import create_teacher, hidden_states, last_attention, student_from_teacher


def small_vit(**kw):
    args = dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=5)
    return timm.create_model("vit_tiny_patch16_224", **dict(args, **kw)).eval()


def test_hidden_states_match_manual_forward():
    torch.manual_seed(0)
    t = small_vit()
    x = torch.randn(2, 3, 32, 32)
    hs = hidden_states(t, x)
    assert len(hs) == 4 and all(h.shape == (2, 17, 32) for h in hs)
    y = t._pos_embed(t.patch_embed(x))
    torch.testing.assert_close(hs[0], y)
    for blk, h in zip(t.blocks, hs[1:]):
        y = blk(y)
        torch.testing.assert_close(h, y)  # pre-final-norm block outputs
    torch.testing.assert_close(t.forward_head(t.norm(y)), t(x))


def test_hidden_states_drop_teacher_registers():
    torch.manual_seed(0)
    t = small_vit(reg_tokens=2)
    x = torch.randn(1, 3, 32, 32)
    hs = hidden_states(t, x)
    assert hs[1].shape == (1, 17, 32)
    full = t.blocks[0](t._pos_embed(t.patch_embed(x)))  # [CLS, reg, reg, patches]
    torch.testing.assert_close(hs[1][:, 0], full[:, 0])
    torch.testing.assert_close(hs[1][:, 1:], full[:, 3:])
    assert last_attention(t, x).shape == (1, 2, 17, 17)


@pytest.mark.parametrize("regs", [0, 2])
def test_student_copies_and_freezes_what_paper_says(regs):
    torch.manual_seed(0)
    t = small_vit(reg_tokens=regs)
    s = student_from_teacher(t, num_steps=6, mlp_ratio=1.0)
    assert s.embed_dim == 32 and s.horizon == 3.0 and s.num_reg_tokens == regs
    assert torch.equal(s.patch_embed.proj.weight, t.patch_embed.proj.weight)
    assert torch.equal(s.patch_embed.proj.bias, t.patch_embed.proj.bias)
    assert torch.equal(s.cls_token, t.cls_token)
    assert torch.equal(s.norm.weight, t.norm.weight) and torch.equal(s.head.weight, t.head.weight)
    # copies, not shared tensors
    assert s.pos_embed.data_ptr() != t.pos_embed.data_ptr()
    # the student's X(0) is the teacher's h_0 (CLS + patches), registers included where present
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(s.embed(x)[:, :17], hidden_states(t, x)[0])
    if regs:
        full = t._pos_embed(t.patch_embed(x))
        torch.testing.assert_close(s.embed(x)[:, 17:], full[:, 1:1 + regs])
    frozen = {n for n, p in s.named_parameters() if not p.requires_grad}
    assert frozen == {"patch_embed.proj.weight", "patch_embed.proj.bias", "cls_token", "norm.weight", "norm.bias",
                      "head.weight", "head.bias"}


def test_student_copy_and_freeze_are_configurable():
    torch.manual_seed(0)
    t = small_vit()
    s = student_from_teacher(t, num_steps=4, copy=("patch_embed",), freeze=())
    assert torch.equal(s.patch_embed.proj.weight, t.patch_embed.proj.weight)
    assert not torch.equal(s.cls_token, t.cls_token)
    assert not torch.equal(s.head.weight, t.head.weight)
    assert isinstance(s.norm, torch.nn.Identity)  # published: head on the raw final CLS
    assert all(p.requires_grad for p in s.parameters())
    with pytest.raises(ValueError, match="'blocks' is not one of"):
        student_from_teacher(t, freeze=("blocks",))


def test_teacher_from_local_weights_file(tmp_path):
    torch.manual_seed(1)
    src = small_vit()
    path = tmp_path / "teacher.pth"
    torch.save(src.state_dict(), path)
    t = create_teacher("vit_tiny_patch16_224", num_classes=5, weights_file=str(path), img_size=32, patch_size=8,
                       embed_dim=32, depth=3, num_heads=2).eval()
    for (n, a), (_, b) in zip(src.state_dict().items(), t.state_dict().items()):
        assert torch.equal(a, b), n
    with pytest.raises(FileNotFoundError, match="teacher.weights_file: '.*missing.pth' does not exist"):
        create_teacher("vit_tiny_patch16_224", num_classes=5, weights_file=str(tmp_path / "missing.pth"))


def test_backbone_file_without_head_gets_fresh_head(tmp_path):
    torch.manual_seed(2)
    src = small_vit(num_classes=0)  # e.g. DINO weights: no classifier
    path = tmp_path / "backbone.pth"
    torch.save(src.state_dict(), path)
    t = create_teacher("vit_tiny_patch16_224", num_classes=5, weights_file=str(path), img_size=32, patch_size=8,
                       embed_dim=32, depth=3, num_heads=2)
    assert torch.equal(t.blocks[2].mlp.fc2.weight, src.blocks[2].mlp.fc2.weight)
    assert t.head.weight.shape == (5, 32)


def test_weights_file_with_pickled_code_is_refused_clearly(tmp_path):
    """A .pth that carries a callable (pickled code) is refused with the file's name, not an unpickling traceback."""
    import os

    from odevit.teacher import TeacherWeightsError

    path = tmp_path / "evil.pth"
    torch.save({"head.weight": torch.zeros(5, 32), "hook": os.getcwd}, path)
    with pytest.raises(TeacherWeightsError, match=r"teacher.weights_file: '.*evil.pth' refused: it holds pickled"):
        create_teacher("vit_tiny_patch16_224", num_classes=5, weights_file=str(path), img_size=32, patch_size=8,
                       embed_dim=32, depth=3, num_heads=2)


def test_pretrained_without_network_fails_fast_with_one_line(tmp_path):
    """Hub unreachable (an endpoint that never answers) and an empty hub cache: one line naming
    teacher.weights_file within 30 s, from create_teacher and from the stage's params check."""
    import os
    import subprocess
    import sys
    import time

    import yaml

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout under test, whatever is installed
    env = dict(os.environ, HF_ENDPOINT="http://10.255.255.1", HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1",
               PYTHONPATH=root)
    params = yaml.safe_load(open(os.path.join(os.path.dirname(__file__), "..", "params.yaml")))
    params["teacher"].update(name="vit_small_patch16_224.dino", pretrained=True, patch_size=None, embed_dim=None,
                             depth=None, num_heads=None, mlp_ratio=None)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    code = "from odevit import create_teacher; create_teacher('vit_small_patch16_224.dino', 10, pretrained=True)"
    # the two at once (each mostly waits on the unreachable endpoint), both timed from their common start
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for cmd in ([sys.executable, "-c", code], [sys.executable, "-m", "odevit.repro.config", "02_teacher"])]
    try:
        lib_err, stage_err = (p.communicate(timeout=60)[1] for p in procs)
    finally:  # as subprocess.run's timeout does: a child that hangs is not left running
        for p in procs:
            p.kill()
    assert time.perf_counter() - t0 < 30
    lib, stage = procs
    assert lib.returncode != 0 and "set teacher.weights_file" in lib_err.strip().splitlines()[-1], lib_err[-500:]
    assert stage.returncode == 2 and len(stage_err.strip().splitlines()) == 1, stage_err[-500:]
    assert "teacher.weights_file" in stage_err


def test_teacher_name_fixes_the_architecture():
    """teacher.name builds its own shape; a shape key that disagrees is an error, never a silent mix (a DINO name
    with the default block's D 128 / patch 7 once built a 1024-patch model that was OOM-killed)."""
    from odevit.repro.config import ConfigError, parse, resolve_teacher

    dino = dict(name="vit_base_patch16_224.dino", pretrained=False)
    with pytest.raises(ConfigError, match=r"teacher.embed_dim = 128 disagrees with teacher.name "
                                          r"'vit_base_patch16_224.dino' \(embed_dim 768\)"):
        resolve_teacher(parse("teacher", dict(dino, embed_dim=128, patch_size=None)))
    with pytest.raises(ConfigError, match=r"teacher.patch_size = 7 disagrees"):
        resolve_teacher(parse("teacher", dino))  # the default block's shape under a DINO name
    shapes = dict(patch_size=None, embed_dim=None, depth=None, num_heads=None, mlp_ratio=None)
    t = resolve_teacher(parse("teacher", dict(dino, **shapes)))
    assert (t.patch_size, t.embed_dim, t.depth, t.num_heads, t.mlp_ratio) == (16, 768, 12, 12, 4.0)
    assert resolve_teacher(parse("teacher", {})).embed_dim == 128  # the default name and its restated shape agree
    with pytest.raises(ConfigError, match=r"teacher.name = null builds the ViT the shape keys describe: set "
                                          r"teacher.depth"):
        resolve_teacher(parse("teacher", dict(name=None, depth=None)))
    with pytest.raises(ConfigError, match="is not a timm model"):
        resolve_teacher(parse("teacher", dict(name="no_such_vit", **shapes)))
