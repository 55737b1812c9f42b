"""linear_cross_entropy's samples: every reduction, label smoothing, softcap, a
bias or none, int32 targets, another ignore_index, ranks 1 to 3, odd and empty
sizes. The targets are made from x's leading shape (not a sample input, which
are floating): every class in turn, every fifth token ignored."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import fusedops
from samples.core import GEMM_TOLERANCE, Bad, R, Sample

IGNORE = -100


def targets(shape, vocab, device, dtype=torch.int64, ignore_index=IGNORE):
    """Targets of `shape`: classes 3, 10, 17, ... modulo vocab, every fifth
    token ignore_index."""
    n = math.prod(shape)
    t = (torch.arange(n, device=device) * 7 + 3) % vocab
    t[::5] = ignore_index
    return t.view(shape).to(dtype)


def reference(x, w, t, b=None, *, ignore_index=IGNORE, reduction="mean", label_smoothing=0.0, softcap=None):
    """F.cross_entropy(F.linear(...)) over the tokens flattened, in x's dtype
    promoted to float32 (float64 stays float64)."""
    z = F.linear(x, w, b).to(torch.promote_types(x.dtype, torch.float32))
    if softcap is not None:
        z = softcap * torch.tanh(z / softcap)
    loss = F.cross_entropy(z.reshape(-1, w.shape[0]), t.reshape(-1).long(), ignore_index=ignore_index,
                           reduction=reduction, label_smoothing=label_smoothing)
    return loss.view(t.shape) if reduction == "none" else loss


def linear_cross_entropy(what, x, vocab, bias=True, target_dtype=torch.int64, bad=(), **options):
    hidden = x[-1]
    ignore_index = options.get("ignore_index", IGNORE)

    def target_of(x):
        return targets(x.shape[:-1], vocab, x.device, target_dtype, ignore_index)

    def terms(out, x, w, b=None):
        rows = math.prod(x.shape[:-1])
        return (vocab, rows, rows)[:2 + (b is not None)]

    return Sample(
        "linear_cross_entropy", what, ("x", "weight", "bias")[:2 + bias], (x, (vocab, hidden), (vocab,))[:2 + bias],
        call=lambda x, w, b=None: fusedops.linear_cross_entropy(x, w, target_of(x), b, **options),
        ref=lambda x, w, b=None: reference(x, w, target_of(x), b, **options),
        torch_args=lambda x, w, b=None: ((x, w, target_of(x), b), options), tolerance=GEMM_TOLERANCE,
        # Weights of scale 1/sqrt(hidden): logits of unit scale.
        scales=(1.0, 1 / math.sqrt(max(hidden, 1)), 1.0)[:2 + bias], terms=terms, bad=bad,
        out_dtype=lambda dtype: torch.promote_types(dtype, torch.float32),
    )


def _call(x, w, b, target=None, **options):
    return fusedops.linear_cross_entropy(x, w, targets(x.shape[:-1], w.shape[0], x.device) if target is None
                                         else target, b, **options)


LCE_BAD = (
    Bad("weight", r"x of shape \[\d+, 33\] and weight of shape \[45, 32\] do not match",
        lambda x, w, b: _call(x, w[:, 1:], b)),
    Bad("weight", "weight must be 2-D", lambda x, w, b: _call(x, w[0], b, targets(x.shape[:-1], 45, x.device))),
    Bad("bias", r"bias must be 1-D of size vocab \(45\)", lambda x, w, b: _call(x, w, b[1:])),
    Bad("x", "x must have at least 1 dimension", lambda x, w, b: _call(x[0, 0], w, b, targets((), 45, x.device))),
    Bad("target", "target must have an integer dtype", lambda x, w, b: _call(
        x, w, b, targets(x.shape[:-1], 45, x.device).float())),
    Bad("target", r"target of shape \[\d+\] must have x's leading shape \[\d+\]", lambda x, w, b: _call(
        x, w, b, targets((x.shape[0] + 1,), 45, x.device))),
    Bad("target", "target must be on the same device as x", lambda x, w, b: _call(
        x, w, b, targets(x.shape[:-1], 45, "cpu" if x.is_meta else "meta"))),
    Bad("reduction", 'reduction must be "mean", "sum" or "none", got "max"',
        lambda x, w, b: _call(x, w, b, reduction="max")),
    Bad("label_smoothing", r"label_smoothing must be in \[0, 1\], got 1.5",
        lambda x, w, b: _call(x, w, b, label_smoothing=1.5)),
    Bad("softcap", "softcap must be a positive number or None, got 0", lambda x, w, b: _call(x, w, b, softcap=0.0)),
)

SAMPLES = [
    linear_cross_entropy("mean, bias", (R, 33), 45, bad=LCE_BAD),
    linear_cross_entropy("sum, smoothing, softcap, no bias, 3-d x", (2, R, 17), 31, bias=False, reduction="sum",
                         label_smoothing=0.1, softcap=2.0),
    linear_cross_entropy("none, int32 target", (R, 24), 19, target_dtype=torch.int32, reduction="none"),
]

MORE_SHAPES = [
    linear_cross_entropy("1-d x", (9,), 7, reduction="none"),
    linear_cross_entropy("one class", (R, 5), 1),
    linear_cross_entropy("large vocab, 3-d x", (3, R, 16), 517, reduction="sum"),
    linear_cross_entropy("no tokens", (0, 7), 5, reduction="sum"),
    linear_cross_entropy("no tokens, none", (0, 7), 5, reduction="none"),
    linear_cross_entropy("no hidden", (R, 0), 6),
]

# Each option alone and together, with a bias and without. A vocab of 32: the CUDA
# kernel takes a row's logits four at a time (29: one at a time).
MORE_OPTIONS = [
    linear_cross_entropy("mean, smoothing, softcap", (R, 20), 32, label_smoothing=0.2, softcap=1.5),
    linear_cross_entropy("mean, softcap, no bias", (R, 20), 32, bias=False, softcap=1.5),
    linear_cross_entropy("sum, smoothing, no bias", (R, 20), 29, bias=False, reduction="sum", label_smoothing=0.2),
    linear_cross_entropy("none, smoothing, softcap", (R, 20), 32, reduction="none", label_smoothing=0.2, softcap=1.5),
    linear_cross_entropy("ignore_index 3, int32", (R, 20), 29, target_dtype=torch.int32, ignore_index=3),
    linear_cross_entropy("all smoothing", (R, 20), 29, label_smoothing=1.0),
]


# Arguments of every kind for the C entry (test_accelerator.py): each must give
# what OpOverload._op gives, the same values or the same error.
def _entry_cases():
    x, w, b = torch.randn(5, 8, dtype=torch.float64), torch.randn(3, 8, dtype=torch.float64), torch.randn(3)
    y = torch.tensor([0, 2, -100, 1, 2])
    return [(x, w, y, b.double(), -100, "mean", 0.1, 2.0), (x, w, y.int(), None, 2, "none", 0, None),
            (x, w, y, None, True, "sum", 0.0, None), (x, w, y, None, 1 << 70, "sum", 0.0, None),
            (x, w, y, None, 2.0, "sum", 0.0, None), (x, w, y, None, -100, None, 0.0, None),
            (x, w, y, None, -100, "max", 0.0, None), (x, w, y, None, -100, "mean", 2, 1),
            (x, w, y, None, -100, "m\ud800", 0.0, None), (x, w, y, b, -100, "mean", 0.0, None),
            (x, w, y.float(), None, -100, "mean", 0.0, None), (x, w, y)]


ENTRY_CASES = _entry_cases()
