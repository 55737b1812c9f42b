// The C++ autograd and the C entries of the normalization ops (rms_norm,
// add_rms_norm, layer_norm, add_layer_norm).
// One node serves the four: it saves x (summed for the add_ ops), the weight
// and the forward's per-row statistics (rstd; layer_norm also mean), nothing
// else of x's size, and calls its op's backward op, which adds the
// gradient arriving at summed into x's; x and residual get that same gradient.
#include "accel/common/accel.h"
#include "accel/common/python.h"

namespace fusedops::accel {
namespace {

using torch::autograd::SavedVariable;
using Pair = std::tuple<Tensor, Tensor>;
using Triple = std::tuple<Tensor, Tensor, Tensor>;
using OptDtype = std::optional<c10::ScalarType>;
using RmsSignature = Tensor(const Tensor&, const OptTensor&, double, double, OptDtype);
using AddRmsSignature = Pair(const Tensor&, const Tensor&, const OptTensor&, double, double, OptDtype);
using RmsForwardSignature = Pair(const Tensor&, const OptTensor&, double, double, OptDtype);
using AddRmsForwardSignature = Triple(const Tensor&, const Tensor&, const OptTensor&, double, double,
                                      OptDtype);
using RmsBackwardSignature = Pair(const Tensor&, const Tensor&, const OptTensor&, const Tensor&, double,
                                  const OptTensor&, std::array<bool, 2>);
using LayerSignature = Tensor(const Tensor&, const OptTensor&, const OptTensor&, double, OptDtype);
using AddLayerSignature = Pair(const Tensor&, const Tensor&, const OptTensor&, const OptTensor&, double,
                               OptDtype);
using LayerForwardSignature = Triple(const Tensor&, const OptTensor&, const OptTensor&, double, OptDtype);
using AddLayerForwardSignature = std::tuple<Tensor, Tensor, Tensor, Tensor>(const Tensor&, const Tensor&,
                                                                            const OptTensor&,
                                                                            const OptTensor&, double,
                                                                            OptDtype);
using LayerBackwardSignature = Triple(const Tensor&, const Tensor&, const OptTensor&, const Tensor&,
                                      const Tensor&, const OptTensor&, std::array<bool, 3>);

OptTensor defined_or_none(const Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }

// The node's inputs: x, residual (add_ ops), then the parameters (weight;
// layer_norm also bias). Its outputs: out, and summed for the add_ ops.
struct NormBackward final : torch::autograd::Node {
  SavedVariable x, weight, mean, rstd;
  bool center = false, add = false, has_weight = false, has_bias = false;
  double offset = 0.0;

  size_t params_at() const { return add ? 2 : 1; }

  // x, or the output summed for the add_ ops.
  Tensor saved_x() { return add ? unpack_output(x, this) : unpack(x); }

  variable_list apply(variable_list&& grads) override {
    const Tensor grad = grads[0];
    // summed has no history where neither x nor residual requires grad.
    const Tensor grad_summed = add && grads.size() > 1 ? grads[1] : Tensor();
    variable_list out(params_at() + (center ? 2 : 1));
    const bool want_x = task_should_compute_output(0) || (add && task_should_compute_output(1));
    const bool want_w = has_weight && task_should_compute_output(params_at());
    const bool want_b = center && has_bias && task_should_compute_output(params_at() + 1);
    Tensor grad_x, grad_w, grad_b;
    if (grad.defined()) {
      std::tie(grad_x, grad_w, grad_b) = center ? layer_backward(grad, grad_summed, {want_x, want_w, want_b})
                                                : rms_backward(grad, grad_summed, {want_x, want_w});
    } else {
      grad_x = grad_summed;  // only summed was used: x's gradient is summed's
    }
    for (size_t i = 0; i < params_at(); ++i) {
      if (want_x && task_should_compute_output(i)) out[i] = grad_x;
    }
    if (want_w && grad.defined()) out[params_at()] = grad_w;
    if (want_b && grad.defined()) out[params_at() + 1] = grad_b;
    return out;
  }

  Triple rms_backward(const Tensor& grad, const Tensor& grad_summed, std::array<bool, 2> mask) {
    static const auto rms = fusedops_op<RmsBackwardSignature>("_rms_norm_backward");
    static const auto add_rms = fusedops_op<RmsBackwardSignature>("_add_rms_norm_backward");
    const auto& backward = add ? add_rms : rms;
    auto [gx, gw] = backward_call([&] {
      return backward.call(grad, saved_x(), defined_or_none(unpack(weight)), unpack(rstd), offset,
                           defined_or_none(grad_summed), mask);
    });
    return {gx, gw, Tensor()};
  }

  Triple layer_backward(const Tensor& grad, const Tensor& grad_summed, std::array<bool, 3> mask) {
    static const auto layer = fusedops_op<LayerBackwardSignature>("_layer_norm_backward");
    static const auto add_layer = fusedops_op<LayerBackwardSignature>("_add_layer_norm_backward");
    const auto& backward = add ? add_layer : layer;
    return backward_call([&] {
      return backward.call(grad, saved_x(), defined_or_none(unpack(weight)), unpack(mean), unpack(rstd),
                           defined_or_none(grad_summed), mask);
    });
  }

