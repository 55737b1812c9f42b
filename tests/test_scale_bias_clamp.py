"""scale_bias_clamp's own semantics: vector tails and misaligned pointers, the
row-bias kernels, more dimensions than the kernels take, NaN, inf and the
bounds (min > max, a NaN bound), its backward op, same bits on any number of
CPU threads, the nn module, more than 2^31 elements. The generic checks
(test_every_op.py, test_cuda_robustness.py) run on its samples in samples.py."""

import pytest
import torch
from helpers import assert_close
from samples import assert_matches_reference, forward_backward
from samples.core import R, clamp
from samples.scale_bias_clamp import SBC_BOUNDS, scale_bias_clamp
from torch.library import opcheck

import fusedops

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)


def assert_forward_and_grads(sample, inputs):
    """Output and gradients against the float64 reference, for a random output
    gradient that is zero near the clamp bounds."""
    grad_out = sample.grad_out(inputs)
    assert_matches_reference(sample, forward_backward(sample, inputs, grad_out), inputs, grad_out)


@pytest.mark.parametrize("numel", [1, 3, 8, 15, 16, 17, 1023, 4097, 65537, 1_000_003])
def test_vector_tails_and_misaligned_pointers(device, dtype, numel):
    sample = scale_bias_clamp("x, tensor scale, same-shape bias", (R,), (), (R,), -0.4, 0.6)
    for offset in (0, 1, 3):
        x = torch.randn(numel + offset, dtype=dtype, device=device)[offset:].requires_grad_()
        scale = torch.tensor(0.9, dtype=dtype, device=device, requires_grad=True)
        bias = torch.randn(numel + 1, dtype=dtype, device=device)[1:].requires_grad_()
        assert_forward_and_grads(sample, (x, scale, bias))


@pytest.mark.parametrize("cols", [1, 3, 8, 64, 100, 4096, 4100])
@pytest.mark.parametrize("offset", [0, 1])
def test_row_bias_paths(device, dtype, cols, offset):
    """[rows, cols] x with a [cols] bias: vectorized and scalar row kernels,
    padded rows (a slice of a wider tensor) and misaligned pointers."""
    sample = scale_bias_clamp("row bias", (R, cols), (), (cols,), -1.0, 0.9)
    rows = 67
    base = torch.randn(rows, cols + 8 + offset, dtype=dtype, device=device)
    for x in (base[:, offset:offset + cols], base[:, :cols].contiguous()):
        x = x.detach().requires_grad_()
        bias = torch.randn(cols + offset, dtype=dtype, device=device)[offset:].requires_grad_()
        scale = torch.tensor(1.1, dtype=dtype, device=device, requires_grad=True)
        assert_forward_and_grads(sample, (x, scale, bias))


def contract_clamp(v, lo, hi):
    """torch.clamp whose gradient passes at the bounds, as the contract's does
    (torch 2.14's clamp stops it there: an element landing on a bound differs)."""
    return torch.where((v >= lo) & (v <= hi), v, torch.clamp(v, lo, hi))


def test_many_dims_and_expanded_inputs(device):
    # 10 non-mergeable dims exceed the kernels' 8: the glue falls back to copies.
    x = torch.randn([2] * 10, device=device).permute(*reversed(range(10))).requires_grad_()
    bias = torch.randn(2, device=device, requires_grad=True)
    out = fusedops.scale_bias_clamp(x, 2.0, bias, -1.0, 1.0)
    torch.testing.assert_close(out, torch.clamp(x * 2.0 + bias, -1.0, 1.0))
    got = torch.autograd.grad(out, (x, bias), torch.ones_like(out))
    expected = torch.autograd.grad(contract_clamp(x * 2.0 + bias, -1.0, 1.0), (x, bias), torch.ones_like(out))
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
    for lo, hi in SBC_BOUNDS + [(0.5, 0.5), (-0.5, 0.5)]:
        out = fusedops.scale_bias_clamp(x, 1.0, 0.0, lo, hi)
        rx = x.detach().double().requires_grad_()
        ref = clamp(rx, lo, hi)
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


