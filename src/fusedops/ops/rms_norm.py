"""fusedops.rms_norm: shape functions, autograd and the public function (its
kernels serve add_rms_norm too).

Kernels: cpp/norm/ and cuda/norm/ (the ops are listed in cpp/norm/norm.h);
what the normalization ops share in Python: _norm.py.
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks
from . import _norm

_rms_norm = _autograd.direct(torch.ops.fusedops.rms_norm.default, "rms_norm")
_rms_norm_nograd = _autograd.direct(torch.ops.fusedops._rms_norm_nograd.default)
_rms_norm_forward = _autograd.direct(torch.ops.fusedops._rms_norm_forward.default)
_rms_norm_backward = torch.ops.fusedops._rms_norm_backward.default
CPP_AUTOGRAD = _autograd.cpp("rms_norm")


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float = 1e-6, *,
             offset: float = 0.0, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """x * rsqrt(mean(x^2, -1) + eps) * (offset + weight) over the last dim, in
    float32 (float64 for float64), rounded once to torch.result_type(x, weight).

    weight: [x.shape[-1]] of x's dtype, or float32 for a float16/bfloat16 x (the
    output is then float32, as HF's LlamaRMSNorm gives); None: no scaling (and
    offset unused). offset=1.0 is Gemma's (1 + weight). Saves x and a float32
    rstd per row for the backward; weight's gradient is summed in float32 in a
    fixed order (the same bits every call).
    out_dtype: None for the dtype above; for a float32 x (parameters float32
    or absent) also float16 or bfloat16, rounded once from the float32 result:
    the values autocast's matmuls would cast a float32 output to, without the
    float32 tensor (the backward then takes the gradient in out_dtype).
    """
    _norm.check_out_dtype_type("rms_norm", out_dtype)
    try:
        if CPP_AUTOGRAD:
            return _rms_norm(x, weight, eps, offset, out_dtype)
        if _checks.needs_autograd("rms_norm", x, weight):
            return _RmsNorm.apply(x, weight, eps, offset, out_dtype)
        return _rms_norm_nograd(x, weight, eps, offset, out_dtype)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    def reference(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + weight)

    return {"x": randn(3, 31, 257), "weight": randn(257)}, {"offset": 1.0}, reference, ()


def _fake(x, weight=None, eps=1e-6, offset=0.0, out_dtype=None):
    return _norm.fake_forward("rms_norm", x, None, weight, None, False, out_dtype)[0]


def _forward_fake(x, weight, eps, offset, out_dtype):
    out, _, _, rstd = _norm.fake_forward("rms_norm", x, None, weight, None, False, out_dtype)
    return out, rstd


def _backward_fake(grad, x, weight, rstd, offset, grad_summed, output_mask):
    return _norm.fake_backward(grad, x, output_mask)


torch.library.register_fake("fusedops::rms_norm")(_fake)
torch.library.register_fake("fusedops::_rms_norm_nograd")(_fake)
torch.library.register_fake("fusedops::_rms_norm_forward")(_forward_fake)
torch.library.register_fake("fusedops::_rms_norm_backward")(_backward_fake)


# ---- autograd -----------------------------------------------------------------------------


def grads(ctx, grad, grad_summed, saved, backward=_rms_norm_backward) -> tuple:
    """(grad_x, grad_weight) by `backward` (add_rms_norm's is
    _add_rms_norm_backward); saved: (x, weight, rstd)."""
    return _norm.grads(backward, ctx, grad, grad_summed, saved, (ctx.offset,), params=1)


def _setup(ctx, inputs, output, saved):
    x, weight, _, offset, _ = inputs
    _norm.set_needs_grad(ctx, 1, (weight,))
    ctx.offset = offset
    ctx.save_for_backward(x, weight, *saved)


def _backward(ctx, grad):
    return (*grads(ctx, grad, None, ctx.saved_tensors), None, None, None)


_RmsNorm = _autograd.function("_RmsNorm", _rms_norm_forward, _setup, _backward, outputs=1)


# torch.ops.fusedops.rms_norm's autograd (opcheck, direct torch.ops callers):
# the op returns out only, so the backward recomputes rstd.
def _setup_op(ctx, inputs, output):
    x, weight, eps, offset, _ = inputs
    _norm.set_needs_grad(ctx, 1, (weight,))
    ctx.eps, ctx.offset = eps, offset
    ctx.save_for_backward(x, weight)


def _backward_op(ctx, grad):
    x, weight = ctx.saved_tensors
    with torch.no_grad():
        _, rstd = _rms_norm_forward(x, weight, ctx.eps, ctx.offset, None)
    return (*grads(ctx, grad, None, (x, weight, rstd)), None, None, None)


if not CPP_AUTOGRAD:  # else accel/norm/ registered both
    torch.library.register_autograd("fusedops::rms_norm", _backward_op, setup_context=_setup_op)
    torch.library.register_autograd("fusedops::_rms_norm_backward", _norm.no_double_backward("rms_norm"),
                                    setup_context=lambda ctx, inputs, output: None)
