// fusedops.linear(x, weight, bias, *, activation, min, max)
//   == clamp(act(F.linear(x, weight, bias)), min, max)
// Host side of the op: argument checks and the epilogue description, shared by
// the CPU kernels (linear.cpp) and the CUDA glue (linear_cuda.cpp); the
// elementwise math is in cuda/linear/, autograd, autocast and the shape
// functions in src/fusedops/ops/linear.py.
//
// Ops (schemas in linear.cpp):
//   linear           the public op; returns out only.
//   _linear_nograd   the same kernels without autograd (fusedops.linear calls
//                    it when no gradient is needed).
//   _linear_forward  what autograd calls: returns (out, aux), aux = the
//                    pre-activation z when the backward needs it
//                    (LinearEpilogue::needs_aux), else an empty tensor.
//   _linear_backward (grad, x, weight, saved, ...) -> (grad_x, grad_weight,
//                    grad_bias); saved is aux if needs_aux, out for relu alone,
//                    unused otherwise. x (read for grad_weight), weight (for
//                    grad_x) and an unused saved may be stand-ins of grad's
//                    dtype and device. Grads not asked for come back empty.
// Every op ends with `int cublas_math`: the torch.backends.cuda.matmul flags
// (CublasMath), which the stable ABI cannot read: packed by the Python caller,
// or -1 (the default), read when the kernel runs through the reader the C++
// autograd accelerator installs (torch's default flags where none is).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cpp/common/stable.h"
#include "cuda/linear/linear_math.h"

namespace fusedops {

using OptTensor = std::optional<Tensor>;
using OptStr = std::optional<std::string>;
using OptDouble = std::optional<double>;

// The epilogue named by the op's arguments; rejects an unknown activation.
LinearEpilogue linear_epilogue(const OptStr& activation, OptDouble min, OptDouble max);

// Checks x [..., in], weight [out, in], bias [out] (dtypes, devices, shapes)
// and returns the output shape [..., out].
std::vector<int64_t> linear_output_shape(const Tensor& x, const Tensor& weight, const OptTensor& bias);

inline bool has_bias(const OptTensor& bias) { return bias.has_value() && bias->defined(); }

// grad_x's shape: grad's [..., out] with weight's in_features last.
std::vector<int64_t> grad_x_shape(const Tensor& grad, const Tensor& weight);

// _linear_backward's arguments, checked before any kernel reads them.
void linear_check_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& saved,
                           const std::vector<bool>& mask, const LinearEpilogue& e);

// out[M, N] = a[M, K] . b[K, N] (+ bias) by torch's own GEMM, through the C
// shims of one device (its addmm_out and mm_out): the CPU kernels, and the
// CUDA fallback where cuBLASLt has no algorithm.
template <auto kAddmmOut, auto kMmOut>
void torch_mm(const Tensor& out, const Tensor& a, const Tensor& b, const OptTensor& bias) {
  if (has_bias(bias)) {
    TORCH_ERROR_CODE_CHECK(kAddmmOut(out.get(), bias->get(), a.get(), b.get(), 1.0, 1.0));
  } else {
    TORCH_ERROR_CODE_CHECK(kMmOut(out.get(), a.get(), b.get()));
  }
}

// m^T of a 2-D m, as a view.
inline Tensor transpose2d(const Tensor& m) { return torch::stable::transpose(m, 0, 1); }

// `t` as the contiguous-or-strided 2-D matrix [leading_rows, last dim] (a view
// when the strides allow it, as reshape does).
Tensor as_matrix(const Tensor& t);

using LinearForward = std::tuple<Tensor, Tensor>;
using LinearGrads = std::tuple<Tensor, Tensor, Tensor>;

// The gradients with a no_tensor for each one not asked for (one allocation,
// only when some gradient is not asked for).
inline LinearGrads fill_unrequested(std::array<Tensor, 3> grads, const std::vector<bool>& mask,
                                    const Tensor& like) {
  if (!(mask[0] && mask[1] && mask[2])) {
    const Tensor none = no_tensor(like);
    for (size_t i = 0; i < 3; ++i) {
      if (!mask[i]) grads[i] = none;
    }
  }
  return {grads[0], grads[1], grads[2]};
}

// torch.backends.cuda.matmul's flags as packed by src/fusedops/ops/linear.py
// and accel/common/activate.cpp; 0 is torch's default.
struct CublasMath {
  bool allow_tf32;     // float32 may use TF32 (allow_tf32)
  int fp16_reduction;  // torch's CuBLASReductionOption for float16:
  int bf16_reduction;  // 0 reduced precision, 1 split-K only, 2 neither
};
// The flags now, packed, from the accelerator's reader; 0 where none is installed.
int64_t current_cublas_math();
inline CublasMath cublas_math_of(int64_t bits) {
  if (bits < 0) bits = current_cublas_math();
  return {(bits & 1) != 0, static_cast<int>((bits >> 1) & 3), static_cast<int>((bits >> 3) & 3)};
}

Tensor linear_cuda(const Tensor& x, const Tensor& weight, OptTensor bias, OptStr activation, OptDouble min,
                   OptDouble max, int64_t cublas_math);
LinearForward linear_forward_cuda(const Tensor& x, const Tensor& weight, OptTensor bias, OptStr activation,
                                  OptDouble min, OptDouble max, int64_t cublas_math);
LinearGrads linear_backward_cuda(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                 const Tensor& saved, OptStr activation, OptDouble min, OptDouble max,
                                 std::vector<bool> mask, int64_t cublas_math);

}  // namespace fusedops
