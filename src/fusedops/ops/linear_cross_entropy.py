"""fusedops.linear_cross_entropy: shape functions, autograd, autocast and the
public function.

Kernels: cpp/linear_cross_entropy/ (schemas, checks, the chunk loop, the CPU
and CUDA devices) and cuda/linear_cross_entropy/ (the row kernels). The ops
and the two ways of computing gradients are listed in
cpp/linear_cross_entropy/linear_cross_entropy.h.
"""

from __future__ import annotations

import os

import torch

from .. import _autograd, _checks
from .._cublas_math import cublas_math
from .linear import _autocast

OP = "linear_cross_entropy"
_linear_cross_entropy = _autograd.direct(torch.ops.fusedops.linear_cross_entropy.default, OP)
_lce_nograd = _autograd.direct(torch.ops.fusedops._linear_cross_entropy_nograd.default)
_lce_forward = _autograd.direct(torch.ops.fusedops._linear_cross_entropy_forward.default)
_lce_lse = _autograd.direct(torch.ops.fusedops._linear_cross_entropy_lse.default)
_lce_backward = torch.ops.fusedops._linear_cross_entropy_backward.default
_lce_scale = torch.ops.fusedops._linear_cross_entropy_scale.default
# With C++ autograd, accel/linear_cross_entropy/ also does the autocast and
# reads the cuBLAS math flags (cublas_math=-1, the schemas' default).
CPP_AUTOGRAD = _autograd.cpp(OP)

REDUCTIONS = ("mean", "sum", "none")
# V x H above which "mean" and "sum" go by vocab slabs: weight's float32
# gradient accumulator would be over 1 GiB.
SLABS_ABOVE = 1 << 28


def linear_cross_entropy(
    x: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    softcap: float | None = None,
) -> torch.Tensor:
    """F.cross_entropy(F.linear(x, weight, bias).float(), target, ignore_index=...,
    reduction=..., label_smoothing=...) without the logits of all tokens in memory.

    x: [..., H] (any strides); weight: [V, H]; bias: [V] or None; target: x's
    leading shape [...], int64 or int32. softcap: Gemma 2's logit soft-capping
    (logits -> softcap * tanh(logits / softcap) before the loss), or None.
    The loss is float32 (float64 for float64 inputs): 0-dim for "mean" (over the
    targets that are not ignore_index; NaN when all are, as torch) and "sum",
    per token of target's shape for "none" (0 where ignored).

    The tokens go through in chunks: only a chunk's logits (float32, as the GEMM
    computes them, never rounded to a half type) exist at a time. With "mean" or
    "sum" the gradients are computed in the forward pass (three GEMMs a chunk)
    into a float32 accumulator of weight's gradient, and the backward only scales
    them; where that accumulator would be over 1 GiB (V x H > 2^28), and for
    "none", the forward keeps each token's log-sum-exp and the backward
    recomputes the logits a slab of the vocab at a time (four GEMMs in all, the
    memory of a slab: weight's gradient is one GEMM over all tokens a slab,
    rounded once). FUSEDOPS_LCE_ALGORITHM=chunks or slabs chooses one. Gradients
    accumulate in float32 in a fixed order (the same bits every call); no second
    derivative. Nothing synchronizes the host (the mean's divisor stays on the
    device): CUDA graphs capture it.

    A target that is neither ignore_index nor in [0, V): on the CPU an error, as
    torch raises; on CUDA (where checking would synchronize) that token's loss
    and gradient rows are NaN, so a mean or sum is NaN: never a fault or a hang.

    HF's gradient-accumulation normalization, the "sum" divided by
    num_items_in_batch, is `linear_cross_entropy(..., reduction="sum") /
    num_items_in_batch`: exactly what HF computes. Under autocast, x, weight and
    bias are cast as F.linear casts them. Use an nn.Linear head's parameters as
    they are: `linear_cross_entropy(hidden, lm_head.weight, labels, lm_head.bias)`,
    or fusedops.nn.LinearCrossEntropy.from_linear(lm_head).
    """
    # Positional arguments: keyword parsing costs about 1 us a call.
    try:
        if CPP_AUTOGRAD:
            return _linear_cross_entropy(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap)
        if x.is_cuda:
            if torch.is_autocast_enabled("cuda"):
                x, weight, bias = _autocast("cuda", x, weight, bias)
        elif x.is_cpu and torch.is_autocast_enabled("cpu"):
            x, weight, bias = _autocast("cpu", x, weight, bias)
        options = (ignore_index, reduction, label_smoothing, softcap)
        math = cublas_math(x)
        if not _checks.needs_autograd(OP, x, weight, bias):
            return _lce_nograd(x, weight, target, bias, *options, math)
        if _by_slabs(weight, reduction):
            return _Slabs.apply(x, weight, target, bias, *options, math)
        mask = [x.requires_grad, weight.requires_grad, bias is not None and bias.requires_grad]
        return _Fused.apply(x, weight, target, bias, *options, mask, math)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    target = torch.tensor([3, 0, 40, -100, 7, 12, 40, 1, 9], device=randn(1).device).repeat(3).view(3, 9)
    return ({"x": randn(3, 9, 37), "weight": randn(41, 37) / 6, "bias": randn(41)},
            {"target": target, "label_smoothing": 0.1},
            lambda x, weight, bias: torch.nn.functional.cross_entropy(
                torch.nn.functional.linear(x, weight, bias).flatten(0, -2).to(_opmath(x.dtype)), target.flatten(),
                label_smoothing=0.1), ())


