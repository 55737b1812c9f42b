"""Every kernel of linear's sm_90a GEMM once, at a small shape, for compute-sanitizer
(memcheck, racecheck): the erf GELU with and without aux z and the clamp, float16 and
bfloat16, with partial tiles in M and N, in the tile configuration FUSEDOPS_LINEAR_SM90
forces (pingpong or cooperative: required, since the tile rule would give so small a
GEMM to cuBLASLt); with a gradient also the backward's own kernels (the grad_z pass that
sums the bias gradient, then its sum over row blocks). Each result is checked against
float64 loosely (a wrong kernel, not rounding). Exits non-zero on a mismatch or when our GEMM is not built.

    FUSEDOPS_LINEAR_SM90=pingpong compute-sanitizer --tool memcheck python tools/gemm_sanitize.py
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F

import fusedops


def check(m: int, n: int, k: int, dtype: torch.dtype, grad: bool) -> None:
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype) / k**0.5
    b = torch.randn(n, device="cuda", dtype=dtype)
    g = torch.randn(m, n, device="cuda", dtype=dtype)  # dense: the backward's bias sum runs in the grad_z pass
    cases = {"gelu": dict(activation="gelu"), "gelu clamp": dict(activation="gelu", min=-0.1, max=0.5),
             "clamp": dict(min=-0.5, max=0.5), "relu max": dict(activation="relu", max=0.7)}
    act = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu}
    for name, kw in cases.items():
        leaves = [t.clone().requires_grad_(grad) for t in (x, w, b)]
        out = fusedops.linear(*leaves, **kw)
        leaves64 = [t.double().requires_grad_(grad) for t in (x, w, b)]
        ref = act[kw.get("activation")](F.linear(*leaves64))
        if "min" in kw or "max" in kw:
            ref = torch.clamp(ref, kw.get("min"), kw.get("max"))
        errors = {"out": _error(out, ref)}
        if grad:
            # No gradient where the output lies near a bound: z rounded to the half type may
            # put it on the other side there.
            bounds = [kw[key] for key in ("min", "max") if key in kw]
            near = torch.zeros_like(g, dtype=torch.bool)
            for bound in bounds:
                near |= (ref.detach() - bound).abs() <= 0.05
            out.backward(g.masked_fill(near, 0))
            ref.backward(g.double().masked_fill(near, 0))
            errors.update({leaf: _error(t.grad, t64.grad) for leaf, t, t64 in zip("xwb", leaves, leaves64, strict=True)})
        print(f"{m}x{n}x{k} {dtype} {name} grad={grad}: "
              + ", ".join(f"{key} {err:.2e}" for key, err in errors.items()), flush=True)
        if not max(errors.values()) < 0.05:
            sys.exit(f"gemm_sanitize: {name} at {m}x{n}x{k} {dtype}: errors {errors}")
    torch.cuda.synchronize()


def _error(t: torch.Tensor, ref: torch.Tensor) -> float:
    """The largest error relative to the reference's largest magnitude."""
    return ((t.double() - ref).abs().max() / ref.abs().max().clamp(min=1)).item()


def main() -> int:
    if "our sm_90a GEMM built" not in fusedops.build_info()["cuda_kernels"] or \
            torch.cuda.get_device_capability() != (9, 0):
        sys.exit("gemm_sanitize: needs a build with our sm_90a GEMM and an sm_90 device")
    if os.environ.get("FUSEDOPS_LINEAR_SM90") not in ("pingpong", "cooperative"):
        sys.exit("gemm_sanitize: set FUSEDOPS_LINEAR_SM90 to pingpong or cooperative (the kernels to check)")
    for dtype in (torch.bfloat16, torch.float16):
        for grad in (False, True):
            check(197, 264, 136, dtype, grad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
