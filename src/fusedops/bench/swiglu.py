"""swiglu's benchmark, and the one geglu's module makes of it: act(gate) * up
as two tensors and as one gate split in halves, forward and forward+backward,
against the eager composite and torch.compile of it; memory-bound."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import fusedops

from .core import Benchmark, graph_calls, host_rows, liger_op, measure_passes, no_grad_call, train_step

# (rows, d): the output's shape; gate and up are [rows, d] each, or one [rows, 2d].
# 16384 x 14336: a Llama-3-8B MLP over 16384 tokens.
SHAPES_GPU = [(4096, 4096), (16384, 14336)]
SHAPES_CPU = [(256, 4096), (1024, 4096)]  # 2^20 and 2^22 output elements


def _two(act: Callable, gate, up):
    return act(gate) * up


def _split(act: Callable, x):
    d = x.shape[-1] // 2
    return act(x[..., :d]) * x[..., d:]


def _rows(op: str, form: str, shape: list[int], dtype: torch.dtype, numel: int, size: int, fns: dict,
          grad, leaves, device: torch.device, repeats: int) -> list[dict[str, Any]]:
    """Forward (no_grad) and forward+backward rows of one case. Bytes: the
    forward reads gate and up and writes the output (3 passes over the
    output's elements); the backward reads grad, gate and up and writes both
    gradients (5 more)."""
    rows = []
    forward = {impl: functools.partial(no_grad_call, fn) for impl, fn in fns.items()}
    train = {impl: functools.partial(train_step, fn, grad, leaves) for impl, fn in fns.items()}
    for base, nbytes, calls in (("fwd", 3 * numel * size, forward), ("fwd+bwd", 8 * numel * size, train)):
        for pass_name, times in measure_passes(base, calls, device, repeats, graph_calls(numel)):
            for impl, ms in times.items():
                rows.append({"op": op, "pass": pass_name, "impl": impl, "dtype": str(dtype).removeprefix("torch."),
                             "shape": shape, "form": form, "bytes": nbytes, "ms": ms, "GBs": nbytes / ms / 1e6})
    return rows


def gated_benchmark(op: str, ours: Callable, act: Callable, liger: str | None = None) -> Benchmark:
    """The benchmark of fusedops.<op> (`ours`, called as ours(gate, up)) against
    act(gate) * up: each shape of the device in bfloat16 and float32, as two
    tensors and split, forward and forward+backward; on CUDA also as CUDA
    graph replays (device time); and the host cost per call on [4, 256].
    `liger`: Liger-Kernel's function of the same op (core.liger_op), timed on
    two tensors, the form its MLP calls it in."""

    def bench(device: torch.device, numel: None, repeats: int, quick: bool) -> list[dict[str, Any]]:
        two = torch.compile(functools.partial(_two, act), fullgraph=True, dynamic=False)
        split = torch.compile(functools.partial(_split, act), fullgraph=True, dynamic=False)
        shapes = SHAPES_GPU if device.type == "cuda" else SHAPES_CPU
        theirs = liger_op(liger, device) if liger else None
        rows = []
        for rows_, d in shapes[-1:] if quick else shapes:
            n = rows_ * d
            for dtype in (torch.bfloat16, torch.float32):
                gate, up = (torch.randn(rows_, d, device=device, dtype=dtype, requires_grad=True) for _ in range(2))
                x = torch.randn(rows_, 2 * d, device=device, dtype=dtype, requires_grad=True)
                grad = torch.randn(rows_, d, device=device, dtype=dtype)
                fns = {"fusedops": functools.partial(ours, gate, up), "eager": functools.partial(_two, act, gate, up),
                       "compile": functools.partial(two, gate, up)}
                if theirs is not None:
                    fns["liger"] = functools.partial(theirs, gate, up)
                rows += _rows(op, "two", [rows_, d], dtype, n, gate.element_size(), fns, grad, (gate, up),
                              device, repeats)
                fns = {"fusedops": functools.partial(ours, x, None), "eager": functools.partial(_split, act, x),
                       "compile": functools.partial(split, x)}
                rows += _rows(op, "split", [rows_, 2 * d], dtype, n, x.element_size(), fns, grad, (x,), device,
                              repeats)
        tiny = tuple(torch.randn(4, 256, device=device) for _ in range(2))
        return rows + host_rows(op, [4, 256], tiny, ours, functools.partial(_two, act), device, quick)

    return Benchmark(bench, sized=False)


# The op looked up at the call: benchmarks/tree_bench.py imports this module
# beside older builds without it.
BENCHMARK = gated_benchmark("swiglu", lambda gate, up: fusedops.swiglu(gate, up), F.silu, "liger_swiglu")
