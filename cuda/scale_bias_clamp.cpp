// fusedops.scale_bias_clamp on CUDA: checks, allocation, device guard, current
// stream, launch checks. A scale given as a tensor stays in device memory and
// is read there by the kernels (no .item(), no sync); a CPU scale or bias with
// CUDA x is rejected as a device mismatch (pass a Python number instead).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "cpp/scale_bias_clamp.h"
#include "cuda/glue.h"
#include "cuda/scale_bias_clamp_kernel.h"

namespace fusedops {
namespace {

using OptTensor = std::optional<at::Tensor>;

at::Tensor sbc_cuda(const at::Tensor& x, const OptTensor& scale, const OptTensor& bias,
                    double scale_value, double bias_value, std::optional<double> min,
                    std::optional<double> max) {
  sbc_check(x, scale, bias);
  const c10::cuda::CUDAGuard guard(x.device());
  SbcForwardSetup s = sbc_forward_setup(x, scale, bias, scale_value, bias_value, min, max);
  if (s.out.numel() == 0) return s.out;
  cuda::check_launch(kSbc, cuda::launch_sbc_forward(
                               to_dtype(x.scalar_type()), s.out.data_ptr(), s.x.const_data_ptr(),
                               s.bias.defined() ? s.bias.const_data_ptr() : nullptr, s.layout,
                               s.out.numel(), s.scalars, cuda::device_info(x.get_device()),
                               c10::cuda::getCurrentCUDAStream()));
  return s.out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sbc_backward_cuda(
    const at::Tensor& grad_out, const at::Tensor& x, const OptTensor& scale, const OptTensor& bias,
    double scale_value, double bias_value, std::optional<double> min, std::optional<double> max,
    std::array<bool, 3> mask) {
  sbc_check_backward(grad_out, x, scale, bias);
  const c10::cuda::CUDAGuard guard(x.device());
  SbcBackwardSetup s = sbc_backward_setup(grad_out, x, scale, bias, scale_value, bias_value, min, max, mask);
  const bool any = s.grads.grad_x || s.grads.grad_scale || s.grads.grad_bias_full || s.grads.grad_bias_sum;
  if (s.numel > 0 && any) {
    cuda::SbcBackwardProblem problem{to_dtype(x.scalar_type()),
                                     s.layout,
                                     s.numel,
                                     s.grad_out.const_data_ptr(),
                                     s.x.const_data_ptr(),
                                     s.bias.defined() ? s.bias.const_data_ptr() : nullptr,
                                     s.scalars,
                                     s.shape,
                                     s.grads};
    const cuda::SbcBackwardPlan plan = cuda::plan_sbc_backward(problem, cuda::device_info(x.get_device()));
    // O(blocks) scratch for the partial sums, from the caching allocator.
    at::Tensor partials;
    if (plan.partial_elems > 0) {
      const at::ScalarType acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
      partials = at::empty({plan.partial_elems}, x.options().dtype(acc));
    }
    cuda::check_launch(kSbc, cuda::launch_sbc_backward(problem, plan,
                                                       partials.defined() ? partials.data_ptr() : nullptr,
                                                       c10::cuda::getCurrentCUDAStream()));
  }
  return sbc_backward_finish(s);
}

}  // namespace

TORCH_LIBRARY_IMPL(fusedops, CUDA, m) {
  m.impl("scale_bias_clamp", &sbc_cuda);
  m.impl("scale_bias_clamp_backward", &sbc_backward_cuda);
}

}  // namespace fusedops
