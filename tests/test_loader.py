"""The import-time check: a binary built for another torch or CUDA is refused
with a message that names both and the command that installs the right wheel."""

import os
import subprocess
import sys

import pytest

import fusedops
from fusedops import _loader
from fusedops._variant import install_command, variant_for

CU13 = {"version": "0.2.0+cu13", "variant": "cu13", "abi_target": "2.10", "cuda": "13.0",
        "index_url": "https://example.test/whl"}
CU12 = {**CU13, "version": "0.2.0+cu12", "variant": "cu12", "cuda": "12.4"}
CPU = {**CU13, "version": "0.2.0+cpu", "variant": "cpu", "cuda": None}


@pytest.mark.parametrize("build, torch_version, cuda", [
    (CU13, "2.14.1+cu130", "13.0"), (CU13, "2.15.0+cu132", "13.2"), (CU13, "2.10.0", "13.0"),
    (CU12, "2.10.0+cu128", "12.8"), (CU12, "2.12.1+cu126", "12.6"), (CU12, "2.13.0", "12.4"),
    (CPU, "2.10.0+cpu", None), (CPU, "2.14.1+cu130", "13.0"), (CPU, "2.15.0", "13.2"),
])
def test_one_binary_serves_every_torch_from_its_abi_target(build, torch_version, cuda):
    assert _loader.mismatch(build, torch_version, cuda, "x86_64") is None
    assert all(rule.ok for rule in _loader.rules(build, torch_version, cuda, "x86_64"))


@pytest.mark.parametrize("build, torch_version, cuda, expected, fix", [
    (CU13, "2.9.1+cu130", "13.0",
     "torch version: the binary uses torch's stable ABI of 2.10, which torch 2.9.1+cu130 predates",
     'pip install "torch>=2.10"'),
    (CU13, "2.10.0+cu128", "12.8", "CUDA major: built with CUDA 13.0, torch has CUDA 12.8",
     'pip install "fusedops==0.2.0+cu12" --index-url https://example.test/whl/cu12/simple'),
    (CU12, "2.15.0+cu132", "13.2", "CUDA major: built with CUDA 12.4, torch has CUDA 13.2",
     'pip install "fusedops==0.2.0+cu13" --index-url https://example.test/whl/cu13/simple'),
    (CU12, "2.10.0+cu121", "12.1", "CUDA runtime: torch's CUDA runtime 12.1 is older than the build's 12.4",
     'pip install "fusedops==0.2.0+cu12"'),
    (CU13, "2.14.1+cpu", None, "CUDA major: the binary needs CUDA 13, this torch 2.14.1+cpu is a CPU build",
     'pip install "fusedops==0.2.0+cpu" --index-url https://example.test/whl/cpu/simple'),
])
def test_mismatch_names_both_sides_and_the_fix(build, torch_version, cuda, expected, fix):
    message = _loader.mismatch(build, torch_version, cuda, "x86_64")
    assert message.startswith(f"fusedops {build['version']} cannot run with torch {torch_version}: ")
    assert expected in message
    assert "\n".join(_loader.rule_lines(_loader.rules(build, torch_version, cuda, "x86_64"))) in message
    assert message.rstrip().splitlines()[-1].strip().startswith(fix)


def test_aarch64_under_a_cuda_12_torch_is_told_no_wheel_exists_and_what_to_do():
    # GH200/GB200: aarch64 has cpu and cu13 wheels only; the cu13 wheel under a CUDA 12 torch.
    message = _loader.mismatch(CU13, "2.10.0+cu128", "12.8", "aarch64")
    assert "CUDA major: built with CUDA 13.0, torch has CUDA 12.8" in message
    fix = message.split("Install what this environment needs:\n", 1)[1]
    assert "no fusedops cu12 wheel exists for aarch64 (its wheels: cpu, cu13)" in fix
    assert 'pip install --upgrade "torch>=2.11" && pip install "fusedops==0.2.0+cu13" ' in fix
    assert 'pip install "fusedops==0.2.0+cpu" --index-url https://example.test/whl/cpu/simple' in fix
    assert "+cu12" not in fix
    # The cpu wheel runs there; its rule does not send the user to a cu12 wheel.
    (cuda_rule,) = [r for r in _loader.rules(CPU, "2.10.0+cu128", "12.8", "aarch64") if r.name == "CUDA"]
    assert cuda_rule.ok and "no cu12 wheel exists for aarch64" in cuda_rule.reason
    (cuda_rule,) = [r for r in _loader.rules(CPU, "2.10.0+cu128", "12.8", "x86_64") if r.name == "CUDA"]
    assert "CUDA tensors need the cu12 wheel" in cuda_rule.reason


