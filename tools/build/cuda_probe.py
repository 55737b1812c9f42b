"""Whether a build of fusedops compiles its CUDA kernels: FUSEDOPS_CUDA=AUTO, ON or OFF.

The one place that decides. The metadata provider (fusedops_metadata.py) puts the
answer into the version label, CMakeLists.txt builds what it says (through
`python cuda_probe.py OUT.cmake`, via cmake/torch_info.py), and the reason lands in
`fusedops.build_info()` so that `python -m fusedops info` can say why CUDA kernels
were or were not built.

The CUDA kernels need: a CUDA build of torch; nvcc of the same CUDA major; the
CUDA runtime and cuBLASLt (header and library) from the toolkit or from the
NVIDIA wheels a pip-installed CUDA torch brings (site-packages/nvidia/cu13, or
nvidia/cublas + nvidia/cuda_runtime for CUDA 12); and a host compiler nvcc
accepts. AUTO builds them when everything is there and otherwise builds CPU-only
with one line saying what was missing; ON fails with that same line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TOOLKIT_HINT = ("tools/install_cuda_toolkit.sh 13.0 PREFIX && source PREFIX/env.sh "
                "installs one from pip")


@dataclass
class CudaDecision:
    build: bool
    reason: str  # one line: what was found, or what is missing and how to get it
    nvcc: str | None = None
    nvcc_version: str | None = None
    include_dirs: list[str] = field(default_factory=list)  # cublasLt.h, cuda_runtime_api.h
    cublaslt: str | None = None  # library file
    cudart: str | None = None  # library file


# Where a toolkit installed the usual way puts nvcc: the last place looked.
DEFAULT_NVCC = "/usr/local/cuda/bin/nvcc"


def find_nvcc(env: Mapping[str, str]) -> str | None:
    """CUDACXX, then nvcc on PATH, then CUDA_HOME / CUDA_PATH, then DEFAULT_NVCC."""
    candidates = [env.get("CUDACXX"), shutil.which("nvcc", path=env.get("PATH"))]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            candidates.append(os.path.join(env[var], "bin", "nvcc"))
    candidates.append(DEFAULT_NVCC)
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def nvcc_version(nvcc: str) -> str | None:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


def search_dirs(nvcc: str, cuda_major: str, site_dirs: Iterable[str]) -> tuple[list[Path], list[Path]]:
    """(include dirs, library dirs) to search: the toolkit's own, then the NVIDIA
    wheels beside torch (one merged nvidia/cuXX folder from CUDA 13 on, one
    folder per component before)."""
    root = Path(os.path.realpath(nvcc)).parent.parent
    includes = [root / "include", *sorted(root.glob("targets/*/include"))]
    libs = [root / "lib64", root / "lib", *sorted(root.glob("targets/*/lib"))]
    for site in site_dirs:
        nvidia = Path(site) / "nvidia"
        for sub in (f"cu{cuda_major}", "cublas", "cuda_runtime"):
            includes.append(nvidia / sub / "include")
            libs.append(nvidia / sub / "lib")
    return [d for d in includes if d.is_dir()], [d for d in libs if d.is_dir()]


def find_file(dirs: Iterable[Path], patterns: Iterable[str]) -> Path | None:
    for d in dirs:
        for pattern in patterns:
            found = sorted(d.glob(pattern))
            if found:
                return found[0]
    return None


def library_patterns(name: str, cuda_major: str) -> list[str]:
    # The unversioned link a toolkit has, else the soname the NVIDIA wheels ship.
    return [f"lib{name}.so", f"lib{name}.so.{cuda_major}", f"lib{name}.so.{cuda_major}.*"]


def compile_test(nvcc: str, include_dirs: list[str], env: Mapping[str, str]) -> str | None:
    """None if nvcc compiles a file with the runtime and cuBLASLt headers, else
    its first error line. Uses the host compiler CMake will give nvcc."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cu"
        source.write_text("#include <cuda_runtime_api.h>\n#include <cublasLt.h>\n"
                          "__global__ void probe(float* x) { x[threadIdx.x] += 1.0f; }\n")
        command = [nvcc, "-c", str(source), "-o", str(Path(tmp) / "probe.o")]
        host = env.get("CUDAHOSTCXX")
        if host:
            command += ["-ccbin", host]
        command += [f"-I{d}" for d in include_dirs]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except OSError as error:
            return str(error)
        if result.returncode == 0:
            return None
        lines = [line for line in (result.stderr + result.stdout).splitlines() if line.strip()]
        error = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
        return error.strip() or f"exit code {result.returncode}"


