"""Host cost per call of every public op and of the fused ops' composites,
against torch's own, measured in one process (rotated rounds): the numbers
behind the C++ autograd accelerators (src/fusedops/_accelerator.py).

    python benchmarks/host.py [--device cpu|cuda] [--threads 1] [--json out.json]

Tiny inputs (16x16 for linear, 1024 elements otherwise), so the device keeps
up and the time is the host's: no grad, and forward+backward with every input
requiring grad (the bench's host rows, for these cases alone). FUSEDOPS_CPP_AUTOGRAD=0
measures the Python autograd path; PYTHONPATH=<a pip --target folder> an older build.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time

import torch
import torch.nn.functional as F

import fusedops


def per_call_us(fns: dict, device: torch.device, calls: int, rounds: int) -> dict[str, float]:
    """Median microseconds a call per implementation, over `rounds` blocks of
    `calls`, taking turns (rotated each round). Its own timer, not the bench's:
    it also times older builds (A/B), whose fusedops.bench differs."""
    for fn in fns.values():
        for _ in range(50):
            fn()
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            begin = time.perf_counter()
            for _ in range(calls):
                fns[name]()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times[name].append((time.perf_counter() - begin) / calls * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def _train(fn, leaves) -> None:
    torch.autograd.grad(fn(*leaves).sum(), leaves)


def cases(device: torch.device) -> dict[str, tuple]:
    """name: (ours, torch's, inputs)."""
    def randn(*shape):
        return torch.randn(*shape, device=device)

    small = (randn(16, 16), randn(16, 16), randn(16))
    tiny = (randn(1024), torch.tensor(1.1, device=device), randn(1024))
    return {
        "add": (fusedops.add, torch.add, (randn(1024), randn(1024))),
        "linear": (fusedops.linear, F.linear, small),
        "linear+gelu": (lambda x, w, b: fusedops.linear(x, w, b, activation="gelu"),
                        lambda x, w, b: F.gelu(F.linear(x, w, b)), small),
        "scale_bias_clamp": (lambda x, s, b: fusedops.scale_bias_clamp(x, s, b, -0.5, 0.5),
                             lambda x, s, b: torch.clamp(x * s + b, -0.5, 0.5), tiny),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    autograd = fusedops.build_info().get("autograd", "(no accelerators in this version)")
    print(f"fusedops {fusedops.__version__}, torch {torch.__version__}, {device}: {autograd}")
    rows = []
    for name, (ours, theirs, inputs) in cases(device).items():
        leaves = tuple(t.detach().clone().requires_grad_() for t in inputs)
        impls = {"fusedops": ours, "torch": theirs}
        for pass_, fns in (("no grad", {impl: functools.partial(f, *inputs) for impl, f in impls.items()}),
                           ("fwd+bwd", {impl: functools.partial(_train, f, leaves) for impl, f in impls.items()})):
            us = per_call_us(fns, device, args.calls, args.rounds)
            ratio = us["fusedops"] / us["torch"]
            rows.append({"case": name, "pass": pass_, "fusedops_us": us["fusedops"], "torch_us": us["torch"],
                         "fusedops_over_torch": ratio})
            print(f"{name:17} {pass_:8} fusedops {us['fusedops']:8.2f} us   torch {us['torch']:8.2f} us   "
                  f"cost {ratio:.3f}x torch's (torch/ours {1 / ratio:.3f})")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"fusedops": fusedops.__version__, "torch": torch.__version__, "device": str(device),
                       "autograd": autograd, "threads": args.threads, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()
