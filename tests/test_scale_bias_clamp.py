import math

import pytest
import torch
from helpers import LAYOUTS, TOLERANCE, assert_close, make_input, poison_allocator
from torch.library import opcheck

import fusedops

# (shape of x, shape of bias or None for a number): same shape, trailing [C],
# [1, C], [3, C] against [B, 3, C], a column bias, one-element biases, 0-dim x,
# odd and empty sizes.
SHAPES = [
    ((7,), (7,)),
    ((37, 129), (37, 129)),
    ((37, 129), (129,)),
    ((37, 129), (1, 129)),
    ((5, 3, 33), (3, 33)),
    ((6, 5), (6, 1)),
    ((2, 3, 5, 7), (1, 3, 1, 7)),
    ((11, 13), ()),
    ((11, 13), (1, 1)),
    ((11, 13), None),
    ((), ()),
    ((), None),
    ((0, 5), (5,)),
    ((4, 0), (4, 1)),
]

# (min, max): both, one, none, min > max.
BOUNDS = [(-0.5, 0.7), (None, 0.4), (-0.3, None), (None, None), (0.6, -0.2)]


def reference(x, scale, bias, lo, hi):
    """float64 torch reference with autograd (clamp needs a bound)."""
    v = x * scale + bias
    return v if lo is None and hi is None else torch.clamp(v, lo, hi)


def as_double(value, requires_grad=False):
    if isinstance(value, torch.Tensor):
        return value.detach().double().requires_grad_(requires_grad)
    return value


def kink_free(grad, x, scale, bias, lo, hi):
    """`grad` with zeros where x * scale + bias lies within rounding of a clamp
    bound: there the inclusive mask of a float32 computation may legitimately
    differ from float64's, so no test can hold it to the float64 answer. The
    mask exactly at a bound is tested with exact values (test_nan_inf_and_bounds)."""
    v = x.detach().double() * as_double(scale) + as_double(bias)
    near = torch.zeros(v.shape, dtype=torch.bool, device=v.device)
    for bound in (lo, hi):
        if bound is not None:
            near |= (v - bound).abs() <= 1e-5 * max(1.0, abs(bound))
    return grad.masked_fill(near, 0)


def assert_sum_close(actual, expected, dtype, terms):
    """A gradient reduced over `terms` elements: the error of the sum grows with it."""
    tol = TOLERANCE[torch.float32 if dtype == torch.float64 else dtype]
    atol = tol["atol"] + 4 * tol["rtol"] * math.sqrt(max(terms, 1))
    torch.testing.assert_close(actual, expected.to(actual.dtype), rtol=4 * tol["rtol"], atol=atol,
                               equal_nan=True)


def forward_checked_grads(x, scale, bias, lo, hi, grad):
    """Checks the output of tensors x, scale and bias against the float64
    reference; returns the gradients of all three for `grad`, and float64's."""
    out = fusedops.scale_bias_clamp(x, scale, bias, lo, hi)
    ref_inputs = [as_double(t, True) for t in (x, scale, bias)]
    ref = reference(*ref_inputs, lo, hi)
    assert_close(out, ref, x.dtype)
    got = torch.autograd.grad(out, (x, scale, bias), grad)
    return got, torch.autograd.grad(ref, ref_inputs, grad.double())


