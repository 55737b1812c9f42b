"""linear's fused epilogues on the GPU, with an A/B of its two CUDA paths in one run:
fusedops.linear with its sm_90a GEMM (the default on an H100/H200, impl "fusedops")
against the same build with FUSEDOPS_LINEAR_SM90=0 (cuBLASLt + the elementwise pass,
impl "fusedops-cublaslt"), beside eager PyTorch and torch.compile measured in the same
processes; then, time-boxed, torch.compile(mode="max-autotune") for +gelu and +clamp.

    python benchmarks/linear_epilogues.py --json OUT.json [--rounds 2] [--max-autotune-s 240]
        [--shapes 4096x4096x4096 ...] [--variants linear+gelu ...] [--device-time]

--device-time times each call from replays of a CUDA graph of GRAPH_CALLS calls instead:
the device's time alone (what sets the tile rule, where a call is host-bound), forward
only, without torch.compile. --orders runs each side of our GEMM once per tile order
(FUSEDOPS_LINEAR_SM90_ORDER, e.g. 8m: swizzle 8 along M), as impl "<side>@<order>"
("rule": the rule's order, as impl "<side>"; "1" with the side "fusedops" is the rule
before tile orders: no swizzle, K > 4096 on cuBLASLt).

The variable is read once per process, so each path runs in child processes that
alternate over the rounds (A B, then B A, ...), as benchmarks/ab.py does: a process's
clocks and allocator state fall on both paths alike. In each child the implementations
take turns (fusedops.bench.core.measure_impls): forward without grad for linear, +relu,
+gelu, +clamp and forward+backward of linear+gelu, bfloat16 and float16, at the bench's
GPU shapes (M x N x K). The summary gives, per case, the median over rounds of each
implementation's time and of eager's time over it in the same process. The max-autotune
stage meets each shape anew (a compile with GEMM tuning each), most important shapes
first, until its time is up; the JSON says which shapes it reached, and the error of
any compile that failed (the stage goes on to the next). The JSON is
rewritten after every process, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

import fusedops
from fusedops.bench import core
from fusedops.bench.linear import LINEAR_SHAPES_GPU, linear_inputs

VARIANTS = {"linear": {}, "linear+relu": {"activation": "relu"}, "linear+gelu": {"activation": "gelu"},
            "linear+clamp": {"min": -1.0, "max": 1.0}}
TUNED = ("linear+gelu", "linear+clamp")
# The max-autotune stage's order: the named targets first.
TUNED_ORDER = [(4096, 4096, 4096), (16384, 4096, 1024), (16384, 1024, 4096), (1024, 1024, 1024),
               (32, 4096, 4096), (8192, 8192, 8192)]
REPEATS = 30
GRAPH_CALLS = 16
# impl name: FUSEDOPS_LINEAR_SM90 (the last two force a tile configuration wherever the kernels run)
SIDES = {"fusedops": "1", "fusedops-cublaslt": "0", "fusedops-pingpong": "pingpong",
         "fusedops-cooperative": "cooperative"}


def eager(activation=None, min=None, max=None):
    act = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu}[activation]
    if min is None and max is None:
        return lambda x, w, b: act(F.linear(x, w, b))
    return lambda x, w, b: torch.clamp(act(F.linear(x, w, b)), min, max)


def train_step(fn, leaves, grad):
    return torch.autograd.grad(fn(*leaves), leaves, grad)


def rows_of(name, pass_, times, dtype, shape, flops, ours):
    return [{"op": name, "pass": pass_, "impl": ours if impl == "fusedops" else impl,
             "dtype": str(dtype).removeprefix("torch."), "shape": list(shape), "ms": ms,
             "TFLOPs": flops / ms / 1e9} for impl, ms in times.items()]


def device_times(impls: dict, device: torch.device) -> dict[str, float]:
    """Per call ms of each implementation from replays of a CUDA graph of it."""
    replays = core.graph_replays(impls, device, GRAPH_CALLS)
    return {impl: ms / GRAPH_CALLS for impl, ms in core.measure_impls(replays, device, REPEATS).items()}


def child(ours: str, out: Path, shapes: list[tuple[int, int, int]], variants: list[str], dtypes: list[str],
          graphed: bool) -> None:
    """One process of one path: every case, fusedops beside eager and compile
    (with `graphed`: device time, beside eager only)."""
    device = torch.device("cuda")
    core.compiler_allows_many_shapes()
    eagers = {name: eager(**kw) for name, kw in VARIANTS.items()}
    compiled = {name: torch.compile(fn, fullgraph=True, dynamic=True) for name, fn in eagers.items()}
    rows: list[dict] = []
    for dtype in (getattr(torch, name) for name in dtypes):
        for m, n, k in shapes:
            x, w, b = linear_inputs(torch.device("cuda"), dtype, m, n, k)
            with torch.no_grad():
                for name in variants:
                    impls = {"fusedops": functools.partial(fusedops.linear, x, w, b, **VARIANTS[name]),
                             "eager": functools.partial(eagers[name], x, w, b)}
                    if graphed:
                        rows += rows_of(name, "fwd-device", device_times(impls, device), dtype, (m, n, k),
                                        2 * m * n * k, ours)
                        continue
                    impls["compile"] = functools.partial(compiled[name], x, w, b)
                    times = core.measure_impls(impls, device, REPEATS)
                    rows += rows_of(name, "fwd", times, dtype, (m, n, k), 2 * m * n * k, ours)
            if graphed:
                continue
            leaves = tuple(t.clone().requires_grad_() for t in (x, w, b))
            grad = torch.randn(m, n, device=device, dtype=dtype)
            impls = {"fusedops": functools.partial(train_step, functools.partial(fusedops.linear, activation="gelu"),
                                                   leaves, grad),
                     "eager": functools.partial(train_step, eagers["linear+gelu"], leaves, grad)}
            times = core.measure_impls(impls, device, REPEATS)
            rows += rows_of("linear+gelu", "fwd+bwd", times, dtype, (m, n, k), 6 * m * n * k, ours)
            del x, w, b, leaves, grad
    out.write_text(json.dumps(rows))


def child_max_autotune(out: Path, seconds: float, shapes: list[tuple[int, int, int]], dtypes: list[str]) -> None:
    """fusedops (its default path) beside torch.compile(mode="max-autotune"), shape by
    shape in TUNED_ORDER until `seconds` have passed."""
    device = torch.device("cuda")
    begin = time.monotonic()
    rows: list[dict] = []
    for m, n, k in [s for s in TUNED_ORDER if s in shapes] + [s for s in shapes if s not in TUNED_ORDER]:
        for dtype in (getattr(torch, name) for name in dtypes):
            if time.monotonic() - begin > seconds:
                break
            x, w, b = linear_inputs(torch.device("cuda"), dtype, m, n, k)
            # Every compile below traces the same code: without a reset the ninth shape and
            # dtype would hit dynamo's recompile limit (a hard failure under fullgraph).
            torch._dynamo.reset()
            with torch.no_grad():
                for name in TUNED:
                    try:
                        tuned = torch.compile(eager(**VARIANTS[name]), fullgraph=True, dynamic=False,
                                              mode="max-autotune")
                        impls = {"fusedops": functools.partial(fusedops.linear, x, w, b, **VARIANTS[name]),
                                 "eager": functools.partial(eager(**VARIANTS[name]), x, w, b),
                                 "compile-max": functools.partial(tuned, x, w, b)}
                        times = core.measure_impls(impls, device, REPEATS)
                    except Exception as error:  # a failed compile is a result: kept, and the stage goes on
                        traceback.print_exc()
                        rows.append({"op": name, "pass": "fwd-max", "impl": "compile-max",
                                     "dtype": str(dtype).removeprefix("torch."), "shape": [m, n, k],
                                     "error": f"{type(error).__name__}: {error}"[:2000]})
                        continue
                    rows += rows_of(name, "fwd-max", times, dtype, (m, n, k), 2 * m * n * k, "fusedops")
            out.write_text(json.dumps(rows))
            print(f"max-autotune {dtype} {m}x{n}x{k} done at {time.monotonic() - begin:.0f} s", file=sys.stderr,
                  flush=True)


def run_child(args: list[str], env: dict[str, str]) -> list[dict]:
    part = Path(args[args.index("--json") + 1])
    subprocess.run([sys.executable, __file__, *args], env={**os.environ, **env}, check=True)
    rows = json.loads(part.read_text())
    part.unlink()
    return rows


def case_key(row: dict) -> str:
    return json.dumps([row["op"], row["pass"], row["dtype"], row["shape"]])


def summarize(processes: list[dict]) -> list[dict]:
    """Per case: each implementation's median time over the processes that ran it,
    eager's and compile's time over each fusedops path's in the same process (median
    over that path's processes), and the cuBLASLt path's median time over ours."""
    cases: dict[str, dict] = {}
    for proc in processes:
        by_case: dict[str, dict[str, float]] = {}
        for row in proc["rows"]:
            by_case.setdefault(case_key(row), {})[row["impl"]] = row["ms"]
        for key, times in by_case.items():
            case = cases.setdefault(key, {"ms": {}, "ratios": {}})
            for impl, ms in times.items():
                case["ms"].setdefault(impl, []).append(ms)
            ours = proc["side"]
            for base in ("eager", "compile"):
                if ours in times and base in times:
                    case["ratios"].setdefault(f"{base}_over_{ours}", []).append(times[base] / times[ours])
    summary = []
    for key, case in cases.items():
        op, pass_, dtype, shape = json.loads(key)
        ms = {impl: statistics.median(t) for impl, t in case["ms"].items()}
        entry = {"op": op, "pass": pass_, "dtype": dtype, "shape": shape, "ms": ms,
                 "processes": {impl: len(t) for impl, t in case["ms"].items()},
                 **{name: statistics.median(v) for name, v in case["ratios"].items()}}
        for side in ms:
            if side.startswith("fusedops") and side != "fusedops-cublaslt" and "fusedops-cublaslt" in ms:
                entry[f"cublaslt_over_{side}"] = ms["fusedops-cublaslt"] / ms[side]
        summary.append(entry)
    return summary


def sides_env(sides: list[str], orders: list[str] | None) -> dict[str, dict[str, str]]:
    """The child processes' impl names and environments: each side, and each
    side of our GEMM once per tile order."""
    runs = {}
    for side in sides:
        env = {"FUSEDOPS_LINEAR_SM90": SIDES[side]}
        if not orders or side == "fusedops-cublaslt":
            runs[side] = env
            continue
        for order in orders:  # "rule": the order by the rule, as run without the variable
            if order == "rule":
                runs[side] = env
            else:
                runs[f"{side}@{order}"] = {**env, "FUSEDOPS_LINEAR_SM90_ORDER": order}
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-autotune-s", type=float, default=0.0, help="time for the max-autotune stage")
    parser.add_argument("--shapes", nargs="+", metavar="MxNxK", default=[
        "x".join(map(str, s)) for s in LINEAR_SHAPES_GPU], help="default: the bench's GPU shapes")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--dtypes", nargs="+", choices=["bfloat16", "float16"], default=["bfloat16", "float16"])
    parser.add_argument("--sides", nargs="+", choices=list(SIDES), default=list(SIDES)[:2],
                        help="the paths to compare (default: ours by its rule, and cuBLASLt + the pass)")
    parser.add_argument("--orders", nargs="+", metavar="ORDER", help="tile orders for our GEMM's sides (e.g. 1 8m 8n)")
    parser.add_argument("--device-time", action="store_true", help="CUDA-graph replays: device time, forward only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes]
    if args.child == "max-autotune":
        child_max_autotune(args.json, args.max_autotune_s, shapes, args.dtypes)
        return 0
    if args.child:
        child(args.child, args.json, shapes, args.variants, args.dtypes, args.device_time)
        return 0
    shape_args = ["--shapes", *args.shapes, "--variants", *args.variants, "--dtypes", *args.dtypes,
                  *(["--device-time"] * args.device_time)]
    result = {"command": " ".join(["python", "benchmarks/linear_epilogues.py", *sys.argv[1:]]),
              "environment": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                              "fusedops": fusedops.build_info()},
              "processes": [], "summary": [], "max_autotune": []}
    part = str(args.json.with_suffix(".part.json"))
    runs = sides_env(args.sides, args.orders)
    for r in range(args.rounds):
        for ours in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            rows = run_child(["--child", ours, "--json", part, *shape_args], runs[ours])
            result["processes"].append({"round": r, "side": ours, "rows": rows})
            result["summary"] = summarize(result["processes"])
            args.json.write_text(json.dumps(result, indent=1))
            print(f"round {r}: {ours} done", file=sys.stderr, flush=True)
    if args.max_autotune_s > 0:
        result["max_autotune"] = run_child(["--child", "max-autotune", "--json", part, *shape_args,
                                            "--max-autotune-s", str(args.max_autotune_s)], {})
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
