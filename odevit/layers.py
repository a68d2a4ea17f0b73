"""Building blocks of the ODE-ViT vector field: CenterNorm, attention that can return its maps, spectral init.

The MLP is timm's `Mlp` (bias-free); names follow timm's `Block` (norm1/attn/norm2/mlp, attn.qkv/attn.proj)
so a timm ViT block's weights load one-to-one (see `odevit.teacher.load_block_`).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class CenterNorm(nn.Module):
    """CenterNorm (LipsFormer, Qi et al. 2023): y = gamma * D/(D-1) * (x - mean(x)) + beta.

    No division by the standard deviation, so the map is globally Lipschitz (LayerNorm is not).
    """

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.scale = dim / (dim - 1.0)
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x - x.mean(dim=-1, keepdim=True)
        return torch.addcmul(self.bias, xc, self.weight * self.scale)  # one fused multiply-add over (B, T, D)

    def fold_into(self, linear: nn.Linear, center: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
        """(W', b') with linear(CenterNorm(x)) == x @ W'^T + b' exactly: centring is the linear map P = I - 11^T/D,
        so W' = W diag(s gamma) P (each row of W diag(s gamma) minus its mean) and b' = W beta (+ the linear's
        bias). Differentiable in gamma, beta and W; costs O(D * out) instead of O(B * T * D) per evaluation.

        center=False folds only gamma and beta: linear(CenterNorm(x)) == (x - mean(x)) @ W'^T + b', the caller
        centres x. Use it in low precision: a bf16/fp16 matmul rounds the uncentred x (whose token mean can be
        far larger than its spread) and W' (whose rows then no longer sum to 0), and the centring the fold
        promised is lost; centring x first in the residual stream's precision keeps it exact."""
        if torch.fx._symbolic_trace.is_fx_symbolic_tracing():  # parameters are Proxies (no dtype to branch on): plain arithmetic
            return self._fold(linear.weight, linear.bias, self.weight, self.bias, center)
        dtype = linear.weight.dtype
        acc = torch.promote_types(dtype, torch.float32)  # fp32 for a half model, fp64 stays fp64
        with torch.autocast(linear.weight.device.type, enabled=False):  # autocast would run W @ beta in bf16
            m, b = self._fold(linear.weight.to(acc), None if linear.bias is None else linear.bias.to(acc),
                              self.weight.to(acc), self.bias.to(acc), center)
        return m.to(dtype), b.to(dtype)

    def _fold(self, w: torch.Tensor, bias: Optional[torch.Tensor], gamma: torch.Tensor, beta: torch.Tensor,
              center: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        m = w * (gamma * self.scale)  # (out, D)
        b = w @ beta
        if center:
            m = m - m.mean(dim=1, keepdim=True)
        return m, b if bias is None else b + bias


NORMS = {
    "centernorm": CenterNorm,
    "layernorm": lambda dim: nn.LayerNorm(dim, eps=1e-6),  # timm ViT's eps, so teacher blocks load exactly
}


def make_norm(name: str, dim: int) -> nn.Module:
    if name not in NORMS:
        raise ValueError(f"norm: '{name}' is not one of {sorted(NORMS)}")
    return NORMS[name](dim)


class Attention(nn.Module):
    """Multi-head self-attention with packed (optionally bias-free) Q/K/V, as timm's `Attention`.

    Returns the per-head attention maps when asked (needed by JaSMin, the attention-L1 loss and the analyses);
    otherwise it uses the fused `F.scaled_dot_product_attention` kernel. The maps are the softmax before attention
    dropout; `maps_after_dropout=True` returns the dropped (and 1/(1-p)-rescaled) maps that multiplied V, as
    PyTorch's `nn.MultiheadAttention` does in the published code (identical when dropout is 0 or in eval mode).
    """

    def __init__(self, dim: int, num_heads: int, bias: bool = False, attn_drop: float = 0.0, proj_drop: float = 0.0,
                 maps_after_dropout: bool = False):
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f"num_heads: {num_heads} does not divide embed_dim {dim}")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim, bias=bias)
        self.proj_drop = nn.Dropout(proj_drop)
        self.fused = True  # F.scaled_dot_product_attention when no maps are needed (False: always explicit softmax)
        self.maps_after_dropout = maps_after_dropout

    def forward(self, x: torch.Tensor, need_weights: bool = False,
                qkv_weight: Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]] = None,
                ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """x (B, T, D) -> (out (B, T, D), maps (B, H, T, T) or None); `qkv_weight` = (W, b) replacing qkv's own
        (a CenterNorm folded into it, see `CenterNorm.fold_into`)."""
        B, T, D = x.shape
        qkv = self.qkv(x) if qkv_weight is None else F.linear(x, *qkv_weight)
        qkv = qkv.reshape(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, H, T, hd)
        if need_weights or not self.fused:
            attn = (q * self.scale) @ k.transpose(-2, -1)  # (B, H, T, T)
            attn = attn.softmax(dim=-1)
            dropped = self.attn_drop(attn)
            out = dropped @ v
            if self.maps_after_dropout:
                attn = dropped
        else:
            attn = None
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.0)
        out = out.transpose(1, 2).reshape(B, T, D)  # (B, T, D)
        return self.proj_drop(self.proj(out)), attn


@torch.no_grad()
def spectral_init_(weight: torch.Tensor) -> torch.Tensor:
    """Xavier-normal, then divide by the largest singular value, so ||W||_2 = 1 (conv kernels as (out, in*k*k))."""
    nn.init.xavier_normal_(weight)
    sigma = torch.linalg.matrix_norm(weight.reshape(weight.shape[0], -1).double(), ord=2)
    weight.div_(sigma.to(weight.dtype))
    return weight
