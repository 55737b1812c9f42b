"""fusedops: fused PyTorch operators in C++ and CUDA.

The operators are registered as torch.ops.fusedops.*; the functions here are
the documented entry points. See `python -m fusedops info`.
"""

from __future__ import annotations

from typing import Any

from . import _loader

__all__ = [
    "__version__", "add", "add_layer_norm", "add_rms_norm", "build_info", "geglu", "layer_norm", "linear",
    "linear_cross_entropy", "nn", "patch", "rms_norm", "rotary", "scale_bias_clamp", "swiglu",
]


def build_info() -> dict[str, Any]:
    """What this binary was built for: version, torch and CUDA versions, CUDA
    arch list, compiler, build type, the torch minors it carries C++ autograd
    for; and `autograd`, the path the ops take under this torch and why."""
    info = _loader.built_for()
    if _loader.AUTOGRAD is not None:
        info["autograd"] = _loader.AUTOGRAD.reason
    return info


# A binary that cannot run here is an ImportError that says why, rule by rule,
# and what to install; `python -m fusedops info` imports this package first, so
# there it stops with that same report.
_loader.load()

__version__: str = build_info()["version"]

from . import nn  # noqa: E402
from .ops.add import add  # noqa: E402
from .ops.add_layer_norm import add_layer_norm  # noqa: E402
from .ops.add_rms_norm import add_rms_norm  # noqa: E402
from .ops.geglu import geglu  # noqa: E402
from .ops.layer_norm import layer_norm  # noqa: E402
from .ops.linear import linear  # noqa: E402
from .ops.linear_cross_entropy import linear_cross_entropy  # noqa: E402
from .ops.rms_norm import rms_norm  # noqa: E402
from .ops.rotary import rotary  # noqa: E402
from .ops.scale_bias_clamp import scale_bias_clamp  # noqa: E402
from .ops.swiglu import swiglu  # noqa: E402
from .patching import patch  # noqa: E402
