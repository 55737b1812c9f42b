"""geglu's benchmark: swiglu's (bench/swiglu.py) with the erf GELU."""

from __future__ import annotations

import torch.nn.functional as F

import fusedops

from .swiglu import gated_benchmark

BENCHMARK = gated_benchmark("geglu", fusedops.geglu, F.gelu)
