"""Robustness of every op on the GPU: CUDA graphs, busy and non-default streams,
threads, inputs on another device, determinism.

Every op has one entry in SAMPLES: a maker of inputs (some requiring grad) and
the PyTorch reference. The tests are collected everywhere; the CUDA ones are
skipped, visibly, without a GPU (the determinism tests also run on the CPU).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F
from conftest import CUDA, DEVICES

import fusedops

needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
needs_two_gpus = pytest.mark.skipif(not CUDA or torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")


@dataclass(frozen=True)
class Sample:
    """One op under test. `make(device, dtype, generator, rows)` returns the
    inputs, with `rows` rows in the leading dim of the main input (the floating
    inputs that take part in autograd require grad); `op` and `ref` take those
    inputs positionally; `tolerance` bounds op against ref."""

    make: Callable[[torch.device, torch.dtype, torch.Generator, int], tuple[torch.Tensor, ...]]
    op: Callable[..., torch.Tensor]
    ref: Callable[..., torch.Tensor]
    tolerance: dict[str, float]


def _randn(shape, device, dtype, generator, requires_grad=True, scale=1.0):
    # Drawn on the CPU from an explicit generator: the same values on every
    # device and in every thread, whatever the global seed.
    t = (torch.randn(shape, generator=generator, dtype=torch.float64) * scale).to(device=device, dtype=dtype)
    return t.requires_grad_(requires_grad)


FP32 = dict(rtol=1e-5, atol=1e-5)

SAMPLES: dict[str, Sample] = {
    "add": Sample(
        make=lambda device, dtype, g, rows: (_randn((rows, 257), device, dtype, g),
                                             _randn((257,), device, dtype, g)),
        op=fusedops.add,
        ref=torch.add,
        tolerance=FP32,
    ),
    "scale_bias_clamp": Sample(
        make=lambda device, dtype, g, rows: (_randn((rows, 257), device, dtype, g),
                                             _randn((), device, dtype, g),
                                             _randn((257,), device, dtype, g)),
        op=lambda x, scale, bias: fusedops.scale_bias_clamp(x, scale, bias, -0.5, 0.5),
        ref=lambda x, scale, bias: torch.clamp(x * scale + bias, -0.5, 0.5),
        # The grads of scale and bias are sums over all rows.
        tolerance=dict(rtol=1e-4, atol=1e-4),
    ),
    "linear": Sample(
        make=lambda device, dtype, g, rows: (_randn((rows, 96), device, dtype, g),
                                             _randn((80, 96), device, dtype, g, scale=96**-0.5),
                                             _randn((80,), device, dtype, g)),
        op=lambda x, w, b: fusedops.linear(x, w, b, activation="gelu", max=1.0),
        ref=lambda x, w, b: torch.clamp(F.gelu(F.linear(x, w, b)), max=1.0),
        # Sums over 96 inputs, and over all rows for the grads of weight and bias.
        tolerance=dict(rtol=1e-4, atol=1e-4),
    ),
}

sample_names = pytest.mark.parametrize("name", sorted(SAMPLES))


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _make(sample: Sample, device, generator, rows=64):
    return sample.make(torch.device(device), torch.float32, generator, rows)


def _grad_out(sample: Sample, inputs, generator):
    """A random gradient of the op's output shape."""
    with torch.no_grad():
        shape = sample.op(*inputs).shape
    return _randn(shape, inputs[0].device, torch.float32, generator, requires_grad=False)


def _forward_backward(op, inputs, grad_out):
    """The op's output and the grads of every input that requires grad."""
    out = op(*inputs)
    wrt = [t for t in inputs if t.requires_grad]
    return (out, *torch.autograd.grad(out, wrt, grad_out))


def _reference(sample: Sample, inputs, grad_out):
    """The reference's output and grads, computed from detached copies."""
    fresh = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    return _forward_backward(sample.ref, fresh, grad_out)


def _assert_all_close(actual, expected, tolerance):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype and a.device == e.device
        torch.testing.assert_close(a, e, **tolerance)


def _busy(cycles: int = 50_000_000) -> None:
    """Keep the current stream busy for a while (tens of ms) with one kernel."""
    torch.cuda._sleep(cycles)


def _static_copy(static, fresh):
    with torch.no_grad():
        for s, f in zip(static, fresh, strict=True):
            s.copy_(f)


