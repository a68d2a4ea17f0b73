"""Published weights, travelling with the repository (offline), in weights/v2:

    import timm, odevit
    # plan v2's teacher and its 55k students, the seed with the best validation Acc@1 per cell
    student = timm.create_model("odevit_small_patch7_28.fmnist_v2_distill", pretrained=True)
    teacher = odevit.create_teacher("odevit_teacher_patch7_28.fmnist_v2", num_classes=10, pretrained=True)

The retired tags (the quick run's .fmnist, .fmnist_distill, .fmnist_free; plan 1's .fmnist55k_*, .fmnist_strong) load
from the git tag retired-plan1-quick-exploratory, not from main (docs/history.md).

`python -m odevit.repro.weights --publish` writes FOLDER/TAG.safetensors (weights
only, no optimiser state) and FOLDER/manifest.json: per tag the file's sha256 and size, the architecture and its
constructor arguments, the checkpoint, cell and seed it came from, the data it was evaluated on and the metrics of
that run (which loading the tag must reproduce: `python -m odevit.repro.weights TAG`). A missing or altered file is
refused with its name and the checksum the manifest expects.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, List, Optional, Tuple

import timm
import torch
import torch.nn as nn
from safetensors.torch import load_file
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._builder import resolve_pretrained_cfg
from timm.models.vision_transformer import VisionTransformer, checkpoint_filter_fn

from .model import ODEViT, build, getter_features

# (channels, image size, classes, mean, std) of the datasets the published weights were trained on; a copy of
# odevit.repro.data.INFO's rows (the layer never imports the lab; tests/test_layout.py checks they agree)
DATA_INFO = {'fashion_mnist': (1, 28, 10, (0.286,), (0.353,)),
             'cifar10': (3, 32, 10, (0.4914, 0.4822, 0.4465), (0.247, 0.2435, 0.2616))}

WEIGHTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "weights")
MANIFEST = "manifest.json"

# the registered architectures: exactly the default run's teacher and student (params.yaml's defaults)
STUDENT_ARCH, TEACHER_ARCH = "odevit_small_patch7_28", "odevit_teacher_patch7_28"
STUDENT_KWARGS: Dict[str, Any] = dict(
    img_size=28, patch_size=7, in_chans=1, num_classes=10, embed_dim=128, num_heads=4, mlp_ratio=1.0, num_steps=12,
    horizon=6.0, solver="lie_trotter", norm="centernorm", bias=False, reg_tokens=0, pos_embed_reg=False,
    head_norm=True, attn_drop=0.0, proj_drop=0.0, mlp_drop=0.0)
TEACHER_KWARGS: Dict[str, Any] = dict(
    img_size=28, patch_size=7, in_chans=1, num_classes=10, embed_dim=128, depth=6, num_heads=4, mlp_ratio=4.0)
ARCH_KWARGS = {STUDENT_ARCH: STUDENT_KWARGS, TEACHER_ARCH: TEACHER_KWARGS}
# the default teacher at CIFAR's shape (presets/cifar10_cpu.yaml), no published weights
CIFAR_TEACHER_ARCH = "odevit_teacher_patch4_32"
CIFAR_TEACHER_KWARGS: Dict[str, Any] = dict(TEACHER_KWARGS, img_size=32, patch_size=4, in_chans=3)
# the folder of weights/: the plan's tags (`python -m odevit.repro.weights --publish`, on the machine that trained its runs)
V2 = "v2"
FOLDERS = (V2,)
# tag -> (architecture, what it is, folder)
TAGS = {
    f"{TEACHER_ARCH}.fmnist_v2": (
        TEACHER_ARCH, "plan v2's teacher: 40 epochs with augmentation, the seed selected on validation (params.yaml)", V2),
    # plan v2's students (params.yaml: publish); one whose cell is still training is listed in weights/v2's manifest
    # as pending, and loading it says so
    f"{STUDENT_ARCH}.fmnist_v2_distill": (
        STUDENT_ARCH, "plan v2's distilled student, trajectory loss only, from the v2 teacher (study v2_55k, cell ref)",
        V2),
    f"{STUDENT_ARCH}.fmnist_v2_distill_ce": (
        STUDENT_ARCH, "plan v2's distilled student, trajectory loss + cross-entropy (study v2_55k, cell ce)", V2),
    f"{STUDENT_ARCH}.fmnist_v2_free": (
        STUDENT_ARCH, "plan v2's free ODE: the student's architecture from scratch (study v2_55k, cell free)", V2),
}


class WeightsError(RuntimeError):
    """A published weights file is missing, altered, or was trained with another architecture than its tag's."""


def tag_root(tag: str) -> str:
    """The folder of weights/ that publishes `tag`."""
    if tag not in TAGS:
        raise WeightsError(f"{tag}: not a published tag (published: {sorted(TAGS)})")
    return os.path.join(WEIGHTS_DIR, TAGS[tag][2])


def weights_path(tag: str, root: Optional[str] = None) -> str:
    return os.path.join(root or tag_root(tag), f"{tag}.safetensors")


