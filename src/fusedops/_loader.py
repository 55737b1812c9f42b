"""Loads the compiled library, after checking it was built for this torch.

A wheel built for another torch or CUDA would fail deep inside the dynamic
loader ("undefined symbol ...") or, worse, load and misbehave. The build facts
in _build_info.py (written by CMake) are compared with the running torch first,
so the user gets an ImportError that names both and the command that fixes it.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from ._variant import install_command, torch_major_minor, variant_tag


def built_for() -> dict[str, Any]:
    from ._build_info import BUILD_INFO

    return dict(BUILD_INFO)


def mismatch(build: dict[str, Any], torch_version: str, torch_cuda: str | None) -> str | None:
    """Why a binary built as `build` cannot run with this torch, or None if it can."""
    problems = []
    if torch_major_minor(build["torch"]) != torch_major_minor(torch_version):
        problems.append(f"torch {build['torch']} (this environment has torch {torch_version})")
    if build["torch_cuda"] and torch_cuda != build["torch_cuda"]:
        have = f"CUDA {torch_cuda}" if torch_cuda else "a CPU-only torch"
        problems.append(f"CUDA {build['torch_cuda']} (this environment has {have})")
    if not problems:
        return None
    base_version = build["version"].split("+")[0]
    needed = variant_tag(torch_version, torch_cuda)
    return (
        f"fusedops {build['version']} was built for {' and '.join(problems)}. "
        f"Install the fusedops wheel built for this environment ({needed}):\n"
        f"    {install_command(base_version, needed)}"
    )


def load() -> None:
    """Import fusedops._C (registering torch.ops.fusedops) or raise a clear ImportError."""
    try:
        build = built_for()
    except ImportError as error:
        raise ImportError(
            "fusedops: the package is incomplete (no _build_info); reinstall it"
        ) from error
    problem = mismatch(build, torch.__version__, torch.version.cuda)
    if problem:
        raise ImportError(problem)
    try:
        importlib.import_module("fusedops._C")
    except ImportError as error:  # OSError from the loader arrives as ImportError
        needed = variant_tag(torch.__version__, torch.version.cuda)
        raise ImportError(
            f"fusedops {build['version']}: its compiled library failed to load ({error}). "
            f"Reinstall the wheel built for this environment ({needed}):\n"
            f"    {install_command(build['version'].split('+')[0], needed)}"
        ) from error
