// fusedops.scale_bias_clamp(x, scale, bias, min, max) == torch.clamp(x * scale + bias, min, max):
// argument checks and the set-up shared by the CPU, Meta and CUDA kernels.
//
// Schema (cpp/registry.cpp): a scale or bias given as a tensor travels as
// `scale` / `bias`; given as a number it travels as the float `scale_value` /
// `bias_value` (used only when the tensor is None), so numbers never become
// device tensors (no host-to-device copy, CUDA-graph safe).
#pragma once

#include <array>
#include <optional>
#include <tuple>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include "cpp/checks.h"
#include "cpp/elementwise.h"
#include "cpp/scale_bias_clamp_params.h"

namespace fusedops {

constexpr const char* kSbc = "scale_bias_clamp";

inline void sbc_check(const at::Tensor& x, const std::optional<at::Tensor>& scale,
                      const std::optional<at::Tensor>& bias) {
  check_floating(kSbc, "x", x);
  if (scale.has_value() && scale->defined()) {
    check_same_dtype_device(kSbc, "x", x, "scale", *scale);
    FUSEDOPS_CHECK(scale->sym_numel() == 1, kSbc,
                   "scale must be a number or a tensor of one element, got shape ",
                   scale->sym_sizes());
    FUSEDOPS_CHECK(scale->dim() <= x.dim(), kSbc, "scale of shape ", scale->sym_sizes(),
                   " has more dimensions than x of shape ", x.sym_sizes(),
                   " (the result must keep x's shape)");
  }
  if (bias.has_value() && bias->defined()) {
    check_same_dtype_device(kSbc, "x", x, "bias", *bias);
    const int64_t lead = x.dim() - bias->dim();
    bool ok = lead >= 0;
    for (int64_t d = 0; ok && d < bias->dim(); ++d) {
      const c10::SymInt& sb = bias->sym_size(d);
      ok = sb == 1 || sb == x.sym_size(lead + d);
    }
    FUSEDOPS_CHECK(ok, kSbc, "bias of shape ", bias->sym_sizes(),
                   " must broadcast to x of shape ", x.sym_sizes(),
                   " without changing it (e.g. x's shape, [C] or [1, C] for x of shape [B, C])");
  }
}

inline void sbc_check_backward(const at::Tensor& grad_out, const at::Tensor& x,
                               const std::optional<at::Tensor>& scale,
                               const std::optional<at::Tensor>& bias) {
  sbc_check(x, scale, bias);
  check_floating(kSbc, "grad_out", grad_out);
  check_same_dtype_device(kSbc, "x", x, "grad_out", grad_out);
  FUSEDOPS_CHECK(grad_out.sym_sizes() == x.sym_sizes(), kSbc, "grad_out of shape ",
                 grad_out.sym_sizes(), " must have x's shape ", x.sym_sizes());
}

inline const at::Tensor* present(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? &*t : nullptr;
}

inline SbcScalars sbc_scalars(const std::optional<at::Tensor>& scale, double scale_value,
                              double bias_value, std::optional<double> min,
                              std::optional<double> max) {
  SbcScalars s;
  s.scale = present(scale) ? scale->const_data_ptr() : nullptr;
  s.scale_value = scale_value;
  s.bias_value = bias_value;
  if (min.has_value()) s.lo = *min;
  if (max.has_value()) s.hi = *max;
  s.any_bound = min.has_value() || max.has_value();
  return s;
}

// A stand-in operand for a missing bias: no storage, zero strides.
inline at::Tensor no_operand(const at::Tensor& x) {
  return at::empty({}, x.options().device(at::kMeta));
}

// Everything a backend needs for one forward call; x and bias may be
// replaced by contiguous copies in the rare > kMaxDims layouts.
struct SbcForwardSetup {
  at::Tensor out, x, bias;  // bias undefined when a number
  StridedLayout<3> layout;
  SbcScalars scalars;
};

inline SbcForwardSetup sbc_forward_setup(const at::Tensor& x, const std::optional<at::Tensor>& scale,
                                         const std::optional<at::Tensor>& bias, double scale_value,
                                         double bias_value, std::optional<double> min,
                                         std::optional<double> max) {
  SbcForwardSetup s;
  s.out = at::empty(x.sizes(), x.options());
  s.scalars = sbc_scalars(scale, scale_value, bias_value, min, max);
  if (s.out.numel() == 0) return s;
  s.x = x;
  at::Tensor b = present(bias) ? *bias : no_operand(x);
  s.layout = elementwise_layout<3>(s.out, {&s.x, &b});
  if (present(bias)) s.bias = b;
  return s;
}

// Everything a backend needs for one backward call: the layout
// (x-shaped contiguous reference, grad_out, x, bias), its classification and
// the allocated gradients.
struct SbcBackwardSetup {
  at::Tensor grad_out, x, bias;  // bias undefined when a number
  at::Tensor grad_x, grad_scale, grad_bias, grad_bias_full;
  std::vector<int64_t> bias_sizes;
  StridedLayout<4> layout;
  SbcShape shape;
  SbcScalars scalars;
  SbcGrads grads;
  int64_t numel = 0;
};

inline SbcBackwardSetup sbc_backward_setup(const at::Tensor& grad_out, const at::Tensor& x,
                                           const std::optional<at::Tensor>& scale,
                                           const std::optional<at::Tensor>& bias,
                                           double scale_value, double bias_value,
                                           std::optional<double> min, std::optional<double> max,
                                           std::array<bool, 3> mask) {
  SbcBackwardSetup s;
  const bool need_x = mask[0];
  const bool need_scale = mask[1] && present(scale);
  const bool need_bias = mask[2] && present(bias);
  s.numel = x.numel();
  s.scalars = sbc_scalars(scale, scale_value, bias_value, min, max);
  if (need_x) s.grad_x = at::empty(x.sizes(), x.options());
  if (need_scale) s.grad_scale = at::empty(scale->sizes(), x.options());
  if (s.numel == 0) {
    if (need_scale) s.grad_scale.zero_();
    if (need_bias) s.grad_bias = at::zeros(bias->sizes(), x.options());
    return s;
  }
  s.grad_out = grad_out;
  s.x = x;
  at::Tensor b = present(bias) ? *bias : no_operand(x);
  const at::Tensor reference = need_x ? s.grad_x : at::empty(x.sizes(), x.options().device(at::kMeta));
  s.layout = elementwise_layout<4>(reference, {&s.grad_out, &s.x, &b});
  if (present(bias)) s.bias = b;
  s.shape = classify_backward(s.layout, present(bias), present(bias) ? bias->numel() : 0, need_bias);
  if (need_bias) {
    s.bias_sizes = bias->sizes().vec();
    if (s.shape.bias_grad == SbcBiasGrad::Full) {
      s.grad_bias_full = at::empty(x.sizes(), x.options());
    } else {
      s.grad_bias = at::empty(bias->sizes(), x.options());
    }
  }
  s.grads.grad_x = need_x ? s.grad_x.data_ptr() : nullptr;
  s.grads.grad_scale = need_scale ? s.grad_scale.data_ptr() : nullptr;
  s.grads.grad_bias_full = s.grad_bias_full.defined() ? s.grad_bias_full.data_ptr() : nullptr;
  s.grads.grad_bias_sum = s.grad_bias.defined() ? s.grad_bias.data_ptr() : nullptr;
  return s;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sbc_backward_finish(SbcBackwardSetup& s);

}  // namespace fusedops
