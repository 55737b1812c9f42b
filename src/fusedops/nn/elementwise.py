"""fusedops.nn's elementwise modules: ScaleBiasClamp."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..ops.scale_bias_clamp import scale_bias_clamp


class ScaleBiasClamp(torch.nn.Module):
    """y = clamp(x * scale + bias, min, max) with a per-feature bias.

    shape: the bias shape, broadcast against the input from the right (e.g. the
    last dimension `C`, or `(C, 1, 1)` for NCHW). The bias starts at zeros; the
    scale is a 0-dim tensor starting at `scale`, a Parameter when
    `learnable_scale`, otherwise a buffer (still saved in the state_dict).
    """

    def __init__(self, shape: int | Sequence[int], *, min: float | None = None,
                 max: float | None = None, scale: float = 1.0, learnable_scale: bool = True,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.min = min
        self.max = max
        self.init_scale = float(scale)
        self.learnable_scale = learnable_scale
        self.bias = torch.nn.Parameter(torch.empty(self.shape, **factory))
        scale_tensor = torch.empty((), **factory)
        if learnable_scale:
            self.scale = torch.nn.Parameter(scale_tensor)
        else:
            self.register_buffer("scale", scale_tensor)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.bias.zero_()
            self.scale.fill_(self.init_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scale_bias_clamp(x, self.scale, self.bias, self.min, self.max)

    def extra_repr(self) -> str:
        return (f"shape={self.shape}, min={self.min}, max={self.max}, "
                f"learnable_scale={self.learnable_scale}")
