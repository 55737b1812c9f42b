// fusedops.rotary on CUDA: the outputs on the inputs' device, one launch for q
// and k (or both gradients) on torch's current stream (kernel in cuda/rotary/).
#include "cpp/common/cuda.h"
#include "cpp/rotary/rotary.h"
#include "cuda/rotary/rotary.h"

namespace fusedops {
namespace {

// `call` run on cos's device (every tensor's, after the checks).
RotaryOutputs run(const RotaryCall& call, const Tensor& cos) {
  const torch::stable::accelerator::DeviceGuard guard(cos.get_device_index());
  cuda::check_cuda(kRotary, cuda::launch_rotary(call.problem, cuda::current_stream(cos)));
  return {call.q_out, call.k_out};
}

}  // namespace

RotaryOutputs rotary_cuda(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin,
                          bool interleaved) {
  return run(rotary_setup(q, k, cos, sin, interleaved), cos);
}

RotaryOutputs rotary_backward_cuda(const std::optional<Tensor>& grad_q, const std::optional<Tensor>& grad_k,
                                   const Tensor& cos, const Tensor& sin, bool interleaved) {
  return run(rotary_backward_setup(grad_q, grad_k, cos, sin, interleaved), cos);
}

}  // namespace fusedops
