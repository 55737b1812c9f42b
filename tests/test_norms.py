"""The normalization ops' own semantics (rms_norm, add_rms_norm, layer_norm,
add_layer_norm): Gemma's offset, a float32 weight on a half-type x, a
LayerNorm input with a large mean, NaN and inf, the kernels' row paths
(registers, streamed, vector and scalar), determinism of the parameter
gradients, the saved tensors, the backward ops, the nn modules against
torch.nn.RMSNorm / torch.nn.LayerNorm. The generic checks
(test_every_op.py, test_cuda_robustness.py) run on their samples
(tests/samples/<op>.py)."""

import pytest
import torch
import torch.nn.functional as F

import fusedops

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)

TOL = {torch.float16: 4e-3, torch.bfloat16: 2e-2, torch.float32: 2e-5, torch.float64: 1e-12}


def rms_ref(x, weight=None, eps=1e-6, offset=0.0):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * (offset + weight)


def ln_ref(x, weight=None, bias=None, eps=1e-5):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def leaves(*tensors, dtype=None):
    return [None if t is None else t.detach().to(dtype or t.dtype).requires_grad_() for t in tensors]


def check_against_float64(ours, ref, inputs, tol):
    """ours(*inputs) and its gradients against ref on float64 copies; both
    return a tuple of outputs, each given the same random output gradient."""
    mine = leaves(*inputs)
    wide = leaves(*inputs, dtype=torch.float64)
    out = ours(*mine)
    expected = ref(*wide)
    grads_out = [torch.randn_like(o) for o in out]
    have = torch.autograd.grad(out, [t for t in mine if t is not None], grads_out)
    want = torch.autograd.grad(expected, [t for t in wide if t is not None], [g.double() for g in grads_out])
    for a, b in zip((*out, *have), (*expected, *want), strict=True):
        scale = max(1.0, b.abs().max().item()) if b.numel() else 1.0
        torch.testing.assert_close(a.double(), b, rtol=tol, atol=tol * scale)


# ---- the kernels' row paths ------------------------------------------------------------------

# Hidden sizes through every path: below a warp, odd (scalar loads), vector
# widths, a full block of registers (8192) and past it (streamed).
HIDDEN = [1, 7, 64, 129, 768, 8192, 8200]


@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("offset", [0, 1])  # a storage offset: misaligned rows, scalar path
def test_row_paths(device, dtype, hidden, offset):
    rows = 3 if hidden > 1000 else 37
    x = torch.randn(rows * hidden + offset, dtype=dtype, device=device)[offset:].view(rows, hidden)
    if hidden == 1:
        # A one-element row's rms_norm gradient, g * w * eps / (x^2 + eps)^1.5, is computed (as torch's float32
        # computes it) as rstd * g * w * (1 - x^2 * rstd^2): for |x| between sqrt(eps) and ~0.1 that cancels to
        # an error of a float32 ulp times rstd (up to 1000), past the tolerance. |x| >= 0.25 keeps rstd <= 4.
        x.add_(0.25 * x.sign())
    r = torch.randn_like(x)
    w = torch.randn(hidden, dtype=dtype, device=device)
    b = torch.randn(hidden, dtype=dtype, device=device)
    tol = TOL[dtype] * (4 if hidden > 1000 else 1)
    check_against_float64(lambda x, w: (fusedops.rms_norm(x, w),), lambda x, w: (rms_ref(x, w),), (x, w), tol)
    check_against_float64(lambda x, r, w, b: fusedops.add_layer_norm(x, r, w, b),
                          lambda x, r, w, b: (ln_ref(x + r, w, b), x + r), (x, r, w, b), tol)


# ---- options and dtypes ----------------------------------------------------------------------


