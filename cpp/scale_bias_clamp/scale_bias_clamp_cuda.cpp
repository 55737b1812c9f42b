// fusedops.scale_bias_clamp on CUDA: device guard, allocation on the input's
// device, launch on torch's current stream (kernels in cuda/scale_bias_clamp/).
// A scale given as a tensor stays in device memory and is read there by the
// kernels (no .item(), no sync); a CPU scale or bias with CUDA x is rejected
// as a device mismatch (pass a Python number instead).
#include "cpp/common/cuda.h"
#include "cpp/scale_bias_clamp/scale_bias_clamp.h"
#include "cuda/scale_bias_clamp/scale_bias_clamp.h"

namespace fusedops {

Tensor sbc_cuda(const Tensor& x, const OptTensor& scale, const OptTensor& bias, double scale_value,
                double bias_value, std::optional<double> min, std::optional<double> max) {
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  const SbcForwardSetup s = sbc_forward_setup(x, scale, bias, scale_value, bias_value, min, max);
  const int64_t numel = s.out.numel();
  if (numel == 0) return s.out;
  if (nan_bound(min, max)) return fill_nan(s.out);
  cuda::check_cuda(
      kSbc, cuda::launch_sbc_forward(to_dtype(x.scalar_type()), s.out.data_ptr(), s.x.const_data_ptr(),
                                     s.bias ? s.bias->const_data_ptr() : nullptr, s.layout, numel, s.scalars,
                                     cuda::current_stream(x)));
  return s.out;
}

namespace {

// The kernels of one backward call; the O(blocks) scratch for their partial
// sums comes from the caching allocator, on the current stream.
void launch_backward(const SbcBackwardSetup& s) {
  const cuda::SbcBackwardProblem problem{.dtype = to_dtype(s.x.scalar_type()),
                                         .layout = s.layout,
                                         .numel = s.numel,
                                         .grad_out = s.grad_out.const_data_ptr(),
                                         .x = s.x.const_data_ptr(),
                                         .bias = s.bias ? s.bias->const_data_ptr() : nullptr,
                                         .scalars = s.scalars,
                                         .shape = s.shape,
                                         .grads = s.grads};
  const int device = s.x.get_device_index();
  const cuda::SbcBackwardPlan plan = cuda::plan_sbc_backward(problem, cuda::device_info(kSbc, device));
  std::optional<Tensor> partials;
  if (plan.partial_elems > 0) {
    const ScalarType acc = s.x.scalar_type() == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
    partials = empty(s.x, {plan.partial_elems}, acc);
  }
  cuda::check_cuda(kSbc, cuda::launch_sbc_backward(problem, plan, partials ? partials->data_ptr() : nullptr,
                                                   cuda::current_stream(s.x)));
}

}  // namespace

SbcGradTensors sbc_backward_cuda(const Tensor& grad_out, const Tensor& x, const OptTensor& scale,
                                 const OptTensor& bias, double scale_value, double bias_value,
                                 std::optional<double> min, std::optional<double> max,
                                 std::vector<bool> mask) {
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  const SbcBackwardSetup s =
      sbc_backward_setup(grad_out, x, scale, bias, scale_value, bias_value, min, max, mask);
  const SbcGrads& g = s.grads;
  if (s.numel > 0 && (g.grad_x || g.grad_scale || g.grad_bias_full || g.grad_bias_sum)) launch_backward(s);
  return sbc_backward_finish(s);
}

}  // namespace fusedops
