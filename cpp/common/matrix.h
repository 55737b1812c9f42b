// Tensors as the matrices of a GEMM, for any op's host glue: the rows of
// [..., K], views, and torch's own GEMM through the C shims of one device.
#pragma once

#include <optional>

#include "cpp/common/stable.h"

namespace fusedops {

inline bool has_bias(const OptTensor& bias) { return bias.has_value() && bias->defined(); }

// `t` as the contiguous-or-strided 2-D matrix [leading_rows, last dim] (a view
// when the strides allow it, as reshape does).
inline Tensor as_matrix(const Tensor& t) {
  if (t.dim() == 2) return t;
  return torch::stable::reshape(t, {leading_rows(t), t.size(-1)});
}

// m^T of a 2-D m, as a view.
inline Tensor transpose2d(const Tensor& m) { return torch::stable::transpose(m, 0, 1); }

// out[M, N] = a[M, K] . b[K, N] (+ bias) by torch's own GEMM, through the C
// shims of one device (its addmm_out and mm_out). bias may be out itself
// (out += a . b).
template <auto kAddmmOut, auto kMmOut>
void torch_mm(const Tensor& out, const Tensor& a, const Tensor& b, const OptTensor& bias) {
  if (has_bias(bias)) {
    TORCH_ERROR_CODE_CHECK(kAddmmOut(out.get(), bias->get(), a.get(), b.get(), 1.0, 1.0));
  } else {
    TORCH_ERROR_CODE_CHECK(kMmOut(out.get(), a.get(), b.get()));
  }
}

}  // namespace fusedops