def test_gemma_offset(device, dtype):
    x = torch.randn(5, 33, dtype=dtype, device=device)
    w = torch.randn(33, dtype=dtype, device=device) * 0.1
    check_against_float64(lambda x, w: (fusedops.rms_norm(x, w, 1e-6, offset=1.0),),
                          lambda x, w: (rms_ref(x, w, 1e-6, 1.0),), (x, w), TOL[dtype])
    check_against_float64(lambda x, r, w: fusedops.add_rms_norm(x, r, w, offset=1.0),
                          lambda x, r, w: (rms_ref(x + r, w, 1e-6, 1.0), x + r), (x, torch.randn_like(x), w),
                          TOL[dtype])
    # Zeros with offset 1 scale by one: the nn module's initial state for offset=1.0.
    torch.testing.assert_close(fusedops.rms_norm(x, torch.zeros_like(w), offset=1.0), fusedops.rms_norm(x))


@pytest.mark.parametrize("x_dtype", [torch.float16, torch.bfloat16])
def test_float32_params_on_half_x(device, x_dtype):
    """A float32 weight (and bias) on a half-type x: a float32 output rounded
    once (HF's LlamaRMSNorm also returns float32 there), float32 parameter
    gradients, x's gradient in x's dtype."""
    x = torch.randn(6, 65, dtype=x_dtype, device=device)
    w = torch.randn(65, device=device)
    b = torch.randn(65, device=device)
    assert fusedops.rms_norm(x, w).dtype == torch.float32
    assert fusedops.layer_norm(x, None, b).dtype == torch.float32
    out, summed = fusedops.add_layer_norm(x, x, w, b)
    assert (out.dtype, summed.dtype) == (torch.float32, x_dtype)
    # The output is float32 math on x's values: float32's precision against float64.
    xd, wd, bd = x.double(), w.double(), b.double()
    torch.testing.assert_close(fusedops.rms_norm(x, w).double(), rms_ref(xd, wd), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fusedops.layer_norm(x, w, b).double(), ln_ref(xd, wd, bd), rtol=1e-5, atol=1e-5)
    check_against_float64(lambda x, w, b: fusedops.add_layer_norm(x, x, w, b),
                          lambda x, w, b: (ln_ref(x + x, w, b), x + x), (x, w, b), TOL[x_dtype])
    xs, ws = leaves(x, w)
    gx, gw = torch.autograd.grad(fusedops.rms_norm(xs, ws).sum(), (xs, ws))
    assert (gx.dtype, gw.dtype) == (x_dtype, torch.float32)


def test_weight_none_and_bias_only(device):
    x = torch.randn(4, 17, dtype=torch.float64, device=device)
    b = torch.randn(17, dtype=torch.float64, device=device)
    check_against_float64(lambda x: (fusedops.rms_norm(x, offset=1.0),), lambda x: (rms_ref(x),), (x,), 1e-12)
    check_against_float64(lambda x, b: (fusedops.layer_norm(x, None, b),), lambda x, b: (ln_ref(x, None, b),),
                          (x, b), 1e-12)


