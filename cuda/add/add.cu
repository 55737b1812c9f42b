// fusedops.add's CUDA kernels: the shared elementwise kernels with a + b.
#include "cuda/add/add.h"
#include "cuda/add/add_math.h"
#include "cuda/common/elementwise.cuh"

namespace fusedops::cuda {

cudaError_t launch_add(DType dtype, void* out, const void* a, const void* b, const StridedLayout<3>& layout,
                       int64_t numel, cudaStream_t stream) {
  return dispatch_dtype(dtype, [&]<typename T>() {
    const Operands<T, 1, 2> p{{static_cast<T*>(out)}, {static_cast<const T*>(a), static_cast<const T*>(b)}};
    return launch_elementwise(p, layout, numel, stream, AddOp{});
  });
}

}  // namespace fusedops::cuda
