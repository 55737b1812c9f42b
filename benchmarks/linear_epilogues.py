"""linear's fused epilogues on the GPU: fusedops.linear against eager PyTorch,
torch.compile (default and mode="max-autotune") and fusedops with its sm_90a
GEMM on (FUSEDOPS_LINEAR_SM90=1, impl "fusedops-sm90", measured in a child
process started by this run: the variable is read once per process), in one
run. Times of the two processes compare less closely than those within one
(the implementations of one process take turns; the GPU's clocks differ
between processes by a few %).

    python benchmarks/linear_epilogues.py --json OUT.json [--max-autotune]

Forward without grad for linear, +relu, +gelu, +clamp, and forward+backward of
linear+gelu, bfloat16 and float16, at the bench's GPU shapes (M x N x K);
with --max-autotune, then +gelu and +clamp against max-autotune, each beside
fusedops again (pass "fwd-max"), last because every shape tunes anew. Each
time is the median of CUDA-event timed calls after a warm-up, the
implementations taking turns (fusedops.bench.measure_impls). The JSON is
written after every shape, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import fusedops
from fusedops import bench

VARIANTS = {"linear": {}, "linear+relu": {"activation": "relu"}, "linear+gelu": {"activation": "gelu"},
            "linear+clamp": {"min": -1.0, "max": 1.0}}
# Which variants meet torch.compile's max-autotune (one compile with GEMM tuning per shape).
TUNED = ("linear+gelu", "linear+clamp")
REPEATS = 30


def eager(activation=None, min=None, max=None):
    act = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu}[activation]
    if min is None and max is None:
        return lambda x, w, b: act(F.linear(x, w, b))
    return lambda x, w, b: torch.clamp(act(F.linear(x, w, b)), min, max)


def train_step(fn, leaves, grad):
    return torch.autograd.grad(fn(*leaves), leaves, grad)


def inputs(dtype, m, n, k):
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype) / k**0.5
    return x, w, torch.randn(n, device="cuda", dtype=dtype)


def record(rows, name, pass_, times, dtype, shape, flops):
    rows += [{"op": name, "pass": pass_, "impl": impl, "dtype": str(dtype).removeprefix("torch."),
              "shape": list(shape), "ms": ms, "TFLOPs": flops / ms / 1e9} for impl, ms in times.items()]


def measure(ours_only: bool, out: Path, rows: list) -> None:
    device = torch.device("cuda")
    bench._compiler_allows_many_shapes()
    eagers = {name: eager(**kw) for name, kw in VARIANTS.items()}
    compiled = {name: torch.compile(fn, fullgraph=True, dynamic=True) for name, fn in eagers.items()}
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in bench.LINEAR_SHAPES_GPU:
            x, w, b = inputs(dtype, m, n, k)
            with torch.no_grad():
                for name, kw in VARIANTS.items():
                    impls = {"fusedops": functools.partial(fusedops.linear, x, w, b, **kw)}
                    if not ours_only:
                        impls["eager"] = functools.partial(eagers[name], x, w, b)
                        impls["compile"] = functools.partial(compiled[name], x, w, b)
                    record(rows, name, "fwd", bench.measure_impls(impls, device, REPEATS), dtype, (m, n, k),
                           2 * m * n * k)
            leaves = tuple(t.clone().requires_grad_() for t in (x, w, b))
            grad = torch.randn(m, n, device=device, dtype=dtype)
            ours = functools.partial(fusedops.linear, activation="gelu")
            impls = {"fusedops": functools.partial(train_step, ours, leaves, grad)}
            if not ours_only:
                impls["eager"] = functools.partial(train_step, eagers["linear+gelu"], leaves, grad)
            record(rows, "linear+gelu", "fwd+bwd", bench.measure_impls(impls, device, REPEATS), dtype, (m, n, k),
                   6 * m * n * k)
            out.write_text(json.dumps(rows, indent=1))
            print(f"{dtype} {m}x{n}x{k} done", file=sys.stderr, flush=True)


def measure_max_autotune(out: Path, rows: list) -> None:
    """Last, since each shape compiles and tunes anew: torch.compile(mode="max-autotune")
    beside fusedops again (the same process moments)."""
    device = torch.device("cuda")
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in bench.LINEAR_SHAPES_GPU:
            x, w, b = inputs(dtype, m, n, k)
            with torch.no_grad():
                for name in TUNED:
                    tuned = torch.compile(eager(**VARIANTS[name]), fullgraph=True, dynamic=False, mode="max-autotune")
                    impls = {"fusedops": functools.partial(fusedops.linear, x, w, b, **VARIANTS[name]),
                             "compile-max": functools.partial(tuned, x, w, b)}
                    times = bench.measure_impls(impls, device, REPEATS)
                    record(rows, name, "fwd-max", times, dtype, (m, n, k), 2 * m * n * k)
            out.write_text(json.dumps(rows, indent=1))
            print(f"max-autotune {dtype} {m}x{n}x{k} done", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--max-autotune", action="store_true", help="also time torch.compile(mode='max-autotune')")
    parser.add_argument("--ours-only", action="store_true", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.ours_only:
        measure(True, args.json, [])
        return 0
    result = {"command": " ".join(["python", "benchmarks/linear_epilogues.py", *sys.argv[1:]]),
              "environment": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                              "fusedops": fusedops.build_info()},
              "rows": []}
    measure(False, args.json, result["rows"])
    args.json.write_text(json.dumps(result, indent=1))
    child_json = args.json.with_suffix(".sm90.json")
    env = dict(os.environ, FUSEDOPS_LINEAR_SM90="1")
    subprocess.run([sys.executable, __file__, "--ours-only", "--json", str(child_json)], env=env, check=True)
    result["rows"] += [dict(r, impl="fusedops-sm90") for r in json.loads(child_json.read_text())]
    child_json.unlink()
    args.json.write_text(json.dumps(result, indent=1))
    if args.max_autotune:
        measure_max_autotune(args.json, result["rows"])
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