@needs_cuda
@sample_names
def test_cuda_graph_forward_backward_replay(name):
    sample = SAMPLES[name]
    g = _generator(1)
    static = _make(sample, "cuda", g)
    static_grad_out = _grad_out(sample, static, g)

    # Warm up on a side stream, as capture requires (lazy inits, autograd's
    # stream bookkeeping), then capture forward + backward.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _forward_backward(sample.op, static, static_grad_out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = _forward_backward(sample.op, static, static_grad_out)

    for seed in (2, 3, 4):
        g = _generator(seed)
        fresh = _make(sample, "cuda", g)
        fresh_grad_out = _grad_out(sample, fresh, g)
        _static_copy((*static, static_grad_out), (*fresh, fresh_grad_out))
        graph.replay()
        torch.cuda.synchronize()
        eager = _forward_backward(sample.op, fresh, fresh_grad_out)
        _assert_all_close(captured, eager, sample.tolerance)
        _assert_all_close(captured, _reference(sample, fresh, fresh_grad_out), sample.tolerance)


@needs_cuda
@sample_names
def test_cuda_busy_non_default_stream(name):
    """The op runs on the current stream: on a stream that is still busy and
    only then receives the inputs, it must wait for them. An op issued on the
    default (or any other) stream would read the stale inputs."""
    sample = SAMPLES[name]
    g = _generator(5)
    fresh = _make(sample, "cuda", g)
    grad_out = _grad_out(sample, fresh, g)
    expected = _reference(sample, fresh, grad_out)
    stale = _make(sample, "cuda", _generator(6))
    torch.cuda.synchronize()

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        _busy()
        _static_copy(stale, fresh)  # now stale holds the fresh values, but only on `stream`
        got = _forward_backward(sample.op, stale, grad_out)
    torch.cuda.current_stream().wait_stream(stream)
    _assert_all_close(got, expected, sample.tolerance)


@needs_cuda
@sample_names
def test_cuda_four_threads_own_streams(name):
    sample = SAMPLES[name]
    jobs = []
    for worker in range(4):
        g = _generator(100 + worker)
        inputs = _make(sample, "cuda", g)
        grad_out = _grad_out(sample, inputs, g)
        jobs.append((inputs, grad_out, _reference(sample, inputs, grad_out)))
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
                    got = _forward_backward(sample.op, inputs, grad_out)
                    stream.synchronize()
                    _assert_all_close(got, expected, sample.tolerance)
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
@sample_names
def test_cuda_inputs_on_second_device(name):
    """Inputs on cuda:1 while cuda:0 is current: the op must run on cuda:1 and
    on its current stream, which is busy and only then writes the inputs."""
    sample = SAMPLES[name]
    g = _generator(7)
    with torch.cuda.device(1):
        fresh = _make(sample, "cuda:1", g)
        grad_out = _grad_out(sample, fresh, g)
        expected = _reference(sample, fresh, grad_out)
        stale = _make(sample, "cuda:1", _generator(8))
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)

    with torch.cuda.device(0):
        with torch.cuda.device(1):
            _busy()  # on cuda:1's current stream
        _static_copy(stale, fresh)
        assert torch.cuda.current_device() == 0
        got = _forward_backward(sample.op, stale, grad_out)
        assert torch.cuda.current_device() == 0
    for t in got:
        assert t.device == torch.device("cuda:1")
    _assert_all_close(got, expected, sample.tolerance)


# Larger inputs than the other tests, so that reductions in the backward
# (grads of broadcast inputs) span many blocks.
LARGE_ROWS = 64 * 97


def _large(sample: Sample, device, seed):
    g = _generator(seed)
    inputs = _make(sample, device, g, LARGE_ROWS)
    return inputs, _grad_out(sample, inputs, g)


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
@sample_names
def test_autograd_node_only_where_a_gradient_is_needed(device, name):
    """No input requiring grad, or grad mode off: a plain result. One input
    requiring grad: a node whose only edge leads to that input, and the
    gradient that the float64 reference gives it."""
    sample = SAMPLES[name]
    inputs = _make(sample, device, _generator(11), rows=33)
    plain = tuple(t.detach() for t in inputs)
    expected = sample.ref(*(t.double() for t in plain))
    without_grad = sample.op(*plain)
    with torch.no_grad():
        under_no_grad = sample.op(*inputs)
    for out in (without_grad, under_no_grad):
        assert out.grad_fn is None and not out.requires_grad
        torch.testing.assert_close(out.double(), expected, **sample.tolerance)

    grad_out = _grad_out(sample, inputs, _generator(12))
    for i in range(len(plain)):
        leaf = plain[i].clone().requires_grad_()
        args = (*plain[:i], leaf, *plain[i + 1:])
        out = sample.op(*args)
        edges = [fn is not None for fn, _ in out.grad_fn.next_functions]
        assert sum(edges) == 1, f"input {i}: edges {edges}"
        (got,) = torch.autograd.grad(out, leaf, grad_out)
        leaf64 = leaf.detach().double().requires_grad_()
        out64 = sample.ref(*(t.double() for t in plain[:i]), leaf64, *(t.double() for t in plain[i + 1:]))
        (want,) = torch.autograd.grad(out64, leaf64, grad_out.double())
        torch.testing.assert_close(got.double(), want, **sample.tolerance, msg=lambda m, i=i: f"input {i}: {m}")


