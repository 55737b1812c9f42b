"""Benchmarks of every op against eager PyTorch and torch.compile, measured in
the same run, with the byte count, the measured copy-bandwidth ceiling and the
share of it reached. Used by `python -m fusedops bench`."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

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
        impls = {
            "fusedops": lambda: fusedops.add(a, b),
            "eager": lambda: torch.add(a, b),
            "compile": lambda: compiled(a, b),
        }
        for impl, fn in impls.items():
            ms = measure_ms(fn, device, repeats)
            rows.append({"op": "add", "pass": "fwd", "impl": impl, "dtype": str(dtype).removeprefix("torch."),
                         "shape": [numel], "bytes": nbytes, "ms": ms, "GBs": nbytes / ms / 1e6})
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


BENCHMARKS: dict[str, Callable[[torch.device, int, int], list[dict[str, Any]]]] = {
    "add": bench_add,
    "scale_bias_clamp": bench_scale_bias_clamp,
}


def add_ratios(rows: list[dict[str, Any]], ceiling_gbs: float) -> None:
    """Speed of fusedops over each baseline of the same case, and % of the ceiling."""
    def case(row: dict[str, Any]) -> tuple:
        return row["op"], row["pass"], row["dtype"], tuple(row["shape"])

    ours = {case(r): r["ms"] for r in rows if r["impl"] == "fusedops"}
    for row in rows:
        row["pct_of_copy"] = 100 * row["GBs"] / ceiling_gbs
        if case(row) in ours:
            row["fusedops_speedup"] = row["ms"] / ours[case(row)]


def print_table(rows: list[dict[str, Any]]) -> None:
    header = f"{'op':<8}{'pass':<8}{'dtype':<10}{'shape':<16}{'impl':<10}{'ms':>9}{'GB/s':>9}{'%copy':>7}{'ours x':>8}"
    print(header)
    print("-" * len(header))
    for r in rows:
        shape = "x".join(str(s) for s in r["shape"])
        print(f"{r['op']:<8}{r['pass']:<8}{r['dtype']:<10}{shape:<16}{r['impl']:<10}{r['ms']:>9.4f}"
              f"{r['GBs']:>9.1f}{r['pct_of_copy']:>7.1f}{r.get('fusedops_speedup', float('nan')):>8.3f}")


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
    rows: list[dict[str, Any]] = []
    for name in args.ops:
        print(f"[{name}] running ...", flush=True)
        rows += BENCHMARKS[name](device, numel, repeats)
    add_ratios(rows, ceiling)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"env": env, "copy_GBs": ceiling, "rows": rows}, out, indent=1)
        print(f"wrote {args.json}")
    return 0
