"""fusedops.scale_bias_clamp: shape functions, autograd and the public function.

Kernels: cpp/scale_bias_clamp/ (schemas, checks, CPU, CUDA glue) and
cuda/scale_bias_clamp/.
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks

OP = "scale_bias_clamp"
_scale_bias_clamp = _autograd.direct(torch.ops.fusedops.scale_bias_clamp.default, OP)
_sbc_nograd = _autograd.direct(torch.ops.fusedops._scale_bias_clamp_nograd.default)
_sbc_backward = torch.ops.fusedops._scale_bias_clamp_backward.default
CPP_AUTOGRAD = _autograd.cpp(OP)


def _number_or_tensor(name: str, value: object) -> tuple[torch.Tensor | None, float]:
    if isinstance(value, torch.Tensor):
        return value, 1.0 if name == "scale" else 0.0
    if isinstance(value, (int, float)):
        return None, float(value)
    raise TypeError(f"fusedops.scale_bias_clamp: {name} must be a number or a tensor, "
                    f"got {type(value).__name__}")


def _bound(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"fusedops.scale_bias_clamp: {name} must be a number or None, "
                    f"got {type(value).__name__}")


def scale_bias_clamp(x: torch.Tensor, scale: torch.Tensor | float, bias: torch.Tensor | float,
                     min: float | None = None, max: float | None = None) -> torch.Tensor:
    """torch.clamp(x * scale + bias, min, max) in one pass.

    scale: a number or a tensor of one element; bias: a number or a tensor that
    broadcasts to x without changing its shape ([C], [1, C], x's shape, ...).
    Tensors must have x's dtype and device. Either bound may be None. Gradients
    flow to x, scale and bias (those that are tensors requiring grad); numbers
    are passed to the kernels as such, never copied to the device.
    """
    scale_t, scale_v = _number_or_tensor("scale", scale)
    bias_t, bias_v = _number_or_tensor("bias", bias)
    args = (x, scale_t, bias_t, scale_v, bias_v, _bound("min", min), _bound("max", max))
    try:
        if CPP_AUTOGRAD:
            return _scale_bias_clamp(*args)
        if _checks.needs_autograd(OP, x, scale_t, bias_t):
            return _ScaleBiasClamp.apply(*args)
        return _sbc_nograd(*args)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    lo, hi = -0.5, 0.75
    return ({"x": randn(257, 33), "scale": randn(()), "bias": randn(33)}, {"min": lo, "max": hi},
            lambda x, scale, bias: torch.clamp(x * scale + bias, lo, hi), (lo, hi))


def _check(x, scale, bias):
    """cpp/scale_bias_clamp/scale_bias_clamp.cpp's sbc_check, message for message."""
    _checks.check_floating(OP, "x", x)
    if scale is not None:
        _checks.check_same_dtype_device(OP, "x", x, "scale", scale)
        if scale.numel() != 1:
            _checks.fail(OP, f"scale must be a number or a tensor of one element, got shape "
                             f"{_checks.shape_text(scale.shape)}")
        if scale.dim() > x.dim():
            _checks.fail(OP, f"scale of shape {_checks.shape_text(scale.shape)} has more dimensions than x of "
                             f"shape {_checks.shape_text(x.shape)} (the result must keep x's shape)")
    if bias is not None:
        _checks.check_same_dtype_device(OP, "x", x, "bias", bias)
        lead = x.dim() - bias.dim()
        if lead < 0 or not all(b == 1 or b == x.shape[lead + d] for d, b in enumerate(bias.shape)):
            _checks.fail(OP, f"bias of shape {_checks.shape_text(bias.shape)} must broadcast to x of shape "
                             f"{_checks.shape_text(x.shape)} without changing it "
                             f"(e.g. x's shape, [C] or [1, C] for x of shape [B, C])")


def _shape(x, scale, bias, scale_value=1.0, bias_value=0.0, min=None, max=None):
    _check(x, scale, bias)
    return x.new_empty(x.shape)


torch.library.register_fake("fusedops::scale_bias_clamp")(_shape)
torch.library.register_fake("fusedops::_scale_bias_clamp_nograd")(_shape)


@torch.library.register_fake("fusedops::_scale_bias_clamp_backward")
def _backward_shape(grad_out, x, scale, bias, scale_value, bias_value, min, max, output_mask):
    _check(x, scale, bias)
    _checks.check_floating(OP, "grad_out", grad_out)
    _checks.check_same_dtype_device(OP, "x", x, "grad_out", grad_out)
    if grad_out.shape != x.shape:
        _checks.fail(OP, f"grad_out of shape {_checks.shape_text(grad_out.shape)} must have x's shape "
                         f"{_checks.shape_text(x.shape)}")
    if len(output_mask) != 3:
        _checks.fail(OP, f"output_mask must have 3 elements, got {len(output_mask)}")
    # A gradient not asked for (or of a number) comes back with 0 elements.
    return tuple(x.new_empty(t.shape) if needed and t is not None else x.new_empty(0)
                 for needed, t in zip(output_mask, (x, scale, bias), strict=True))


def _setup_context(ctx, inputs, output):
    x, scale, bias, *numbers = inputs
    ctx.save_for_backward(x, scale, bias)
    ctx.numbers = numbers


def _backward(ctx, grad):
    # The kernel recomputes x * scale + bias (and the clamp mask) from x
    # instead of saving the output.
    needed = ctx.needs_input_grad[:3]
    grads = _autograd.call_backward_op(_sbc_backward, grad, *ctx.saved_tensors, *ctx.numbers, list(needed))
    return (*(g if need else None for g, need in zip(grads, needed, strict=True)), None, None, None, None)


def _no_double_backward(ctx, *grads):
    raise RuntimeError("fusedops.scale_bias_clamp: double backward is not supported")


if not CPP_AUTOGRAD:  # else accel/scale_bias_clamp/ registered both
    torch.library.register_autograd("fusedops::scale_bias_clamp", _backward, setup_context=_setup_context)
    # The backward op is not differentiable: a double backward fails loudly
    # instead of giving wrong gradients.
    torch.library.register_autograd("fusedops::_scale_bias_clamp_backward", _no_double_backward)
_ScaleBiasClamp = _autograd.function("_ScaleBiasClamp", _sbc_nograd, _setup_context, _backward)
