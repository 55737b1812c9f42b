import math

import pytest
import torch
import torch.nn.functional as F
from conftest import CUDA
from helpers import LAYOUTS, make_input, poison_allocator
from torch.library import opcheck

import fusedops

ACTIVATIONS = [None, "relu", "gelu", "gelu_tanh"]
# (min, max): none, both (neither bound representable in a half type, so a
# value never lands on a bound by rounding), one of each, and min > max.
BOUNDS = [(None, None), (-0.3, 0.7), (0.1, None), (None, -0.1), (0.5, -0.5)]

# Relative tolerances of a GEMM of unit-scale outputs against float64.
TOL = {
    torch.float16: dict(rtol=4e-3, atol=4e-3),
    torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
    torch.float32: dict(rtol=1e-4, atol=2e-5),
    torch.float64: dict(rtol=1e-10, atol=1e-10),
}

# (x shape, out_features): ranks 1-4, odd sizes, empty batch, empty K, N = 1.
SHAPES = [
    ((7,), 3),
    ((1, 1), 1),
    ((3, 7), 65),
    ((65, 257), 7),
    ((2, 3, 7), 257),
    ((2, 3, 5, 65), 3),
    ((0, 7), 5),
    ((4, 0), 3),
    ((5, 8), 1),
]


def act_fn(activation):
    return {
        None: lambda t: t,
        "relu": F.relu,
        "gelu": F.gelu,
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    }[activation]


def reference(x, weight, bias, activation=None, min=None, max=None):
    out = act_fn(activation)(F.linear(x, weight, bias))
    if min is not None or max is not None:
        out = torch.clamp(out, min, max)
    return out


def make_operands(x_shape, n, dtype, device, layout="contiguous", bias=True, requires_grad=False):
    """x [..., K] of unit scale and weight [N, K] scaled so the outputs are of unit scale."""
    k = x_shape[-1]
    x = make_input(x_shape, dtype, device, layout, requires_grad)
    w = make_input((n, k), dtype, device, layout)
    with torch.no_grad():
        w.mul_(1 / math.sqrt(max(k, 1)))
    w.requires_grad_(requires_grad)
    b = make_input((n,), dtype, device, "offset" if layout == "offset" else "contiguous", requires_grad) if bias else None
    return x, w, b


def double(t):
    return None if t is None else t.detach().double().requires_grad_(t.requires_grad)


def assert_close(actual, expected, dtype, scale=1.0):
    tol = TOL[dtype]
    torch.testing.assert_close(
        actual, expected.to(actual.dtype), rtol=tol["rtol"], atol=tol["atol"] * scale, equal_nan=True
    )


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("x_shape, n", SHAPES)
def test_forward_shapes_and_layouts(device, dtype, x_shape, n, layout, bias):
    x, w, b = make_operands(x_shape, n, dtype, device, layout, bias)
    before = [t.clone() for t in (x, w, b) if t is not None]
    poison_allocator(device)
    out = fusedops.linear(x, w, b, activation="gelu_tanh", min=-0.3, max=0.7)
    expected = reference(double(x), double(w), double(b), "gelu_tanh", -0.3, 0.7)
    assert out.shape == expected.shape == x_shape[:-1] + (n,)
    assert out.dtype == dtype and out.device == x.device and out.is_contiguous()
    assert_close(out, expected, dtype)
    after = [t for t in (x, w, b) if t is not None]
    assert all(torch.equal(p, q) for p, q in zip(before, after, strict=False))


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_forward_epilogues(device, dtype, activation, bounds, bias):
    for x_shape, n, layout in [((3, 65, 64), 257, "contiguous"), ((17, 33), 8, "transposed"), ((5, 16), 24, "offset")]:
        x, w, b = make_operands(x_shape, n, dtype, device, layout, bias)
        poison_allocator(device)
        out = fusedops.linear(x, w, b, activation=activation, min=bounds[0], max=bounds[1])
        assert_close(out, reference(double(x), double(w), double(b), activation, *bounds), dtype)


def test_matches_eager_composition_on_cpu(dtype):
    # Same addmm and the same roundings (z, then act, then clamp): on CPU the
    # result equals torch's composition up to the activation's last bit.
    x, w, b = make_operands((9, 33), 17, dtype, "cpu")
    for activation in ACTIVATIONS:
        out = fusedops.linear(x, w, b, activation=activation, min=-0.3, max=0.7)
        torch.testing.assert_close(out, reference(x, w, b, activation, -0.3, 0.7), rtol=1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6, atol=1e-6)
        out = fusedops.linear(x, w, b, activation=activation)
        if activation in (None, "relu"):
            assert torch.equal(out, reference(x, w, b, activation))


