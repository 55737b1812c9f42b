"""examples/train_ddp.py: DDP and FSDP2 over 2 processes follow the
single-process run of the same model and data (CPU with gloo; 2 GPUs with NCCL
where present)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_ddp.py"
STEPS = 8

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def train(mode: str, device: str, tmp_path: Path) -> list[dict]:
    command = [str(EXAMPLE), "--mode", mode, "--device", device, "--steps", str(STEPS), "--seed", "3"]
    if mode != "single":
        command = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *command]
    env = dict(os.environ, OMP_NUM_THREADS="1", NCCL_NVLS_ENABLE="0")
    # Run outside the checkout, so that the installed fusedops is imported.
    done = subprocess.run([sys.executable, *command], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, f"{mode} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("device", [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.device_count() < 2 or not dist.is_nccl_available(),
        reason="needs 2 CUDA GPUs and NCCL")),
])
def test_ddp_and_fsdp_follow_single_process(device, tmp_path):
    single = train("single", device, tmp_path)
    losses = [r["loss"] for r in single if "loss" in r]
    assert len(losses) == STEPS and losses[-1] < losses[0], "the single-process run does not train"
    for mode in ("ddp", "fsdp"):
        records = train(mode, device, tmp_path)
        assert [r["world_size"] for r in records if "loss" in r] == [2] * STEPS
        torch.testing.assert_close([r["loss"] for r in records if "loss" in r], losses, rtol=1e-4, atol=1e-6,
                                   msg=lambda m, mode=mode: f"{mode} losses differ from single: {m}")
        final, expected = records[-1], single[-1]
        for key in ("params_sum", "params_sumsq"):
            torch.testing.assert_close(final[key], expected[key], rtol=1e-4, atol=1e-5)
