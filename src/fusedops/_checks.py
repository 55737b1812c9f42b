"""The argument checks of the shape functions (register_fake), worded exactly as
the compiled kernels word theirs (cpp/common/stable.h), so that eager, meta
and torch.compile calls fail alike: "fusedops.add: b must have ...".
"""

from __future__ import annotations

import torch
from torch.autograd import forward_ad

FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def fail(op: str, message: str) -> None:
    raise RuntimeError(f"fusedops.{op}: {message}")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def shape_text(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def check_floating(op: str, arg: str, t: torch.Tensor) -> None:
    if t.dtype not in FLOATING:
        fail(op, f"{arg} must have a floating dtype (float16, bfloat16, float32 or float64), "
                 f"got {dtype_name(t.dtype)}")


def check_same_device(op: str, name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    if a.device != b.device:
        fail(op, f"{name_b} must be on the same device as {name_a} ({a.device}), got {b.device}")


def check_same_dtype_device(op: str, name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    if a.dtype != b.dtype:
        fail(op, f"{name_b} must have the same dtype as {name_a} ({dtype_name(a.dtype)}), "
                 f"got {dtype_name(b.dtype)}")
    check_same_device(op, name_a, a, name_b, b)


def broadcast_shape(op: str, name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> list:
    ndim = max(a.dim(), b.dim())
    sa = [1] * (ndim - a.dim()) + list(a.shape)
    sb = [1] * (ndim - b.dim()) + list(b.shape)
    for i, (x, y) in enumerate(zip(sa, sb, strict=True)):
        if not (x == y or x == 1 or y == 1):
            fail(op, f"{name_a} of shape {shape_text(a.shape)} and {name_b} of shape {shape_text(b.shape)} "
                     f"do not broadcast (dimension {i}: {x} vs {y})")
    return [y if x == 1 else x for x, y in zip(sa, sb, strict=True)]


def needs_autograd(op: str, *tensors) -> bool:
    """Whether a call must go through the op's autograd: a gradient is wanted.
    Otherwise the op's `_nograd` twin runs, which spares the autograd machinery.
    The ops have no forward-mode formula: a dual input is refused instead of
    its tangent being dropped. (On the path of every call: kept lean.)"""
    if forward_ad._current_level >= 0:  # inside a forward-AD dual level
        for t in tensors:
            if isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None:
                fail(op, "forward-mode AD (a dual tensor input) is not supported: no jvp formula")
    if not torch.is_grad_enabled():
        return False
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            return True
    return False
