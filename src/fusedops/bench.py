"""Benchmarks of every op against eager PyTorch and torch.compile, measured in
the same run, with the byte count, the measured copy-bandwidth ceiling and the
share of it reached. Used by `python -m fusedops bench`."""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import fusedops


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--ops", nargs="+", default=sorted(BENCHMARKS), choices=sorted(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--json", metavar="PATH", help="write all rows as JSON here")


def measure_ms(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median time of one call in milliseconds, after warm-up (compilation,
    allocator and handle creation stay out of the number)."""
    for _ in range(3):
        fn()
    times = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(repeats):
            begin = time.perf_counter()
            fn()
            times.append((time.perf_counter() - begin) * 1e3)
    return statistics.median(times)


def copy_ceiling_gbs(device: torch.device, numel: int, repeats: int) -> float:
    """Device-to-device copy bandwidth (bytes read + written): the ceiling for
    memory-bound ops."""
    src = torch.randn(numel, device=device)
    dst = torch.empty_like(src)
    ms = measure_ms(lambda: dst.copy_(src), device, repeats)
    return 2 * src.numel() * src.element_size() / ms / 1e6


def bench_add(device: torch.device, numel: int, repeats: int) -> list[dict[str, Any]]:
    rows = []
    compiled = torch.compile(torch.add, fullgraph=True, dynamic=False)
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(numel, device=device, dtype=dtype)
        b = torch.randn(numel, device=device, dtype=dtype)
        nbytes = 3 * numel * a.element_size()
        impls = {"fusedops": fusedops.add, "eager": torch.add, "compile": compiled}
        for impl, fn in impls.items():
            ms = measure_ms(functools.partial(fn, a, b), device, repeats)
            rows.append({"op": "add", "pass": "fwd", "impl": impl, "dtype": str(dtype).removeprefix("torch."),
                         "shape": [numel], "bytes": nbytes, "ms": ms, "GBs": nbytes / ms / 1e6})
    return rows


# (M, N, K) = (tokens, out_features, in_features).
LINEAR_SHAPES_GPU = [(8192, 8192, 8192), (4096, 4096, 4096), (1024, 1024, 1024), (16384, 4096, 1024), (32, 4096, 4096)]
LINEAR_SHAPES_SMALL = [(1024, 1024, 1024), (256, 512, 256), (32, 1024, 1024)]


def gemm_ceiling_tflops(device: torch.device, repeats: int, quick: bool) -> float:
    """The GEMM ceiling: a large square matmul (bf16 on CUDA, float32 on CPU)
    measured in this run."""
    size = (2048 if quick else 8192) if device.type == "cuda" else 1024
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    ms = measure_ms(lambda: torch.mm(a, b), device, repeats)
    return 2 * size**3 / ms / 1e9


def host_us_per_call(fn: Callable[[], object], device: torch.device, calls: int = 200, rounds: int = 25) -> float:
    """Median wall time of one call in microseconds over `rounds` blocks of
    `calls` back-to-back calls: the host overhead, for inputs tiny enough that
    the device keeps up."""
    for _ in range(20):
        fn()
    times = []
    for _ in range(rounds):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        begin = time.perf_counter()
        for _ in range(calls):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - begin) / calls * 1e6)
    return statistics.median(times)


def _compiler_allows_many_shapes() -> None:
    # One compiled function per variant sees every shape and dtype; keep it
    # from falling back to eager after the default recompile limit.
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, 256)


def bench_linear(device: torch.device, numel: int, repeats: int, quick: bool = False) -> list[dict[str, Any]]:
    """fusedops.linear against F.linear (+ activation / clamp) in eager and
    torch.compile: forward for each epilogue and forward+backward with bias, in
    TFLOP/s (2MNK forward, 6MNK forward+backward); plus the host overhead per
    call on 16x16 inputs."""
    _compiler_allows_many_shapes()
    on_gpu = device.type == "cuda"
    shapes = LINEAR_SHAPES_GPU if on_gpu and not quick else LINEAR_SHAPES_SMALL[: 2 if quick else 3]
    dtypes = (torch.bfloat16, torch.float16, torch.float32) if on_gpu else (torch.float32, torch.bfloat16)
    variants: dict[str, dict[str, Any]] = {
        "linear": {},
        "linear+relu": {"activation": "relu"},
        "linear+gelu": {"activation": "gelu"},
        "linear+clamp": {"min": -1.0, "max": 1.0},
    }

    def eager_fn(activation=None, min=None, max=None):
        act = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu}[activation]
        if min is None and max is None:
            return lambda x, w, b: act(F.linear(x, w, b))
        return lambda x, w, b: torch.clamp(act(F.linear(x, w, b)), min, max)

    eager = {name: eager_fn(**kw) for name, kw in variants.items()}
    compiled = {name: torch.compile(fn, fullgraph=True, dynamic=True) for name, fn in eager.items()}
    rows: list[dict[str, Any]] = []

    def row(op, pass_, impl, dtype, shape, ms, flops):
        rows.append({"op": op, "pass": pass_, "impl": impl, "dtype": str(dtype).removeprefix("torch."),
                     "shape": list(shape), "flops": flops, "ms": ms, "TFLOPs": flops / ms / 1e9})

    for dtype in dtypes:
        for m, n, k in shapes:
            x = torch.randn(m, k, device=device, dtype=dtype)
            w = torch.randn(n, k, device=device, dtype=dtype) / k**0.5
            b = torch.randn(n, device=device, dtype=dtype)
            with torch.no_grad():
                for name, kw in variants.items():
                    impls = {
                        "fusedops": functools.partial(fusedops.linear, x, w, b, **kw),
                        "eager": functools.partial(eager[name], x, w, b),
                        "compile": functools.partial(compiled[name], x, w, b),
                    }
                    for impl, fn in impls.items():
                        row(name, "fwd", impl, dtype, (m, n, k), measure_ms(fn, device, repeats), 2 * m * n * k)
            xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
            grad = torch.randn(m, n, device=device, dtype=dtype)

            def train(f, xg=xg, wg=wg, bg=bg, grad=grad):
                return lambda: torch.autograd.grad(f(xg, wg, bg), (xg, wg, bg), grad)

            impls = {
                "fusedops": train(lambda x, w, b: fusedops.linear(x, w, b)),
                "eager": train(eager["linear"]),
                "compile": train(compiled["linear"]),
            }
            for impl, fn in impls.items():
                row("linear", "fwd+bwd", impl, dtype, (m, n, k), measure_ms(fn, device, repeats), 6 * m * n * k)

    # Host overhead: 16x16, where the device is idle most of the time.
    x = torch.randn(16, 16, device=device)
    w = torch.randn(16, 16, device=device)
    b = torch.randn(16, device=device)
    with torch.no_grad():
        for impl, fn in {"fusedops": lambda: fusedops.linear(x, w, b), "eager": lambda: F.linear(x, w, b)}.items():
            us = host_us_per_call(fn, device, calls=50 if quick else 200, rounds=5 if quick else 25)
            rows.append({"op": "linear", "pass": "host", "impl": impl, "dtype": "float32", "shape": [16, 16, 16],
                         "ms": us / 1e3, "us_per_call": us})
    return rows


def _eager_scale_bias_clamp(x, scale, bias, lo: float, hi: float):
    return torch.clamp(x * scale + bias, lo, hi)


def bench_scale_bias_clamp(device: torch.device, numel: int, repeats: int) -> list[dict[str, Any]]:
    """Forward and forward+backward (x, scale and bias all requiring grad).

    bytes, forward: x read + bias read + out written. forward+backward: the
    forward's plus the backward's grad_out, x and bias read and grad_x and
    grad_bias written: 8 passes over x for a same-shape bias, 5 (plus the tiny
    bias) for a [4096] bias; the scale is negligible. The forward is timed
    under no_grad; fwd+bwd sets the .grad fields to None before each step (no
    kernel), so no implementation pays for gradient accumulation.
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
            for impl, fn in fns.items():
                for pass_name, nbytes in (("fwd", fwd_bytes), ("fwd+bwd", bwd_bytes)):
                    if pass_name == "fwd":
                        def run(fn=fn):
                            with torch.no_grad():
                                return fn()
                    else:
                        def run(fn=fn, g=g, leaves=(x, scale, bias)):
                            for t in leaves:
                                t.grad = None
                            fn().backward(g)
                    ms = measure_ms(run, device, repeats)
                    rows.append({"op": "sbc", "pass": pass_name, "impl": impl,
                                 "dtype": str(dtype).removeprefix("torch."), "shape": shape,
                                 "bias": bias_shape, "bytes": nbytes, "ms": ms,
                                 "GBs": nbytes / ms / 1e6})
    return rows


BENCHMARKS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "add": bench_add,
    "linear": bench_linear,
    "scale_bias_clamp": bench_scale_bias_clamp,
}


