"""The frame of `python -m fusedops bench` (ceilings, progress, tables, JSON,
plot, errors) with a fake op, so that nothing is compiled."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time

import pytest
import torch
from conftest import needs_cuda

import fusedops
from fusedops import bench
from fusedops.bench import core
from fusedops.bench.linear import LINEAR_VARIANTS


def fake_op(device, numel, repeats, quick):
    rows = []
    for impl, ms in (("fusedops", 1.0), ("eager", 2.0), ("compile", 0.5)):
        core.measure_ms(lambda: None, device, repeats)  # counts for the progress line
        rows.append({"op": "fake", "pass": "fwd", "impl": impl, "dtype": "float32", "shape": [numel],
                     "bytes": 12 * numel, "ms": ms, "GBs": 12 * numel / ms / 1e6})
    return rows


def parse(argv):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setitem(bench.BENCHMARKS, "fake", core.Benchmark(fake_op))


def test_run_writes_tables_json_and_plot(fake, tmp_path, capsys):
    out = tmp_path / "run.json"
    argv = ["--device", "cpu", "--ops", "fake", "--quick", "--json", str(out)]
    has_plot = importlib.util.find_spec("matplotlib") is not None
    if has_plot:
        argv += ["--plot", str(tmp_path / "run.png")]
    assert bench.run(parse(argv)) == 0
    captured = capsys.readouterr()
    assert "ceiling copy:" in captured.out
    assert "fake fwd float32 2^20: 0.50x torch.compile (1.0000 ms vs 0.5000 ms)" in captured.out
    assert "[fake] done: 3 measured" in captured.err
    result = json.loads(out.read_text())
    assert result["env"]["sizes"] == [1 << 20] and result["ceilings"]["copy"]["unit"] == "GB/s"
    assert "gemm_float32" not in result["ceilings"]  # only ops held to a GEMM measure it
    ours, eager, compiled = result["rows"]
    assert ours["ceiling"] == "copy" and ours["pct_of_ceiling"] > 0
    assert (ours["fusedops_speedup"], eager["fusedops_speedup"], compiled["fusedops_speedup"]) == (1.0, 2.0, 0.5)
    if has_plot:
        assert (tmp_path / "run.png").stat().st_size > 0


def test_every_size_for_sized_ops(fake, tmp_path):
    out = tmp_path / "run.json"
    assert bench.run(parse(["--device", "cpu", "--ops", "fake", "--json", str(out)])) == 0
    rows = json.loads(out.read_text())["rows"]
    assert sorted({r["shape"][0] for r in rows}) == [1 << 16, 1 << 20, 1 << 24]


def test_no_compile_leaves_torch_compile_uncalled(monkeypatch, tmp_path):
    called = []

    def op(device, numel, repeats, quick):
        fns = {impl: (lambda impl=impl: called.append(impl)) for impl in ("fusedops", "eager", "compile", "compile-max")}
        return [{"op": "fake", "pass": "fwd", "impl": impl, "dtype": "float32", "shape": [numel], "bytes": 12,
                 "ms": max(ms, 1e-9), "GBs": 12 / max(ms, 1e-9) / 1e6}
                for impl, ms in core.measure_impls(fns, device, repeats).items()]

    monkeypatch.setitem(bench.BENCHMARKS, "fake", core.Benchmark(op))
    out = tmp_path / "run.json"
    assert bench.run(parse(["--device", "cpu", "--ops", "fake", "--quick", "--no-compile", "--json", str(out)])) == 0
    result = json.loads(out.read_text())
    assert set(called) == {"fusedops", "eager"}
    assert {r["impl"] for r in result["rows"]} == {"fusedops", "eager"} and result["env"]["baselines"] == "eager"
    called.clear()  # the next run without the flag times every baseline again
    assert bench.run(parse(["--device", "cpu", "--ops", "fake", "--quick"])) == 0
    assert set(called) == {"fusedops", "eager", "compile", "compile-max"}


def test_plot_without_matplotlib_says_how_to_get_it(fake, monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert bench.run(parse(["--device", "cpu", "--ops", "fake", "--plot", str(tmp_path / "p.png")])) == 2
    assert "pip install 'fusedops[bench]'" in capsys.readouterr().err
    assert not (tmp_path / "p.png").exists()


def test_cuda_without_gpu_is_an_error(fake, monkeypatch, capsys):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert bench.run(parse(["--device", "cuda", "--ops", "fake"])) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_warm_up_runs_at_least_three_calls_and_the_given_time():
    cpu = torch.device("cpu")
    calls = []
    begin = time.perf_counter()
    n = core.warm_up(lambda: calls.append(1), cpu, seconds=0.05)
    assert time.perf_counter() - begin >= 0.05 and n == len(calls) >= 3
    calls.clear()
    assert core.warm_up(lambda: (calls.append(1), time.sleep(0.03)), cpu, seconds=0.01) == len(calls) == 3


@pytest.fixture
def fake_clock(monkeypatch):
    """bench's clock, advanced only by the calls under test: exact times on a
    loaded machine (a sleep can overshoot by milliseconds under parallel tests)."""
    now = [0.0]
    monkeypatch.setattr(core.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(core, "WARMUP_S", 0.0)

    def takes(seconds, calls, name):
        def call():
            calls.append(name)
            now[0] += seconds
        return call

    return takes


def test_measure_ms_times_only_calls_after_the_warm_up(fake_clock):
    calls = []
    ms = core.measure_ms(fake_clock(0.002, calls, "a"), torch.device("cpu"), repeats=5)
    assert len(calls) == 3 + 5 and ms == pytest.approx(2.0)


def test_measure_impls_takes_turns_in_rotated_rounds(fake_clock):
    calls = []
    fns = {name: fake_clock(seconds, calls, name) for name, seconds in (("a", 0.001), ("b", 0.004), ("c", 0.0))}
    ms = core.measure_impls(fns, torch.device("cpu"), repeats=10)
    assert calls[:9] == ["a"] * 3 + ["b"] * 3 + ["c"] * 3  # warm-up
    timed = calls[9:]
    assert len(timed) == 30  # 5 rounds of 2 calls per implementation
    rounds = [timed[i:i + 6] for i in range(0, 30, 6)]
    assert rounds[0] == ["a", "a", "b", "b", "c", "c"]
    assert rounds[1] == ["b", "b", "c", "c", "a", "a"]
    assert rounds[2] == ["c", "c", "a", "a", "b", "b"]
    assert rounds[3] == rounds[0]
    assert ms == pytest.approx({"a": 1.0, "b": 4.0, "c": 0.0})


@needs_cuda
def test_graph_pass_captures_every_impl_but_those_with_graphs_of_their_own():
    x = torch.randn(4097, device="cuda")
    capturing: dict[str, list[bool]] = {"fusedops": [], "eager": [], "compile-max": []}

    def logged(name, fn):
        def call():
            capturing[name].append(torch.cuda.is_current_stream_capturing())
            return fn()
        return call

    fns = {"fusedops": logged("fusedops", lambda: fusedops.add(x, x)),
           "eager": logged("eager", lambda: torch.add(x, x)),
           "compile-max": logged("compile-max", lambda: x * 2)}
    cuda = torch.device("cuda")
    passes = dict(core.measure_passes("fwd", fns, cuda, repeats=5, calls=3))
    assert set(passes["fwd"]) == {"fusedops", "eager", "compile-max"}
    assert set(passes["fwd (CUDA graph)"]) == {"fusedops", "eager"}
    assert capturing["fusedops"].count(True) == capturing["eager"].count(True) == 3  # one graph of 3 calls
    assert not any(capturing["compile-max"])
    assert [name for name, _ in core.measure_passes("fwd", fns, cuda, repeats=5, calls=0)] == ["fwd"]


@needs_cuda
def test_linear_bench_replays_its_small_shapes_from_cuda_graphs(tmp_path):
    out = tmp_path / "run.json"
    assert bench.run(parse(["--device", "cuda", "--ops", "linear", "--quick", "--no-compile", "--json", str(out)])) == 0
    rows = json.loads(out.read_text())["rows"]
    graphed = {(r["op"], r["pass"], r["dtype"], tuple(r["shape"]), r["impl"]): r for r in rows
               if r["pass"].endswith("(CUDA graph)")}
    cases = [(name, "fwd") for name in LINEAR_VARIANTS] + [("linear", "fwd+bwd")]
    assert set(graphed) == {(op, f"{pass_} (CUDA graph)", dtype, shape, impl)
                            for op, pass_ in cases for dtype in ("bfloat16", "float16", "float32")
                            for shape in ((1024, 1024, 1024), (256, 512, 256)) for impl in ("fusedops", "eager")}
    assert all(r["ms"] > 0 and r["TFLOPs"] > 0 for r in graphed.values())
