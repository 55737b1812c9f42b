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
// (cpp/common/cublas_math.h).
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cpp/common/cublas_math.h"
#include "cpp/common/grads.h"
#include "cpp/common/matrix.h"
#include "cpp/common/stable.h"
#include "cuda/linear/linear_math.h"

namespace fusedops {

// The op's public name: its schema's and its errors'.
constexpr char kLinear[] = "linear";

using OptStr = std::optional<std::string>;
using OptDouble = std::optional<double>;

// The epilogue named by the op's arguments; rejects an unknown activation.
LinearEpilogue linear_epilogue(const OptStr& activation, OptDouble min, OptDouble max);

// Checks x [..., in], weight [out, in], bias [out] (dtypes, devices, shapes)
// and returns the output shape [..., out].
std::vector<int64_t> linear_output_shape(const Tensor& x, const Tensor& weight, const OptTensor& bias);

// grad_x's shape: grad's [..., out] with weight's in_features last.
std::vector<int64_t> grad_x_shape(const Tensor& grad, const Tensor& weight);

// _linear_backward's arguments, checked before any kernel reads them.
void linear_check_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& saved,
                           const std::vector<bool>& mask, const LinearEpilogue& e);

using LinearForward = std::tuple<Tensor, Tensor>;
using LinearGrads = Grads3;

Tensor linear_cuda(const Tensor& x, const Tensor& weight, OptTensor bias, OptStr activation, OptDouble min,
                   OptDouble max, int64_t cublas_math);
LinearForward linear_forward_cuda(const Tensor& x, const Tensor& weight, OptTensor bias, OptStr activation,
                                  OptDouble min, OptDouble max, int64_t cublas_math);
LinearGrads linear_backward_cuda(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                 const Tensor& saved, OptStr activation, OptDouble min, OptDouble max,
                                 std::vector<bool> mask, int64_t cublas_math);

}  // namespace fusedops
