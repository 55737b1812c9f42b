"""fusedops.add_rms_norm: shape functions, autograd and the public function.
Its backward is rms_norm's kernels on summed, with the gradient of summed
added to x's, as its own op _add_rms_norm_backward.

Kernels: cpp/norm/ and cuda/norm/ (the ops are listed in cpp/norm/norm.h).
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks
from . import _norm, rms_norm

_add_rms_norm = _autograd.direct(torch.ops.fusedops.add_rms_norm.default, "add_rms_norm")
_add_rms_norm_nograd = _autograd.direct(torch.ops.fusedops._add_rms_norm_nograd.default)
_add_rms_norm_forward = _autograd.direct(torch.ops.fusedops._add_rms_norm_forward.default)
_add_rms_norm_backward = torch.ops.fusedops._add_rms_norm_backward.default
CPP_AUTOGRAD = _autograd.cpp("add_rms_norm")


def add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6, *,
                 offset: float = 0.0, out_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(rms_norm(x + residual, weight, eps, offset=offset), x + residual) in one pass.

    residual: x's shape and dtype; the sum is rounded to x's dtype, then
    normalized (as the two ops would do). Gradients reach x and residual
    through both outputs. See fusedops.rms_norm for weight, offset and
    out_dtype (the normalized output's; summed keeps x's dtype).
    """
    _norm.check_out_dtype_type("add_rms_norm", out_dtype)
    try:
        if CPP_AUTOGRAD:
            return _add_rms_norm(x, residual, weight, eps, offset, out_dtype)
        if _checks.needs_autograd("add_rms_norm", x, residual, weight):
            return _AddRmsNorm.apply(x, residual, weight, eps, offset, out_dtype)
        return _add_rms_norm_nograd(x, residual, weight, eps, offset, out_dtype)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    def reference(x, residual, weight):
        s = x + residual
        return s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-6) * weight, s

    return {"x": randn(3, 31, 257), "residual": randn(3, 31, 257), "weight": randn(257)}, {}, reference, ()


def _fake(x, residual, weight=None, eps=1e-6, offset=0.0, out_dtype=None):
    out, summed, _, _ = _norm.fake_forward("add_rms_norm", x, residual, weight, None, False, out_dtype)
    return out, summed


def _forward_fake(x, residual, weight, eps, offset, out_dtype):
    out, summed, _, rstd = _norm.fake_forward("add_rms_norm", x, residual, weight, None, False, out_dtype)
    return out, summed, rstd


torch.library.register_fake("fusedops::add_rms_norm")(_fake)
torch.library.register_fake("fusedops::_add_rms_norm_nograd")(_fake)
torch.library.register_fake("fusedops::_add_rms_norm_forward")(_forward_fake)
torch.library.register_fake("fusedops::_add_rms_norm_backward")(rms_norm._backward_fake)


# ---- autograd -----------------------------------------------------------------------------


def _setup(ctx, inputs, output, saved):
    _, residual, weight, _, offset, _ = inputs
    _norm.set_needs_grad(ctx, 2, (weight,))
    ctx.offset = offset
    _norm.summed_only_from_x(ctx, output[1])
    ctx.save_for_backward(output[1], weight, *saved)


def _backward(ctx, grad, grad_summed):
    grad_x, grad_weight = rms_norm.grads(ctx, grad, grad_summed, ctx.saved_tensors, _add_rms_norm_backward)
    return grad_x, grad_x, grad_weight, None, None, None


_AddRmsNorm = _autograd.function("_AddRmsNorm", _add_rms_norm_forward, _setup, _backward, outputs=2)


# torch.ops.fusedops.add_rms_norm's autograd (opcheck, direct torch.ops
# callers): the op returns (out, summed), so the backward recomputes rstd.
def _setup_op(ctx, inputs, output):
    _, residual, weight, eps, offset, _ = inputs
    _norm.set_needs_grad(ctx, 2, (weight,))
    ctx.eps, ctx.offset = eps, offset
    _norm.summed_only_from_x(ctx, output[1])
    ctx.save_for_backward(output[1], weight)


def _backward_op(ctx, grad, grad_summed):
    summed, weight = ctx.saved_tensors
    with torch.no_grad():
        _, rstd = rms_norm._rms_norm_forward(summed, weight, ctx.eps, ctx.offset, None)
    grad_x, grad_weight = rms_norm.grads(ctx, grad, grad_summed, (summed, weight, rstd), _add_rms_norm_backward)
    return grad_x, grad_x, grad_weight, None, None, None


if not CPP_AUTOGRAD:  # else accel/norm/ registered both
    torch.library.register_autograd("fusedops::add_rms_norm", _backward_op, setup_context=_setup_op)
    torch.library.register_autograd("fusedops::_add_rms_norm_backward", _norm.no_double_backward("add_rms_norm"),
                                    setup_context=lambda ctx, inputs, output: None)
