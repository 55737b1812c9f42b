"""What fusedops.swiglu and fusedops.geglu share, act(gate) * up: the shape
functions, the autograd and the call of the public function.

Kernels: cpp/gated/ (schemas, checks, CPU, CUDA glue) and cuda/gated/; C++
autograd: accel/gated/. The backward op recomputes act(gate) from the saved
gate and up: the product is never saved.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import _autograd, _checks

# geglu's approximate (cpp/gated/gated.cpp checks the same list).
APPROXIMATE = ("none", "tanh")


def output_shape(op: str, gate: torch.Tensor, up: torch.Tensor | None) -> list:
    """cpp/gated/gated.cpp's output_shape, message for message."""
    _checks.check_floating(op, "gate", gate)
    if up is not None:
        _checks.check_floating(op, "up", up)
        _checks.check_same_dtype_device(op, "gate", gate, "up", up)
        if up.shape != gate.shape:
            _checks.fail(op, f"up of shape {_checks.shape_text(up.shape)} must have gate's shape "
                             f"{_checks.shape_text(gate.shape)}")
        return list(gate.shape)
    if gate.dim() == 0:
        _checks.fail(op, "gate must have at least 1 dimension when up is None (its last is split into gate and "
                         "up halves)")
    if gate.shape[-1] % 2 != 0:
        _checks.fail(op, f"gate's last dimension must be even when up is None (split into gate and up halves), "
                         f"got gate of shape {_checks.shape_text(gate.shape)}")
    return [*gate.shape[:-1], gate.shape[-1] // 2]


def check_approximate(approximate="none") -> None:
    if approximate not in APPROXIMATE:
        _checks.fail("geglu", f'approximate must be "none" or "tanh", got "{approximate}"')


def _backward_shapes(op: str, grad, gate, up) -> tuple[torch.Tensor, torch.Tensor]:
    shape = output_shape(op, gate, up)
    _checks.check_floating(op, "grad", grad)
    _checks.check_same_dtype_device(op, "gate", gate, "grad", grad)
    if list(grad.shape) != shape:
        _checks.fail(op, f"grad of shape {_checks.shape_text(grad.shape)} must have the output's shape "
                         f"{_checks.shape_text(shape)}")
    return gate.new_empty(gate.shape), gate.new_empty(shape if up is not None else (0,))


def _setup_context(ctx, inputs, output):
    gate, up, *options = inputs  # options: geglu's approximate
    ctx.save_for_backward(*((gate,) if up is None else (gate, up)))  # a saved None is dropped in some graphs
    ctx.options = options


def register(op: str, nograd: Callable, check_options: Callable[..., None]) -> type:
    """Registers the shape functions of op, _op_nograd and _op_backward, the
    autograd of op unless the accelerator has it, and a refusal of double
    backward; returns the autograd.Function the public function applies where
    the accelerator does not serve (see _autograd.py), on `nograd` (the
    _op_nograd op's callable). check_options checks the ops' arguments after
    up (geglu's approximate)."""
    backward_op = getattr(torch.ops.fusedops, f"_{op}_backward").default

    def shape(gate, up=None, *args, **kwargs):
        check_options(*args, **kwargs)
        return gate.new_empty(output_shape(op, gate, up))

    def backward_shape(grad, gate, up, *args, **kwargs):
        check_options(*args, **kwargs)
        return _backward_shapes(op, grad, gate, up)

    def backward(ctx, grad):
        gate, up = (*ctx.saved_tensors, None)[:2]
        grad_gate, grad_up = _autograd.call_backward_op(backward_op, grad, gate, up, *ctx.options)
        # One per input as called: traced calls may leave trailing defaults out.
        return tuple(g if needed else None for g, needed in
                     zip((grad_gate, grad_up if up is not None else None, None), ctx.needs_input_grad, strict=False))

    def no_double_backward(ctx, *grads):
        raise RuntimeError(f"fusedops.{op}: double backward is not supported (its backward is not itself "
                           "differentiable)")

    torch.library.register_fake(f"fusedops::{op}")(shape)
    torch.library.register_fake(f"fusedops::_{op}_nograd")(shape)
    torch.library.register_fake(f"fusedops::_{op}_backward")(backward_shape)
    if not _autograd.cpp(op):  # else accel/gated/ registered both
        torch.library.register_autograd(f"fusedops::{op}", backward, setup_context=_setup_context)
        torch.library.register_autograd(f"fusedops::_{op}_backward", no_double_backward,
                                        setup_context=lambda ctx, inputs, output: None)
    return _autograd.function(f"_{op}_function", nograd, _setup_context, backward)
