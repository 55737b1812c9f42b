"""Where linear's time goes at small M (M <= 64 keeps cuBLASLt + the pass): for
fusedops.linear and eager PyTorch, per call (the bench's method: back-to-back
calls between CUDA events, host included where the host is slower), per call
from replays of a CUDA graph of 16 calls (device time only), and the kernels
each launches with their device times (torch.profiler).

    python benchmarks/linear_small_m.py --json OUT.json
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import fusedops
from fusedops.bench import core
from fusedops.bench.linear import linear_inputs

SHAPES = [(32, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (32, 1024, 4096)]
VARIANTS = {"linear": {}, "linear+gelu": {"activation": "gelu"}}


def eager(gelu: bool, x, w, b):
    out = F.linear(x, w, b)
    return F.gelu(out) if gelu else out


def kernels(fn) -> list[tuple[str, float]]:
    """(kernel name, mean device us) of what one call of fn launches."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    return [(e.key[:90], e.device_time_total / 10) for e in prof.key_averages()
            if e.device_time_total > 0 and e.count >= 10]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    device = torch.device("cuda")
    rows = []
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in SHAPES:
            x, w, b = linear_inputs(device, dtype, m, n, k)
            with torch.no_grad():
                for name, kw in VARIANTS.items():
                    fns = {"fusedops": functools.partial(fusedops.linear, x, w, b, **kw),
                           "eager": functools.partial(eager, bool(kw), x, w, b)}
                    per_call = core.measure_impls(fns, device, 60)
                    graphed = core.measure_impls(core.graph_replays(fns, device, 16), device, 30)
                    for impl, fn in fns.items():
                        row = {"op": name, "dtype": str(dtype).removeprefix("torch."), "shape": [m, n, k],
                               "impl": impl, "per_call_us": per_call[impl] * 1e3,
                               "graph_us": graphed[impl] * 1e3 / 16, "kernels": kernels(fn)}
                        rows.append(row)
                        print(f"{name:12s} {row['dtype']:8s} {m}x{n}x{k:<5d} {impl:8s} per call "
                              f"{row['per_call_us']:6.1f} us  graph {row['graph_us']:6.1f} us  " +
                              "; ".join(f"{kn[:60]} {us:.1f}" for kn, us in row["kernels"]), flush=True)
    args.json.write_text(json.dumps({"command": " ".join(["python", "benchmarks/linear_small_m.py", *sys.argv[1:]]),
                                     "environment": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                                                     "fusedops": fusedops.build_info()}, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
