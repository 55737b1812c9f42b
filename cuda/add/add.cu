#include "cuda/add/add.h"
#include "cuda/common/elementwise.cuh"

namespace fusedops::cuda {
namespace {

struct AddOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A x, A y) const { return x + y; }
};

}  // namespace

cudaError_t launch_add(DType dtype, void* out, const void* a, const void* b,
                       const StridedLayout<3>& layout, int64_t numel, cudaStream_t stream) {
  return dispatch_dtype(dtype, [&]<typename T>() {
    return launch_binary(static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b),
                         layout, numel, stream, AddOp{});
  });
}

}  // namespace fusedops::cuda
