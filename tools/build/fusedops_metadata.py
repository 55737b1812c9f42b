"""scikit-build-core dynamic-metadata provider: the wheel's variant identity.

The version becomes `<base-version>+pt{major}{minor}cu{cuda}` (or `...cpu`) and
the dependencies pin `torch=={major}.{minor}.*`, both taken from the torch that
the build runs against, so pip refuses a wrong combination before anything
loads. CMakeLists.txt reads the label back (SKBUILD_PROJECT_VERSION_FULL) so
that FUSEDOPS_CUDA=AUTO is decided in exactly one place.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]


def _load_variant_module() -> Any:
    # Load src/fusedops/_variant.py by path: the package itself is not importable
    # (nor built) at this point.
    path = _ROOT / "src" / "fusedops" / "_variant.py"
    spec = importlib.util.spec_from_file_location("_fusedops_variant", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_nvcc() -> str | None:
    """The CUDA compiler CMakeLists.txt would use, searched in the same order."""
    candidates = [os.environ.get("CUDACXX"), shutil.which("nvcc")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "nvcc"))
    candidates.append("/usr/local/cuda/bin/nvcc")
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def build_cuda(torch_cuda: str | None) -> bool:
    mode = os.environ.get("FUSEDOPS_CUDA", "AUTO").upper()
    if mode not in ("AUTO", "ON", "OFF"):
        raise ValueError(f"fusedops: FUSEDOPS_CUDA must be AUTO, ON or OFF, not {mode!r}")
    if mode == "OFF":
        return False
    if mode == "ON" and not torch_cuda:
        raise RuntimeError("fusedops: FUSEDOPS_CUDA=ON but the torch being built against has no CUDA")
    if mode == "ON" and not find_nvcc():
        raise RuntimeError("fusedops: FUSEDOPS_CUDA=ON but no nvcc was found (CUDACXX, PATH, CUDA_HOME)")
    return bool(torch_cuda) and find_nvcc() is not None


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    import torch

    variant = _load_variant_module()
    cuda = torch.version.cuda if build_cuda(torch.version.cuda) else None
    major, minor = variant.torch_major_minor(torch.__version__)
    return {
        "version": f"{settings['base-version']}+{variant.variant_tag(torch.__version__, cuda)}",
        "dependencies": [f"torch=={major}.{minor}.*"],
    }

