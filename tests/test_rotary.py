"""What only fusedops.rotary has (the generic checks run its samples,
tests/samples/rotary.py): HF's tables with float32 cos/sin for half q, the
pair conventions against complex rotation (RoFormer), the gradient as a
rotation by -sin, cos and sin refused when they require grad, one output used,
the backward op, NaN and inf, more than 2^31 elements."""

from __future__ import annotations

import pytest
import torch
from conftest import needs_cuda
from helpers import TOLERANCE
from samples.rotary import hf_rotary

import fusedops

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)

HALF = [torch.float16, torch.bfloat16]


def hf_tables(batch, seq, r, device, dtype=torch.float32, interleaved=False, base=10000.0):
    """HF's rotary embedding for random position ids: inv_freq, the angles
    in float32, cos and sin of cat(freqs, freqs) ([B, S, R]), cast to `dtype`
    as HF's LlamaRotaryEmbedding does; GPT-J's repeat_interleave(freqs, 2) when
    interleaved."""
    inv_freq = 1.0 / base ** (torch.arange(0, r, 2, device=device, dtype=torch.float32) / r)
    positions = torch.randint(0, 4096, (batch, seq), device=device).float()
    freqs = positions[..., None] * inv_freq
    emb = freqs.repeat_interleave(2, dim=-1) if interleaved else torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def projected(batch, seq, heads, head_dim, device, dtype):
    """q as attention gets it: proj(x).view(B, S, H, D).transpose(1, 2)."""
    return torch.randn(batch, seq, heads * head_dim, device=device, dtype=dtype).view(
        batch, seq, heads, head_dim).transpose(1, 2)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("table_dtype", ["same", "float32"])
@pytest.mark.parametrize("interleaved", [False, True])
def test_hf_tables_in_the_model_dtype_or_float32(device, dtype, table_dtype, interleaved):
    """A half-type q with HF's tables in q's dtype (as HF passes them) or in
    float32 (not rounded): q's dtype out, float32 math rounded once."""
    cos, sin = hf_tables(2, 33, 64, device, dtype if table_dtype == "same" else torch.float32, interleaved)
    q, k = projected(2, 33, 8, 128, device, dtype), projected(2, 33, 2, 128, device, dtype)
    got = fusedops.rotary(q, k, cos, sin, interleaved=interleaved)
    expected = hf_rotary(q.double(), k.double(), cos.double(), sin.double(), interleaved)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == dtype
        torch.testing.assert_close(g.double(), e, **TOLERANCE[dtype])


def layout(x):
    return "seq-major" if x.transpose(1, 2).is_contiguous() else "contiguous" if x.is_contiguous() else "other"


@pytest.mark.parametrize("q_layout", ["seq-major", "contiguous", "strided"])
def test_outputs_and_gradients_laid_out_as_the_projections(device, q_layout):
    """Seq-major q and k (HF's projections seen through transpose(1, 2)) give
    seq-major outputs, as HF's formula does: SDPA lays its output out as its
    query, so o_proj's input is a view, not a copy, and the gradients flowing
    back are seq-major, so the projections' gradients are views too. Other
    layouts give contiguous outputs. Values against float64 at each layout;
    the fake kernel's strides are the real ones."""
    cos, sin = hf_tables(2, 5, 16, device)
    base = {"seq-major": projected(2, 5, 3, 16, device, torch.float32),
            "contiguous": torch.randn(2, 3, 5, 16, device=device),
            "strided": torch.randn(2, 3, 5, 40, device=device)[..., 4:20]}[q_layout].requires_grad_()
    x = torch.randn(2, 5, 16, device=device, requires_grad=True)  # k: a projection of one head
    k = x.view(2, 5, 1, 16).transpose(1, 2)
    got = fusedops.rotary(base, k, cos, sin)
    assert [layout(t) for t in got] == [q_layout if q_layout != "strided" else "contiguous", "seq-major"]
    expected = hf_rotary(base.double(), k.double(), cos.double(), sin.double())
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g.double(), e, rtol=1e-6, atol=1e-6)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake = torch.ops.fusedops.rotary(mode.from_tensor(base), mode.from_tensor(k), mode.from_tensor(cos),
                                         mode.from_tensor(sin))
    assert [t.stride() for t in fake] == [t.stride() for t in got]
    grads = [torch.randn_like(t) for t in got]  # preserve_format: as laid out as the outputs
    back = torch.ops.fusedops._rotary_backward(*grads, cos, sin, False)
    assert [layout(t) for t in back] == [layout(t) for t in got]
    torch.testing.assert_close(back[0], fusedops.rotary(grads[0], grads[1], cos, -sin)[0], rtol=1e-6, atol=1e-6)


