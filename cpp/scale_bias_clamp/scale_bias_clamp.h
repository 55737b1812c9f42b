// fusedops.scale_bias_clamp(x, scale, bias, min, max) == torch.clamp(x * scale + bias, min, max):
// host side of the op. Schema, checks, set-up and registrations are in
// scale_bias_clamp.cpp, the CPU kernels in scale_bias_clamp_cpu*.cpp, the CUDA
// glue in scale_bias_clamp_cuda.cpp, the kernels and the math they share with
// the CPU loops in cuda/scale_bias_clamp/, autograd and the shape functions in
// src/fusedops/ops/scale_bias_clamp.py.
//
// A scale or bias given as a tensor travels as `scale` / `bias`; given as a
// number it travels as the float `scale_value` / `bias_value` (used only when
// the tensor is None), so numbers never become device tensors (no
// host-to-device copy, CUDA-graph safe).
#pragma once

#include <optional>
#include <tuple>
#include <vector>

#include "cpp/common/stable.h"
#include "cuda/scale_bias_clamp/scale_bias_clamp_params.h"

namespace fusedops {

using SbcGradTensors = std::tuple<Tensor, Tensor, Tensor>;

constexpr char kSbc[] = "scale_bias_clamp";

void sbc_check(const Tensor& x, const OptTensor& scale, const OptTensor& bias);
void sbc_check_backward(const Tensor& grad_out, const Tensor& x, const OptTensor& scale,
                        const OptTensor& bias);

// Everything a backend needs for one forward call; x and bias may be
// replaced by dense copies in the rare > kMaxDims layouts.
struct SbcForwardSetup {
  Tensor out, x;
  OptTensor bias;  // none when a number
  StridedLayout<3> layout;
  SbcScalars scalars;
};

// Checks the arguments and allocates the output.
SbcForwardSetup sbc_forward_setup(const Tensor& x, const OptTensor& scale, const OptTensor& bias,
                                  double scale_value, double bias_value, std::optional<double> min,
                                  std::optional<double> max);

// Everything a backend needs for one backward call: the layout
// (x-shaped contiguous gradient, grad_out, x, bias), its classification and
// the allocated gradients (none for those not asked for).
struct SbcBackwardSetup {
  SbcBackwardSetup(const Tensor& grad_out, const Tensor& x, const OptTensor& bias)
      : grad_out(grad_out), x(x), bias(bias) {}

  Tensor grad_out, x;
  OptTensor bias;
  OptTensor grad_x, grad_scale, grad_bias, grad_bias_full;
  std::vector<int64_t> bias_sizes;  // bias's own, for grad_bias_full
  StridedLayout<4> layout;
  SbcShape shape;
  SbcScalars scalars;
  SbcGrads grads;
  int64_t numel = 0;
};

// Checks the arguments and allocates the gradients; `mask` is output_mask.
SbcBackwardSetup sbc_backward_setup(const Tensor& grad_out, const Tensor& x, const OptTensor& scale,
                                    const OptTensor& bias, double scale_value, double bias_value,
                                    std::optional<double> min, std::optional<double> max,
                                    const std::vector<bool>& mask);

// The gradients a backend filled in: the full-size bias gradient summed to
// bias's shape, 0-element tensors for those not asked for.
SbcGradTensors sbc_backward_finish(const SbcBackwardSetup& s);

// The kernels, one per backend and op (the public op and its _nograd twin
// share one).
Tensor sbc_cpu(const Tensor& x, const OptTensor& scale, const OptTensor& bias, double scale_value,
               double bias_value, std::optional<double> min, std::optional<double> max);
SbcGradTensors sbc_backward_cpu(const Tensor& grad_out, const Tensor& x, const OptTensor& scale,
                                const OptTensor& bias, double scale_value, double bias_value,
                                std::optional<double> min, std::optional<double> max, std::vector<bool> mask);
Tensor sbc_cuda(const Tensor& x, const OptTensor& scale, const OptTensor& bias, double scale_value,
                double bias_value, std::optional<double> min, std::optional<double> max);
SbcGradTensors sbc_backward_cuda(const Tensor& grad_out, const Tensor& x, const OptTensor& scale,
                                 const OptTensor& bias, double scale_value, double bias_value,
                                 std::optional<double> min, std::optional<double> max,
                                 std::vector<bool> mask);

// The CPU backward loops (scale_bias_clamp_cpu_backward.cpp), for s.numel > 0.
void sbc_backward_cpu_kernel(const SbcBackwardSetup& s);

}  // namespace fusedops
