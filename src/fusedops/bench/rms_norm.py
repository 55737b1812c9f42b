"""rms_norm's and add_rms_norm's benchmark: Llama's RMSNorm (hidden 4096) and
its residual add, eager (HF LlamaRMSNorm's arithmetic) and compiled,
memory-bound. `norm_rows` serves layer_norm's benchmark too."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

import fusedops

from .core import (
    HOST_CASE_SIZE,
    Benchmark,
    graph_calls,
    host_rows,
    liger_op,
    measure_passes,
    no_grad_call,
    train_step,
)

EPS = 1e-6


def _eager_rms_norm(x, weight):
    # HF's LlamaRMSNorm: float32 statistics, the product in x's dtype.
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return weight * (x.float() * torch.rsqrt(variance + EPS)).to(x.dtype)


def _eager_add_rms_norm(x, residual, weight):
    summed = x + residual
    return _eager_rms_norm(summed, weight), summed


def norm_rows(op: str, ours: Callable, eager: Callable, hidden: int, params: int, device: torch.device,
              numel: int, repeats: int, liger: Callable | None = None) -> list[dict[str, Any]]:
    """Forward and forward+backward rows of a norm op over [numel // hidden,
    hidden] in float32 and bfloat16, every input requiring grad; `ours`,
    `eager` and `liger` (Liger-Kernel's, where it runs) take (x, [residual,]
    *params) (an add_ op: two outputs).

    bytes (s: x's element size, n elements, `params` parameters of hidden
    elements): forward reads x (and residual) and writes out (and summed);
    the backward reads the output gradient(s) and x (summed) and writes
    grad_x: plain 2n / 5n (fwd / fwd+bwd), add_ 4n / 8n, plus the parameters
    read, and their gradients written in the backward. The forward is timed
    under no_grad; fwd+bwd sets the .grad fields to None before each step.
    """
    rows = []
    add = op.startswith("add_")
    compiled = torch.compile(eager, fullgraph=True, dynamic=False)
    shape = [max(numel // hidden, 1), hidden]
    for dtype in (torch.float32, torch.bfloat16):
        factory = dict(device=device, dtype=dtype, requires_grad=True)
        xs = [torch.randn(shape, **factory) for _ in range(1 + add)]
        ps = [torch.randn(hidden, **factory) for _ in range(params)]
        leaves = (*xs, *ps)
        grads = tuple(torch.randn(shape, device=device, dtype=dtype) for _ in range(1 + add))
        n, size = xs[0].numel(), xs[0].element_size()
        fwd_bytes = ((4 if add else 2) * n + params * hidden) * size
        bwd_bytes = fwd_bytes + ((4 if add else 3) * n + 2 * params * hidden) * size
        fns = {"fusedops": functools.partial(ours, *leaves), "eager": functools.partial(eager, *leaves),
               "compile": functools.partial(compiled, *leaves)}
        if liger is not None:
            fns["liger"] = functools.partial(liger, *leaves)
        forward = {impl: functools.partial(no_grad_call, fn) for impl, fn in fns.items()}
        train = {impl: functools.partial(train_step, fn, grads if add else grads[0], leaves)
                 for impl, fn in fns.items()}
        for base, nbytes, calls in (("fwd", fwd_bytes, forward), ("fwd+bwd", bwd_bytes, train)):
            for pass_name, times in measure_passes(base, calls, device, repeats, graph_calls(numel)):
                for impl, ms in times.items():
                    rows.append({"op": op, "pass": pass_name, "impl": impl, "dtype": str(dtype).removeprefix("torch."),
                                 "shape": shape, "bytes": nbytes, "ms": ms, "GBs": nbytes / ms / 1e6})
    return rows


def bench_rms_norm(device: torch.device, numel: int, repeats: int, quick: bool) -> list[dict[str, Any]]:
    """rms_norm and add_rms_norm at hidden 4096 (Llama 7B/8B); see norm_rows."""
    liger, liger_add = liger_op("liger_rms_norm", device), liger_op("liger_fused_add_rms_norm", device)
    rows = norm_rows("rms_norm", lambda x, w: fusedops.rms_norm(x, w, EPS), _eager_rms_norm, 4096, 1, device,
                     numel, repeats, liger and (lambda x, w: liger(x, w, EPS)))
    rows += norm_rows("add_rms_norm", lambda x, r, w: fusedops.add_rms_norm(x, r, w, EPS), _eager_add_rms_norm,
                      4096, 1, device, numel, repeats, liger_add and (lambda x, r, w: liger_add(x, r, w, EPS)))
    if numel == HOST_CASE_SIZE:
        tiny = (torch.randn(8, 128, device=device), torch.randn(128, device=device))
        rows += host_rows("rms_norm", [8, 128], tiny, lambda x, w: fusedops.rms_norm(x, w, EPS), _eager_rms_norm,
                          device, quick)
    return rows


BENCHMARK = Benchmark(bench_rms_norm)