def _data_cfg(dataset: str) -> Dict[str, Any]:
    """The pretrained-cfg fields of a model for `dataset`'s images, as timm's ViTs have them: a fixed input size
    (`dynamic_img_size=True` takes any), stem and classifier names."""
    c, size, classes, mean, std = DATA_INFO[dataset]
    return {"num_classes": classes, "input_size": (c, size, size), "mean": mean, "std": std, "fixed_input_size": True,
            "first_conv": "patch_embed.proj", "classifier": "head"}


def _cfg(tag: str) -> Dict[str, Any]:
    return {**_data_cfg("fashion_mnist"), "file": weights_path(tag),
            "notes": (f"{TAGS[tag][1]} (Fashion-MNIST); weights/{TAGS[tag][2]}/{MANIFEST} has its checksum, "
                      "source and metrics",)}


default_cfgs = generate_default_cfgs({**{tag: _cfg(tag) for tag in TAGS},
                                      CIFAR_TEACHER_ARCH: {**_data_cfg("cifar10"), "url": ""}})


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(root: Optional[str] = None) -> Dict[str, Any]:
    """A folder's manifest (default: the plan's, weights/v2)."""
    path = os.path.join(root or os.path.join(WEIGHTS_DIR, V2), MANIFEST)
    if not os.path.isfile(path):
        raise WeightsError(f"{path}: missing (python -m odevit.repro.weights --publish writes weights/{V2})")
    with open(path) as f:
        return json.load(f)


def published() -> Dict[str, Dict[str, Any]]:
    """Every published tag's manifest entry, over the folders of weights/ (a folder without a manifest is skipped)."""
    out: Dict[str, Dict[str, Any]] = {}
    for folder in FOLDERS:
        root = os.path.join(WEIGHTS_DIR, folder)
        if os.path.isfile(os.path.join(root, MANIFEST)):
            out.update(read_manifest(root)["weights"])
    return out


def pending() -> Dict[str, str]:
    """Registered tags whose runs are not finished yet (a manifest's `pending`: tag -> why), over the folders."""
    out: Dict[str, str] = {}
    for folder in FOLDERS:
        root = os.path.join(WEIGHTS_DIR, folder)
        if os.path.isfile(os.path.join(root, MANIFEST)):
            out.update(read_manifest(root).get("pending", {}))
    return out


def entry(tag: str, root: Optional[str] = None) -> Dict[str, Any]:
    """The manifest entry of `tag` (its file not checked: see `verify`)."""
    root = root or tag_root(tag)
    m = read_manifest(root)
    entries = m["weights"]
    if tag in m.get("pending", {}):
        raise WeightsError(f"{tag}: not published yet, its runs are still training ({m['pending'][tag]}; "
                           f"{os.path.join(root, MANIFEST)})")
    if tag not in entries:
        raise WeightsError(f"{tag}: not in {os.path.join(root, MANIFEST)} (published: {sorted(entries)})")
    return entries[tag]


def verify(tag: str, root: Optional[str] = None) -> Dict[str, Any]:
    """The manifest entry of `tag` after checking that its file exists with the recorded sha256 and size."""
    root = root or tag_root(tag)
    e = entry(tag, root)
    path = os.path.join(root, e["file"])
    if not os.path.isfile(path):
        raise WeightsError(f"{path}: missing; expected sha256 {e['sha256']} ({e['bytes']} bytes)")
    got = sha256(path)
    if got != e["sha256"]:
        raise WeightsError(f"{path}: sha256 {got} does not match the manifest's {e['sha256']} "
                           "(altered or corrupt file: git checkout weights/, or rerun python -m odevit.repro.weights --publish)")
    return e