@pytest.mark.parametrize("lo, hi", BOUNDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape_x, shape_b", SHAPES)
def test_matches_float64_reference(device, dtype, shape_x, shape_b, layout, lo, hi):
    x = make_input(shape_x, dtype, device, layout)
    bias = 0.25 if shape_b is None else make_input(shape_b, dtype, device, layout)
    for scale in (torch.tensor(1.7, dtype=dtype, device=device), -0.6):
        before = [t.clone() for t in (x, bias, scale) if isinstance(t, torch.Tensor)]
        poison_allocator(device)
        out = fusedops.scale_bias_clamp(x, scale, bias, lo, hi)
        expected = reference(x.double(), as_double(scale), as_double(bias), lo, hi)
        assert out.shape == x.shape and out.dtype == dtype and out.device == x.device
        assert_close(out, expected, dtype)
        after = [t for t in (x, bias, scale) if isinstance(t, torch.Tensor)]
        assert all(torch.equal(a, b) for a, b in zip(after, before, strict=False))


@pytest.mark.parametrize("lo, hi", [(-0.5, 0.7), (None, 0.4), (None, None)])
@pytest.mark.parametrize("layout", ["contiguous", "offset", "transposed"])
@pytest.mark.parametrize("shape_x, shape_b", SHAPES)
def test_grads_match_float64_autograd(device, dtype, shape_x, shape_b, layout, lo, hi):
    x = make_input(shape_x, dtype, device, layout, requires_grad=True)
    scale = torch.tensor(1.3, dtype=dtype, device=device, requires_grad=True)
    bias = 0.1 if shape_b is None else make_input(shape_b, dtype, device, layout, requires_grad=True)
    inputs = [t for t in (x, scale, bias) if isinstance(t, torch.Tensor)]
    grad = kink_free(make_input(shape_x, dtype, device, layout), x, scale, bias, lo, hi)
    poison_allocator(device)
    got = torch.autograd.grad(fusedops.scale_bias_clamp(x, scale, bias, lo, hi), inputs, grad)
    ref_inputs = [as_double(t, True) for t in inputs]
    rx, rs = ref_inputs[:2]
    rb = ref_inputs[2] if len(ref_inputs) == 3 else bias
    expected = torch.autograd.grad(reference(rx, rs, rb, lo, hi), ref_inputs, grad.double())
    for g, _e, t in zip(got, expected, inputs, strict=False):
        assert g.shape == t.shape and g.dtype == dtype
    assert_close(got[0], expected[0], dtype)
    assert_sum_close(got[1], expected[1], dtype, x.numel())
    if len(got) == 3:
        assert_sum_close(got[2], expected[2], dtype, x.numel() // max(bias.numel(), 1))


@pytest.mark.parametrize("numel", [1, 3, 8, 15, 16, 17, 1023, 4097, 65537, 1_000_003])
def test_vector_tails_and_misaligned_pointers(device, dtype, numel):
    for offset in (0, 1, 3):
        x = torch.randn(numel + offset, dtype=dtype, device=device)[offset:].requires_grad_()
        bias = torch.randn(numel + 1, dtype=dtype, device=device)[1:].requires_grad_()
        scale = torch.tensor(0.9, dtype=dtype, device=device, requires_grad=True)
        grad = kink_free(torch.randn(numel, dtype=dtype, device=device), x, scale, bias, -0.4, 0.6)
        got, expected = forward_checked_grads(x, scale, bias, -0.4, 0.6, grad)
        assert_close(got[0], expected[0], dtype)
        assert_sum_close(got[1], expected[1], dtype, numel)
        assert_close(got[2], expected[2], dtype)


@pytest.mark.parametrize("cols", [1, 3, 8, 64, 100, 4096, 4100])
@pytest.mark.parametrize("offset", [0, 1])
def test_row_bias_paths(device, dtype, cols, offset):
    """[rows, cols] x with a [cols] bias: vectorized and scalar row kernels,
    padded rows (a slice of a wider tensor) and misaligned pointers."""
    rows = 67
    base = torch.randn(rows, cols + 8 + offset, dtype=dtype, device=device)
    for x in (base[:, offset:offset + cols], base[:, :cols].contiguous()):
        x = x.detach().requires_grad_()
        bias = torch.randn(cols + offset, dtype=dtype, device=device)[offset:].requires_grad_()
        scale = torch.tensor(1.1, dtype=dtype, device=device, requires_grad=True)
        grad = kink_free(torch.randn(rows, cols, dtype=dtype, device=device), x, scale, bias, -1.0, 0.9)
        got, expected = forward_checked_grads(x, scale, bias, -1.0, 0.9, grad)
        assert_close(got[0], expected[0], dtype)
        assert_sum_close(got[1], expected[1], dtype, x.numel())
        assert_sum_close(got[2], expected[2], dtype, rows)


def test_many_dims_and_expanded_inputs(device):
    # 10 non-mergeable dims exceed the kernels' 8: the glue falls back to copies.
    x = torch.randn([2] * 10, device=device).permute(*reversed(range(10))).requires_grad_()
    bias = torch.randn(2, device=device, requires_grad=True)
    out = fusedops.scale_bias_clamp(x, 2.0, bias, -1.0, 1.0)
    torch.testing.assert_close(out, torch.clamp(x * 2.0 + bias, -1.0, 1.0))
    got = torch.autograd.grad(out, (x, bias), torch.ones_like(out))
    expected = torch.autograd.grad(torch.clamp(x * 2.0 + bias, -1.0, 1.0), (x, bias), torch.ones_like(out))
    for g, e in zip(got, expected, strict=False):
        torch.testing.assert_close(g, e)
    # An expanded bias gets a full-size gradient, summed per aliased position.
    x = torch.randn(4, 3, 5, device=device, requires_grad=True)
    bias = torch.randn(5, device=device).expand(3, 5).requires_grad_()
    gb = torch.autograd.grad(fusedops.scale_bias_clamp(x, 1.0, bias).sum(), bias)[0]
    torch.testing.assert_close(gb, torch.full((3, 5), 4.0, device=device))


def test_nan_inf_and_bounds(device, dtype):
    special = [float("nan"), float("inf"), -float("inf"), 0.5, -0.5, 2.0, -2.0, 0.0]
    x = torch.tensor(special, dtype=dtype, device=device, requires_grad=True)
    for lo, hi in BOUNDS + [(0.5, 0.5), (-0.5, 0.5)]:
        out = fusedops.scale_bias_clamp(x, 1.0, 0.0, lo, hi)
        rx = x.detach().double().requires_grad_()
        ref = reference(rx, 1.0, 0.0, lo, hi)
        assert_close(out, ref.detach(), dtype)  # the bounds round to dtype
        # The contract's inclusive mask, spelled out rather than taken from
        # torch.clamp's backward (torch 2.14 made that exclusive at the bounds):
        # grads pass where min <= v <= max, not at NaN; unclamped, everywhere.
        (got,) = torch.autograd.grad(out, x, torch.ones_like(out))
        v = rx.detach()
        expected = torch.ones_like(v, dtype=torch.bool)
        if lo is not None or hi is not None:
            expected &= ~v.isnan()
        if lo is not None:
            expected &= v >= lo
        if hi is not None:
            expected &= v <= hi
        torch.testing.assert_close(got.double(), expected.double())


def test_min_greater_than_max_gives_max(device):
    x = torch.randn(1000, device=device, requires_grad=True)
    out = fusedops.scale_bias_clamp(x, 1.0, 0.0, 0.6, -0.2)
    assert torch.all(out == -0.2)
    (g,) = torch.autograd.grad(out, x, torch.ones_like(out))
    assert torch.all(g == 0)


@pytest.mark.parametrize("shape_x, shape_b", [((4, 3), (3,)), ((2, 5), (2, 1)), ((6,), ()), ((3, 4), (3, 4))])
def test_gradcheck(device, shape_x, shape_b):
    x = torch.randn(shape_x, dtype=torch.float64, device=device, requires_grad=True)
    scale = torch.tensor(0.8, dtype=torch.float64, device=device, requires_grad=True)
    bias = torch.randn(shape_b, dtype=torch.float64, device=device, requires_grad=True)
    for lo, hi in ((-0.5, 0.5), (None, 0.3), (None, None)):
        def f(*args, lo=lo, hi=hi):
            return fusedops.scale_bias_clamp(*args, lo, hi)

        assert torch.autograd.gradcheck(f, (x, scale, bias))


def test_double_backward_raises(device):
    x = torch.randn(5, 3, dtype=torch.float64, device=device, requires_grad=True)
    scale = torch.tensor(0.8, dtype=torch.float64, device=device, requires_grad=True)
    bias = torch.randn(3, dtype=torch.float64, device=device, requires_grad=True)
    out = fusedops.scale_bias_clamp(x, scale, bias, -0.5, 0.5)
    (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="fusedops.scale_bias_clamp: double backward is not supported"):
        gx.sum().backward()


def test_only_needed_grads(device):
    x = torch.randn(4, 3, device=device)
    scale = torch.tensor(2.0, device=device, requires_grad=True)
    bias = torch.randn(3, device=device)
    fusedops.scale_bias_clamp(x, scale, bias).sum().backward()
    torch.testing.assert_close(scale.grad, x.sum())
    assert bias.grad is None
    x.requires_grad_()
    scale.grad = None
    out = fusedops.scale_bias_clamp(x, 2.0, bias)
    out.sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 2.0))


