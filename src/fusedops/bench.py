"""Benchmarks of every op against eager PyTorch and torch.compile, measured in
the same run: time, the byte or FLOP count and the rate reached, the share of a
ceiling measured in the same run (device copy bandwidth for memory-bound ops,
a large GEMM of the same dtype for linear), and fusedops' speed over each
baseline. Used by `python -m fusedops bench`; the JSON it writes feeds
fusedops.bench_report (tables, plot, docs/PERFORMANCE.md).

Adding an op is one entry in BENCHMARKS: a function that measures the three
implementations (with `measure_impls`) and returns rows, and the ceiling its rows
are held to.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

import fusedops
from fusedops import bench_report


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


class _Progress:
    """Shows that a long run is alive: on a terminal one updating line per op,
    in a log a line at most every few seconds."""

    def __init__(self) -> None:
        self.label = ""
        self.count = 0
        self.start = self.last = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def begin(self, label: str) -> None:
        self.label, self.count = label, 0
        self.start = self.last = time.perf_counter()
        print(f"[{label}] running ...", file=sys.stderr, flush=True)

    def tick(self, ms: float) -> None:
        self.count += 1
        now = time.perf_counter()
        text = f"[{self.label}] {self.count} measured, last {ms:.4f} ms, {now - self.start:.0f} s"
        if self.tty:
            print(f"\r{text}  ", end="", file=sys.stderr, flush=True)
        elif now - self.last > 5:
            print(text, file=sys.stderr, flush=True)
            self.last = now

    def end(self) -> None:
        end = "\n" if self.tty else ""
        print(f"{end}[{self.label}] done: {self.count} measured in {time.perf_counter() - self.start:.1f} s",
              file=sys.stderr, flush=True)


_progress = _Progress()


WARMUP_S = 0.1


def warm_up(fn: Callable[[], object], device: torch.device, seconds: float = WARMUP_S) -> int:
    """Call fn at least 3 times and for at least `seconds`, so that
    compilation, allocator and handle creation, and the GPU's clocks after an
    idle spell, stay out of the timed calls. Returns the number of calls."""
    calls = 0
    begin = time.perf_counter()
    while calls < 3 or time.perf_counter() - begin < seconds:
        fn()
        calls += 1
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return calls


def _call_times_ms(fn: Callable[[], object], device: torch.device, calls: int) -> list[float]:
    """The time of each of `calls` back-to-back calls in milliseconds. On the
    GPU a pair of CUDA events brackets each call and nothing waits between
    calls: where the device is the bottleneck a call's time is its device
    time, where the host is (tiny inputs) it includes the launch path."""
    if device.type != "cuda":
        times = []
        for _ in range(calls):
            begin = time.perf_counter()
            fn()
            times.append((time.perf_counter() - begin) * 1e3)
        return times
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    torch.cuda.synchronize(device)
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) for start, end in events]


ROUNDS = 5

# The implementations a run leaves out (--no-compile: torch.compile's).
_skipped_impls: set[str] = set()


def _timed(fns: dict[str, Callable[[], object]]) -> dict[str, Callable[[], object]]:
    return {name: fn for name, fn in fns.items() if name not in _skipped_impls}


def measure_impls(fns: dict[str, Callable[[], object]], device: torch.device, repeats: int) -> dict[str, float]:
    """Median time of one call of each implementation in milliseconds, after
    warm_up. The implementations take turns over ROUNDS rounds, each round in a
    rotated order, so that a disturbance lasting milliseconds (a background
    thread, a clock change) falls on all of them instead of skewing one
    implementation's whole measurement."""
    fns = _timed(fns)
    for fn in fns.values():
        warm_up(fn, device, WARMUP_S)
    names = list(fns)
    rounds = min(ROUNDS, repeats)
    per_round = -(-repeats // rounds)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            times[name] += _call_times_ms(fns[name], device, per_round)
    result = {name: statistics.median(t) for name, t in times.items()}
    for ms in result.values():
        _progress.tick(ms)
    return result


def graph_calls(numel: int) -> int:
    """How many calls one CUDA graph of the graph passes holds at `numel`
    elements: enough that a replay's device time outlasts its launch from the
    host (a mid-size kernel takes less than the launch of a graph), up to 16;
    one at 2^28 elements, where a launch is noise."""
    return max(1, min(16, 2**28 // numel))


def graph_replays(fns: dict[str, Callable[[], object]], device: torch.device,
                  calls: int) -> dict[str, Callable[[], object]]:
    """Each fn captured `calls` times in one CUDA graph (after a warm-up on a
    side stream, as torch's CUDA graph docs do), as its replay: the same
    kernels back to back without the host path, so a replay's time over
    `calls` is the device's time per call even where an eager call is
    host-bound. The graphs hold their own memory until the replays go."""
    replays = {}
    for name, fn in fns.items():
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        replays[name] = graph.replay
    return replays


def gemm_graph_calls(flops: int) -> int:
    """graph_calls for a linear case of `flops` a call: up to 16, as many as
    make about 2^35 FLOPs; 0 (no graph pass) above 2^34 FLOPs (from the 4096^3
    shape up), where one call's device time, 0.2 ms and more, dwarfs its host path."""
    return 0 if flops > 2**34 else max(1, min(16, 2**35 // flops))


# torch.compile's max-autotune replays CUDA graphs of its own, which another
# graph cannot capture.
_SELF_GRAPHED = {"compile-max"}


def measure_passes(name: str, fns: dict[str, Callable[[], object]], device: torch.device, repeats: int,
                   calls: int):
    """(pass name, {impl: ms per call}) of `fns` (see measure_impls): eager
    calls as `name`, and on CUDA replays of graphs of `calls` calls (none for 0)
    as `name` + " (CUDA graph)" (device time)."""
    fns = _timed(fns)
    yield name, measure_impls(fns, device, repeats)
    if device.type == "cuda" and calls > 0:
        captured = {impl: fn for impl, fn in fns.items() if impl not in _SELF_GRAPHED}
        times = measure_impls(graph_replays(captured, device, calls), device, repeats)
        yield f"{name} (CUDA graph)", {impl: ms / calls for impl, ms in times.items()}


def measure_ms(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median time of one call in milliseconds, after warm_up."""
    return measure_impls({"fn": fn}, device, repeats)["fn"]


def copy_ceiling_gbs(device: torch.device, numel: int, repeats: int) -> float:
    """Device-to-device copy bandwidth (bytes read + written): the ceiling for
    memory-bound ops."""
    src = torch.randn(numel, device=device)
    dst = torch.empty_like(src)
    ms = measure_ms(lambda: dst.copy_(src), device, repeats)
    return 2 * src.numel() * src.element_size() / ms / 1e6


def gemm_ceiling_tflops(device: torch.device, dtype: torch.dtype, repeats: int, quick: bool) -> tuple[float, int]:
    """The GEMM ceiling of one dtype: a large square matmul measured in this
    run (float32 as torch.backends.cuda.matmul.allow_tf32 says, like the
    benchmarked ops). Returns (TFLOP/s, size)."""
    size = (2048 if quick else 8192) if device.type == "cuda" else 1024
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    ms = measure_ms(lambda: torch.mm(a, b), device, repeats)
    return 2 * size**3 / ms / 1e9, size


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


# (M, N, K) = (tokens, out_features, in_features).
# (M, N, K); 16384x4096x1024 and 16384x1024x4096: a transformer MLP's up and down projections.
LINEAR_SHAPES_GPU = [(8192, 8192, 8192), (4096, 4096, 4096), (1024, 1024, 1024), (16384, 4096, 1024),
                     (16384, 1024, 4096), (32, 4096, 4096)]
LINEAR_SHAPES_SMALL = [(1024, 1024, 1024), (256, 512, 256), (32, 1024, 1024)]


# The elementwise size whose benchmark also measures the host cost per call.
HOST_CASE_SIZE = 1 << 20


def host_us_per_call(fns: dict[str, Callable[[], object]], device: torch.device, calls: int = 200,
                     rounds: int = 25) -> dict[str, float]:
    """Median wall time of one call in microseconds, per implementation, over
    `rounds` blocks of `calls` back-to-back calls, the implementations taking
    turns block by block (rotated each round): the host overhead, for inputs
    tiny enough that the device keeps up."""
    for fn in fns.values():
        for _ in range(20):
            fn()
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            begin = time.perf_counter()
            for _ in range(calls):
                fns[name]()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times[name].append((time.perf_counter() - begin) / calls * 1e6)
    result = {name: statistics.median(t) for name, t in times.items()}
    for us in result.values():
        _progress.tick(us / 1e3)
    return result


def host_rows(op: str, shape: list[int], inputs: tuple[torch.Tensor, ...], ours: Callable, theirs: Callable,
              device: torch.device, quick: bool) -> list[dict[str, Any]]:
    """The host cost per call of `ours` and of torch's own op (`theirs`) on tiny
    inputs: without gradients ("host"), and forward+backward with every input
    requiring grad ("host fwd+bwd")."""
    leaves = tuple(t.detach().clone().requires_grad_() for t in inputs)

    def train(f):
        return lambda: torch.autograd.grad(f(*leaves).sum(), leaves)

    kwargs = dict(calls=50 if quick else 200, rounds=5 if quick else 25)
    rows = []
    for pass_, fns in (("host", {"fusedops": lambda: ours(*inputs), "eager": lambda: theirs(*inputs)}),
                       ("host fwd+bwd", {"fusedops": train(ours), "eager": train(theirs)})):
        for impl, us in host_us_per_call(fns, device, **kwargs).items():
            rows.append({"op": op, "pass": pass_, "impl": impl, "dtype": "float32", "shape": shape,
                         "ms": us / 1e3, "us_per_call": us})
    return rows


def _compiler_allows_many_shapes() -> None:
    # One compiled function per variant sees every shape and dtype; keep it
    # from falling back to eager after the default recompile limit.
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, 256)


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
    _compiler_allows_many_shapes()
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


def _eager_scale_bias_clamp(x, scale, bias, lo: float, hi: float):
    return torch.clamp(x * scale + bias, lo, hi)


def _no_grad_call(fn: Callable[[], Any]) -> Any:
    with torch.no_grad():
        return fn()


def _train_step(fn: Callable[[], torch.Tensor], grad: torch.Tensor, leaves: tuple[torch.Tensor, ...]) -> None:
    for t in leaves:
        t.grad = None
    fn().backward(grad)


def bench_scale_bias_clamp(device: torch.device, numel: int, repeats: int, quick: bool) -> list[dict[str, Any]]:
    """Forward and forward+backward (x, scale and bias all requiring grad).

    bytes, forward: x read + bias read + out written. forward+backward: the
    forward's plus the backward's grad_out, x and bias read and grad_x and
    grad_bias written: 8 passes over x for a same-shape bias, 5 (plus the tiny
    bias) for a [4096] bias; the scale is negligible. The forward is timed
    under no_grad; fwd+bwd sets the .grad fields to None before each step (no
    kernel), so no implementation pays for gradient accumulation. On CUDA each
    pass is also timed as CUDA graph replays: the device time where eager
    calls of a mid-size step are bound by the host (autograd, launches).
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
            forward = {impl: functools.partial(_no_grad_call, fn) for impl, fn in fns.items()}
            train = {impl: functools.partial(_train_step, fn, g, (x, scale, bias)) for impl, fn in fns.items()}
            for base, nbytes, calls in (("fwd", fwd_bytes, forward), ("fwd+bwd", bwd_bytes, train)):
                for pass_name, times in measure_passes(base, calls, device, repeats, graph_calls(numel)):
                    for impl, ms in times.items():
                        rows.append({"op": "scale_bias_clamp", "pass": pass_name, "impl": impl,
                                     "dtype": str(dtype).removeprefix("torch."), "shape": shape,
                                     "bias": bias_shape, "bytes": nbytes, "ms": ms,
                                     "GBs": nbytes / ms / 1e6})
    if numel == HOST_CASE_SIZE:
        tiny = (torch.randn(1024, device=device), torch.tensor(1.1, device=device), torch.randn(1024, device=device))
        rows += host_rows("scale_bias_clamp", [1024], tiny, lambda x, s, b: fusedops.scale_bias_clamp(x, s, b, lo, hi),
                          lambda x, s, b: _eager_scale_bias_clamp(x, s, b, lo, hi), device, quick)
    return rows


@dataclass(frozen=True)
class Benchmark:
    """One op's benchmark. `fn(device, numel, repeats, quick)` returns rows
    (op, pass, impl, dtype, shape, ms, and bytes + GBs or flops + TFLOPs); with
    `sized` the frame calls it once per element count of the run, otherwise
    once (it picks its own shapes). `ceiling`: "copy" (memory-bound) or
    "gemm" (compute-bound, held to the GEMM of the row's dtype)."""

    fn: Callable[..., list[dict[str, Any]]]
    ceiling: str = "copy"
    sized: bool = True


BENCHMARKS: dict[str, Benchmark] = {
    "add": Benchmark(bench_add),
    "scale_bias_clamp": Benchmark(bench_scale_bias_clamp),
    "linear": Benchmark(bench_linear, ceiling="gemm", sized=False),
}


def annotate(rows: list[dict[str, Any]], ceilings: dict[str, dict[str, Any]]) -> None:
    """Each row's % of its ceiling, and fusedops' speed over each baseline of
    the same case (fusedops_speedup on every row: that row's time over
    fusedops' time)."""
    ours = {bench_report.case_key(r): r["ms"] for r in rows if r["impl"] == "fusedops"}
    for row in rows:
        name = f"gemm_{row['dtype']}" if "TFLOPs" in row else "copy" if "GBs" in row else None
        if name in ceilings:
            rate = row["TFLOPs"] if "TFLOPs" in row else row["GBs"]
            row["ceiling"] = name
            row["pct_of_ceiling"] = 100 * rate / ceilings[name]["value"]
        key = bench_report.case_key(row)
        if key in ours:
            row["fusedops_speedup"] = row["ms"] / ours[key]


def measure_ceilings(device: torch.device, args: argparse.Namespace, numel: int,
                     repeats: int) -> dict[str, dict[str, Any]]:
    """The run's ceilings: copy bandwidth at `numel` float32, and a GEMM per
    dtype where an op is held to it."""
    _progress.begin("ceilings")
    ceilings: dict[str, dict[str, Any]] = {}
    ceilings["copy"] = {"value": copy_ceiling_gbs(device, numel, repeats), "unit": "GB/s",
                        "what": f"copy_ of {numel} float32, read + written"}
    on_gpu = device.type == "cuda"
    gemm_dtypes = (torch.bfloat16, torch.float16, torch.float32) if on_gpu else (torch.float32, torch.bfloat16)
    if any(BENCHMARKS[name].ceiling == "gemm" for name in args.ops):
        for dtype in gemm_dtypes:
            tflops, size = gemm_ceiling_tflops(device, dtype, repeats, args.quick)
            name = str(dtype).removeprefix("torch.")
            ceilings[f"gemm_{name}"] = {"value": tflops, "unit": "TFLOP/s", "what": f"{name} mm {size}^3"}
    _progress.end()
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
    sizes = [1 << 20] if args.quick else [1 << 20, 1 << 24, 1 << 28] if on_gpu else [1 << 16, 1 << 20, 1 << 24]
    repeats = 5 if args.quick else (50 if on_gpu else 10)
    _compiler_allows_many_shapes()
    _skipped_impls.clear()
    if args.no_compile:
        _skipped_impls.update(("compile", "compile-max"))
    env = {
        "fusedops": fusedops.__version__,
        "torch": torch.__version__,
        "cuda": torch.version.cuda if on_gpu else None,
        "device": torch.cuda.get_device_name(device) if on_gpu else "cpu",
        "threads": torch.get_num_threads(),
        "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "sizes": sizes,
        "repeats": repeats,
        "baselines": "eager" if args.no_compile else "eager, compile",
        "command": " ".join(["python -m fusedops"] + sys.argv[1:]),
    }
    print(f"fusedops bench on {env['device']} (torch {env['torch']}; elementwise sizes "
          f"{', '.join(bench_report.shape_text([s]) for s in sizes)}; median of {repeats})", flush=True)

    ceilings = measure_ceilings(device, args, max(sizes), repeats)
    result: dict[str, Any] = {"env": env, "ceilings": ceilings, "rows": []}
    for name in args.ops:
        bench = BENCHMARKS[name]
        _progress.begin(name)
        rows: list[dict[str, Any]] = []
        for numel in sizes if bench.sized else [None]:
            rows += bench.fn(device, numel, repeats, args.quick)
        _progress.end()
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