@pytest.mark.parametrize("x_dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_large_mean(device, x_dtype):
    """Rows of mean 1e4 and spread 1: E[x^2] - E[x]^2 in float32 would lose
    every digit of the variance (1e8 * 6e-8 = 6 against 1)."""
    x = (1e4 + torch.randn(8, 1000, dtype=torch.float64, device=device)).to(x_dtype)
    w = torch.randn(1000, dtype=x_dtype, device=device)
    b = torch.randn(1000, dtype=x_dtype, device=device)
    tol = 2e-3 if x_dtype == torch.float32 else 2e-2
    check_against_float64(lambda x, w, b: (fusedops.layer_norm(x, w, b),), lambda x, w, b: (ln_ref(x, w, b),),
                          (x, w, b), tol)
    _, mean, rstd = torch.ops.fusedops._layer_norm_forward(x, None, None, 1e-5, None)
    expected = x.double()
    torch.testing.assert_close(mean.double(), expected.mean(-1), rtol=1e-7, atol=0)
    torch.testing.assert_close(rstd.double(), torch.rsqrt(expected.var(-1, unbiased=False) + 1e-5), rtol=1e-4, atol=0)


def test_nan_and_inf_propagate(device, dtype):
    """A NaN or inf in a row makes the reference's row NaN or its rstd 0; ours alike."""
    x = torch.randn(4, 40, dtype=dtype, device=device)
    x[1, 3] = float("nan")
    x[2, 5] = float("inf")
    x[3, 0] = -float("inf")
    w = torch.randn(40, dtype=dtype, device=device)
    xd, wd = x.double(), w.double()
    for ours, ref in ((fusedops.rms_norm(x, w), rms_ref(xd, wd)), (fusedops.layer_norm(x, w, w), ln_ref(xd, wd, wd))):
        assert torch.equal(ours.isnan(), ref.isnan())
        assert ref[0].isfinite().all()
        finite = ref.isfinite()
        torch.testing.assert_close(ours.double()[finite], ref[finite], rtol=TOL[dtype], atol=TOL[dtype])


# ---- a narrow out_dtype -----------------------------------------------------------------------

NARROW = [torch.bfloat16, torch.float16]
# Each op on (x, residual, weight, bias) with out_dtype, and its float64 reference (out first).
NARROW_OPS = {
    "rms_norm": (lambda x, r, w, b, **o: (fusedops.rms_norm(x, w, **o),), lambda x, r, w, b: (rms_ref(x, w),)),
    "add_rms_norm": (lambda x, r, w, b, **o: fusedops.add_rms_norm(x, r, w, **o),
                     lambda x, r, w, b: (rms_ref(x + r, w), x + r)),
    "layer_norm": (lambda x, r, w, b, **o: (fusedops.layer_norm(x, w, b, **o),), lambda x, r, w, b: (ln_ref(x, w, b),)),
    "add_layer_norm": (lambda x, r, w, b, **o: fusedops.add_layer_norm(x, r, w, b, **o),
                       lambda x, r, w, b: (ln_ref(x + r, w, b), x + r)),
}


@pytest.mark.parametrize("op", NARROW_OPS)
@pytest.mark.parametrize("out_dtype", NARROW, ids=str)
# scalar, vector, odd, ViT-B's float32 residual stream (768: two warps a row) and streamed rows
@pytest.mark.parametrize("hidden", [7, 64, 257, 768, 8200])
@pytest.mark.parametrize("params", ["weight and bias", "weight", "none"])
@pytest.mark.parametrize("offset", [0, 1])  # a storage offset: misaligned rows
def test_narrow_out_dtype(device, op, out_dtype, hidden, params, offset):
    """A float32 x's out in float16/bfloat16: the default (float32) output
    rounded once, those very bits, and float64's within out_dtype's rounding;
    summed stays float32. The backward takes out's gradient in out_dtype: x's,
    residual's and the parameters' gradients float32, as float64 autograd's
    for the same gradient values."""
    ours, ref = NARROW_OPS[op]
    rows = 3 if hidden > 1000 else 37
    x, r = (torch.randn(rows * hidden + offset, device=device)[offset:].view(rows, hidden) for _ in range(2))
    r = r if op.startswith("add_") else None
    w = torch.randn(hidden, device=device) if params != "none" else None
    b = torch.randn(hidden, device=device) if params == "weight and bias" and "layer" in op else None
    xs, rs, ws, bs = leaves(x, r, w, b)
    outs = ours(xs, rs, ws, bs, out_dtype=out_dtype)
    default = ours(x, r, w, b)
    assert [o.dtype for o in outs] == [out_dtype, *[torch.float32] * (len(outs) - 1)]
    assert torch.equal(outs[0], default[0].to(out_dtype))
    expected = ref(*(None if t is None else t.double() for t in (x, r, w, b)))
    eps = torch.finfo(out_dtype).eps  # one rounding of ours and of float64's may differ by an ulp
    torch.testing.assert_close(outs[0].double(), expected[0].to(out_dtype).double(), rtol=eps, atol=eps)
    grads_out = [torch.randn_like(o) for o in outs]
    wanted = [t for t in (xs, rs, ws, bs) if t is not None]
    have = torch.autograd.grad(outs, wanted, grads_out)
    wide = leaves(x, r, w, b, dtype=torch.float64)
    want = torch.autograd.grad(ref(*wide), [t for t in wide if t is not None], [g.double() for g in grads_out])
    tol = TOL[torch.float32] * (4 if hidden > 1000 else 1)
    for got, exact in zip(have, want, strict=True):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), exact, rtol=tol, atol=tol * max(1.0, exact.abs().max().item()))


