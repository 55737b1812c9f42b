// The normalization ops' CUDA backend: the device guard, torch's current
// stream, the launch and its check (kernels in cuda/norm/).
#include "cpp/common/cuda.h"
#include "cpp/norm/norm.h"
#include "cuda/norm/norm.h"

namespace fusedops {

const NormBackend kNormCuda{
    .forward =
        [](const NormForwardArgs& args, const Tensor& like, const char* op) {
          const torch::stable::accelerator::DeviceGuard guard(like.get_device_index());
          cuda::check_cuda(op, cuda::launch_norm_forward(args, cuda::device_info(op, like.get_device_index()),
                                                         cuda::current_stream(like)));
        },
    .backward_blocks =
        [](int64_t rows, int64_t cols, const Tensor& like, const char* op) {
          return cuda::norm_backward_blocks(rows, cols, cuda::device_info(op, like.get_device_index()));
        },
    .backward =
        [](const NormBackwardArgs& args, const Tensor& like, const char* op) {
          const torch::stable::accelerator::DeviceGuard guard(like.get_device_index());
          cuda::check_cuda(op, cuda::launch_norm_backward(args, cuda::current_stream(like)));
        },
    .narrow_output = true,
};

}  // namespace fusedops