def _published(variant: str, kwargs: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """(tag, folder) of a create_model(pretrained=True) call whose weights are one of our published files (the
    registered one, or a copy of weights/ named by pretrained_cfg_overlay=dict(file=...)); else None."""
    cfg = resolve_pretrained_cfg(variant, kwargs.get("pretrained_cfg"), kwargs.get("pretrained_cfg_overlay"))
    tag = f"{variant}.{cfg.tag}" if cfg.tag else None
    if tag in TAGS and cfg.file and os.path.basename(cfg.file) == f"{tag}.safetensors":
        return tag, os.path.dirname(os.path.abspath(cfg.file))
    return None


def _check_arch(variant: str, kwargs: Dict[str, Any]) -> None:
    """Checksum of the file, and the architecture it was trained with equal to the registered one."""
    found = _published(variant, kwargs)
    if found is None:
        return
    tag, root = found
    e = verify(tag, root)
    diff = {k: (e["model_kwargs"].get(k), v) for k, v in ARCH_KWARGS[variant].items() if e["model_kwargs"].get(k) != v}
    if diff:
        raise WeightsError(f"{weights_path(tag, root)}: trained with another architecture than {variant} "
                           f"(file vs architecture: {diff}); load it with odevit.hub.load('{tag}')")


@register_model
def odevit_small_patch7_28(pretrained: bool = False, **kwargs: Any) -> ODEViT:
    """The default run's student (paper's Small recipe, mlp_ratio 1) at Fashion-MNIST's shape: 28x28, patch 7,
    D 128, 4 heads, N 12 steps over T = 6 (the teacher's depth), final LayerNorm before the head. Tags (TAGS):
    plan v2's .fmnist_v2_distill, .fmnist_v2_distill_ce (distilled), .fmnist_v2_free (same architecture from scratch)."""
    if pretrained:
        _check_arch(STUDENT_ARCH, kwargs)
    return build(STUDENT_ARCH, pretrained, **{**STUDENT_KWARGS, **kwargs})


@register_model
def odevit_teacher_patch7_28(pretrained: bool = False, **kwargs: Any) -> VisionTransformer:
    """The default run's discrete teacher: a timm ViT, 28x28, patch 7, D 128, depth 6, 4 heads, mlp_ratio 4.
    Tag .fmnist_v2 (plan v2's teacher, 40 epochs with augmentation)."""
    if pretrained:
        _check_arch(TEACHER_ARCH, kwargs)
    return _teacher_vit(TEACHER_ARCH, pretrained, {**TEACHER_KWARGS, **kwargs})


def _teacher_vit(variant: str, pretrained: bool, kwargs: Dict[str, Any]) -> VisionTransformer:
    """A registered teacher: timm's VisionTransformer with timm's checkpoint filter and features_only support."""
    return build_model_with_cfg(VisionTransformer, variant, pretrained, pretrained_filter_fn=checkpoint_filter_fn,
                                **getter_features(kwargs))


def load(tag: str, root: Optional[str] = None) -> nn.Module:
    """A published model from its manifest entry (architecture rebuilt from the recorded constructor arguments),
    in eval mode — works for any run's weights, registered architecture or not."""
    root = root or tag_root(tag)
    e = verify(tag, root)
    if e["kind"] == "teacher":
        model = timm.create_model(e["builder"], pretrained=False, **e["model_kwargs"])
    else:
        model = ODEViT(**e["model_kwargs"])
    model.load_state_dict(load_file(os.path.join(root, e["file"])))
    return model.eval()


def create(tag: str, root: Optional[str] = None) -> nn.Module:
    """A published model in eval mode: through timm.create_model(tag, pretrained=True) (the path users take) where
    its weights have the registered architecture, else `load(tag)` (both check the file's sha256)."""
    root = root or tag_root(tag)
    if entry(tag, root).get("architecture"):
        return timm.create_model(tag, pretrained=True, pretrained_cfg_overlay=dict(file=weights_path(tag, root))).eval()
    return load(tag, root)


def published_models(cells: List[str], device: torch.device,
                     root: str = os.path.join(WEIGHTS_DIR, V2)) -> Tuple[nn.Module, Dict[Tuple[str, int], nn.Module]]:
    """(teacher, {(cell, seed): student}) of the published weights, for the dynamics analyses without training
    (`dynamics.weights: published`): the students whose study cell is in `cells`, in eval mode on `device`."""
    entries = read_manifest(root)["weights"]
    teachers = [t for t, e in entries.items() if e["kind"] == "teacher"]
    if not teachers:
        raise WeightsError(f"{os.path.join(root, MANIFEST)}: no teacher published")
    models = {(e["cell"], e["seed"]): create(t, root).to(device) for t, e in entries.items()
              if e["kind"] != "teacher" and e["cell"] in cells}
    if not models:
        raise WeightsError(f"{os.path.join(root, MANIFEST)}: none of the cells {cells} is published "
                           f"(published: {sorted({e['cell'] for e in entries.values() if e['cell']})})")
    return create(teachers[0], root).to(device), models


def published_schedule(cell: str, root: str = os.path.join(WEIGHTS_DIR, V2)) -> List[int]:
    """c_1..c_L of a published distilled student of `cell` (its run's checkpoint schedule, from the manifest), for the
    teacher-student analyses of `dynamics.weights: published`: WeightsError naming the manifest if it has none."""
    entries = read_manifest(root)["weights"]
    found = [e.get("schedule") for e in entries.values() if e["kind"] != "teacher" and e["cell"] == cell]
    if not found or not found[0]:
        raise WeightsError(f"{os.path.join(root, MANIFEST)}: no checkpoint schedule for a distilled student of cell "
                           f"'{cell}' (python -m odevit.repro.weights --publish)")
    return [int(c) for c in found[0]]


@register_model
def odevit_teacher_patch4_32(pretrained: bool = False, **kwargs: Any) -> VisionTransformer:
    """The default teacher's width and depth at CIFAR's shape: 32x32, patch 4, D 128, depth 6, 4 heads, mlp_ratio 4
    (presets/cifar10_cpu.yaml). No published weights."""
    return _teacher_vit(CIFAR_TEACHER_ARCH, pretrained, {**CIFAR_TEACHER_KWARGS, **kwargs})
