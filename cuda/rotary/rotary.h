// Launcher of the CUDA rotary kernel (cuda/rotary/rotary.cu); torch-free.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/rotary/rotary_params.h"

namespace fusedops::cuda {

// The forward or (p.transpose) backward of both tensors of `p` in one launch.
cudaError_t launch_rotary(const RotaryProblem& p, cudaStream_t stream);

}  // namespace fusedops::cuda
