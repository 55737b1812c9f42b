"""Shared test helpers: inputs with odd layouts, references, tolerances."""

from __future__ import annotations

import torch

# Relative tolerances against a float64 reference, by dtype of the computation.
TOLERANCE = {
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
    torch.float32: dict(rtol=1e-5, atol=1e-6),
    torch.float64: dict(rtol=1e-12, atol=1e-12),
}

LAYOUTS = ["contiguous", "offset", "transposed", "strided"]


def make_input(shape, dtype, device, layout="contiguous", requires_grad=False):
    """Random data of `shape` laid out as asked:
    offset: a storage offset of one element (pointers not 16-byte aligned);
    transposed: the last two dims swapped in memory;
    strided: every other element of a larger buffer in the last dim."""
    shape = tuple(shape)
    if layout == "contiguous" or len(shape) == 0:
        t = torch.randn(shape, dtype=dtype, device=device)
    elif layout == "offset":
        n = 1
        for s in shape:
            n *= s
        t = torch.randn(n + 1, dtype=dtype, device=device)[1:].view(shape)
    elif layout == "transposed":
        if len(shape) < 2:
            return make_input(shape, dtype, device, "strided", requires_grad)
        t = torch.randn(shape[:-2] + (shape[-1], shape[-2]), dtype=dtype, device=device).transpose(-1, -2)
    elif layout == "strided":
        t = torch.randn(shape[:-1] + (2 * shape[-1],), dtype=dtype, device=device)[..., ::2]
    else:
        raise ValueError(layout)
    assert t.shape == shape
    return t.requires_grad_(requires_grad)


def poison_allocator(device):
    """Fill the memory the next allocations will likely reuse with NaN, so an
    output element a kernel forgets to write shows up as NaN."""
    junk = torch.full((1 << 22,), float("nan"), device=device)
    del junk


def assert_close(actual, expected, dtype):
    torch.testing.assert_close(actual, expected.to(actual.dtype), **TOLERANCE[dtype], equal_nan=True)
