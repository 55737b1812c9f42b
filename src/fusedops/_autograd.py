"""The autograd paths of the public functions.

Where the wheel carries a C++ autograd accelerator for the running torch
minor (_accelerator.py), it covers the public ops (`cpp(op)`): the public
functions call the op itself, and the op modules register no Python autograd.

Otherwise each op registers its autograd on its torch.ops op with
torch.library.register_autograd, which is what a direct torch.ops call and
torch.library.opcheck use. That path costs tens of microseconds of Python per
call (the dispatcher calls a Python kernel, which fills in the schema's
defaults and re-dispatches), which bounds mid-size training steps by the host.
The public functions therefore call `apply`: an autograd.Function around the
op's `_nograd` twin, or around a forward op that also returns what the
backward reads (linear's z, a norm's rstd), with the same backward formula.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from . import _loader


def cpp(op: str) -> bool:
    """Whether the public op `op` has C++ autograd here."""
    return _loader.AUTOGRAD is not None and op in _loader.AUTOGRAD.ops


def direct(op: torch._ops.OpOverload, entry: str | None = None) -> Callable:
    """The C++ callable behind `op`. OpOverload.__call__ only forwards to it, and
    that Python frame is a fifth of a small op's host cost (0.7 of 4.2 us for a
    16x16 add on the CPU). With `entry` (a public op the accelerator covers),
    the accelerator's C entry for it where there is one: it calls the typed op
    without OpOverload._op's generic argument parsing (another fifth), and hands
    any call it does not take (tensor subclasses, torch-function modes, other
    argument types) to OpOverload._op. torch.compile, which cannot trace either,
    traces `op` in its place."""
    call = op._op
    if entry is not None and cpp(entry) and _loader.AUTOGRAD.entry is not None:
        call = _loader.AUTOGRAD.entry(entry, call)
    torch.compiler.substitute_in_graph(call, skip_signature_check=True)(lambda *args: op(*args))
    return call


def raise_out_of_memory(error: RuntimeError) -> None:
    """Re-raises `error`, as torch.OutOfMemoryError where it is the stable
    library's CUDA out-of-memory error (the stable ABI carries no exception
    types; the accelerator translates it in C++, but not where autograd is
    skipped, as under inference_mode)."""
    if not isinstance(error, torch.OutOfMemoryError) and ": CUDA out of memory" in str(error):
        raise torch.OutOfMemoryError(str(error)) from None
    raise error


def function(name: str, forward: Callable, setup_context: Callable, backward: Callable, *,
             outputs: int | None = None) -> type:
    """An autograd.Function that runs the no-autograd op `forward`, then
    `setup_context(ctx, inputs, output)`, with `backward(ctx, *grads)`. With
    `outputs`, `forward` returns (outputs..., saved...): the first `outputs`
    are the Function's (one tensor for 1), the rest only what the backward
    reads, handed over as `setup_context(ctx, inputs, output, saved)`."""

    def forward_with_context(ctx, *inputs):
        result = forward(*inputs)
        if outputs is None:
            setup_context(ctx, inputs, result)
            return result
        output = result[0] if outputs == 1 else tuple(result[:outputs])
        setup_context(ctx, inputs, output, tuple(result[outputs:]))
        return output

    return type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward_with_context),
        "backward": staticmethod(backward),
    })


def call_backward_op(op, *args):
    """A compiled backward op, whose own autograd only refuses a double
    backward: skipped (it is a Python kernel) unless a graph of the gradient is
    being built (create_graph=True). torch.compile traces the plain call (its
    graphs have no per-call Python cost)."""
    try:
        if torch.is_grad_enabled() or torch.compiler.is_compiling():
            return op(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)
    except RuntimeError as error:
        raise_out_of_memory(error)
