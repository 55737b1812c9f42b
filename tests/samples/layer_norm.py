"""layer_norm's samples: weight and bias each present or not, a narrow
out_dtype, ranks 1 to 4, odd, one-column and empty sizes (a large mean:
tests/test_norms.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import fusedops
from samples.core import Bad, R, Sample
from samples.rms_norm import narrow_output, norm_terms


def layer_norm(what, x, weight=True, bias=True, eps=1e-5, bad=(), out_dtype=None):
    hidden = x[-1]
    out_dtype_of, options = narrow_output(out_dtype)
    names = ("x", *(("weight",) if weight else ()), *(("bias",) if bias else ()))

    def full(x, *params):
        given = dict(zip(names[1:], params, strict=True))
        return x, given.get("weight"), given.get("bias")

    def ref(*t):
        x, w, b = full(*t)
        return F.layer_norm(x, x.shape[-1:], w, b, eps)

    return Sample(
        "layer_norm", what, names, (x, *((hidden,),) * (len(names) - 1)),
        call=lambda *t: fusedops.layer_norm(*full(*t), eps, out_dtype=out_dtype_of(t[0])), ref=ref,
        torch_args=lambda *t: ((*full(*t), eps, out_dtype_of(t[0])), {}), terms=norm_terms, bad=bad, **options,
    )


LN_BAD = (
    Bad("bias", r"bias must be 1-D of x's last size \(257\), got shape \[256\]",
        lambda x, w, b: fusedops.layer_norm(x, w, b[1:])),
    Bad("weight", r"weight must be 1-D of x's last size \(257\)", lambda x, w, b: fusedops.layer_norm(x, w[:3], b)),
    Bad("x", "x must have at least 1 dimension", lambda x, w, b: fusedops.layer_norm(x[0, 0])),
)

SAMPLES = [
    layer_norm("weight and bias", (R, 257), bad=LN_BAD),
    layer_norm("weight only, 3-d x", (2, R, 64), bias=False),
    layer_norm("bias only", (R, 96), weight=False),
    layer_norm("neither, eps 1e-3", (R, 40), weight=False, bias=False, eps=1e-3),
    layer_norm("weight and bias, bfloat16 out_dtype", (R, 257), out_dtype=torch.bfloat16, bad=(
        Bad("out_dtype", r"out_dtype must be float32 \(the default\), float16 or bfloat16 for a float32 x, "
                         "got float64", lambda x, w, b: fusedops.layer_norm(x, w, b, out_dtype=torch.float64)),
        Bad("out_dtype", r"out_dtype must be bfloat16 \(the default\) for a bfloat16 x, got float16",
            lambda x, w, b: fusedops.layer_norm(x.bfloat16(), out_dtype=torch.float16)),
    )),
]

MORE_SHAPES = [
    layer_norm("bias only, float16 out_dtype, 3-d x", (2, R, 64), weight=False, out_dtype=torch.float16),
    layer_norm("1-d x", (33,)),
    layer_norm("one column", (R, 1)),
    layer_norm("no rows", (0, 16)),
    layer_norm("no columns", (R, 0)),
    layer_norm("4-d x, vector width", (2, 3, R, 8)),
]


def _entry_cases():
    x, w, b = torch.randn(5, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64), torch.randn(8)
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(x, w, b.double(), 1e-5), (x, None, None, 1e-5), (x, p, None, 1), (p.view(1, 8), w, None, 1e-5),
            (x, w, b, 1e-5), (x, w, None, False), (x, w, None, torch.tensor(1e-5)), (x, w, [0.0], 1e-5),
            (x, w), (x, w, None, 1e-5, 1.0), (x, w, None, 1e-5, None), (x.float(), w.float(), None, 1e-5, torch.bfloat16),
            (x, w, None, 1e-5, torch.bfloat16)]


ENTRY_CASES = _entry_cases()
