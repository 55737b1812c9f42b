"""fusedops: fused PyTorch operators in C++ and CUDA.

The operators are registered as torch.ops.fusedops.*; the functions here are
the documented entry points. See `python -m fusedops info`.
"""

from __future__ import annotations

import sys
from typing import Any

from . import _loader

__all__ = ["__version__", "add", "build_info", "linear", "nn", "scale_bias_clamp"]


def build_info() -> dict[str, Any]:
    """What this binary was built for: version, torch and CUDA versions, CUDA
    arch list, compiler and build type."""
    return _loader.built_for()


# `python -m fusedops ...` imports this package before running __main__, and
# its `info` must work even when the binary does not match; runpy sets
# sys.argv[0] to "-m" while it locates the module. Anywhere else a mismatch
# is an ImportError at import.
try:
    _loader.load()
    load_error: ImportError | None = None
except ImportError as error:
    if sys.argv[:1] != ["-m"]:
        raise
    load_error = error

__version__: str = build_info()["version"]

if load_error is None:  # the ops' registrations need the loaded library
    from . import nn  # noqa: E402
    from .ops.add import add  # noqa: E402
    from .ops.linear import linear  # noqa: E402
    from .ops.scale_bias_clamp import scale_bias_clamp  # noqa: E402
