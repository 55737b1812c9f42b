"""Benchmarks of every op against eager PyTorch and torch.compile, measured in
the same run: time, the byte or FLOP count and the rate reached, the share of a
ceiling measured in the same run (device copy bandwidth for memory-bound ops,
a large GEMM of the same dtype for linear), and fusedops' speed over each
baseline. Used by `python -m fusedops bench`; the JSON it writes feeds
fusedops.bench_report (tables, plot, docs/PERFORMANCE.md).

An op's benchmark is its module here, fusedops/bench/<op>.py, collected by
name: its BENCHMARK is a function that measures fusedops, eager PyTorch,
torch.compile and, on CUDA where it is installed, Liger-Kernel's kernel of the
same op (with core.measure_passes) and returns rows, and the ceiling its
rows are held to.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import pkgutil
import sys
from typing import Any

import torch

import fusedops
from fusedops import bench_report

from . import core
from .core import Benchmark, compiler_allows_many_shapes, copy_ceiling_gbs, gemm_ceiling_tflops, progress

# Every op's benchmark: the BENCHMARK of each module of this package but core
# and model (`bench --model`, a model's training step).
BENCHMARKS: dict[str, Benchmark] = {
    m.name: importlib.import_module(f"{__name__}.{m.name}").BENCHMARK
    for m in pkgutil.iter_modules(__path__) if m.name not in ("core", "model")
}


def liger_version() -> str | None:
    """The installed Liger-Kernel's version (the ops' "liger" rows), or None."""
    try:
        return importlib.metadata.version("liger-kernel")
    except importlib.metadata.PackageNotFoundError:
        return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto: cuda where a GPU is visible, else cpu")
    parser.add_argument("--ops", nargs="+", default=list(BENCHMARKS), choices=list(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="one small size per op, few repeats")
    parser.add_argument("--no-compile", action="store_true",
                        help="time fusedops and eager PyTorch only: no torch.compile baselines (their compiles "
                             "take most of a run)")
    parser.add_argument("--json", metavar="PATH", help="write the run (environment, ceilings, rows) as JSON")
    parser.add_argument("--plot", metavar="PATH",
                        help="write a PNG of fusedops' speedup per op and size (needs matplotlib)")


def annotate(rows: list[dict[str, Any]], ceilings: dict[str, dict[str, Any]]) -> None:
    """Each row's % of its ceiling, and fusedops' speed over each baseline of
    the same case (fusedops_speedup on every row: that row's time over
    fusedops' time)."""
    ours = {bench_report.case_key(r): r["ms"] for r in rows if r["impl"] == "fusedops"}
    for row in rows:
        name = f"gemm_{row['dtype']}" if "TFLOPs" in row else "copy" if "GBs" in row else None
        if name in ceilings and row.get("bytes", 0) >= ceilings[name].get("min_bytes", 0):
            rate = row["TFLOPs"] if "TFLOPs" in row else row["GBs"]
            row["ceiling"] = name
            row["pct_of_ceiling"] = 100 * rate / ceilings[name]["value"]
        key = bench_report.case_key(row)
        if key in ours:
            row["fusedops_speedup"] = row["ms"] / ours[key]


def measure_ceilings(device: torch.device, args: argparse.Namespace, numel: int,
                     repeats: int) -> dict[str, dict[str, Any]]:
    """The run's ceilings: copy bandwidth and a GEMM per dtype where an op is
    held to it, each measured as the rows are. On a GPU the copy runs from CUDA
    graphs at 2^26 float32 (far beyond the L2 cache: device memory's bandwidth),
    and only rows that move at least twice the L2 cache are held to it (smaller
    ones run from the cache); elsewhere the copy is of `numel` float32."""
    progress.begin("ceilings")
    ceilings: dict[str, dict[str, Any]] = {}
    on_gpu = device.type == "cuda"
    copy_numel = 1 << 26 if on_gpu else numel
    ceilings["copy"] = {"value": copy_ceiling_gbs(device, copy_numel, repeats), "unit": "GB/s",
                        "what": f"copy_ of {copy_numel} float32, read + written"}
    if on_gpu:
        l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
        ceilings["copy"]["min_bytes"] = 2 * l2
        ceilings["copy"]["what"] += f" (CUDA graph); rows of at least {2 * l2 >> 20} MiB"
    on_gpu = device.type == "cuda"
    gemm_dtypes = (torch.bfloat16, torch.float16, torch.float32) if on_gpu else (torch.float32, torch.bfloat16)
    if any(BENCHMARKS[name].ceiling == "gemm" for name in args.ops):
        for dtype in gemm_dtypes:
            tflops, size = gemm_ceiling_tflops(device, dtype, repeats, args.quick)
            name = str(dtype).removeprefix("torch.")
            ceilings[f"gemm_{name}"] = {"value": tflops, "unit": "TFLOP/s", "what": f"{name} mm {size}^3"}
    progress.end()
    for name, c in ceilings.items():
        print(f"ceiling {name}: {c['value']:.1f} {c['unit']} ({c['what']})", flush=True)
    return ceilings


def run(args: argparse.Namespace) -> int:
    hint = bench_report.matplotlib_missing() if args.plot else None
    if hint:
        print(hint, file=sys.stderr)  # before a run that may take minutes
        return 2
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        print("fusedops bench: --device cuda, but torch sees no CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    # --quick on a GPU: 2^20 (the host-cost case) and one size beyond the L2 cache.
    sizes = ([1 << 20, 1 << 25] if on_gpu else [1 << 20]) if args.quick else [1 << 20, 1 << 24, 1 << 28] if on_gpu else [1 << 16, 1 << 20, 1 << 24]
    repeats = 5 if args.quick else (50 if on_gpu else 10)
    compiler_allows_many_shapes()
    core.skipped_impls.clear()
    if args.no_compile:
        core.skipped_impls.update(("compile", "compile-max"))
    liger = liger_version() if on_gpu else None
    env = {
        "fusedops": fusedops.__version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if on_gpu else None,
        "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        "threads": torch.get_num_threads(),
        "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "sizes": sizes,
        "repeats": repeats,
        "baselines": ", ".join(["eager"] + ["compile"] * (not args.no_compile) + ["liger"] * (liger is not None)),
        "liger_kernel": liger,
        "command": " ".join(["python -m fusedops"] + sys.argv[1:]),
    }
    print(f"fusedops bench on {env['device']} (torch {env['torch']}; elementwise sizes "
          f"{', '.join(bench_report.shape_text([s]) for s in sizes)}; median of {repeats})", flush=True)

    ceilings = measure_ceilings(device, args, max(sizes), repeats)
    result: dict[str, Any] = {"env": env, "ceilings": ceilings, "rows": []}
    for name in args.ops:
        bench = BENCHMARKS[name]
        progress.begin(name)
        rows: list[dict[str, Any]] = []
        for numel in sizes if bench.sized else [None]:
            rows += bench.fn(device, numel, repeats, args.quick)
        progress.end()
        annotate(rows, ceilings)
        result["rows"] += rows
        bench_report.print_summary({"rows": rows})

    _report(result, args)
    return 0


def _report(result: dict[str, Any], args: argparse.Namespace) -> None:
    """Where fusedops is slower than a baseline; the JSON and the plot where asked for."""
    slower = bench_report.losses(result)
    print("\nwhere fusedops is slower than a baseline:" if slower else "\nfusedops is never slower than a baseline")
    for text in slower:
        print(f"  {text}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        bench_report.plot(result, args.plot)
        print(f"wrote {args.plot}")
