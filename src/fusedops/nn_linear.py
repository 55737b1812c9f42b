"""fusedops.nn.Linear: torch.nn.Linear whose forward is fusedops.linear."""

from __future__ import annotations

import torch

from .ops.linear import linear

__all__ = ["Linear"]

_ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh")


class Linear(torch.nn.Linear):
    """clamp(act(x @ weight.T + bias), min, max) as one fused op.

    A torch.nn.Linear subclass with the same parameters (weight [out, in], bias [out]
    or None), so state dicts load both ways; `activation` and the bounds are
    configuration, not state.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        activation: str | None = None,
        min: float | None = None,
        max: float | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f'fusedops.nn.Linear: activation must be None, "relu", "gelu" or "gelu_tanh", got {activation!r}'
            )
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.activation = activation
        self.min = None if min is None else float(min)
        self.max = None if max is None else float(max)

    @classmethod
    def from_linear(
        cls,
        module: torch.nn.Linear,
        *,
        activation: str | None = None,
        min: float | None = None,
        max: float | None = None,
    ) -> Linear:
        """A fusedops Linear sharing `module`'s parameters (no copy)."""
        if not isinstance(module, torch.nn.Linear):
            raise TypeError(f"fusedops.nn.Linear.from_linear: expected a torch.nn.Linear, got {type(module).__name__}")
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features = module.in_features
        new.out_features = module.out_features
        new.weight = module.weight
        new.bias = module.bias
        if new.bias is None:
            new.register_parameter("bias", None)
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f'fusedops.nn.Linear: activation must be None, "relu", "gelu" or "gelu_tanh", got {activation!r}'
            )
        new.activation = activation
        new.min = None if min is None else float(min)
        new.max = None if max is None else float(max)
        new.train(module.training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, activation=self.activation, min=self.min, max=self.max)

    def extra_repr(self) -> str:
        text = super().extra_repr()
        if self.activation is not None:
            text += f", activation={self.activation!r}"
        if self.min is not None:
            text += f", min={self.min}"
        if self.max is not None:
            text += f", max={self.max}"
        return text
