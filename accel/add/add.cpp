// fusedops.add's C++ autograd: torch.add's rule, each input's gradient summed
// over the dimensions it was broadcast along (sum_to over symbolic sizes, so
// dynamic shapes hold; built of differentiable ops: double backward works).
#include "accel/common/accel.h"
#include "accel/common/python.h"

namespace fusedops::accel {
namespace {

using AddSignature = Tensor(const Tensor&, const Tensor&);

struct AddBackward final : torch::autograd::Node {
  std::vector<c10::SymInt> a_sizes, b_sizes;

  variable_list apply(variable_list&& grads) override {
    variable_list out(2);
    const Tensor& grad = grads[0];
    if (!grad.defined()) return out;
    if (task_should_compute_output(0)) out[0] = at::sum_to(grad, a_sizes);
    if (task_should_compute_output(1)) out[1] = at::sum_to(grad, b_sizes);
    return out;
  }
  std::string name() const override { return "fusedops::AddBackward"; }
};

Tensor add_autograd(c10::DispatchKeySet keys, const Tensor& a, const Tensor& b) {
  static const auto add = fusedops_op<AddSignature>("add");
  refuse_forward_ad("add", a, b);
  const auto forward = [&] { return add.redispatch(keys & c10::after_autograd_keyset, a, b); };
  if (!torch::autograd::compute_requires_grad(a, b)) return below_autograd(forward);
  auto node = make_node<AddBackward>();
  node->set_next_edges(torch::autograd::collect_next_edges(a, b));
  node->a_sizes = a.sym_sizes().vec();
  node->b_sizes = b.sym_sizes().vec();
  Tensor out = below_autograd(forward);
  torch::autograd::set_history(out, node);
  return out;
}

void register_add(Libraries& libraries) { libraries.autograd("add", TORCH_FN(add_autograd)); }

// add(a, b)'s C entry.
PyObject* add_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  if (n != 2 || !plain_tensors({args[0], args[1]})) return call_fallback(fallback, args, n);
  return run_op([a = tensor_of(args[0]), b = tensor_of(args[1])] {
    static const auto add = fusedops_op<AddSignature>("add");
    return add.call(a, b);
  });
}

}  // namespace

FUSEDOPS_ACCEL_OP(add, register_add);
FUSEDOPS_ACCEL_ENTRY(add, add_entry);

}  // namespace fusedops::accel
