"""One variant of `fusedops bench --model`'s training step in this process, for
A/Bs of two builds (which cannot share a process): the time of a step and one
step's peak memory above the model and optimizer state, as one JSON line.

    PYTHONPATH=<a pip --target folder> MODEL=llama|vit COMPILE=0|1 LABEL=old python benchmarks/model_step.py

The bench's default CUDA configuration, fusedops.patch applied (and torch.compile
with COMPILE=1); 3 warm-up steps, then 3 timed runs of STEPS (default 10) steps
between CUDA events, their median. Run it per build in rotated rounds
(old new new old).
"""

from __future__ import annotations

import json
import os
import statistics

import torch

import fusedops
from fusedops.bench import model as bench_model


def main() -> None:
    name = os.environ.get("MODEL", "llama")
    device = torch.device("cuda")
    torch.manual_seed(0)
    work = (bench_model.llama if name == "llama" else bench_model.vit)(dict(bench_model.DEFAULTS[name, "cuda"]),
                                                                        device)
    fusedops.patch(work.model)
    compiled = os.environ.get("COMPILE") == "1"
    called = torch.compile(work.model) if compiled else work.model
    variant = bench_model.make_variant(work.model, called, work.loss_of, work.autocast, device)
    for _ in range(3):
        variant.step()
    steps = int(os.environ.get("STEPS", "10"))
    times = []
    for _ in range(3):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        begin.record()
        for _ in range(steps):
            variant.step()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) / steps)
    variant.optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    variant.step()
    torch.cuda.synchronize()
    peak = (torch.cuda.max_memory_allocated() - before) / 2**30
    print(json.dumps({"label": os.environ.get("LABEL"), "model": name, "compile": compiled,
                      "ms": statistics.median(times), "ms_all": times, "peak_gib": peak}), flush=True)


if __name__ == "__main__":
    main()
