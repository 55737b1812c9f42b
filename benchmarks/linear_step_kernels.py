"""Where a linear+gelu (or, with --activation none, a plain linear) training
step's device time goes: each kernel's time per step (torch.profiler, 20 steps
after 5 warm-up steps), fusedops against eager PyTorch (F.gelu(F.linear)),
bfloat16 and float16 unless --dtypes says otherwise. --summary prints one line a
case instead: fusedops' total and its own kernels (for A/B runs of two builds,
each in its own process: PYTHONPATH=<a pip --target folder>).

    python benchmarks/linear_step_kernels.py [--shapes 4096x4096x4096 8192x8192x8192] [--summary]
        [--activation gelu|none] [--dtypes bfloat16 float16 float32]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import fusedops

STEPS = 20


def impls(gelu: bool) -> dict:
    """fusedops' step and eager PyTorch's: linear+gelu, or plain linear."""
    if not gelu:
        return {"ours": fusedops.linear, "eager": F.linear}
    return {"ours": lambda x, w, b: fusedops.linear(x, w, b, activation="gelu"),
            "eager": lambda x, w, b: F.gelu(F.linear(x, w, b))}


def kernel_times(fn, leaves, grad) -> dict[str, float]:
    """us per step of each kernel of fn's forward + backward."""
    def step():
        return torch.autograd.grad(fn(*leaves), leaves, grad)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            step()
        torch.cuda.synchronize()
    return {e.key: e.device_time_total / STEPS for e in prof.key_averages() if e.device_time_total > 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", metavar="MxNxK", default=["4096x4096x4096", "8192x8192x8192"])
    parser.add_argument("--summary", action="store_true", help="fusedops only, one line a case")
    parser.add_argument("--activation", choices=["gelu", "none"], default="gelu")
    parser.add_argument("--dtypes", nargs="+", choices=["bfloat16", "float16", "float32"],
                        default=["bfloat16", "float16"])
    args = parser.parse_args()
    step_fns = impls(gelu=args.activation == "gelu")
    for shape in args.shapes:
        m, n, k = (int(d) for d in shape.split("x"))
        for dtype in (getattr(torch, name) for name in args.dtypes):
            leaves = (torch.randn(m, k, device="cuda", dtype=dtype).requires_grad_(),
                      (torch.randn(n, k, device="cuda", dtype=dtype) / k**0.5).requires_grad_(),
                      torch.randn(n, device="cuda", dtype=dtype).requires_grad_())
            grad = torch.randn(m, n, device="cuda", dtype=dtype)
            for name in ["ours"] if args.summary else list(step_fns):
                times = kernel_times(step_fns[name], leaves, grad)
                total = sum(times.values())
                if args.summary:
                    own = " ".join(f"{key.split('<')[0].split('::')[-1][:22]}={us:.1f}" for key, us in times.items()
                                   if "fusedops" in key or "Bgrad" in key or "bgradb" in key)
                    print(f"{str(dtype).removeprefix('torch.'):9s} {shape} total {total:7.1f} us | {own}")
                    continue
                print(f"--- {name} {dtype} {shape}")
                for key, us in sorted(times.items(), key=lambda item: -item[1]):
                    print(f"  {us:9.1f} us  {key[:110]}")
                print(f"  {total:9.1f} us  total")


if __name__ == "__main__":
    main()
