"""Which wheel variant a torch installation needs, and how to install it.

Pure Python with no imports of torch or of the compiled library, so that the
build (tools/build/fusedops_metadata.py), the import-time check and
`python -m fusedops info` all compute the same answer, even when the installed
binary is the wrong one.
"""

from __future__ import annotations

import os
import re

# The static index that serves one PEP 503 tree per variant (see docs/install.md).
INDEX_URL = os.environ.get("FUSEDOPS_INDEX_URL", "https://fusedops.github.io/whl")


def torch_major_minor(torch_version: str) -> tuple[int, int]:
    """(2, 13) for '2.13.0+cpu', '2.13.1', '2.13.0a0+git123'."""
    match = re.match(r"(\d+)\.(\d+)", torch_version)
    if not match:
        raise ValueError(f"fusedops: cannot parse the torch version {torch_version!r}")
    return int(match.group(1)), int(match.group(2))


def variant_tag(torch_version: str, cuda_version: str | None) -> str:
    """'pt213cpu' or 'pt214cu130': the local version label of the matching wheel."""
    major, minor = torch_major_minor(torch_version)
    device = "cu" + cuda_version.replace(".", "") if cuda_version else "cpu"
    return f"pt{major}{minor}{device}"


def install_command(base_version: str, variant: str) -> str:
    """The pip command that installs the wheel of this release built for `variant`."""
    return (
        f'pip install "fusedops=={base_version}+{variant}" '
        f"--index-url {INDEX_URL}/{variant}/simple"
    )
