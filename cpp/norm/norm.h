// The normalization ops over the last dim: host side shared by the rms_norm
// family (rms_norm.cpp) and the layer_norm family (layer_norm.cpp): checks,
// contiguous rows, allocation, the CPU kernels (norm_cpu.cpp) and the CUDA
// launch (norm_cuda.cpp); kernels in cuda/norm/, autograd in accel/norm/ and
// src/fusedops/ops/_norm.py.
//
// Ops (schemas beside their CPU kernels):
//   rms_norm(x, weight, eps, offset, out_dtype) -> out
//   add_rms_norm(x, residual, weight, eps, offset, out_dtype) -> (out, summed)
//   _rms_norm_forward(x, weight, eps, offset, out_dtype) -> (out, rstd)
//   _add_rms_norm_forward(x, residual, weight, eps, offset, out_dtype) -> (out, summed, rstd)
//   _rms_norm_backward(grad, x, weight, rstd, offset, grad_summed, output_mask) -> (grad_x, grad_weight)
//   _add_rms_norm_backward(the same, x: summed)
//   layer_norm(x, weight, bias, eps, out_dtype) -> out
//   add_layer_norm(x, residual, weight, bias, eps, out_dtype) -> (out, summed)
//   _layer_norm_forward(x, weight, bias, eps, out_dtype) -> (out, mean, rstd)
//   _add_layer_norm_forward(x, residual, weight, bias, eps, out_dtype) -> (out, summed, mean, rstd)
//   _layer_norm_backward(grad, x, weight, mean, rstd, grad_summed, output_mask)
//       -> (grad_x, grad_weight, grad_bias)
//   _add_layer_norm_backward(the same, x: summed)
// summed = x + residual in x's dtype, which the add_ ops normalize and their
// backward reads as x; grad_summed (the gradient arriving at summed) is added
// to grad_x, which is then the gradient of both x and residual. mean and rstd
// have x's leading shape, in float32 (float64 for a float64 x). Gradients not
// asked for come back as 0-element tensors. out_dtype (None: result_type(x,
// weight, bias)) may also be float16 or bfloat16 for a float32 x: the dtype
// autocast's matmuls would cast out to, which their gradient then has; the
// backward takes grad in it.
#pragma once

#include <optional>
#include <vector>

#include "cpp/common/stable.h"
#include "cuda/norm/norm_params.h"

namespace fusedops {

// How one backend runs the kernels on arguments the glue has checked.
// `like`: a tensor on the device; `op`: the op's name for errors.
struct NormBackend {
  void (*forward)(const NormForwardArgs& args, const Tensor& like, const char* op);
  // The rows of the backward's partial sums (fixed for given sizes and device).
  int64_t (*backward_blocks)(int64_t rows, int64_t cols, const Tensor& like, const char* op);
  void (*backward)(const NormBackwardArgs& args, const Tensor& like, const char* op);
  // Whether the kernels write a float32 x's float16 or bfloat16 out_dtype (and
  // read its gradient) themselves; else the glue converts.
  bool narrow_output;
};
extern const NormBackend kNormCpu;
extern const NormBackend kNormCuda;  // norm_cuda.cpp, CUDA builds only

// One forward call: the op's name (for errors) and its arguments.
struct NormCall {
  const char* op;
  Tensor x;
  OptTensor residual = std::nullopt, weight = std::nullopt, bias = std::nullopt;
  double eps = 0.0, offset = 0.0;
  bool center = false;  // layer_norm
  std::optional<ScalarType> out_dtype = std::nullopt;
};

struct NormOutputs {
  Tensor out, summed, mean, rstd;  // summed and mean only where the op has them
};

NormOutputs norm_forward(const NormCall& call, const NormBackend& backend);

// One backward call; `saved_x` is x (summed for the add_ ops).
struct NormBackwardCall {
  const char* op;
  Tensor grad, saved_x;
  OptTensor weight = std::nullopt, mean = std::nullopt;
  Tensor rstd;
  OptTensor grad_summed = std::nullopt;
  double offset = 0.0;
  bool center = false;
  std::vector<bool> mask;  // grad_x, grad_weight[, grad_bias]
};

// The gradients in mask order, a 0-element tensor for each not asked for.
std::vector<Tensor> norm_backward(const NormBackwardCall& call, const NormBackend& backend);

}  // namespace fusedops
