"""The generic checks of every op, driven by the table in samples.py: forward
and gradients against float64 PyTorch over layouts and dtypes, gradcheck,
opcheck, torch.compile, autograd edges, forward-mode refusal and the errors of
bad calls. (CUDA graphs, streams and determinism: test_cuda_robustness.py.)"""

from __future__ import annotations

import itertools
import re

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from helpers import LAYOUTS, poison_allocator
from samples import (
    ALL_SAMPLES,
    MORE_SHAPES,
    SAMPLES,
    Bad,
    assert_all_close,
    assert_matches_reference,
    forward_backward,
    grads,
    ids,
    outputs,
)
from torch.library import opcheck

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)

every_sample = pytest.mark.parametrize("sample", ALL_SAMPLES, ids=ids(ALL_SAMPLES))
main_samples = pytest.mark.parametrize("sample", SAMPLES, ids=ids(SAMPLES))


def test_every_public_op_has_samples():
    public = {name.removeprefix("fusedops::") for name in torch._C._dispatch_get_all_op_names()
              if name.startswith("fusedops::") and not name.startswith("fusedops::_")}
    assert {s.op for s in SAMPLES} == public
    assert all(any(s.bad for s in SAMPLES if s.op == op) for op in public)
    assert len(set(ids(ALL_SAMPLES))) == len(ALL_SAMPLES)


@pytest.mark.parametrize("layout", LAYOUTS)
@every_sample
def test_forward_matches_float64_reference(sample, device, dtype, layout):
    inputs = sample.make(device, dtype, layout)
    before = [t.clone() for t in inputs]
    poison_allocator(device)  # an output element left unwritten shows as NaN
    outs = outputs(sample.call(*inputs))
    expected = outputs(sample.ref(*(t.double() for t in inputs)))
    assert len(outs) == len(expected)
    strides = sample.out_strides(*inputs) if sample.out_strides else [None] * len(outs)
    for out, ref, out_dtype, stride in zip(outs, expected, sample.out_dtypes(dtype, len(outs)), strides,
                                           strict=True):
        assert out.shape == ref.shape and out.dtype == out_dtype and out.device == inputs[0].device
        assert out.stride() == stride if stride else out.is_contiguous()
        torch.testing.assert_close(out.double(), ref, **sample.tolerance[dtype])
    if sample.same_bits_as_ref:
        assert all(torch.equal(o, r) for o, r in zip(outs, outputs(sample.ref(*inputs)), strict=True))
    assert all(torch.equal(t, b) for t, b in zip(inputs, before, strict=True)), "an input was written"


@pytest.mark.parametrize("layout", LAYOUTS)
@every_sample
def test_gradients_match_float64_autograd(sample, device, dtype, layout):
    inputs = sample.make(device, dtype, layout, requires_grad=True)
    grad_out = sample.grad_out(inputs, layout)
    poison_allocator(device)
    assert_matches_reference(sample, forward_backward(sample, inputs, grad_out), inputs, grad_out)


@every_sample
def test_gradcheck(sample, device):
    inputs = sample.make(device, torch.float64, rows=2, requires_grad=True)
    f = sample.call
    if sample.kinks:
        # Outputs near a kink are left out: a finite difference across it is no derivative.
        keep = ~sample.kinks(*(t.detach() for t in inputs))

        def f(*inputs):
            return sample.call(*inputs) * keep

    # Fast mode (random projections of the Jacobian): cheap at the samples' sizes,
    # where the kernels take their real paths (vectors, tails, row bias).
    assert torch.autograd.gradcheck(f, inputs, fast_mode=True)


@main_samples
def test_double_backward(sample, device):
    """Supported where the op says so; otherwise it raises rather than give wrong gradients."""
    inputs = sample.make(device, torch.float64, rows=3, requires_grad=True)
    if sample.double_backward:
        assert torch.autograd.gradgradcheck(sample.call, inputs, fast_mode=True)
        return
    first = grads(sample.call(*inputs), inputs, sample.grad_out(inputs), create_graph=True)
    with pytest.raises(RuntimeError, match=rf"^fusedops\.{sample.op}: double backward is not supported"):
        torch.autograd.grad(sum(g.sum() for g in first), [t for t in inputs if t.requires_grad])


@pytest.mark.parametrize("sample", SAMPLES + MORE_SHAPES, ids=ids(SAMPLES + MORE_SHAPES))
def test_opcheck(sample, device):
    """The public op, with and without inputs requiring grad (its autograd
    registration), and its no-autograd twin."""
    for requires_grad in (False, True):
        args, kwargs = sample.torch_args(*sample.make(device, torch.float32, rows=5, requires_grad=requires_grad))
        opcheck(getattr(torch.ops.fusedops, sample.op).default, args, kwargs)
    opcheck(getattr(torch.ops.fusedops, f"_{sample.op}_nograd").default, *sample.torch_args(
        *sample.make(device, torch.float32, rows=5)))


