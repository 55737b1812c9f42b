"""What the four normalization ops (rms_norm, add_rms_norm, layer_norm,
add_layer_norm) share on the Python side: the checks of their shape functions
(worded as cpp/norm/norm.cpp words them), the shapes and dtypes of their
outputs, and their autograd: the backward ops' calls with the gradient of
`summed` added to x's, and the refusal of a double backward.

Kernels: cpp/norm/ and cuda/norm/; the ops are listed in cpp/norm/norm.h.
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks

HALF_TYPES = (torch.float16, torch.bfloat16)


def _check_param(op: str, arg: str, p: torch.Tensor, x: torch.Tensor) -> None:
    _checks.check_floating(op, arg, p)
    if p.dtype != x.dtype and not (x.dtype in HALF_TYPES and p.dtype == torch.float32):
        wide = " or float32" if x.dtype in HALF_TYPES else ""
        _checks.fail(op, f"{arg} must have the same dtype as x ({_checks.dtype_name(x.dtype)}){wide}, "
                         f"got {_checks.dtype_name(p.dtype)}")
    if p.device != x.device:
        _checks.fail(op, f"{arg} must be on the same device as x ({x.device}), got {p.device}")
    if p.dim() != 1 or p.shape[0] != x.shape[-1]:
        _checks.fail(op, f"{arg} must be 1-D of x's last size ({x.shape[-1]}), got shape {_checks.shape_text(p.shape)}")


def check_forward(op: str, x, residual=None, weight=None, bias=None) -> None:
    """The forward's argument checks (check_forward in cpp/norm/norm.cpp)."""
    _checks.check_floating(op, "x", x)
    if x.dim() < 1:
        _checks.fail(op, "x must have at least 1 dimension [..., hidden], got a 0-dim tensor")
    if residual is not None:
        _checks.check_same_dtype_device(op, "x", x, "residual", residual)
        if residual.shape != x.shape:
            _checks.fail(op, f"residual of shape {_checks.shape_text(residual.shape)} must have x's shape "
                             f"{_checks.shape_text(x.shape)}")
    if weight is not None:
        _check_param(op, "weight", weight, x)
    if bias is not None:
        _check_param(op, "bias", bias, x)
        if weight is not None:
            _checks.check_same_dtype_device(op, "weight", weight, "bias", bias)


def default_out_dtype(x, weight=None, bias=None) -> torch.dtype:
    """torch.result_type(x, weight, bias) for the dtypes the checks allow."""
    params = weight if weight is not None else bias
    return params.dtype if params is not None and params.dtype == torch.float32 else x.dtype


def check_out_dtype_type(op: str, out_dtype) -> None:
    """out_dtype is a torch.dtype or None (the public functions' check: the
    schema's ScalarType takes nothing else)."""
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        raise TypeError(f"fusedops.{op}: out_dtype must be a torch.dtype or None, got {type(out_dtype).__name__}")


def out_dtype_of(op: str, x, weight, bias, out_dtype) -> torch.dtype:
    """The output's dtype (out_dtype_of in cpp/norm/norm.cpp): the default, or
    out_dtype where it is the default or (a float32 x) float16 or bfloat16."""
    wide = default_out_dtype(x, weight, bias)
    if out_dtype is None:
        return wide
    narrow_allowed = x.dtype == torch.float32
    if out_dtype != wide and not (narrow_allowed and out_dtype in HALF_TYPES):
        also = ", float16 or bfloat16" if narrow_allowed else ""
        _checks.fail(op, f"out_dtype must be {_checks.dtype_name(wide)} (the default){also} for a "
                         f"{_checks.dtype_name(x.dtype)} x, got {_checks.dtype_name(out_dtype)}")
    return out_dtype


def stats(x) -> torch.Tensor:
    """A fake mean or rstd: one per row of x, in float32 (float64 for float64)."""
    return x.new_empty(x.shape[:-1], dtype=torch.float64 if x.dtype == torch.float64 else torch.float32)


def fake_forward(op: str, x, residual, weight, bias, center: bool, out_dtype=None) -> tuple:
    """The fake (out, summed, mean, rstd) of a forward, None where the op has none."""
    check_forward(op, x, residual, weight, bias)
    out = x.new_empty(x.shape, dtype=out_dtype_of(op, x, weight, bias, out_dtype))
    return (out, None if residual is None else x.new_empty(x.shape), stats(x) if center else None, stats(x))


def fake_backward(grad, x, output_mask) -> tuple:
    """The fake gradients of a backward op (grad_x, then the parameters' in the
    wider of grad's and x's dtype, as norm_backward in cpp/norm/norm.cpp)."""
    params = grad.dtype if grad.dtype.itemsize > x.dtype.itemsize else x.dtype
    shapes = [(x.shape, x.dtype)] + [((x.shape[-1],), params)] * (len(output_mask) - 1)
    return tuple(x.new_empty(shape, dtype=dtype) if needed else x.new_empty([0])
                 for (shape, dtype), needed in zip(shapes, output_mask, strict=True))


def grads(backward_op, ctx, grad, grad_summed, saved, options: tuple, params: int) -> tuple:
    """The gradients of x, and of the `params` parameters, by `backward_op`
    (None where not asked for); `saved`: (x or summed, weight, mean..., rstd),
    `options` its arguments after the statistics (offset for rms_norm).
    ctx.needs_grad: whether x (or x and residual) and each parameter need one.
    A gradient arriving at summed only (grad None) is x's gradient itself."""
    needs_x, needs_params = ctx.needs_grad
    if grad is None:
        return grad_summed if needs_x else None, *(None,) * params
    mask = [needs_x, *needs_params]
    x, weight, *stats_ = saved
    result = _autograd.call_backward_op(backward_op, grad, x, weight, *stats_, *options, grad_summed, mask)
    return tuple(g if needed else None for g, needed in zip(result, mask, strict=True))


def set_needs_grad(ctx, inputs: int, params: tuple) -> None:
    """ctx.needs_grad for grads(): the first `inputs` of the op's inputs are
    x (and residual: they get the same gradient), then the parameters."""
    needs = ctx.needs_input_grad
    ctx.needs_grad = (any(needs[:inputs]),
                      [p is not None and needs[inputs + i] for i, p in enumerate(params)])


def summed_only_from_x(ctx, summed) -> None:
    """summed = x + residual takes no gradient where neither needs one (only
    the parameters do), as in PyTorch; grads() sees None for an unused output."""
    ctx.set_materialize_grads(False)
    if not ctx.needs_grad[0]:
        ctx.mark_non_differentiable(summed)


def no_double_backward(op: str):
    """The autograd of a backward op: it is not itself differentiable. (Where the
    accelerator is loaded, accel/common/double_backward.cpp's kernel does this.)"""
    def backward(ctx, *grads):
        raise RuntimeError(f"fusedops.{op}: double backward is not supported (its backward is not itself "
                           "differentiable); use torch ops where higher-order gradients are needed")
    return backward
