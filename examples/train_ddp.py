"""Train a small MLP built from fusedops.nn modules, in one process or with
torch.distributed: DDP, or FSDP2 (`fully_shard`).

    python examples/train_ddp.py --mode single
    torchrun --standalone --nproc_per_node 2 examples/train_ddp.py --mode ddp
    torchrun --standalone --nproc_per_node 2 examples/train_ddp.py --mode fsdp
    NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node 2 \
        examples/train_ddp.py --mode fsdp --device cuda

The data are a fixed synthetic regression problem drawn from --seed, and the
model starts from the same seed on every rank, so that a run is deterministic
and DDP and FSDP2 follow the single-process run up to float rounding: rank r of
W trains on rows [r*B/W, (r+1)*B/W) of the global batch of B rows, and the
gradients are averaged over the ranks (the mean loss over the global batch).

Rank 0 prints one JSON line per step: {"step", "loss" (over the global batch),
"mode", "world_size"}, and at the end {"params_sum", "params_sumsq", "mode"} of
the trained parameters.

With --device cuda the ranks use NCCL, one GPU per rank (LOCAL_RANK).
NCCL_NVLS_ENABLE=0 keeps NCCL off NVLink SHARP (multicast), which some
machines (GPU partitions, shared hosts) do not allow; this script sets it
unless the environment already does.
"""

from __future__ import annotations

import argparse
import gc
import json
import os

import torch
import torch.distributed as dist

from fusedops.nn import Linear, ScaleBiasClamp


def build_model(features: int, hidden: int, device: torch.device) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        Linear(features, hidden, activation="gelu", device=device),
        ScaleBiasClamp(hidden, min=-2.0, max=2.0, device=device),
        Linear(hidden, hidden, activation="relu", device=device),
        Linear(hidden, 1, device=device),
    )


def make_data(seed: int, batch: int, features: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch: inputs and a smooth nonlinear target with noise."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, features, generator=g)
    w = torch.randn(features, 1, generator=g) / features**0.5
    y = torch.sin(2 * x @ w) + 0.1 * torch.randn(batch, 1, generator=g)
    return x, y


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["single", "ddp", "fsdp"], default="single")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64,
                        help="global batch (rows), divisible by the world size")
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args(argv)

    distributed = args.mode != "single"
    if not distributed and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        parser.error("--mode single runs in one process; launch it without torchrun")
    if distributed and "RANK" not in os.environ:
        parser.error(f"--mode {args.mode} needs torchrun (or RANK, WORLD_SIZE, MASTER_ADDR, ...)")

    if args.device == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if distributed:
        if args.device == "cuda":
            os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
            dist.init_process_group("nccl", device_id=device)
        else:
            dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    if args.batch % world:
        parser.error(f"--batch {args.batch} is not divisible by the world size {world}")

    train(args, device, rank, world)
    if distributed:
        # Free the DDP / FSDP state (and the gloo work it holds) before the
        # process group and the interpreter go: otherwise torch 2.13 and 2.14
        # abort about one exit in ten ("terminate called without an active
        # exception"), with plain torch.nn modules too. train's locals are
        # gone; the collection breaks the module's reference cycles.
        gc.collect()
        dist.destroy_process_group()


def train(args: argparse.Namespace, device: torch.device, rank: int, world: int) -> None:
    """Train and print one JSON line per step (rank 0), then the parameters'
    sum and sum of squares."""
    distributed = args.mode != "single"
    torch.manual_seed(args.seed)
    model = build_model(args.features, args.hidden, device)
    if args.mode == "ddp":
        device_ids = [device] if device.type == "cuda" else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    # FSDP2 shards parameters along dim 0 and refuses 0-dim ones, such as
    # ScaleBiasClamp's learnable scale: those stay whole on every rank, outside
    # FSDP, and their gradients are averaged here, as DDP would.
    scalars = [p for p in model.parameters() if p.dim() == 0] if args.mode == "fsdp" else []
    if args.mode == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        # An explicit mesh of the chosen device: the default one takes CUDA
        # whenever a GPU is visible, even for a --device cpu (gloo) run.
        mesh = init_device_mesh(device.type, (world,))
        for layer in model:
            if isinstance(layer, Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh, ignored_params=set(scalars))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    x, y = make_data(args.seed, args.batch, args.features)
    rows = args.batch // world
    x = x[rank * rows:(rank + 1) * rows].to(device)
    y = y[rank * rows:(rank + 1) * rows].to(device)

    for step in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        for p in scalars:
            dist.all_reduce(p.grad)  # a sum: gloo has no AVG
            p.grad /= world
        optimizer.step()
        reported = loss.detach().clone()
        if distributed:
            dist.all_reduce(reported)
            reported /= world
        if rank == 0:
            print(json.dumps({"step": step, "loss": reported.item(), "mode": args.mode, "world_size": world}),
                  flush=True)

    # The trained parameters, gathered (FSDP2 holds DTensor shards): their sum
    # and sum of squares let runs be compared beyond the loss.
    total = torch.zeros(2, dtype=torch.float64)
    for p in model.parameters():
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        full = full.detach().double().cpu()
        total += torch.stack([full.sum(), full.square().sum()])
    if rank == 0:
        print(json.dumps({"params_sum": total[0].item(), "params_sumsq": total[1].item(), "mode": args.mode}),
              flush=True)


if __name__ == "__main__":
    main()