@main_samples
def test_compile_fullgraph_forward_backward(sample, device):
    def f(*inputs):
        return tuple(out * 2 for out in outputs(sample.call(*inputs)))

    torch._dynamo.reset()  # f's code is the same for every sample: no recompile limit across them
    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for rows in (5, 9):  # a second shape exercises the dynamic graph
        inputs = sample.make(device, torch.float32, rows=rows, requires_grad=True)
        grad_out = sample.grad_out(inputs)
        got, expected = compiled(*inputs), f(*inputs)
        # Inductor may sum a gradient in another order than eager (add's broadcast gradient once differed by 7.8e-5
        # relative in a sum of 297 terms): the suite's tolerances, whose gradients' grow with their sums.
        assert_all_close(sample, (*got, *grads(got, inputs, grad_out)), (*expected, *grads(expected, inputs, grad_out)),
                         inputs)


@main_samples
def test_autograd_only_for_inputs_that_need_a_gradient(sample, device):
    """No input requiring grad, or grad mode off: a plain result. Any set of
    inputs requiring grad: a node with edges to those only, and their
    gradients as float64 autograd gives them."""
    plain = sample.make(device, torch.float32)
    expected = outputs(sample.ref(*(t.double() for t in plain)))
    without_grad = outputs(sample.call(*plain))
    with torch.no_grad():
        under_no_grad = outputs(sample.call(*(t.clone().requires_grad_() for t in plain)))
    for outs in (without_grad, under_no_grad):
        for out, ref in zip(outs, expected, strict=True):
            assert out.grad_fn is None and not out.requires_grad
            torch.testing.assert_close(out.double(), ref, **sample.tolerance[torch.float32])

    grad_out = sample.grad_out(plain)
    differentiable = sample.grad_indices()
    for n in range(1, len(differentiable) + 1):
        for wanted in itertools.combinations(differentiable, n):
            inputs = [t.clone().requires_grad_(i in wanted) for i, t in enumerate(plain)]
            got = forward_backward(sample, inputs, grad_out)
            edges = [fn is not None for fn, _ in got[0].grad_fn.next_functions]
            assert sum(edges) == n, f"inputs {wanted}: edges {edges}"
            assert_matches_reference(sample, got, inputs, grad_out)


@main_samples
def test_forward_mode_ad_is_refused_not_dropped(sample, device):
    """No jvp formula: a dual input must raise, not give a result without its tangent."""
    inputs = sample.make(device, torch.float32, rows=5)
    with fwAD.dual_level():
        for i in sample.grad_indices():
            dual = fwAD.make_dual(inputs[i], torch.ones_like(inputs[i]))
            with pytest.raises(RuntimeError, match=rf"^fusedops\.{sample.op}: forward-mode AD"):
                sample.call(*inputs[:i], dual, *inputs[i + 1:])


def _replace(inputs, i, t):
    return (*inputs[:i], t, *inputs[i + 1:])


def _derived_bad_calls(sample, device):
    """What every op refuses, naming the input: an integer input, and an input
    of another dtype or device than the first (on a GPU: the CPU too)."""
    first = sample.args[0]
    bad = []
    for i, name in enumerate(sample.args):
        bad.append(Bad(name, f"{name} must have (a floating dtype|the same dtype as {first})",
                       lambda *t, i=i: sample.call(*_replace(t, i, t[i].int()))))
        if i == 0:
            continue
        bad.append(Bad(name, f"{name} must have the same dtype as {first}",
                       lambda *t, i=i: sample.call(*_replace(t, i, t[i].double()))))
        for other in ["meta"] + (["cpu"] if device == "cuda" else []):
            bad.append(Bad(name, f"{name} must be on the same device as {first}",
                           lambda *t, i=i, other=other: sample.call(*_replace(t, i, t[i].to(other)))))
    return bad


@main_samples
def test_bad_calls_fail_naming_the_argument(sample, device):
    inputs = sample.make(device, torch.float32)
    for bad in (*_derived_bad_calls(sample, device), *sample.bad):
        with pytest.raises(bad.error, match=rf"^fusedops\.{sample.op}: {bad.message}") as info:
            bad.call(*inputs)
        assert bad.arg in re.findall(r"\w+", str(info.value).removeprefix(f"fusedops.{sample.op}:"))


@main_samples
def test_shape_functions_refuse_bad_calls_as_the_kernels_do(sample):
    """On meta inputs (what torch.compile traces) the Python shape functions
    run the checks: every bad call fails with the compiled kernels' message."""
    inputs = sample.make("meta", torch.float32)
    dtypes = [bad for bad in _derived_bad_calls(sample, "cpu") if "device" not in bad.message]
    for bad in (*dtypes, *sample.bad):
        with pytest.raises(bad.error, match=rf"^fusedops\.{sample.op}: {bad.message}"):
            bad.call(*inputs)