@pytest.mark.parametrize("machine, variant, expected", [
    ("aarch64", "cu13", 'pip install "fusedops==0.2.0+cu13" --index-url https://example.test/whl/cu13/simple'),
    ("aarch64", "cpu", 'pip install "fusedops==0.2.0+cpu" --index-url https://example.test/whl/cpu/simple'),
    ("x86_64", "cu12", 'pip install "fusedops==0.2.0+cu12" --index-url https://example.test/whl/cu12/simple'),
    ("riscv64", "cpu", "# no fusedops wheels exist for riscv64 (only for x86_64 and aarch64): build it from source"),
])
def test_install_command_names_only_wheels_that_exist(machine, variant, expected):
    assert install_command("0.2.0", variant, "https://example.test/whl", machine).startswith(expected)


def test_variant_for_each_torch():
    assert [variant_for(c) for c in (None, "12.8", "13.0", "13.2")] == ["cpu", "cu12", "cu13", "cu13"]


def _run(code, *args):
    return subprocess.run([sys.executable, *args, "-c", code] if code else [sys.executable, *args],
                          capture_output=True, text=True, timeout=300)


def test_import_with_another_torch_raises_import_error():
    # The real import path, with torch pretending to be a release we were not built for.
    result = _run("import torch; torch.__version__ = '2.9.1'\n"
                  "try:\n    import fusedops\nexcept ImportError as e:\n    print('IMPORTERROR', e)")
    assert result.returncode == 0, result.stderr
    assert "IMPORTERROR fusedops " in result.stdout
    assert "which torch 2.9.1 predates" in result.stdout
    assert 'pip install "torch>=2.10"' in result.stdout and "undefined symbol" not in result.stdout


def test_a_library_that_fails_to_load_is_an_import_error_with_the_build_facts():
    # The rules hold but the library itself cannot be loaded (here: its import is blocked).
    result = _run("import sys; sys.modules['fusedops._C'] = None\n"
                  "try:\n    import fusedops\nexcept ImportError as e:\n    print('IMPORTERROR', e)")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "IMPORTERROR fusedops " in out and "its compiled library failed to load" in out
    assert "built for " in out and "torch >= 2.10" in out and "  torch version  ok: " in out
    assert 'pip install "fusedops==' in out


def test_info_under_another_torch_stops_at_the_import_with_the_report(tmp_path):
    # The real `python -m fusedops info`, under a torch that pretends (from
    # sitecustomize, before runpy imports the package) to predate the ABI target.
    (tmp_path / "sitecustomize.py").write_text("import torch\ntorch.__version__ = '2.9.1'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "fusedops", "info"], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode != 0 and "cannot run with torch 2.9.1: torch version" in result.stderr
    assert "  torch version  NO: the binary uses torch's stable ABI of 2.10" in result.stderr
    assert 'pip install "torch>=2.10"' in result.stderr


def test_build_info_describes_this_binary():
    info = fusedops.build_info()
    assert info["version"] == fusedops.__version__ and info["version"].endswith("+" + info["variant"])
    assert info["abi_target"] == "2.10" and info["index_url"].startswith("http")
    assert info["build_type"] and info["compiler"]
    assert bool(info["cuda_archs"]) == bool(info["cuda"]) == (info["variant"] != "cpu")
