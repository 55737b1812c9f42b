// Launcher of linear's own Hopper GEMM (sm_90a, CUTLASS; gemm.cu): out[M, N] =
// gelu(x[M, K] . w[N, K]^T + bias), the erf GELU on the fp32 accumulator, and
// optionally aux = the pre-activation z (rounded to the dtype) for the
// backward. Torch-free. Compiled only where CUTLASS's headers were found
// (FUSEDOPS_WITH_CUTLASS); the caller checks the device is sm_90 and that
// `supported` holds, else it takes the cuBLASLt path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/common/kernel_types.h"

namespace fusedops::cuda::sm90 {

// Row-major x [M, K] (row stride ldx), w [N, K] (row stride ldw), out and aux
// dense [M, N]; bias [N] dense or null; aux null when not wanted.
struct LinearGemm {
  DType dtype;
  const void* x;
  int64_t ldx;
  const void* w;
  int64_t ldw;
  const void* bias;
  void* out;
  void* aux;
  int64_t m, n, k;
  int sm_count;
};

// What the kernels take: float16 / bfloat16, M > 64 (smaller M is a GEMV-like
// shape cuBLASLt serves better), K <= 4096 (beyond, cuBLASLt + the pass is
// faster), sizes within int32, and what TMA needs: 16-byte aligned pointers
// and row strides.
bool supported(const LinearGemm& g);

// Workspace bytes the launch needs (the tile scheduler's; may be 0).
size_t workspace_size(const LinearGemm& g);

cudaError_t launch(const LinearGemm& g, void* workspace, cudaStream_t stream);

// The same per dtype and aux or not, one heavy translation unit each
// (gemm_<dtype>[_aux].cu), so that they compile in parallel.
size_t workspace_size_bf16(const LinearGemm& g);
size_t workspace_size_fp16(const LinearGemm& g);
cudaError_t launch_bf16(const LinearGemm& g, void* workspace, cudaStream_t stream);
cudaError_t launch_bf16_aux(const LinearGemm& g, void* workspace, cudaStream_t stream);
cudaError_t launch_fp16(const LinearGemm& g, void* workspace, cudaStream_t stream);
cudaError_t launch_fp16_aux(const LinearGemm& g, void* workspace, cudaStream_t stream);

}  // namespace fusedops::cuda::sm90
