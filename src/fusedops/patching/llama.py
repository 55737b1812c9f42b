"""HF transformers' Llama, Mistral, Qwen2 and Qwen3 on fusedops' ops.

The four share one structure (transformers 5.x): RMSNorms, a SiLU-gated MLP,
an attention that calls the module-level `apply_rotary_pos_emb`, and a
*ForCausalLM head whose loss takes the logits of every token. Each module
patched here keeps its class, parameters and hooks; only that instance's
forward changes (patching.set_forward), so other models, and whatever
transformers does by class (gradient checkpointing, output capture, FSDP
plans), are untouched.
"""

from __future__ import annotations

import functools
import types

import torch
import torch.nn.functional as F
from transformers.activations import SiLUActivation
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.utils.generic import can_return_tuple

import fusedops
from fusedops import _autograd
from fusedops.ops import swiglu as swiglu_op

from . import FAMILIES, set_forward

SWIGLU, SWIGLU_BACKWARD = torch.ops.fusedops.swiglu.default, torch.ops.fusedops._swiglu_backward.default


def patch(model: torch.nn.Module, enabled: dict[str, bool], counts: dict[str, int]) -> None:
    for module in model.modules():
        cls = type(module)
        if FAMILIES.get(cls.__module__) != "llama":
            continue
        if cls.__name__.endswith("RMSNorm") and enabled["norm"]:
            counts["RMSNorm"] += set_forward(module, rms_norm_forward)
        elif cls.__name__.endswith("MLP") and enabled["swiglu"] and isinstance(module.act_fn, (SiLUActivation,
                                                                                               torch.nn.SiLU)):
            counts["MLP"] += set_forward(module, swiglu_mlp_forward)
        elif cls.__name__.endswith("Attention") and enabled["rotary"] and attention_forward(cls) is not None:
            counts["rotary"] += set_forward(module, attention_forward(cls))
        elif cls.__name__.endswith("ForCausalLM") and enabled["loss"]:
            counts["loss"] += set_forward(module, causal_lm_forward)


