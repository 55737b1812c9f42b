// fusedops.linear_cross_entropy's C++ autograd, autocast and C entry. With
// reduction "mean" or "sum" the forward computes the gradients too
// (_linear_cross_entropy_forward: three GEMMs a chunk, float32, unrounded) and
// the backward multiplies them by the incoming gradient
// (_linear_cross_entropy_scale). With "none", whose incoming gradient is one a
// token, and where weight's float32 gradient would be over 1 GiB
// (by_slabs), the forward keeps the rows' log-sum-exp
// (_linear_cross_entropy_lse) and the backward goes by vocab slabs from it
// (_linear_cross_entropy_backward); under create_graph it recomputes, through
// that op, whose own autograd refuses a second derivative. The cuBLAS math
// flags go down as cublas_math = -1: the stable library reads them when its
// kernel runs.
#include <ATen/autocast_mode.h>

#include <cstdlib>

#include "accel/common/accel.h"
#include "accel/common/python.h"

namespace fusedops::accel {
namespace {

using OptDouble = std::optional<double>;
using LceLossSignature = Tensor(const Tensor&, const Tensor&, const Tensor&, const OptTensor&, int64_t,
                                c10::string_view, double, OptDouble, int64_t);
using LceForwardSignature = std::tuple<Tensor, Tensor, Tensor, Tensor>(const Tensor&, const Tensor&,
                                                                       const Tensor&, const OptTensor&,
                                                                       int64_t, c10::string_view, double,
                                                                       OptDouble, std::array<bool, 3>,
                                                                       int64_t);
using LceLseSignature = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                   const OptTensor&, int64_t, c10::string_view, double,
                                                   OptDouble, int64_t);
using LceBackwardSignature = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&,
                                                                const Tensor&, const OptTensor&, int64_t,
                                                                c10::string_view, double, OptDouble,
                                                                std::array<bool, 3>, int64_t,
                                                                const OptTensor&);
using LceScaleSignature = Tensor(const Tensor&, const Tensor&, at::ScalarType);

// The node's inputs: x, weight, target, bias; gradients for 0, 1 and 3.
constexpr std::array<size_t, 3> kLceGradInputs{0, 1, 3};

struct LinearCrossEntropyBackward final : torch::autograd::Node {
  torch::autograd::SavedVariable x, weight, target, bias;
  // The forward's float32 gradients (fused), each where asked for; or its rows' log-sum-exp (by vocab slabs).
  std::array<torch::autograd::SavedVariable, 3> saved;
  torch::autograd::SavedVariable lse;
  bool fused = false, has_bias = false;
  int64_t ignore_index = -100;
  std::string reduction;
  double label_smoothing = 0.0;
  OptDouble softcap;
  int64_t cublas_math = -1;

  variable_list apply(variable_list&& grads) override {
    const Tensor& grad = grads[0];
    variable_list out(4);
    if (!grad.defined()) return out;
    const std::array<bool, 3> mask{task_should_compute_output(0), task_should_compute_output(1),
                                   has_bias && task_should_compute_output(3)};
    std::array<Tensor, 3> computed =
        fused && !at::GradMode::is_enabled() ? scaled(grad, mask) : recomputed(grad, mask);
    for (size_t i = 0; i < 3; ++i) {
      if (mask[i]) out[kLceGradInputs[i]] = std::move(computed[i]);
    }
    return out;
  }

  std::array<Tensor, 3> scaled(const Tensor& grad, const std::array<bool, 3>& mask) {
    static const auto scale = fusedops_op<LceScaleSignature>("_linear_cross_entropy_scale");
    const at::ScalarType dtype = unpack(x).scalar_type();
    std::array<Tensor, 3> out;
    for (size_t i = 0; i < 3; ++i) {
      if (mask[i]) out[i] = below_autograd([&] { return scale.call(grad, unpack(saved[i]), dtype); });
    }
    return out;
  }

