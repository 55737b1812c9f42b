"""The import-time check: a binary built for another torch or CUDA is refused
with a message that names both and the command that installs the right wheel."""

import subprocess
import sys

import pytest
import torch

import fusedops
from fusedops import _loader
from fusedops._variant import variant_tag

BUILD = {"version": "0.1.0+pt214cu130", "torch": "2.14.1+cu130", "torch_cuda": "13.0"}


def test_matching_environment_is_accepted():
    assert _loader.mismatch(BUILD, "2.14.0+cu130", "13.0") is None
    assert _loader.mismatch({**BUILD, "torch_cuda": None}, "2.14.1+cu130", "13.0") is None


@pytest.mark.parametrize(
    "torch_version, cuda, expected",
    [
        ("2.13.0+cu130", "13.0",
         ["torch 2.14.1+cu130 (this environment has torch 2.13.0+cu130)", "pt213cu130"]),
        ("2.14.1+cu128", "12.8", ["CUDA 13.0 (this environment has CUDA 12.8)", "pt214cu128"]),
        ("2.14.1+cpu", None, ["CUDA 13.0 (this environment has a CPU-only torch)", "pt214cpu"]),
    ],
)
def test_mismatch_message_names_both_and_the_fix(torch_version, cuda, expected):
    message = _loader.mismatch(BUILD, torch_version, cuda)
    assert message.startswith("fusedops 0.1.0+pt214cu130 was built for ")
    for text in expected:
        assert text in message
    needed = variant_tag(torch_version, cuda)
    assert f'pip install "fusedops==0.1.0+{needed}" --index-url ' in message
    assert message.rstrip().endswith(f"/{needed}/simple")


def _run(code, *args):
    return subprocess.run([sys.executable, *args, "-c", code] if code else [sys.executable, *args],
                          capture_output=True, text=True, timeout=300)


def test_import_with_another_torch_raises_import_error():
    # The real import path, with torch pretending to be a release we were not built for.
    result = _run("import torch; torch.__version__ = '2.99.0'\n"
                  "try:\n    import fusedops\nexcept ImportError as e:\n    print('IMPORTERROR', e)")
    assert result.returncode == 0, result.stderr
    assert "IMPORTERROR fusedops " in result.stdout
    assert "this environment has torch 2.99.0" in result.stdout
    assert "--index-url" in result.stdout and "undefined symbol" not in result.stdout


def test_info_reports_mismatch_instead_of_failing(tmp_path):
    # `python -m fusedops info` must still explain what to install.
    script = tmp_path / "run_info.py"
    script.write_text("import runpy, sys, torch\ntorch.__version__ = '2.99.0'\nsys.argv = ['-m']\n"
                      "import fusedops\nsys.argv = ['fusedops', 'info']\n"
                      "runpy.run_module('fusedops', run_name='__main__')\n")
    result = _run(None, str(script))
    assert result.returncode == 1
    assert "MISMATCH: fusedops" in result.stdout and "needed variant   pt299" in result.stdout


def test_build_info_describes_this_binary():
    info = fusedops.build_info()
    assert info["version"] == fusedops.__version__
    assert info["torch"].split(".")[:2] == torch.__version__.split(".")[:2]
    assert info["build_type"] and info["compiler"]
    if info["torch_cuda"]:
        assert info["cuda_archs"]


def test_cpu_kernels_run_on_torchs_intra_op_threads():
    """With torch's OpenMP (or native) parallel backend, at::parallel_for in the
    library must be the parallel one: built without OpenMP it silently runs
    every CPU kernel on the calling thread."""
    backend = next(line for line in torch.__config__.parallel_info().splitlines()
                   if line.startswith("ATen parallel backend:"))
    parallel = "OpenMP" in backend or "native" in backend
    assert fusedops._C.intra_op_parallel == int(parallel), backend