def test_narrow_out_dtype_backward_op(device):
    """The backward op takes a float32 x's gradient in float16/bfloat16 (the
    parameters' gradients float32), as it would that gradient in float32."""
    x, w = torch.randn(9, 40, device=device), torch.randn(40, device=device)
    g = torch.randn(9, 40, device=device, dtype=torch.bfloat16)
    _, mean, rstd = torch.ops.fusedops._layer_norm_forward(x, w, w, 1e-5, torch.bfloat16)
    narrow = torch.ops.fusedops._layer_norm_backward(g, x, w, mean, rstd, None, [True, True, True])
    wide = torch.ops.fusedops._layer_norm_backward(g.float(), x, w, mean, rstd, None, [True, True, True])
    for a, b in zip(narrow, wide, strict=True):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match=r"fusedops.layer_norm: grad must have the output's dtype \(float32, or the "
                                           r"float16 or bfloat16 out_dtype\), got float64"):
        torch.ops.fusedops._layer_norm_backward(g.double(), x, w, mean, rstd, None, [True, True, True])


@pytest.mark.parametrize("op", ["rms_norm", "add_rms_norm", "layer_norm", "add_layer_norm"])
def test_out_dtype_must_be_a_dtype(op):
    x = torch.randn(3, 8)
    args = (x, x) if op.startswith("add_") else (x,)
    with pytest.raises(TypeError, match=f"fusedops.{op}: out_dtype must be a torch.dtype or None, got str"):
        getattr(fusedops, op)(*args, out_dtype="bfloat16")


# ---- the backward ----------------------------------------------------------------------------


@pytest.mark.parametrize("hidden", [33, 8200])
def test_parameter_gradients_same_bits(device, hidden):
    x = torch.randn(300, hidden, device=device, dtype=torch.bfloat16)
    w = torch.randn(hidden, device=device, dtype=torch.bfloat16)
    g = torch.randn_like(x)
    _, mean, rstd = torch.ops.fusedops._layer_norm_forward(x, w, w, 1e-5, None)
    first = torch.ops.fusedops._layer_norm_backward(g, x, w, mean, rstd, None, [True, True, True])
    for _ in range(3):
        again = torch.ops.fusedops._layer_norm_backward(g, x, w, mean, rstd, None, [True, True, True])
        for a, b in zip(first, again, strict=True):
            assert torch.equal(a, b)