def complex_rotation(x, angles, interleaved):
    """RoFormer's rotation of x's first R dims as complex numbers: pair j (the
    elements (2j, 2j + 1) when interleaved, (j, j + R/2) otherwise) times
    exp(i * angle_j); x float64 [B, H, S, D], angles [S, R/2]."""
    r = 2 * angles.shape[-1]
    rot = x[..., :r]
    pairs = rot.unflatten(-1, (-1, 2)) if interleaved else torch.stack((rot[..., :r // 2], rot[..., r // 2:]), -1)
    turned = torch.view_as_real(torch.view_as_complex(pairs.contiguous()) * torch.polar(torch.ones_like(angles), angles))
    out = turned.flatten(-2) if interleaved else torch.cat((turned[..., 0], turned[..., 1]), -1)
    return torch.cat((out, x[..., r:]), -1)


@pytest.mark.parametrize("interleaved", [False, True])
def test_pairs_rotate_as_complex_numbers(device, interleaved):
    """The documented conventions, checked without HF's formula: rotate_half's
    pairs (j, j + R/2) with tables cat(freqs, freqs); GPT-J's (2j, 2j + 1) with
    repeat_interleave(freqs, 2)."""
    angles = torch.rand(9, 6, device=device, dtype=torch.float64) * 6
    table = angles.repeat_interleave(2, -1) if interleaved else torch.cat((angles, angles), -1)
    q, k = (torch.randn(2, h, 9, 16, device=device, dtype=torch.float64) for h in (3, 1))
    got = fusedops.rotary(q, k, table.cos(), table.sin(), interleaved=interleaved)
    for g, x in zip(got, (q, k), strict=True):
        torch.testing.assert_close(g, complex_rotation(x, angles, interleaved), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("interleaved", [False, True])
def test_gradient_is_the_rotation_by_minus_sin(device, dtype, interleaved):
    cos, sin = hf_tables(2, 17, 32, device, dtype, interleaved)
    q = projected(2, 17, 4, 48, device, dtype).requires_grad_()
    k = torch.randn(2, 2, 17, 48, device=device, dtype=dtype, requires_grad=True)
    grad_q, grad_k = torch.randn_like(q), torch.randn(2, 17, 2, 48, device=device, dtype=dtype).transpose(1, 2)
    got = torch.autograd.grad(fusedops.rotary(q, k, cos, sin, interleaved=interleaved), (q, k), (grad_q, grad_k))
    expected = fusedops.rotary(grad_q, grad_k, cos, -sin, interleaved=interleaved)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, **TOLERANCE[dtype])  # the same math, up to where a kernel fuses a product


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize(("q_heads", "k_heads", "head_dim", "r"), [
    (601, 7, 16, 16),  # more heads than a CUDA block's head lanes: several passes
    (2, 1, 8192, 8192),  # more 16-byte units in a row than a block's threads
    (3, 1, 1030, 1028),  # rows of single pairs (not whole vectors), 515 of them
], ids=["many heads", "wide vector rows", "wide pair rows"])
def test_many_and_wide_heads(device, dtype, q_heads, k_heads, head_dim, r):
    """Forward and gradients against float64 where a position's work exceeds one
    block of the CUDA kernel (the samples' shapes fit one)."""
    cos, sin = hf_tables(2, 3, r, device, dtype)
    q = projected(2, 3, q_heads, head_dim, device, dtype).requires_grad_()
    k = projected(2, 3, k_heads, head_dim, device, dtype).requires_grad_()
    grads = (torch.randn(q.shape, device=device, dtype=dtype), torch.randn(k.shape, device=device, dtype=dtype))
    got = fusedops.rotary(q, k, cos, sin)
    leaves = [t.detach().double().requires_grad_() for t in (q, k)]
    expected = hf_rotary(*leaves, cos.double(), sin.double())
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g.double(), e, **TOLERANCE[dtype])
    got_grads = torch.autograd.grad(got, (q, k), grads)
    expected_grads = torch.autograd.grad(expected, leaves, [g.double() for g in grads])
    for g, e in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(g.double(), e, **TOLERANCE[dtype])


@pytest.mark.parametrize("name", ["cos", "sin"])
def test_tables_requiring_grad_are_refused(device, name):
    q, k = (torch.randn(1, h, 5, 8, device=device, requires_grad=True) for h in (2, 1))
    tables = {"cos": torch.randn(5, 8, device=device), "sin": torch.randn(5, 8, device=device)}
    tables[name].requires_grad_()
    with pytest.raises(RuntimeError, match=rf"^fusedops\.rotary: {name} must not require grad: rotary gives cos "
                                           rf"and sin no gradient \(pass {name}\.detach\(\)\)"):
        fusedops.rotary(q, k, **tables)
    with pytest.raises(RuntimeError, match=rf"^fusedops\.rotary: {name} must not require grad"):
        fusedops.rotary(q.detach(), k.detach(), **tables)  # the table alone asks for a gradient
    with torch.no_grad():  # no gradient asked for: nothing to refuse
        fusedops.rotary(q, k, **tables)


def test_one_output_used(device):
    """Only q_out in the loss: q gets its gradient, k none (the backward skips
    it, no zeros made); likewise the other way."""
    cos, sin = torch.randn(7, 8, device=device, dtype=torch.float64), torch.randn(7, 8, device=device, dtype=torch.float64)
    q, k = (torch.randn(2, h, 7, 8, device=device, dtype=torch.float64, requires_grad=True) for h in (4, 2))
    for used in (0, 1):
        q.grad = k.grad = None
        leaves = [t.detach().requires_grad_() for t in (q, k)]
        fusedops.rotary(q, k, cos, sin)[used].sum().backward()
        hf_rotary(*leaves, cos, sin)[used].sum().backward()
        torch.testing.assert_close((q, k)[used].grad, leaves[used].grad, rtol=1e-12, atol=1e-12)
        assert (q, k)[1 - used].grad is None


def test_backward_op_rotates_what_it_is_given(device):
    cos, sin = torch.randn(7, 8, device=device), torch.randn(7, 8, device=device)
    g = torch.randn(2, 3, 7, 8, device=device)
    backward = torch.ops.fusedops._rotary_backward.default
    only_q, none = backward(g, None, cos, sin, False)
    both = backward(g, g[:, :1], cos, sin, False)
    torch.testing.assert_close(only_q, both[0], **TOLERANCE[torch.float32])
    assert none.numel() == 0 and both[1].shape == (2, 1, 7, 8)
    assert all(t.numel() == 0 for t in backward(None, None, cos, sin, True))
    with pytest.raises(RuntimeError, match=r"^fusedops\.rotary: grad_k of shape \[2, 3, 6, 8\] must match grad_q"):
        backward(g, g[:, :, 1:], cos, sin, False)


def test_nan_and_inf_propagate_as_in_the_reference(device):
    q, k = (torch.randn(1, h, 4, 8, device=device) for h in (2, 1))
    cos, sin = torch.randn(4, 8, device=device), torch.randn(4, 8, device=device)
    q[0, 0, 0, 1], q[0, 1, 2, 6], k[0, 0, 3, 0] = float("inf"), float("nan"), -float("inf")
    cos[1, 2], sin[3, 4] = float("nan"), float("inf")
    sin[0, 5] = 0.0  # inf * 0 in the reference: NaN
    for g, e in zip(fusedops.rotary(q, k, cos, sin), hf_rotary(q, k, cos, sin), strict=True):
        torch.testing.assert_close(g, e, equal_nan=True)


def test_mixed_table_dtypes_are_refused():
    q, k = (torch.randn(1, h, 4, 8, dtype=torch.bfloat16) for h in (2, 1))
    cos, sin = torch.randn(4, 8), torch.randn(4, 8, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match=r"^fusedops\.rotary: sin must have the same dtype as cos \(float32\), "
                                           r"got bfloat16"):
        fusedops.rotary(q, k, cos, sin)
    with pytest.raises(RuntimeError, match=r"^fusedops\.rotary: cos must have the same dtype as q \(bfloat16\) or "
                                           r"float32, got float64"):
        fusedops.rotary(q, k, cos.double(), sin.double())


@needs_cuda
def test_more_than_2_31_elements():
    """q of 2^32 + 2^10 bfloat16 elements (8 GiB): the rows past 2^31 elements are rotated like the first."""
    seq = (1 << 25) + 8
    q = torch.randn(1, 2, seq, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 1, seq, 64, device="cuda", dtype=torch.bfloat16)
    angles = torch.rand(seq, 4, device="cuda") * 6  # partial rotary (R = 8): small float32 tables
    cos, sin = (f(torch.cat((angles, angles), -1)) for f in (torch.cos, torch.sin))
    q_out, k_out = fusedops.rotary(q, k, cos, sin)
    for s in (slice(0, 4), slice(seq - 4, seq)):
        expected = hf_rotary(q[:, :, s].double(), k[:, :, s].double(), cos[s].double(), sin[s].double())
        for g, e in zip((q_out[:, :, s], k_out[:, :, s]), expected, strict=True):
            torch.testing.assert_close(g.double(), e, **TOLERANCE[torch.bfloat16])
