// fusedops.swiglu / fusedops.geglu CUDA kernels: the shared elementwise
// kernels (dense, rows, strided; 16-byte accesses where the layout allows)
// with the functors of gated_math.h, one instantiation per activation.
#include "cuda/common/elementwise.cuh"
#include "cuda/gated/gated.h"
#include "cuda/gated/gated_math.h"

namespace fusedops::cuda {

cudaError_t launch_gated_forward(Activation act, DType dtype, void* out, const void* gate, const void* up,
                                 const StridedLayout<3>& layout, int64_t numel, cudaStream_t stream) {
  return dispatch_gate(act, [&]<Activation kAct>() {
    return dispatch_dtype(dtype, [&]<typename T>() {
      const Operands<T, 1, 2> p{{static_cast<T*>(out)},
                                {static_cast<const T*>(gate), static_cast<const T*>(up)}};
      return launch_elementwise(p, layout, numel, stream, GatedForward<kAct>{});
    });
  });
}

cudaError_t launch_gated_backward(Activation act, DType dtype, void* grad_gate, void* grad_up,
                                  const void* grad, const void* gate, const void* up,
                                  const StridedLayout<5>& layout, int64_t numel, cudaStream_t stream) {
  return dispatch_gate(act, [&]<Activation kAct>() {
    return dispatch_dtype(dtype, [&]<typename T>() {
      const Operands<T, 2, 3> p{
          {static_cast<T*>(grad_gate), static_cast<T*>(grad_up)},
          {static_cast<const T*>(grad), static_cast<const T*>(gate), static_cast<const T*>(up)}};
      return launch_elementwise(p, layout, numel, stream, GatedBackward<kAct>{});
    });
  });
}

}  // namespace fusedops::cuda