  std::array<Tensor, 3> recomputed(const Tensor& grad, const std::array<bool, 3>& mask) {
    static const auto backward = fusedops_op<LceBackwardSignature>("_linear_cross_entropy_backward");
    const Tensor b = unpack(bias), l = unpack(lse);
    auto [grad_x, grad_weight, grad_bias] = backward_call([&] {
      return backward.call(grad, unpack(x), unpack(weight), unpack(target),
                           b.defined() ? OptTensor(b) : std::nullopt, ignore_index, reduction,
                           label_smoothing, softcap, mask, cublas_math,
                           l.defined() ? OptTensor(l) : std::nullopt);
    });
    return {std::move(grad_x), std::move(grad_weight), std::move(grad_bias)};
  }

  void release_variables() override {
    for (auto* v : {&x, &weight, &target, &bias, &saved[0], &saved[1], &saved[2], &lse}) v->reset_data();
  }
  std::string name() const override { return "fusedops::LinearCrossEntropyBackward"; }
};

// Whether the gradients go by vocab slabs: for "none", and where weight's float32 gradient accumulator would
// be over 1 GiB; FUSEDOPS_LCE_ALGORITHM=chunks or slabs chooses. The Python autograd
// (src/fusedops/ops/linear_cross_entropy.py, _by_slabs) has the same rule.
bool by_slabs(const Tensor& weight, c10::string_view reduction) {
  const char* algorithm = std::getenv("FUSEDOPS_LCE_ALGORITHM");
  const std::string_view chosen = algorithm != nullptr ? algorithm : "";
  TORCH_CHECK(algorithm == nullptr || chosen == "chunks" || chosen == "slabs",
              "fusedops.linear_cross_entropy: the environment variable FUSEDOPS_LCE_ALGORITHM must be unset, "
              "\"chunks\" or \"slabs\", got \"",
              chosen, "\"");
  if (reduction == "none" || chosen == "slabs") return true;
  constexpr int64_t kSlabsAbove = int64_t(1) << 28;
  return algorithm == nullptr && weight.size(0) * weight.size(1) > kSlabsAbove;
}

Tensor linear_cross_entropy_autograd(c10::DispatchKeySet keys, const Tensor& x, const Tensor& weight,
                                     const Tensor& target, const OptTensor& bias, int64_t ignore_index,
                                     c10::string_view reduction, double label_smoothing, OptDouble softcap,
                                     int64_t cublas_math) {
  static const auto loss_op = fusedops_op<LceLossSignature>("linear_cross_entropy");
  static const auto forward_op = fusedops_op<LceForwardSignature>("_linear_cross_entropy_forward");
  static const auto lse_op = fusedops_op<LceLseSignature>("_linear_cross_entropy_lse");
  refuse_forward_ad("linear_cross_entropy", x, weight, bias);
  const auto plain = [&] {
    return loss_op.redispatch(keys & c10::after_autograd_keyset, x, weight, target, bias, ignore_index,
                              reduction, label_smoothing, softcap, cublas_math);
  };
  if (!torch::autograd::compute_requires_grad(x, weight, bias)) return below_autograd(plain);
  auto node = make_node<LinearCrossEntropyBackward>();
  node->set_next_edges(torch::autograd::collect_next_edges(x, weight, target, bias));
  node->has_bias = bias.has_value() && bias->defined();
  const std::array<bool, 3> mask{x.requires_grad(), weight.requires_grad(),
                                 node->has_bias && bias->requires_grad()};
  node->fused = !by_slabs(weight, reduction);
  Tensor loss;
  if (node->fused) {
    auto [out, grad_x, grad_weight, grad_bias] = below_autograd([&] {
      return forward_op.call(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap, mask,
                             cublas_math);
    });
    loss = out;
    const std::array<Tensor, 3> grads{grad_x, grad_weight, grad_bias};
    for (size_t i = 0; i < 3; ++i) {
      if (mask[i]) node->saved[i] = torch::autograd::SavedVariable(grads[i], false);
    }
  } else {
    auto [out, lse] = below_autograd([&] {
      return lse_op.call(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap,
                         cublas_math);
    });
    loss = out;
    node->lse = torch::autograd::SavedVariable(lse, false);
  }
  node->x = torch::autograd::SavedVariable(x, false);
  node->weight = torch::autograd::SavedVariable(weight, false);
  node->target = torch::autograd::SavedVariable(target, false);
  if (node->has_bias) node->bias = torch::autograd::SavedVariable(*bias, false);
  node->ignore_index = ignore_index;
  node->reduction = std::string(reduction);
  node->label_smoothing = label_smoothing;
  node->softcap = softcap;
  node->cublas_math = cublas_math;
  torch::autograd::set_history(loss, node);
  return loss;
}

