"""rotary's samples: grouped-query heads, partial rotary, each table shape,
GPT-J's interleaved pairs, q and k as transposed views of a projection's
output; the reference is HF's formula written out here (transformers is not
needed), run in float64. The tables are random: the op applies each element's
own cos and sin, as HF's formula does, so any values must match it."""

from __future__ import annotations

import torch

import fusedops
from samples.core import Bad, R, Sample


def rotate_half(x):
    """HF transformers' rotate_half (Llama, Mistral, Qwen, GPT-NeoX, Phi)."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    """HF transformers' GPT-J rotate_every_two: (x0, x1) -> (-x1, x0) pair by pair."""
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def hf_rotary(q, k, cos, sin, interleaved=False):
    """apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1) on the first R
    dims (Phi's partial rotary), the rest passed through."""
    if cos.dim() == 3:
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    r = cos.shape[-1]
    turn = rotate_every_two if interleaved else rotate_half

    def embed(x):
        x_rot, x_pass = x[..., :r], x[..., r:]
        return torch.cat((x_rot * cos + turn(x_rot) * sin, x_pass), dim=-1)

    return embed(q), embed(k)


def rotary(what, q, k, table, interleaved=False, transposed=False, bad=()):
    """q, k: [B, H, S, D] shapes (transposed: given as [B, S, H, D], the
    projection's layout, and transposed to [B, H, S, D] views); table: cos's
    and sin's shape."""

    def heads(q, k):
        return (q.transpose(1, 2), k.transpose(1, 2)) if transposed else (q, k)

    def call(q, k, cos, sin):
        return fusedops.rotary(*heads(q, k), cos, sin, interleaved=interleaved)

    def ref(q, k, cos, sin):
        return hf_rotary(*heads(q, k), cos, sin, interleaved)

    def torch_args(q, k, cos, sin):
        return (*heads(q, k), cos, sin, interleaved), {}

    def out_strides(q, k, cos, sin):
        """Seq-major outputs for seq-major heads (as HF's formula gives), else contiguous."""
        def like(x):
            b, h, s, d = x.shape
            seq_major = x.transpose(1, 2).is_contiguous()
            return torch.empty(b, s, h, d).transpose(1, 2).stride() if seq_major else torch.empty(b, h, s, d).stride()
        return tuple(like(x) for x in heads(q, k))

    if transposed:
        q, k = (s[:1] + (s[2], s[1]) + s[3:] for s in (q, k))
    return Sample("rotary", what, ("q", "k", "cos", "sin"), (q, k, table, table), call=call, ref=ref,
                  torch_args=torch_args, differentiable=("q", "k"), bad=bad, double_backward=True,
                  out_strides=out_strides)


def _call(q, k, cos, sin, **kw):
    return fusedops.rotary(q, k, cos, sin, **kw)


