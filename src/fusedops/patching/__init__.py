"""fusedops.patch(model): fusedops' ops in a model from HF transformers or timm,
in place, with the model's parameters shared (its state dict is unchanged).

Architectures are recognized by the module of their classes, so neither
transformers nor timm is imported unless the model holds their classes; each
family's module (llama.py, vit.py) is the only code that knows its library.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable

import torch

# The library module that defines a family's classes -> fusedops' module that patches it.
FAMILIES = {
    "transformers.models.llama.modeling_llama": "llama",
    "transformers.models.mistral.modeling_mistral": "llama",
    "transformers.models.qwen2.modeling_qwen2": "llama",
    "transformers.models.qwen3.modeling_qwen3": "llama",
    "timm.models.vision_transformer": "vit",
}
SUPPORTED = ("transformers' LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM "
             "(and their base models), timm's VisionTransformer")
# What patch() reports, in this order, whatever the model.
COUNTS = ("RMSNorm", "MLP", "rotary", "loss", "Linear+GELU", "qkv", "LayerNorm", "add+LayerNorm")


def patch(model: torch.nn.Module, *, norm: bool = True, swiglu: bool = True, rotary: bool = True,
          loss: bool = True, linear: bool = True) -> dict[str, int]:
    """Swaps fusedops' ops into `model` in place and returns how many of each it
    swapped in (a module already patched counts no more). Supported: HF
    transformers' Llama, Mistral, Qwen2 and Qwen3 (CausalLM and base models;
    `norm`: RMSNorms, Qwen3's q/k norms included; `swiglu`: the MLPs; `rotary`:
    the attentions' rotary embedding; `loss`: a training forward with labels
    computes the loss without logits) and timm's VisionTransformer (`linear`:
    each MLP's fc1 + GELU, and each attention's qkv split so that its gradient
    needs one copy less; `norm`: the LayerNorms, and each block's residual add
    before norm2). Traced by torch.compile, the norms are the model library's
    own, which Inductor fuses with the residual adds around them. Parameters
    are shared, never copied; patch before sharding the model (FSDP) or
    compiling it."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"fusedops.patch: model must be a torch.nn.Module, got {type(model).__name__}")
    families = sorted({FAMILIES[type(m).__module__] for m in model.modules() if type(m).__module__ in FAMILIES})
    if not families:
        raise ValueError(f"fusedops.patch: nothing to patch in {type(model).__name__}: supported are {SUPPORTED}")
    counts = dict.fromkeys(COUNTS, 0)
    enabled = {"norm": norm, "swiglu": swiglu, "rotary": rotary, "loss": loss, "linear": linear}
    for family in families:
        importlib.import_module(f"fusedops.patching.{family}").patch(model, enabled, counts)
    return counts


def set_forward(module: torch.nn.Module, forward: Callable) -> int:
    """Makes `forward(module, ...)` this one module's forward (an instance
    attribute: its class, other instances, parameters and hooks are untouched).
    Returns 1, or 0 where it already was."""
    current = module.__dict__.get("forward")
    if isinstance(current, types.MethodType) and current.__func__ is forward:
        return 0
    module.forward = types.MethodType(forward, module)
    return 1
