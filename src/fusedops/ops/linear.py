"""fusedops.linear: shape functions, autograd, autocast, the cuBLAS math flags
and the public function.

Kernels: cpp/linear/ (schemas, checks, CPU, CUDA glue over cuBLASLt) and
cuda/linear/ (epilogue and gradient kernels). The ops are listed in
cpp/linear/linear.h.
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks
from .._cublas_math import cublas_math as _cublas_math

_linear = _autograd.direct(torch.ops.fusedops.linear.default, "linear")
_linear_nograd = _autograd.direct(torch.ops.fusedops._linear_nograd.default)
_linear_forward = _autograd.direct(torch.ops.fusedops._linear_forward.default)
_linear_backward = torch.ops.fusedops._linear_backward.default
# With C++ autograd, accel/linear/ also does the autocast and reads the cuBLAS
# math flags (cublas_math=-1, the schemas' default).
CPP_AUTOGRAD = _autograd.cpp("linear")

# The activations the kernels know (cpp/linear/linear.cpp checks the same list).
ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh")


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    activation: str | None = None,
    min: float | None = None,
    max: float | None = None,
) -> torch.Tensor:
    """clamp(act(F.linear(x, weight, bias)), min, max) in one op.

    x: [..., in_features]; weight: [out_features, in_features]; bias: [out_features] or None;
    activation: None, "relu", "gelu" (erf) or "gelu_tanh". Autograd, autocast (like F.linear),
    torch.compile and CUDA graphs are supported; float32 follows torch.backends.cuda.matmul.allow_tf32.
    """
    # Positional arguments: keyword parsing costs about 1 us a call.
    try:
        if CPP_AUTOGRAD:
            return _linear(x, weight, bias, activation, min, max)
        if x.is_cuda:
            if torch.is_autocast_enabled("cuda"):
                x, weight, bias = _autocast("cuda", x, weight, bias)
        elif x.is_cpu and torch.is_autocast_enabled("cpu"):
            x, weight, bias = _autocast("cpu", x, weight, bias)
        math = _cublas_math(x)
        if _checks.needs_autograd("linear", x, weight, bias):
            return _LinearFunction.apply(x, weight, bias, activation, min, max, math)
        return _linear_nograd(x, weight, bias, activation, min, max, math)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    lo, hi = -0.1, 1.5
    return ({"x": randn(3, 31, 17), "weight": randn(23, 17) / 4, "bias": randn(23)},
            {"activation": "gelu", "min": lo, "max": hi},
            lambda x, weight, bias: torch.clamp(torch.nn.functional.gelu(torch.nn.functional.linear(x, weight, bias)),
                                                lo, hi), (lo, hi))


# ---- autocast ----------------------------------------------------------------------------


def _autocast(device_type: str, *tensors):
    """F.linear's autocast policy (lower_precision_fp): floating tensors on the
    autocast device, except float64, are cast to the current autocast dtype.
    (torch.library.register_autocast would cast to one fixed dtype.)"""
    dtype = torch.get_autocast_dtype(device_type)

    def cast(t):
        eligible = (t is not None and t.is_floating_point() and t.dtype != torch.float64
                    and t.device.type == device_type)
        return t.to(dtype) if eligible else t

    return tuple(cast(t) for t in tensors)


# ---- shape functions ----------------------------------------------------------------------


def _needs_aux(activation, min, max) -> bool:
    """Checks `activation`; whether the backward needs the pre-activation z
    (LinearEpilogue::needs_aux: any activation but relu, or a clamp; a bound
    min <= 0 after relu changes nothing)."""
    if activation not in ACTIVATIONS:
        _checks.fail("linear", f'activation must be None, "relu", "gelu" or "gelu_tanh", got "{activation}"')
    has_min = min is not None and not (activation == "relu" and min <= 0.0)
    return activation in ("gelu", "gelu_tanh") or has_min or max is not None


def _output_shape(x, weight, bias) -> list:
    _checks.check_floating("linear", "x", x)
    _checks.check_floating("linear", "weight", weight)
    _checks.check_same_dtype_device("linear", "x", x, "weight", weight)
    if x.dim() < 1:
        _checks.fail("linear", "x must have at least 1 dimension [..., in_features], got a 0-dim tensor")
    if weight.dim() != 2:
        _checks.fail("linear", "weight must be 2-D [out_features, in_features], got shape "
                               f"{_checks.shape_text(weight.shape)}")
    if x.shape[-1] != weight.shape[1]:
        _checks.fail("linear", f"x of shape {_checks.shape_text(x.shape)} and weight of shape "
                               f"{_checks.shape_text(weight.shape)} do not match: x's last dimension must equal "
                               f"weight's in_features ({weight.shape[1]})")
    if bias is not None:
        _checks.check_floating("linear", "bias", bias)
        _checks.check_same_dtype_device("linear", "x", x, "bias", bias)
        if bias.dim() != 1 or bias.shape[0] != weight.shape[0]:
            _checks.fail("linear", f"bias must be 1-D of size out_features ({weight.shape[0]}), got shape "
                                   f"{_checks.shape_text(bias.shape)}")
    return [*x.shape[:-1], weight.shape[0]]


def _linear_fake(x, weight, bias=None, activation=None, min=None, max=None, cublas_math=0):
    _needs_aux(activation, min, max)
    return x.new_empty(_output_shape(x, weight, bias))


def _forward_fake(x, weight, bias, activation, min, max, cublas_math=0):
    needs_aux = _needs_aux(activation, min, max)
    shape = _output_shape(x, weight, bias)
    return x.new_empty(shape), x.new_empty(shape if needs_aux else [0])


def _backward_fake(grad, x, weight, saved, activation, min, max, output_mask, cublas_math=0):
    _needs_aux(activation, min, max)
    n = grad.shape[-1]
    shapes = ([*grad.shape[:-1], weight.shape[1]], [n, x.shape[-1]], [n])
    return tuple(grad.new_empty(shape if needed else [0]) for shape, needed in zip(shapes, output_mask, strict=True))


torch.library.register_fake("fusedops::linear")(_linear_fake)
torch.library.register_fake("fusedops::_linear_nograd")(_linear_fake)
torch.library.register_fake("fusedops::_linear_forward")(_forward_fake)
torch.library.register_fake("fusedops::_linear_backward")(_backward_fake)


# ---- autograd -----------------------------------------------------------------------------


def _save(ctx, x, weight, bias, epilogue, saved, recompute=False) -> None:
    """What the backward reads: the epilogue, the mask of gradients to compute,
    x only when weight needs a gradient, weight only when x does, and `saved`
    (see _linear_backward in cpp/linear/linear.h); with `recompute`, x, weight
    and bias, from which the backward recomputes z."""
    needs_x, needs_weight, needs_bias = ctx.needs_input_grad[:3]
    ctx.epilogue = epilogue
    ctx.mask = [needs_x, needs_weight, bias is not None and needs_bias]
    ctx.recompute = recompute
    if recompute:
        ctx.save_for_backward(x, weight, bias)
    else:
        ctx.save_for_backward(x if needs_weight else None, weight if needs_x else None, saved)


def _grads(ctx, grad, x, weight, saved):
    """(grad_x, grad_weight, grad_bias) by _linear_backward, None where not
    asked for. An input no requested gradient reads goes in as grad itself (a
    stand-in the op allows: no allocation)."""
    mask = ctx.mask
    math = _cublas_math(grad)
    grads = _autograd.call_backward_op(
        _linear_backward, grad, grad if x is None else x, grad if weight is None else weight,
        grad if saved is None else saved, *ctx.epilogue, mask, math)
    return tuple(g if needed else None for g, needed in zip(grads, mask, strict=True))


def _forward(x, weight, bias, activation, min, max, math):
    """(out, saved) for the backward: z where it needs the pre-activation, out
    for relu alone (differentiated from its output), else None."""
    if _needs_aux(activation, min, max):
        return _linear_forward(x, weight, bias, activation, min, max, math)
    out = _linear_nograd(x, weight, bias, activation, min, max, math)
    return out, out if activation == "relu" else None


def _setup_function(ctx, inputs, output, saved):
    x, weight, bias, activation, min, max, _ = inputs
    _save(ctx, x, weight, bias, (activation, min, max), saved[0])


def _backward_function(ctx, grad):
    return (*_grads(ctx, grad, *ctx.saved_tensors), None, None, None, None)


# What fusedops.linear runs when a gradient is needed (see _autograd.py).
_LinearFunction = _autograd.function("_LinearFunction", _forward, _setup_function, _backward_function, outputs=1)


# torch.ops.fusedops.linear's autograd (opcheck, direct torch.ops callers): the
# op returns out only, so z, where the backward needs it, is recomputed there.
def _setup_linear(ctx, inputs, output):
    # The last input is cublas_math: the backward reads the matmul flags when it
    # runs, as F.linear's backward does.
    x, weight, bias, activation, min, max, _ = inputs
    epilogue = (activation, min, max)
    saved = output if epilogue[0] == "relu" else None
    _save(ctx, x, weight, bias, epilogue, saved, recompute=_needs_aux(*epilogue))


def _backward_linear(ctx, grad):
    x, weight, saved = ctx.saved_tensors
    if ctx.recompute:  # saved is the bias (see _save), from which z is recomputed
        with torch.no_grad():  # z is a constant of the gradient formula
            saved = _linear_nograd(x, weight, saved, None, None, None, _cublas_math(x))
    return (*_grads(ctx, grad, x, weight, saved), None, None, None, None)


def _no_double_backward(ctx, *grads):
    raise RuntimeError("fusedops.linear: double backward is not supported (fusedops.linear's backward is not "
                       "itself differentiable); use F.linear and torch ops where higher-order gradients are needed")


if not CPP_AUTOGRAD:  # else accel/linear/ registered both
    torch.library.register_autograd("fusedops::linear", _backward_linear, setup_context=_setup_linear)
    torch.library.register_autograd("fusedops::_linear_backward", _no_double_backward,
                                    setup_context=lambda ctx, inputs, output: None)
