"""examples/distill_step.py: one distillation training step with odevit's public API. Its loss is the pipeline's
(odevit.repro.pipeline.distill) on the same model and batch; a teacher from a local weights file gives the run
that the same weights built in memory give; a missing file names itself and where to get the weights."""
import importlib.util
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import odevit
from odevit.repro import config, pipeline

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("distill_step", ROOT / "examples" / "distill_step.py")
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


def _pair(seed: int = 0):
    torch.manual_seed(seed)
    teacher = odevit.create_teacher("vit_tiny_patch16_224", num_classes=10, img_size=32, patch_size=8, depth=3).eval()
    return teacher, odevit.student_from_teacher(teacher, num_steps=6, mlp_ratio=1.0)


@pytest.mark.parametrize("ce_weight", [0.0, 1.0])
def test_example_loss_is_the_pipelines_objective(ce_weight):
    teacher, student = _pair()
    x, y = torch.randn(4, 3, 32, 32), torch.randint(10, (4,))
    checkpoints = example.schedule(teacher, [x], num_steps=6, tau=3.0)
    assert len(checkpoints) == 3 and checkpoints[-1] == 6
    ours = example.distill_loss(student, teacher, x, checkpoints, y, ce_weight=ce_weight)
    cfg = config.Distill(ce_weight=ce_weight, label_smoothing=0.0)  # the example's: MSE + JaSMin (+ CE), no smoothing
    theirs, parts = pipeline.distill(teacher, checkpoints, cfg)(student, x, y, epoch=0)
    torch.testing.assert_close(ours["loss"], theirs, rtol=0, atol=0)
    assert ours["mse"].item() == parts["mse"] and ours["jasmin"].item() == parts["jasmin"]
    assert ("ce" in ours) == (ce_weight > 0)
    ours["loss"].backward()  # the gradient reaches the shared field
    assert student.field.mlp.fc1.weight.grad.abs().sum() > 0


def test_example_runs_from_a_local_weights_file_as_from_memory(tmp_path, capsys):
    args = ["--img-size", "32", "--patch-size", "8", "--depth", "4", "--steps", "2"]
    in_memory = example.main(args)
    torch.manual_seed(0)  # the teacher main() builds first, from the same seed
    t = odevit.create_teacher("vit_tiny_patch16_224", num_classes=10, img_size=32, patch_size=8, depth=4)
    path = tmp_path / "teacher.safetensors"
    save_file({k: v.contiguous() for k, v in t.state_dict().items()}, str(path))
    from_file = example.main(args + ["--weights-file", str(path)])
    assert from_file == in_memory and all(torch.isfinite(torch.tensor(v)) for v in from_file.values())
    assert "checkpoints c_1..c_L" in capsys.readouterr().out


def test_missing_weights_file_says_what_to_put_where(tmp_path):
    missing = tmp_path / "dino_vitb16.pth"
    with pytest.raises(FileNotFoundError, match=r"dino_vitb16\.pth.*does not exist.*huggingface\.co/timm/vit_base_patch16_224\.dino"):
        example.main(["--teacher", "vit_base_patch16_224.dino", "--weights-file", str(missing)])
