"""linear's samples: every activation and pair of bounds, ranks 1 to 4, odd and empty sizes."""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F

import fusedops
from samples.core import GEMM_TOLERANCE, Bad, R, Sample, clamp, near

ACTIVATIONS = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": partial(F.gelu, approximate="tanh")}


def linear(what, x, out_features, bias=True, activation=None, lo=None, hi=None, bad=()):
    k = x[-1]
    epilogue = dict(activation=activation, min=lo, max=hi)

    def ref(x, w, b=None):
        return clamp(ACTIVATIONS[activation](F.linear(x, w, b)), lo, hi)

    def kinks(x, w, b=None):
        # A GEMM in a half type rounds z far more than an elementwise op.
        z = F.linear(x, w, b)
        out = near(ACTIVATIONS[activation](z), (lo, hi), 0.05)
        return out | (z.abs() <= 0.05) if activation == "relu" else out

    def terms(out, x, w, b=None):
        rows = math.prod(x.shape[:-1])
        return (w.shape[0], rows, rows)[:2 + (b is not None)]

    return Sample(
        "linear", what, ("x", "weight", "bias")[:2 + bias], (x, (out_features, k), (out_features,))[:2 + bias],
        call=lambda *t: fusedops.linear(*t, **epilogue), ref=ref,
        torch_args=lambda x, w, b=None: ((x, w, b), epilogue), tolerance=GEMM_TOLERANCE,
        # Weights of scale 1/sqrt(in_features): outputs of unit scale.
        scales=(1.0, 1 / math.sqrt(max(k, 1)), 1.0)[:2 + bias], terms=terms, kinks=kinks, bad=bad,
    )


LINEAR_BAD = (
    Bad("weight", r"x of shape \[\d+, 96\] and weight of shape \[80, 95\] do not match",
        lambda x, w, b: fusedops.linear(x, w[:, 1:], b)),
    Bad("weight", "weight must be 2-D", lambda x, w, b: fusedops.linear(x, w[0], b)),
    Bad("bias", r"bias must be 1-D of size out_features \(80\)", lambda x, w, b: fusedops.linear(x, w, b[1:])),
    Bad("x", "x must have at least 1 dimension", lambda x, w, b: fusedops.linear(x[0, 0], w, b)),
    Bad("activation", "activation must be None", lambda x, w, b: fusedops.linear(x, w, b, activation="tanh")),
)

# Neither bound representable in a half type: no value lands on one by rounding.
LINEAR_BOUNDS = [(None, None), (-0.3, 0.7), (0.1, None), (None, -0.1), (0.5, -0.5)]

SAMPLES = [
    linear("gelu, max, bias", (R, 96), 80, activation="gelu", hi=1.0, bad=LINEAR_BAD),
    linear("relu, no bias", (R, 33), 17, bias=False, activation="relu"),
    linear("plain, bias, 3-d x", (2, R, 65), 7),
]

MORE_SHAPES = [
    # Ranks 1 to 4, odd sizes, N > K, empty batch, empty K, N = 1.
    linear(f"{what}, {'bias' if bias else 'no bias'}", x, n, bias, "gelu_tanh", -0.3, 0.7)
    for what, x, n in [("1-d x", (7,), 3), ("1 x 1", (1, 1), 1), ("N > K", (R, 7), 65), ("large K", (R, 257), 7),
                       ("3-d x", (2, R, 7), 257), ("4-d x", (2, 3, R, 65), 3), ("no rows", (0, 7), 5),
                       ("no in_features", (R, 0), 3), ("one out_feature", (R, 8), 1)]
    for bias in (True, False)
]

# Every epilogue and pair of bounds at one shape.
MORE_OPTIONS = [
    linear(f"{activation}, bounds {lo}, {hi}, {'bias' if bias else 'no bias'}", (R, 40), 24, bias, activation, lo, hi)
    for activation in ACTIVATIONS for lo, hi in LINEAR_BOUNDS for bias in (True, False)
]


# Arguments of every kind for linear's C entry (test_accelerator.py): each must
# give what OpOverload._op gives, the same values or the same error.
def _entry_cases():
    x, w, b = torch.randn(5, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64), torch.randn(3)
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(x, w, b.double(), "gelu", -0.5, 0.5), (x, w, None, None, None, None), (x, w, None, "relu", 0, 2),
            (x, w, None, None, -1, 1), (x, w, None, None, True, None), (x, w, None, None, -(1 << 70), None),
            (x, w, None, None, torch.tensor(0.5), None), (x, w, None, "tanh", None, None),
            (x, w, None, 3, None, None), (x, w, None, "gel\ud800u", None, None), (x, w, [1.0], None, None, None),
            (x, w.float(), None, None, None, None), (p.view(1, 8), w, None, None, None, None), (x, w)]


ENTRY_CASES = _entry_cases()