def test_saves_x_and_row_statistics_only(device):
    """What autograd keeps: x (summed for the add_ ops), the weight and one
    float32 statistic per row (layer_norm: two), nothing else."""
    x = torch.randn(16, 64, device=device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(64, device=device, dtype=torch.bfloat16, requires_grad=True)
    calls = {(16, 64, 1024): lambda: fusedops.rms_norm(x, w), (16, 16, 64, 1024): lambda: fusedops.add_layer_norm(x, x, w, w)}
    for expected, call in calls.items():
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(saved.append, lambda t: t):
            call()
        assert tuple(sorted(t.numel() for t in saved)) == expected, [t.shape for t in saved]
        assert all(t.dtype == torch.float32 for t in saved if t.numel() == 16)


def test_gradient_through_summed_only(device):
    x = torch.randn(5, 24, device=device, dtype=torch.float64, requires_grad=True)
    r = torch.randn(5, 24, device=device, dtype=torch.float64, requires_grad=True)
    w = torch.randn(24, device=device, dtype=torch.float64, requires_grad=True)
    _, summed = fusedops.add_rms_norm(x, r, w)
    gx, gr = torch.autograd.grad(summed.sum(), (x, r))
    assert torch.equal(gx, torch.ones_like(x)) and torch.equal(gr, torch.ones_like(r))


def test_double_backward_raises(device):
    x = torch.randn(3, 8, device=device, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, device=device, dtype=torch.float64, requires_grad=True)
    for op in ("rms_norm", "layer_norm"):
        out = getattr(fusedops, op)(x, w)
        (gx,) = torch.autograd.grad(out.pow(2).sum(), (x,), create_graph=True)
        with pytest.raises(RuntimeError, match=f"fusedops.{op}: double backward is not supported"):
            gx.sum().backward()


# ---- bad calls -------------------------------------------------------------------------------

BAD = [
    (lambda x, w: fusedops.rms_norm(x, w[1:]), r"fusedops.rms_norm: weight must be 1-D of x's last size \(8\)"),
    (lambda x, w: fusedops.rms_norm(x, w.half()), r"fusedops.rms_norm: weight must have the same dtype as x \(float32\), "
                                                  "got float16"),
    (lambda x, w: fusedops.rms_norm(x.bfloat16(), w.half()),
     r"fusedops.rms_norm: weight must have the same dtype as x \(bfloat16\) or float32, got float16"),
    (lambda x, w: fusedops.rms_norm(x[0, 0], None), "fusedops.rms_norm: x must have at least 1 dimension"),
    (lambda x, w: fusedops.rms_norm(x.int(), None), "fusedops.rms_norm: x must have a floating dtype"),
    (lambda x, w: fusedops.add_rms_norm(x, x[:1], w), r"fusedops.add_rms_norm: residual of shape \[1, 8\] must "
                                                      r"have x's shape \[3, 8\]"),
    (lambda x, w: fusedops.add_rms_norm(x, x.double(), w), "fusedops.add_rms_norm: residual must have the same "
                                                           r"dtype as x \(float32\), got float64"),
    (lambda x, w: fusedops.layer_norm(x, w, w.double()), r"fusedops.layer_norm: bias must have the same dtype as x"),
    (lambda x, w: fusedops.layer_norm(x.half(), w, w.half()),
     r"fusedops.layer_norm: bias must have the same dtype as weight \(float32\), got float16"),
    (lambda x, w: fusedops.add_layer_norm(x, x, w, w[None]), r"fusedops.add_layer_norm: bias must be 1-D"),
    (lambda x, w: fusedops.layer_norm(x, w, out_dtype=torch.float64),
     r"fusedops.layer_norm: out_dtype must be float32 \(the default\), float16 or bfloat16 for a float32 x, got float64"),
    (lambda x, w: fusedops.add_rms_norm(x.bfloat16(), x.bfloat16(), w, out_dtype=torch.float16),
     r"fusedops.add_rms_norm: out_dtype must be float32 \(the default\) for a bfloat16 x, got float16"),
    (lambda x, w: fusedops.rms_norm(x.bfloat16(), None, out_dtype=torch.float16),
     r"fusedops.rms_norm: out_dtype must be bfloat16 \(the default\) for a bfloat16 x, got float16"),
    (lambda x, w: fusedops.add_layer_norm(x.double(), x.double(), out_dtype=torch.bfloat16),
     r"fusedops.add_layer_norm: out_dtype must be float64 \(the default\) for a float64 x, got bfloat16"),
]


@pytest.mark.parametrize("call, message", BAD)
@pytest.mark.parametrize("meta", [False, True], ids=["eager", "meta"])
def test_bad_calls(call, message, meta):
    """The compiled checks and the shape functions word each error alike."""
    device = "meta" if meta else "cpu"
    x = torch.randn(3, 8, device=device)
    w = torch.randn(8, device=device)
    with pytest.raises(RuntimeError, match=message):
        call(x, w)


# ---- nn modules --------------------------------------------------------------------------------


def test_rms_norm_module_state_dicts():
    ours = fusedops.nn.RMSNorm(48, eps=1e-5)
    theirs = torch.nn.RMSNorm(48, eps=1e-5)
    assert ours.state_dict().keys() == theirs.state_dict().keys() == {"weight"}
    torch.testing.assert_close(ours.weight, theirs.weight)  # ones
    with torch.no_grad():
        theirs.weight.normal_()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(2, 5, 48)
    torch.testing.assert_close(ours(x), theirs(x))
    theirs.load_state_dict(ours.state_dict())
    assert ours.variance_epsilon == 1e-5  # HF's LlamaRMSNorm's name for eps
    gemma = fusedops.nn.RMSNorm(48, offset=1.0)
    assert torch.equal(gemma.weight, torch.zeros(48))  # Gemma's initial weight
    torch.testing.assert_close(gemma(x), F.rms_norm(x, (48,), eps=1e-6))
    assert "weight" not in fusedops.nn.RMSNorm(48, elementwise_affine=False).state_dict()


def test_rms_norm_from_module_shares_weight():
    theirs = torch.nn.RMSNorm(16, eps=None)
    ours = fusedops.nn.RMSNorm.from_rms_norm(theirs)
    assert ours.weight is theirs.weight
    x = torch.randn(3, 16)
    torch.testing.assert_close(ours(x), theirs(x))  # eps None: finfo(x.dtype).eps, as torch's


def test_layer_norm_module():
    theirs = torch.nn.LayerNorm(40)
    with torch.no_grad():
        theirs.weight.normal_()
        theirs.bias.normal_()
    ours = fusedops.nn.LayerNorm(40)
    assert isinstance(ours, torch.nn.LayerNorm)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 7, 40, requires_grad=True)
    torch.testing.assert_close(ours(x), theirs(x))
    shared = fusedops.nn.LayerNorm.from_layer_norm(theirs)
    assert shared.weight is theirs.weight and shared.bias is theirs.bias
    torch.testing.assert_close(shared(x), theirs(x))
    assert fusedops.nn.LayerNorm(40, bias=False).bias is None
    with pytest.raises(ValueError, match="fusedops.nn.LayerNorm: normalizes over the last dimension only"):
        fusedops.nn.LayerNorm((4, 40))


