// fusedops.scale_bias_clamp's C++ autograd. The backward op recomputes
// x * scale + bias (and the clamp mask) from x, so x, scale and bias are
// saved, not the output.
#include "accel/common/accel.h"
#include "accel/common/python.h"

namespace fusedops::accel {
namespace {

using SbcSignature = Tensor(const Tensor&, const OptTensor&, const OptTensor&, double, double,
                            std::optional<double>, std::optional<double>);
using SbcBackwardSignature = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&,
                                                                const OptTensor&, const OptTensor&, double,
                                                                double, std::optional<double>,
                                                                std::optional<double>, std::array<bool, 3>);

struct SbcBackward final : torch::autograd::Node {
  torch::autograd::SavedVariable x, scale, bias;
  bool has_scale = false, has_bias = false;
  double scale_value = 1, bias_value = 0;
  std::optional<double> min, max;

  variable_list apply(variable_list&& grads) override {
    static const auto backward = fusedops_op<SbcBackwardSignature>("_scale_bias_clamp_backward");
    if (!grads[0].defined()) return variable_list(3);
    const std::array<bool, 3> mask{task_should_compute_output(0), has_scale && task_should_compute_output(1),
                                   has_bias && task_should_compute_output(2)};
    const OptTensor s = has_scale ? OptTensor(unpack(scale)) : std::nullopt;
    const OptTensor b = has_bias ? OptTensor(unpack(bias)) : std::nullopt;
    auto computed = backward_call(
        [&] { return backward.call(grads[0], unpack(x), s, b, scale_value, bias_value, min, max, mask); });
    return requested(std::move(computed), mask);
  }
  void release_variables() override {
    x.reset_data();
    scale.reset_data();
    bias.reset_data();
  }
  std::string name() const override { return "fusedops::ScaleBiasClampBackward"; }
};

Tensor sbc_autograd(c10::DispatchKeySet keys, const Tensor& x, const OptTensor& scale, const OptTensor& bias,
                    double scale_value, double bias_value, std::optional<double> min,
                    std::optional<double> max) {
  static const auto sbc = fusedops_op<SbcSignature>("scale_bias_clamp");
  refuse_forward_ad("scale_bias_clamp", x, scale, bias);
  const auto forward = [&] {
    return sbc.redispatch(keys & c10::after_autograd_keyset, x, scale, bias, scale_value, bias_value, min,
                          max);
  };
  if (!torch::autograd::compute_requires_grad(x, scale, bias)) return below_autograd(forward);
  auto node = make_node<SbcBackward>();
  node->set_next_edges(torch::autograd::collect_next_edges(x, scale, bias));
  Tensor out = below_autograd(forward);  // checks the arguments before anything is saved
  node->x = torch::autograd::SavedVariable(x, false);
  node->has_scale = scale.has_value() && scale->defined();
  node->has_bias = bias.has_value() && bias->defined();
  if (node->has_scale) node->scale = torch::autograd::SavedVariable(*scale, false);
  if (node->has_bias) node->bias = torch::autograd::SavedVariable(*bias, false);
  node->scale_value = scale_value;
  node->bias_value = bias_value;
  node->min = min;
  node->max = max;
  torch::autograd::set_history(out, node);
  return out;
}

void register_sbc(Libraries& libraries) {
  libraries.autograd_and_backward("scale_bias_clamp", TORCH_FN(sbc_autograd));
}

// scale_bias_clamp(x, scale, bias, scale_value, bias_value, min, max)'s C entry.
PyObject* sbc_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor scale, bias;
  double scale_value = 0, bias_value = 0;
  std::optional<double> min, max;
  if (n != 7 || !plain_tensors({args[0]}) || !optional_tensor(args[1], scale) ||
      !optional_tensor(args[2], bias) || !number(args[3], scale_value) || !number(args[4], bias_value) ||
      !optional_number(args[5], min) || !optional_number(args[6], max)) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, x = tensor_of(args[0])] {
    static const auto sbc = fusedops_op<SbcSignature>("scale_bias_clamp");
    return sbc.call(x, scale, bias, scale_value, bias_value, min, max);
  });
}

}  // namespace

FUSEDOPS_ACCEL_OP(scale_bias_clamp, register_sbc);
FUSEDOPS_ACCEL_ENTRY(scale_bias_clamp, sbc_entry);

}  // namespace fusedops::accel
