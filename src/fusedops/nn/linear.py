"""fusedops.nn's linear layers: Linear (with its fused epilogue) and
LinearCrossEntropy (a language model's head and its loss), both torch.nn.Linear
subclasses whose state dicts load both ways."""

from __future__ import annotations

import torch

from ..ops.linear import ACTIVATIONS, linear
from ..ops.linear_cross_entropy import linear_cross_entropy


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
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self._configure(activation, min, max)

    def _configure(self, activation: str | None, min: float | None, max: float | None) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(
                f'fusedops.nn.Linear: activation must be None, "relu", "gelu" or "gelu_tanh", got {activation!r}'
            )
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
        new = _sharing_parameters(cls, module)
        new._configure(activation, min, max)
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


class LinearCrossEntropy(torch.nn.Linear):
    """A language model's head and its loss in one op: forward(x, target) is
    F.cross_entropy(F.linear(x, weight, bias).float(), target, ...) without the
    logits of all tokens (fusedops.linear_cross_entropy).

    A torch.nn.Linear subclass with the same parameters (weight [vocab, hidden],
    bias [vocab] or None), so state dicts load both ways; `from_linear(lm_head)`
    shares an existing head's parameters (tied embeddings stay tied). The loss
    options are configuration, not state.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = False,
        *,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
        softcap: float | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self._configure(ignore_index, reduction, label_smoothing, softcap)

    def _configure(self, ignore_index: int, reduction: str, label_smoothing: float, softcap: float | None) -> None:
        self.ignore_index = int(ignore_index)
        self.reduction = reduction
        self.label_smoothing = float(label_smoothing)
        self.softcap = None if softcap is None else float(softcap)

    @classmethod
    def from_linear(cls, module: torch.nn.Linear, *, ignore_index: int = -100, reduction: str = "mean",
                    label_smoothing: float = 0.0, softcap: float | None = None) -> LinearCrossEntropy:
        """A LinearCrossEntropy sharing `module`'s parameters (no copy)."""
        new = _sharing_parameters(cls, module)
        new._configure(ignore_index, reduction, label_smoothing, softcap)
        return new

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return linear_cross_entropy(x, self.weight, target, self.bias, ignore_index=self.ignore_index,
                                    reduction=self.reduction, label_smoothing=self.label_smoothing,
                                    softcap=self.softcap)

    def extra_repr(self) -> str:
        text = super().extra_repr() + f", reduction={self.reduction!r}"
        if self.ignore_index != -100:
            text += f", ignore_index={self.ignore_index}"
        if self.label_smoothing:
            text += f", label_smoothing={self.label_smoothing}"
        if self.softcap is not None:
            text += f", softcap={self.softcap}"
        return text


def _sharing_parameters(cls: type, module: torch.nn.Linear) -> torch.nn.Linear:
    """An instance of `cls` (a torch.nn.Linear subclass) holding `module`'s own
    weight and bias (no copy), in its training mode; the caller configures it."""
    if not isinstance(module, torch.nn.Linear):
        raise TypeError(f"fusedops.nn.{cls.__name__}.from_linear: expected a torch.nn.Linear, got "
                        f"{type(module).__name__}")
    new = cls.__new__(cls)
    torch.nn.Module.__init__(new)
    new.in_features = module.in_features
    new.out_features = module.out_features
    new.weight = module.weight
    new.bias = module.bias
    if new.bias is None:
        new.register_parameter("bias", None)
    new.train(module.training)
    return new
