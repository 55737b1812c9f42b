"""Write what CMake needs to know about the torch of the running Python.

Usage: python torch_info.py OUT.cmake. CMakeLists.txt includes OUT.cmake; the
torch found is the one that the build's Python imports, nothing hard-coded.
FUSEDOPS_CUDA (AUTO, ON or OFF) in the environment is decided here too, by
tools/build/cuda_probe.py, the same code that made the wheel's version label.
"""

import os
import sys

import torch


def cmake_path(path: str) -> str:
    return path.replace("\\", "/")


root = os.path.dirname(torch.__file__)
values = {
    "TORCH_VERSION": torch.__version__,
    "TORCH_CUDA_VERSION": torch.version.cuda or "",
    # The stable ABI's headers (torch/csrc/stable, torch/headeronly) and torch's C shim.
    "TORCH_INCLUDE_DIRS": cmake_path(os.path.join(root, "include")),
    "TORCH_LIBRARY_DIR": cmake_path(os.path.join(root, "lib")),
}

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
