"""A model of a Llama training step's memory that needs no GPU: the model of
`fusedops bench --model llama` at its CUDA size (or --layers/--vocab/...),
built under FakeTensorMode (no data, any size on the CPU), its forward and
backward run while a dispatch mode counts the bytes of every live storage by
the op that made it. Prints the live bytes at the forward's end, the peak and
the phase it falls in, and the tensors live at the peak grouped by op, shape
and dtype.

    python benchmarks/step_memory.py [--no-patch] [--layers N ...]
    FUSEDOPS_LCE_ALGORITHM=slabs python benchmarks/step_memory.py

What it cannot see: the buffers an op allocates and frees inside itself
(linear_cross_entropy's chunk buffers; SDPA's workspace), and the CPU's SDPA
stands in for CUDA's (both lay their output out as their query). On the H100
(2026-12-07) it gave the slabs' step 2.992 and then 2.742 GiB where the
allocator's history said 2.992 and 2.743, and eager's 15.183 where the bench
measured 15.18 (benchmarks/results/NOTES.md).
"""

from __future__ import annotations

import argparse
import collections
import weakref

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import fusedops
from fusedops.bench import model as bench_model


class LiveBytes(TorchDispatchMode):
    """Bytes of the storages ops create, from their creation until they are
    freed (a weakref finalizer), and the live set at the highest point."""

    def __init__(self, skip: set[int]):
        super().__init__()
        self.skip = skip  # storages made before (parameters)
        self.live: dict[int, tuple[int, str]] = {}
        self.now = self.peak = 0
        self.phase, self.peak_phase, self.at_peak = "forward", "", {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key = id(storage)
            if key in self.live or key in self.skip:
                continue
            label = f"{self.phase}: {func.__name__} {list(t.shape)} {str(t.dtype).removeprefix('torch.')}"
            self.live[key] = (storage.nbytes(), label)
            self.now += storage.nbytes()
            weakref.finalize(storage, self._free, key)
            if self.now > self.peak:
                self.peak, self.peak_phase, self.at_peak = self.now, self.phase, dict(self.live)
        return out

    def _free(self, key: int) -> None:
        size, _ = self.live.pop(key, (0, ""))
        self.now -= size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-patch", action="store_true", help="the model as transformers makes it")
    for name in ("layers", "hidden", "intermediate", "heads", "kv_heads", "vocab", "batch", "seq"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int)
    parser.add_argument("--top", type=int, default=25, help="groups of tensors listed at the peak")
    args = parser.parse_args()
    config = dict(bench_model.DEFAULTS["llama", "cuda"])
    config.update({k: v for k, v in vars(args).items() if k in config and v is not None})
    with FakeTensorMode():
        # bfloat16 from the start: a fake model cannot be converted in place (.to swaps tensors).
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            work = bench_model.llama(config, torch.device("cpu"), torch.bfloat16)
        finally:
            torch.set_default_dtype(default)
        if not args.no_patch:
            print(fusedops.patch(work.model))
        tracker = LiveBytes({id(p.untyped_storage()) for p in work.model.parameters()})
        with tracker:
            loss = work.loss_of(work.model)
            forward_end = tracker.now
            tracker.phase = "backward"
            loss.backward()
    print(f"{work.description}\nlive at the forward's end {forward_end / 2**30:.3f} GiB; peak {tracker.peak / 2**30:.3f}"
          f" GiB in the {tracker.peak_phase} (parameters excluded, their gradients included)")
    groups: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for size, label in tracker.at_peak.values():
        groups[label][0] += size
        groups[label][1] += 1
    for label, (size, count) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"  {size / 2**20:9.1f} MiB {count:3d}x  {label}")


if __name__ == "__main__":
    main()
