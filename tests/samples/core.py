"""What every op's samples are made of (tests/samples/<op>.py holds each op's):
a sample is one call of an op: the shapes of its tensor inputs, the fusedops
call, an independent PyTorch reference (run in float64 from the same inputs),
tolerances, and bad calls with the argument their error must name. An op
returns one tensor or a tuple of them (add_rms_norm, rotary); the checks see
every result as a tuple of outputs (`outputs`), each with its own output
gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from helpers import TOLERANCE, make_input

R = "R"  # in a shape: the number of rows, which a test picks
ROWS = 37

# A GEMM of unit-scale outputs against float64 (sums over in_features).
GEMM_TOLERANCE = {
    torch.float16: dict(rtol=4e-3, atol=4e-3),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
    torch.float32: dict(rtol=1e-4, atol=2e-5),
    torch.float64: dict(rtol=1e-10, atol=1e-10),
}


@dataclass(frozen=True)
class Bad:
    """A bad call: `call(*inputs)`, given a sample's valid inputs, must raise
    `error` with the message "fusedops.<op>: " followed by a match of `message`,
    which names the argument `arg`."""

    arg: str
    message: str
    call: Callable[..., object]
    error: type[Exception] = RuntimeError


@dataclass(frozen=True)
class Sample:
    """One call of an op, made by the constructors of tests/samples/<op>.py."""

    op: str  # fusedops.<op> and torch.ops.fusedops.<op>
    what: str  # the variant, for test ids
    args: tuple[str, ...]  # the tensor inputs, by the names the op's errors use
    shapes: tuple[tuple, ...]  # their shapes (R: the rows a test picks)
    call: Callable[..., Result]  # the fusedops call on the tensor inputs
    ref: Callable[..., Result]  # the same in PyTorch
    torch_args: Callable[..., tuple[tuple, dict]]  # (args, kwargs) of torch.ops.fusedops.<op>
    tolerance: dict = field(default_factory=lambda: TOLERANCE)  # by dtype: the forward against float64
    differentiable: tuple[str, ...] | None = None  # the inputs that take gradients (default: all)
    scales: tuple[float, ...] | None = None  # factors of the random inputs (unit-scale outputs)
    # (out, *inputs) -> how many products each element of each input's gradient
    # sums (default: output elements per input element, as in elementwise ops).
    terms: Callable[..., tuple[int, ...]] | None = None
    # Float64 inputs -> where the (one) output is within rounding of a kink (a
    # clamp bound, relu's 0): there a gradient may legitimately differ from float64's.
    kinks: Callable[..., torch.Tensor] | None = None
    bad: tuple[Bad, ...] = ()
    # The outputs' dtype for inputs of `dtype` (a loss may be float32 whatever its inputs'),
    # or a tuple of each output's (a norm's narrow out_dtype beside its summed).
    out_dtype: Callable[[torch.dtype], torch.dtype | tuple[torch.dtype, ...]] = lambda dtype: dtype
    same_bits_as_ref: bool = False  # the reference in the inputs' dtype gives these bits
    # The tensor inputs -> each output's strides (default: contiguous outputs).
    out_strides: Callable[..., tuple[tuple[int, ...], ...]] | None = None
    double_backward: bool = False  # otherwise a double backward must raise

    @property
    def id(self) -> str:
        return f"{self.op} {self.what}"

    def out_dtypes(self, dtype: torch.dtype, n_outputs: int) -> tuple[torch.dtype, ...]:
        """Each of the n_outputs outputs' dtype for inputs of `dtype`."""
        out = self.out_dtype(dtype)
        return out if isinstance(out, tuple) else (out,) * n_outputs

    def grad_indices(self) -> list[int]:
        names = self.args if self.differentiable is None else self.differentiable
        return [i for i, name in enumerate(self.args) if name in names]

    def make(self, device, dtype, layout="contiguous", rows=ROWS, requires_grad=False):
        """Fresh random inputs laid out as `layout` (helpers.make_input); the
        differentiable ones require grad if asked."""
        inputs = []
        for i, shape in enumerate(self.shapes):
            t = make_input(tuple(rows if s == R else s for s in shape), dtype, device, layout)
            if self.scales:
                with torch.no_grad():
                    t.mul_(self.scales[i])
            inputs.append(t.requires_grad_(requires_grad and i in self.grad_indices()))
        return tuple(inputs)

    def grad_out(self, inputs, layout="contiguous"):
        """A random gradient of each output (a tuple), zero where the output is near a kink."""
        with torch.no_grad():
            outs = outputs(self.call(*(t.detach() for t in inputs)))
            grad = tuple(make_input(out.shape, out.dtype, out.device, layout) for out in outs)
            if self.kinks is not None:
                grad[0].masked_fill_(self.kinks(*(t.detach().double() for t in inputs)), 0)
        return grad

    def reference(self, inputs, grad_out):
        """The float64 reference's outputs and its gradients of the inputs that require grad."""
        leaves = [t.detach().double().requires_grad_(t.requires_grad) for t in inputs]
        outs = outputs(self.ref(*leaves))
        return (*(out.detach() for out in outs), *grads(outs, leaves, tuple(g.double() for g in grad_out)))

    def grad_tolerances(self, out, inputs, dtype):
        """The tolerance of each gradient of `inputs` that requires grad: the
        forward's where an element is one product; a sum of T products is off
        by rounding that grows with sqrt(T)."""
        tol = self.tolerance[dtype]
        terms = self.terms(out, *inputs) if self.terms else [out.numel() // max(t.numel(), 1) for t in inputs]
        return [tol if n <= 1 else dict(rtol=4 * tol["rtol"], atol=tol["atol"] + 4 * tol["rtol"] * math.sqrt(n))
                for n, t in zip(terms, inputs, strict=True) if t.requires_grad]


Result = torch.Tensor | tuple[torch.Tensor, ...]


def outputs(result: Result) -> tuple[torch.Tensor, ...]:
    """An op's result as a tuple of outputs."""
    return result if isinstance(result, tuple) else (result,)


def grads(result, inputs, grad_out, create_graph=False):
    """The gradients of `result`'s outputs, for `grad_out` (one per output),
    of the inputs that require grad. An output that depends on none of them
    (a reference's rotary k_out when only q requires grad) adds nothing."""
    wrt = [t for t in inputs if t.requires_grad]
    if not wrt:
        return ()
    used = [(out, g) for out, g in zip(outputs(result), grad_out, strict=True) if out.requires_grad]
    return torch.autograd.grad([out for out, _ in used], wrt, [g for _, g in used], create_graph=create_graph)


def forward_backward(sample, inputs, grad_out):
    """The op's outputs and their gradients, for `grad_out`, of the inputs that require grad."""
    outs = outputs(sample.call(*inputs))
    return (*outs, *grads(outs, inputs, grad_out))


def assert_all_close(sample, actual, expected, inputs):
    """Outputs and gradients, as forward_backward gives them for `inputs`, each
    within its tolerance; `actual` in the inputs' dtype, on their device."""
    dtype = inputs[0].dtype
    n_outputs = len(actual) - sum(t.requires_grad for t in inputs)
    tolerances = [sample.tolerance[dtype]] * n_outputs
    tolerances += sample.grad_tolerances(actual[0], inputs, dtype)
    dtypes = [*sample.out_dtypes(dtype, n_outputs)] + [dtype] * (len(actual) - n_outputs)
    assert len(actual) == len(expected) == len(tolerances)
    for a, e, tol, a_dtype in zip(actual, expected, tolerances, dtypes, strict=True):
        assert a.shape == e.shape and a.dtype == a_dtype and a.device == e.device
        torch.testing.assert_close(a.double(), e.double(), **tol)


def assert_matches_reference(sample, actual, inputs, grad_out):
    """`actual` (as forward_backward gives it) against the float64 reference."""
    assert_all_close(sample, actual, sample.reference(inputs, grad_out), inputs)


def near(v, bounds, margin):
    """Where v lies within `margin` (relative beyond 1) of one of `bounds`."""
    out = torch.zeros(v.shape, dtype=torch.bool, device=v.device)
    for bound in bounds:
        if bound is not None:
            out |= (v - bound).abs() <= margin * max(1.0, abs(bound))
    return out


def clamp(v, lo, hi):
    return v if lo is None and hi is None else torch.clamp(v, lo, hi)
