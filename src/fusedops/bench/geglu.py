"""geglu's benchmark: swiglu's (bench/swiglu.py) with the erf GELU. No Liger
rows: Liger-Kernel's GEGLU is the tanh approximation only, another function."""

from __future__ import annotations

import torch.nn.functional as F

import fusedops

from .swiglu import gated_benchmark

BENCHMARK = gated_benchmark("geglu", lambda gate, up: fusedops.geglu(gate, up), F.gelu)
