"""fusedops.nn: torch.nn modules built on the fused operators."""

from __future__ import annotations

from ._scale_bias_clamp_module import ScaleBiasClamp
from .nn_linear import Linear

__all__ = ["Linear", "ScaleBiasClamp"]
