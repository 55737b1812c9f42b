"""linear_cross_entropy's two ways to its gradients side by side, in one process
(FUSEDOPS_LCE_ALGORITHM is read each call): "chunks" (the gradients in the
forward, three GEMMs, weight's float32 accumulator) and "slabs" (the forward's
log-sum-exp, the backward by vocab slabs, four GEMMs; on sm_90 the slabs'
gradient from our GEMM's epilogue, and "slabs-unfused" with
FUSEDOPS_LCE_SLAB_GEMM=0 beside it), with torch.compile of the
unfused loss and Liger-Kernel's FLCE (where importable) measured beside them.
Forward+backward of the mean loss in bfloat16, the op bench's shapes and more
vocabularies: ms (median of rotated rounds, CUDA events) and the peak GiB above
the inputs and their gradients.

    python benchmarks/lce_algorithms.py [--shapes N,H,V ...] [--out lce.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os

import torch

import fusedops
from fusedops.bench import linear_cross_entropy as lce
from fusedops.bench.core import compiler_allows_many_shapes, measure_impls, train_step

SHAPES = [*lce.SHAPES_GPU, (8192, 4096, 32000), (8192, 4096, 151936), (16384, 4096, 151936)]


def _with_algorithm(name, slab_gemm="1"):
    def loss(x, w, t):
        os.environ["FUSEDOPS_LCE_ALGORITHM"] = name
        os.environ["FUSEDOPS_LCE_SLAB_GEMM"] = slab_gemm  # read by the backward, which runs before the next call
        return fusedops.linear_cross_entropy(x, w, t)
    return loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="*", help="N,H,V (default: the op bench's and more vocabularies)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes] if args.shapes else SHAPES
    device = torch.device("cuda")
    compiler_allows_many_shapes()
    fns = {"chunks": _with_algorithm("chunks"), "slabs": _with_algorithm("slabs"),
           "slabs-unfused": _with_algorithm("slabs", slab_gemm="0"),
           "compile": torch.compile(lce._eager, fullgraph=True, dynamic=False)}
    liger = lce._liger()
    if liger is not None:
        fns["liger"] = liger
    rows = []
    for n, h, v in shapes:
        x, w, t = lce._inputs(device, torch.bfloat16, n, h, v)
        steps = {impl: functools.partial(train_step, functools.partial(fn, x, w, t), None, (x, w))
                 for impl, fn in fns.items()}
        peaks = {impl: lce.peak_gib(step, device) for impl, step in steps.items()}
        times = measure_impls(steps, device, args.repeats)
        for impl in fns:
            rows.append({"shape": [n, h, v], "impl": impl, "ms": times[impl], "peak_GiB": peaks[impl]})
        print(f"{n}x{h}x{v}: " + ", ".join(f"{impl} {times[impl]:.2f} ms / {peaks[impl]:.2f} GiB" for impl in fns)
              + f"; slabs/chunks time {times['slabs'] / times['chunks']:.3f}x, "
              f"compile/slabs {times['compile'] / times['slabs']:.3f}x", flush=True)
        del x, w, t, steps
    os.environ.pop("FUSEDOPS_LCE_ALGORITHM", None)
    os.environ.pop("FUSEDOPS_LCE_SLAB_GEMM", None)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "fusedops": fusedops.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
