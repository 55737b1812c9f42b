// fusedops.swiglu / fusedops.geglu's C++ autograd and C entries. The node
// saves gate and up (not the product); the backward op recomputes act(gate)
// from them. With up None (gate split in halves) the node has one input whose
// gradient, from the backward op's grad_gate, holds both halves.
#include <string>

#include "accel/common/accel.h"
#include "accel/common/python.h"

namespace fusedops::accel {
namespace {

using SwigluSignature = Tensor(const Tensor&, const OptTensor&);
using GegluSignature = Tensor(const Tensor&, const OptTensor&, c10::string_view);
using SwigluBackwardSignature = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&);
using GegluBackwardSignature = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&,
                                                          c10::string_view);

struct GatedBackward final : torch::autograd::Node {
  torch::autograd::SavedVariable gate, up;
  bool has_up = false;
  std::optional<std::string> approximate;  // geglu's; none for swiglu

  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return variable_list(2);
    const std::array<bool, 2> mask{task_should_compute_output(0), has_up && task_should_compute_output(1)};
    const OptTensor u = has_up ? OptTensor(unpack(up)) : std::nullopt;
    auto computed = backward_call([&] {
      static const auto swiglu = fusedops_op<SwigluBackwardSignature>("_swiglu_backward");
      static const auto geglu = fusedops_op<GegluBackwardSignature>("_geglu_backward");
      return approximate ? geglu.call(grads[0], unpack(gate), u, *approximate)
                         : swiglu.call(grads[0], unpack(gate), u);
    });
    return requested(std::move(computed), mask);
  }
  void release_variables() override {
    gate.reset_data();
    up.reset_data();
  }
  std::string name() const override {
    return approximate ? "fusedops::GegluBackward" : "fusedops::SwigluBackward";
  }
};

// The autograd kernel's body: `forward` runs the op below autograd; a node
// is built only where a gradient is needed.
template <typename F>
Tensor gated_autograd(const char* op, const Tensor& gate, const OptTensor& up,
                      std::optional<std::string> approximate, const F& forward) {
  refuse_forward_ad(op, gate, up);
  if (!torch::autograd::compute_requires_grad(gate, up)) return below_autograd(forward);
  auto node = make_node<GatedBackward>();
  node->set_next_edges(torch::autograd::collect_next_edges(gate, up));
  Tensor out = below_autograd(forward);  // checks the arguments before anything is saved
  node->gate = torch::autograd::SavedVariable(gate, false);
  node->has_up = up.has_value() && up->defined();
  if (node->has_up) node->up = torch::autograd::SavedVariable(*up, false);
  node->approximate = std::move(approximate);
  torch::autograd::set_history(out, node);
  return out;
}

Tensor swiglu_autograd(c10::DispatchKeySet keys, const Tensor& gate, const OptTensor& up) {
  static const auto swiglu = fusedops_op<SwigluSignature>("swiglu");
  return gated_autograd("swiglu", gate, up, std::nullopt,
                        [&] { return swiglu.redispatch(keys & c10::after_autograd_keyset, gate, up); });
}

Tensor geglu_autograd(c10::DispatchKeySet keys, const Tensor& gate, const OptTensor& up,
                      c10::string_view approximate) {
  static const auto geglu = fusedops_op<GegluSignature>("geglu");
  return gated_autograd("geglu", gate, up, std::string(approximate), [&] {
    return geglu.redispatch(keys & c10::after_autograd_keyset, gate, up, approximate);
  });
}

void register_swiglu(Libraries& libraries) {
  libraries.autograd_and_backward("swiglu", TORCH_FN(swiglu_autograd));
}
void register_geglu(Libraries& libraries) {
  libraries.autograd_and_backward("geglu", TORCH_FN(geglu_autograd));
}

// swiglu(gate, up)'s C entry.
PyObject* swiglu_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor up;
  if (n != 2 || !plain_tensors({args[0]}) || !optional_tensor(args[1], up))
    return call_fallback(fallback, args, n);
  return run_op([&, gate = tensor_of(args[0])] {
    static const auto swiglu = fusedops_op<SwigluSignature>("swiglu");
    return swiglu.call(gate, up);
  });
}

// geglu(gate, up, approximate)'s C entry.
PyObject* geglu_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor up;
  std::optional<c10::string_view> approximate;
  if (n != 3 || !plain_tensors({args[0]}) || !optional_tensor(args[1], up) ||
      !optional_string(args[2], approximate) || !approximate) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, gate = tensor_of(args[0])] {
    static const auto geglu = fusedops_op<GegluSignature>("geglu");
    return geglu.call(gate, up, *approximate);
  });
}

}  // namespace

FUSEDOPS_ACCEL_OP(swiglu, register_swiglu);
FUSEDOPS_ACCEL_OP(geglu, register_geglu);
FUSEDOPS_ACCEL_ENTRY(swiglu, swiglu_entry);
FUSEDOPS_ACCEL_ENTRY(geglu, geglu_entry);

}  // namespace fusedops::accel