@pytest.mark.parametrize("bias_shape", [(7,), (5, 7), (5, 1), (), None])
def test_opcheck_backward_op(device, bias_shape):
    """The internal backward op, for each mask of gradients (the public op and
    its twin: test_every_op.py)."""
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


@pytest.mark.parametrize("bias_shape", [(515,), (4099, 515), (), (4099, 1), None])
def test_cpu_grads_same_bits_on_any_number_of_threads(bias_shape):
    """The CPU backward splits its sums the same way on any number of threads
    (run-to-run determinism on every device: test_cuda_robustness.py)."""
    x = torch.randn(4099, 515, requires_grad=True)
    scale = torch.tensor(0.7, requires_grad=True)
    bias = 0.1 if bias_shape is None else torch.randn(bias_shape, requires_grad=True)
    inputs = [t for t in (x, scale, bias) if isinstance(t, torch.Tensor)]
    grad = torch.randn(4099, 515)

    def grads():
        return torch.autograd.grad(fusedops.scale_bias_clamp(x, scale, bias, -0.9, 0.9), inputs, grad)

    threads = torch.get_num_threads()
    first = grads()
    try:
        for n in (1, 3, threads):
            torch.set_num_threads(n)
            for a, b in zip(first, grads(), strict=True):
                assert torch.equal(a, b)
    finally:
        torch.set_num_threads(threads)


def test_nn_module(device):
    m = fusedops.nn.ScaleBiasClamp(16, min=-0.5, max=0.5, scale=0.9, device=device)
    assert isinstance(m.scale, torch.nn.Parameter) and m.scale.shape == ()
    assert m.bias.shape == (16,) and torch.equal(m.bias, torch.zeros(16, device=device))
    with torch.no_grad():
        m.bias.normal_()
    x = torch.randn(8, 16, device=device, requires_grad=True)
    out = m(x)
    ref = contract_clamp(x * m.scale + m.bias, -0.5, 0.5)
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
@pytest.mark.parametrize("extra_rows", [0, 3])
@pytest.mark.parametrize("cols, band", [(8, 256), (6, 64)])
def test_cuda_rows_path_where_the_bands_outgrow_a_2d_grid(cols, band, extra_rows):
    # [R, cols] float32 with a [cols] bias: `band` rows per block (8 columns: two
    # 16-byte vectors a row, 128 threads along rows, two rows each; 6 columns:
    # one element a thread, 32 threads along rows), so 65535 bands are the most a
    # 2-D grid (gridDim.y <= 65535) holds; 3 rows more take the 1-D grid.
    rows = 65535 * band + extra_rows
    x = torch.randn(rows, cols, device="cuda")
    bias = torch.randn(cols, device="cuda")
    out = fusedops.scale_bias_clamp(x, 1.5, bias, -1.0, 1.0)
    expected = torch.clamp(x.double() * 1.5 + bias.double(), -1.0, 1.0)
    torch.testing.assert_close(out, expected.float(), rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_more_than_2_31_elements_row_and_flat_paths():
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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_more_than_2_31_elements_full_reductions():
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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_out_of_memory_in_the_backward_is_torchs_out_of_memory_error():
    """The backward's allocation fails inside autograd's engine: between the
    forward and the backward, torch's allocator is capped at what it holds plus
    64 MiB (a cap, not a filled GPU: other test processes share the device).
    grad_x is larger than the free space the allocator keeps in segments that
    earlier tests of this process still hold (empty_cache cannot return those:
    under pytest-xdist 256 MiB fitted there once on the H200)."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    held_free = torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    x = torch.randn((held_free >> 2) + (1 << 26), device="cuda", requires_grad=True)  # >= 256 MiB, as grad_x
    y = fusedops.scale_bias_clamp(x, 1.5, 0.5, -1.0, 1.0)
    grad = torch.randn_like(y)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(x.device).total_memory
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + (64 << 20)) / total)
    try:
        with pytest.raises(torch.OutOfMemoryError, match=r"^fusedops\.scale_bias_clamp: CUDA out of memory"):
            y.backward(grad)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
