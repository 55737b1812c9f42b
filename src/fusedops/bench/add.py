"""add's benchmark: torch.add, eager and compiled, memory-bound."""

from __future__ import annotations

import functools
from typing import Any

import torch

import fusedops

from .core import HOST_CASE_SIZE, Benchmark, graph_calls, host_rows, measure_passes


def bench_add(device: torch.device, numel: int, repeats: int, quick: bool) -> list[dict[str, Any]]:
    """fusedops.add against torch.add, eager and compiled, at `numel` elements;
    with the 2^20 case (in every size list) the host cost per call on 1024 elements."""
    rows = []
    compiled = torch.compile(torch.add, fullgraph=True, dynamic=False)
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(numel, device=device, dtype=dtype)
        b = torch.randn(numel, device=device, dtype=dtype)
        nbytes = 3 * numel * a.element_size()
        impls = {"fusedops": fusedops.add, "eager": torch.add, "compile": compiled}
        calls = {impl: functools.partial(fn, a, b) for impl, fn in impls.items()}
        for pass_name, times in measure_passes("fwd", calls, device, repeats, graph_calls(numel)):
            for impl, ms in times.items():
                rows.append({"op": "add", "pass": pass_name, "impl": impl, "dtype": str(dtype).removeprefix("torch."),
                             "shape": [numel], "bytes": nbytes, "ms": ms, "GBs": nbytes / ms / 1e6})
    if numel == HOST_CASE_SIZE:
        tiny = (torch.randn(1024, device=device), torch.randn(1024, device=device))
        rows += host_rows("add", [1024], tiny, fusedops.add, torch.add, device, quick)
    return rows


BENCHMARK = Benchmark(bench_add)