def add_ratios(rows: list[dict[str, Any]], ceiling_gbs: float, ceiling_tflops: float | None = None) -> None:
    """Speed of fusedops over each baseline of the same case, and % of the
    ceiling: the copy bandwidth for rows in GB/s, the measured GEMM for rows in
    TFLOP/s."""
    def case(row: dict[str, Any]) -> tuple:
        return row["op"], row["pass"], row["dtype"], tuple(row["shape"])

    ours = {case(r): r["ms"] for r in rows if r["impl"] == "fusedops"}
    for row in rows:
        if "GBs" in row:
            row["pct_of_copy"] = 100 * row["GBs"] / ceiling_gbs
        elif "TFLOPs" in row and ceiling_tflops:
            row["pct_of_gemm"] = 100 * row["TFLOPs"] / ceiling_tflops
        if case(row) in ours:
            row["fusedops_speedup"] = row["ms"] / ours[case(row)]


def print_table(rows: list[dict[str, Any]]) -> None:
    """Rows in GB/s (memory-bound ops, % of the copy ceiling), in TFLOP/s
    (GEMMs, % of the GEMM ceiling) or host microseconds per call."""
    header = (f"{'op':<14}{'pass':<9}{'dtype':<10}{'shape':<18}{'impl':<10}{'ms':>10}{'rate':>9} {'unit':<6}"
              f"{'%ceil':>7}{'ours x':>8}")
    print(header)
    print("-" * len(header))
    for r in rows:
        shape = "x".join(str(s) for s in r["shape"])
        if "GBs" in r:
            rate, unit, pct = r["GBs"], "GB/s", r.get("pct_of_copy", float("nan"))
        elif "TFLOPs" in r:
            rate, unit, pct = r["TFLOPs"], "TF/s", r.get("pct_of_gemm", float("nan"))
        else:
            rate, unit, pct = r.get("us_per_call", float("nan")), "us", float("nan")
        print(f"{r['op']:<14}{r['pass']:<9}{r['dtype']:<10}{shape:<18}{r['impl']:<10}{r['ms']:>10.4f}"
              f"{rate:>9.1f} {unit:<6}{pct:>7.1f}{r.get('fusedops_speedup', float('nan')):>8.3f}")


