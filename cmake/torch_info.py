"""Write what CMake needs to know about the torch of the running Python.

Usage: python torch_info.py OUT.cmake. CMakeLists.txt includes OUT.cmake; the
torch found is the one that the build's Python imports, nothing hard-coded.
FUSEDOPS_CUDA (AUTO, ON or OFF) in the environment is decided here too, by
tools/build/cuda_probe.py, the same code that made the wheel's version label.
"""

import os
import re
import sys

import torch
import torch.utils.cpp_extension as cpp_extension


def cmake_path(path: str) -> str:
    return path.replace("\\", "/")


root = os.path.dirname(torch.__file__)
values = {
    "TORCH_VERSION": torch.__version__,
    "TORCH_CUDA_VERSION": torch.version.cuda or "",
    "TORCH_INCLUDE_DIRS": ";".join(cmake_path(p) for p in cpp_extension.include_paths()),
    "TORCH_LIBRARY_DIR": cmake_path(os.path.join(root, "lib")),
    "TORCH_CXX11_ABI": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
}

# With torch's OpenMP backend, at::parallel_for is an inline OpenMP loop that
# runs on one thread unless the extension is compiled with OpenMP too.
with open(os.path.join(root, "include", "ATen", "Config.h")) as config:
    openmp = re.search(r"#define\s+AT_PARALLEL_OPENMP\s+1\b", config.read()) is not None
values["TORCH_PARALLEL_OPENMP"] = str(int(openmp))

# A CUDA torch from pip finds cuBLAS, cuSPARSE, ... headers in the nvidia/cu*
# wheels beside it; torch's CUDA headers include them.
nvidia_includes = []
for entry in sys.path:
    nvidia = os.path.join(entry, "nvidia")
    if not os.path.isdir(nvidia):
        continue
    for sub in sorted(os.listdir(nvidia)):
        include = os.path.join(nvidia, sub, "include")
        if os.path.isdir(include):
            nvidia_includes.append(cmake_path(include))
values["TORCH_NVIDIA_INCLUDE_DIRS"] = ";".join(nvidia_includes)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "build"))
import cuda_probe  # noqa: E402

try:
    cuda = cuda_probe.decide_for_build()
except RuntimeError as error:  # FUSEDOPS_CUDA=ON that cannot be honoured
    sys.exit(str(error))
values["FUSEDOPS_CUDA_BUILD"] = "ON" if cuda.build else "OFF"
values["FUSEDOPS_CUDA_REASON"] = cuda.reason.replace('"', "'")
values["FUSEDOPS_NVCC"] = cmake_path(cuda.nvcc or "")
values["FUSEDOPS_NVCC_VERSION"] = cuda.nvcc_version or ""
values["FUSEDOPS_CUDA_INCLUDE_DIRS"] = ";".join(cmake_path(p) for p in cuda.include_dirs)
values["FUSEDOPS_CUBLASLT_LIBRARY"] = cmake_path(cuda.cublaslt or "")
values["FUSEDOPS_CUDART_LIBRARY"] = cmake_path(cuda.cudart or "")

with open(sys.argv[1], "w") as out:
    for key, value in values.items():
        out.write(f'set({key} "{value}")\n')