# ---- shape functions ----------------------------------------------------------------------


def _loss_shape(x, weight, target, bias, reduction, label_smoothing, softcap) -> list:
    """The checks of cpp/linear_cross_entropy/linear_cross_entropy.cpp, message
    for message, in the same order; the loss's shape."""
    _checks.check_floating(OP, "x", x)
    _checks.check_floating(OP, "weight", weight)
    _checks.check_same_dtype_device(OP, "x", x, "weight", weight)
    if x.dim() < 1:
        _checks.fail(OP, "x must have at least 1 dimension [..., hidden], got a 0-dim tensor")
    if weight.dim() != 2 or weight.shape[0] < 1:
        _checks.fail(OP, f"weight must be 2-D [vocab, hidden] with vocab >= 1, got shape "
                         f"{_checks.shape_text(weight.shape)}")
    if x.shape[-1] != weight.shape[1]:
        _checks.fail(OP, f"x of shape {_checks.shape_text(x.shape)} and weight of shape "
                         f"{_checks.shape_text(weight.shape)} do not match: x's last dimension must equal "
                         f"weight's hidden size ({weight.shape[1]})")
    if bias is not None:
        _checks.check_floating(OP, "bias", bias)
        _checks.check_same_dtype_device(OP, "x", x, "bias", bias)
        if bias.dim() != 1 or bias.shape[0] != weight.shape[0]:
            _checks.fail(OP, f"bias must be 1-D of size vocab ({weight.shape[0]}), got shape "
                             f"{_checks.shape_text(bias.shape)}")
    if target.dtype not in (torch.int64, torch.int32):
        _checks.fail(OP, f"target must have an integer dtype (int64 or int32), got {_checks.dtype_name(target.dtype)}")
    if target.device != x.device:
        _checks.fail(OP, f"target must be on the same device as x ({x.device}), got {target.device}")
    if target.shape != x.shape[:-1]:
        _checks.fail(OP, f"target of shape {_checks.shape_text(target.shape)} must have x's leading shape "
                         f"{_checks.shape_text(x.shape[:-1])}")
    if reduction not in REDUCTIONS:
        _checks.fail(OP, f'reduction must be "mean", "sum" or "none", got "{reduction}"')
    if not 0.0 <= label_smoothing <= 1.0:
        _checks.fail(OP, f"label_smoothing must be in [0, 1], got {label_smoothing:g}")
    if softcap is not None and not 0.0 < softcap < float("inf"):
        _checks.fail(OP, f"softcap must be a positive number or None, got {softcap:g}")
    return list(target.shape) if reduction == "none" else []


