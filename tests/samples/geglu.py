"""geglu's samples: swiglu's constructor (samples/swiglu.py) with the erf and
tanh GELU."""

from __future__ import annotations

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

# More shapes: the forward, gradient, gradcheck and opcheck tests run these too.
MORE_SHAPES = [
    *(geglu(f"{what}, {approximate}", shape, up, approximate)
      for approximate in ("none", "tanh")
      for what, shape, up in [("two tensors, 0-dim", (), True), ("two tensors, no rows", (0, 5), True),
                              ("split, d = 1", (R, 2), False), ("split, 4-d", (2, 3, R, 18), False),
                              ("split, no columns", (R, 0), False)]),
]
