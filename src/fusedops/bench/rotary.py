"""rotary's benchmark: HF's apply_rotary_pos_emb (the eager composite models
run) and torch.compile of it, on q and k as attention gets them (transposed
views of the projections' outputs), grouped-query heads; memory-bound."""

from __future__ import annotations

import functools
from typing import Any

import torch

import fusedops

from .core import Benchmark, graph_calls, host_rows, liger_op, measure_passes, no_grad_call

# (batch, seq, q heads, k heads, head_dim, rotated dims): Llama-3 8B's attention
# (32/8 heads of 128) at 8k and 32k tokens, a 16k-token batch of 64-dim heads,
# and partial rotary (GPT-NeoX/Phi: a quarter, half of the head).
SHAPES_GPU = [(4, 2048, 32, 8, 128, 128), (8, 4096, 32, 8, 128, 128), (16, 1024, 8, 8, 64, 64),
              (4, 2048, 32, 32, 128, 32), (4, 2048, 32, 8, 128, 64)]
# 2^22 elements of q on the CPU; one small case with --quick.
SHAPES_SMALL = [(2, 1024, 16, 4, 128, 128), (2, 1024, 16, 4, 128, 64)]
SHAPES_QUICK = [(1, 256, 8, 2, 128, 128)]


def _inputs(device, dtype, b, s, hq, hk, d, r):
    """q and k as proj(x).view(B, S, H, D).transpose(1, 2), requiring grad;
    HF's tables for one row of positions ([1, S, R], in the model dtype)."""
    q, k = (torch.randn(b, s, h, d, device=device, dtype=dtype).transpose(1, 2).requires_grad_() for h in (hq, hk))
    angles = torch.rand(1, s, r // 2, device=device) * s
    cos, sin = (f(torch.cat((angles, angles), dim=-1)).to(dtype) for f in (torch.cos, torch.sin))
    return q, k, cos, sin


def _train(fn, leaves, grads):
    """One forward and backward; torch.autograd.grad: no accumulation into .grad."""
    return torch.autograd.grad(fn(), leaves, grads)


def bench_rotary(device: torch.device, numel: None, repeats: int, quick: bool) -> list[dict[str, Any]]:
    """Forward (no_grad) and forward+backward (q and k requiring grad) at each shape.

    bytes, forward: q and k read and written, cos and sin read. forward+backward:
    the forward's plus the backward's: both output gradients read, the input
    gradients written, the tables read again."""
    # Imported here: benchmarks/tree_bench.py imports this module beside older builds without the op.
    from fusedops.ops.rotary import reference

    shapes = SHAPES_QUICK if quick else SHAPES_GPU if device.type == "cuda" else SHAPES_SMALL
    dtypes = (torch.bfloat16,) if device.type == "cuda" else (torch.float32, torch.bfloat16)
    compiled = torch.compile(reference, fullgraph=True, dynamic=False)
    liger = liger_op("liger_rope", device)
    rows = []
    for dtype in dtypes:
        for shape in shapes:
            q, k, cos, sin = _inputs(device, dtype, *shape)
            heads_bytes = (q.numel() + k.numel()) * q.element_size()
            table_bytes = 2 * cos.numel() * cos.element_size()
            fwd_bytes = 2 * heads_bytes + table_bytes
            fns = {"fusedops": functools.partial(fusedops.rotary, q, k, cos, sin),
                   "eager": functools.partial(reference, q, k, cos, sin),
                   "compile": functools.partial(compiled, q, k, cos, sin)}
            if liger is not None:
                fns["liger"] = functools.partial(liger, q, k, cos, sin)
            grads = (torch.randn_like(q, memory_format=torch.contiguous_format), torch.randn_like(k))
            forward = {impl: functools.partial(no_grad_call, fn) for impl, fn in fns.items()}
            train = {impl: functools.partial(_train, fn, (q, k), grads) for impl, fn in fns.items()}
            for base, nbytes, calls in (("fwd", fwd_bytes, forward), ("fwd+bwd", 2 * fwd_bytes, train)):
                for pass_name, times in measure_passes(base, calls, device, repeats, graph_calls(q.numel())):
                    rows += [{"op": "rotary", "pass": pass_name, "impl": impl, "dtype": str(dtype).removeprefix("torch."),
                              "shape": list(shape), "bytes": nbytes, "ms": ms, "GBs": nbytes / ms / 1e6}
                             for impl, ms in times.items()]
    tiny = _inputs(device, torch.float32, 1, 4, 2, 1, 16, 16)
    cos, sin = tiny[2:]
    return rows + host_rows("rotary", [1, 4, 2, 1, 16, 16], tuple(t.detach() for t in tiny[:2]),
                            lambda q, k: fusedops.rotary(q, k, cos, sin), lambda q, k: reference(q, k, cos, sin),
                            device, quick)


BENCHMARK = Benchmark(bench_rotary, sized=False)
