"""linear's benchmark: F.linear with each epilogue, eager, compiled and
max-autotuned, in TFLOP/s against the GEMM ceiling of its dtype."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import fusedops

from .core import Benchmark, compiler_allows_many_shapes, gemm_graph_calls, host_rows, measure_passes

# (M, N, K) = (tokens, out_features, in_features).
# (M, N, K); 16384x4096x1024 and 16384x1024x4096: a transformer MLP's up and down projections.
LINEAR_SHAPES_GPU = [(8192, 8192, 8192), (4096, 4096, 4096), (1024, 1024, 1024), (16384, 4096, 1024),
                     (16384, 1024, 4096), (32, 4096, 4096)]
LINEAR_SHAPES_SMALL = [(1024, 1024, 1024), (256, 512, 256), (32, 1024, 1024)]

# The epilogues the linear bench times, as fusedops.linear's keyword arguments.
LINEAR_VARIANTS: dict[str, dict[str, Any]] = {
    "linear": {},
    "linear+relu": {"activation": "relu"},
    "linear+gelu": {"activation": "gelu"},
    "linear+clamp": {"min": -1.0, "max": 1.0},
}


def linear_inputs(device: torch.device, dtype: torch.dtype, m: int, n: int, k: int):
    """x [m, k], weight [n, k] (scaled so outputs stay O(1)) and bias [n]: random."""
    x = torch.randn(m, k, device=device, dtype=dtype)
    return x, torch.randn(n, k, device=device, dtype=dtype) / k**0.5, torch.randn(n, device=device, dtype=dtype)


def _eager_linear(activation=None, min=None, max=None) -> Callable[..., torch.Tensor]:
    """The eager PyTorch composition of one epilogue."""
    act = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu}[activation]
    if min is None and max is None:
        return lambda x, w, b: act(F.linear(x, w, b))
    return lambda x, w, b: torch.clamp(act(F.linear(x, w, b)), min, max)


def _linear_rows(name: str, pass_: str, times: dict[str, float], dtype: torch.dtype, shape: tuple,
                 flops: int) -> list[dict[str, Any]]:
    return [{"op": name, "pass": pass_, "impl": impl, "dtype": str(dtype).removeprefix("torch."),
             "shape": list(shape), "flops": flops, "ms": ms, "TFLOPs": flops / ms / 1e9}
            for impl, ms in times.items()]


def bench_linear(device: torch.device, numel: int, repeats: int, quick: bool = False) -> list[dict[str, Any]]:
    """fusedops.linear against F.linear (+ activation / clamp) in eager and
    torch.compile: forward for each epilogue and forward+backward with bias, in
    TFLOP/s (2MNK forward, 6MNK forward+backward); plus the host overhead per
    call on 16x16 inputs. On the GPU the half-type +gelu and +clamp forwards
    also meet torch.compile(mode="max-autotune") ("compile-max"), which tunes
    its own Triton GEMM with the epilogue fused, one compile per shape."""
    compiler_allows_many_shapes()
    on_gpu = device.type == "cuda"
    shapes = LINEAR_SHAPES_GPU if on_gpu and not quick else LINEAR_SHAPES_SMALL[: 2 if quick else 3]
    dtypes = (torch.bfloat16, torch.float16, torch.float32) if on_gpu else (torch.float32, torch.bfloat16)
    eager = {name: _eager_linear(**kw) for name, kw in LINEAR_VARIANTS.items()}
    compiled = {name: torch.compile(fn, fullgraph=True, dynamic=True) for name, fn in eager.items()}
    tuned = {name: torch.compile(eager[name], fullgraph=True, dynamic=False, mode="max-autotune")
             for name in ("linear+gelu", "linear+clamp")}
    rows: list[dict[str, Any]] = []
    for dtype in dtypes:
        for m, n, k in shapes:
            x, w, b = linear_inputs(device, dtype, m, n, k)
            with torch.no_grad():
                for name, kw in LINEAR_VARIANTS.items():
                    impls = {"fusedops": functools.partial(fusedops.linear, x, w, b, **kw),
                             "eager": functools.partial(eager[name], x, w, b),
                             "compile": functools.partial(compiled[name], x, w, b)}
                    if on_gpu and dtype != torch.float32 and name in tuned:
                        impls["compile-max"] = functools.partial(tuned[name], x, w, b)
                    flops = 2 * m * n * k
                    for pass_, times in measure_passes("fwd", impls, device, repeats, gemm_graph_calls(flops)):
                        rows += _linear_rows(name, pass_, times, dtype, (m, n, k), flops)
            leaves = tuple(t.clone().requires_grad_() for t in (x, w, b))
            grad = torch.randn(m, n, device=device, dtype=dtype)
            impls = {impl: functools.partial(_linear_train_step, fn, leaves, grad)
                     for impl, fn in (("fusedops", fusedops.linear), ("eager", eager["linear"]),
                                      ("compile", compiled["linear"]))}
            flops = 6 * m * n * k
            for pass_, times in measure_passes("fwd+bwd", impls, device, repeats, gemm_graph_calls(flops)):
                rows += _linear_rows("linear", pass_, times, dtype, (m, n, k), flops)

    # Host overhead: 16x16, where the device is idle most of the time; plain
    # and the composite the fused epilogue replaces.
    small = (torch.randn(16, 16, device=device), torch.randn(16, 16, device=device), torch.randn(16, device=device))
    rows += host_rows("linear", [16, 16, 16], small, fusedops.linear, F.linear, device, quick)
    return rows + host_rows("linear+gelu", [16, 16, 16], small, functools.partial(fusedops.linear, activation="gelu"),
                            _eager_linear(activation="gelu"), device, quick)


def _linear_train_step(fn: Callable[..., torch.Tensor], leaves: tuple[torch.Tensor, ...],
                       grad: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.autograd.grad(fn(*leaves), leaves, grad)


BENCHMARK = Benchmark(bench_linear, ceiling="gemm", sized=False)
