"""rms_norm's samples: with and without a weight, Gemma's offset, a narrow
out_dtype, ranks 1 to 4, odd and empty sizes; what the norms' samples share
(rms_ref, norm_terms, NORM_TOLERANCE, narrow_output). tests/test_norms.py keeps
the long rows, dtype mixes, NaN and inf."""

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


def narrow_output(out_dtype: torch.dtype | None, outputs: int = 1) -> tuple:
    """A norm sample's out_dtype option: (the out_dtype its call passes for an
    x, the Sample's out_dtype and tolerance fields). out_dtype applies to a
    float32 x only (the other dtypes' samples run as without it); then the
    first output is out_dtype, summed (add_ ops) float32, and the forward's
    tolerance out_dtype's."""
    if out_dtype is None:
        return (lambda x: None), {"tolerance": NORM_TOLERANCE}
    narrow = {torch.float32: out_dtype}
    return (lambda x: narrow.get(x.dtype)), {
        "out_dtype": lambda dtype: (narrow.get(dtype, dtype), *(dtype,) * (outputs - 1)),
        "tolerance": {**NORM_TOLERANCE, torch.float32: TOLERANCE[out_dtype]},
    }


def norm_terms(out, x, *params):
    """x's gradient sums over its row, each parameter's over the rows."""
    return (x.shape[-1], *(math.prod(x.shape[:-1]) for _ in params))


def rms_norm(what, x, weight=True, offset=0.0, eps=1e-6, bad=(), out_dtype=None):
    hidden = x[-1]
    out_dtype_of, options = narrow_output(out_dtype)

    def full(x, w=None):
        return x, w

    return Sample(
        "rms_norm", what, ("x", "weight")[:1 + weight], (x, (hidden,))[:1 + weight],
        call=lambda *t: fusedops.rms_norm(*full(*t), eps, offset=offset, out_dtype=out_dtype_of(t[0])),
        ref=lambda *t: rms_ref(*full(*t), eps, offset),
        torch_args=lambda *t: ((*full(*t), eps, offset, out_dtype_of(t[0])), {}),
        terms=norm_terms, bad=bad, **options,
    )


RMS_BAD = (
    Bad("weight", r"weight must be 1-D of x's last size \(257\), got shape \[256\]",
        lambda x, w: fusedops.rms_norm(x, w[1:])),
    Bad("weight", r"weight must be 1-D of x's last size \(257\), got shape \[1, 257\]",
        lambda x, w: fusedops.rms_norm(x, w[None])),
    Bad("x", "x must have at least 1 dimension", lambda x, w: fusedops.rms_norm(x[0, 0], None)),
)

NARROW_BAD = (
    Bad("out_dtype", r"out_dtype must be float32 \(the default\), float16 or bfloat16 for a float32 x, got float64",
        lambda x, w: fusedops.rms_norm(x, w, out_dtype=torch.float64)),
    Bad("out_dtype", "out_dtype must be a torch.dtype or None, got str",
        lambda x, w: fusedops.rms_norm(x, w, out_dtype="bfloat16"), TypeError),
)

SAMPLES = [
    rms_norm("weight", (R, 257), bad=RMS_BAD),
    rms_norm("no weight, 3-d x", (2, R, 64), weight=False),
    rms_norm("Gemma offset, eps 1e-5", (R, 96), offset=1.0, eps=1e-5),
    rms_norm("weight, bfloat16 out_dtype", (R, 257), out_dtype=torch.bfloat16, bad=NARROW_BAD),
]

# No one-column x: there x's gradient is rstd * g * (1 - xhat^2), xhat^2 within
# rounding of 1, a cancellation no float32 computation survives
# (test_norms.py's row paths take hidden 1 with a tolerance for it).
MORE_SHAPES = [
    rms_norm("no weight, float16 out_dtype, vector width", (2, R, 64), weight=False, out_dtype=torch.float16),
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
            (x, w.float(), 1e-6, 0.0), (x, w), (x, w, 1e-6, 0.0, 1.0), (x, w, 1e-6, 0.0, None),
            (x.float(), w.float(), 1e-6, 0.0, torch.bfloat16), (x, w, 1e-6, 0.0, torch.bfloat16),
            (x, w, 1e-6, 0.0, None, None)]


ENTRY_CASES = _entry_cases()
