"""geglu's samples: swiglu's constructor (samples/swiglu.py) with the erf and
tanh GELU."""

from __future__ import annotations

import torch

import fusedops
from samples.core import Bad, R
from samples.swiglu import gated, shape_bad, split_bad


def geglu(what, gate, up=True, approximate="none", bad=()):
    return gated("geglu", what, gate, up, approximate, bad)


BAD = (
    *shape_bad("geglu"),
    Bad("approximate", 'approximate must be "none" or "tanh", got "erf"', lambda g, u: fusedops.geglu(g, u, "erf")),
    Bad("approximate", 'approximate must be "none" or "tanh", got None', lambda g, u: fusedops.geglu(g, u, None),
        TypeError),
)

# Each op's main variants: every check runs these.
SAMPLES = [
    geglu("two tensors", (R, 257), bad=BAD),
    geglu("two tensors, tanh", (R, 129), approximate="tanh"),
    geglu("split", (R, 2 * 129), up=False, bad=split_bad("geglu")),
    geglu("split, tanh", (2, R, 66), up=False, approximate="tanh", bad=split_bad("geglu", ("tanh",))),
]

# More shapes: the forward, gradient, gradcheck and opcheck tests run these too
# (swiglu's samples cover the shared kernels' other shapes).
MORE_SHAPES = [
    geglu("two tensors, 0-dim, tanh", (), approximate="tanh"),
    geglu("split, d = 1", (R, 2), up=False),
    geglu("split, 4-d, tanh", (2, 3, R, 18), up=False, approximate="tanh"),
    geglu("split, no columns", (R, 0), up=False),
]


# Arguments of every kind for geglu's C entry (test_accelerator.py): each must
# give what OpOverload._op gives, the same values or the same error.
def _entry_cases():
    x, t = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(t, x, "none"), (t, None, "tanh"), (p, None, "none"), (t, x, "erf"), (t, x, None), (t, x, 3),
            (t, x, "gel\ud800u"), (t, x), (t, 1.5, "none"), (t, x.float(), "tanh"), (t, x, "none", 1)]


ENTRY_CASES = _entry_cases()