# Beyond the bad calls test_every_op.py derives for every op (an integer input,
# a mismatched dtype, another device), for the first sample (q [2, 4, S, 16],
# k [2, 2, S, 16], tables [S, 16]): shapes. (cos or sin requiring grad, which
# the autograd refuses: tests/test_rotary.py.)
ROTARY_BAD = (
    Bad("q", r"q must be 4-D \[batch, heads, seq, head_dim\], got shape \[4, \d+, 16\]",
        lambda q, k, c, s: _call(q[0], k, c, s)),
    Bad("q", r"q's head_dim \(its last dim\) must be even, got 15",
        lambda q, k, c, s: _call(q[..., :15], k[..., :15], c[:, :14], s[:, :14])),
    Bad("k", r"k must be 4-D", lambda q, k, c, s: _call(q, k[0], c, s)),
    Bad("k", r"k of shape \[1, 2, \d+, 16\] must match q of shape \[2, 4, \d+, 16\] in batch, seq and head_dim",
        lambda q, k, c, s: _call(q, k[:1], c, s)),
    Bad("k", r"k of shape \[2, 2, \d+, 14\] must match q", lambda q, k, c, s: _call(q, k[..., :14], c, s)),
    Bad("k", r"k of shape \[2, 2, 1, 16\] must match q", lambda q, k, c, s: _call(q, k[:, :, :1], c, s)),
    Bad("cos", r"cos's last dim \(R, the rotated dims\) must be even and at most q's head_dim \(16\), got 18",
        lambda q, k, c, s: _call(q, k, torch.cat((c, c[:, :2]), -1), torch.cat((s, s[:, :2]), -1))),
    Bad("cos", r"cos's last dim .* got 7", lambda q, k, c, s: _call(q, k, c[:, :7], s[:, :7])),
    Bad("cos", r"cos of shape \[\d+, 16\] must have q's seq length \(\d+\) in dim -2",
        lambda q, k, c, s: _call(q, k, c[1:], s[1:])),
    Bad("cos", r"cos of shape \[3, \d+, 16\] must have batch size 1 or q's \(2\)",
        lambda q, k, c, s: _call(q, k, c.expand(3, -1, -1), s.expand(3, -1, -1))),
    Bad("cos", r"cos must be \[seq, R\], \[batch, seq, R\] or \[batch, 1, seq, R\], got shape \[2, 2, \d+, 16\]",
        lambda q, k, c, s: _call(q, k, c.expand(2, 2, -1, -1), s.expand(2, 2, -1, -1))),
    Bad("cos", r"cos must be \[seq, R\], .* got shape \[16\]", lambda q, k, c, s: _call(q, k, c[0], s[0])),
    Bad("sin", r"sin of shape \[\d+, 8\] must have cos's shape \[\d+, 16\]",
        lambda q, k, c, s: _call(q, k, c, s[:, :8])),
    Bad("sin", r"sin must have the same dtype as q \(float32\), got float16",
        lambda q, k, c, s: _call(q, k, c, s.half())),
)

# Each op's main variants: every check runs these.
SAMPLES = [
    rotary("GQA 4/2 heads, [S, R] tables", (2, 4, R, 16), (2, 2, R, 16), (R, 16), bad=ROTARY_BAD),
    rotary("partial rotary, [B, S, R] tables", (2, 3, R, 24), (2, 1, R, 24), (2, R, 8)),
    rotary("interleaved, [B, 1, S, R] tables", (2, 2, R, 16), (2, 3, R, 16), (2, 1, R, 16), interleaved=True),
    rotary("transposed views of [B, S, H, D]", (2, 4, R, 32), (2, 2, R, 32), (2, R, 32), transposed=True),
]

# More shapes: the forward, gradient, gradcheck and opcheck tests run these too.
MORE_SHAPES = [
    rotary("interleaved partial, transposed views", (1, 2, R, 12), (1, 1, R, 12), (R, 4), interleaved=True,
           transposed=True),
    rotary("[1, S, R] tables for batch 3", (3, 2, R, 16), (3, 2, R, 16), (1, R, 16)),
    rotary("head_dim 128, half rotated", (1, 2, R, 128), (1, 1, R, 128), (R, 64)),
    rotary("head_dim 2", (2, 1, R, 2), (2, 1, R, 2), (R, 2)),
    rotary("nothing rotated (R = 0)", (1, 2, R, 6), (1, 1, R, 6), (R, 0)),
    rotary("one position", (2, 3, 1, 8), (2, 1, 1, 8), (2, 1, 8)),
    rotary("no batch", (0, 2, R, 8), (0, 1, R, 8), (R, 8)),
    rotary("no k heads", (1, 2, R, 8), (1, 0, R, 8), (R, 8)),
    rotary("no head_dim", (1, 2, R, 0), (1, 1, R, 0), (R, 0)),
]

# Arguments of every kind for rotary's C entry (test_accelerator.py): each must
# give what OpOverload._op gives, the same values or the same error.
def _entry_cases():
    q, k = torch.randn(2, 4, 5, 8, dtype=torch.float64), torch.randn(2, 2, 5, 8, dtype=torch.float64)
    c, s = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    p = torch.nn.Parameter(torch.randn(2, 2, 5, 8, dtype=torch.float64))
    return [(q, k, c, s, False), (q, p, c, s, True), (q, k, c, s), (q, k, c, s, 1), (q, k, c, s, None),
            (q, k, c, None, False), (q, k, c, s, False, 1), (q, k[..., :6], c, s, False), (q, k, c, 0.5, False)]


ENTRY_CASES = _entry_cases()
