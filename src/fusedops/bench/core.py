"""What every op's benchmark is made of: timing (rotated rounds, CUDA events,
CUDA graph replays), host cost per call, the ceilings, and the Benchmark record
each op module of this package defines (fusedops/bench/<op>.py: `BENCHMARK`).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


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


progress = _Progress()

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
skipped_impls: set[str] = set()


def _timed(fns: dict[str, Callable[[], object]]) -> dict[str, Callable[[], object]]:
    return {name: fn for name, fn in fns.items() if name not in skipped_impls}


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
        progress.tick(ms)
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
        try:
            with torch.cuda.graph(graph):
                for _ in range(calls):
                    fn()
        except RuntimeError as error:
            if name != "liger":  # ours and torch's must capture; a peer's failure is a finding, not a stop
                raise
            print(f"fusedops bench: liger left out of the CUDA graph pass, its capture failed: {error}",
                  file=sys.stderr)
            continue
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
    memory-bound ops. On CUDA timed as CUDA graph replays (device time, as the
    rows' graph passes are), at a size the caller picks beyond the L2 cache."""
    src = torch.randn(numel, device=device)
    dst = torch.empty_like(src)
    copy = {"copy": lambda: dst.copy_(src)}
    calls = graph_calls(numel) if device.type == "cuda" else 1
    timed = graph_replays(copy, device, calls) if device.type == "cuda" else copy
    ms = measure_impls(timed, device, repeats)["copy"] / calls
    return 2 * src.numel() * src.element_size() / ms / 1e6


def gemm_ceiling_tflops(device: torch.device, dtype: torch.dtype, repeats: int, quick: bool) -> tuple[float, int]:
    """The GEMM ceiling of one dtype: a large square matmul measured in this
    run (float32 as torch.backends.cuda.matmul.allow_tf32 says, like the
    benchmarked ops). Returns (TFLOP/s, size)."""
    size = 8192 if device.type == "cuda" else 1024
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    ms = measure_ms(lambda: torch.mm(a, b), device, repeats)
    return 2 * size**3 / ms / 1e9, size


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
        progress.tick(us / 1e3)
    return result


def host_rows(op: str, shape: list[int], inputs: tuple[torch.Tensor, ...], ours: Callable, theirs: Callable,
              device: torch.device, quick: bool) -> list[dict[str, Any]]:
    """The host cost per call of `ours` and of torch's own op (`theirs`) on tiny
    inputs: without gradients ("host"), and forward+backward with every input
    requiring grad ("host fwd+bwd")."""
    leaves = tuple(t.detach().clone().requires_grad_() for t in inputs)

    def loss(result):  # an op's one output, or the sum over its several
        return sum(out.sum() for out in result) if isinstance(result, tuple) else result.sum()

    def train(f):
        return lambda: torch.autograd.grad(loss(f(*leaves)), leaves)

    kwargs = dict(calls=50 if quick else 200, rounds=5 if quick else 25)
    rows = []
    for pass_, fns in (("host", {"fusedops": lambda: ours(*inputs), "eager": lambda: theirs(*inputs)}),
                       ("host fwd+bwd", {"fusedops": train(ours), "eager": train(theirs)})):
        for impl, us in host_us_per_call(fns, device, **kwargs).items():
            rows.append({"op": op, "pass": pass_, "impl": impl, "dtype": "float32", "shape": shape,
                         "ms": us / 1e3, "us_per_call": us})
    return rows


def compiler_allows_many_shapes() -> None:
    # One compiled function per variant sees every shape and dtype; keep it
    # from falling back to eager after the default recompile limit.
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, 256)


def liger_op(name: str, device: torch.device) -> Callable | None:
    """Liger-Kernel's functional form of one op (liger_kernel.transformers.
    functional.<name>: its autograd function, as its modules call it) for the
    bench's "liger" rows, on CUDA where Liger-Kernel is installed; else None.
    Its kernels are Triton's: CUDA only."""
    if device.type != "cuda":
        return None
    try:
        from liger_kernel.transformers import functional
    except ImportError:
        return None
    return getattr(functional, name)


def no_grad_call(fn: Callable[[], Any]) -> Any:
    with torch.no_grad():
        return fn()


def train_step(fn: Callable[[], torch.Tensor | tuple[torch.Tensor, ...]], grad,
               leaves: tuple[torch.Tensor, ...]) -> None:
    """One forward and backward of `fn` for `grad` (a tensor, or one per output),
    the leaves' .grad fields set to None first (no accumulation kernel)."""
    for t in leaves:
        t.grad = None
    torch.autograd.backward(fn(), grad)


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
