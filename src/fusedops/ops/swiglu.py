"""fusedops.swiglu: F.silu(gate) * up in one pass (shared with geglu: _gated.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import _autograd, _checks
from . import _gated

OP = "swiglu"
_swiglu = _autograd.direct(torch.ops.fusedops.swiglu.default, OP)
_swiglu_nograd = _autograd.direct(torch.ops.fusedops._swiglu_nograd.default)
CPP_AUTOGRAD = _autograd.cpp(OP)
_SwiGLU = _gated.register(OP, _swiglu_nograd, lambda: None)


def swiglu(gate: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
    """F.silu(gate) * up, computed in float32 for the half types and rounded once.

    up: a tensor of gate's shape, dtype and device (no broadcasting), or None:
    then gate's last dimension is split in halves, gate[..., :d] the gate and
    gate[..., d:] the up (vLLM's SiluAndMul), read in place. Any strides; the
    output is contiguous. Gradients flow to gate and up (to both halves of
    gate when up is None); the backward recomputes silu(gate).
    """
    try:
        if CPP_AUTOGRAD:
            return _swiglu(gate, up)
        if _checks.needs_autograd(OP, gate, up):
            return _SwiGLU.apply(gate, up)
        return _swiglu_nograd(gate, up)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    return {"gate": randn(257, 33), "up": randn(257, 33)}, {}, lambda gate, up: F.silu(gate) * up, ()
