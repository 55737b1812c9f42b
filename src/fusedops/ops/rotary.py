"""fusedops.rotary: shape functions, autograd, the public function and HF's
formula in PyTorch ops (the bench's eager baseline and `check`'s reference).

Kernels: cpp/rotary/ (schemas, checks, CPU, CUDA glue) and cuda/rotary/.
"""

from __future__ import annotations

import torch

from .. import _autograd, _checks

OP = "rotary"
_rotary = _autograd.direct(torch.ops.fusedops.rotary.default, OP)
_rotary_nograd = _autograd.direct(torch.ops.fusedops._rotary_nograd.default)
_rotary_backward = torch.ops.fusedops._rotary_backward.default
CPP_AUTOGRAD = _autograd.cpp(OP)


def rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *,
           interleaved: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """HF transformers' apply_rotary_pos_emb(q, k, cos, sin): (q_out, k_out) =
    (q * cos + rotate_half(q) * sin, the same for k) in one pass, where
    rotate_half(x) = cat(-x[..., R/2:], x[..., :R/2]) over the first R dims.

    q: [batch, heads_q, seq, head_dim], k: [batch, heads_k, seq, head_dim]
    (heads_q != heads_k for grouped-query attention), any strides (e.g. the
    transposed view of a projection's output; nothing is copied). cos, sin:
    [seq, R], [batch, seq, R] or [batch, 1, seq, R] (batch may be 1), one
    value per rotated element as HF's rotary embeddings make them
    (cat(freqs, freqs)); R even and <= head_dim: only the first R dims rotate
    (partial rotary, as GPT-NeoX and Phi), the rest pass through. cos and sin
    have q's dtype, or float32 with a float16/bfloat16 q (no rounding of the
    tables). Math in float32 for the half types, rounded once; the outputs are
    of q's dtype and laid out as q and k where those are [batch, seq, heads,
    head_dim] tensors seen through transpose(1, 2) (HF's projections: SDPA
    then lays its output out so, and no copy is made before o_proj or for the
    gradients going back into the projections), contiguous otherwise.

    interleaved=True: GPT-J's (and RoFormer's) pairs (x[2i], x[2i + 1]), with
    rotate_every_two in place of rotate_half; cos and sin then hold each
    pair's value twice, at 2i and 2i + 1 (GPT-J's repeat_interleave(freqs, 2)).

    Gradients flow to q and k (the transposed rotation, a rotation by -sin for
    HF's tables), to any order (the op is linear in q and k); cos and sin take
    none, and an error says so if they require it.
    """
    try:
        if CPP_AUTOGRAD:
            return _rotary(q, k, cos, sin, interleaved)
        if _checks.needs_autograd(OP, q, k, cos, sin):
            return _Rotary.apply(q, k, cos, sin, interleaved)
        return _rotary_nograd(q, k, cos, sin, interleaved)
    except RuntimeError as error:
        _autograd.raise_out_of_memory(error)


def reference(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              interleaved: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The same in PyTorch ops, as HF's models write it (Llama's
    apply_rotary_pos_emb; Phi's and GPT-NeoX's split for partial rotary;
    GPT-J's rotate_every_two), in the inputs' dtypes (promoted with float32
    tables)."""
    if cos.dim() == 3:  # HF's unsqueeze_dim=1
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    r = cos.shape[-1]

    def rotate(x):
        x_rot = x[..., :r]
        if interleaved:
            turned = torch.stack((-x_rot[..., 1::2], x_rot[..., ::2]), dim=-1).flatten(-2)
        else:
            turned = torch.cat((-x_rot[..., r // 2:], x_rot[..., :r // 2]), dim=-1)
        out = x_rot * cos + turned * sin
        return out if r == x.shape[-1] else torch.cat((out, x[..., r:].to(out.dtype)), dim=-1)

    return rotate(q), rotate(k)


def check_case(randn):
    """`python -m fusedops check`'s case: (inputs of odd sizes, options, a
    PyTorch reference, the clamp bounds). cos and sin are options: they take
    no gradient. Grouped-query heads, partial rotary, a transposed q."""
    half = randn(5, 7, 3)
    angles = torch.cat((half, half), dim=-1)  # HF's tables: each angle twice
    cos, sin = angles.cos(), angles.sin()
    q = randn(5, 7, 4, 16).transpose(1, 2)
    return ({"q": q, "k": randn(5, 2, 7, 16)}, {"cos": cos, "sin": sin},
            lambda q, k: reference(q, k, cos.to(q.dtype), sin.to(q.dtype)), ())


# ---- shape functions: cpp/rotary/rotary.cpp's checks, message for message ------------------


def _check_heads(name, x):
    _checks.check_floating(OP, name, x)
    if x.dim() != 4:
        _checks.fail(OP, f"{name} must be 4-D [batch, heads, seq, head_dim], got shape {_checks.shape_text(x.shape)}")


def _check_first(name, x):
    _check_heads(name, x)
    if x.shape[3] % 2 != 0:
        _checks.fail(OP, f"{name}'s head_dim (its last dim) must be even, got {x.shape[3]}")


def _check_second(first_name, first, name, x):
    _check_heads(name, x)
    _checks.check_same_dtype_device(OP, first_name, first, name, x)
    if any(first.shape[d] != x.shape[d] for d in (0, 2, 3)):
        _checks.fail(OP, f"{name} of shape {_checks.shape_text(x.shape)} must match {first_name} of shape "
                         f"{_checks.shape_text(first.shape)} in batch, seq and head_dim (dims 0, 2 and 3)")


def _check_table_type(first_name, first, name, t):
    _checks.check_floating(OP, name, t)
    half = first.dtype in (torch.float16, torch.bfloat16)
    if t.dtype != first.dtype and not (half and t.dtype == torch.float32):
        _checks.fail(OP, f"{name} must have the same dtype as {first_name} ({_checks.dtype_name(first.dtype)})"
                         f"{' or float32' if half else ''}, got {_checks.dtype_name(t.dtype)}")
    _checks.check_same_device(OP, first_name, first, name, t)


def _check_tables(first_name, first, cos, sin):
    _check_table_type(first_name, first, "cos", cos)
    _check_table_type(first_name, first, "sin", sin)
    if sin.dtype != cos.dtype:
        _checks.fail(OP, f"sin must have the same dtype as cos ({_checks.dtype_name(cos.dtype)}), "
                         f"got {_checks.dtype_name(sin.dtype)}")
    c, x, n = cos.shape, first.shape, cos.dim()
    shape = _checks.shape_text(c)
    if not (n in (2, 3) or (n == 4 and c[1] == 1)):
        _checks.fail(OP, f"cos must be [seq, R], [batch, seq, R] or [batch, 1, seq, R], got shape {shape}")
    if n != 2 and c[0] != 1 and c[0] != x[0]:
        _checks.fail(OP, f"cos of shape {shape} must have batch size 1 or {first_name}'s ({x[0]})")
    if c[-2] != x[2]:
        _checks.fail(OP, f"cos of shape {shape} must have {first_name}'s seq length ({x[2]}) in dim -2")
    if c[-1] % 2 != 0 or c[-1] > x[3]:
        _checks.fail(OP, f"cos's last dim (R, the rotated dims) must be even and at most {first_name}'s "
                         f"head_dim ({x[3]}), got {c[-1]}")
    if sin.shape != c:
        _checks.fail(OP, f"sin of shape {_checks.shape_text(sin.shape)} must have cos's shape {shape}")


def _empty_like_heads(x):
    """rotary.cpp's empty_like_heads: seq-major (x.transpose(1, 2) contiguous,
    as attention takes a projection's output) where x is, else contiguous."""
    if x.transpose(1, 2).is_contiguous():
        return x.new_empty((x.shape[0], x.shape[2], x.shape[1], x.shape[3])).transpose(1, 2)
    return x.new_empty(x.shape)


