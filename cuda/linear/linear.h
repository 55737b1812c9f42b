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
// s = saved[i * cols + j]; grad_z and saved contiguous [rows, cols]. With
// grad_b, in the same pass, the bias gradient grad_b[j] = sum_i grad_z[i, j]
// (contiguous, of T; summed before grad_z's rounding), which needs `partial`:
// linear_grad_bias_partials(...) elements of the opmath type (float; double
// for float64).
cudaError_t launch_linear_grad_z(DType dtype, const void* grad, int64_t gs0, int64_t gs1, const void* saved,
                                 void* grad_z, int64_t rows, int64_t cols, const LinearEpilogue& e,
                                 void* grad_b, void* partial, cudaStream_t stream);

// The size of launch_linear_grad_z's `partial`, or 0 where it cannot sum the
// bias (grad not dense, a pointer not 16-byte aligned, a row not whole 16-byte
// vectors, nothing to sum): the caller sums grad_z itself.
int64_t linear_grad_bias_partials(DType dtype, const void* grad, int64_t gs0, int64_t gs1, const void* saved,
                                  const void* grad_z, int64_t rows, int64_t cols);

}  // namespace fusedops::cuda