def rms_norm_forward(norm: torch.nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    if torch.compiler.is_compiling():  # transformers' own, which Inductor fuses with the residual add before it
        return type(norm).forward(norm, hidden_states)
    # HF's returns weight * normalized.to(input dtype): the same dtype, rounded once here.
    return fusedops.rms_norm(hidden_states, norm.weight, norm.variance_epsilon)


def swiglu_mlp_forward(mlp: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    gate, up = mlp.gate_proj(x), mlp.up_proj(x)
    down = mlp.down_proj
    if type(down) is not torch.nn.Linear or down._forward_hooks or down._forward_pre_hooks:
        return down(fusedops.swiglu(gate, up))  # a wrapped projection (LoRA, FSDP's own unit, hooks): as called
    weight, bias = down.weight, down.bias
    if torch.is_autocast_enabled(gate.device.type):  # F.linear's casts, outside so that their gradients are too
        dtype = torch.get_autocast_dtype(gate.device.type)
        weight, bias = weight.to(dtype), bias.to(dtype) if bias is not None else None
    return SwiGLUDown.apply(gate, up, weight, bias)


class SwiGLUDown(torch.autograd.Function):
    """F.linear(fusedops.swiglu(gate, up), weight, bias) keeping gate and up
    (which swiglu's backward needs anyway), not their product: the weight's
    gradient recomputes it, one more pass over gate and up, instead of the MLP
    holding [tokens, intermediate] from its forward to its backward (128 MiB a
    layer at 8192 tokens x 8192 in bfloat16)."""

    @staticmethod
    def forward(gate, up, weight, bias):
        return F.linear(swiglu_op._swiglu_nograd(gate, up), weight, bias)

    @staticmethod
    def setup_context(ctx, inputs, output):
        gate, up, weight, bias = inputs
        ctx.save_for_backward(gate, up, weight)
        ctx.has_bias = bias is not None

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        gate, up, weight = ctx.saved_tensors
        rows = grad.reshape(-1, grad.shape[-1])
        grad_gate = grad_up = grad_weight = grad_bias = None
        # The inputs' gradients first, the product after: the product's gradient is freed before the
        # product is made, so the step's peak (this backward at the last layer) holds three tensors of
        # gate's size, not four.
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            grad_gate, grad_up = _autograd.call_backward_op(SWIGLU_BACKWARD, grad @ weight, gate, up)
        if ctx.needs_input_grad[2]:
            # The op swiglu, not the forward's _swiglu_nograd: torch.compile's common-subexpression pass merges
            # two calls of one op, and the product would be saved after all.
            product = SWIGLU(gate, up)
            grad_weight = rows.t() @ product.reshape(-1, product.shape[-1])
        if ctx.has_bias and ctx.needs_input_grad[3]:
            grad_bias = rows.sum(0)
        return grad_gate, grad_up, grad_weight, grad_bias


def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    """HF's apply_rotary_pos_emb as the attentions call it: q [B, Hq, S, D],
    k [B, Hk, S, D], cos and sin [B, S, D]."""
    return fusedops.rotary(q, k, cos, sin)


@functools.cache
def attention_forward(cls: type) -> types.FunctionType | None:
    """The attention class's own forward with fusedops.rotary, and SDPA's
    `is_causal` where the mask is the plain causal one (plain_causal). None
    where that forward does not call `apply_rotary_pos_emb` by that name (a
    decorated or reworked forward)."""
    rotary = rotary_forward(cls)
    if rotary is None:
        return None

    def forward(attn: torch.nn.Module, *args, fusedops_plain_causal: bool = False, **kwargs):
        if fusedops_plain_causal and "attention_mask" in kwargs and "hidden_states" in kwargs:
            # A sliding window shorter than the sequence masks more than causality.
            window = getattr(attn, "sliding_window", getattr(attn.config, "sliding_window", None))
            if window is None or kwargs["hidden_states"].shape[1] < window:
                kwargs["attention_mask"] = None
        return rotary(attn, *args, **kwargs)

    return forward


def rotary_forward(cls: type) -> types.FunctionType | None:
    """The attention class's own forward, run with `apply_rotary_pos_emb` looked
    up in a copy of its module's namespace where it is fusedops.rotary: the
    module global itself stays, so other models are untouched, and the rest of
    the forward (projections, Qwen3's q/k norms, the KV cache, sliding windows)
    is transformers' code as installed."""
    forward = cls.forward
    code = forward.__code__
    if hasattr(forward, "__wrapped__") or "apply_rotary_pos_emb" not in code.co_names:
        return None
    namespace = {**forward.__globals__, "apply_rotary_pos_emb": apply_rotary}
    ours = types.FunctionType(code, namespace, forward.__name__, forward.__defaults__, forward.__closure__)
    ours.__kwdefaults__ = forward.__kwdefaults__
    return ours


def plain_causal(lm: torch.nn.Module, attention_mask, position_ids, past_key_values) -> bool:
    """Whether transformers' mask for this forward is the plain causal one: no
    padding mask, positions 0..S-1 (no packed sequences), no cache, SDPA.
    Eager transformers then passes SDPA no mask but `is_causal`; traced by
    torch.compile it cannot tell (before torch 2.14 never; without a cache it
    cannot read the positions) and passes a [B, 1, S, S] mask, for which SDPA
    runs a kernel 2.6x slower than its causal one (H100, 4 x 2048 tokens)."""
    return (attention_mask is None and position_ids is None and past_key_values is None
            and lm.config._attn_implementation == "sdpa")


@can_return_tuple
def causal_lm_forward(lm: torch.nn.Module, input_ids=None, attention_mask=None, position_ids=None,
                      past_key_values=None, inputs_embeds=None, labels=None, use_cache=None, logits_to_keep=0,
                      **kwargs):
    """A training forward with labels: the loss from the last hidden states by
    fusedops.linear_cross_entropy, no logits (they are None in the output).
    Otherwise (no labels, as in generate(), or eval mode, where metrics may want
    the logits) transformers' own forward."""
    if not lm.training or (labels is None and kwargs.get("shift_labels") is None):
        return type(lm).forward(lm, input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                past_key_values=past_key_values, inputs_embeds=inputs_embeds, labels=labels,
                                use_cache=use_cache, logits_to_keep=logits_to_keep, **kwargs)
    if plain_causal(lm, attention_mask, position_ids, past_key_values):
        kwargs["fusedops_plain_causal"] = True  # to the attentions (attention_forward), through transformers' layers
    outputs = getattr(lm, lm.base_model_prefix)(
        input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
        past_key_values=past_key_values, inputs_embeds=inputs_embeds, use_cache=use_cache, **kwargs)
    kept = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
    loss = causal_lm_loss(lm.lm_head, outputs.last_hidden_state[:, kept, :], labels, **kwargs)
    return CausalLMOutputWithPast(loss=loss, past_key_values=outputs.past_key_values,
                                  hidden_states=outputs.hidden_states, attentions=outputs.attentions)


def causal_lm_loss(head: torch.nn.Linear, hidden: torch.Tensor, labels: torch.Tensor | None,
                   num_items_in_batch=None, ignore_index: int = -100, shift_labels: torch.Tensor | None = None,
                   **_) -> torch.Tensor:
    """transformers' ForCausalLMLoss on head(hidden) without the logits: tokens
    < n predict n (or `shift_labels` as given), the mean over the targets that
    are not `ignore_index`, or their sum over `num_items_in_batch` (gradient
    accumulation)."""
    if shift_labels is None:
        shift_labels = F.pad(labels, (0, 1), value=ignore_index)[..., 1:]
    reduction = "mean" if num_items_in_batch is None else "sum"
    loss = fusedops.linear_cross_entropy(hidden, head.weight, shift_labels.to(hidden.device), head.bias,
                                         ignore_index=ignore_index, reduction=reduction)
    if num_items_in_batch is not None:
        loss = loss / (num_items_in_batch.to(loss.device) if torch.is_tensor(num_items_in_batch)
                       else num_items_in_batch)
    return loss