@pytest.mark.parametrize("scale_kind", ["tensor", "number"])
@pytest.mark.parametrize("bias_shape", [(7,), (5, 7), (5, 1), (), None])
def test_opcheck(device, scale_kind, bias_shape):
    for requires_grad in (False, True):
        x = torch.randn(5, 7, device=device, requires_grad=requires_grad)
        scale = torch.tensor(1.5, device=device, requires_grad=requires_grad) if scale_kind == "tensor" else None
        bias = None if bias_shape is None else torch.randn(bias_shape, device=device, requires_grad=requires_grad)
        for lo, hi in ((-0.5, 0.5), (None, 0.2), (None, None)):
            opcheck(torch.ops.fusedops.scale_bias_clamp.default, (x, scale, bias, 0.7, 0.1, lo, hi))
            detached = [None if t is None else t.detach() for t in (x, scale, bias)]
            opcheck(torch.ops.fusedops._scale_bias_clamp_nograd.default, (*detached, 0.7, 0.1, lo, hi))
    g = torch.randn(5, 7, device=device)
    x = torch.randn(5, 7, device=device)
    scale = torch.tensor(1.5, device=device)
    bias = None if bias_shape is None else torch.randn(bias_shape, device=device)
    for mask in ([True, True, True], [False, True, False], [True, False, True]):
        opcheck(torch.ops.fusedops._scale_bias_clamp_backward.default,
                (g, x, scale, bias, 1.0, 0.0, -0.5, 0.5, mask))


