"""timm's VisionTransformer on fusedops' ops.

A ViT block is pre-norm: x + attn(norm1(x)), then + mlp(norm2(x)), with the
MLP fc1 -> GELU -> fc2. Here each fc1 and its GELU become one
fusedops.nn.Linear (the GELU becomes an Identity), each LayerNorm a
fusedops.nn.LayerNorm holding the same parameters, and each timm Block's
residual add before norm2 and norm2 itself one fusedops.add_layer_norm (that
block's forward, an instance attribute). A Block's norm1 and norm2 each feed
one matmul only (its attention's qkv, its MLP's fc1; not where the attention is
gated): under autocast they write autocast's dtype themselves
(autocast_output), which those matmuls would cast their float32 outputs to. Each Attention takes q, k and v from its qkv
projection in an order whose gradient needs one copy instead of two (its
forward, likewise). State dicts are unchanged: the new modules have the old
ones' names and parameters.
Traced by torch.compile the LayerNorms and Blocks run timm's own code
(F.layer_norm), which Inductor fuses with the adds and casts around it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.layers import Attention, Mlp
from timm.layers import LayerNorm as TimmLayerNorm
from timm.models.vision_transformer import Block

import fusedops
import fusedops.nn

from . import set_forward

# nn.GELU's `approximate` -> fusedops.linear's activation.
GELUS = {"none": "gelu", "tanh": "gelu_tanh"}


def patch(model: torch.nn.Module, enabled: dict[str, bool], counts: dict[str, int]) -> None:
    for parent in list(model.modules()):
        if enabled["norm"]:
            counts["LayerNorm"] += swap_layer_norms(parent)
        if enabled["linear"]:
            counts["Linear+GELU"] += fuse_gelu(parent)
            if type(parent) is Attention and parent.fused_attn:
                counts["qkv"] += set_forward(parent, attention_forward)
        if enabled["norm"] and type(parent) is Block and isinstance(parent.norm2, fusedops.nn.LayerNorm):
            counts["add+LayerNorm"] += set_forward(parent, block_forward)


def swap_layer_norms(parent: torch.nn.Module) -> int:
    """parent's LayerNorm children (torch's or timm's, over the last dim) as
    fusedops.nn.LayerNorms holding their parameters; how many."""
    swapped = 0
    matmul_inputs = {"norm1", "norm2"} if norms_feed_matmuls_only(parent) else set()
    for name, child in list(parent.named_children()):
        if type(child) in (torch.nn.LayerNorm, TimmLayerNorm) and len(child.normalized_shape) == 1:
            norm = fusedops.nn.LayerNorm.from_layer_norm(child, autocast_output=name in matmul_inputs)
            set_forward(norm, layer_norm_forward)
            setattr(parent, name, norm)
            swapped += 1
    return swapped


def layer_norm_forward(norm: fusedops.nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """fusedops.nn.LayerNorm's forward, but F.layer_norm's where torch.compile
    traces it: Inductor fuses the residual add before a LayerNorm and autocast's
    casts around it into its own LayerNorm kernel, not into our opaque call."""
    if torch.compiler.is_compiling():
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)
    return fusedops.nn.LayerNorm.forward(norm, x)


def norms_feed_matmuls_only(block: torch.nn.Module) -> bool:
    """Whether a Block's norm1 and norm2 outputs each go into one matmul only:
    those of timm's Attention (qkv) and Mlp (fc1) do. (A gated Attention's
    norm1 feeds its gate too: their gradients would meet in autocast's dtype,
    where eager sums them in float32.)"""
    return (type(block) is Block and type(block.attn) is Attention and getattr(block.attn, "gate", None) is None
            and type(block.mlp) is Mlp)


def fuse_gelu(mlp: torch.nn.Module) -> int:
    """A timm Mlp's fc1 and GELU as one fusedops.nn.Linear: 1, else 0."""
    if type(mlp) is not Mlp or type(mlp.fc1) is not torch.nn.Linear or type(mlp.act) is not torch.nn.GELU:
        return 0
    mlp.fc1 = fusedops.nn.Linear.from_linear(mlp.fc1, activation=GELUS[mlp.act.approximate])
    mlp.act = torch.nn.Identity()
    return 1


def block_forward(block: Block, x: torch.Tensor, attn_mask: torch.Tensor | None = None,
                  is_causal: bool = False) -> torch.Tensor:
    """timm's Block.forward with `x + branch` and norm2 in one pass (timm's
    own where torch.compile traces it: see layer_norm_forward)."""
    if torch.compiler.is_compiling():
        return Block.forward(block, x, attn_mask=attn_mask, is_causal=is_causal)
    branch = block.drop_path1(block.ls1(block.attn(block.norm1(x), attn_mask=attn_mask, is_causal=is_causal)))
    # Under autocast the branch is narrower than the residual stream: the add promotes, as eager's does.
    dtype = torch.promote_types(x.dtype, branch.dtype)
    x, branch = x.to(dtype), branch.to(dtype)
    normed, x = fusedops.add_layer_norm(x, branch, block.norm2.weight, block.norm2.bias, block.norm2.eps,
                                        out_dtype=block.norm2.out_dtype_for(x))
    return x + block.drop_path2(block.ls2(block.mlp(normed)))


def attention_forward(attn: Attention, x: torch.Tensor, attn_mask: torch.Tensor | None = None,
                      is_causal: bool = False) -> torch.Tensor:
    """timm's Attention.forward (its scaled_dot_product_attention path) with q,
    k and v sliced from qkv's output as [B, N, 3, H, hd] before their heads
    move forward: their gradients then stack straight into that layout, where
    timm's permute(2, 0, 3, 1, 4) first stacks them as [3, B, H, N, hd] and
    the qkv projection's backward copies that once more."""
    batch, tokens, _ = x.shape
    gate = attn.gate(x).sigmoid() if getattr(attn, "gate", None) is not None else None
    qkv = attn.qkv(x).unflatten(-1, (3, attn.num_heads, attn.head_dim))
    q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
    q, k = attn.q_norm(q), attn.k_norm(k)
    x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                       dropout_p=attn.attn_drop.p if attn.training else 0.0, is_causal=is_causal)
    x = attn.norm(x.transpose(1, 2).reshape(batch, tokens, attn.num_heads * attn.head_dim))
    if gate is not None:
        x = x * gate
    return attn.proj_drop(attn.proj(x))