def _opmath(dtype: torch.dtype) -> torch.dtype:
    """The loss's dtype: float32, float64 for float64 inputs."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _loss_fake(x, weight, target, bias=None, ignore_index=-100, reduction="mean", label_smoothing=0.0,
               softcap=None, cublas_math=-1):
    return x.new_empty(_loss_shape(x, weight, target, bias, reduction, label_smoothing, softcap),
                       dtype=_opmath(x.dtype))


def _forward_fake(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap, output_mask,
                  cublas_math=-1):
    loss = _loss_fake(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap)
    if reduction == "none":
        _checks.fail(OP, '_linear_cross_entropy_forward takes reduction "mean" or "sum": with "none" the gradient '
                         "needs the incoming gradient of every token (_linear_cross_entropy_backward)")
    shapes = (x.shape, weight.shape, weight.shape[:1])
    needed = (output_mask[0], output_mask[1], output_mask[2] and bias is not None)
    return loss, *(x.new_empty(s if n else [0], dtype=loss.dtype) for s, n in zip(shapes, needed, strict=True))


def _lse_fake(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap, cublas_math=-1):
    loss = _loss_fake(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap)
    return loss, x.new_empty(x.shape[:-1].numel(), dtype=loss.dtype)


def _backward_fake(grad, x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap, output_mask,
                   cublas_math=-1, lse=None):
    _loss_fake(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap)
    shapes = (x.shape, weight.shape, weight.shape[:1])
    needed = (output_mask[0], output_mask[1], output_mask[2] and bias is not None)
    return tuple(x.new_empty(s if n else [0], dtype=x.dtype if n else grad.dtype)
                 for s, n in zip(shapes, needed, strict=True))


torch.library.register_fake("fusedops::linear_cross_entropy")(_loss_fake)
torch.library.register_fake("fusedops::_linear_cross_entropy_nograd")(_loss_fake)
torch.library.register_fake("fusedops::_linear_cross_entropy_forward")(_forward_fake)
torch.library.register_fake("fusedops::_linear_cross_entropy_lse")(_lse_fake)
torch.library.register_fake("fusedops::_linear_cross_entropy_backward")(_backward_fake)
torch.library.register_fake("fusedops::_linear_cross_entropy_scale")(
    lambda grad, saved, dtype: saved.new_empty(saved.shape, dtype=dtype))


# ---- autograd ----------------------------------------------------------------------------
# The inputs: x, weight, target, bias, then the options (ignore_index,
# reduction, label_smoothing, softcap), for _Fused the mask of gradients, and
# cublas_math: gradients for x, weight and bias only.


def _as_input_grads(grads, mask, options) -> tuple:
    """(grad_x, grad_weight, grad_bias) as the gradients of every input, None
    for the target and the `options` after bias."""
    grad_x, grad_weight, grad_bias = (g if needed else None for g, needed in zip(grads, mask, strict=True))
    return grad_x, grad_weight, None, grad_bias, *(None for _ in range(options))


def _remember(ctx, inputs) -> None:
    x, weight, target, bias, *options = inputs
    # The backward reads the matmul flags when it runs, as F.linear's does.
    ctx.options, ctx.n_options = options[:4], len(options)
    needs = ctx.needs_input_grad
    ctx.mask = [needs[0], needs[1], bias is not None and needs[3]]


def _setup_recompute(ctx, inputs, output):
    _remember(ctx, inputs)
    ctx.save_for_backward(*inputs[:4])


def _recomputed(ctx, grad, x, weight, target, bias, lse=None) -> tuple:
    """The gradients by _linear_cross_entropy_backward (by vocab slabs from
    the forward's lse, else each chunk's logits recomputed), whose own autograd
    refuses a second derivative."""
    grads = _autograd.call_backward_op(_lce_backward, grad, x, weight, target, bias, *ctx.options, ctx.mask,
                                       cublas_math(x), lse)
    return _as_input_grads(grads, ctx.mask, ctx.n_options)


def _backward_recompute(ctx, grad):
    return _recomputed(ctx, grad, *ctx.saved_tensors)


def _setup_slabs(ctx, inputs, output, saved):
    _remember(ctx, inputs)
    ctx.save_for_backward(*inputs[:4], *saved)


def _by_slabs(weight, reduction) -> bool:
    """Whether the gradients go by vocab slabs from the forward's lse (see
    linear_cross_entropy's docstring); accel/linear_cross_entropy/ has the same
    rule."""
    algorithm = os.environ.get("FUSEDOPS_LCE_ALGORITHM")
    if algorithm is not None and algorithm not in ("chunks", "slabs"):
        _checks.fail(OP, f'the environment variable FUSEDOPS_LCE_ALGORITHM must be unset, "chunks" or "slabs", '
                         f'got "{algorithm}"')
    if reduction == "none" or algorithm == "slabs":
        return True
    return algorithm is None and weight.shape[0] * weight.shape[1] > SLABS_ABOVE


def _setup_fused(ctx, inputs, output, saved):
    _remember(ctx, inputs)
    ctx.dtype = inputs[0].dtype
    ctx.save_for_backward(*inputs[:4], *saved)


def _backward_fused(ctx, grad):
    """The forward's float32 gradients times the incoming one; under
    create_graph recomputed instead, through the op whose autograd refuses a
    second derivative."""
    x, weight, target, bias, *saved = ctx.saved_tensors
    if torch.is_grad_enabled():
        return _recomputed(ctx, grad, x, weight, target, bias)
    grads = [_autograd.call_backward_op(_lce_scale, grad, s, ctx.dtype) if needed else None
             for s, needed in zip(saved, ctx.mask, strict=True)]
    return _as_input_grads(grads, ctx.mask, ctx.n_options)


# What fusedops.linear_cross_entropy runs with a gradient needed and no C++
# autograd: the gradients computed in the forward pass (_Fused), or by vocab
# slabs in the backward from the forward's lse (_Slabs: "none", and where
# _by_slabs says so).
_Fused = _autograd.function("_Fused", _lce_forward, _setup_fused, _backward_fused, outputs=1)
_Slabs = _autograd.function("_Slabs", _lce_lse, _setup_slabs, _backward_recompute, outputs=1)


def _no_double_backward(ctx, *grads):
    raise RuntimeError(f"fusedops.{OP}: double backward is not supported (its backward is not itself "
                       "differentiable); use F.cross_entropy(F.linear(...)) where higher-order gradients are needed")


if not CPP_AUTOGRAD:  # else accel/linear_cross_entropy/ registered all three
    torch.library.register_autograd(f"fusedops::{OP}", _backward_recompute, setup_context=_setup_recompute)
    for _op in ("_linear_cross_entropy_backward", "_linear_cross_entropy_scale"):
        torch.library.register_autograd(f"fusedops::{_op}", _no_double_backward,
                                        setup_context=lambda ctx, inputs, output: None)