def test_backward_op_returns_empty_grads_not_asked_for(device):
    g = torch.randn(5, 7, device=device)
    x = torch.randn(5, 7, device=device)
    bias = torch.randn(7, device=device)
    for x_in in (x, x[:0]):
        gx, gs, gb = torch.ops.fusedops._scale_bias_clamp_backward(
            g[:x_in.shape[0]], x_in, None, bias, 1.0, 0.0, None, None, [False, True, True])
        assert gx.shape == (0,) and gs.shape == (0,) and gb.shape == (7,)
        assert gx.device == gs.device == x.device and gx.dtype == gs.dtype == x.dtype
    assert torch.equal(gb, torch.zeros(7, device=device))  # a sum over no rows


def test_calls_without_grad_skip_autograd(device):
    x = torch.randn(4, 3, device=device, requires_grad=True)
    bias = torch.randn(3, device=device)
    with torch.no_grad():
        assert fusedops.scale_bias_clamp(x, 2.0, bias).grad_fn is None
    out = fusedops.scale_bias_clamp(x.detach(), torch.tensor(2.0, device=device), bias)
    assert out.grad_fn is None and not out.requires_grad
    assert fusedops.scale_bias_clamp(x, 2.0, bias).grad_fn is not None


def test_forward_mode_ad_is_refused(device):
    import torch.autograd.forward_ad as fwAD

    x = torch.randn(4, 3, device=device)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        with pytest.raises(RuntimeError, match="^fusedops.scale_bias_clamp: forward-mode AD"):
            fusedops.scale_bias_clamp(dual, 2.0, 0.5)
        with pytest.raises(RuntimeError, match="^fusedops.scale_bias_clamp: forward-mode AD"):
            fusedops.scale_bias_clamp(x, 2.0, fwAD.make_dual(x[0], torch.ones_like(x[0])))