  void release_variables() override {
    x.reset_data();
    weight.reset_data();
    mean.reset_data();
    rstd.reset_data();
  }
  std::string name() const override { return "fusedops::NormBackward"; }
};

// A node for inputs (x, residual?, weight, bias?) whose forward saved `saved_x`
// (an input, or the output summed) and the statistics.
auto make_norm_node(const Tensor& x, const OptTensor& residual, const OptTensor& weight,
                    const OptTensor& bias, bool center, double offset) {
  auto node = make_node<NormBackward>();
  using torch::autograd::collect_next_edges;
  if (center) {
    node->set_next_edges(residual ? collect_next_edges(x, *residual, weight, bias)
                                  : collect_next_edges(x, weight, bias));
  } else {
    node->set_next_edges(residual ? collect_next_edges(x, *residual, weight) : collect_next_edges(x, weight));
  }
  node->center = center;
  node->add = residual.has_value();
  node->has_weight = weight.has_value() && weight->defined();
  node->has_bias = bias.has_value() && bias->defined();
  node->offset = offset;
  if (node->has_weight) node->weight = SavedVariable(*weight, false);
  return node;
}

Tensor rms_norm_autograd(c10::DispatchKeySet keys, const Tensor& x, const OptTensor& weight, double eps,
                         double offset, OptDtype out_dtype) {
  static const auto op = fusedops_op<RmsSignature>("rms_norm");
  static const auto forward = fusedops_op<RmsForwardSignature>("_rms_norm_forward");
  refuse_forward_ad("rms_norm", x, weight);
  if (!torch::autograd::compute_requires_grad(x, weight)) {
    return below_autograd(
        [&] { return op.redispatch(keys & c10::after_autograd_keyset, x, weight, eps, offset, out_dtype); });
  }
  auto node = make_norm_node(x, std::nullopt, weight, std::nullopt, false, offset);
  auto [out, rstd] = below_autograd([&] { return forward.call(x, weight, eps, offset, out_dtype); });
  node->x = SavedVariable(x, false);
  node->rstd = SavedVariable(rstd, false);
  torch::autograd::set_history(out, node);
  return out;
}

Pair add_rms_norm_autograd(c10::DispatchKeySet keys, const Tensor& x, const Tensor& residual,
                           const OptTensor& weight, double eps, double offset, OptDtype out_dtype) {
  static const auto op = fusedops_op<AddRmsSignature>("add_rms_norm");
  static const auto forward = fusedops_op<AddRmsForwardSignature>("_add_rms_norm_forward");
  refuse_forward_ad("add_rms_norm", x, residual, weight);
  if (!torch::autograd::compute_requires_grad(x, residual, weight)) {
    return below_autograd([&] {
      return op.redispatch(keys & c10::after_autograd_keyset, x, residual, weight, eps, offset, out_dtype);
    });
  }
  auto node = make_norm_node(x, residual, weight, std::nullopt, false, offset);
  auto [out, summed, rstd] =
      below_autograd([&] { return forward.call(x, residual, weight, eps, offset, out_dtype); });
  torch::autograd::set_history(out, node);
  if (torch::autograd::compute_requires_grad(x, residual)) torch::autograd::set_history(summed, node);
  node->x = SavedVariable(summed, true);
  node->rstd = SavedVariable(rstd, false);
  return {out, summed};
}

Tensor layer_norm_autograd(c10::DispatchKeySet keys, const Tensor& x, const OptTensor& weight,
                           const OptTensor& bias, double eps, OptDtype out_dtype) {
  static const auto op = fusedops_op<LayerSignature>("layer_norm");
  static const auto forward = fusedops_op<LayerForwardSignature>("_layer_norm_forward");
  refuse_forward_ad("layer_norm", x, weight, bias);
  if (!torch::autograd::compute_requires_grad(x, weight, bias)) {
    return below_autograd(
        [&] { return op.redispatch(keys & c10::after_autograd_keyset, x, weight, bias, eps, out_dtype); });
  }
  auto node = make_norm_node(x, std::nullopt, weight, bias, true, 0.0);
  auto [out, mean, rstd] = below_autograd([&] { return forward.call(x, weight, bias, eps, out_dtype); });
  node->x = SavedVariable(x, false);
  node->mean = SavedVariable(mean, false);
  node->rstd = SavedVariable(rstd, false);
  torch::autograd::set_history(out, node);
  return out;
}

Pair add_layer_norm_autograd(c10::DispatchKeySet keys, const Tensor& x, const Tensor& residual,
                             const OptTensor& weight, const OptTensor& bias, double eps, OptDtype out_dtype) {
  static const auto op = fusedops_op<AddLayerSignature>("add_layer_norm");
  static const auto forward = fusedops_op<AddLayerForwardSignature>("_add_layer_norm_forward");
  refuse_forward_ad("add_layer_norm", x, residual, weight, bias);
  if (!torch::autograd::compute_requires_grad(x, residual, weight, bias)) {
    return below_autograd([&] {
      return op.redispatch(keys & c10::after_autograd_keyset, x, residual, weight, bias, eps, out_dtype);
    });
  }
  auto node = make_norm_node(x, residual, weight, bias, true, 0.0);
  auto [out, summed, mean, rstd] =
      below_autograd([&] { return forward.call(x, residual, weight, bias, eps, out_dtype); });
  torch::autograd::set_history(out, node);
  if (torch::autograd::compute_requires_grad(x, residual)) torch::autograd::set_history(summed, node);
  node->x = SavedVariable(summed, true);
  node->mean = SavedVariable(mean, false);
  node->rstd = SavedVariable(rstd, false);
  return {out, summed};
}

void register_rms_norm(Libraries& l) { l.autograd_and_backward("rms_norm", TORCH_FN(rms_norm_autograd)); }
void register_add_rms_norm(Libraries& l) {
  l.autograd_and_backward("add_rms_norm", TORCH_FN(add_rms_norm_autograd));
}
void register_layer_norm(Libraries& l) {
  l.autograd_and_backward("layer_norm", TORCH_FN(layer_norm_autograd));
}
void register_add_layer_norm(Libraries& l) {
  l.autograd_and_backward("add_layer_norm", TORCH_FN(add_layer_norm_autograd));
}

// Whether the public function's last argument, out_dtype, is None: the entries
// take only that (a dtype goes to the fallback, which parses it).
bool no_out_dtype(PyObject* const* args, Py_ssize_t n, Py_ssize_t expected) {
  return n == expected && args[n - 1] == python()->none;
}

// rms_norm(x, weight, eps, offset, out_dtype=None)'s C entry.
PyObject* rms_norm_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor weight;
  double eps = 0.0, offset = 0.0;
  if (!no_out_dtype(args, n, 5) || !plain_tensors({args[0]}) || !optional_tensor(args[1], weight) ||
      !number(args[2], eps) || !number(args[3], offset)) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, x = tensor_of(args[0])] {
    static const auto op = fusedops_op<RmsSignature>("rms_norm");
    return op.call(x, weight, eps, offset, std::nullopt);
  });
}

