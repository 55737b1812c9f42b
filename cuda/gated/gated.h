// Launchers of the CUDA kernels of fusedops.swiglu and fusedops.geglu
// (cuda/gated/gated.cu); torch-free. Both ops are one kernel family, the
// activation a template parameter.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/common/activations.h"
#include "cuda/common/kernel_types.h"

namespace fusedops::cuda {

// out = act(gate) * up over layout (out, gate, up); act is Silu, Gelu or GeluTanh.
cudaError_t launch_gated_forward(Activation act, DType dtype, void* out, const void* gate, const void* up,
                                 const StridedLayout<3>& layout, int64_t numel, cudaStream_t stream);

// grad_gate = grad * up * act'(gate), grad_up = grad * act(gate) over layout
// (grad_gate, grad_up, grad, gate, up).
cudaError_t launch_gated_backward(Activation act, DType dtype, void* grad_gate, void* grad_up,
                                  const void* grad, const void* gate, const void* up,
                                  const StridedLayout<5>& layout, int64_t numel, cudaStream_t stream);

}  // namespace fusedops::cuda
