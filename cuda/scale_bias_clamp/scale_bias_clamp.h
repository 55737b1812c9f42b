// Launchers of the CUDA scale_bias_clamp kernels (cuda/scale_bias_clamp/scale_bias_clamp.cu); torch-free.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/kernel_types.h"
#include "cuda/scale_bias_clamp/scale_bias_clamp_params.h"

namespace fusedops::cuda {

// out = clamp(x * scale + bias, lo, hi) over layout (out, x, bias); bias may be null.
cudaError_t launch_sbc_forward(DType dtype, void* out, const void* x, const void* bias,
                               const StridedLayout<3>& layout, int64_t numel, const SbcScalars& scalars,
                               cudaStream_t stream);

struct SbcBackwardProblem {
  DType dtype;
  StridedLayout<4> layout;  // (x-shaped contiguous reference, grad_out, x, bias)
  int64_t numel;
  const void* grad_out;
  const void* x;
  const void* bias;  // null: scalars.bias_value
  SbcScalars scalars;
  SbcShape shape;  // classify_backward(layout, ...)
  SbcGrads grads;
};

// Grid of the main backward kernel and the size of its partial-sum scratch
// (elements of float, or double for float64), which the caller allocates.
struct SbcBackwardPlan {
  bool vectorized = false;
  unsigned grid_x = 1, grid_y = 1, block_x = 256, block_y = 1;
  int64_t partial_elems = 0;
};

SbcBackwardPlan plan_sbc_backward(const SbcBackwardProblem& problem, const DeviceInfo& dev);

// One pass over grad_out and x, then tiny fixed-order reductions of the
// partials: deterministic, no atomics.
cudaError_t launch_sbc_backward(const SbcBackwardProblem& problem, const SbcBackwardPlan& plan,
                                void* partials, cudaStream_t stream);

}  // namespace fusedops::cuda
