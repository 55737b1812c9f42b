// fusedops.scale_bias_clamp: checks and the set-up every backend shares (the
// ops are defined in scale_bias_clamp_cpu.cpp, below their CPU kernels).
//   scale_bias_clamp            the public op; Python
//                               (src/fusedops/ops/scale_bias_clamp.py) registers
//                               its autograd and shape function
//   _scale_bias_clamp_nograd    the same kernels without autograd, which
//                               fusedops.scale_bias_clamp calls when no
//                               gradient is needed (no Python autograd cost)
//   _scale_bias_clamp_backward  the gradients asked for by output_mask; the
//                               others come back as 0-element tensors
#include "cpp/scale_bias_clamp/scale_bias_clamp.h"

namespace fusedops {

void sbc_check(const Tensor& x, const OptTensor& scale, const OptTensor& bias) {
  check_floating(kSbc, "x", x);
  if (scale.has_value()) {
    check_same_dtype_device(kSbc, "x", x, "scale", *scale);
    FUSEDOPS_CHECK(scale->numel() == 1, kSbc, "scale must be a number or a tensor of one element, got shape ",
                   ShapeText{scale->sizes()});
    FUSEDOPS_CHECK(scale->dim() <= x.dim(), kSbc, "scale of shape ", ShapeText{scale->sizes()},
                   " has more dimensions than x of shape ", ShapeText{x.sizes()},
                   " (the result must keep x's shape)");
  }
  if (bias.has_value()) {
    check_same_dtype_device(kSbc, "x", x, "bias", *bias);
    const auto sx = x.sizes(), sb = bias->sizes();
    const int64_t lead = static_cast<int64_t>(sx.size()) - static_cast<int64_t>(sb.size());
    bool ok = lead >= 0;
    for (size_t d = 0; ok && d < sb.size(); ++d) ok = sb[d] == 1 || sb[d] == sx[lead + d];
    FUSEDOPS_CHECK(ok, kSbc, "bias of shape ", ShapeText{sb}, " must broadcast to x of shape ", ShapeText{sx},
                   " without changing it (e.g. x's shape, [C] or [1, C] for x of shape [B, C])");
  }
}

void sbc_check_backward(const Tensor& grad_out, const Tensor& x, const OptTensor& scale,
                        const OptTensor& bias) {
  sbc_check(x, scale, bias);
  check_floating(kSbc, "grad_out", grad_out);
  check_same_dtype_device(kSbc, "x", x, "grad_out", grad_out);
  FUSEDOPS_CHECK(grad_out.sizes().equals(x.sizes()), kSbc, "grad_out of shape ", ShapeText{grad_out.sizes()},
                 " must have x's shape ", ShapeText{x.sizes()});
}

namespace {

SbcScalars sbc_scalars(const OptTensor& scale, double scale_value, double bias_value,
                       std::optional<double> min, std::optional<double> max) {
  SbcScalars s;
  s.scale = scale.has_value() ? scale->const_data_ptr() : nullptr;
  s.scale_value = scale_value;
  s.bias_value = bias_value;
  if (min.has_value()) s.lo = *min;
  if (max.has_value()) s.hi = *max;
  s.any_bound = min.has_value() || max.has_value();
  return s;
}

// torch's sum_to: `full` (x's shape) summed over the dims that a tensor of
// `sizes` lacks or broadcasts along.
Tensor sum_to(const Tensor& full, const std::vector<int64_t>& sizes) {
  const auto shape = full.sizes();
  const int64_t lead = static_cast<int64_t>(shape.size()) - static_cast<int64_t>(sizes.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < lead || (sizes[d - lead] == 1 && shape[d] != 1)) dims.push_back(d);
  }
  if (dims.empty()) return full;  // already of `sizes` (an empty list would sum everything)
  const Tensor sum = torch::stable::sum(full, dims, /*keepdim=*/true);
  return lead > 0 ? torch::stable::view(sum, sizes) : sum;
}

}  // namespace

SbcForwardSetup sbc_forward_setup(const Tensor& x, const OptTensor& scale, const OptTensor& bias,
                                  double scale_value, double bias_value, std::optional<double> min,
                                  std::optional<double> max) {
  sbc_check(x, scale, bias);
  SbcForwardSetup s{.out = empty(x, x.sizes()),
                    .x = x,
                    .bias = bias,
                    .layout = StridedLayout<3>{},
                    .scalars = sbc_scalars(scale, scale_value, bias_value, min, max)};
  if (s.out.numel() > 0) s.layout = elementwise_layout<3>(x.sizes(), {&s.x, s.bias ? &*s.bias : nullptr});
  return s;
}

SbcBackwardSetup sbc_backward_setup(const Tensor& grad_out, const Tensor& x, const OptTensor& scale,
                                    const OptTensor& bias, double scale_value, double bias_value,
                                    std::optional<double> min, std::optional<double> max,
                                    const std::vector<bool>& mask) {
  sbc_check_backward(grad_out, x, scale, bias);
  FUSEDOPS_CHECK(mask.size() == 3, kSbc, "output_mask must have 3 elements, got ", mask.size());
  const bool need_scale = mask[1] && scale.has_value(), need_bias = mask[2] && bias.has_value();
  SbcBackwardSetup s(grad_out, x, bias);
  s.scalars = sbc_scalars(scale, scale_value, bias_value, min, max);
  s.numel = x.numel();
  if (mask[0]) s.grad_x = empty(x, x.sizes());
  if (s.numel == 0) {  // sums over no elements
    if (need_scale) s.grad_scale = torch::stable::new_zeros(x, scale->sizes());
    if (need_bias) s.grad_bias = torch::stable::new_zeros(x, bias->sizes());
    return s;
  }
  if (need_scale) s.grad_scale = empty(x, scale->sizes());
  s.layout = elementwise_layout<4>(x.sizes(), {&s.grad_out, &s.x, s.bias ? &*s.bias : nullptr});
  s.shape = classify_backward(s.layout, bias.has_value(), bias ? bias->numel() : 0, need_bias);
  if (s.shape.bias_grad == SbcBiasGrad::Full) {
    const auto sizes = bias->sizes();
    s.bias_sizes.assign(sizes.begin(), sizes.end());
    s.grad_bias_full = empty(x, x.sizes());
  } else if (need_bias) {
    s.grad_bias = empty(x, bias->sizes());
  }
  auto pointer = [](OptTensor& t) { return t ? t->data_ptr() : nullptr; };
  s.grads = {.grad_x = pointer(s.grad_x),
             .grad_bias_full = pointer(s.grad_bias_full),
             .grad_scale = pointer(s.grad_scale),
             .grad_bias_sum = pointer(s.grad_bias)};
  return s;
}

SbcGradTensors sbc_backward_finish(const SbcBackwardSetup& s) {
  auto or_none = [&](const OptTensor& t) { return t ? *t : no_tensor(s.x); };
  return {or_none(s.grad_x), or_none(s.grad_scale),
          s.grad_bias_full ? sum_to(*s.grad_bias_full, s.bias_sizes) : or_none(s.grad_bias)};
}

}  // namespace fusedops
