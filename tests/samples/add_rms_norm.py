"""add_rms_norm's samples: (rms_norm(x + residual), x + residual) with and
without a weight, Gemma's offset, a narrow out_dtype, odd and empty sizes."""

from __future__ import annotations

import torch

import fusedops
from samples.core import Bad, R, Sample
from samples.rms_norm import narrow_output, norm_terms, rms_ref


def add_rms_norm(what, x, weight=True, offset=0.0, eps=1e-6, bad=(), out_dtype=None):
    hidden = x[-1]
    out_dtype_of, options = narrow_output(out_dtype, outputs=2)

    def ref(x, r, w=None):
        s = x + r
        return rms_ref(s, w, eps, offset), s

    return Sample(
        "add_rms_norm", what, ("x", "residual", "weight")[:2 + weight], (x, x, (hidden,))[:2 + weight],
        call=lambda x, r, w=None: fusedops.add_rms_norm(x, r, w, eps, offset=offset, out_dtype=out_dtype_of(x)),
        ref=ref, torch_args=lambda x, r, w=None: ((x, r, w, eps, offset, out_dtype_of(x)), {}),
        terms=lambda out, x, r, *w: (x.shape[-1], *norm_terms(out, r, *w)), bad=bad, **options,
    )


ADD_RMS_BAD = (
    Bad("residual", r"residual of shape \[\d+, 256\] must have x's shape \[\d+, 257\]",
        lambda x, r, w: fusedops.add_rms_norm(x, r[:, 1:], w)),
    Bad("weight", r"weight must be 1-D of x's last size \(257\)", lambda x, r, w: fusedops.add_rms_norm(x, r, w[1:])),
)

SAMPLES = [
    add_rms_norm("weight", (R, 257), bad=ADD_RMS_BAD),
    add_rms_norm("no weight, 3-d x", (2, R, 64), weight=False),
    add_rms_norm("Gemma offset", (R, 96), offset=1.0),
    add_rms_norm("weight, bfloat16 out_dtype", (R, 257), out_dtype=torch.bfloat16),
]

MORE_SHAPES = [
    add_rms_norm("no weight, float16 out_dtype", (R, 96), weight=False, out_dtype=torch.float16),
    add_rms_norm("1-d x", (33,)),
    add_rms_norm("no rows", (0, 16)),
]


def _entry_cases():
    x, r, w = (torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64),
               torch.randn(8, dtype=torch.float64))
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(x, r, w, 1e-6, 0.0), (x, r, None, 1e-5, 1.0), (x, r, p, 1, 0), (p.view(1, 8), r[:1], w, 1e-6, 0.0),
            (x, r, w, None, 0.0), (x, 1.0, w, 1e-6, 0.0), (x, r[:, 1:], w, 1e-6, 0.0), (x, r, w),
            (x, r, w, 1e-6, 0.0, None), (x.float(), r.float(), None, 1e-6, 0.0, torch.float16)]


ENTRY_CASES = _entry_cases()
