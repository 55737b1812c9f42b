"""FUSEDOPS_CUDA=AUTO decides from what is installed and never fails the build;
ON fails with the same reason. Fake toolkits (an nvcc script, header and
library files) stand in for the real ones."""

from __future__ import annotations

import importlib.util
import stat
import sys
from pathlib import Path

import pytest

PROBE_PATH = Path(__file__).resolve().parents[1] / "tools" / "build" / "cuda_probe.py"


@pytest.fixture
def probe(monkeypatch):
    spec = importlib.util.spec_from_file_location("cuda_probe_under_test", PROBE_PATH)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "DEFAULT_NVCC", "/nonexistent/bin/nvcc")  # no machine toolkit
    return module


def fake_toolkit(root: Path, release="13.0", compiles=True) -> dict[str, str]:
    """A toolkit root with an nvcc that reports `release` and, when asked to
    compile, succeeds or fails like a rejected host compiler; returns an env
    that finds it on PATH and nowhere else."""
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    compile_step = ("touch \"$out\"" if compiles else
                    "echo 'error -- unsupported GNU version! gcc versions later than 13 are not supported!' >&2; exit 1")
    nvcc.write_text(f"""#!/bin/sh
if [ "$1" = --version ]; then echo 'Cuda compilation tools, release {release}, V{release}.88'; exit 0; fi
out=""; while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
{compile_step}
""")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime_api.h").touch()
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudart.so").touch()
    return {"PATH": str(nvcc.parent)}


def pip_nvidia(site: Path, folder="cu13", soname="13") -> None:
    """What a pip-installed CUDA torch brings beside it."""
    (site / "nvidia" / folder / "include").mkdir(parents=True)
    (site / "nvidia" / folder / "include" / "cublasLt.h").touch()
    (site / "nvidia" / folder / "lib").mkdir()
    (site / "nvidia" / folder / "lib" / f"libcublasLt.so.{soname}").touch()


def test_no_nvcc_builds_cpu_only_and_says_how_to_get_one(probe, tmp_path):
    decision = probe.decide("AUTO", "2.14.1+cu130", "13.0", [str(tmp_path)], env={"PATH": str(tmp_path)})
    assert not decision.build
    assert decision.reason.startswith("not built: no nvcc found")
    assert "tools/install_cuda_toolkit.sh" in decision.reason


def test_nvcc_without_cublaslt_anywhere_builds_cpu_only(probe, tmp_path):
    env = fake_toolkit(tmp_path / "cuda")
    (tmp_path / "site").mkdir()
    decision = probe.decide("AUTO", "2.14.1+cu130", "13.0", [str(tmp_path / "site")], env=env)
    assert not decision.build
    assert "nvcc 13.0 found, but no cublasLt.h nor the cuBLASLt library" in decision.reason
    assert str(tmp_path / "cuda" / "include") in decision.reason  # says where it looked


def test_cublaslt_only_in_torchs_pip_nvidia_folder_builds_cuda(probe, tmp_path):
    env = fake_toolkit(tmp_path / "cuda")
    pip_nvidia(tmp_path / "site")
    decision = probe.decide("AUTO", "2.14.1+cu130", "13.0", [str(tmp_path / "site")], env=env)
    assert decision.build, decision.reason
    assert decision.nvcc == str(tmp_path / "cuda" / "bin" / "nvcc") and decision.nvcc_version == "13.0"
    assert decision.cublaslt == str(tmp_path / "site" / "nvidia" / "cu13" / "lib" / "libcublasLt.so.13")
    assert decision.include_dirs == [str(tmp_path / "site" / "nvidia" / "cu13" / "include")]
    assert decision.cudart == str(tmp_path / "cuda" / "lib64" / "libcudart.so")
    assert decision.reason.startswith("built with nvcc 13.0")


def test_cuda12_per_component_wheels_are_found(probe, tmp_path):
    env = fake_toolkit(tmp_path / "cuda", release="12.4")
    pip_nvidia(tmp_path / "site", folder="cublas", soname="12")
    decision = probe.decide("AUTO", "2.10.0+cu128", "12.8", [str(tmp_path / "site")], env=env)
    assert decision.build, decision.reason


def test_nvcc_of_another_cuda_major_is_not_used(probe, tmp_path):
    env = fake_toolkit(tmp_path / "cuda", release="12.4")
    pip_nvidia(tmp_path / "site")
    decision = probe.decide("AUTO", "2.14.1+cu130", "13.0", [str(tmp_path / "site")], env=env)
    assert not decision.build and "nvcc 12.4" in decision.reason and "is not CUDA 13" in decision.reason


def test_host_compiler_nvcc_rejects_builds_cpu_only(probe, tmp_path):
    env = fake_toolkit(tmp_path / "cuda", compiles=False)
    pip_nvidia(tmp_path / "site")
    decision = probe.decide("AUTO", "2.14.1+cu130", "13.0", [str(tmp_path / "site")],
                            env={**env, "CUDAHOSTCXX": "g++-14"})
    assert not decision.build
    assert "cannot compile a test file with g++-14: error -- unsupported GNU version" in decision.reason
    assert "set CUDAHOSTCXX" in decision.reason


def test_cpu_torch_and_off_build_cpu_only(probe, tmp_path):
    env = fake_toolkit(tmp_path / "cuda")
    assert "CPU-only build" in probe.decide("AUTO", "2.13.0+cpu", None, [], env=env).reason
    assert probe.decide("OFF", "2.14.1+cu130", "13.0", [], env=env).reason == "not built: FUSEDOPS_CUDA=OFF"
    with pytest.raises(ValueError, match="AUTO, ON or OFF"):
        probe.decide("maybe", "2.14.1+cu130", "13.0", [], env=env)


def test_on_fails_loudly_with_the_same_reason(probe, monkeypatch, tmp_path):
    monkeypatch.setenv("FUSEDOPS_CUDA", "ON")
    monkeypatch.setenv("PATH", str(tmp_path))
    for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(RuntimeError, match=r"^fusedops: FUSEDOPS_CUDA=ON, but the CUDA kernels cannot be built: "
                                           r"(no nvcc found|torch .* is a CPU-only build)"):
        probe.decide_for_build()


def test_the_real_machine_decision_matches_the_installed_binary():
    """The binary under test was built by the same probe: its build_info says why."""
    import fusedops

    info = fusedops.build_info()
    assert info["cuda_kernels"].startswith("built with nvcc" if info["cuda"] else "not built: ")
