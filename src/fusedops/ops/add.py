"""fusedops.add: shape function, autograd and the public function.

Kernels: cpp/add/ (schema, checks, CPU, CUDA glue) and cuda/add/.
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks

_add = _autograd.direct(torch.ops.fusedops.add.default, "add")
_add_nograd = _autograd.direct(torch.ops.fusedops._add_nograd.default)
CPP_AUTOGRAD = _autograd.cpp("add")


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.add(a, b) for floating tensors of one dtype and device, with broadcasting.

    Gradients flow to both inputs, reduced to each input's shape.
    """
    try:
        if CPP_AUTOGRAD:
            return _add(a, b)
        return _Add.apply(a, b) if _checks.needs_autograd("add", a, b) else _add_nograd(a, b)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds)."""
    return {"a": randn(257, 33), "b": randn(33)}, {}, lambda a, b: a + b, ()


def _shape(a, b):
    _checks.check_floating("add", "a", a)
    _checks.check_floating("add", "b", b)
    _checks.check_same_dtype_device("add", "a", a, "b", b)
    return a.new_empty(_checks.broadcast_shape("add", "a", a, "b", b))


torch.library.register_fake("fusedops::add")(_shape)
torch.library.register_fake("fusedops::_add_nograd")(_shape)


def _setup_context(ctx, inputs, output):
    a, b = inputs
    ctx.shapes = (a.shape, b.shape)


def _backward(ctx, grad):
    # torch.add's rule: each input gets the gradient summed over the dimensions
    # it was broadcast along. Built of differentiable ops: double backward works.
    return tuple(None if not needed else grad if grad.shape == shape else grad.sum_to_size(shape)
                 for shape, needed in zip(ctx.shapes, ctx.needs_input_grad, strict=True))


if not CPP_AUTOGRAD:  # else accel/add/ registered it
    torch.library.register_autograd("fusedops::add", _backward, setup_context=_setup_context)
_Add = _autograd.function("_Add", _add_nograd, _setup_context, _backward)
