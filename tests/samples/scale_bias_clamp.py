"""scale_bias_clamp's samples: tensor and number scales, every bias shape, every pair of bounds."""

from __future__ import annotations

import torch

import fusedops
from samples.core import Bad, R, Sample, clamp, near


def scale_bias_clamp(what, x, scale, bias, lo=None, hi=None, bad=()):
    """scale and bias: a shape (a tensor input) or a number."""
    tensors = [(name, v) for name, v in (("scale", scale), ("bias", bias)) if isinstance(v, tuple)]

    def full(x, *rest):  # the op's (x, scale, bias) from the sample's tensor inputs
        given = dict(zip((name for name, _ in tensors), rest, strict=True))
        return x, given.get("scale", scale), given.get("bias", bias)

    def ref(*inputs):
        x, s, b = full(*inputs)
        return clamp(x * s + b, lo, hi)

    def torch_args(*inputs):
        # As fusedops.scale_bias_clamp passes them: a tensor or its number.
        x, s, b = full(*inputs)
        tensor = [v if isinstance(v, torch.Tensor) else None for v in (s, b)]
        number = [default if isinstance(v, torch.Tensor) else v for v, default in ((s, 1.0), (b, 0.0))]
        return (x, *tensor, *number, lo, hi), {}

    def kinks(*inputs):
        x, s, b = full(*inputs)
        return near(x * s + b, (lo, hi), 1e-5)

    return Sample(
        "scale_bias_clamp", what, ("x", *(name for name, _ in tensors)), (x, *(v for _, v in tensors)),
        call=lambda *inputs: fusedops.scale_bias_clamp(*full(*inputs), lo, hi), ref=ref,
        torch_args=torch_args, kinks=kinks, bad=bad,
    )


SBC_BAD = (
    Bad("bias", r"bias of shape \[\d+\] must broadcast to x of shape \[\d+, 257\] without changing it",
        lambda x, s, b: fusedops.scale_bias_clamp(x, s, b[:x.shape[0]])),
    Bad("bias", r"bias of shape \[2, \d+, 257\] must broadcast",
        lambda x, s, b: fusedops.scale_bias_clamp(x, s, b.expand(2, *x.shape))),
    Bad("bias", r"bias of shape \[\d+, 257\] must broadcast",
        lambda x, s, b: fusedops.scale_bias_clamp(x, s, b.expand(x.shape[0] + 1, -1))),
    Bad("scale", r"scale must be a number or a tensor of one element, got shape \[2\]",
        lambda x, s, b: fusedops.scale_bias_clamp(x, s.expand(2), b)),
    Bad("min", "min must be a number or None", lambda x, s, b: fusedops.scale_bias_clamp(x, s, b, s, None), TypeError),
    Bad("max", "max must be a number or None", lambda x, s, b: fusedops.scale_bias_clamp(x, s, b, None, "1"), TypeError),
)

# (min, max): both, one of each, none, min > max.
SBC_BOUNDS = [(-0.5, 0.7), (None, 0.4), (-0.3, None), (None, None), (0.6, -0.2)]

SAMPLES = [
    scale_bias_clamp("tensor scale, [C] bias, min and max", (R, 257), (), (257,), -0.5, 0.5, bad=SBC_BAD),
    scale_bias_clamp("number scale, same-shape bias, max", (R, 129), -0.6, (R, 129), hi=0.4),
    scale_bias_clamp("tensor scale, column bias, min", (R, 65), (), (R, 1), lo=-0.3),
    scale_bias_clamp("numbers, max", (R, 257), 0.5, 0.25, hi=0.5),
    scale_bias_clamp("tensor scale, 0-dim bias, no bounds", (R, 13), (), ()),
]

MORE_SHAPES = [
    scale_bias_clamp("1-d, same-shape bias", (R,), (), (R,), -0.5, 0.7),
    scale_bias_clamp("[1, C] bias", (R, 129), (), (1, 129), None, 0.4),
    scale_bias_clamp("[3, C] bias of [B, 3, C] x", (R, 3, 33), 1.7, (3, 33), -0.3, None),
    scale_bias_clamp("4-d, [1, 3, 1, 7] bias", (2, 3, R, 7), (), (1, 3, 1, 7), -0.5, 0.7),
    scale_bias_clamp("[1, 1] bias", (R, 13), -0.6, (1, 1)),
    scale_bias_clamp("number bias", (R, 13), (), 0.25, -0.5, 0.7),
    scale_bias_clamp("0-dim x", (), (), (), -0.5, 0.7),
    scale_bias_clamp("0-dim x, numbers", (), 1.7, 0.25, None, 0.4),
    scale_bias_clamp("no rows", (0, 5), (), (5,), -0.5, 0.7),
    scale_bias_clamp("no columns", (R, 0), -0.6, (R, 1), -0.5, 0.7),
]

# Every pair of bounds at one shape: the forward, gradient and gradcheck tests run these too.
MORE_OPTIONS = [
    scale_bias_clamp(f"{kind} scale, bounds {lo}, {hi}", (R, 257), scale, (257,), lo, hi)
    for kind, scale in (("tensor", ()), ("number", -0.6)) for lo, hi in SBC_BOUNDS
]


# Arguments of every kind for scale_bias_clamp's C entry (test_accelerator.py):
# each must give what OpOverload._op gives, the same values or the same error.
def _entry_cases():
    t = torch.randn(5, 8, dtype=torch.float64)
    p = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    return [(t, None, None, 2.0, 0.5, -1.0, 1.0), (t, torch.tensor(2.0, dtype=torch.float64), p, 1.0, 0.0, None, 0.5),
            (t, None, None, 2, 1, -1, None), (t, None, None, True, 0.5, None, None),
            (t, None, None, 2.0, 0.5, "low", None), (t, None, None, 2.0)]


ENTRY_CASES = _entry_cases()