def _shape(q, k, cos, sin, interleaved=False):
    _check_first("q", q)
    _check_second("q", q, "k", k)
    _check_tables("q", q, cos, sin)
    return _empty_like_heads(q), _empty_like_heads(k)


torch.library.register_fake("fusedops::rotary")(_shape)
torch.library.register_fake("fusedops::_rotary_nograd")(_shape)


@torch.library.register_fake("fusedops::_rotary_backward")
def _backward_shape(grad_q, grad_k, cos, sin, interleaved):
    if grad_q is None and grad_k is None:
        return cos.new_empty(0), cos.new_empty(0)
    name, first = ("grad_q", grad_q) if grad_q is not None else ("grad_k", grad_k)
    _check_first(name, first)
    if grad_q is not None and grad_k is not None:
        _check_second("grad_q", grad_q, "grad_k", grad_k)
    _check_tables(name, first, cos, sin)
    return tuple(_empty_like_heads(g) if g is not None else first.new_empty(0) for g in (grad_q, grad_k))


# ---- autograd ------------------------------------------------------------------------------


def _setup_context(ctx, inputs, output):
    q, k, cos, sin, interleaved = inputs
    for name, t in (("cos", cos), ("sin", sin)):
        if t.requires_grad:
            _checks.fail(OP, f"{name} must not require grad: rotary gives cos and sin no gradient "
                             f"(pass {name}.detach())")
    ctx.save_for_backward(cos, sin)  # nothing of q's size: the backward rotates the gradients back
    ctx.interleaved = interleaved
    ctx.set_materialize_grads(False)  # an output not used: None, no zeros made


def _backward(ctx, grad_q, grad_k):
    grad_q = grad_q if ctx.needs_input_grad[0] else None
    grad_k = grad_k if ctx.needs_input_grad[1] else None
    if grad_q is None and grad_k is None:
        return None, None, None, None, None
    q, k = _autograd.call_backward_op(_rotary_backward, grad_q, grad_k, *ctx.saved_tensors, ctx.interleaved)
    return q if grad_q is not None else None, k if grad_k is not None else None, None, None, None


def _backward_setup_context(ctx, inputs, output):
    grad_q, grad_k, cos, sin, interleaved = inputs
    ctx.save_for_backward(cos, sin)
    ctx.interleaved = interleaved
    ctx.set_materialize_grads(False)


def _double_backward(ctx, grad_q, grad_k):
    # _rotary_backward is linear in the gradients it rotates back: its own
    # backward is the forward rotation, through the public op (whose autograd
    # serves the next order). One gradient alone goes in as both tensors.
    grad_q = grad_q if ctx.needs_input_grad[0] else None
    grad_k = grad_k if ctx.needs_input_grad[1] else None
    if grad_q is None and grad_k is None:
        return None, None, None, None, None
    q, k = torch.ops.fusedops.rotary(grad_q if grad_q is not None else grad_k,
                                     grad_k if grad_k is not None else grad_q, *ctx.saved_tensors, ctx.interleaved)
    return q if grad_q is not None else None, k if grad_k is not None else None, None, None, None


if not CPP_AUTOGRAD:  # else accel/rotary/ registered it
    torch.library.register_autograd("fusedops::rotary", _backward, setup_context=_setup_context)
torch.library.register_autograd("fusedops::_rotary_backward", _double_backward,
                                setup_context=_backward_setup_context)
_Rotary = _autograd.function("_Rotary", _rotary_nograd, _setup_context, _backward)
