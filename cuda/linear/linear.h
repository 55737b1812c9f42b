// Launchers of the elementwise kernels of fusedops.linear (cuda/linear/linear.cu);
// torch-free. The GEMMs themselves go through cuBLASLt (cpp/linear/lt_gemm_cuda.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/kernel_types.h"
#include "cuda/linear/linear_math.h"

namespace fusedops::cuda {

// out[i] = clamp(T(act(z[i]))) over n contiguous elements; out may equal z.
cudaError_t launch_linear_epilogue(DType dtype, const void* z, void* out, int64_t n, const LinearEpilogue& e,
                                   cudaStream_t stream);

// grad_z[i, j] = grad[i * gs0 + j * gs1] * act'(s) * [lo <= T(act(s)) <= hi],
// s = saved[i * cols + j]; grad_z and saved contiguous [rows, cols].
cudaError_t launch_linear_grad_z(DType dtype, const void* grad, int64_t gs0, int64_t gs1, const void* saved,
                                 void* grad_z, int64_t rows, int64_t cols, const LinearEpilogue& e,
                                 cudaStream_t stream);

}  // namespace fusedops::cuda
