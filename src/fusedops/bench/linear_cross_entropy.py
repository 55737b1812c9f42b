"""linear_cross_entropy's benchmark: a language model's loss, forward and
backward, against eager F.cross_entropy(F.linear(x, weight).float(), target),
torch.compile of it and Liger-Kernel's fused linear cross entropy (where
liger_kernel is importable): time, TFLOP/s of the three GEMMs (6 N H V) and the
peak memory above the inputs and their gradients (printed, and each row's
peak_GiB)."""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import fusedops

from .core import Benchmark, compiler_allows_many_shapes, measure_passes, train_step

# (tokens N, hidden H, vocab V): Llama 3's vocabulary at two hidden sizes and two token counts.
SHAPES_GPU = [(8192, 2048, 128256), (8192, 4096, 128256), (16384, 2048, 128256), (16384, 4096, 128256)]
SHAPES_GPU_QUICK = [(4096, 2048, 32000)]
SHAPES_CPU = [(512, 256, 8192), (1024, 512, 32000)]
SHAPES_CPU_QUICK = [(256, 128, 4096)]


def _eager(x, w, t):
    return F.cross_entropy(F.linear(x, w).float(), t)


def _liger() -> Callable | None:
    """Liger-Kernel's FLCE as (x, weight, target) -> loss, or None where it is not installed."""
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
    except ImportError:
        return None
    loss = LigerFusedLinearCrossEntropyLoss()
    return lambda x, w, t: loss(w, x, t)


def _inputs(device, dtype, n, h, v):
    x = torch.randn(n, h, device=device, dtype=dtype, requires_grad=True)
    w = (torch.randn(v, h, device=device, dtype=dtype) / h**0.5).requires_grad_()
    t = torch.randint(0, v, (n,), device=device)
    t[::17] = -100
    return x, w, t


def peak_gib(step: Callable[[], object], device: torch.device) -> float:
    """The memory one training step peaks at above its inputs and their
    gradients (the leaves' .grad), in GiB; NaN off CUDA."""
    if device.type != "cuda":
        return float("nan")
    step()  # the gradients exist, as in a training loop's later steps
    gc.collect()
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - base) / 2**30


def bench_linear_cross_entropy(device: torch.device, numel: int, repeats: int,
                               quick: bool = False) -> list[dict[str, Any]]:
    """Forward+backward of the mean loss (a few targets ignored) in bfloat16
    on the GPU, float32 on the CPU."""
    compiler_allows_many_shapes()
    on_gpu = device.type == "cuda"
    shapes = (SHAPES_GPU_QUICK if quick else SHAPES_GPU) if on_gpu else (SHAPES_CPU_QUICK if quick else SHAPES_CPU)
    dtype = torch.bfloat16 if on_gpu else torch.float32
    fns = {"fusedops": fusedops.linear_cross_entropy, "eager": _eager,
           "compile": torch.compile(_eager, fullgraph=True, dynamic=False)}
    liger = _liger()
    if liger is not None and on_gpu:
        fns["liger"] = liger
    rows: list[dict[str, Any]] = []
    for n, h, v in shapes:
        x, w, t = _inputs(device, dtype, n, h, v)
        steps = {impl: functools.partial(train_step, functools.partial(fn, x, w, t), None, (x, w))
                 for impl, fn in fns.items()}
        flops = 6 * n * h * v
        peaks = {impl: peak_gib(step, device) for impl, step in steps.items()}
        # No CUDA graph pass: a call is milliseconds of device time (and Liger synchronizes the host).
        for pass_, times in measure_passes("fwd+bwd", steps, device, repeats, 0):
            rows += [{"op": "linear_cross_entropy", "pass": pass_, "impl": impl,
                      "dtype": str(dtype).removeprefix("torch."), "shape": [n, h, v], "flops": flops, "ms": ms,
                      "TFLOPs": flops / ms / 1e9, "peak_GiB": peaks[impl]} for impl, ms in times.items()]
        mine = [r for r in rows if r["shape"] == [n, h, v]]
        print(f"linear_cross_entropy {n}x{h}x{v} fwd+bwd (ms, peak GiB above inputs and gradients): "
              + ", ".join(f"{r['impl']} {r['ms']:.2f} / {r['peak_GiB']:.2f}" for r in mine), flush=True)
        del x, w, t, steps
    return rows


BENCHMARK = Benchmark(bench_linear_cross_entropy, ceiling="gemm", sized=False)
