"""ODE-ViT: a ViT whose encoder is ONE shared, autonomous vector field psi = F + G integrated for N steps.

    X(0) = [CLS, patches, registers] + pos      # registers get no position embedding (as published)
    dX/dt = F(X) + G(X)                         # G = MHA(CenterNorm(X)), F = MLP(CenterNorm(X)), bias-free
    logits = head(norm(X(T)[CLS]))              # norm = Identity, or a frozen copy of a teacher's final norm

N is the number of solver steps; the trajectory has N+1 states (index 0 = X(0)); horizon T (default 12, one unit of
time per teacher layer) gives h = T/N. Any N can be used at evaluation: `forward(x, num_steps=...)`.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional

import torch
import torch.nn as nn
from timm.layers import Mlp, PatchEmbed, trunc_normal_
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model

from .layers import Attention, CenterNorm, make_norm, spectral_init_
from .solvers import get_solver


class ViTField(nn.Module):
    """The shared vector field psi(X) = F(X) + G(X); autonomous (no t). Also a torchdiffeq `func(t, x)`."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 4.0,
        norm: str = "centernorm",
        bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        mlp_drop: float = 0.0,
    ):
        super().__init__()
        self.norm1 = make_norm(norm, dim)  # before G (attention)
        self.attn = Attention(dim, num_heads, bias=bias, attn_drop=attn_drop, proj_drop=proj_drop)
        self.norm2 = make_norm(norm, dim)  # before F (MLP)
        self.mlp = Mlp(dim, int(round(mlp_ratio * dim)), act_layer=nn.GELU, bias=bias, drop=mlp_drop)
        self.attn_maps: Optional[List[torch.Tensor]] = None  # when a list, G appends its (B, H, T, T) maps
        self.fold = True  # fold CenterNorm into Q/K/V and fc1 once per trajectory (see `folded`)
        self._folded: Optional[tuple] = None

    @contextmanager
    def folded(self) -> Iterator[None]:
        """While open, G and F use CenterNorm folded into the next linear map (`CenterNorm.fold_into`), computed
        once and shared by every step: the same function (to rounding), without the per-step normalisation
        passes over (B, T, D). A no-op for LayerNorm (not linear) or `fold = False`."""
        if not (self.fold and isinstance(self.norm1, CenterNorm) and isinstance(self.norm2, CenterNorm)) \
                or self._folded is not None:
            yield
            return
        self._folded = (self.norm1.fold_into(self.attn.qkv), self.norm2.fold_into(self.mlp.fc1))
        try:
            yield
        finally:
            self._folded = None

    def G(self, x: torch.Tensor) -> torch.Tensor:
        need = self.attn_maps is not None
        if self._folded is None:
            out, attn = self.attn(self.norm1(x), need_weights=need)
        else:
            out, attn = self.attn(x, need_weights=need, qkv_weight=self._folded[0])
        if need:
            self.attn_maps.append(attn)
        return out

    def F(self, x: torch.Tensor) -> torch.Tensor:
        if self._folded is None:
            return self.mlp(self.norm2(x))
        m = self.mlp  # timm Mlp: fc1 -> act -> drop1 -> norm -> fc2 -> drop2, with fc1 taking the folded norm
        return m.drop2(m.fc2(m.norm(m.drop1(m.act(nn.functional.linear(x, *self._folded[1]))))))

    def forward(self, t: Any, x: torch.Tensor) -> torch.Tensor:
        return self.F(x) + self.G(x)


