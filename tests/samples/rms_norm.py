"""rms_norm's samples: with and without a weight, Gemma's offset, ranks 1 to 4,
odd and empty sizes; what the norms' samples share (rms_ref, norm_terms,
NORM_TOLERANCE). tests/test_norms.py keeps the long rows, dtype mixes, NaN and inf."""

from __future__ import annotations

import math

import torch
from helpers import TOLERANCE

import fusedops
from samples.core import Bad, R, Sample

# Float32 outputs of unit-scale inputs: weight * xhat + bias may cancel terms
# of a few units, rounded in float32 before the cancellation.
NORM_TOLERANCE = {**TOLERANCE, torch.float32: dict(rtol=1e-5, atol=1e-5)}


def rms_ref(x, weight=None, eps=1e-6, offset=0.0):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * (offset + weight)


def norm_terms(out, x, *params):
    """x's gradient sums over its row, each parameter's over the rows."""
    return (x.shape[-1], *(math.prod(x.shape[:-1]) for _ in params))


def rms_norm(what, x, weight=True, offset=0.0, eps=1e-6, bad=()):
    hidden = x[-1]

    def full(x, w=None):
        return x, w

    return Sample(
        "rms_norm", what, ("x", "weight")[:1 + weight], (x, (hidden,))[:1 + weight],
        call=lambda *t: fusedops.rms_norm(*full(*t), eps, offset=offset),
        ref=lambda *t: rms_ref(*full(*t), eps, offset), torch_args=lambda *t: ((*full(*t), eps, offset), {}),
        tolerance=NORM_TOLERANCE, terms=norm_terms, bad=bad,
    )


RMS_BAD = (
    Bad("weight", r"weight must be 1-D of x's last size \(257\), got shape \[256\]",
        lambda x, w: fusedops.rms_norm(x, w[1:])),
    Bad("weight", r"weight must be 1-D of x's last size \(257\), got shape \[1, 257\]",
        lambda x, w: fusedops.rms_norm(x, w[None])),
    Bad("x", "x must have at least 1 dimension", lambda x, w: fusedops.rms_norm(x[0, 0], None)),
)

SAMPLES = [
    rms_norm("weight", (R, 257), bad=RMS_BAD),
    rms_norm("no weight, 3-d x", (2, R, 64), weight=False),
    rms_norm("Gemma offset, eps 1e-5", (R, 96), offset=1.0, eps=1e-5),
]

# No one-column x: there x's gradient is rstd * g * (1 - xhat^2), xhat^2 within
# rounding of 1, a cancellation no float32 computation survives
# (test_norms.py's row paths take hidden 1 with a tolerance for it).
MORE_SHAPES = [
    rms_norm("1-d x", (33,)),
    rms_norm("no rows", (0, 16)),
    rms_norm("no columns", (R, 0)),
    rms_norm("4-d x, vector width", (2, 3, R, 8)),
]


# Arguments of every kind for rms_norm's C entry (test_accelerator.py).
def _entry_cases():
    x, w = torch.randn(5, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(x, w, 1e-6, 0.0), (x, None, 1e-5, 1.0), (x, p, 1, 0), (p.view(1, 8), w, 1e-6, 0.0),
            (x, w, True, 0.0), (x, w, torch.tensor(1e-6), 0.0), (x, w, "1e-6", 0.0), (x, [1.0], 1e-6, 0.0),
            (x, w.float(), 1e-6, 0.0), (x, w), (x, w, 1e-6, 0.0, 1.0)]


ENTRY_CASES = _entry_cases()
