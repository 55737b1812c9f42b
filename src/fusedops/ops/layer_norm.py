"""fusedops.layer_norm: shape functions, autograd and the public function (its
kernels serve add_layer_norm too).

Kernels: cpp/norm/ and cuda/norm/ (the ops are listed in cpp/norm/norm.h);
what the normalization ops share in Python: _norm.py.
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks
from . import _norm

_layer_norm = _autograd.direct(torch.ops.fusedops.layer_norm.default, "layer_norm")
_layer_norm_nograd = _autograd.direct(torch.ops.fusedops._layer_norm_nograd.default)
_layer_norm_forward = _autograd.direct(torch.ops.fusedops._layer_norm_forward.default)
_layer_norm_backward = torch.ops.fusedops._layer_norm_backward.default
CPP_AUTOGRAD = _autograd.cpp("layer_norm")


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5, *, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """F.layer_norm(x, x.shape[-1:], weight, bias, eps) in float32 (float64 for
    float64), rounded once to torch.result_type(x, weight, bias).

    weight, bias: [x.shape[-1]] of x's dtype, or float32 for a float16/bfloat16
    x (the output is then float32), one dtype for both. The variance is
    computed from the centered row (exact for inputs with a large mean). Saves
    x and a float32 mean and rstd per row for the backward; the gradients of
    weight and bias are summed in float32 in a fixed order.
    out_dtype: None for the dtype above; for a float32 x (parameters float32
    or absent) also float16 or bfloat16, rounded once from the float32 result:
    the values autocast's matmuls would cast a float32 output to, without the
    float32 tensor (the backward then takes the gradient in out_dtype).
    """
    _norm.check_out_dtype_type("layer_norm", out_dtype)
    try:
        if CPP_AUTOGRAD:
            return _layer_norm(x, weight, bias, eps, out_dtype)
        if _checks.needs_autograd("layer_norm", x, weight, bias):
            return _LayerNorm.apply(x, weight, bias, eps, out_dtype)
        return _layer_norm_nograd(x, weight, bias, eps, out_dtype)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    def reference(x, weight, bias):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, 1e-5)

    return {"x": randn(3, 31, 257) + 3.0, "weight": randn(257), "bias": randn(257)}, {}, reference, ()


def _fake(x, weight=None, bias=None, eps=1e-5, out_dtype=None):
    return _norm.fake_forward("layer_norm", x, None, weight, bias, True, out_dtype)[0]


def _forward_fake(x, weight, bias, eps, out_dtype):
    out, _, mean, rstd = _norm.fake_forward("layer_norm", x, None, weight, bias, True, out_dtype)
    return out, mean, rstd


def _backward_fake(grad, x, weight, mean, rstd, grad_summed, output_mask):
    return _norm.fake_backward(grad, x, output_mask)


torch.library.register_fake("fusedops::layer_norm")(_fake)
torch.library.register_fake("fusedops::_layer_norm_nograd")(_fake)
torch.library.register_fake("fusedops::_layer_norm_forward")(_forward_fake)
torch.library.register_fake("fusedops::_layer_norm_backward")(_backward_fake)


# ---- autograd -----------------------------------------------------------------------------


def grads(ctx, grad, grad_summed, saved, backward=_layer_norm_backward) -> tuple:
    """(grad_x, grad_weight, grad_bias) by `backward` (add_layer_norm's is
    _add_layer_norm_backward); saved: (x, weight, mean, rstd)."""
    return _norm.grads(backward, ctx, grad, grad_summed, saved, (), params=2)


def _setup(ctx, inputs, output, saved):
    x, weight, bias, _, _ = inputs
    _norm.set_needs_grad(ctx, 1, (weight, bias))
    ctx.save_for_backward(x, weight, *saved)


def _backward(ctx, grad):
    return (*grads(ctx, grad, None, ctx.saved_tensors), None, None)


_LayerNorm = _autograd.function("_LayerNorm", _layer_norm_forward, _setup, _backward, outputs=1)


# torch.ops.fusedops.layer_norm's autograd (opcheck, direct torch.ops callers):
# the op returns out only, so the backward recomputes mean and rstd.
def _setup_op(ctx, inputs, output):
    x, weight, bias, eps, _ = inputs
    _norm.set_needs_grad(ctx, 1, (weight, bias))
    ctx.eps = eps
    ctx.save_for_backward(x, weight, bias)


def _backward_op(ctx, grad):
    x, weight, bias = ctx.saved_tensors
    with torch.no_grad():
        _, mean, rstd = _layer_norm_forward(x, weight, bias, ctx.eps, None)
    return (*grads(ctx, grad, None, (x, weight, mean, rstd)), None, None)


if not CPP_AUTOGRAD:  # else accel/norm/ registered both
    torch.library.register_autograd("fusedops::layer_norm", _backward_op, setup_context=_setup_op)
    torch.library.register_autograd("fusedops::_layer_norm_backward", _norm.no_double_backward("layer_norm"),
                                    setup_context=lambda ctx, inputs, output: None)
