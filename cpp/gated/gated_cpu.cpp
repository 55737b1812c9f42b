// fusedops.swiglu / fusedops.geglu on the CPU: the shared elementwise loop
// with the functors of cuda/gated/gated_math.h, and below each kernel the op
// it serves.
//   swiglu, geglu                      the public ops; Python
//                                      (src/fusedops/ops/_gated.py) registers
//                                      their autograd and shape functions
//   _swiglu_nograd, _geglu_nograd      the same kernels without autograd
//   _swiglu_backward, _geglu_backward  (grad_gate, grad_up), see gated.h
#include "cpp/common/cpu_elementwise.h"
#include "cpp/common/define_op.h"
#include "cpp/gated/gated.h"
#include "cuda/gated/gated_math.h"

namespace fusedops {
namespace {

Tensor gated_cpu(const char* op, Activation act, const Tensor& gate, const OptTensor& up) {
  const GatedForwardCall c = gated_forward_setup(op, gate, up);
  const int64_t n = c.out.numel();
  if (n == 0) return c.out;
  dispatch_gate(act, [&]<Activation kAct>() {
    cpu::dispatch_floating(to_dtype(gate.scalar_type()), [&]<typename T>() {
      cpu::elementwise<T, 1, 2>(c.layout, n, {static_cast<T*>(c.out.data_ptr())},
                                {static_cast<const T*>(c.gate_data), static_cast<const T*>(c.up_data)},
                                GatedForward<kAct>{});
    });
  });
  return c.out;
}

GatedGrads gated_backward_cpu(const char* op, Activation act, const Tensor& grad, const Tensor& gate,
                              const OptTensor& up) {
  const GatedBackwardCall c = gated_backward_setup(op, grad, gate, up);
  if (c.numel == 0) return {c.grad_gate, c.grad_up};
  dispatch_gate(act, [&]<Activation kAct>() {
    cpu::dispatch_floating(to_dtype(gate.scalar_type()), [&]<typename T>() {
      cpu::elementwise<T, 2, 3>(c.layout, c.numel,
                                {static_cast<T*>(c.grad_gate_data), static_cast<T*>(c.grad_up_data)},
                                {static_cast<const T*>(c.grad_data), static_cast<const T*>(c.gate_data),
                                 static_cast<const T*>(c.up_data)},
                                GatedBackward<kAct>{});
    });
  });
  return {c.grad_gate, c.grad_up};
}

Tensor swiglu_cpu(const Tensor& gate, OptTensor up) { return gated_cpu(kSwiglu, Activation::Silu, gate, up); }
FUSEDOPS_OP(kSwiglu, "swiglu(Tensor gate, Tensor? up=None) -> Tensor", swiglu_cpu, swiglu_cuda)

Tensor geglu_cpu(const Tensor& gate, OptTensor up, std::string approximate) {
  return gated_cpu(kGeglu, geglu_activation(approximate), gate, up);
}
FUSEDOPS_OP(kGeglu, "geglu(Tensor gate, Tensor? up=None, str approximate='none') -> Tensor", geglu_cpu,
            geglu_cuda)

GatedGrads swiglu_backward_cpu(const Tensor& grad, const Tensor& gate, OptTensor up) {
  return gated_backward_cpu(kSwiglu, Activation::Silu, grad, gate, up);
}
FUSEDOPS_OP(kSwiglu, "_swiglu_backward(Tensor grad, Tensor gate, Tensor? up) -> (Tensor, Tensor)",
            swiglu_backward_cpu, swiglu_backward_cuda)

GatedGrads geglu_backward_cpu(const Tensor& grad, const Tensor& gate, OptTensor up, std::string approximate) {
  return gated_backward_cpu(kGeglu, geglu_activation(approximate), grad, gate, up);
}
FUSEDOPS_OP(kGeglu,
            "_geglu_backward(Tensor grad, Tensor gate, Tensor? up, str approximate) -> (Tensor, Tensor)",
            geglu_backward_cpu, geglu_backward_cuda)

}  // namespace

}  // namespace fusedops