def test_compile_fullgraph_forward_backward(device):
    def f(x, scale, bias):
        return (fusedops.scale_bias_clamp(x, scale, bias, -0.5, 0.8) * 2).sum()

    def g(x, bias):
        return fusedops.scale_bias_clamp(x, 0.5, bias, None, 0.3).sum()

    compiled_f = torch.compile(f, fullgraph=True, dynamic=True)
    compiled_g = torch.compile(g, fullgraph=True, dynamic=True)
    for rows in (5, 9):  # a second shape exercises the dynamic graph
        x = torch.randn(rows, 17, device=device, requires_grad=True)
        scale = torch.tensor(1.3, device=device, requires_grad=True)
        bias = torch.randn(17, device=device, requires_grad=True)
        got = torch.autograd.grad(compiled_f(x, scale, bias), (x, scale, bias))
        expected = torch.autograd.grad(f(x, scale, bias), (x, scale, bias))
        for a, e in zip(got, expected, strict=False):
            torch.testing.assert_close(a, e)
        got = torch.autograd.grad(compiled_g(x, bias), (x, bias))
        expected = torch.autograd.grad(g(x, bias), (x, bias))
        for a, e in zip(got, expected, strict=False):
            torch.testing.assert_close(a, e)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_graph_capture_and_replay():
    x = torch.randn(513, 257, device="cuda", requires_grad=True)
    scale = torch.tensor(1.2, device="cuda", requires_grad=True)
    bias = torch.randn(257, device="cuda", requires_grad=True)
    grad = torch.randn(513, 257, device="cuda")

    def step():
        out = fusedops.scale_bias_clamp(x, scale, bias, -0.5, 0.5)
        out2 = fusedops.scale_bias_clamp(x, 0.5, 0.25, None, 0.5)  # numbers: no host-to-device copies
        gx, gs, gb = torch.autograd.grad(out, (x, scale, bias), grad)
        return out, out2, gx, gs, gb

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    for _ in range(2):
        with torch.no_grad():
            x.copy_(torch.randn_like(x))
            scale.fill_(float(torch.rand(())) + 0.5)  # read from device memory on replay
        graph.replay()
        torch.cuda.synchronize()
        eager = step()
        for c, e in zip(captured, eager, strict=False):
            assert torch.equal(c, e)


@pytest.mark.parametrize("bias_shape", [(515,), (4099, 515), (), (4099, 1), None])
def test_grads_deterministic(device, bias_shape):
    x = torch.randn(4099, 515, device=device, requires_grad=True)
    scale = torch.tensor(0.7, device=device, requires_grad=True)
    bias = 0.1 if bias_shape is None else torch.randn(bias_shape, device=device, requires_grad=True)
    inputs = [t for t in (x, scale, bias) if isinstance(t, torch.Tensor)]
    grad = torch.randn(4099, 515, device=device)

    def grads():
        return torch.autograd.grad(fusedops.scale_bias_clamp(x, scale, bias, -0.9, 0.9), inputs, grad)

    first = grads()
    threads = torch.get_num_threads()
    try:
        for n in ((1, threads, 3) if device == "cpu" else (threads,) * 3):
            torch.set_num_threads(n)  # CPU: same bits on any number of threads
            for a, b in zip(first, grads(), strict=False):
                assert torch.equal(a, b)
    finally:
        torch.set_num_threads(threads)


def test_error_messages(device):
    x = torch.randn(4, 3, device=device)
    s = torch.tensor(1.0, device=device)
    cases = [
        ((x, s, torch.randn(4, device=device)), r"bias of shape \[4\] must broadcast to x of shape \[4, 3\] without changing it"),
        ((x, s, torch.randn(2, 4, 3, device=device)), r"bias of shape \[2, 4, 3\] must broadcast"),
        ((x, s, torch.randn(5, 3, device=device)), r"bias of shape \[5, 3\] must broadcast"),
        ((x, s.double(), 0.0), "scale must have the same dtype as x"),
        ((x, s, torch.randn(3, device=device).double()), "bias must have the same dtype as x"),
        ((x.int(), 1.0, 0.0), "x must have a floating dtype"),
        ((x, torch.ones(2, device=device), 0.0), r"scale must be a number or a tensor of one element, got shape \[2\]"),
        ((x, s, torch.randn(3, device="meta")), "bias must be on the same device as x"),
    ]
    for args, message in cases:
        with pytest.raises(RuntimeError, match="^fusedops.scale_bias_clamp: " + message):
            fusedops.scale_bias_clamp(*args)
    with pytest.raises(TypeError, match="^fusedops.scale_bias_clamp: min must be a number or None"):
        fusedops.scale_bias_clamp(x, 1.0, 0.0, s, None)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_and_cpu_inputs_mixed():
    x = torch.randn(3, device="cuda")
    with pytest.raises(RuntimeError, match="^fusedops.scale_bias_clamp: scale must be on the same device as x"):
        fusedops.scale_bias_clamp(x, torch.tensor(1.0), 0.0)
    with pytest.raises(RuntimeError, match="^fusedops.scale_bias_clamp: bias must be on the same device as x"):
        fusedops.scale_bias_clamp(x, 1.0, torch.randn(3))


