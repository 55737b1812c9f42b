"""add_layer_norm's samples: (layer_norm(x + residual), x + residual) with
weight and bias each present or not, a narrow out_dtype, odd and empty sizes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fusedops
from samples.core import Bad, R, Sample
from samples.rms_norm import narrow_output, norm_terms


def add_layer_norm(what, x, weight=True, bias=True, eps=1e-5, bad=(), out_dtype=None):
    hidden = x[-1]
    out_dtype_of, options = narrow_output(out_dtype, outputs=2)
    names = ("x", "residual", *(("weight",) if weight else ()), *(("bias",) if bias else ()))

    def full(x, r, *params):
        given = dict(zip(names[2:], params, strict=True))
        return x, r, given.get("weight"), given.get("bias")

    def ref(*t):
        x, r, w, b = full(*t)
        s = x + r
        return F.layer_norm(s, s.shape[-1:], w, b, eps), s

    return Sample(
        "add_layer_norm", what, names, (x, x, *((hidden,),) * (len(names) - 2)),
        call=lambda *t: fusedops.add_layer_norm(*full(*t), eps, out_dtype=out_dtype_of(t[0])), ref=ref,
        torch_args=lambda *t: ((*full(*t), eps, out_dtype_of(t[0])), {}),
        terms=lambda out, x, r, *params: (x.shape[-1], *norm_terms(out, r, *params)), bad=bad, **options,
    )


ADD_LN_BAD = (
    Bad("residual", r"residual of shape \[\d+, 256\] must have x's shape \[\d+, 257\]",
        lambda x, r, w, b: fusedops.add_layer_norm(x, r[:, 1:], w, b)),
    Bad("bias", r"bias must be 1-D of x's last size \(257\)", lambda x, r, w, b: fusedops.add_layer_norm(x, r, w, b[1:])),
)

SAMPLES = [
    add_layer_norm("weight and bias", (R, 257), bad=ADD_LN_BAD),
    add_layer_norm("no parameters, 3-d x", (2, R, 64), weight=False, bias=False),
    add_layer_norm("bias only", (R, 96), weight=False),
    add_layer_norm("weight and bias, bfloat16 out_dtype", (R, 257), out_dtype=torch.bfloat16),
]

MORE_SHAPES = [
    add_layer_norm("no parameters, float16 out_dtype, vector width", (R, 64), weight=False, bias=False,
                   out_dtype=torch.float16),
    add_layer_norm("1-d x", (33,)),
    add_layer_norm("no rows", (0, 16)),
    add_layer_norm("one column", (R, 1)),
]


def _entry_cases():
    x, r, w = (torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64),
               torch.randn(8, dtype=torch.float64))
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(x, r, w, w, 1e-5), (x, r, None, None, 1e-5), (x, r, p, None, 1), (p.view(1, 8), r[:1], w, None, 1e-5),
            (x, r, w, None, None), (x, 1.0, w, None, 1e-5), (x, r, w.float(), None, 1e-5), (x, r),
            (x, r, w, None, 1e-5, None), (x.float(), r.float(), None, None, 1e-5, torch.bfloat16)]


ENTRY_CASES = _entry_cases()
