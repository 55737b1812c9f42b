"""linear's own semantics: the same bits as torch's composition on the CPU,
NaN and inf, expanded and transposed output gradients, its internal forward
and backward ops, autocast, the TF32 flag, the nn module. The generic checks
(test_every_op.py, test_cuda_robustness.py) run on its samples in samples.py:
every activation and bounds, ranks 1 to 4, empty sizes, layouts."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import CUDA
from samples import assert_matches_reference, forward_backward
from samples.core import GEMM_TOLERANCE
from samples.linear import ACTIVATIONS, LINEAR_BOUNDS, linear
from torch.library import opcheck

import fusedops

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)


def test_matches_eager_composition_on_cpu(dtype):
    # Same addmm and the same roundings (z, then act, then clamp): on CPU the
    # result equals torch's composition up to the activation's last bit.
    for activation in ACTIVATIONS:
        clamped = linear("clamped", (9, 33), 17, activation=activation, lo=-0.3, hi=0.7)
        x, w, b = clamped.make("cpu", dtype)
        rtol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
        torch.testing.assert_close(clamped.call(x, w, b), clamped.ref(x, w, b), rtol=rtol, atol=1e-6)
        if activation in (None, "relu"):
            unclamped = linear("unclamped", (9, 33), 17, activation=activation)
            assert torch.equal(unclamped.call(x, w, b), unclamped.ref(x, w, b))


def test_nan_inf_and_reversed_bounds(device):
    x = torch.tensor([[float("nan"), 1.0], [2.0, 3.0], [-1.0, 0.5]], device=device)
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [float("inf"), 0.0]], device=device)
    for activation in ACTIVATIONS:
        if activation in ("gelu", "gelu_tanh"):
            w = w[:2]  # torch's gelu(+-inf) is NaN (and gelu_tanh(inf) inf); no contract there
        for lo, hi in LINEAR_BOUNDS:
            sample = linear("special values", (3, 2), w.shape[0], False, activation, lo, hi)
            out, expected = sample.call(x, w), sample.ref(x, w)
            if device == "cuda" and activation == "relu":
                # cuBLASLt's RELU epilogue is max(z, 0), which may turn NaN into 0
                # (torch.relu keeps NaN): only the finite results are compared there.
                keep = ~expected.isnan()
                out, expected = out[keep], expected[keep]
            torch.testing.assert_close(out, expected, equal_nan=True)


def test_grads_of_expanded_and_transposed_output_grads(device):
    # gelu >= -0.17: a min of -0.3 never bites, so out.sum()'s gradient needs no kink care.
    sample = linear("gelu, min", (6, 10), 12, activation="gelu", lo=-0.3)
    inputs = sample.make(device, torch.float32, requires_grad=True)
    out = sample.call(*inputs)
    got = (out, *torch.autograd.grad(out.sum(), inputs))  # an expanded (stride 0) gradient
    assert_matches_reference(sample, got, inputs, (torch.ones_like(out),))
    sample = linear("relu, max", (6, 10), 12, activation="relu", hi=0.5)
    grad = sample.grad_out(inputs, "transposed")
    assert_matches_reference(sample, forward_backward(sample, inputs, grad), inputs, grad)


@pytest.mark.parametrize(
    "activation, bounds", [(None, (None, None)), ("relu", (None, None)), ("gelu", (-0.3, 0.7)), ("gelu_tanh", (None, 0.2))]
)
def test_opcheck_internal_ops(device, activation, bounds):
    """The forward that also returns z, and the backward (the public op and its
    twin: test_every_op.py)."""
    x, w, b = linear("opcheck", (4, 6), 7).make(device, torch.float32)
    out, aux = torch.ops.fusedops._linear_forward(x, w, b, activation, *bounds)
    opcheck(torch.ops.fusedops._linear_forward.default, (x, w, b, activation, *bounds))
    saved = aux if aux.numel() else out
    opcheck(
        torch.ops.fusedops._linear_backward.default,
        (torch.randn_like(out), x, w, saved, activation, *bounds, [True, True, True]),
    )


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
def test_autocast(device, bias):
    dtype = torch.bfloat16 if device == "cpu" else torch.float16
    x, w, *b = linear("autocast", (4, 5, 16), 24, bias).make(device, torch.float32, requires_grad=True)
    b = b[0] if b else None
    with torch.autocast(device_type=device, dtype=dtype):
        out = fusedops.linear(x, w, b, activation="gelu", max=0.5)
        expected = torch.clamp(F.gelu(F.linear(x, w, b)), max=0.5)
    assert out.dtype == expected.dtype == dtype
    torch.testing.assert_close(out, expected, **GEMM_TOLERANCE[dtype])
    got = torch.autograd.grad(out.float().sum(), (x, w))
    assert all(g.dtype == torch.float32 for g in got)
    # float64 is not cast, as with F.linear.
    xd, wd = x.detach().double(), w.detach().double()
    with torch.autocast(device_type=device, dtype=dtype):
        assert fusedops.linear(xd, wd).dtype == torch.float64


def _linear_call(call, *args, **kwargs):
    if call == "torch.ops":  # the flags come from the schema's default, cublas_math=-1
        return torch.ops.fusedops.linear(*args, **kwargs)
    if call == "inference_mode":  # no autograd kernel runs
        with torch.inference_mode():
            return fusedops.linear(*args, **kwargs)
    return fusedops.linear(*args, **kwargs)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("call", ["public", "inference_mode", "torch.ops"])
def test_tf32_follows_torch_setting(call):
    if call == "torch.ops" and not fusedops.ops.linear.CPP_AUTOGRAD:
        pytest.skip("a direct torch.ops call reads the flags through the C++ accelerator's reader")
    sample = linear("relu", (256, 1024), 512, activation="relu")
    x, w, b = sample.make("cuda", torch.float32)
    exact = sample.ref(x.double(), w.double(), b.double())
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        out = _linear_call(call, x, w, b, activation="relu")
        torch.testing.assert_close(out, exact.float(), rtol=1e-4, atol=2e-5)
        torch.backends.cuda.matmul.allow_tf32 = True
        out = _linear_call(call, x, w, b, activation="relu")
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


# ---- the CUDA kernel choice: our sm_90a GEMM against cuBLASLt + a pass ----------------------
# On sm_90, in a build that had CUTLASS, the erf GELU (any bounds) and the clamps without an
# activation or after relu run in our own GEMM where the call suits it (float16 / bfloat16,
# 16-byte aligned pointers and rows; with a gradient only the GELU, which also writes z) and
# its rule prefers it (M > 64, a grid of at least 1.75 waves of 128x128 tiles, K <= 4096 unless
# the grid is large enough for a swizzled tile order);
# everything else takes cuBLASLt + the elementwise pass. FUSEDOPS_LINEAR_SM90 (read once per
# process) changes that: 0 puts every call on cuBLASLt + the pass, pingpong / cooperative
# every call the kernels can take on that tile configuration, whatever its size, and
# FUSEDOPS_LINEAR_SM90_ORDER sets the tile order (swizzle and raster). These tests
# check whichever path is active against float64; the *_forced tests run them again in a
# process with each value, so that every case below also runs in each of our kernels.

SM90_MODE = os.environ.get("FUSEDOPS_LINEAR_SM90", "1")
SM90_FORCED = SM90_MODE in ("pingpong", "cooperative")


def sm90_gemm_built():
    return (CUDA and "our sm_90a GEMM" in fusedops.build_info()["cuda_kernels"]
            and torch.cuda.get_device_capability() == (9, 0))


def sm90_gemm_active():
    return SM90_MODE != "0" and sm90_gemm_built()


def rule_tiles():
    """The fewest 128x128 output tiles our GEMM's rule takes on this GPU (1.75 waves)."""
    return -(-7 * torch.cuda.get_device_properties(0).multi_processor_count // 4)


def strided_rows(rows, cols, pad, dtype, offset=0):
    """[rows, cols] whose rows are `cols + pad` apart, starting `offset` elements in."""
    base = torch.randn(rows * (cols + pad) + offset, dtype=dtype, device="cuda")
    return base[offset:].view(rows, cols + pad)[:, :cols] if pad or offset else base.view(rows, cols)


# (M, K, N, x's row padding, x's offset, weight's layout, bias): what each case exercises of
# our GEMM where a forced tile configuration runs it ("ours"), and of the path choice.
GEMM_CASES = {
    "M=1": (1, 64, 128, 0, 0, "rows", True),               # ours when forced, else cuBLASLt (M <= 64)
    "M=64": (64, 64, 136, 0, 0, "rows", True),             # likewise
    "M=65": (65, 64, 136, 0, 0, "rows", True),             # ours when forced (too small a grid for the rule)
    "odd M": (333, 200, 264, 0, 0, "rows", False),         # ours: partial tiles in M
    "ragged N tile": (257, 72, 200, 0, 0, "rows", True),   # ours: N not a tile multiple
    "K unaligned": (129, 61, 128, 0, 0, "rows", True),     # cuBLASLt (K % 8)
    "N unaligned": (129, 64, 131, 0, 0, "rows", True),     # cuBLASLt (N % 8)
    "row stride": (130, 96, 64, 8, 0, "rows", True),       # ours: aligned padded rows
    "odd row stride": (130, 96, 64, 3, 0, "rows", True),   # cuBLASLt
    "offset": (130, 96, 64, 0, 1, "rows", True),           # cuBLASLt (misaligned pointer)
    "weight transposed": (130, 96, 64, 0, 0, "transposed", True),  # cuBLASLt
    "long K": (200, 4096, 256, 0, 0, "rows", True),        # ours
    "K > 4096": (96, 4104, 64, 0, 0, "rows", True),        # ours when forced, else cuBLASLt
    "K=2040": (4229, 2040, 2056, 0, 0, "rows", True),      # ours by the rule too (561 tiles), odd M
    "large": (4229, 2048, 2056, 0, 0, "rows", True),       # ours by the rule too: cooperative, ragged N
}
EPILOGUES = {"gelu": ("gelu", None, None), "gelu clamp": ("gelu", -0.1, 0.6), "gelu min": ("gelu", 0.05, None),
             "tanh max": ("gelu_tanh", None, 0.3), "clamp": (None, -0.5, 0.5), "min": (None, -0.3, None),
             "relu max": ("relu", None, 0.8), "relu clamp": ("relu", -0.2, 0.6), "relu min": ("relu", 0.2, None),
             "reversed": (None, 0.5, -0.5), "plain": (None, None, None)}
BIG_CASES = ("K=2040", "large")


def gemm_inputs(case, dtype, requires_grad=False):
    m, k, n, pad, offset, w_layout, bias = GEMM_CASES[case]
    x = strided_rows(m, k, pad, dtype, offset)
    w = torch.randn(n, k, dtype=dtype, device="cuda") / k**0.5
    if w_layout == "transposed":
        w = w.t().contiguous().t()
    inputs = (x, w, torch.randn(n, dtype=dtype, device="cuda")) if bias else (x, w)
    return tuple(t.requires_grad_(requires_grad) for t in inputs)


# The tile rule's two large cases run three epilogues in the half types, the rest all of them.
GEMM_PATHS = [(case, epilogue, dtype) for case in GEMM_CASES for epilogue in EPILOGUES
              for dtype in (torch.bfloat16, torch.float16, torch.float32)
              if case not in BIG_CASES or (dtype != torch.float32 and epilogue in ("gelu", "clamp", "relu clamp"))]


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize(("case", "epilogue", "dtype"), GEMM_PATHS, ids=str)
def test_gemm_paths_against_float64(case, epilogue, dtype):
    """Forward without grad (no aux), and forward + backward (the GEMM also writes z)."""
    activation, lo, hi = EPILOGUES[epilogue]
    inputs = gemm_inputs(case, dtype, requires_grad=True)
    sample = linear(case, tuple(inputs[0].shape), inputs[1].shape[0], len(inputs) == 3, activation, lo, hi)
    with torch.no_grad():
        expected = sample.ref(*(t.double() for t in inputs))
        torch.testing.assert_close(sample.call(*inputs).double(), expected, **GEMM_TOLERANCE[dtype])
    grad = sample.grad_out(inputs)
    assert_matches_reference(sample, forward_backward(sample, inputs, grad), inputs, grad)


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "offset"])
def test_bias_gradient_summed_in_the_grad_z_pass(dtype, layout):
    """A dense grad's bias gradient comes from the grad_z pass (row blocks summed in a fixed
    order), any other from its own sum: both against float64, over many row blocks and a
    partial block of columns, and the same bits on every call."""
    x = torch.randn(5003, 40, dtype=dtype, device="cuda", requires_grad=True)
    w = (torch.randn(264, 40, dtype=dtype, device="cuda") / 40**0.5).requires_grad_()
    b = torch.randn(264, dtype=dtype, device="cuda", requires_grad=True)
    sample = linear("bias gradient", tuple(x.shape), w.shape[0], True, "gelu", -0.5, 2.0)
    grad = sample.grad_out((x, w, b), layout)
    first = forward_backward(sample, (x, w, b), grad)
    assert_matches_reference(sample, first, (x, w, b), grad)
    again = forward_backward(sample, (x, w, b), grad)
    assert torch.equal(first[3], again[3])


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_gemm_nan_inf_inputs_and_bounds(dtype):
    """NaN and inf in x and the weight, and every kind of bound, at a size our GEMM takes."""
    x, w = gemm_inputs("odd M", dtype)
    b = torch.randn(w.shape[0], dtype=dtype, device="cuda")
    x[3, 5], w[9, 0] = float("nan"), float("nan")
    x_inf, w_inf = x.clone(), w.clone()
    x_inf[10, :], w_inf[7, 2] = float("inf"), float("-inf")
    inf = float("inf")
    bounds = [*LINEAR_BOUNDS, (float("nan"), None), (None, float("nan")), (-inf, inf), (-inf, None), (None, inf),
              (inf, None), (None, -inf), (float("nan"), 0.5)]
    for activation in ACTIVATIONS:
        # gelu of -inf is NaN by its formula (inf * 0): infinities only without it.
        xs, ws = (x, w) if activation in ("gelu", "gelu_tanh") else (x_inf, w_inf)
        for lo, hi in bounds:
            sample = linear("special values", tuple(xs.shape), ws.shape[0], True, activation, lo, hi)
            out = sample.call(xs, ws, b)
            if lo != lo or hi != hi:  # the contract: a NaN bound makes every output NaN
                assert out.isnan().all(), (activation, lo, hi)
                continue
            expected = sample.ref(*(t.double().cpu() for t in (xs, ws, b)))
            # NaN where float64 gives NaN, the same infinities, finite results within tolerance.
            torch.testing.assert_close(out.double().cpu(), expected, equal_nan=True, **GEMM_TOLERANCE[dtype])


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_gelu_over_its_range(dtype):
    """The erf GELU of every representable input from -16 to 16 (infinities and NaN would spread
    along a row in the GEMM: test_gemm_nan_inf_inputs_and_bounds has them): an identity
    weight makes z = x exactly, so the output is GELU(x) rounded once, which our GEMM's
    epilogue gets within an ulp of float64 even in the far negative tail (there
    1 + erf(x) cancels in float32, so the cuBLASLt path's pass, like eager PyTorch, gives 0:
    it is held to an absolute 1e-6 instead)."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    x = bits.view(dtype).to("cuda")
    x = x[x.abs() <= 16]
    x = torch.cat([x, x.new_zeros(-x.numel() % 128)]).view(-1, 128)
    x = torch.cat([x, x.new_zeros(max(0, 65 - x.shape[0]), 128)])
    # Stacked identities, enough output tiles for our GEMM's rule: out[:, j] = x[:, j % 128].
    copies = -(-rule_tiles() // -(-x.shape[0] // 128))
    w = torch.eye(128, dtype=dtype, device="cuda").repeat(copies, 1)
    out = fusedops.linear(x, w, activation="gelu").view(x.shape[0], copies, 128)
    z = x.double()[:, None, :]
    expected = z * 0.5 * torch.special.erfc(-z / 2**0.5)  # F.gelu's 1 + erf(z / sqrt2) cancels below -8
    tail = 1e-36 if dtype == torch.bfloat16 else 1e-7  # half the smallest subnormal (about)
    ulp = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    torch.testing.assert_close(out.double(), expected.to(dtype).double().expand_as(out), rtol=ulp,
                               atol=tail if sm90_gemm_active() else 1e-6)


def cuda_kernels_of(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
def test_which_kernels_run():
    """One fused kernel for the erf GELU and the clamps (no elementwise pass) where our GEMM
    is active and its rule takes the call, else the GEMM and the pass; plain, relu and the
    tanh GELU stay on cuBLASLt's own epilogues either way. At the rule's boundaries (M = 64,
    a grid one tile short of 1.75 waves, K > 4096 on a grid too small to swizzle) cuBLASLt +
    the pass, unless a tile configuration is forced, which takes them all; K > 4096 on a grid
    of 2048 tiles (swizzled) is ours."""
    tiles = rule_tiles()
    x = torch.randn(65, 64, device="cuda", dtype=torch.bfloat16)  # one row of 128x128 tiles
    w = torch.randn(128 * tiles, 64, device="cuda", dtype=torch.bfloat16) / 8
    b = torch.randn(128 * tiles, device="cuda", dtype=torch.bfloat16)
    x_long = torch.randn(65, 4104, device="cuda", dtype=torch.bfloat16)
    w_long = torch.randn(128 * tiles, 4104, device="cuda", dtype=torch.bfloat16) / 64
    x_wide = torch.randn(2048, 4104, device="cuda", dtype=torch.bfloat16)  # 16 x 128 tiles, swizzle 8
    w_wide = torch.randn(16384, 4104, device="cuda", dtype=torch.bfloat16) / 64

    def run(*inputs, **kw):
        return cuda_kernels_of(lambda: fusedops.linear(*(inputs or (x, w, b)), **kw))

    def ours(names):  # CUTLASS's kernel template (the profiler cuts long names in the middle)
        return [name for name in names if "cutlass13device_kernel" in name and "GemmUniversal" in name]

    def passes(names):
        return [name for name in names if "epilogue_kernel" in name]

    with torch.no_grad():
        fused = {"gelu": run(activation="gelu"), "gelu clamp": run(activation="gelu", min=-0.1, max=0.5),
                 "clamp": run(min=-1.0, max=1.0), "relu max": run(activation="relu", max=1.0),
                 "K > 4096 swizzled": run(x_wide, w_wide, activation="gelu")}
        cublas = {"plain": run(), "relu": run(activation="relu"), "tanh": run(activation="gelu_tanh"),
                  "tanh max": run(activation="gelu_tanh", max=1.0)}
        edges = {"M=64": run(x[:64], w, b, activation="gelu"),
                 "grid": run(x, w[:-128], b[:-128], activation="gelu"),
                 "K > 4096": run(x_long, w_long, b, min=-1.0)}
    leaves = tuple(t.clone().requires_grad_() for t in (x, w, b))
    grad_gelu = cuda_kernels_of(lambda: fusedops.linear(*leaves, activation="gelu"))
    grad_clamp = cuda_kernels_of(lambda: fusedops.linear(*leaves, min=-1.0))
    forced = SM90_FORCED and sm90_gemm_built()
    for name, kernels in {**fused, "gelu with grad": grad_gelu, **edges}.items():
        if sm90_gemm_active() and (forced or name not in edges):
            assert len(ours(kernels)) == 1 and not passes(kernels), (name, kernels)
        else:
            assert not ours(kernels) and passes(kernels), (name, kernels)
    for name, kernels in {**cublas, "clamp with grad": grad_clamp}.items():
        assert not ours(kernels), (name, kernels)
    for kernels in (grad_clamp, cublas["tanh max"]):
        assert passes(kernels), kernels
    for kernels in (cublas["plain"], cublas["relu"], cublas["tanh"]):
        assert not passes(kernels), kernels


@pytest.mark.skipif(not CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("grad", [False, True], ids=["nograd", "grad"])
@pytest.mark.parametrize("epilogue", ["gelu", "clamp"])
def test_gemm_in_cuda_graph_and_compile(grad, epilogue):
    x, w, b = gemm_inputs("ragged N tile", torch.bfloat16, requires_grad=grad)
    kw = {"activation": "gelu"} if epilogue == "gelu" else {"min": -0.5, "max": 0.5}
    call = functools.partial(fusedops.linear, **kw)
    eager = call(x, w, b)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call(x, w, b)  # warm up (plans, workspace) outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            captured = call(x, w, b)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.no_grad():
        x.copy_(torch.randn_like(x))
    graph.replay()
    torch.testing.assert_close(captured, call(x, w, b), rtol=0, atol=0)
    assert not torch.equal(captured, eager)
    compiled = torch.compile(lambda *t: call(*t) * 2, fullgraph=True)
    torch.testing.assert_close(compiled(x, w, b), call(x, w, b) * 2, rtol=0, atol=0)
    if grad:
        leaves = tuple(t.detach().clone().requires_grad_() for t in (x, w, b))
        expected = torch.autograd.grad(call(*leaves).sum(), leaves)
        got = torch.autograd.grad(compiled(*leaves).sum(), leaves)
        for e_, g_ in zip(expected, got, strict=True):
            torch.testing.assert_close(g_, e_ * 2, **GEMM_TOLERANCE[torch.bfloat16])


FORCED_TESTS = "gemm_paths or nan_inf_inputs or gelu_over or which_kernels or graph_and_compile"


@pytest.mark.skipif(not sm90_gemm_built() or SM90_MODE != "1", reason="needs our sm_90a GEMM and an sm_90 device")
@pytest.mark.parametrize(("mode", "order"), [("0", None), ("pingpong", None), ("cooperative", None),
                                             ("pingpong", "8n"), ("cooperative", "4m")], ids=str)
def test_sm90_paths_forced(mode, order):
    """The kernel-choice tests above in a process started with FUSEDOPS_LINEAR_SM90=mode: 0 puts
    every call on cuBLASLt + the pass (the path every other GPU takes, here on sm_90),
    pingpong / cooperative every call our kernels can take on that tile configuration, so that
    each kernel meets every case (M = 1, odd sizes, partial tiles, long K); with
    FUSEDOPS_LINEAR_SM90_ORDER, in a swizzled tile order (which the rule gives only large
    grids), padded grids included."""
    tests = Path(__file__).resolve().parent
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests / "test_linear.py"),
               "-k", FORCED_TESTS]
    if os.environ.get("PYTEST_XDIST_WORKER"):
        command += ["-n", "4"]
    env = {**os.environ, "FUSEDOPS_LINEAR_SM90": mode, **({"FUSEDOPS_LINEAR_SM90_ORDER": order} if order else {})}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout, result.stdout[-2000:]


@pytest.mark.skipif(not sm90_gemm_built(), reason="needs our sm_90a GEMM and an sm_90 device")
@pytest.mark.parametrize(("variable", "value", "message"), [
    ("FUSEDOPS_LINEAR_SM90", "pingpng", "FUSEDOPS_LINEAR_SM90 must be unset, 0, 1, pingpong or cooperative"),
    ("FUSEDOPS_LINEAR_SM90_ORDER", "3m", "FUSEDOPS_LINEAR_SM90_ORDER must be unset or a swizzle of 1, 2, 4 or 8"),
    ("FUSEDOPS_LINEAR_SM90_ORDER", "8k", "FUSEDOPS_LINEAR_SM90_ORDER must be unset or a swizzle of 1, 2, 4 or 8"),
], ids=str)
def test_sm90_mode_unknown_value(variable, value, message):
    """A mistyped FUSEDOPS_LINEAR_SM90 or FUSEDOPS_LINEAR_SM90_ORDER is refused with the values
    it takes, not ignored."""
    code = ("import torch, fusedops\n"
            "x = torch.randn(256, 64, device='cuda', dtype=torch.bfloat16)\n"
            "fusedops.linear(x, x[:128], activation='gelu')\n")
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, variable: value},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr[-2000:]
