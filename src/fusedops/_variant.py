"""Which wheel variant a torch installation needs, and how to install it.

One binary per CUDA major, built on the LibTorch stable ABI, serves every torch
from its ABI target on: the variants are `cpu`, `cu12` and `cu13`, and the
version label names the variant (0.2.0+cu13). Pure Python with no imports of
torch or of the compiled library, so that the build
(tools/build/fusedops_metadata.py), the import-time check (whose ImportError
names the install command when the installed binary is the wrong one) and
`python -m fusedops info` all compute the same answer.
"""

from __future__ import annotations

import re


def major_minor(version: str) -> tuple[int, int]:
    """(2, 13) for '2.13.0+cpu', '2.13.1', '2.13.0a0+git123'; (12, 8) for '12.8'."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"fusedops: cannot parse the version {version!r}")
    return int(match.group(1)), int(match.group(2))


def variant_for(cuda_version: str | None) -> str:
    """The variant a torch built for `cuda_version` (None: a CPU build) needs: 'cpu', 'cu12', 'cu13'."""
    return f"cu{major_minor(cuda_version)[0]}" if cuda_version else "cpu"


def install_command(base_version: str, variant: str, index_url: str) -> str:
    """The pip command that installs the wheel of this release built for `variant`."""
    return (f'pip install "fusedops=={base_version}+{variant}" '
            f"--index-url {index_url.rstrip('/')}/{variant}/simple")
