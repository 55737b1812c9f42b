"""fusedops.nn: torch.nn modules whose forward is one fused op, by kind."""

from __future__ import annotations

from .activation import GeGLU, SwiGLU
from .elementwise import ScaleBiasClamp
from .linear import Linear, LinearCrossEntropy
from .norm import LayerNorm, RMSNorm

__all__ = ["GeGLU", "LayerNorm", "Linear", "LinearCrossEntropy", "RMSNorm", "ScaleBiasClamp", "SwiGLU"]
