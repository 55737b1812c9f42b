"""fusedops.linear: shape functions, autograd, autocast, the cuBLAS math flags
and the public function.

Kernels: cpp/linear/ (schemas, checks, CPU, CUDA glue over cuBLASLt) and
cuda/linear/ (epilogue and gradient kernels). The ops are listed in
cpp/linear/linear.h.
"""

from __future__ import annotations

import torch

from .. import _checks

_linear = torch.ops.fusedops.linear.default
_linear_nograd = torch.ops.fusedops._linear_nograd.default
_linear_forward = torch.ops.fusedops._linear_forward.default
_linear_backward = torch.ops.fusedops._linear_backward.default

_ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh")


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
    if x.is_cuda:
        if torch.is_autocast_enabled("cuda"):
            x, weight, bias = _autocast("cuda", x, weight, bias)
        math = _cublas_math(x.dtype)
    else:
        if x.is_cpu and torch.is_autocast_enabled("cpu"):
            x, weight, bias = _autocast("cpu", x, weight, bias)
        math = 0
    # Positional arguments: keyword parsing costs about 1 us a call.
    if _checks.needs_autograd("linear", x, weight, bias):
        return _linear_forward(x, weight, bias, activation, min, max, math)[0]
    return _linear_nograd(x, weight, bias, activation, min, max, math)


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


# ---- cuBLAS math flags --------------------------------------------------------------------

# The getters behind torch.backends.cuda.matmul's attributes (which cost ~0.8 us
# each through its __getattr__). The reduction getters return (allow reduced
# precision, allow split-K) in newer torch and a bool before.
_get_tf32 = torch._C._get_cublas_allow_tf32
_get_fp16_reduction = torch._C._get_cublas_allow_fp16_reduced_precision_reduction
_get_bf16_reduction = torch._C._get_cublas_allow_bf16_reduced_precision_reduction


def _reduction_option(allowed) -> int:
    """torch's CuBLASReductionOption: 0 reduced precision (with split-K), 1
    full precision with split-K, 2 neither."""
    reduced, split_k = allowed if isinstance(allowed, tuple) else (allowed, True)
    return 0 if reduced else 1 if split_k else 2


@torch.compiler.assume_constant_result
def _cublas_math(dtype: torch.dtype) -> int:
    """The ops' `cublas_math` argument (see CublasMath in cpp/linear/linear.h):
    torch.backends.cuda.matmul's flags that apply to `dtype`, as F.linear reads
    them. The stable ABI cannot read them in C++. Under torch.compile this is a
    constant of the graph: dynamo's global-state guard re-traces when a flag
    changes."""
    if dtype == torch.float32:
        return int(_get_tf32())
    if dtype == torch.float16:
        return _reduction_option(_get_fp16_reduction()) << 1
    if dtype == torch.bfloat16:
        return _reduction_option(_get_bf16_reduction()) << 3
    return 0


# ---- shape functions ----------------------------------------------------------------------


def _needs_aux(activation, min, max) -> bool:
    """Checks `activation`; whether the backward needs the pre-activation z
    (LinearEpilogue::needs_aux: any activation but relu, or a clamp; a bound
    min <= 0 after relu changes nothing)."""
    if activation not in _ACTIVATIONS:
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


def _save(ctx, x, weight, bias, epilogue, out, aux) -> None:
    """Saves x only when weight needs a gradient and weight only when x does,
    and of the output side only what _linear_backward reads: aux (z) when the
    epilogue needs it, out for relu alone. Without an aux (the public op,
    which returns out only) z is recomputed in the backward from x, weight and
    bias."""
    needs_x, needs_weight = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.epilogue = epilogue
    ctx.has_bias = bias is not None
    ctx.recompute = _needs_aux(*epilogue) and aux is None
    if ctx.recompute:
        ctx.save_for_backward(x, weight, bias)
        return
    saved = aux if _needs_aux(*epilogue) else out if epilogue[0] == "relu" else None
    ctx.save_for_backward(x if needs_weight else None, weight if needs_x else None, saved)


def _grads(ctx, grad):
    """(grad_x, grad_weight, grad_bias), None where not asked for."""
    mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.has_bias and ctx.needs_input_grad[2]]
    if not any(mask):
        return None, None, None
    math = _cublas_math(grad.dtype) if grad.is_cuda else 0
    if ctx.recompute:
        x, weight, bias = ctx.saved_tensors
        with torch.no_grad():  # z is a constant of the gradient formula
            saved = _linear_nograd(x, weight, bias, None, None, None, math)
    else:
        x, weight, saved = ctx.saved_tensors
    empty = grad.new_empty(0)
    pick = [empty if t is None else t for t in (x, weight, saved)]
    grads = _linear_backward(grad, *pick, *ctx.epilogue, mask, math)
    return tuple(g if needed else None for g, needed in zip(grads, mask, strict=True))


def _setup_forward(ctx, inputs, output):
    x, weight, bias, activation, min, max, _math = inputs
    out, aux = output
    ctx.mark_non_differentiable(aux)
    _save(ctx, x, weight, bias, (activation, min, max), out, aux)


def _backward_forward(ctx, grad, _grad_aux):
    return (*_grads(ctx, grad), None, None, None, None)


def _setup_linear(ctx, inputs, keyword_only_inputs, output):
    x, weight, bias = inputs
    epilogue = tuple(keyword_only_inputs[name] for name in ("activation", "min", "max"))
    _save(ctx, x, weight, bias, epilogue, output, None)


def _backward_linear(ctx, grad):
    return _grads(ctx, grad)


def _no_double_backward(ctx, *grads):
    raise RuntimeError("fusedops.linear: double backward is not supported (fusedops.linear's backward is not "
                       "itself differentiable); use F.linear and torch ops where higher-order gradients are needed")


torch.library.register_autograd("fusedops::_linear_forward", _backward_forward, setup_context=_setup_forward)
torch.library.register_autograd("fusedops::linear", _backward_linear, setup_context=_setup_linear)
torch.library.register_autograd("fusedops::_linear_backward", _no_double_backward,
                                setup_context=lambda ctx, inputs, output: None)
