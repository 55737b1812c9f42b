"""swiglu's samples (and the constructor geglu's share): two tensors, and one
gate split in halves along its last dim (the halves strided views of it),
odd sizes, 0-dim, empty."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fusedops
from samples.core import Bad, R, Sample

ACTIVATIONS = {"swiglu": F.silu, "geglu": F.gelu}


def gated(op, what, gate, up=True, approximate=None, bad=()):
    """fusedops.<op>(gate, up[, approximate]): up of gate's shape, or with
    up=False gate's last dim split in halves."""
    options = () if approximate is None else (approximate,)
    act = ACTIVATIONS[op] if approximate is None else lambda t: F.gelu(t, approximate=approximate)
    fn = getattr(fusedops, op)

    def split(gate):
        d = gate.shape[-1] // 2
        return gate[..., :d], gate[..., d:]

    return Sample(
        op, what, ("gate", "up") if up else ("gate",), (gate, gate) if up else (gate,),
        call=lambda gate, up=None: fn(gate, up, *options),
        ref=lambda gate, up=None: act(gate) * up if up is not None else act(split(gate)[0]) * split(gate)[1],
        torch_args=lambda gate, up=None: ((gate, up, *options), {}), bad=bad,
    )


def swiglu(what, gate, up=True, bad=()):
    return gated("swiglu", what, gate, up, bad=bad)


# Beyond the bad calls test_every_op.py derives for every op (an integer input,
# a mismatched dtype, another device): shapes. A sample's inputs have R rows.
def shape_bad(op, options=()):
    """For a two-tensor sample of [R, 257]: no broadcasting of up."""
    fn = getattr(fusedops, op)
    return (
        Bad("up", r"up of shape \[\d+, 256\] must have gate's shape \[\d+, 257\]",
            lambda g, u: fn(g, u[:, 1:], *options)),
        Bad("up", r"up of shape \[257\] must have gate's shape \[\d+, 257\]", lambda g, u: fn(g, u[0], *options)),
    )


def split_bad(op, options=()):
    """For a split sample: an odd last dim, a 0-dim gate."""
    fn = getattr(fusedops, op)
    return (
        Bad("gate", r"gate's last dimension must be even when up is None \(split into gate and up halves\), "
                    r"got gate of shape \[[\d, ]*\d+\]", lambda g: fn(g[..., 1:], None, *options)),
        Bad("gate", "gate must have at least 1 dimension when up is None",
            lambda g: fn(g.flatten()[0], None, *options)),
    )


# Each op's main variants: every check runs these.
SAMPLES = [
    swiglu("two tensors", (R, 257), bad=shape_bad("swiglu")),
    swiglu("split", (R, 2 * 129), up=False, bad=split_bad("swiglu")),
    swiglu("split, 3-d", (2, R, 66), up=False),
]

# More shapes: the forward, gradient, gradcheck and opcheck tests run these too.
MORE_SHAPES = [
    swiglu("two tensors, 1-d", (R,)),
    swiglu("two tensors, 4-d", (2, 3, R, 7)),
    swiglu("two tensors, 0-dim", ()),
    swiglu("two tensors, no rows", (0, 5)),
    swiglu("split, d = 1", (R, 2), up=False),
    swiglu("split, 1-d", (34,), up=False),
    swiglu("split, 4-d", (2, 3, R, 18), up=False),
    swiglu("split, no rows", (0, 10), up=False),
    swiglu("split, no columns", (R, 0), up=False),
]


# Arguments of every kind for swiglu's C entry (test_accelerator.py): each must
# give what OpOverload._op gives, the same values or the same error.
def _entry_cases():
    x, t = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(t, x), (t, None), (p, t[1:, :]), (t, p.view(1, 8)), (p,), (t, 1.5), (t,), (t, x, x), (t, x.float())]


ENTRY_CASES = _entry_cases()
