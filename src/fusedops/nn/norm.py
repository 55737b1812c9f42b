"""fusedops.nn's normalization layers: RMSNorm and LayerNorm (over the last
dimension, state dicts as torch.nn's).

autocast_output=True is for a norm whose output feeds one of autocast's
matmuls only (a block's norm before its qkv or fc1 Linear): under autocast a
float32 x's output comes in autocast's dtype, the values that matmul would cast
it to, without the float32 tensor and its cast (and the cast back of its
gradient). Where it fed several, their gradients would be summed in autocast's
dtype, not in float32 as eager sums them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..ops.layer_norm import layer_norm
from ..ops.rms_norm import rms_norm


def _last_dim(module: str, normalized_shape: int | Sequence[int]) -> tuple[int]:
    """normalized_shape as a 1-tuple: the fused norms normalize over the last dim only."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) != 1:
        raise ValueError(f"fusedops.nn.{module}: normalizes over the last dimension only: normalized_shape must be "
                         f"an int or of length 1, got {shape}")
    return shape


def _autocast_dtype(module: torch.nn.Module, x: torch.Tensor) -> torch.dtype | None:
    """The out_dtype `module` passes for x: with autocast_output, the dtype
    autocast's matmuls cast a float32 x to, where autocast is on for x's device
    type; else None (the norm's own output dtype)."""
    device = x.device.type
    # (torch.amp.is_autocast_available breaks a torch.compile graph here on torch 2.11.)
    if (not module.autocast_output or x.dtype != torch.float32 or device not in ("cpu", "cuda")
            or not torch.is_autocast_enabled(device)):
        return None
    return torch.get_autocast_dtype(device)


class RMSNorm(torch.nn.Module):
    """x * rsqrt(mean(x^2, -1) + eps) * (offset + weight) as one fused op
    (fusedops.rms_norm).

    Its state is one `weight` [dim] (none without elementwise_affine), so the
    state dicts of torch.nn.RMSNorm and HF's LlamaRMSNorm load both ways.
    `weight` starts at 1 - offset, which makes the scale 1: ones as torch's and
    Llama's do, zeros with offset=1.0 as Gemma's GemmaRMSNorm does. eps=None
    means torch.finfo(x.dtype).eps, as in torch.nn.RMSNorm; `variance_epsilon`
    (HF's name) is eps too. autocast_output: see the module's docstring.
    """

    autocast_output = False  # (the class's, for modules pickled before the option)

    def __init__(self, dim: int | Sequence[int], eps: float | None = 1e-6, *, offset: float = 0.0,
                 elementwise_affine: bool = True, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None, autocast_output: bool = False) -> None:
        super().__init__()
        self.normalized_shape = _last_dim("RMSNorm", dim)
        self.eps = eps
        self.offset = float(offset)
        self.autocast_output = autocast_output
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    @classmethod
    def from_rms_norm(cls, module: torch.nn.Module, *, offset: float = 0.0,
                      autocast_output: bool = False) -> RMSNorm:
        """A fusedops RMSNorm sharing `module`'s weight (no copy): a torch.nn.RMSNorm,
        or any module with a 1-D `weight` and `eps` or `variance_epsilon` (HF's
        LlamaRMSNorm and its copies; offset=1.0 for Gemma's)."""
        weight = getattr(module, "weight", None)
        eps = getattr(module, "eps", getattr(module, "variance_epsilon", None))
        if weight is None or weight.dim() != 1:
            raise TypeError(f"fusedops.nn.RMSNorm.from_rms_norm: expected a module with a 1-D weight, got "
                            f"{type(module).__name__}")
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.normalized_shape = (weight.shape[0],)
        new.eps = eps
        new.offset = float(offset)
        new.autocast_output = autocast_output
        new.elementwise_affine = True
        new.weight = weight
        new.train(module.training)
        return new

    @property
    def variance_epsilon(self) -> float | None:
        return self.eps

    def reset_parameters(self) -> None:
        if self.weight is not None:
            with torch.no_grad():
                self.weight.fill_(1.0 - self.offset)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        return rms_norm(x, self.weight, eps, offset=self.offset, out_dtype=self.out_dtype_for(x))

    def out_dtype_for(self, x: torch.Tensor) -> torch.dtype | None:
        """The out_dtype this module passes to its op for x (None: the op's default)."""
        return _autocast_dtype(self, x)

    def extra_repr(self) -> str:
        text = f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        text += f", offset={self.offset}" if self.offset else ""
        return text + (", autocast_output=True" if self.autocast_output else "")


class LayerNorm(torch.nn.LayerNorm):
    """F.layer_norm over the last dim as one fused op (fusedops.layer_norm).

    A torch.nn.LayerNorm subclass with the same parameters (weight and bias
    [dim], either may be absent), so state dicts load both ways;
    normalized_shape must be one dimension. `from_layer_norm` converts a
    torch.nn.LayerNorm, sharing its parameters. autocast_output: see the
    module's docstring.
    """

    autocast_output = False  # (the class's, for modules pickled before the option)

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None, *, autocast_output: bool = False) -> None:
        super().__init__(_last_dim("LayerNorm", normalized_shape), eps, elementwise_affine, bias,
                         device=device, dtype=dtype)
        self.autocast_output = autocast_output

    @classmethod
    def from_layer_norm(cls, module: torch.nn.LayerNorm, *, autocast_output: bool = False) -> LayerNorm:
        """A fusedops LayerNorm sharing `module`'s parameters (no copy)."""
        if not isinstance(module, torch.nn.LayerNorm):
            raise TypeError(f"fusedops.nn.LayerNorm.from_layer_norm: expected a torch.nn.LayerNorm, got "
                            f"{type(module).__name__}")
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.normalized_shape = _last_dim("LayerNorm", module.normalized_shape)
        new.eps = module.eps
        new.autocast_output = autocast_output
        new.elementwise_affine = module.elementwise_affine
        new.weight = module.weight
        new.bias = module.bias
        new.train(module.training)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps, out_dtype=self.out_dtype_for(x))

    def out_dtype_for(self, x: torch.Tensor) -> torch.dtype | None:
        """The out_dtype this module passes to its op for x (None: the op's default)."""
        return _autocast_dtype(self, x)

    def extra_repr(self) -> str:
        return super().extra_repr() + (", autocast_output=True" if self.autocast_output else "")