// F.linear's autocast policy (lower_precision_fp) for x, weight and bias:
// floating tensors on the autocast device, except float64, cast to the
// autocast dtype; target as it is.
template <c10::DeviceType kDevice, c10::DispatchKey kAutocast>
Tensor linear_cross_entropy_autocast(const Tensor& x, const Tensor& weight, const Tensor& target,
                                     const OptTensor& bias, int64_t ignore_index, c10::string_view reduction,
                                     double label_smoothing, OptDouble softcap, int64_t cublas_math) {
  static const auto loss_op = fusedops_op<LceLossSignature>("linear_cross_entropy");
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kAutocast);
  const at::ScalarType dtype = at::autocast::get_autocast_dtype(kDevice);
  using at::autocast::cached_cast;
  return loss_op.call(cached_cast(dtype, x, kDevice), cached_cast(dtype, weight, kDevice), target,
                      cached_cast(dtype, bias, kDevice), ignore_index, reduction, label_smoothing, softcap,
                      cublas_math);
}

void register_linear_cross_entropy(Libraries& libraries) {
  libraries.autograd("linear_cross_entropy", TORCH_FN(linear_cross_entropy_autograd));
  for (const char* backward_op : {"_linear_cross_entropy_backward", "_linear_cross_entropy_scale"}) {
    refuse_double_backward(libraries, backward_op, "linear_cross_entropy", "F.cross_entropy(F.linear(...))");
  }
  libraries.autocast_cpu.impl(
      "linear_cross_entropy",
      TORCH_FN((linear_cross_entropy_autocast<c10::kCPU, c10::DispatchKey::AutocastCPU>)));
  libraries.autocast_cuda.impl(
      "linear_cross_entropy",
      TORCH_FN((linear_cross_entropy_autocast<c10::kCUDA, c10::DispatchKey::AutocastCUDA>)));
}

// linear_cross_entropy(x, weight, target, bias, ignore_index, reduction,
// label_smoothing, softcap)'s C entry (cublas_math: the schema's default).
PyObject* linear_cross_entropy_entry(PyObject* fallback, PyObject* const* args, Py_ssize_t n) {
  OptTensor bias;
  int64_t ignore_index = 0;
  std::optional<c10::string_view> reduction;
  double label_smoothing = 0.0;
  OptDouble softcap;
  if (n != 8 || !plain_tensors({args[0], args[1], args[2]}) || !optional_tensor(args[3], bias) ||
      !integer(args[4], ignore_index) || !optional_string(args[5], reduction) || !reduction ||
      !number(args[6], label_smoothing) || !optional_number(args[7], softcap)) {
    return call_fallback(fallback, args, n);
  }
  return run_op([&, x = tensor_of(args[0]), weight = tensor_of(args[1]), target = tensor_of(args[2])] {
    static const auto loss_op = fusedops_op<LceLossSignature>("linear_cross_entropy");
    return loss_op.call(x, weight, target, bias, ignore_index, *reduction, label_smoothing, softcap, -1);
  });
}

}  // namespace

FUSEDOPS_ACCEL_OP(linear_cross_entropy, register_linear_cross_entropy);
FUSEDOPS_ACCEL_ENTRY(linear_cross_entropy, linear_cross_entropy_entry);

}  // namespace fusedops::accel