@pytest.mark.parametrize("module", ["LayerNorm", "RMSNorm"])
def test_autocast_output(device, module):
    """autocast_output=True: under autocast a float32 x's output comes in
    autocast's dtype, the module's float32 output rounded once (what autocast's
    matmuls would cast it to), and its gradients as for that float32 output;
    without autocast, without the option or for another x dtype, as before.
    The state dict does not change."""
    plain = getattr(fusedops.nn, module)(48)
    with torch.no_grad():
        plain.weight.normal_()
    ours = getattr(fusedops.nn, module)(48, autocast_output=True)
    ours.load_state_dict(plain.state_dict())
    plain, ours = plain.to(device), ours.to(device)
    assert ours.state_dict().keys() == plain.state_dict().keys()
    assert "autocast_output=True" in repr(ours)
    x = torch.randn(3, 5, 48, device=device, requires_grad=True)
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast(device, dtype=dtype):
            out, expected = ours(x), plain(x)
            assert (out.dtype, expected.dtype) == (dtype, torch.float32)
            assert torch.equal(out, expected.to(dtype))
            assert ours(x.detach().to(dtype)).dtype == plain(x.detach().to(dtype)).dtype == torch.float32
        g = torch.randn_like(out)
        have = torch.autograd.grad(out, (x, ours.weight), g)
        want = torch.autograd.grad(expected, (x, plain.weight), g.float())
        for a, b in zip(have, want, strict=True):
            assert a.dtype == torch.float32
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert ours(x).dtype == torch.float32


def test_autocast_output_from_modules():
    theirs = torch.nn.LayerNorm(16)
    assert fusedops.nn.LayerNorm.from_layer_norm(theirs, autocast_output=True).autocast_output
    assert not fusedops.nn.LayerNorm.from_layer_norm(theirs).autocast_output
    rms = fusedops.nn.RMSNorm.from_rms_norm(torch.nn.RMSNorm(16), autocast_output=True)
    compiled = torch.compile(rms, fullgraph=True, backend="eager")  # the autocast check traces: no graph break
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert rms(torch.randn(2, 16)).dtype == torch.bfloat16
        assert compiled(torch.randn(2, 16)).dtype == torch.bfloat16


# ---- more than 2^31 elements ---------------------------------------------------------------------


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_properties(0).total_memory < 40 << 30,
                    reason="needs a CUDA GPU with 40 GiB")
def test_more_than_2_31_elements():
    rows, hidden = (1 << 31) // 4096 + 3, 4096
    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
    out = fusedops.rms_norm(x, w)
    tail = x[-3:].double()
    torch.testing.assert_close(out[-3:].double(), rms_ref(tail, w.double()), rtol=2e-2, atol=2e-2)
