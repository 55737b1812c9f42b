"""layer_norm's and add_layer_norm's benchmark: ViT-B's LayerNorm (hidden
768) and its residual add against F.layer_norm, eager and compiled,
memory-bound (rows: rms_norm.norm_rows)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

import fusedops

from .core import HOST_CASE_SIZE, Benchmark, host_rows, liger_op
from .rms_norm import norm_rows

EPS = 1e-5


def _eager_layer_norm(x, weight, bias):
    return F.layer_norm(x, x.shape[-1:], weight, bias, EPS)


def _eager_add_layer_norm(x, residual, weight, bias):
    summed = x + residual
    return _eager_layer_norm(summed, weight, bias), summed


def bench_layer_norm(device: torch.device, numel: int, repeats: int, quick: bool) -> list[dict[str, Any]]:
    """layer_norm and add_layer_norm at hidden 768 (ViT-B, BERT-base, GPT-2)
    (Liger-Kernel has no add_layer_norm)."""
    liger = liger_op("liger_layer_norm", device)
    rows = norm_rows("layer_norm", lambda x, w, b: fusedops.layer_norm(x, w, b, EPS), _eager_layer_norm, 768, 2,
                     device, numel, repeats, liger and (lambda x, w, b: liger(x, w, b, EPS)))
    rows += norm_rows("add_layer_norm", lambda x, r, w, b: fusedops.add_layer_norm(x, r, w, b, EPS),
                      _eager_add_layer_norm, 768, 2, device, numel, repeats)
    if numel == HOST_CASE_SIZE:
        tiny = (torch.randn(8, 128, device=device), torch.randn(128, device=device), torch.randn(128, device=device))
        rows += host_rows("layer_norm", [8, 128], tiny, lambda x, w, b: fusedops.layer_norm(x, w, b, EPS),
                          _eager_layer_norm, device, quick)
    return rows


BENCHMARK = Benchmark(bench_layer_norm)