def test_nan_inf_and_reversed_bounds(device):
    x = torch.tensor([[float("nan"), 1.0], [2.0, 3.0], [-1.0, 0.5]], device=device)
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [float("inf"), 0.0]], device=device)
    for activation in ACTIVATIONS:
        if activation in ("gelu", "gelu_tanh"):
            w = w[:2]  # torch's gelu(+-inf) is NaN (and gelu_tanh(inf) inf); no contract there
        for bounds in BOUNDS:
            out = fusedops.linear(x, w, None, activation=activation, min=bounds[0], max=bounds[1])
            expected = reference(x, w, None, activation, *bounds)
            if device == "cuda" and activation == "relu":
                # cuBLASLt's RELU epilogue is max(z, 0), which may turn NaN into 0
                # (torch.relu keeps NaN): only the finite results are compared there.
                keep = ~expected.isnan()
                out, expected = out[keep], expected[keep]
            torch.testing.assert_close(out, expected, equal_nan=True)


def grad_reference(x, w, b, activation, bounds, grad):
    xs, ws, bs = double(x), double(w), double(b)
    inputs = [t for t in (xs, ws, bs) if t is not None and t.requires_grad]
    grads = torch.autograd.grad(reference(xs, ws, bs, activation, *bounds), inputs, grad.double())
    return grads


def safe_grad(x, w, b, activation, bounds):
    """A random output gradient that is zero wherever the float64 reference is
    within rounding distance of a kink (a clamp bound, or 0 for relu), so a
    mask that flips by rounding cannot change the gradients."""
    with torch.no_grad():
        z = F.linear(double(x), double(w), double(b))
        y = act_fn(activation)(z)
        safe = torch.ones_like(z, dtype=torch.bool)
        for bound in bounds:
            if bound is not None:
                safe &= (y - bound).abs() > 0.05
        if activation == "relu":
            safe &= z.abs() > 0.05
        return (torch.randn(z.shape, dtype=x.dtype, device=x.device) * safe).to(x.dtype)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("bounds", BOUNDS, ids=str)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_grads(device, dtype, activation, bounds, bias):
    for x_shape, n, layout in [((2, 33, 64), 129, "contiguous"), ((7, 65), 3, "transposed"), ((4, 16), 24, "offset")]:
        x, w, b = make_operands(x_shape, n, dtype, device, layout, bias, requires_grad=True)
        grad = safe_grad(x, w, b, activation, bounds)
        out = fusedops.linear(x, w, b, activation=activation, min=bounds[0], max=bounds[1])
        inputs = [t for t in (x, w, b) if t is not None]
        got = torch.autograd.grad(out, inputs, grad)
        expected = grad_reference(x, w, b, activation, bounds, grad)
        rows = math.prod(x_shape[:-1])
        for g, e, scale in zip(got, expected, (1.0, math.sqrt(rows), math.sqrt(rows)), strict=False):
            assert g.shape == e.shape and g.dtype == dtype
            assert_close(g, e, dtype, scale)


def test_grads_of_non_contiguous_output_grad(device):
    x, w, b = make_operands((6, 10), 12, torch.float32, device, requires_grad=True)
    out = fusedops.linear(x, w, b, activation="gelu", min=-0.3)
    got = torch.autograd.grad(out.sum(), (x, w, b))  # an expanded (stride 0) gradient
    expected = grad_reference(x, w, b, "gelu", (-0.3, None), torch.ones(6, 12, device=device))
    for g, e in zip(got, expected, strict=False):
        assert_close(g, e, torch.float32, 3.0)
    grad = torch.randn(12, 6, device=device).t()  # a transposed gradient
    got = torch.autograd.grad(fusedops.linear(x, w, b, activation="relu", max=0.5), (x, w, b), grad)
    expected = grad_reference(x, w, b, "relu", (None, 0.5), grad)
    for g, e in zip(got, expected, strict=False):
        assert_close(g, e, torch.float32, 3.0)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("bounds", [(None, None), (-0.3, 0.7), (None, 0.2)], ids=str)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_gradcheck(device, activation, bounds, bias):
    x, w, b = make_operands((2, 3, 5), 4, torch.float64, device, bias=bias, requires_grad=True)

    def f(*args):
        return fusedops.linear(*args, activation=activation, min=bounds[0], max=bounds[1])

    assert torch.autograd.gradcheck(f, (x, w, b) if bias else (x, w))


