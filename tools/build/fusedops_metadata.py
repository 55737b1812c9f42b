"""scikit-build-core dynamic-metadata provider: the wheel's variant identity.

The version becomes `<base-version>+cu{major}` (the CUDA major of nvcc) or
`<base-version>+cpu`, and the wheel requires `torch>=<ABI target>`: the binary
is built on torch's stable ABI, so one wheel per CUDA major serves every torch
from that release on. Whether the CUDA kernels are built is
cuda_probe.decide_for_build()'s answer, which CMakeLists.txt asks again and
follows, so that the label and the binary can never disagree.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]


def _load_by_path(name: str, path: Path) -> Any:
    # Neither the package (not built yet) nor this folder is importable as such.
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    variant = _load_by_path("_fusedops_variant", _ROOT / "src" / "fusedops" / "_variant.py")
    probe = _load_by_path("_fusedops_cuda_probe", _ROOT / "tools" / "build" / "cuda_probe.py")
    decision = probe.decide_for_build()
    print(f"fusedops: CUDA kernels {decision.reason}", file=sys.stderr)
    tag = variant.variant_for(decision.nvcc_version if decision.build else None)
    return {
        "version": f"{settings['base-version']}+{tag}",
        "dependencies": [f"torch>={settings['abi-target']}"],
    }
