"""fusedops.add_layer_norm: shape functions, autograd and the public function.
Its backward is layer_norm's kernels on summed, with the gradient of summed
added to x's, as its own op _add_layer_norm_backward.

Kernels: cpp/norm/ and cuda/norm/ (the ops are listed in cpp/norm/norm.h).
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks
from . import _norm, layer_norm

_add_layer_norm = _autograd.direct(torch.ops.fusedops.add_layer_norm.default, "add_layer_norm")
_add_layer_norm_nograd = _autograd.direct(torch.ops.fusedops._add_layer_norm_nograd.default)
_add_layer_norm_forward = _autograd.direct(torch.ops.fusedops._add_layer_norm_forward.default)
_add_layer_norm_backward = torch.ops.fusedops._add_layer_norm_backward.default
CPP_AUTOGRAD = _autograd.cpp("add_layer_norm")


def add_layer_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None = None,
                   bias: torch.Tensor | None = None, eps: float = 1e-5, *,
                   out_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(layer_norm(x + residual, weight, bias, eps), x + residual) in one pass.

    residual: x's shape and dtype; the sum is rounded to x's dtype, then
    normalized (as the two ops would do). Gradients reach x and residual
    through both outputs. See fusedops.layer_norm for weight, bias and
    out_dtype (the normalized output's; summed keeps x's dtype).
    """
    _norm.check_out_dtype_type("add_layer_norm", out_dtype)
    try:
        if CPP_AUTOGRAD:
            return _add_layer_norm(x, residual, weight, bias, eps, out_dtype)
        if _checks.needs_autograd("add_layer_norm", x, residual, weight, bias):
            return _AddLayerNorm.apply(x, residual, weight, bias, eps, out_dtype)
        return _add_layer_norm_nograd(x, residual, weight, bias, eps, out_dtype)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    def reference(x, residual, weight, bias):
        s = x + residual
        return torch.nn.functional.layer_norm(s, s.shape[-1:], weight, bias, 1e-5), s

    return ({"x": randn(3, 31, 257), "residual": randn(3, 31, 257), "weight": randn(257), "bias": randn(257)},
            {}, reference, ())


def _fake(x, residual, weight=None, bias=None, eps=1e-5, out_dtype=None):
    out, summed, _, _ = _norm.fake_forward("add_layer_norm", x, residual, weight, bias, True, out_dtype)
    return out, summed


def _forward_fake(x, residual, weight, bias, eps, out_dtype):
    return _norm.fake_forward("add_layer_norm", x, residual, weight, bias, True, out_dtype)


torch.library.register_fake("fusedops::add_layer_norm")(_fake)
torch.library.register_fake("fusedops::_add_layer_norm_nograd")(_fake)
torch.library.register_fake("fusedops::_add_layer_norm_forward")(_forward_fake)
torch.library.register_fake("fusedops::_add_layer_norm_backward")(layer_norm._backward_fake)


# ---- autograd -----------------------------------------------------------------------------


def _setup(ctx, inputs, output, saved):
    _, residual, weight, bias, _, _ = inputs
    _norm.set_needs_grad(ctx, 2, (weight, bias))
    _norm.summed_only_from_x(ctx, output[1])
    ctx.save_for_backward(output[1], weight, *saved)


def _backward(ctx, grad, grad_summed):
    grad_x, grad_weight, grad_bias = layer_norm.grads(ctx, grad, grad_summed, ctx.saved_tensors, _add_layer_norm_backward)
    return grad_x, grad_x, grad_weight, grad_bias, None, None


_AddLayerNorm = _autograd.function("_AddLayerNorm", _add_layer_norm_forward, _setup, _backward, outputs=2)


# torch.ops.fusedops.add_layer_norm's autograd (opcheck, direct torch.ops
# callers): the op returns (out, summed), so the backward recomputes mean and rstd.
def _setup_op(ctx, inputs, output):
    _, residual, weight, bias, eps, _ = inputs
    _norm.set_needs_grad(ctx, 2, (weight, bias))
    ctx.eps = eps
    _norm.summed_only_from_x(ctx, output[1])
    ctx.save_for_backward(output[1], weight, bias)


def _backward_op(ctx, grad, grad_summed):
    summed, weight, bias = ctx.saved_tensors
    with torch.no_grad():
        _, mean, rstd = layer_norm._layer_norm_forward(summed, weight, bias, ctx.eps, None)
    grad_x, grad_weight, grad_bias = layer_norm.grads(ctx, grad, grad_summed, (summed, weight, mean, rstd),
                                                        _add_layer_norm_backward)
    return grad_x, grad_x, grad_weight, grad_bias, None, None


if not CPP_AUTOGRAD:  # else accel/norm/ registered both
    torch.library.register_autograd("fusedops::add_layer_norm", _backward_op, setup_context=_setup_op)
    torch.library.register_autograd("fusedops::_add_layer_norm_backward", _norm.no_double_backward("add_layer_norm"),
                                    setup_context=lambda ctx, inputs, output: None)