@pytest.mark.parametrize("needs", ["x", "weight", "bias", "x+bias", "weight+bias"])
def test_only_needed_grads(device, needs):
    x, w, b = make_operands((5, 6), 4, torch.float32, device)
    for name, t in (("x", x), ("weight", w), ("bias", b)):
        t.requires_grad_(name in needs.split("+"))
    fusedops.linear(x, w, b, activation="relu", min=-1.0, max=0.5).sum().backward()
    ex, ew, eb = (t.detach().clone().requires_grad_(t.requires_grad) for t in (x, w, b))
    reference(ex, ew, eb, "relu", -1.0, 0.5).sum().backward()
    for t, e in ((x, ex), (w, ew), (b, eb)):
        assert (t.grad is None) == (e.grad is None)
        if t.grad is not None:
            torch.testing.assert_close(t.grad, e.grad)


def test_double_backward_raises(device):
    x, w, b = make_operands((3, 4), 5, torch.float64, device, requires_grad=True)
    out = fusedops.linear(x, w, b, activation="gelu")
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="^fusedops.linear: double backward is not supported"):
        gx.sum().backward()


@pytest.mark.parametrize(
    "activation, bounds", [(None, (None, None)), ("relu", (None, None)), ("gelu", (-0.3, 0.7)), ("gelu_tanh", (None, 0.2))]
)
def test_opcheck(device, activation, bounds):
    for requires_grad in (False, True):
        for bias in (True, False):
            x, w, b = make_operands((3, 5, 6), 7, torch.float32, device, bias=bias, requires_grad=requires_grad)
            opcheck(
                torch.ops.fusedops.linear.default,
                (x, w, b),
                dict(activation=activation, min=bounds[0], max=bounds[1]),
            )
    x, w, b = make_operands((4, 6), 7, torch.float32, device)
    out, aux = torch.ops.fusedops._linear_forward(x, w, b, activation, *bounds)
    opcheck(torch.ops.fusedops._linear_forward.default, (x, w, b, activation, *bounds))
    saved = aux if aux.numel() else out
    opcheck(
        torch.ops.fusedops._linear_backward.default,
        (torch.randn_like(out), x, w, saved, activation, *bounds, [True, True, True]),
    )