class ODEViT(nn.Module):
    """Vision Transformer whose encoder is an ODE with one shared block.

    Args:
        img_size, patch_size, in_chans, num_classes, embed_dim, num_heads, mlp_ratio: as timm's VisionTransformer.
        num_steps: N, solver steps used by default (any N works at call time).
        horizon: T, integration time; h = T / N.
        solver: 'lie_trotter' (paper, default) | 'parallel' (published code) | 'strang' | 'rk4'.
        norm: 'centernorm' (default) | 'layernorm' (ablation).
        bias: biases in Q/K/V/O and the MLP (off in ODE-ViT; on to load a timm block exactly).
        reg_tokens: R register tokens appended after the patches; pos_embed_reg gives them a position embedding.
        head_norm: put a LayerNorm before the head (a frozen copy of a teacher's final norm).
        spectral_init_qkv: spectrally initialise Q/K/V too (paper); False leaves them at xavier-uniform as
            PyTorch's MultiheadAttention does in the published code.
        attn_drop, proj_drop, mlp_drop: dropout rates inside G and F.
    """

    def __init__(
        self,
        img_size: int = 32,
        patch_size: int = 4,
        in_chans: int = 3,
        num_classes: int = 10,
        embed_dim: int = 192,
        num_heads: int = 3,
        mlp_ratio: float = 4.0,
        num_steps: int = 12,
        horizon: float = 12.0,
        solver: str = "lie_trotter",
        norm: str = "centernorm",
        bias: bool = False,
        reg_tokens: int = 0,
        pos_embed_reg: bool = False,
        head_norm: bool = False,
        spectral_init_qkv: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        mlp_drop: float = 0.0,
        **kwargs: Any,  # timm passes pretrained_cfg etc.
    ):
        super().__init__()
        if num_steps < 1:
            raise ValueError(f"num_steps: {num_steps} must be >= 1")
        if horizon <= 0:
            raise ValueError(f"horizon: {horizon} must be > 0")
        if mlp_ratio <= 0:
            raise ValueError(f"mlp_ratio: {mlp_ratio} must be > 0")
        self.num_classes = num_classes
        self.num_features = self.embed_dim = embed_dim
        self.num_steps = num_steps
        self.horizon = float(horizon)
        self.solver_name = solver
        self.solver = get_solver(solver)
        self.num_reg_tokens = reg_tokens
        self.pos_embed_reg = pos_embed_reg

        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.reg_token = nn.Parameter(torch.zeros(1, reg_tokens, embed_dim)) if reg_tokens else None
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + num_patches + (reg_tokens if pos_embed_reg else 0), embed_dim))
        self.field = ViTField(embed_dim, num_heads, mlp_ratio, norm, bias, attn_drop, proj_drop, mlp_drop)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6) if head_norm else nn.Identity()
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        self.init_weights(spectral_init_qkv)

    @torch.no_grad()
    def init_weights(self, spectral_init_qkv: bool = True) -> None:
        """Spectral init (xavier-normal / sigma_max) of every weight matrix, biases zero; tokens trunc-normal 0.02."""
        for t in (self.cls_token, self.pos_embed, self.reg_token):
            if t is not None:
                trunc_normal_(t, std=0.02)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                if m is self.field.attn.qkv:
                    continue
                spectral_init_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
        qkv = self.field.attn.qkv
        if spectral_init_qkv:
            for w in qkv.weight.chunk(3, dim=0):  # W_Q, W_K, W_V each get ||W||_2 = 1
                spectral_init_(w)
        else:
            nn.init.xavier_uniform_(qkv.weight)  # torch.nn.MultiheadAttention's in_proj init
        if qkv.bias is not None:
            nn.init.zeros_(qkv.bias)

    @property
    def num_patches(self) -> int:
        return self.patch_embed.num_patches

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Image (B, C, H, W) -> X(0) (B, 1 + M + R, D)."""
        x = self.patch_embed(x)  # (B, M, D)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # (B, 1+M, D)
        if self.reg_token is None:
            return x + self.pos_embed
        reg = self.reg_token.expand(x.shape[0], -1, -1)
        if self.pos_embed_reg:
            return torch.cat([x, reg], dim=1) + self.pos_embed
        return torch.cat([x + self.pos_embed, reg], dim=1)

    def integrate(self, x0: torch.Tensor, num_steps: Optional[int] = None) -> List[torch.Tensor]:
        """X(0) -> [X_0, ..., X_N], N+1 states of shape (B, T, D)."""
        with self.field.folded():
            return self.solver.integrate(self.field, x0, num_steps or self.num_steps, self.horizon)

    def forward_head(self, x: torch.Tensor) -> torch.Tensor:
        """Final state (B, T, D) -> logits (B, C), from the CLS token."""
        return self.head(self.norm(x[:, 0]))

    def forward_features(self, x: torch.Tensor, num_steps: Optional[int] = None) -> torch.Tensor:
        return self.integrate(self.embed(x), num_steps)[-1]

    def forward(self, x: torch.Tensor, num_steps: Optional[int] = None) -> torch.Tensor:
        return self.forward_head(self.forward_features(x, num_steps))

    def forward_intermediates(
        self, x: torch.Tensor, num_steps: Optional[int] = None, return_attn: bool = False
    ) -> Dict[str, Any]:
        """Whole trajectory (and per-step attention maps) in one pass.

        Returns a dict with
            states: list of N+1 tensors (B, 1+M+R, D), states[0] = X(0)
            attn:   list of N tensors (B, H, T, T), the attention map of step k taken at its first G evaluation
                    (only with return_attn=True; needs the explicit softmax, so it is slower)
            logits: (B, num_classes)
        """
        field = self.field
        field.attn_maps = [] if return_attn else None
        try:
            states = self.integrate(self.embed(x), num_steps)
            maps = field.attn_maps
        finally:
            field.attn_maps = None
        out: Dict[str, Any] = {"states": states, "logits": self.forward_head(states[-1])}
        if return_attn:
            out["attn"] = maps[:: self.solver.g_evals_per_step]
        return out

    def encoder_params(self) -> int:
        """Parameters of the shared ODE block (what replaces the L encoder blocks of a ViT)."""
        return sum(p.numel() for p in self.field.parameters())

    def group_matcher(self, coarse: bool = False) -> Dict[str, str]:
        return {"stem": r"^cls_token|pos_embed|reg_token|patch_embed", "blocks": r"^field"}


def _cfg(**kwargs: Any) -> Dict[str, Any]:
    return {"url": "", "num_classes": 10, "input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3,
            "first_conv": "patch_embed.proj", "classifier": "head", **kwargs}


default_cfgs = generate_default_cfgs({
    "odevit_tiny_patch4_32": _cfg(),
    "odevit_small_patch16_224": _cfg(num_classes=1000, input_size=(3, 224, 224)),
    "odevit_base_patch16_224": _cfg(num_classes=1000, input_size=(3, 224, 224)),
})


def _create(variant: str, pretrained: bool = False, **kwargs: Any) -> ODEViT:
    return build_model_with_cfg(ODEViT, variant, pretrained, **kwargs)


@register_model
def odevit_tiny_patch4_32(pretrained: bool = False, **kwargs: Any) -> ODEViT:
    """0.5M-parameter CIFAR-sized ODE-ViT (the published class defaults): 32x32, patch 4, D 192, 3 heads, r 4."""
    args = dict(img_size=32, patch_size=4, embed_dim=192, num_heads=3, mlp_ratio=4.0, num_steps=12, reg_tokens=10)
    return _create("odevit_tiny_patch4_32", pretrained, **dict(args, **kwargs))


@register_model
def odevit_small_patch16_224(pretrained: bool = False, **kwargs: Any) -> ODEViT:
    """Paper's Teacher-Student Small student: D 768, 12 heads, mlp_ratio 1, N 35, 10 registers (3.54M block)."""
    args = dict(img_size=224, patch_size=16, embed_dim=768, num_heads=12, mlp_ratio=1.0, num_steps=35, reg_tokens=10)
    return _create("odevit_small_patch16_224", pretrained, **dict(args, **kwargs))


@register_model
def odevit_base_patch16_224(pretrained: bool = False, **kwargs: Any) -> ODEViT:
    """Paper's Teacher-Student Base student: D 768, 12 heads, mlp_ratio 4, N 35, 10 registers (7.08M block)."""
    args = dict(img_size=224, patch_size=16, embed_dim=768, num_heads=12, mlp_ratio=4.0, num_steps=35, reg_tokens=10)
    return _create("odevit_base_patch16_224", pretrained, **dict(args, **kwargs))
