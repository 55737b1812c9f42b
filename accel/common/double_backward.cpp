// refuse_double_backward (accel.h): one boxed kernel for every backward op.
#include <torch/csrc/autograd/functions/basic_ops.h>

#include <memory>
#include <string>

#include "accel/common/accel.h"

namespace fusedops::accel {
namespace {

class RefuseDoubleBackward final : public c10::OperatorKernel {
 public:
  explicit RefuseDoubleBackward(std::string message) : message_(std::move(message)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, torch::jit::Stack* stack) const {
    variable_list differentiable;  // the inputs a graph of the gradients would reach
    if (at::GradMode::is_enabled()) {
      for (auto it = stack->end() - op.schema().arguments().size(); it != stack->end(); ++it) {
        if (it->isTensor() && it->toTensor().defined() && it->toTensor().requires_grad()) {
          differentiable.push_back(it->toTensor());
        }
      }
    }
    below_autograd([&] { op.redispatchBoxed(keys & c10::after_autograd_keyset, stack); });
    if (differentiable.empty()) return;
    auto node =
        make_node<torch::autograd::Error>(message_, torch::autograd::collect_next_edges(differentiable));
    for (auto it = stack->end() - op.schema().returns().size(); it != stack->end(); ++it) {
      if (it->isTensor() && it->toTensor().defined()) torch::autograd::set_history(it->toTensor(), node);
    }
  }

 private:
  std::string message_;
};

}  // namespace

void refuse_double_backward(Libraries& libraries, const char* backward_op, const char* op,
                            const char* instead) {
  const std::string message =
      std::string("fusedops.") + op +
      ": double backward is not supported (its backward is not itself differentiable); "
      "use " +
      instead + " where higher-order gradients are needed";
  for (torch::Library* library : {&libraries.autograd_cpu, &libraries.autograd_cuda}) {
    library->impl(backward_op,
                  torch::CppFunction::makeFromBoxedFunctor(std::make_unique<RefuseDoubleBackward>(message)));
  }
}

}  // namespace fusedops::accel
