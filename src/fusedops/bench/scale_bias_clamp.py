"""scale_bias_clamp's benchmark: clamp(x * scale + bias), eager and compiled, memory-bound."""

from __future__ import annotations

import functools
from typing import Any

import torch

import fusedops

from .core import HOST_CASE_SIZE, Benchmark, graph_calls, host_rows, measure_passes, no_grad_call, train_step


def _eager_scale_bias_clamp(x, scale, bias, lo: float, hi: float):
    return torch.clamp(x * scale + bias, lo, hi)


def bench_scale_bias_clamp(device: torch.device, numel: int, repeats: int, quick: bool) -> list[dict[str, Any]]:
    """Forward and forward+backward (x, scale and bias all requiring grad).

    bytes, forward: x read + bias read + out written. forward+backward: the
    forward's plus the backward's grad_out, x and bias read and grad_x and
    grad_bias written: 8 passes over x for a same-shape bias, 5 (plus the tiny
    bias) for a [4096] bias; the scale is negligible. The forward is timed
    under no_grad; fwd+bwd sets the .grad fields to None before each step (no
    kernel), so no implementation pays for gradient accumulation. On CUDA each
    pass is also timed as CUDA graph replays: the device time where eager
    calls of a mid-size step are bound by the host (autograd, launches).
    """
    rows = []
    lo, hi = -0.5, 0.5
    compiled = torch.compile(_eager_scale_bias_clamp, fullgraph=True, dynamic=False)
    for dtype in (torch.float32, torch.bfloat16):
        for bias_kind in ("same", "row"):
            shape = [numel] if bias_kind == "same" else [numel // 4096, 4096]
            bias_shape = shape if bias_kind == "same" else [4096]
            x = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
            scale = torch.tensor(1.1, device=device, dtype=dtype, requires_grad=True)
            bias = torch.randn(bias_shape, device=device, dtype=dtype, requires_grad=True)
            g = torch.randn(shape, device=device, dtype=dtype)
            size = x.element_size()
            n, nb = x.numel(), bias.numel()
            fwd_bytes = (2 * n + nb) * size
            bwd_bytes = fwd_bytes + (3 * n + 2 * nb) * size
            fns = {
                "fusedops": lambda x=x, s=scale, b=bias: fusedops.scale_bias_clamp(x, s, b, lo, hi),
                "eager": lambda x=x, s=scale, b=bias: _eager_scale_bias_clamp(x, s, b, lo, hi),
                "compile": lambda x=x, s=scale, b=bias: compiled(x, s, b, lo, hi),
            }
            forward = {impl: functools.partial(no_grad_call, fn) for impl, fn in fns.items()}
            train = {impl: functools.partial(train_step, fn, g, (x, scale, bias)) for impl, fn in fns.items()}
            for base, nbytes, calls in (("fwd", fwd_bytes, forward), ("fwd+bwd", bwd_bytes, train)):
                for pass_name, times in measure_passes(base, calls, device, repeats, graph_calls(numel)):
                    for impl, ms in times.items():
                        rows.append({"op": "scale_bias_clamp", "pass": pass_name, "impl": impl,
                                     "dtype": str(dtype).removeprefix("torch."), "shape": shape,
                                     "bias": bias_shape, "bytes": nbytes, "ms": ms,
                                     "GBs": nbytes / ms / 1e6})
    if numel == HOST_CASE_SIZE:
        tiny = (torch.randn(1024, device=device), torch.tensor(1.1, device=device), torch.randn(1024, device=device))
        rows += host_rows("scale_bias_clamp", [1024], tiny, lambda x, s, b: fusedops.scale_bias_clamp(x, s, b, lo, hi),
                          lambda x, s, b: _eager_scale_bias_clamp(x, s, b, lo, hi), device, quick)
    return rows


BENCHMARK = Benchmark(bench_scale_bias_clamp)
