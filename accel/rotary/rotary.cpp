// fusedops.rotary's C++ autograd: one node for both outputs, with q's and k's
// gradients. The backward is the transposed rotation of the outputs'
// gradients, so only cos and sin are saved (nothing of q's size); they take no
// gradient themselves, and a call that would want one is refused. An output
// whose gradient is undefined (not used) is left out of the backward.
#include "accel/common/accel.h"
#include "accel/common/python.h"

namespace fusedops::accel {
namespace {

using RotaryOutputs = std::tuple<Tensor, Tensor>;
using RotarySignature = RotaryOutputs(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool);
using RotaryBackwardSignature = RotaryOutputs(const OptTensor&, const OptTensor&, const Tensor&,
                                              const Tensor&, bool);

struct RotaryBackward final : torch::autograd::Node {
  torch::autograd::SavedVariable cos, sin;
  bool interleaved = false;

  variable_list apply(variable_list&& grads) override {
    static const auto backward = fusedops_op<RotaryBackwardSignature>("_rotary_backward");
    // The op's None: a gradient not asked for, or of an output not used.
    const auto given = [&](size_t i) {
      return task_should_compute_output(i) && grads[i].defined() ? OptTensor(grads[i]) : std::nullopt;
    };
    const OptTensor grad_q = given(0), grad_k = given(1);
    if (!grad_q && !grad_k) return variable_list(2);
    auto computed =
        backward_call([&] { return backward.call(grad_q, grad_k, unpack(cos), unpack(sin), interleaved); });
    return requested(std::move(computed), {grad_q.has_value(), grad_k.has_value()});
  }
  void release_variables() override {
    cos.reset_data();
    sin.reset_data();
  }
  std::string name() const override { return "fusedops::RotaryBackward"; }
};

void refuse_table_grad(const char* name, const Tensor& t) {
  TORCH_CHECK(!t.requires_grad(), "fusedops.rotary: ", name,
              " must not require grad: rotary gives cos and sin no gradient (pass ", name, ".detach())");
}

RotaryOutputs rotary_autograd(c10::DispatchKeySet keys, const Tensor& q, const Tensor& k, const Tensor& cos,
                              const Tensor& sin, bool interleaved) {
  static const auto rotary = fusedops_op<RotarySignature>("rotary");
  refuse_forward_ad("rotary", q, k, cos, sin);
  const auto forward = [&] {
    return rotary.redispatch(keys & c10::after_autograd_keyset, q, k, cos, sin, interleaved);
  };
  if (!torch::autograd::compute_requires_grad(q, k, cos, sin)) return below_autograd(forward);
  refuse_table_grad("cos", cos);
  refuse_table_grad("sin", sin);
  auto node = make_node<RotaryBackward>();
  node->set_next_edges(torch::autograd::collect_next_edges(q, k));
  auto [q_out, k_out] = below_autograd(forward);  // checks the arguments before anything is saved
  node->cos = torch::autograd::SavedVariable(cos, false);
  node->sin = torch::autograd::SavedVariable(sin, false);
  node->interleaved = interleaved;
  torch::autograd::set_history(q_out, node);  // the node's output 0
  torch::autograd::set_history(k_out, node);  // and 1
  return {q_out, k_out};
}

void register_rotary(Libraries& libraries) { libraries.autograd("rotary", TORCH_FN(rotary_autograd)); }

// rotary(q, k, cos, sin, interleaved)'s C entry: a tuple (q_out, k_out).
PyObject* rotary_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  bool interleaved = false;
  if (n != 5 || !plain_tensors({args[0], args[1], args[2], args[3]}) || !boolean(args[4], interleaved)) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, q = tensor_of(args[0]), k = tensor_of(args[1]), cos = tensor_of(args[2]),
                 sin = tensor_of(args[3])] {
    static const auto rotary = fusedops_op<RotarySignature>("rotary");
    return rotary.call(q, k, cos, sin, interleaved);
  });
}

}  // namespace

FUSEDOPS_ACCEL_OP(rotary, register_rotary);
FUSEDOPS_ACCEL_ENTRY(rotary, rotary_entry);

}  // namespace fusedops::accel
