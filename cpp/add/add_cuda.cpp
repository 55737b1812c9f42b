// fusedops.add on CUDA: allocation on the input's device, launch on torch's
// current stream (kernels in cuda/add/).
#include "cpp/add/add.h"
#include "cpp/common/cuda.h"
#include "cuda/add/add.h"

namespace fusedops {

Tensor add_cuda(const Tensor& a, const Tensor& b) {
  const std::vector<int64_t> shape = add_output_shape(a, b);
  const torch::stable::accelerator::DeviceGuard guard(a.get_device_index());
  Tensor out = empty(a, shape);
  if (out.numel() == 0) return out;
  Tensor x = a, y = b;
  const auto layout = elementwise_layout<3>(out.sizes(), {&x, &y});
  cuda::check_cuda(kAdd, cuda::launch_add(to_dtype(a.scalar_type()), out.data_ptr(), x.data_ptr(),
                                          y.data_ptr(), layout, out.numel(), cuda::current_stream(a)));
  return out;
}

}  // namespace fusedops