def run(args: argparse.Namespace) -> int:
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    numel = (1 << 20) if args.quick else (1 << 28 if on_gpu else 1 << 24)
    repeats = 5 if args.quick else (50 if on_gpu else 10)
    env = {
        "fusedops": fusedops.__version__,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        "threads": torch.get_num_threads(),
        "command": " ".join(["python -m fusedops"] + sys.argv[1:]),
    }
    print(f"fusedops bench on {env['device']} (torch {env['torch']}, {numel} elements)", flush=True)
    ceiling = copy_ceiling_gbs(device, numel, repeats)
    print(f"copy ceiling: {ceiling:.1f} GB/s", flush=True)
    gemm_ceiling = None
    if "linear" in args.ops:
        gemm_ceiling = gemm_ceiling_tflops(device, repeats, args.quick)
        print(f"GEMM ceiling ({'bf16' if on_gpu else 'float32'}): {gemm_ceiling:.1f} TFLOP/s", flush=True)
    rows: list[dict[str, Any]] = []
    for name in args.ops:
        print(f"[{name}] running ...", flush=True)
        fn = BENCHMARKS[name]
        extra = {"quick": args.quick} if "quick" in inspect.signature(fn).parameters else {}
        rows += fn(device, numel, repeats, **extra)
    add_ratios(rows, ceiling, gemm_ceiling)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"env": env, "copy_GBs": ceiling, "gemm_TFLOPs": gemm_ceiling, "rows": rows}, out, indent=1)
        print(f"wrote {args.json}")
    return 0
