"""Which wheel variant a torch installation needs, and how to install it.

One binary per CUDA major, built on the LibTorch stable ABI, serves every torch
from its ABI target on: the variants are `cpu`, `cu12` and `cu13`, and the
version label names the variant (+cu13). Linux aarch64 has `cpu` and
`cu13` only (PyPI's aarch64 torch is CPU-only for 2.10 and CUDA 13 from 2.11),
so an install command never names a wheel that does not exist. Pure Python with no imports of
torch or of the compiled library, so that the build
(tools/build/fusedops_metadata.py), the import-time check (whose ImportError
names the install command when the installed binary is the wrong one) and
`python -m fusedops info` all compute the same answer.
"""

from __future__ import annotations

import platform
import re

# The (platform, variants) a release has wheels for: tools/wheel_matrix.json's
# platforms (tests/test_wheel_matrix.py checks that the two agree).
WHEELS = {"x86_64": ("cpu", "cu12", "cu13"), "aarch64": ("cpu", "cu13")}


def this_platform() -> str:
    """'x86_64' or 'aarch64' (Linux `uname -m`; 'arm64' is aarch64)."""
    machine = platform.machine()
    return {"arm64": "aarch64", "AMD64": "x86_64"}.get(machine, machine)


def major_minor(version: str) -> tuple[int, int]:
    """(2, 13) for '2.13.0+cpu', '2.13.1', '2.13.0a0+git123'; (12, 8) for '12.8'."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"fusedops: cannot parse the version {version!r}")
    return int(match.group(1)), int(match.group(2))


def variant_for(cuda_version: str | None) -> str:
    """The variant a torch built for `cuda_version` (None: a CPU build) needs: 'cpu', 'cu12', 'cu13'."""
    return f"cu{major_minor(cuda_version)[0]}" if cuda_version else "cpu"


def wheel_exists(variant: str, machine: str) -> bool:
    return variant in WHEELS.get(machine, ())


def _pip(base_version: str, variant: str, index_url: str) -> str:
    return f'pip install "fusedops=={base_version}+{variant}" --index-url {index_url.rstrip("/")}/{variant}/simple'


def install_command(base_version: str, variant: str, index_url: str, machine: str | None = None) -> str:
    """The pip command that installs the wheel of this release built for
    `variant` on `machine` (default: this one); where that wheel does not exist,
    what to do instead (lines starting with '#' say why)."""
    machine = machine or this_platform()
    if wheel_exists(variant, machine):
        return _pip(base_version, variant, index_url)
    if machine not in WHEELS:
        return (f"# no fusedops wheels exist for {machine} (only for {' and '.join(WHEELS)}): "
                "build it from source (README's Quick start)")
    cuda = [v for v in WHEELS[machine] if v != "cpu"][-1]
    return "\n    ".join([
        f"# no fusedops {variant} wheel exists for {machine} (its wheels: {', '.join(WHEELS[machine])}).",
        f"# Use a torch built for CUDA {cuda[2:]} (PyPI's torch >= 2.11 is, on {machine}) and the {cuda} wheel:",
        f'pip install --upgrade "torch>=2.11" && {_pip(base_version, cuda, index_url)}',
        f"# or, for CPU tensors only: {_pip(base_version, 'cpu', index_url)}"])
