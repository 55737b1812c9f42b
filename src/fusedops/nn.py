"""fusedops.nn: modules built on the fusedops operators."""

from __future__ import annotations

from .nn_linear import Linear

__all__ = ["Linear"]
