"""`python -m fusedops check` and `info`: the self-test covers every op, forward
and backward, on every device present, and fails when an op is wrong."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import fusedops
from fusedops import __main__ as cli

pytestmark = pytest.mark.ops  # the op suite (.ci/run's Python-autograd lane: -m ops)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


# Every public op the library registered (internal ones start with "_").
PUBLIC_OPS = sorted(name.removeprefix("fusedops::") for name in torch._C._dispatch_get_all_op_names()
                    if name.startswith("fusedops::") and not name.startswith("fusedops::_"))


def test_check_covers_every_op_on_every_device(capsys):
    assert PUBLIC_OPS
    assert cli.check() == 0
    out = capsys.readouterr().out
    for op in PUBLIC_OPS:
        for device in DEVICES:
            for dtype in ("float16", "bfloat16", "float32", "float64"):
                assert f"{op:17} {device:5} {dtype:9} forward ok backward ok" in out
    assert f"check: {len(PUBLIC_OPS)} ops ({', '.join(PUBLIC_OPS)}) x 4 dtypes, forward and backward, on " \
           + " and ".join(DEVICES) in out
    assert out.rstrip().endswith("all passed")


@pytest.mark.parametrize("op, wrong, failing", [
    # result and so every gradient half as large again: wrong for any data (a shift
    # of the result moved the gradient only where an element crossed a bound: flaky)
    ("scale_bias_clamp", lambda x, scale, bias, min, max: 1.5 * torch.clamp(x * scale + bias, min, max),
     "forward FAILED backward FAILED"),
    # right forward, wrong gradient for b
    ("add", lambda a, b: a + (2 * b - b.detach()), "forward ok backward FAILED"),
    # an op that raises
    ("linear", lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError("broken kernel")),
     "FAILED: RuntimeError: broken kernel"),
])
def test_check_fails_when_an_op_is_wrong(monkeypatch, capsys, op, wrong, failing):
    monkeypatch.setattr(fusedops, op, wrong)
    assert cli.check() == 1
    out = capsys.readouterr().out
    assert f"{op:17} cpu   float32   {failing}" in out
    assert "FAILED" in out.splitlines()[-1]


def test_info_says_whether_cuda_kernels_were_built():
    result = subprocess.run([sys.executable, "-m", "fusedops", "info"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.strip().startswith("CUDA kernels"))
    assert line.split(None, 2)[2] == fusedops.build_info()["cuda_kernels"]
