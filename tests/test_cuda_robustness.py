"""Robustness of every op on the GPU: CUDA graphs (captured directly and by
torch.compile), busy and non-default streams, threads, inputs on another
device; and bitwise determinism (also on the CPU).

Driven by SAMPLES of samples.py (each op's main variants), against the float64
reference. The CUDA tests are collected everywhere and skipped, visibly,
without a GPU.
"""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
from conftest import CUDA, DEVICES, needs_cuda
from samples import SAMPLES, assert_all_close, assert_matches_reference, forward_backward, ids, outputs

needs_two_gpus = pytest.mark.skipif(not CUDA or torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
every_op = pytest.mark.parametrize("sample", SAMPLES, ids=ids(SAMPLES))


def _make(sample, device, dtype=torch.float32, rows=64):
    """Inputs (the differentiable ones requiring grad) and an output gradient."""
    inputs = sample.make(device, dtype, rows=rows, requires_grad=True)
    return inputs, sample.grad_out(inputs)


def _busy(cycles: int = 50_000_000) -> None:
    """Keep the current stream busy for a while (tens of ms) with one kernel."""
    torch.cuda._sleep(cycles)


def _static_copy(static, fresh):
    with torch.no_grad():
        for s, f in zip(static, fresh, strict=True):
            s.copy_(f)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@every_op
def test_cuda_graph_forward_backward_replay(sample, dtype):
    static, static_grad_out = _make(sample, "cuda", dtype)

    # Warm up on a side stream, as capture requires (lazy inits, cuBLASLt
    # heuristics, autograd's stream bookkeeping), then capture forward + backward.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            forward_backward(sample, static, static_grad_out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = forward_backward(sample, static, static_grad_out)

    for _ in range(3):
        fresh, fresh_grad_out = _make(sample, "cuda", dtype)
        # Tensor inputs (a scale too) are read from device memory on replay.
        _static_copy((*static, *static_grad_out), (*fresh, *fresh_grad_out))
        graph.replay()
        torch.cuda.synchronize()
        eager = forward_backward(sample, fresh, fresh_grad_out)
        assert_all_close(sample, captured, eager, fresh)
        assert_matches_reference(sample, captured, fresh, fresh_grad_out)


@needs_cuda
@every_op
def test_cuda_compile_reduce_overhead(sample):
    """torch.compile's CUDA graphs (mode="reduce-overhead") replay the op on new inputs."""
    torch._dynamo.reset()  # the samples share lambdas' code: no recompile limit across them
    compiled = torch.compile(sample.call, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        inputs = sample.make("cuda", torch.float32, rows=64)
        torch.testing.assert_close(outputs(compiled(*inputs)), outputs(sample.call(*inputs)),
                                   **sample.tolerance[torch.float32])


@needs_cuda
@every_op
def test_cuda_busy_non_default_stream(sample):
    """The op runs on the current stream: on a stream that is still busy and
    only then receives the inputs, it must wait for them. An op issued on the
    default (or any other) stream would read the stale inputs."""
    fresh, grad_out = _make(sample, "cuda")
    stale, _ = _make(sample, "cuda")
    torch.cuda.synchronize()

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        _busy()
        _static_copy(stale, fresh)  # now stale holds the fresh values, but only on `stream`
        got = forward_backward(sample, stale, grad_out)
    torch.cuda.current_stream().wait_stream(stream)
    assert_matches_reference(sample, got, fresh, grad_out)


@needs_cuda
@every_op
def test_cuda_four_threads_own_streams(sample):
    jobs = []
    for _ in range(4):
        inputs, grad_out = _make(sample, "cuda")
        jobs.append((inputs, grad_out, sample.reference(inputs, grad_out)))
    torch.cuda.synchronize()
    start = threading.Barrier(len(jobs), timeout=60)
    errors: list[BaseException] = []

    def work(inputs, grad_out, expected):
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.default_stream())
            with torch.cuda.stream(stream):
                start.wait()
                for _ in range(20):
                    got = forward_backward(sample, inputs, grad_out)
                    stream.synchronize()
                    assert_all_close(sample, got, expected, inputs)
        except BaseException as error:  # re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    if errors:
        raise errors[0]


@needs_two_gpus
@every_op
def test_cuda_inputs_on_second_device(sample):
    """Inputs on cuda:1 while cuda:0 is current: the op must run on cuda:1 and
    on its current stream, which is busy and only then writes the inputs."""
    with torch.cuda.device(1):
        fresh, grad_out = _make(sample, "cuda:1")
        stale, _ = _make(sample, "cuda:1")
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)

    with torch.cuda.device(0):
        with torch.cuda.device(1):
            _busy()  # on cuda:1's current stream
        _static_copy(stale, fresh)
        assert torch.cuda.current_device() == 0
        got = forward_backward(sample, stale, grad_out)
        assert torch.cuda.current_device() == 0
    for t in got:
        assert t.device == torch.device("cuda:1")
    assert_matches_reference(sample, got, fresh, grad_out)


# Larger inputs than the other tests, so that reductions in the backward
# (grads of broadcast inputs) span many blocks.
LARGE_ROWS = 64 * 97


@pytest.fixture
def deterministic_mode(monkeypatch):
    """torch.use_deterministic_algorithms(True) for one test, restored after.
    cuBLAS needs a fixed workspace config to be allowed in that mode."""
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled()
    before_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(before, warn_only=before_warn)


@pytest.mark.parametrize("device", DEVICES)
@every_op
def test_backward_bitwise_deterministic(device, sample):
    inputs, grad_out = _make(sample, device, rows=LARGE_ROWS)
    first = forward_backward(sample, inputs, grad_out)
    for _ in range(3):
        again = forward_backward(sample, inputs, grad_out)
        for a, b in zip(again, first, strict=True):
            assert torch.equal(a, b), "results differ from run to run"


@pytest.mark.parametrize("device", DEVICES)
@every_op
def test_under_deterministic_algorithms(device, sample, deterministic_mode):
    """With torch.use_deterministic_algorithms(True) the ops run without an
    error or a warning, agree with the normal mode, and repeat bitwise."""
    inputs, grad_out = _make(sample, device, rows=LARGE_ROWS)
    torch.use_deterministic_algorithms(False)
    normal = forward_backward(sample, inputs, grad_out)
    torch.use_deterministic_algorithms(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = forward_backward(sample, inputs, grad_out)
        second = forward_backward(sample, inputs, grad_out)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b), "results differ from run to run in deterministic mode"
    assert_all_close(sample, first, normal, inputs)
    assert_matches_reference(sample, first, inputs, grad_out)