// layer_norm(x, weight, bias, eps, out_dtype=None)'s C entry.
PyObject* layer_norm_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor weight, bias;
  double eps = 0.0;
  if (!no_out_dtype(args, n, 5) || !plain_tensors({args[0]}) || !optional_tensor(args[1], weight) ||
      !optional_tensor(args[2], bias) || !number(args[3], eps)) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, x = tensor_of(args[0])] {
    static const auto op = fusedops_op<LayerSignature>("layer_norm");
    return op.call(x, weight, bias, eps, std::nullopt);
  });
}

// add_rms_norm(x, residual, weight, eps, offset, out_dtype=None)'s C entry.
PyObject* add_rms_norm_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor weight;
  double eps = 0.0, offset = 0.0;
  if (!no_out_dtype(args, n, 6) || !plain_tensors({args[0], args[1]}) || !optional_tensor(args[2], weight) ||
      !number(args[3], eps) || !number(args[4], offset)) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, x = tensor_of(args[0]), residual = tensor_of(args[1])] {
    static const auto op = fusedops_op<AddRmsSignature>("add_rms_norm");
    return op.call(x, residual, weight, eps, offset, std::nullopt);
  });
}

// add_layer_norm(x, residual, weight, bias, eps, out_dtype=None)'s C entry.
PyObject* add_layer_norm_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor weight, bias;
  double eps = 0.0;
  if (!no_out_dtype(args, n, 6) || !plain_tensors({args[0], args[1]}) || !optional_tensor(args[2], weight) ||
      !optional_tensor(args[3], bias) || !number(args[4], eps)) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, x = tensor_of(args[0]), residual = tensor_of(args[1])] {
    static const auto op = fusedops_op<AddLayerSignature>("add_layer_norm");
    return op.call(x, residual, weight, bias, eps, std::nullopt);
  });
}

}  // namespace

FUSEDOPS_ACCEL_OP(rms_norm, register_rms_norm);
FUSEDOPS_ACCEL_OP(add_rms_norm, register_add_rms_norm);
FUSEDOPS_ACCEL_OP(layer_norm, register_layer_norm);
FUSEDOPS_ACCEL_OP(add_layer_norm, register_add_layer_norm);
FUSEDOPS_ACCEL_ENTRY(rms_norm, rms_norm_entry);
FUSEDOPS_ACCEL_ENTRY(layer_norm, layer_norm_entry);
FUSEDOPS_ACCEL_ENTRY(add_rms_norm, add_rms_norm_entry);
FUSEDOPS_ACCEL_ENTRY(add_layer_norm, add_layer_norm_entry);

}  // namespace fusedops::accel