@pytest.mark.parametrize("device", DEVICES)
@sample_names
def test_forward_mode_ad_is_refused_not_dropped(device, name):
    """The ops have no forward-mode (jvp) formula: a dual input must raise, not
    give a result without its tangent."""
    sample = SAMPLES[name]
    plain = tuple(t.detach() for t in _make(sample, device, _generator(13), rows=5))
    with fwAD.dual_level():
        dual = fwAD.make_dual(plain[0], torch.ones_like(plain[0]))
        with pytest.raises(RuntimeError, match="jvp|forward"):
            sample.op(dual, *plain[1:])


@pytest.mark.parametrize("device", DEVICES)
@sample_names
def test_backward_bitwise_deterministic(device, name):
    sample = SAMPLES[name]
    inputs, grad_out = _large(sample, device, 9)
    first = _forward_backward(sample.op, inputs, grad_out)
    for _ in range(3):
        again = _forward_backward(sample.op, inputs, grad_out)
        for a, b in zip(again, first, strict=True):
            assert torch.equal(a, b), "results differ from run to run"


@pytest.mark.parametrize("device", DEVICES)
@sample_names
def test_under_deterministic_algorithms(device, name, deterministic_mode):
    """With torch.use_deterministic_algorithms(True) the ops run without an
    error or a warning, agree with the normal mode, and repeat bitwise."""
    sample = SAMPLES[name]
    inputs, grad_out = _large(sample, device, 10)
    torch.use_deterministic_algorithms(False)
    normal = _forward_backward(sample.op, inputs, grad_out)
    torch.use_deterministic_algorithms(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first = _forward_backward(sample.op, inputs, grad_out)
        second = _forward_backward(sample.op, inputs, grad_out)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b), "results differ from run to run in deterministic mode"
    _assert_all_close(first, normal, sample.tolerance)
    _assert_all_close(first, _reference(sample, inputs, grad_out), sample.tolerance)


@needs_cuda
def test_cuda_scale_bias_clamp_more_than_2_31_elements():
    """Forward and backward over 2^31 + 1024 float16 elements with a [1024]
    bias: the output at both ends, and the grads: grad_x at both ends, the full
    reductions of grad_bias and grad_scale against a chunked float64 reference."""
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs a GPU with 40 GiB")
    rows, cols = 2**21 + 1, 1024
    dtype, lo, hi = torch.float16, -1.0, 1.0
    x = torch.randn(rows, cols, device="cuda", dtype=dtype).requires_grad_()
    scale = torch.tensor(1.5, device="cuda", dtype=dtype, requires_grad=True)
    bias = torch.randn(cols, device="cuda", dtype=dtype, requires_grad=True)
    out = fusedops.scale_bias_clamp(x, scale, bias, lo, hi)

    def ref(xs):
        return torch.clamp(xs.double() * scale.double() + bias.double(), lo, hi)

    for part in (slice(0, 300), slice(rows - 300, rows)):
        torch.testing.assert_close(out[part], ref(x[part].detach()).to(dtype), rtol=2e-3, atol=2e-3)
    # Small grads keep the float16 sums of grad_scale far from overflow.
    grad_out = torch.randn(rows, cols, device="cuda", dtype=dtype) / 256
    grad_x, grad_scale, grad_bias = torch.autograd.grad(out, (x, scale, bias), grad_out)
    del out
    expected_bias = torch.zeros(cols, device="cuda", dtype=torch.float64)
    expected_scale = torch.zeros((), device="cuda", dtype=torch.float64)
    chunk = 2**17
    with torch.no_grad():
        for start in range(0, rows, chunk):
            xs, gs = x[start:start + chunk].double(), grad_out[start:start + chunk].double()
            v = xs * scale.double() + bias.double()
            g = gs * ((v >= lo) & (v <= hi))
            expected_bias += g.sum(0)
            expected_scale += (g * xs).sum()
            if start == 0 or start + chunk >= rows:
                got = grad_x[start:start + chunk]
                torch.testing.assert_close(got, (g * scale.double()).to(dtype), rtol=2e-3, atol=1e-5)
    assert grad_bias.shape == bias.shape and grad_scale.shape == scale.shape
    torch.testing.assert_close(grad_bias.double(), expected_bias, rtol=2e-3, atol=1e-3)
    torch.testing.assert_close(grad_scale.double(), expected_scale, rtol=2e-3, atol=1e-2)
