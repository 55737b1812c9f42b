// fusedops.linear's C++ autograd and autocast. The epilogue's backward needs
// the pre-activation z (saved by _linear_forward) for any activation but relu
// and for a clamp; relu alone is differentiated from its output. The cuBLAS
// math flags go down as cublas_math = -1: the stable library reads them when
// its kernel runs (fusedops_accel_matmul_flags), forward and backward, as
// F.linear does.
#include <ATen/autocast_mode.h>

#include "accel/common/accel.h"
#include "accel/common/python.h"

namespace fusedops::accel {
namespace {

using OptStr = std::optional<c10::string_view>;
using OptDouble = std::optional<double>;
using LinearSignature = Tensor(const Tensor&, const Tensor&, const OptTensor&, OptStr, OptDouble, OptDouble,
                               int64_t);
using ForwardSignature = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const OptTensor&, OptStr,
                                                    OptDouble, OptDouble, int64_t);
using BackwardSignature = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                             const Tensor&, OptStr, OptDouble, OptDouble,
                                                             std::array<bool, 3>, int64_t);

// LinearEpilogue::needs_aux (cuda/linear/linear_math.h) from the op's
// arguments; an unknown activation is refused by the op it is passed to.
bool needs_aux(const OptStr& activation, OptDouble min, OptDouble max) {
  const bool relu = activation == "relu";
  return (activation.has_value() && !relu) || max.has_value() || (min.has_value() && !(relu && *min <= 0.0));
}

struct LinearBackward final : torch::autograd::Node {
  torch::autograd::SavedVariable x, weight, saved;  // each only where a gradient reads it
  bool has_bias = false;
  std::optional<std::string> activation;
  OptDouble min, max;
  int64_t cublas_math = -1;

  variable_list apply(variable_list&& grads) override {
    static const auto backward = fusedops_op<BackwardSignature>("_linear_backward");
    const Tensor& grad = grads[0];
    if (!grad.defined()) return variable_list(3);
    const std::array<bool, 3> mask{task_should_compute_output(0), task_should_compute_output(1),
                                   has_bias && task_should_compute_output(2)};
    // An input no requested gradient reads goes in as grad itself (a stand-in
    // the op allows).
    const auto or_grad = [&](const torch::autograd::SavedVariable& v) {
      const Tensor t = unpack(v);
      return t.defined() ? t : grad;
    };
    auto computed = backward_call([&] {
      return backward.call(grad, or_grad(x), or_grad(weight), or_grad(saved), activation, min, max, mask,
                           cublas_math);
    });
    return requested(std::move(computed), mask);
  }
  void release_variables() override {
    x.reset_data();
    weight.reset_data();
    saved.reset_data();
  }
  std::string name() const override { return "fusedops::LinearBackward"; }
};

Tensor linear_autograd(c10::DispatchKeySet keys, const Tensor& x, const Tensor& weight, const OptTensor& bias,
                       OptStr activation, OptDouble min, OptDouble max, int64_t cublas_math) {
  static const auto linear = fusedops_op<LinearSignature>("linear");
  static const auto forward_aux = fusedops_op<ForwardSignature>("_linear_forward");
  refuse_forward_ad("linear", x, weight, bias);
  const auto forward = [&] {
    return linear.redispatch(keys & c10::after_autograd_keyset, x, weight, bias, activation, min, max,
                             cublas_math);
  };
  if (!torch::autograd::compute_requires_grad(x, weight, bias)) return below_autograd(forward);
  auto node = make_node<LinearBackward>();
  node->set_next_edges(torch::autograd::collect_next_edges(x, weight, bias));
  const bool aux = needs_aux(activation, min, max);
  Tensor out, z;
  if (aux) {
    std::tie(out, z) =
        below_autograd([&] { return forward_aux.call(x, weight, bias, activation, min, max, cublas_math); });
  } else {
    out = below_autograd(forward);
  }
  if (weight.requires_grad()) node->x = torch::autograd::SavedVariable(x, false);
  if (x.requires_grad()) node->weight = torch::autograd::SavedVariable(weight, false);
  node->has_bias = bias.has_value() && bias->defined();
  if (activation.has_value()) node->activation = std::string(*activation);
  node->min = min;
  node->max = max;
  node->cublas_math = cublas_math;
  torch::autograd::set_history(out, node);
  if (aux) {
    node->saved = torch::autograd::SavedVariable(z, false);
  } else if (activation == "relu") {
    node->saved = save_output(out);
  }
  return out;
}

// F.linear's autocast policy (lower_precision_fp): floating tensors on the
// autocast device, except float64, cast to the autocast dtype.
template <c10::DeviceType kDevice, c10::DispatchKey kAutocast>
Tensor linear_autocast(const Tensor& x, const Tensor& weight, const OptTensor& bias, OptStr activation,
                       OptDouble min, OptDouble max, int64_t cublas_math) {
  static const auto linear = fusedops_op<LinearSignature>("linear");
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocast);
  const at::ScalarType dtype = at::autocast::get_autocast_dtype(kDevice);
  using at::autocast::cached_cast;
  return linear.call(cached_cast(dtype, x, kDevice), cached_cast(dtype, weight, kDevice),
                     cached_cast(dtype, bias, kDevice), activation, min, max, cublas_math);
}

void register_linear(Libraries& libraries) {
  libraries.autograd_and_backward("linear", TORCH_FN(linear_autograd), "F.linear and torch ops");
  libraries.autocast_cpu.impl("linear",
                              TORCH_FN((linear_autocast<c10::kCPU, c10::DispatchKey::AutocastCPU>)));
  libraries.autocast_cuda.impl("linear",
                               TORCH_FN((linear_autocast<c10::kCUDA, c10::DispatchKey::AutocastCUDA>)));
}

// linear(x, weight, bias, activation, min, max)'s C entry (cublas_math: the
// schema's default, the flags read when the kernel runs).
PyObject* linear_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor bias;
  OptStr activation;
  OptDouble min, max;
  if (n != 6 || !plain_tensors({args[0], args[1]}) || !optional_tensor(args[2], bias) ||
      !optional_string(args[3], activation) || !optional_number(args[4], min) ||
      !optional_number(args[5], max)) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, x = tensor_of(args[0]), weight = tensor_of(args[1])] {
    static const auto linear = fusedops_op<LinearSignature>("linear");
    return linear.call(x, weight, bias, activation, min, max, -1);
  });
}

}  // namespace

FUSEDOPS_ACCEL_OP(linear, register_linear);
FUSEDOPS_ACCEL_ENTRY(linear, linear_entry);

}  // namespace fusedops::accel
