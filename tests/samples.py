"""The one table of op samples: what the generic checks of every op run on
(tests/test_every_op.py, tests/test_cuda_robustness.py). A new op is covered by
adding its samples here; tests/test_<op>.py keeps only its own semantics.

A sample is one call of an op: the shapes of its tensor inputs, the fusedops
call, an independent PyTorch reference (run in float64 from the same inputs),
tolerances, and bad calls with the argument their error must name. SAMPLES are
each op's main variants and go through every check; MORE_SHAPES and
MORE_OPTIONS (bounds, epilogues) go through the cheaper ones: forward and
gradients against float64 over every layout and dtype, gradcheck, and for
MORE_SHAPES opcheck.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from helpers import TOLERANCE, make_input

import fusedops

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
    """One call of an op, made by the constructors below (add, scale_bias_clamp, linear)."""

    op: str  # fusedops.<op> and torch.ops.fusedops.<op>
    what: str  # the variant, for test ids
    args: tuple[str, ...]  # the tensor inputs, by the names the op's errors use
    shapes: tuple[tuple, ...]  # their shapes (R: the rows a test picks)
    call: Callable[..., torch.Tensor]  # the fusedops call on the tensor inputs
    ref: Callable[..., torch.Tensor]  # the same in PyTorch
    torch_args: Callable[..., tuple[tuple, dict]]  # (args, kwargs) of torch.ops.fusedops.<op>
    tolerance: dict = field(default_factory=lambda: TOLERANCE)  # by dtype: the forward against float64
    differentiable: tuple[str, ...] | None = None  # the inputs that take gradients (default: all)
    scales: tuple[float, ...] | None = None  # factors of the random inputs (unit-scale outputs)
    # (out, *inputs) -> how many products each element of each input's gradient
    # sums (default: output elements per input element, as in elementwise ops).
    terms: Callable[..., tuple[int, ...]] | None = None
    # Float64 inputs -> where the output is within rounding of a kink (a clamp
    # bound, relu's 0): there a gradient may legitimately differ from float64's.
    kinks: Callable[..., torch.Tensor] | None = None
    bad: tuple[Bad, ...] = ()
    same_bits_as_ref: bool = False  # the reference in the inputs' dtype gives these bits
    double_backward: bool = False  # otherwise a double backward must raise

    @property
    def id(self) -> str:
        return f"{self.op} {self.what}"

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
        """A random output gradient, zero where the output is near a kink."""
        with torch.no_grad():
            out = self.call(*(t.detach() for t in inputs))
            grad = make_input(out.shape, out.dtype, out.device, layout)
            if self.kinks is not None:
                grad.masked_fill_(self.kinks(*(t.detach().double() for t in inputs)), 0)
        return grad

    def reference(self, inputs, grad_out):
        """The float64 reference's output and its gradients of the inputs that require grad."""
        leaves = [t.detach().double().requires_grad_(t.requires_grad) for t in inputs]
        out = self.ref(*leaves)
        return (out.detach(), *grads(out, leaves, grad_out.double()))

    def grad_tolerances(self, out, inputs, dtype):
        """The tolerance of each gradient of `inputs` that requires grad: the
        forward's where an element is one product; a sum of T products is off
        by rounding that grows with sqrt(T)."""
        tol = self.tolerance[dtype]
        terms = self.terms(out, *inputs) if self.terms else [out.numel() // max(t.numel(), 1) for t in inputs]
        return [tol if n <= 1 else dict(rtol=4 * tol["rtol"], atol=tol["atol"] + 4 * tol["rtol"] * math.sqrt(n))
                for n, t in zip(terms, inputs, strict=True) if t.requires_grad]


def grads(out, inputs, grad_out):
    """The gradients of `out`, for `grad_out`, of the inputs that require grad."""
    wrt = [t for t in inputs if t.requires_grad]
    return torch.autograd.grad(out, wrt, grad_out) if wrt else ()


def forward_backward(sample, inputs, grad_out):
    """The op's output and its gradients, for `grad_out`, of the inputs that require grad."""
    out = sample.call(*inputs)
    return (out, *grads(out, inputs, grad_out))


def assert_all_close(sample, actual, expected, inputs):
    """Outputs and gradients, as forward_backward gives them for `inputs`, each
    within its tolerance; `actual` in the inputs' dtype, on their device."""
    dtype = inputs[0].dtype
    tolerances = [sample.tolerance[dtype], *sample.grad_tolerances(actual[0], inputs, dtype)]
    assert len(actual) == len(expected) == len(tolerances)
    for a, e, tol in zip(actual, expected, tolerances, strict=True):
        assert a.shape == e.shape and a.dtype == dtype and a.device == e.device
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


# ---- the ops' samples ------------------------------------------------------------------


def add(what, shape_a, shape_b, bad=()):
    return Sample(
        "add", what, ("a", "b"), (shape_a, shape_b), call=fusedops.add, ref=torch.add,
        torch_args=lambda a, b: ((a, b), {}), bad=bad,
        # Same float32 op-math as torch for the half types; its backward is made of torch ops.
        same_bits_as_ref=True, double_backward=True,
    )


def scale_bias_clamp(what, x, scale, bias, lo=None, hi=None, bad=()):
    """scale and bias: a shape (a tensor input) or a number."""
    tensors = [(name, v) for name, v in (("scale", scale), ("bias", bias)) if isinstance(v, tuple)]

    def full(x, *rest):  # the op's (x, scale, bias) from the sample's tensor inputs
        given = dict(zip((name for name, _ in tensors), rest, strict=True))
        return x, given.get("scale", scale), given.get("bias", bias)

    def ref(*inputs):
        x, s, b = full(*inputs)
        return clamp(x * s + b, lo, hi)

    def torch_args(*inputs):
        # As fusedops.scale_bias_clamp passes them: a tensor or its number.
        x, s, b = full(*inputs)
        tensor = [v if isinstance(v, torch.Tensor) else None for v in (s, b)]
        number = [default if isinstance(v, torch.Tensor) else v for v, default in ((s, 1.0), (b, 0.0))]
        return (x, *tensor, *number, lo, hi), {}

    def kinks(*inputs):
        x, s, b = full(*inputs)
        return near(x * s + b, (lo, hi), 1e-5)

    return Sample(
        "scale_bias_clamp", what, ("x", *(name for name, _ in tensors)), (x, *(v for _, v in tensors)),
        call=lambda *inputs: fusedops.scale_bias_clamp(*full(*inputs), lo, hi), ref=ref,
        torch_args=torch_args, kinks=kinks, bad=bad,
    )


ACTIVATIONS = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": partial(F.gelu, approximate="tanh")}


def linear(what, x, out_features, bias=True, activation=None, lo=None, hi=None, bad=()):
    k = x[-1]
    epilogue = dict(activation=activation, min=lo, max=hi)

    def ref(x, w, b=None):
        return clamp(ACTIVATIONS[activation](F.linear(x, w, b)), lo, hi)

    def kinks(x, w, b=None):
        # A GEMM in a half type rounds z far more than an elementwise op.
        z = F.linear(x, w, b)
        out = near(ACTIVATIONS[activation](z), (lo, hi), 0.05)
        return out | (z.abs() <= 0.05) if activation == "relu" else out

    def terms(out, x, w, b=None):
        rows = math.prod(x.shape[:-1])
        return (w.shape[0], rows, rows)[:2 + (b is not None)]

    return Sample(
        "linear", what, ("x", "weight", "bias")[:2 + bias], (x, (out_features, k), (out_features,))[:2 + bias],
        call=lambda *t: fusedops.linear(*t, **epilogue), ref=ref,
        torch_args=lambda x, w, b=None: ((x, w, b), epilogue), tolerance=GEMM_TOLERANCE,
        # Weights of scale 1/sqrt(in_features): outputs of unit scale.
        scales=(1.0, 1 / math.sqrt(max(k, 1)), 1.0)[:2 + bias], terms=terms, kinks=kinks, bad=bad,
    )


# ---- bad calls ------------------------------------------------------------------------------
# Beyond those test_every_op.py derives for every op (an integer input, a
# mismatched dtype, another device): shapes and options.

ADD_BAD = (
    Bad("b", r"a of shape \[\d+, 257\] and b of shape \[256\] do not broadcast", lambda a, b: fusedops.add(a, b[1:])),
)

SBC_BAD = (
    Bad("bias", r"bias of shape \[\d+\] must broadcast to x of shape \[\d+, 257\] without changing it",
        lambda x, s, b: fusedops.scale_bias_clamp(x, s, b[:x.shape[0]])),
    Bad("bias", r"bias of shape \[2, \d+, 257\] must broadcast",
        lambda x, s, b: fusedops.scale_bias_clamp(x, s, b.expand(2, *x.shape))),
    Bad("bias", r"bias of shape \[\d+, 257\] must broadcast",
        lambda x, s, b: fusedops.scale_bias_clamp(x, s, b.expand(x.shape[0] + 1, -1))),
    Bad("scale", r"scale must be a number or a tensor of one element, got shape \[2\]",
        lambda x, s, b: fusedops.scale_bias_clamp(x, s.expand(2), b)),
    Bad("min", "min must be a number or None", lambda x, s, b: fusedops.scale_bias_clamp(x, s, b, s, None), TypeError),
    Bad("max", "max must be a number or None", lambda x, s, b: fusedops.scale_bias_clamp(x, s, b, None, "1"), TypeError),
)

LINEAR_BAD = (
    Bad("weight", r"x of shape \[\d+, 96\] and weight of shape \[80, 95\] do not match",
        lambda x, w, b: fusedops.linear(x, w[:, 1:], b)),
    Bad("weight", "weight must be 2-D", lambda x, w, b: fusedops.linear(x, w[0], b)),
    Bad("bias", r"bias must be 1-D of size out_features \(80\)", lambda x, w, b: fusedops.linear(x, w, b[1:])),
    Bad("x", "x must have at least 1 dimension", lambda x, w, b: fusedops.linear(x[0, 0], w, b)),
    Bad("activation", "activation must be None", lambda x, w, b: fusedops.linear(x, w, b, activation="tanh")),
)

# ---- the table ------------------------------------------------------------------------------

# (min, max): both, one of each, none, min > max.
SBC_BOUNDS = [(-0.5, 0.7), (None, 0.4), (-0.3, None), (None, None), (0.6, -0.2)]
# Neither bound representable in a half type: no value lands on one by rounding.
LINEAR_BOUNDS = [(None, None), (-0.3, 0.7), (0.1, None), (None, -0.1), (0.5, -0.5)]

# Each op's main variants: every check runs these.
SAMPLES = [
    add("row broadcast", (R, 257), (257,), bad=ADD_BAD),
    add("broadcast both ways", (R, 1, 33), (3, 1)),
    add("0-dim b", (R, 13), ()),
    scale_bias_clamp("tensor scale, [C] bias, min and max", (R, 257), (), (257,), -0.5, 0.5, bad=SBC_BAD),
    scale_bias_clamp("number scale, same-shape bias, max", (R, 129), -0.6, (R, 129), hi=0.4),
    scale_bias_clamp("tensor scale, column bias, min", (R, 65), (), (R, 1), lo=-0.3),
    scale_bias_clamp("numbers, max", (R, 257), 0.5, 0.25, hi=0.5),
    scale_bias_clamp("tensor scale, 0-dim bias, no bounds", (R, 13), (), ()),
    linear("gelu, max, bias", (R, 96), 80, activation="gelu", hi=1.0, bad=LINEAR_BAD),
    linear("relu, no bias", (R, 33), 17, bias=False, activation="relu"),
    linear("plain, bias, 3-d x", (2, R, 65), 7),
]

# More shapes: the forward, gradient, gradcheck and opcheck tests run these too.
MORE_SHAPES = [
    add("same shape, 1-d", (R,), (R,)),
    add("same shape", (R, 129), (R, 129)),
    add("middle dims broadcast", (2, 3, R, 7), (1, 3, 1, 7)),
    add("0-dim", (), ()),
    add("no rows", (0, 5), (5,)),
    add("no columns", (R, 0), (R, 1)),
    scale_bias_clamp("1-d, same-shape bias", (R,), (), (R,), -0.5, 0.7),
    scale_bias_clamp("[1, C] bias", (R, 129), (), (1, 129), None, 0.4),
    scale_bias_clamp("[3, C] bias of [B, 3, C] x", (R, 3, 33), 1.7, (3, 33), -0.3, None),
    scale_bias_clamp("4-d, [1, 3, 1, 7] bias", (2, 3, R, 7), (), (1, 3, 1, 7), -0.5, 0.7),
    scale_bias_clamp("[1, 1] bias", (R, 13), -0.6, (1, 1)),
    scale_bias_clamp("number bias", (R, 13), (), 0.25, -0.5, 0.7),
    scale_bias_clamp("0-dim x", (), (), (), -0.5, 0.7),
    scale_bias_clamp("0-dim x, numbers", (), 1.7, 0.25, None, 0.4),
    scale_bias_clamp("no rows", (0, 5), (), (5,), -0.5, 0.7),
    scale_bias_clamp("no columns", (R, 0), -0.6, (R, 1), -0.5, 0.7),
    # Ranks 1 to 4, odd sizes, N > K, empty batch, empty K, N = 1.
    *(linear(f"{what}, {'bias' if bias else 'no bias'}", x, n, bias, "gelu_tanh", -0.3, 0.7)
      for what, x, n in [("1-d x", (7,), 3), ("1 x 1", (1, 1), 1), ("N > K", (R, 7), 65), ("large K", (R, 257), 7),
                         ("3-d x", (2, R, 7), 257), ("4-d x", (2, 3, R, 65), 3), ("no rows", (0, 7), 5),
                         ("no in_features", (R, 0), 3), ("one out_feature", (R, 8), 1)]
      for bias in (True, False)),
]

# Every bounds and epilogue at one shape: the forward, gradient and gradcheck tests run these too.
MORE_OPTIONS = [
    *(scale_bias_clamp(f"{kind} scale, bounds {lo}, {hi}", (R, 257), scale, (257,), lo, hi)
      for kind, scale in (("tensor", ()), ("number", -0.6)) for lo, hi in SBC_BOUNDS),
    *(linear(f"{activation}, bounds {lo}, {hi}, {'bias' if bias else 'no bias'}", (R, 40), 24, bias, activation, lo, hi)
      for activation in ACTIVATIONS for lo, hi in LINEAR_BOUNDS for bias in (True, False)),
]

ALL_SAMPLES = SAMPLES + MORE_SHAPES + MORE_OPTIONS


def ids(samples):
    return [s.id for s in samples]
