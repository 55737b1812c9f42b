"""fusedops.linear: the public function.

Kernels: cpp/linear.cpp and cuda/linear.cpp (ATen glue, autograd and autocast
in C++ until the op moves to the stable ABI).
"""

from __future__ import annotations

import torch


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
