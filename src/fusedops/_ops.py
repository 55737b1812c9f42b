"""The public functions of the ops still on the ATen glue: thin wrappers over
torch.ops.fusedops (an op on the stable ABI has its module in ops/)."""

from __future__ import annotations

import torch

__all__ = ["linear", "scale_bias_clamp"]


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
    op = torch.ops.fusedops.linear.default
    if activation is None and min is None and max is None:
        return op(x, weight, bias)  # keyword parsing costs about 1 us a call
    return op(x, weight, bias, activation=activation, min=min, max=max)


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
