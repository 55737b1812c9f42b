// fusedops.linear(x, weight, bias, *, activation, min, max)
//   == clamp(act(F.linear(x, weight, bias)), min, max)
// Argument checks and the epilogue description, shared by the CPU, Meta and
// CUDA kernels.
//
// Ops (schemas in cpp/registry.cpp):
//   linear          the user-facing op; returns out only (no saved tensors).
//   linear_forward  what autograd calls: returns (out, aux), aux = the
//                   pre-activation z when the backward needs it
//                   (LinearEpilogue::needs_aux), else an empty tensor.
//   linear_backward (grad, x, weight, saved, ...) -> (grad_x, grad_weight,
//                   grad_bias); saved is aux if needs_aux, out for relu alone,
//                   unused otherwise. Grads not asked for come back empty.
#pragma once

#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>

#include "cpp/checks.h"
#include "cpp/linear_math.h"

namespace fusedops {

inline LinearEpilogue linear_epilogue(std::optional<std::string_view> activation,
                                      std::optional<double> min, std::optional<double> max) {
  LinearEpilogue e;
  if (activation.has_value()) {
    const std::string_view a = *activation;
    if (a == "relu") {
      e.act = Activation::Relu;
    } else if (a == "gelu") {
      e.act = Activation::Gelu;
    } else if (a == "gelu_tanh") {
      e.act = Activation::GeluTanh;
    } else {
      FUSEDOPS_CHECK(false, "linear", "activation must be None, \"relu\", \"gelu\" or \"gelu_tanh\", got \"",
                     a, "\"");
    }
  }
  e.has_min = min.has_value();
  e.has_max = max.has_value();
  e.min = min.value_or(0.0);
  e.max = max.value_or(0.0);
  // relu(z) >= 0 >= min: a lower bound <= 0 after relu changes neither the
  // value nor the gradient, so it costs no pass.
  if (e.act == Activation::Relu && e.has_min && e.min <= 0.0) e.has_min = false;
  return e;
}

// Checks x [..., in], weight [out, in], bias [out] (dtypes, devices, shapes)
// and returns the output shape [..., out].
inline SymShape linear_output_shape(const at::Tensor& x, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias) {
  check_floating("linear", "x", x);
  check_floating("linear", "weight", weight);
  check_same_dtype_device("linear", "x", x, "weight", weight);
  FUSEDOPS_CHECK(x.dim() >= 1, "linear", "x must have at least 1 dimension [..., in_features], got a 0-dim tensor");
  FUSEDOPS_CHECK(weight.dim() == 2, "linear", "weight must be 2-D [out_features, in_features], got shape ",
                 weight.sym_sizes());
  FUSEDOPS_CHECK(x.sym_size(-1) == weight.sym_size(1), "linear", "x of shape ", x.sym_sizes(),
                 " and weight of shape ", weight.sym_sizes(),
                 " do not match: x's last dimension must equal weight's in_features (", weight.sym_size(1),
                 ")");
  if (bias.has_value() && bias->defined()) {
    check_floating("linear", "bias", *bias);
    check_same_dtype_device("linear", "x", x, "bias", *bias);
    FUSEDOPS_CHECK(bias->dim() == 1 && bias->sym_size(0) == weight.sym_size(0), "linear",
                   "bias must be 1-D of size out_features (", weight.sym_size(0), "), got shape ",
                   bias->sym_sizes());
  }
  SymShape shape(x.sym_sizes().begin(), x.sym_sizes().end() - 1);
  shape.push_back(weight.sym_size(0));
  return shape;
}

inline bool has_bias(const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined();
}

}  // namespace fusedops
