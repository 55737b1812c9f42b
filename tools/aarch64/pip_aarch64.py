"""The host's pip installing Linux aarch64 wheels (CPython 3.11) into a folder:

    python3 tools/aarch64/pip_aarch64.py TARGET REQUIREMENT ...

pip's --platform picks aarch64 wheels but still evaluates environment markers
against this machine, so torch's `platform_machine == "x86_64"` CUDA 12
dependencies would be taken and its aarch64 ones left out. Here the markers see
aarch64 too. (pip run as aarch64 code under qemu resolves torch 2.15.0 in ~6
min; this takes seconds.)
"""

from __future__ import annotations

import platform
import runpy
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
target, requirements = sys.argv[1], sys.argv[2:]
platform.machine = lambda: "aarch64"  # what packaging's markers read
# --platform manylinux_2_28 alone does not take older glibc tags (cuDNN's wheel
# is manylinux_2_27, cuSPARSELt's manylinux2014): every tag a glibc 2.28 system
# accepts, from 2.17 on, and the legacy alias of 2.17.
tags = [arg for glibc in range(17, 29) for arg in ("--platform", f"manylinux_2_{glibc}_aarch64")]
tags += ["--platform", "manylinux2014_aarch64"]
sys.argv = ["pip", "install", "--quiet", "--disable-pip-version-check", "--only-binary=:all:", *tags,
            "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--target", target,
            *requirements]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
