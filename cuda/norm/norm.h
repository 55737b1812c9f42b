// Launchers of the normalization kernels (cuda/norm/norm.cu); torch-free.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/norm/norm_params.h"

namespace fusedops::cuda {

// device: layer_norm's staged forward runs on the blocks that fit it at once.
cudaError_t launch_norm_forward(const NormForwardArgs& args, const DeviceInfo& device, cudaStream_t stream);

// The blocks of the backward's grid (the rows of args.partial_*): fixed by the
// sizes and the device, so its sums are the same every call.
int64_t norm_backward_blocks(int64_t rows, int64_t cols, const DeviceInfo& device);
cudaError_t launch_norm_backward(const NormBackwardArgs& args, cudaStream_t stream);

}  // namespace fusedops::cuda
