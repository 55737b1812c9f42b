// fusedops.swiglu / fusedops.geglu on CUDA: device guard, allocation on the
// input's device, launch on torch's current stream (kernels in cuda/gated/).
#include "cpp/common/cuda.h"
#include "cpp/gated/gated.h"
#include "cuda/gated/gated.h"

namespace fusedops {
namespace {

Tensor gated_cuda(const char* op, Activation act, const Tensor& gate, const OptTensor& up) {
  const torch::stable::accelerator::DeviceGuard guard(gate.get_device_index());
  const GatedForwardCall c = gated_forward_setup(op, gate, up);
  const int64_t n = c.out.numel();
  if (n == 0) return c.out;
  cuda::check_cuda(
      op, cuda::launch_gated_forward(act, to_dtype(gate.scalar_type()), c.out.data_ptr(), c.gate_data,
                                     c.up_data, c.layout, n, cuda::current_stream(gate)));
  return c.out;
}

GatedGrads gated_backward_cuda(const char* op, Activation act, const Tensor& grad, const Tensor& gate,
                               const OptTensor& up) {
  const torch::stable::accelerator::DeviceGuard guard(gate.get_device_index());
  const GatedBackwardCall c = gated_backward_setup(op, grad, gate, up);
  if (c.numel == 0) return {c.grad_gate, c.grad_up};
  cuda::check_cuda(op, cuda::launch_gated_backward(act, to_dtype(gate.scalar_type()), c.grad_gate_data,
                                                   c.grad_up_data, c.grad_data, c.gate_data, c.up_data,
                                                   c.layout, c.numel, cuda::current_stream(gate)));
  return {c.grad_gate, c.grad_up};
}

}  // namespace

Tensor swiglu_cuda(const Tensor& gate, OptTensor up) {
  return gated_cuda(kSwiglu, Activation::Silu, gate, up);
}

Tensor geglu_cuda(const Tensor& gate, OptTensor up, std::string approximate) {
  return gated_cuda(kGeglu, geglu_activation(approximate), gate, up);
}

GatedGrads swiglu_backward_cuda(const Tensor& grad, const Tensor& gate, OptTensor up) {
  return gated_backward_cuda(kSwiglu, Activation::Silu, grad, gate, up);
}

GatedGrads geglu_backward_cuda(const Tensor& grad, const Tensor& gate, OptTensor up,
                               std::string approximate) {
  return gated_backward_cuda(kGeglu, geglu_activation(approximate), grad, gate, up);
}

}  // namespace fusedops
