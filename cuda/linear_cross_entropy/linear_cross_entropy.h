// Launchers of fusedops.linear_cross_entropy's kernels (torch-free; opmath:
// see lce_math.h); the GEMMs go through cuBLASLt (cpp/common/lt_gemm.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/common/kernel_types.h"
#include "cuda/linear_cross_entropy/lce_math.h"

namespace fusedops::cuda {

// One block a token. A counted token whose target is out of range gets a NaN
// loss and NaN gradients: no fault, no trap, no host synchronization.
cudaError_t launch_lce_rows(const LceRows& r, cudaStream_t stream);

// A vocab slab's gradient at the logits from the rows' log-sum-exp
// (lce_slab_grad): no reduction, no host synchronization.
cudaError_t launch_lce_slab_grad(const LceSlab& s, cudaStream_t stream);

// The rows' values the fused slab GEMM's epilogue reads besides their lse
// (cuda/linear_cross_entropy/sm90/slab_gemm.h), float32 [s.rows] each, from
// s's rows (all of them; its logits and slab unused): the factor (NaN where
// the target is out of range) and the target as a float (-1 ignored, -2 out
// of range); and columns [vocab] = 0, 1, ... Float32 opmath only.
cudaError_t launch_lce_slab_rows(const LceSlab& s, float* factor, float* target, float* columns,
                                 cudaStream_t stream);

// counts[0] = the number of targets that are not ignore_index, counts[1] =
// 1 / counts[0] (inf for none), both opmath of `dtype`.
cudaError_t launch_lce_count(DType dtype, const int64_t* target, int64_t n, int64_t ignore_index,
                             void* counts, cudaStream_t stream);

// out = sum of loss[0, n) (opmath), divided by *count where count is given;
// in a fixed order (the same bits every call).
cudaError_t launch_lce_total(DType dtype, const void* loss, int64_t n, const void* count, void* out,
                             cudaStream_t stream);

// acc[j] (+)= sum over rows i of dlogits[i * ld + j] (dlogits of dtype, acc
// opmath [cols]), each column summed in row order.
cudaError_t launch_lce_column_sums(DType dtype, const void* dlogits, int64_t rows, int64_t cols, int64_t ld,
                                   void* acc, bool accumulate, cudaStream_t stream);

// out[i] = dtype(acc[i] * *factor) over n contiguous elements (acc and factor opmath).
cudaError_t launch_lce_scale(DType dtype, const void* acc, const void* factor, void* out, int64_t n,
                             cudaStream_t stream);

}  // namespace fusedops::cuda
