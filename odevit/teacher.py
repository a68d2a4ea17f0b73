"""Teacher plug-in: any timm VisionTransformer is a teacher; its hidden states are the points the ODE passes through.

    teacher = create_teacher("vit_base_patch16_224.dino", num_classes=10, weights_file="dino.pth")
    hs = hidden_states(teacher, x)          # [h_0, ..., h_L], each (B, 1+M, D): CLS + patches, pre-final-norm
    student = student_from_teacher(teacher, num_steps=35, mlp_ratio=1.0)
"""
from __future__ import annotations

import os
import pickle
from typing import Any, Dict, Iterable, List, Optional
from urllib.request import Request, urlopen

import timm
import torch
import torch.nn as nn
from timm.models.vision_transformer import VisionTransformer

from .model import ODEViT

# what student_from_teacher can copy, and what the paper freezes by default
COPYABLE = ("patch_embed", "cls_token", "pos_embed", "reg_token", "norm", "head")
PAPER_FREEZE = ("patch_embed", "cls_token", "norm", "head")


def create_teacher(
    name: str, num_classes: int, pretrained: bool = False, weights_file: Optional[str] = None, **kwargs: Any
) -> VisionTransformer:
    """A timm ViT; pretrained weights from the hub, or from a local file (timm's pretrained_cfg_overlay=dict(file=...)).

    A file's classifier is kept when it has `num_classes` outputs (a trained teacher); otherwise (a backbone such as
    DINO, or another label set) timm drops it and the head starts fresh.
    """
    if pretrained and weights_file is None:
        check_hub_reachable(name)
    if weights_file is not None:
        if not os.path.isfile(weights_file):
            raise FileNotFoundError(_missing_file_message(name, weights_file))
        overlay = dict(file=os.path.abspath(weights_file))
        head = _file_head_classes(weights_file)
        if head == num_classes:
            overlay["num_classes"] = num_classes
        kwargs["pretrained_cfg_overlay"] = overlay
        pretrained = True
    try:
        model = timm.create_model(name, pretrained=pretrained, num_classes=num_classes, **kwargs)
    except (OSError, ConnectionError) as e:  # huggingface_hub's errors derive from these
        if weights_file is not None or not pretrained:
            raise
        raise TeacherWeightsError(_offline_message(name, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")) from None
    if not isinstance(model, VisionTransformer):
        raise TypeError(f"teacher.name: '{name}' is a {type(model).__name__}, not a timm VisionTransformer")
    return model


class TeacherWeightsError(RuntimeError):
    """Pretrained teacher weights cannot be had (hub unreachable, or a weights file that is not a state dict)."""


def _missing_file_message(name: str, path: str) -> str:
    """What file to put where: the weights of `name` as timm's pretrained cfg names them (hub id, original URL)."""
    cfg = timm.models.get_pretrained_cfg(name)
    where = [f"https://huggingface.co/{cfg.hf_hub_id} (file {cfg.hf_hub_filename or 'model.safetensors'})"
             if cfg is not None and cfg.hf_hub_id else "", cfg.url if cfg is not None and cfg.url else ""]
    where = " or ".join(w for w in where if w)
    src = (f": {where}; on a machine with network, timm.create_model('{name}', pretrained=True) puts it in the "
           "Hugging Face cache (~/.cache/huggingface/hub)" if where else
           f" (timm knows no download for '{name}': a .safetensors or state-dict .pth of that architecture)")
    return (f"teacher.weights_file: '{path}' does not exist ({os.path.abspath(path)}). Put the weights of '{name}' "
            f"there{src}")


def _offline_message(name: str, why: str) -> str:
    return (f"teacher.pretrained: true needs the weights of '{name}' from the hub, which cannot be fetched from here "
            f"({why}): download them where there is network and set teacher.weights_file: PATH (.safetensors or a "
            "state-dict .pth)")


def check_hub_reachable(name: str, timeout: float = 5.0) -> None:
    """Within a few `timeout`s: the pretrained weights of `name` are in the local hub cache, or the hub serves them
    (a HEAD request for the file, as the hub client makes: a proxy that answers everything does not count).
    Otherwise TeacherWeightsError with one line telling the user to set teacher.weights_file, instead of the hub
    client's minute of retries and its traceback."""
    cfg = timm.models.get_pretrained_cfg(name)
    if cfg is None:
        raise TeacherWeightsError(f"teacher.name: '{name}' has no pretrained weights in timm (pretrained: false, or "
                                  "teacher.weights_file)")
    if cfg.file and os.path.isfile(cfg.file):
        return
    files = ("model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin")
    if cfg.hf_hub_id:
        from huggingface_hub import get_hf_file_metadata, hf_hub_url, try_to_load_from_cache

        repo, _, rev = cfg.hf_hub_id.partition("@")
        if any(isinstance(try_to_load_from_cache(repo, f, revision=rev or None), str) for f in files):
            return
        why = ""
        for f in files[:2]:
            try:
                get_hf_file_metadata(hf_hub_url(repo, f, revision=rev or None), timeout=timeout)
                return
            except Exception as e:  # offline, DNS, timeout, proxy refusal, 404: all mean "not from here"
                why = why or f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
        raise TeacherWeightsError(_offline_message(name, why))
    if not cfg.url:
        raise TeacherWeightsError(f"teacher.name: '{name}' has no weights source in timm: set teacher.weights_file")
    try:
        with urlopen(Request(cfg.url, method="HEAD"), timeout=timeout) as r:
            if r.status < 400:
                return
            why = f"HTTP {r.status}"
    except Exception as e:
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
    raise TeacherWeightsError(_offline_message(name, why))


def architecture(name: str) -> Dict[str, Any]:
    """The shape timm's `name` builds (no weights, no memory: built on the meta device): patch_size, embed_dim,
    depth, num_heads, mlp_ratio. Raises ValueError for an unknown name or a model that is not a timm ViT."""
    try:
        with torch.device("meta"):
            m = timm.create_model(name, pretrained=False)
    except RuntimeError as e:
        raise ValueError(f"teacher.name: '{name}' is not a timm model ({str(e).splitlines()[0]})") from None
    if not isinstance(m, VisionTransformer):
        raise ValueError(f"teacher.name: '{name}' is a {type(m).__name__}, not a timm VisionTransformer")
    blk = m.blocks[0]
    return dict(patch_size=m.patch_embed.patch_size[0], embed_dim=m.embed_dim, depth=len(m.blocks),
                num_heads=blk.attn.num_heads, mlp_ratio=blk.mlp.fc1.out_features / m.embed_dim)


def _file_head_classes(path: str) -> Optional[int]:
    """Outputs of the classifier stored in a weights file (None if it has none)."""
    if path.endswith(".safetensors"):
        from safetensors import safe_open

        with safe_open(path, "pt") as f:
            return f.get_slice("head.weight").get_shape()[0] if "head.weight" in f.keys() else None
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError:
        raise TeacherWeightsError(f"teacher.weights_file: '{path}' refused: it holds pickled objects or code, not "
                                  "just tensors (weights_only=True); save model.state_dict() or a .safetensors file") from None
    except (RuntimeError, EOFError, ValueError) as e:
        raise TeacherWeightsError(f"teacher.weights_file: '{path}' is not a torch state dict or safetensors file "
                                  f"({str(e).splitlines()[0][:120]})") from None
    if not isinstance(sd, dict):
        raise TeacherWeightsError(f"teacher.weights_file: '{path}' holds a {type(sd).__name__}, not a state dict")
    sd = sd.get("state_dict", sd.get("model", sd))
    w = sd.get("head.weight")
    return None if w is None else int(w.shape[0])


def _student_layout(t: VisionTransformer, x: torch.Tensor) -> torch.Tensor:
    """(B, prefix + M, D) in timm's order [CLS, regs, patches] -> (B, 1 + M, D) = [CLS, patches]."""
    return torch.cat([x[:, :1], x[:, t.num_prefix_tokens :]], dim=1)


def hidden_states(teacher: VisionTransformer, x: torch.Tensor) -> List[torch.Tensor]:
    """h_0 (embedding) .. h_L (block outputs, before the final norm), each (B, 1 + M, D); registers dropped."""
    if teacher.cls_token is None:
        raise ValueError("teacher: needs a class token (timm class_token=True)")
    h0 = teacher.norm_pre(teacher.patch_drop(teacher._pos_embed(teacher.patch_embed(x))))
    inter = teacher.forward_intermediates(
        x, indices=len(teacher.blocks), norm=False, output_fmt="NLC", intermediates_only=True, return_prefix_tokens=True
    )
    hs = [_student_layout(teacher, h0)]
    for spatial, prefix in inter:  # prefix: (B, 1 + R, D), spatial: (B, M, D)
        hs.append(torch.cat([prefix[:, :1], spatial], dim=1))
    return hs


@torch.no_grad()
def last_attention(teacher: VisionTransformer, x: torch.Tensor) -> torch.Tensor:
    """Attention maps (B, H, 1+M, 1+M) of the teacher's last block, registers dropped (for attention-L1 / figures)."""
    captured = {}
    blk = teacher.blocks[-1]
    attn = blk.attn

    def hook(mod: nn.Module, inp: Any, out: Any) -> None:
        y = inp[0]
        B, T, D = y.shape
        qkv = mod.qkv(y).reshape(B, T, 3, mod.num_heads, D // mod.num_heads).permute(2, 0, 3, 1, 4)
        q, k, _ = qkv.unbind(0)
        q, k = mod.q_norm(q), mod.k_norm(k)
        captured["a"] = ((q * mod.scale) @ k.transpose(-2, -1)).softmax(-1)

    h = attn.register_forward_hook(hook)
    try:
        teacher.forward_features(x)
    finally:
        h.remove()
    a = captured["a"]
    keep = torch.cat([torch.arange(1), torch.arange(teacher.num_prefix_tokens, a.shape[-1])]).to(a.device)
    return a[:, :, keep][:, :, :, keep]


@torch.no_grad()
def load_block_(student: ODEViT, block: nn.Module) -> ODEViT:
    """Load a timm ViT `Block`'s norm1/attn/norm2/mlp into the student's field (names match one-to-one)."""
    sd = {k: v for k, v in block.state_dict().items() if k.split(".")[0] in ("norm1", "attn", "norm2", "mlp")}
    missing, unexpected = student.field.load_state_dict(sd, strict=False)
    if missing or unexpected:
        raise ValueError(f"block does not match the student field: missing {missing}, unexpected {unexpected}")
    return student


def student_from_teacher(
    teacher: VisionTransformer,
    num_steps: int = 35,
    mlp_ratio: float = 4.0,
    copy: Iterable[str] = COPYABLE,
    freeze: Iterable[str] = PAPER_FREEZE,
    horizon: Optional[float] = None,
    **kwargs: Any,
) -> ODEViT:
    """An ODEViT of the teacher's width that starts where the teacher starts.

    Copies (tensor copies, never shared Parameters) the named parts: patch embedding (weight AND bias), CLS token,
    position embedding (own trainable copy), register tokens, final norm (as the head norm) and head; freezes the
    parts named in `freeze`. The horizon defaults to the teacher depth L (one unit of time per layer).
    """
    copy, freeze = tuple(copy), tuple(freeze)
    for k in copy + freeze:
        if k not in COPYABLE:
            raise ValueError(f"student copy/freeze: '{k}' is not one of {list(COPYABLE)}")
    if teacher.cls_token is None:
        raise ValueError("teacher: needs a class token (timm class_token=True)")
    D = teacher.embed_dim
    R = teacher.num_reg_tokens
    pe = teacher.patch_embed
    student = ODEViT(
        img_size=pe.img_size[0],
        patch_size=pe.patch_size[0],
        in_chans=pe.proj.in_channels,
        num_classes=teacher.num_classes,
        embed_dim=D,
        num_heads=teacher.blocks[0].attn.num_heads,
        mlp_ratio=mlp_ratio,
        num_steps=num_steps,
        horizon=float(len(teacher.blocks)) if horizon is None else horizon,
        reg_tokens=kwargs.pop("reg_tokens", R),
        head_norm="norm" in copy and isinstance(teacher.norm, nn.LayerNorm),
        **kwargs,
    )
    with torch.no_grad():
        if "patch_embed" in copy:
            student.patch_embed.proj.weight.copy_(pe.proj.weight)
            if pe.proj.bias is not None and student.patch_embed.proj.bias is not None:
                student.patch_embed.proj.bias.copy_(pe.proj.bias)
        if "cls_token" in copy:
            student.cls_token.copy_(teacher.cls_token)
        if "pos_embed" in copy and teacher.pos_embed is not None:
            tpe = teacher.pos_embed
            if teacher.no_embed_class:  # patches only; CLS had none
                student.pos_embed[:, 0].zero_()
                student.pos_embed[:, 1 : 1 + student.num_patches].copy_(tpe)
            else:  # [CLS, regs, patches]
                student.pos_embed[:, :1].copy_(tpe[:, :1])
                student.pos_embed[:, 1 : 1 + student.num_patches].copy_(tpe[:, teacher.num_prefix_tokens :])
        if "reg_token" in copy and teacher.reg_token is not None and student.reg_token is not None:
            reg = teacher.reg_token
            if not teacher.no_embed_class and teacher.pos_embed is not None:
                # timm adds a position to its registers; fold it in (the student's registers have none)
                reg = reg + teacher.pos_embed[:, 1 : teacher.num_prefix_tokens]
            student.reg_token.copy_(reg[:, : student.num_reg_tokens])
        if "norm" in copy and isinstance(teacher.norm, nn.LayerNorm):
            student.norm.load_state_dict(teacher.norm.state_dict())
        if "head" in copy and isinstance(teacher.head, nn.Linear):
            student.head.load_state_dict(teacher.head.state_dict())
    parts = {
        "patch_embed": [student.patch_embed], "cls_token": [student.cls_token], "pos_embed": [student.pos_embed],
        "reg_token": [student.reg_token], "norm": [student.norm], "head": [student.head],
    }
    for k in freeze:
        for p in parts[k]:
            if p is None:
                continue
            for q in p.parameters() if isinstance(p, nn.Module) else [p]:
                q.requires_grad_(False)
    return student
