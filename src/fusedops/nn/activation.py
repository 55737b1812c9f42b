"""fusedops.nn's gated activations: SwiGLU and GeGLU (no parameters)."""

from __future__ import annotations

import torch

from ..ops._gated import APPROXIMATE
from ..ops.geglu import geglu
from ..ops.swiglu import swiglu


class SwiGLU(torch.nn.Module):
    """F.silu(gate) * up as one fused op; no parameters.

    forward(gate, up=None): up of gate's shape, or None to split gate's last
    dimension in halves (gate[..., :d] the gate, gate[..., d:] the up), as a
    fused gate-up projection gives them.
    """

    def forward(self, gate: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
        return swiglu(gate, up)


class GeGLU(torch.nn.Module):
    """F.gelu(gate, approximate=approximate) * up as one fused op; no parameters.

    approximate: "none" (the erf GELU) or "tanh". forward(gate, up=None) as
    SwiGLU's.
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in APPROXIMATE:
            raise ValueError(f'fusedops.nn.GeGLU: approximate must be "none" or "tanh", got {approximate!r}')
        self.approximate = approximate

    def forward(self, gate: torch.Tensor, up: torch.Tensor | None = None) -> torch.Tensor:
        return geglu(gate, up, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"
