"""add's samples: broadcasting both ways, 0-dim and empty inputs."""

from __future__ import annotations

import torch

import fusedops
from samples.core import Bad, R, Sample


def add(what, shape_a, shape_b, bad=()):
    return Sample(
        "add", what, ("a", "b"), (shape_a, shape_b), call=fusedops.add, ref=torch.add,
        torch_args=lambda a, b: ((a, b), {}), bad=bad,
        # Same float32 op-math as torch for the half types; its backward is made of torch ops.
        same_bits_as_ref=True, double_backward=True,
    )


# Beyond the bad calls test_every_op.py derives for every op (an integer input,
# a mismatched dtype, another device): shapes.
ADD_BAD = (
    Bad("b", r"a of shape \[\d+, 257\] and b of shape \[256\] do not broadcast", lambda a, b: fusedops.add(a, b[1:])),
)

# Each op's main variants: every check runs these.
SAMPLES = [
    add("row broadcast", (R, 257), (257,), bad=ADD_BAD),
    add("broadcast both ways", (R, 1, 33), (3, 1)),
    add("0-dim b", (R, 13), ()),
]

# More shapes: the forward, gradient, gradcheck and opcheck tests run these too.
MORE_SHAPES = [
    add("same shape, 1-d", (R,), (R,)),
    add("same shape", (R, 129), (R, 129)),
    add("middle dims broadcast", (2, 3, R, 7), (1, 3, 1, 7)),
    add("0-dim", (), ()),
    add("no rows", (0, 5), (5,)),
    add("no columns", (R, 0), (R, 1)),
]


# Arguments of every kind for add's C entry (test_accelerator.py): each must
# give what OpOverload._op gives, the same values or the same error.
def _entry_cases():
    x, t = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(t, x), (t, p), (p, t[1:, :]), (t, 1.5), (t, None), (t,), (t, x, x), (t, torch.randn(3))]


ENTRY_CASES = _entry_cases()