def decide(mode: str, torch_version: str, torch_cuda: str | None, site_dirs: Iterable[str],
           env: Mapping[str, str] | None = None) -> CudaDecision:
    """The decision for FUSEDOPS_CUDA=`mode` (AUTO, ON or OFF), never raising:
    with ON, the caller turns a negative answer into an error."""
    env = os.environ if env is None else env
    mode = mode.upper()
    if mode not in ("AUTO", "ON", "OFF"):
        raise ValueError(f"fusedops: FUSEDOPS_CUDA must be AUTO, ON or OFF, not {mode!r}")
    if mode == "OFF":
        return CudaDecision(False, "not built: FUSEDOPS_CUDA=OFF")
    if not torch_cuda:
        return CudaDecision(False, f"not built: torch {torch_version} is a CPU-only build "
                                   "(a CUDA build of torch is needed for the CUDA kernels)")
    nvcc = find_nvcc(env)
    if nvcc is None:
        return CudaDecision(False, "not built: no nvcc found (CUDACXX, PATH, CUDA_HOME, "
                                   f"/usr/local/cuda/bin); {TOOLKIT_HINT}")
    version = nvcc_version(nvcc)
    if version is None:
        return CudaDecision(False, f"not built: {nvcc} --version printed no CUDA release", nvcc)
    major = torch_cuda.split(".")[0]
    found = CudaDecision(False, "", nvcc, version)
    if version.split(".")[0] != major:
        found.reason = (f"not built: nvcc {version} ({nvcc}) is not CUDA {major}, which torch "
                        f"{torch_version} was built with; install a CUDA {major} toolkit")
        return found
    includes, libs = search_dirs(nvcc, major, site_dirs)
    places = ", ".join(str(d) for d in includes + libs) or "none"
    header = find_file(includes, ["cublasLt.h"])
    cublaslt = find_file(libs, library_patterns("cublasLt", major))
    cudart = find_file(libs, library_patterns("cudart", major))
    missing = [what for what, path in (("cublasLt.h", header), ("the cuBLASLt library", cublaslt),
                                       ("the CUDA runtime library", cudart)) if path is None]
    if missing:
        found.reason = (f"not built: nvcc {version} found, but no {' nor '.join(missing)} in its toolkit "
                        f"or torch's NVIDIA wheels (searched: {places}); a CUDA build of torch from pip "
                        f"brings them (nvidia/cu{major}), as does a full CUDA toolkit")
        return found
    found.include_dirs = sorted({str(header.parent)}, key=str)
    found.cublaslt, found.cudart = str(cublaslt), str(cudart)
    error = compile_test(nvcc, found.include_dirs, env)
    if error is not None:
        host = env.get("CUDAHOSTCXX") or "nvcc's default host compiler"
        found.reason = (f"not built: nvcc {version} cannot compile a test file with {host}: {error}; "
                        "set CUDAHOSTCXX to a g++ that this nvcc accepts")
        return found
    found.build = True
    found.reason = f"built with nvcc {version} ({nvcc}), cuBLASLt {cublaslt}"
    return found


def decide_for_build() -> CudaDecision:
    """The decision for this build environment (FUSEDOPS_CUDA, the running torch);
    raises with the reason when FUSEDOPS_CUDA=ON cannot be honoured."""
    import torch

    mode = os.environ.get("FUSEDOPS_CUDA", "AUTO") or "AUTO"
    decision = decide(mode, torch.__version__, torch.version.cuda, sys.path)
    if mode.upper() == "ON" and not decision.build:
        raise RuntimeError(f"fusedops: FUSEDOPS_CUDA=ON, but the CUDA kernels cannot be built: "
                           f"{decision.reason.removeprefix('not built: ')}")
    return decision
