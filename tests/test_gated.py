"""swiglu's and geglu's own semantics: the split form against the two-tensor
form bit for bit, the kernels' paths (vector tails, misaligned pointers, rows
of halves), NaN and inf, the tanh GELU, what the backward saves, the backward
ops, bad calls on meta tensors, the nn modules, more than 2^31 elements, the
float32 math's accuracy. The generic checks (test_every_op.py,
test_cuda_robustness.py) run on their samples in samples/swiglu.py and
samples/geglu.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import LAYOUTS, TOLERANCE, make_input, poison_allocator

import fusedops

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)

# (name, the fusedops call, the PyTorch activation)
OPS = [
    ("swiglu", lambda gate, up=None: fusedops.swiglu(gate, up), F.silu),
    ("geglu", lambda gate, up=None: fusedops.geglu(gate, up), F.gelu),
    ("geglu tanh", lambda gate, up=None: fusedops.geglu(gate, up, "tanh"), lambda t: F.gelu(t, approximate="tanh")),
]
each_op = pytest.mark.parametrize("call, act", [op[1:] for op in OPS], ids=[op[0] for op in OPS])


def halves(t):
    d = t.shape[-1] // 2
    return t[..., :d], t[..., d:]


@each_op
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("d", [1, 7, 64, 129])
def test_split_form_is_the_two_tensor_form_bit_for_bit(call, act, device, dtype, layout, d):
    """gate's halves read in place (strided views, rows of 2d) give the bits
    of the same values passed as two dense tensors, forward and backward."""
    x = make_input((37, 2 * d), dtype, device, layout).requires_grad_()
    gate, up = (h.detach().contiguous().requires_grad_() for h in halves(x))
    poison_allocator(device)
    split, two = call(x), call(gate, up)
    assert split.is_contiguous() and torch.equal(split, two)
    grad = torch.randn_like(split)
    (grad_x,) = torch.autograd.grad(split, x, grad)
    grad_gate, grad_up = torch.autograd.grad(two, (gate, up), grad)
    assert grad_x.shape == x.shape and torch.equal(grad_x, torch.cat((grad_gate, grad_up), -1))


@each_op
@pytest.mark.parametrize("numel", [1, 7, 8, 9, 1023, 4097, 65537])
def test_vector_tails_and_misaligned_pointers(call, act, device, dtype, numel):
    """Every offset gives the same bits (vectorized or not), close to float64."""
    results = []
    for offset in (0, 1, 3):
        gate = torch.randn(numel + offset, dtype=dtype, device=device)[offset:]
        up = torch.randn(numel + 1, dtype=dtype, device=device)[1:]
        if results:
            gate.copy_(results[0][0])
            up.copy_(results[0][1])
        poison_allocator(device)
        results.append((gate, up, call(gate, up)))
    gate, up, out = results[0]
    torch.testing.assert_close(out.double(), act(gate.double()) * up.double(), **TOLERANCE[dtype])
    assert all(torch.equal(r[2], out) for r in results[1:])


@each_op
def test_padded_rows_and_many_dims(call, act, device):
    """Rows of a larger buffer (the rows path with its own row strides), and
    more non-mergeable dims than the kernels take (the glue copies)."""
    buffer = torch.randn(37, 300, device=device)
    gate, up = buffer[:, 3:131], buffer[:, 140:268]
    torch.testing.assert_close(call(gate, up), act(gate) * up)
    torch.testing.assert_close(call(buffer[:, 3:259]), act(gate) * buffer[:, 131:259])
    many = torch.randn([4] + [2] * 10, device=device).permute(*reversed(range(11)))
    torch.testing.assert_close(call(many), act(halves(many)[0]) * halves(many)[1])
    torch.testing.assert_close(call(many, many), act(many) * many)


SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.5, -2.5, 100.0, -100.0, 6e4, -6e4]


@each_op
def test_nan_and_inf_propagate_as_in_the_reference(call, act, device, dtype):
    """Every pair of special values: outputs and gradients as PyTorch's autograd
    gives them in the same op-math (float32 for the half types, where
    act'(-100) underflows to 0 and inf * 0 is NaN, as in torch's own kernels),
    rounded to dtype: NaN where NaN, the same infinities."""
    values = torch.tensor(SPECIAL, dtype=torch.float64)
    pairs = [t.reshape(-1).to(dtype).to(device) for t in torch.meshgrid(values, values, indexing="ij")]
    gate, up = (t.clone().requires_grad_() for t in pairs)
    opmath = torch.float64 if dtype == torch.float64 else torch.float32
    ref_gate, ref_up = (t.to(opmath).requires_grad_() for t in pairs)
    # act(+inf) is +inf (torch's CPU float32 GELU alone says NaN; its float64 and CUDA ones +inf).
    out, ref = call(gate, up), torch.where(ref_gate == float("inf"), ref_gate, act(ref_gate)) * ref_up
    torch.testing.assert_close(out, ref.to(dtype), equal_nan=True, **TOLERANCE[dtype])
    grad = torch.ones_like(out)
    for ours, theirs in zip(torch.autograd.grad(out, (gate, up), grad),
                            torch.autograd.grad(ref, (ref_gate, ref_up), grad.to(opmath)), strict=True):
        torch.testing.assert_close(ours, theirs.to(dtype), equal_nan=True, **TOLERANCE[dtype])


@each_op
@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("split", [False, True], ids=["two", "split"])
def test_half_types_are_the_float32_math_rounded_once(call, act, device, half, split):
    """Every one of the 2^16 gate values (the CPU looks the activation up by the
    gate's bits): outputs and gradients are the float32 op's on the same values,
    rounded to the half type, bit for bit (NaN for NaN)."""
    gate = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int16).view(half).to(device).view(256, 256)
    up = torch.randn(256, 256, dtype=half, device=device)
    grad = torch.randn(256, 256, dtype=half, device=device)

    def run(dtype):
        g, u = (t.to(dtype).requires_grad_() for t in (gate, up))
        out = call(torch.cat((g, u), 1)) if split else call(g, u)
        return (out, *torch.autograd.grad(out, (g, u), grad.to(dtype)))

    for ours, theirs in zip(run(half), run(torch.float32), strict=True):
        torch.testing.assert_close(ours, theirs.to(half), rtol=0, atol=0, equal_nan=True)


@each_op
def test_float32_math_is_as_accurate_as_torchs(call, act, device):
    """In float32 (the op-math of the half types too) the activation and its
    gradient are within torch's own float32 error of the float64 reference, or
    two ulp of 1, over every range the math splits (the CPU's exp, erf and tanh
    are polynomials of ours, cuda/common/vector_math.h): error over max(|ref|, 1)."""
    gate = torch.cat([torch.linspace(-30, 30, 200_001), torch.linspace(-120, 120, 8_001)]).to(device)
    up = torch.ones_like(gate)

    def value_and_grad(fn, t):
        t = t.clone().requires_grad_()
        out = fn(t)
        return out.detach(), torch.autograd.grad(out, t, torch.ones_like(out))[0]

    ours = value_and_grad(lambda t: call(t, up), gate)
    torchs = value_and_grad(act, gate)
    exact = value_and_grad(act, gate.double())
    for name, o, t, r in zip(("value", "gradient"), ours, torchs, exact, strict=True):
        our_error, torch_error = (((x.double() - r).abs() / r.abs().clamp_min(1)).max().item() for x in (o, t))
        bound = max(torch_error, 2 * torch.finfo(torch.float32).eps)
        assert our_error <= bound, f"{name}: error {our_error:.3g} > {bound:.3g} (torch's {torch_error:.3g})"


def test_tanh_is_the_tanh_approximation(device):
    """approximate="tanh" follows F.gelu's tanh formula, not the erf one
    (they differ by ~4e-4 at gate = -3), and "none" the erf one."""
    gate = torch.tensor([-3.0, -1.0, 0.5, 2.0], dtype=torch.float64, device=device)
    up = torch.ones_like(gate)
    tanh, erf = F.gelu(gate, approximate="tanh"), F.gelu(gate)
    assert (tanh - erf).abs().max() > 1e-4
    torch.testing.assert_close(fusedops.geglu(gate, up, "tanh"), tanh)
    torch.testing.assert_close(fusedops.geglu(gate, up), erf)


@each_op
@pytest.mark.parametrize("split", [False, True], ids=["two tensors", "split"])
def test_the_backward_saves_gate_and_up_only(call, act, device, split):
    """What autograd keeps: the inputs themselves, never the product."""
    gate = torch.randn(5, 8, device=device, requires_grad=True)
    up = None if split else torch.randn(5, 8, device=device, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        call(gate, up)
    inputs = [gate] if split else [gate, up]
    assert saved and all(any(s.data_ptr() == t.data_ptr() and s.shape == t.shape for t in inputs) for s in saved)


@pytest.mark.parametrize("op, options", [("swiglu", ()), ("geglu", ("none",)), ("geglu", ("tanh",))])
def test_backward_ops(op, options, device):
    """_<op>_backward(grad, gate, up): (grad_gate, grad_up); with up None one
    gradient of gate's shape and a 0-element stand-in."""
    backward = getattr(torch.ops.fusedops, f"_{op}_backward").default
    gate = torch.randn(6, 10, dtype=torch.float64, device=device, requires_grad=True)
    grad = torch.randn(6, 5, dtype=torch.float64, device=device)
    out = getattr(fusedops, op)(gate, None, *options)
    grad_gate, grad_up = backward(grad, gate.detach(), None, *options)
    assert grad_up.numel() == 0 and torch.equal(grad_gate, torch.autograd.grad(out, gate, grad)[0])
    up = torch.randn(6, 10, dtype=torch.float64, device=device)
    grad_gate, grad_up = backward(grad.repeat(1, 2), gate.detach(), up, *options)
    assert grad_gate.shape == grad_up.shape == gate.shape


def _bad_calls():
    """(op, call of meta-or-real tensors made by `t`, message)."""
    swiglu, geglu = fusedops.swiglu, fusedops.geglu
    backward = torch.ops.fusedops._swiglu_backward.default
    return [
        ("swiglu", lambda t: swiglu(t(5, 7)), r"gate's last dimension must be even when up is None"),
        ("geglu", lambda t: geglu(t(5, 7), None, "tanh"), r"gate's last dimension must be even when up is None"),
        ("swiglu", lambda t: swiglu(t()), "gate must have at least 1 dimension when up is None"),
        ("swiglu", lambda t: swiglu(t(5, 8), t(5, 1)), r"up of shape \[5, 1\] must have gate's shape \[5, 8\]"),
        ("geglu", lambda t: geglu(t(8), t(2, 8)), r"up of shape \[2, 8\] must have gate's shape \[8\]"),
        ("geglu", lambda t: geglu(t(4, 8), None, "erf"), 'approximate must be "none" or "tanh", got "erf"'),
        ("swiglu", lambda t: backward(t(5, 3), t(5, 8), None),
         r"grad of shape \[5, 3\] must have the output's shape \[5, 4\]"),
    ]


@pytest.mark.parametrize("i", range(len(_bad_calls())))
def test_bad_calls_fail_alike_on_meta_tensors(i, device):
    """The kernels' checks and the shape functions' (meta tensors, torch.compile) say the same."""
    op, call, message = _bad_calls()[i]
    messages = []
    for where in (device, "meta"):
        with pytest.raises(RuntimeError, match=rf"^fusedops\.{op}: {message}") as info:
            call(lambda *shape, where=where: torch.randn(shape, device=where))
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_nn_modules(device):
    gate, up = torch.randn(3, 5, 8, device=device), torch.randn(3, 5, 8, device=device)
    swiglu, geglu = fusedops.nn.SwiGLU(), fusedops.nn.GeGLU(approximate="tanh")
    for module in (swiglu, geglu, fusedops.nn.GeGLU()):
        assert not list(module.parameters()) and not module.state_dict()
    assert torch.equal(swiglu(gate, up), fusedops.swiglu(gate, up))
    assert torch.equal(swiglu(gate), fusedops.swiglu(gate))
    assert torch.equal(geglu(gate, up), fusedops.geglu(gate, up, "tanh"))
    assert torch.equal(fusedops.nn.GeGLU()(gate), fusedops.geglu(gate))
    assert repr(geglu) == "GeGLU(approximate='tanh')"
    with pytest.raises(ValueError, match='^fusedops.nn.GeGLU: approximate must be "none" or "tanh", got \'erf\''):
        fusedops.nn.GeGLU("erf")
    x = torch.randn(4, 6, device=device, requires_grad=True)
    swiglu(x).sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_cuda_more_than_2_31_elements():
    if torch.cuda.get_device_properties(0).total_memory < 60 * 2**30:
        pytest.skip("needs a GPU with 60 GiB")
    n = 2**30 + 8  # x: 2^32 + 32 elements; split, an output of 2^31 + 16
    x = torch.randn(2, 2 * n, dtype=torch.bfloat16, device="cuda")
    out = fusedops.swiglu(x)  # rows of halves, vectorized
    grad_x, _ = torch.ops.fusedops._swiglu_backward.default(torch.ones_like(out), x, None)
    for part in (slice(0, 1000), slice(n - 1000, n)):
        gate = x[:, part].float().requires_grad_()
        up = x[:, n:][:, part].float().requires_grad_()
        ref = F.silu(gate) * up
        torch.testing.assert_close(out[:, part].float(), ref, **TOLERANCE[torch.bfloat16])
        ref_grads = torch.autograd.grad(ref, (gate, up), torch.ones_like(ref))
        for ours, theirs in zip((grad_x[:, part], grad_x[:, n:][:, part]), ref_grads, strict=True):
            torch.testing.assert_close(ours.float(), theirs, **TOLERANCE[torch.bfloat16])
    del out, grad_x
    gate = x.view(-1)[: 2**31 + 3]
    up = x.view(-1)[2**31 + 3 : 2**32 + 6]
    out = fusedops.swiglu(gate, up)  # dense, misaligned: one element per thread over > 2^31
    torch.testing.assert_close(out[-1000:].float(), (F.silu(gate[-1000:].float()) * up[-1000:].float()),
                               **TOLERANCE[torch.bfloat16])
