"""fusedops.geglu: F.gelu(gate, approximate) * up in one pass (shared with
swiglu: _gated.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import _autograd, _checks
from . import _gated

OP = "geglu"
_geglu = _autograd.direct(torch.ops.fusedops.geglu.default, OP)
_geglu_nograd = _autograd.direct(torch.ops.fusedops._geglu_nograd.default)
CPP_AUTOGRAD = _autograd.cpp(OP)
_GeGLU = _gated.register(OP, _geglu_nograd, _gated.check_approximate)


def geglu(gate: torch.Tensor, up: torch.Tensor | None = None, approximate: str = "none") -> torch.Tensor:
    """F.gelu(gate, approximate=approximate) * up, computed in float32 for the
    half types and rounded once.

    approximate: "none" (the erf GELU) or "tanh". up: a tensor of gate's
    shape, dtype and device (no broadcasting), or None: then gate's last
    dimension is split in halves, gate[..., :d] the gate and gate[..., d:] the
    up, read in place. Any strides; the output is contiguous. Gradients flow
    to gate and up (to both halves of gate when up is None); the backward
    recomputes gelu(gate).
    """
    if not isinstance(approximate, str):
        raise TypeError(f'fusedops.geglu: approximate must be "none" or "tanh", got {approximate!r}')
    try:
        if CPP_AUTOGRAD:
            return _geglu(gate, up, approximate)
        if _checks.needs_autograd(OP, gate, up):
            return _GeGLU.apply(gate, up, approximate)
        return _geglu_nograd(gate, up, approximate)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    return ({"gate": randn(257, 66)}, {"approximate": "tanh"},
            lambda gate: F.gelu(gate[..., :33], approximate="tanh") * gate[..., 33:], ())