def test_nn_module(device):
    m = fusedops.nn.ScaleBiasClamp(16, min=-0.5, max=0.5, scale=0.9, device=device)
    assert isinstance(m.scale, torch.nn.Parameter) and m.scale.shape == ()
    assert m.bias.shape == (16,) and torch.equal(m.bias, torch.zeros(16, device=device))
    with torch.no_grad():
        m.bias.normal_()
    x = torch.randn(8, 16, device=device, requires_grad=True)
    out = m(x)
    ref = torch.clamp(x * m.scale + m.bias, -0.5, 0.5)
    torch.testing.assert_close(out, ref)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (x, m.scale, m.bias), grad)
    expected = torch.autograd.grad(ref, (x, m.scale, m.bias), grad)
    for a, e in zip(got, expected, strict=False):
        torch.testing.assert_close(a, e)
    # state_dict round trip, scale as a buffer when not learnable.
    fixed = fusedops.nn.ScaleBiasClamp((16,), min=-0.5, max=0.5, learnable_scale=False, device=device)
    assert "scale" in dict(fixed.named_buffers()) and not fixed.scale.requires_grad
    fixed.load_state_dict(m.state_dict())
    torch.testing.assert_close(fixed(x), out)
    assert set(fixed.state_dict()) == {"scale", "bias"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_more_than_2_31_elements():
    if torch.cuda.get_device_properties(0).total_memory < 60 * 2**30:
        pytest.skip("needs a GPU with 60 GiB")
    n = 2**31 + 64
    x = torch.randn(n // 64, 64, dtype=torch.float16, device="cuda")
    bias = torch.randn(64, dtype=torch.float16, device="cuda")
    out = fusedops.scale_bias_clamp(x, 2.0, bias, -1.0, 1.0)  # row path
    for sl in (slice(0, 100), slice(-100, None)):
        assert torch.equal(out[sl], torch.clamp(x[sl] * 2.0 + bias, -1.0, 1.0))
    del out
    flat = x.view(-1)
    out = fusedops.scale_bias_clamp(flat, 2.0, 0.5, -1.0, 1.0)  # flat path
    for sl in (slice(0, 1000), slice(-1000, None)):
        assert torch.equal(out[sl], torch.clamp(flat[sl] * 2.0 + 0.5, -1.0, 1.0))
    del out
    # Backward: grad of a one-element bias and the scale over all elements.
    scale = torch.tensor(1.0, dtype=torch.float16, device="cuda", requires_grad=True)
    b = torch.tensor(0.0, dtype=torch.float16, device="cuda", requires_grad=True)
    g = torch.full_like(flat, 2.0**-20)
    out = fusedops.scale_bias_clamp(flat, scale, b, None, None)
    gs, gb = torch.autograd.grad(out, (scale, b), g)
    # The exact sum n * 2^-20 = 2048 + 2^-14, rounded once to float16, is 2048.
    expected = torch.tensor(n * 2.0**-20, dtype=torch.float64).to(torch.float16)
    assert gb.item() == expected.item() and torch.isfinite(gs)


@pytest.mark.parametrize("bounds", [(float("nan"), None), (None, float("nan")), (-0.5, float("nan"))])
def test_nan_bound_makes_every_output_nan(device, bounds):
    """The contract's clamp: a NaN bound gives NaN everywhere (current torch.clamp does; torch 2.10's with a
    single NaN bound does not, so no torch reference here), and no gradient passes."""
    x = torch.randn(37, 5, device=device, requires_grad=True)
    bias = torch.randn(5, device=device, requires_grad=True)
    out = fusedops.scale_bias_clamp(x, 1.5, bias, *bounds)
    assert out.shape == x.shape and out.isnan().all()
    gx, gb = torch.autograd.grad(out, (x, bias), torch.randn_like(out))
    assert not gx.any() and not gb.any()
