"""Where a training step's GPU waits: `fusedops bench --model`'s step of one
variant profiled (torch.profiler, 3 steps after 4 warm-up steps); for each CUDA
kernel, the idle time before it (its start minus the previous kernel's end).
Prints the kernels' count and time a step, the gaps' total, and the gaps over
5 us grouped by (kernel, the kernel before it): where the host fell behind.

    MODEL=llama|vit VARIANT=eager|fusedops|compile|fusedops+compile python benchmarks/step_gaps.py
"""

from __future__ import annotations

import collections
import itertools
import os

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import fusedops
from fusedops.bench import model as bench_model

STEPS = 3


def main() -> None:
    name, variant_name = os.environ.get("MODEL", "vit"), os.environ.get("VARIANT", "fusedops+compile")
    device = torch.device("cuda")
    torch.manual_seed(0)
    work = (bench_model.llama if name == "llama" else bench_model.vit)(dict(bench_model.DEFAULTS[name, "cuda"]),
                                                                        device)
    if variant_name.startswith("fusedops"):
        fusedops.patch(work.model)
    called = torch.compile(work.model) if variant_name.endswith("compile") else work.model
    variant = bench_model.make_variant(work.model, called, work.loss_of, work.autocast, device)
    for _ in range(4):
        variant.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            variant.step()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA), key=lambda e: e.time_range.start)
    busy = sum(k.time_range.end - k.time_range.start for k in kernels) / 1e3
    gaps, large = 0.0, collections.Counter()
    count = collections.Counter()
    for before, kernel in itertools.pairwise(kernels):
        gap = (kernel.time_range.start - before.time_range.end) / 1e3  # ms
        gaps += max(gap, 0.0)
        if gap > 0.005:
            key = (kernel.name[:60], before.name[:40])
            large[key] += gap
            count[key] += 1
    span = (kernels[-1].time_range.end - kernels[0].time_range.start) / 1e3
    print(f"{name} {variant_name}: span {span / STEPS:.2f} ms a step, {len(kernels) / STEPS:.0f} kernels taking "
          f"{busy / STEPS:.2f}, gaps {gaps / STEPS:.2f} ms, of which over 5 us {sum(large.values()) / STEPS:.2f} ms")
    for (kernel, before), ms in large.most_common(25):
        print(f"  {ms / STEPS:7.3f} ms/step  x{count[kernel, before] / STEPS:5.1f}  before {kernel}   (after {before})")


if __name__ == "__main__":
    main()
