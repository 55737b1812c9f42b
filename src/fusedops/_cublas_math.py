"""torch.backends.cuda.matmul's flags as the `cublas_math` argument of the ops
that run GEMMs (CublasMath in cpp/common/cublas_math.h), for the Python
autograd path; with C++ autograd the accelerator reads them in C++."""

from __future__ import annotations

import torch

# The getters behind torch.backends.cuda.matmul's attributes (which cost ~0.8 us
# each through its __getattr__). The reduction getters return (allow reduced
# precision, allow split-K) in newer torch and a bool before.
_get_tf32 = torch._C._get_cublas_allow_tf32
_get_fp16_reduction = torch._C._get_cublas_allow_fp16_reduced_precision_reduction
_get_bf16_reduction = torch._C._get_cublas_allow_bf16_reduced_precision_reduction


def _reduction_option(allowed) -> int:
    """torch's CuBLASReductionOption: 0 reduced precision (with split-K), 1
    full precision with split-K, 2 neither."""
    reduced, split_k = allowed if isinstance(allowed, tuple) else (allowed, True)
    return 0 if reduced else 1 if split_k else 2


@torch.compiler.assume_constant_result
def cublas_math(t: torch.Tensor) -> int:
    """The ops' `cublas_math` argument for GEMMs on `t`:
    torch.backends.cuda.matmul's flags that apply to its dtype, as F.linear
    reads them, and 0 off CUDA. The stable ABI cannot read them in C++. Under
    torch.compile this is a constant of the graph: dynamo's global-state guard
    re-traces when a flag changes."""
    if not t.is_cuda:
        return 0
    dtype = t.dtype
    if dtype == torch.float32:
        return int(_get_tf32())
    if dtype == torch.float16:
        return _reduction_option(_get_fp16_reduction()) << 1
    if dtype == torch.bfloat16:
        return _reduction_option(_get_bf16_reduction()) << 3
    return 0
