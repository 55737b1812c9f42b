"""fusedops.scale_bias_clamp: the public function.

Kernels: cpp/scale_bias_clamp.cpp and cuda/scale_bias_clamp.cpp (ATen glue,
autograd in C++ until the op moves to the stable ABI).
"""

from __future__ import annotations

import torch


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
    return torch.ops.fusedops.scale_bias_clamp.default(
        x, scale_t, bias_t, scale_v, bias_v, _bound("min", min), _bound("max", max))