def test_compile_fullgraph_dynamic(device):
    def f(x, w, b):
        return (fusedops.linear(x, w, b, activation="gelu", min=-0.3, max=2.0) * 2).sum()

    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for rows in (5, 9):  # a second shape exercises the dynamic graph
        x, w, b = make_operands((2, rows, 16), 24, torch.float32, device, requires_grad=True)
        got = torch.autograd.grad(compiled(x, w, b), (x, w, b))
        expected = torch.autograd.grad(f(x, w, b), (x, w, b))
        for g, e in zip(got, expected, strict=False):
            torch.testing.assert_close(g, e)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_cuda_graphs():
    x, w, b = make_operands((64, 128), 256, torch.bfloat16, "cuda")
    fusedops.linear(x, w, b, activation="relu", max=1.0)  # warm-up (heuristics, handles)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fusedops.linear(x, w, b, activation="relu", max=1.0)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.testing.assert_close(out, reference(x, w, b, "relu", None, 1.0), rtol=2e-2, atol=2e-2)

    def step(x, w, b):
        return fusedops.linear(x, w, b, activation="gelu_tanh", min=-0.3)

    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        x2, w2, b2 = make_operands((32, 64), 128, torch.float16, "cuda")
        torch.testing.assert_close(compiled(x2, w2, b2), step(x2, w2, b2), rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_autocast(device, bias):
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    x, w, b = make_operands((4, 5, 16), 24, torch.float32, device, bias=bias, requires_grad=True)
    with torch.autocast(device_type=device, dtype=dtype):
        out = fusedops.linear(x, w, b, activation="gelu", max=0.5)
        expected = torch.clamp(F.gelu(F.linear(x, w, b)), max=0.5)
    assert out.dtype == expected.dtype == dtype
    torch.testing.assert_close(out, expected, **TOL[dtype])
    got = torch.autograd.grad(out.float().sum(), (x, w))
    assert all(g.dtype == torch.float32 for g in got)
    # float64 is not cast, as with F.linear.
    xd, wd = x.detach().double(), w.detach().double()
    with torch.autocast(device_type=device, dtype=dtype):
        assert fusedops.linear(xd, wd).dtype == torch.float64


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_tf32_follows_torch_setting():
    x, w, b = make_operands((256, 1024), 512, torch.float32, "cuda")
    exact = reference(double(x), double(w), double(b), "relu", None, None)
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        out = fusedops.linear(x, w, b, activation="relu")
        torch.testing.assert_close(out, exact.float(), rtol=1e-4, atol=2e-5)
        torch.backends.cuda.matmul.allow_tf32 = True
        out = fusedops.linear(x, w, b, activation="relu")
        eager = F.relu(F.linear(x, w, b))
        torch.testing.assert_close(out, eager, rtol=1e-2, atol=1e-2)
        assert (out.double() - exact).abs().max() > 1e-5  # TF32 was used, as by F.linear
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def test_module_round_trips(device):
    torch_linear = torch.nn.Linear(16, 8, device=device)
    ours = fusedops.nn.Linear(16, 8, activation="relu", max=0.5, device=device)
    assert isinstance(ours, torch.nn.Linear)
    ours.load_state_dict(torch_linear.state_dict())
    torch_linear.load_state_dict(ours.state_dict())
    x = torch.randn(3, 16, device=device)
    torch.testing.assert_close(ours(x), torch.clamp(F.relu(torch_linear(x)), max=0.5))

    converted = fusedops.nn.Linear.from_linear(torch_linear, activation="gelu")
    assert converted.weight is torch_linear.weight and converted.bias is torch_linear.bias
    torch.testing.assert_close(converted(x), F.gelu(torch_linear(x)))
    no_bias = fusedops.nn.Linear(16, 8, bias=False, dtype=torch.float64, device=device)
    assert no_bias.bias is None and no_bias.weight.dtype == torch.float64
    assert set(no_bias.state_dict()) == {"weight"}
    assert "activation='gelu'" in repr(converted)
    with pytest.raises(ValueError, match="activation must be"):
        fusedops.nn.Linear(4, 4, activation="tanh")


def test_error_messages(device):
    x = torch.randn(4, 3, device=device)
    w = torch.randn(5, 3, device=device)
    cases = [
        ((x, w.double()), {}, "weight must have the same dtype as x"),
        ((x, torch.randn(5, 4, device=device)), {}, r"x of shape \[4, 3\] and weight of shape \[5, 4\] do not match"),
        ((x, torch.randn(3, device=device)), {}, "weight must be 2-D"),
        ((x, w, torch.randn(4, device=device)), {}, r"bias must be 1-D of size out_features \(5\)"),
        ((x, w, torch.randn(5, device=device).half()), {}, "bias must have the same dtype as x"),
        ((x.int(), w.int()), {}, "x must have a floating dtype"),
        ((torch.tensor(1.0, device=device), w), {}, "x must have at least 1 dimension"),
        ((x, w), dict(activation="tanh"), "activation must be None"),
        ((x, torch.randn(5, 3, device="meta")), {}, "weight must be on the same device as x"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(RuntimeError, match="^fusedops.linear: " + message):
            fusedops.linear(*args, **kwargs)


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("bounds", [(float("nan"), None), (None, float("nan"))])
def test_nan_bound_makes_every_output_nan(device, activation, bounds):
    """torch.clamp's semantics after the activation: a NaN bound gives NaN everywhere, no gradient passes."""
    x = torch.randn(9, 6, device=device, requires_grad=True)
    w = torch.randn(7, 6, device=device, requires_grad=True)
    out = fusedops.linear(x, w, activation=activation, min=bounds[0], max=bounds[1])
    assert out.shape == (9, 7) and out.isnan().all()
    gx, gw = torch.autograd.grad(out, (x, w), torch.randn_like(out))
    assert not gx.any() and not gw.any()


def test_backward_op_checks_its_arguments(device):
    """The internal backward op is reachable through torch.ops: bad arguments get errors, not reads out of bounds."""
    x, w = torch.randn(4, 6, device=device), torch.randn(7, 6, device=device)
    grad = torch.randn(4, 7, device=device)
    backward = torch.ops.fusedops._linear_backward.default
    cases = [
        ((grad, x, w, torch.randn(3, device=device), "gelu", None, None, [True, True, True]),
         "saved must have grad's 28 elements, got 3"),
        ((grad, x, w, grad, None, None, None, [True, True]), "output_mask must have 3 elements, got 2"),
        ((grad, x, torch.randn(5, 6, device=device), grad, None, None, None, [True, False, False]),
         r"weight of shape \[5, 6\] does not match grad of shape \[4, 7\]"),
        ((grad, torch.randn(3, 6, device=device), w, grad, None, None, None, [False, True, False]),
         r"x of shape \[3, 6\] does not match grad of shape \[4, 7\]"),
        ((grad, x.double(), w, grad, None, None, None, [False, True, False]), "x must have the same dtype as grad"),
    ]
    for args, message in cases:
        with pytest.raises(RuntimeError, match="^fusedops.linear: " + message):
            backward(*args)
