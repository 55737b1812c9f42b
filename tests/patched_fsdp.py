"""A few training steps of a tiny HF Llama patched by fusedops, in one process
or sharded by FSDP2 (`fully_shard`) over torchrun's processes (gloo, CPU), for
test_patch.py: the sharded run must follow the single one.

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/patched_fsdp.py

Every rank builds the same model from the same seed and takes its rows of one
global batch; the loss is HF Trainer's with gradient accumulation across
devices: each rank's sum over its tokens divided by `num_items_in_batch` (the
global count of targets) and multiplied by the world size, which FSDP's
gradient average divides again. Rank 0 prints one JSON line per step with the
global loss.
"""

from __future__ import annotations

import gc
import json
import os

import torch
import torch.distributed as dist
import transformers

import fusedops

STEPS, BATCH, SEQ, SEED = 3, 4, 10, 3


def build_model() -> torch.nn.Module:
    torch.manual_seed(SEED)
    config = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(config).train()
    fusedops.patch(model)
    return model


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch: tokens, and labels with ignored positions (-100) that
    differ by row, so the ranks hold different numbers of targets."""
    g = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, 1000, (BATCH, SEQ), generator=g)
    labels = ids.clone()
    for row in range(BATCH):
        labels[row, : 2 * row] = -100
    return ids, labels


def train(rank: int, world: int) -> list[float]:
    model = build_model()
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids, labels = batch()
    items = (labels[:, 1:] != -100).sum()
    rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = model(input_ids=ids[rows], labels=labels[rows], num_items_in_batch=items).loss * world
        loss.backward()
        optimizer.step()
        reported = loss.detach() / world
        if world > 1:
            dist.all_reduce(reported)
        losses.append(reported.item())
    return losses


def main() -> None:
    dist.init_process_group("gloo")
    losses = train(dist.get_rank(), dist.get_world_size())
    if dist.get_rank() == 0:
        print(json.dumps({"losses": losses, "world_size": dist.get_world_size()}), flush=True)
    # As examples/train_ddp.py: free the FSDP state before the process group goes.
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
