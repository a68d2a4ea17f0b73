"""ODE-ViT: a ViT whose encoder is ONE shared, autonomous vector field psi = F + G integrated for N steps.

    X(0) = [CLS, patches, registers] + pos      # registers get no position embedding (as published)
    dX/dt = F(X) + G(X)                         # G = MHA(CenterNorm(X)), F = MLP(CenterNorm(X)), bias-free
    logits = head(norm(X(T)[CLS]))              # norm = Identity, or a frozen copy of a teacher's final norm

N is the number of solver steps; the trajectory has N+1 states (index 0 = X(0)); horizon T (default 12, one unit of
time per teacher layer) gives h = T/N. Any N can be used at evaluation: `forward(x, num_steps=...)`.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple, Union

import torch
import torch.nn as nn
from timm.layers import Mlp, PatchEmbed, resample_abs_pos_embed, trunc_normal_
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices  # as timm's own ViT imports it

from .layers import Attention, CenterNorm, make_norm, spectral_init_
from .solvers import get_solver


def _centre(x: torch.Tensor) -> torch.Tensor:
    return x - x.mean(dim=-1, keepdim=True)


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
        attn_maps_after_dropout: bool = False,
    ):
        super().__init__()
        self.norm1 = make_norm(norm, dim)  # before G (attention)
        self.attn = Attention(dim, num_heads, bias=bias, attn_drop=attn_drop, proj_drop=proj_drop,
                              maps_after_dropout=attn_maps_after_dropout)
        self.norm2 = make_norm(norm, dim)  # before F (MLP)
        self.mlp = Mlp(dim, int(round(mlp_ratio * dim)), act_layer=nn.GELU, bias=bias, drop=mlp_drop)
        self.attn_maps: Optional[List[torch.Tensor]] = None  # when a list, G appends its (B, H, T, T) maps
        self.fold = True  # fold CenterNorm into Q/K/V and fc1 once per trajectory (see `folded`)
        self._folded: Optional[tuple] = None

    @contextmanager
    def folded(self) -> Iterator[None]:
        """While open, G and F use CenterNorm folded into the next linear map (`CenterNorm.fold_into`), computed
        once and shared by every step: the same function (to rounding), without the per-step normalisation
        passes over (B, T, D). A no-op for LayerNorm (not linear) or `fold = False`.

        In low precision (bf16/fp16 parameters, or autocast on) only gamma and beta are folded and the input is
        centred explicitly before the matmul: folding the centring into a bf16 weight loses it (rows that no
        longer sum to 0 times an uncentred input rounded to 8 bits), 0.19 relative error at a token mean of 100
        sigma against 4e-3 for the unfolded field."""
        if not (self.fold and isinstance(self.norm1, CenterNorm) and isinstance(self.norm2, CenterNorm)) \
                or self._folded is not None:
            yield
            return
        low = False
        if not torch.fx._symbolic_trace.is_fx_symbolic_tracing():  # fx: parameters are Proxies; a traced graph is fp32's
            w = self.attn.qkv.weight
            low = w.dtype in (torch.float16, torch.bfloat16) or torch.is_autocast_enabled(w.device.type)
        self._folded = (self.norm1.fold_into(self.attn.qkv, center=not low),
                        self.norm2.fold_into(self.mlp.fc1, center=not low), low)
        try:
            yield
        finally:
            self._folded = None

    def G(self, x: torch.Tensor) -> torch.Tensor:
        need = self.attn_maps is not None
        if self._folded is None:
            out, attn = self.attn(self.norm1(x), need_weights=need)
        else:
            out, attn = self.attn(_centre(x) if self._folded[2] else x, need_weights=need, qkv_weight=self._folded[0])
        if need:
            self.attn_maps.append(attn)
        return out

    def F(self, x: torch.Tensor) -> torch.Tensor:
        if self._folded is None:
            return self.mlp(self.norm2(x))
        m = self.mlp  # timm Mlp: fc1 -> act -> drop1 -> norm -> fc2 -> drop2, with fc1 taking the folded norm
        h = nn.functional.linear(_centre(x) if self._folded[2] else x, *self._folded[1])
        return m.drop2(m.fc2(m.norm(m.drop1(m.act(h)))))

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
        attn_maps_after_dropout: the returned attention maps (JaSMin, attention-L1) are the ones after attention
            dropout, as nn.MultiheadAttention returns them in the published code (default: before dropout).
        global_pool: 'token' (CLS, default) | 'avg' (mean of the patch tokens) | '' (no pooling), as timm.
        dynamic_img_size: accept any image size (default: img_size only), the patch grid's position embeddings
            resampled to the input's grid as timm's VisionTransformer does (bicubic, `resample_abs_pos_embed`; the
            CLS's and the registers' stay as they are). Same parameters, so any checkpoint loads either way.
        dynamic_img_pad: with dynamic_img_size, pad a side that is not a multiple of patch_size (timm's PatchEmbed).

    The timm model API, with the solver's steps as the layer axis: intermediate index i (0..N-1) is the state
    X_{i+1} after step i+1, so `forward_intermediates(x, indices=k)` returns the last k states and
    `prune_intermediate_layers(indices)` stops the integration after the last state asked for (same h = T/N).
    The token layout is [CLS, patches, registers] (timm's is [CLS, registers, patches]); `num_prefix_tokens`
    = 1 counts the CLS, and the spatial outputs drop the CLS and the registers. The whole trajectory, with
    the attention maps, is `forward_trajectory`.
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
        attn_maps_after_dropout: bool = False,
        global_pool: str = "token",
        dynamic_img_size: bool = False,
        dynamic_img_pad: bool = False,
        **kwargs: Any,  # timm passes pretrained_cfg etc.
    ):
        super().__init__()
        if num_steps < 1:
            raise ValueError(f"num_steps: {num_steps} must be >= 1")
        if horizon <= 0:
            raise ValueError(f"horizon: {horizon} must be > 0")
        if mlp_ratio <= 0:
            raise ValueError(f"mlp_ratio: {mlp_ratio} must be > 0")
        if global_pool not in POOLS:
            raise ValueError(f"global_pool: '{global_pool}' is not one of {list(POOLS)}")
        self.num_classes = num_classes
        self.global_pool = global_pool
        self.num_features = self.head_hidden_size = self.embed_dim = embed_dim
        self.num_prefix_tokens = 1  # the CLS; registers follow the patches
        self.grad_checkpointing = False
        self.stop_step: Optional[int] = None  # set by prune_intermediate_layers: integrate only this many steps
        self.num_steps = num_steps
        self.horizon = float(horizon)
        self.solver_name = solver
        self.solver = get_solver(solver)
        self.num_reg_tokens = reg_tokens
        self.pos_embed_reg = pos_embed_reg
        self.dynamic_img_size = dynamic_img_size

        # dynamic size: PatchEmbed leaves the grid (B, H, W, D) so `embed` can resample the position embedding to it
        dynamic = dict(strict_img_size=False, output_fmt="NHWC") if dynamic_img_size else {}
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim, dynamic_img_pad=dynamic_img_pad,
                                      **dynamic)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.reg_token = nn.Parameter(torch.zeros(1, reg_tokens, embed_dim)) if reg_tokens else None
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + num_patches + (reg_tokens if pos_embed_reg else 0), embed_dim))
        self.field = ViTField(embed_dim, num_heads, mlp_ratio, norm, bias, attn_drop, proj_drop, mlp_drop,
                              attn_maps_after_dropout)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6) if head_norm else nn.Identity()
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        reduction = self.patch_embed.patch_size[0]
        self.feature_info = [dict(module=f"step.{i}", num_chs=embed_dim, reduction=reduction) for i in range(num_steps)]
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

    def _steps(self, num_steps: Optional[int]) -> int:
        # torch.fx passes every forward argument as a Proxy: a traced graph uses the model's own N
        return self.num_steps if num_steps is None or isinstance(num_steps, torch.fx.Proxy) else int(num_steps)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Image (B, C, H, W) -> X(0) (B, 1 + M + R, D); M = (H/p)(W/p) patches (any H, W with dynamic_img_size)."""
        x = self.patch_embed(x)  # (B, M, D), or the grid (B, H/p, W/p, D) with dynamic_img_size
        pos = self.pos_embed
        if self.dynamic_img_size:
            B, H, W, D = x.shape
            pos = self.resample_pos_embed((H, W))
            x = x.reshape(B, H * W, D)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # (B, 1+M, D)
        if self.reg_token is None:
            return x + pos
        reg = self.reg_token.expand(x.shape[0], -1, -1)
        if self.pos_embed_reg:
            return torch.cat([x, reg], dim=1) + pos
        return torch.cat([x + pos, reg], dim=1)

    def resample_pos_embed(self, grid: Tuple[int, int]) -> torch.Tensor:
        """The position embedding for a (H/p, W/p) patch grid: the patches' part resampled from the model's grid as
        timm's VisionTransformer does (`resample_abs_pos_embed`, bicubic); the CLS's (and with pos_embed_reg the
        registers') unchanged. At the model's own grid it is `pos_embed` itself."""
        R = self.num_reg_tokens if self.pos_embed_reg else 0
        pos = self.pos_embed[:, : self.pos_embed.shape[1] - R]  # [CLS, patches]
        pos = resample_abs_pos_embed(pos, new_size=list(grid), old_size=list(self.patch_embed.grid_size),
                                     num_prefix_tokens=1)
        return torch.cat([pos, self.pos_embed[:, -R:]], dim=1) if R else pos  # + the registers'

    def integrate(self, x0: torch.Tensor, num_steps: Optional[int] = None, stop: Optional[int] = None) -> List[torch.Tensor]:
        """X(0) -> [X_0, ..., X_stop], states of shape (B, T, D); stop defaults to N (or to the pruned length).

        With gradient checkpointing the fold is off (the recomputation in backward must see the same function)."""
        N = self._steps(num_steps)
        if stop is None and N == self.num_steps:
            stop = self.stop_step  # None unless pruned
        if self.grad_checkpointing:
            return self.solver.integrate(self.field, x0, N, self.horizon, stop, grad_checkpointing=True)
        with self.field.folded():
            return self.solver.integrate(self.field, x0, N, self.horizon, stop)

    # ---- timm model API -------------------------------------------------------------------------------------
    def forward_features(self, x: torch.Tensor, num_steps: Optional[int] = None) -> torch.Tensor:
        """Image -> norm(X(T)) (B, 1 + M + R, D), every token (norm is the head norm, or Identity)."""
        return self.norm(self.integrate(self.embed(x), num_steps)[-1])

    def pool(self, x: torch.Tensor, pool_type: Optional[str] = None) -> torch.Tensor:
        """Tokens (B, T, D) -> (B, D): 'token' = CLS, 'avg' = mean of the patch tokens, '' = unchanged."""
        pool_type = self.global_pool if pool_type is None else pool_type
        if pool_type == "token":
            return x[:, 0]
        if pool_type == "avg":
            R = self.num_reg_tokens  # [CLS, patches, registers]: any number of patches (dynamic_img_size)
            return (x[:, 1:-R] if R else x[:, 1:]).mean(dim=1)
        return x

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """forward_features' output -> logits (B, C), or the pooled embedding (B, D) with pre_logits=True."""
        x = self.pool(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor, num_steps: Optional[int] = None) -> torch.Tensor:
        return self.forward_head(self.forward_features(x, num_steps))

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: Optional[Union[int, List[int]]] = None,
        return_prefix_tokens: bool = False,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
        num_steps: Optional[int] = None,
    ) -> Union[List[Any], Tuple[torch.Tensor, List[Any]]]:
        """timm's forward_intermediates with the solver's steps as the layers: index i is X_{i+1}.

        indices: None = all N states, int k = the last k, list = those (negative from the end). norm applies the
        head norm. NCHW: patch tokens as (B, D, H/p, W/p); NLC: (B, M, D). return_prefix_tokens pairs each with
        its non-patch tokens (B, 1 + R, D): the CLS and the registers. stop_early stops integrating at the last
        index asked for. Returns (forward_features' output, intermediates), or the intermediates only."""
        if output_fmt not in ("NCHW", "NLC"):
            raise ValueError(f"output_fmt: '{output_fmt}' is not one of ['NCHW', 'NLC']")
        N = self._steps(num_steps)
        take, max_index = feature_take_indices(N if self.stop_step is None else self.stop_step, indices)
        B, _, height, width = x.shape
        stop = max_index + 1 if stop_early or intermediates_only else None
        states = self.integrate(self.embed(x), N, stop)
        out = [self.norm(states[i + 1]) if norm else states[i + 1] for i in take]
        H, W = self.patch_embed.dynamic_feat_size((height, width))  # the input's patch grid
        M = H * W
        prefix = [torch.cat([y[:, :1], y[:, 1 + M :]], dim=1) for y in out]  # (B, 1 + R, D)
        out = [y[:, 1 : 1 + M] for y in out]  # (B, M, D)
        if output_fmt == "NCHW":
            out = [y.reshape(B, H, W, -1).permute(0, 3, 1, 2).contiguous() for y in out]
        if return_prefix_tokens:
            out = list(zip(out, prefix))
        if intermediates_only:
            return out
        return self.norm(states[-1]), out

    def prune_intermediate_layers(
        self, indices: Union[int, List[int]] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> List[int]:
        """Integrate only up to the last state in `indices` from now on (the shared field has no layers to drop;
        h stays T/N). Returns the absolute indices kept, as timm."""
        take, max_index = feature_take_indices(self.num_steps if self.stop_step is None else self.stop_step, indices)
        self.stop_step = max_index + 1
        self.feature_info = self.feature_info[: self.stop_step]
        if prune_norm:
            self.norm = nn.Identity()
        if prune_head:
            self.reset_classifier(0, "")
        return take

    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: Optional[str] = None) -> None:
        """A new (spectrally initialised) head with num_classes outputs (0 = Identity); optionally a new pooling."""
        if global_pool is not None:
            if global_pool not in POOLS:
                raise ValueError(f"global_pool: '{global_pool}' is not one of {list(POOLS)}")
            self.global_pool = global_pool
        self.num_classes = num_classes
        w = self.cls_token
        self.head = nn.Linear(self.embed_dim, num_classes, device=w.device, dtype=w.dtype) if num_classes > 0 \
            else nn.Identity()
        if num_classes > 0:
            spectral_init_(self.head.weight)
            nn.init.zeros_(self.head.bias)
        self.head.train(self.training)

    def no_weight_decay(self) -> Set[str]:
        """Parameters timm's optimizer factory keeps out of weight decay (tokens and position embedding)."""
        return {"pos_embed", "cls_token", "reg_token"}

    def group_matcher(self, coarse: bool = False) -> Dict[str, Any]:
        """Layer-decay groups for timm's optimizer factory: the stem, the one shared field, then the head norm."""
        return {"stem": r"^cls_token|pos_embed|reg_token|patch_embed", "blocks": [(r"^field", None), (r"^norm", (99999,))]}

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Recompute each solver step in backward instead of storing its inside (the retired benchmark reported
        the activation memory this saves at the paper's shapes)."""
        self.grad_checkpointing = enable

    # ---- the ODE's own API ----------------------------------------------------------------------------------
    def forward_trajectory(
        self, x: torch.Tensor, num_steps: Optional[int] = None, return_attn: bool = False
    ) -> Dict[str, Any]:
        """Whole trajectory (and per-step attention maps) in one pass.

        Returns a dict with
            states: list of N+1 tensors (B, 1+M+R, D), states[0] = X(0), before the head norm
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
        out: Dict[str, Any] = {"states": states, "logits": self.forward_head(self.norm(states[-1]))}
        if return_attn:
            out["attn"] = maps[:: self.solver.g_evals_per_step]
        return out

    def encoder_params(self) -> int:
        """Parameters of the shared ODE block (what replaces the L encoder blocks of a ViT)."""
        return sum(p.numel() for p in self.field.parameters())


POOLS = ("token", "avg", "")


def _cfg(**kwargs: Any) -> Dict[str, Any]:
    """fixed_input_size: the registered models take img_size only, as timm's ViTs (dynamic_img_size=True: any)."""
    return {"url": "", "num_classes": 10, "input_size": (3, 32, 32), "mean": (0.5,) * 3, "std": (0.5,) * 3,
            "first_conv": "patch_embed.proj", "classifier": "head", "fixed_input_size": True, **kwargs}


default_cfgs = generate_default_cfgs({
    "odevit_tiny_patch4_32": _cfg(),
    "odevit_small_patch16_224": _cfg(num_classes=1000, input_size=(3, 224, 224)),
    "odevit_base_patch16_224": _cfg(num_classes=1000, input_size=(3, 224, 224)),
})


def build(variant: str, pretrained: bool = False, **kwargs: Any) -> ODEViT:
    """timm's builder: pretrained tags, pretrained_cfg_overlay, and features_only=True (a FeatureGetterNet over
    forward_intermediates, out_indices = solver steps; default the last 3)."""
    return build_model_with_cfg(ODEViT, variant, pretrained, **getter_features(kwargs))


def getter_features(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """kwargs for timm's build_model_with_cfg with features_only support through forward_intermediates."""
    out_indices = kwargs.pop("out_indices", 3)
    return dict(kwargs, feature_cfg=dict(out_indices=out_indices, feature_cls="getter"))


@register_model
def odevit_tiny_patch4_32(pretrained: bool = False, **kwargs: Any) -> ODEViT:
    """0.5M-parameter CIFAR-sized ODE-ViT (the published class defaults): 32x32, patch 4, D 192, 3 heads, r 4."""
    args = dict(img_size=32, patch_size=4, embed_dim=192, num_heads=3, mlp_ratio=4.0, num_steps=12, reg_tokens=10)
    return build("odevit_tiny_patch4_32", pretrained, **dict(args, **kwargs))


@register_model
def odevit_small_patch16_224(pretrained: bool = False, **kwargs: Any) -> ODEViT:
    """Paper's Teacher-Student Small student: D 768, 12 heads, mlp_ratio 1, N 35, 10 registers (3.54M block)."""
    args = dict(img_size=224, patch_size=16, embed_dim=768, num_heads=12, mlp_ratio=1.0, num_steps=35, reg_tokens=10)
    return build("odevit_small_patch16_224", pretrained, **dict(args, **kwargs))


@register_model
def odevit_base_patch16_224(pretrained: bool = False, **kwargs: Any) -> ODEViT:
    """Paper's Teacher-Student Base student: D 768, 12 heads, mlp_ratio 4, N 35, 10 registers (7.08M block)."""
    args = dict(img_size=224, patch_size=16, embed_dim=768, num_heads=12, mlp_ratio=4.0, num_steps=35, reg_tokens=10)
    return build("odevit_base_patch16_224", pretrained, **dict(args, **kwargs))
