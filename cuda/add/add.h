// Launcher of the CUDA add kernels (cuda/add/add.cu); torch-free.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/kernel_types.h"

namespace fusedops::cuda {

cudaError_t launch_add(DType dtype, void* out, const void* a, const void* b,
                       const StridedLayout<3>& layout, int64_t numel, cudaStream_t stream);

}  // namespace fusedops::cuda
