// Torch-free description of one fusedops.scale_bias_clamp call, shared by the
// CPU kernels (cpp/scale_bias_clamp/) and the CUDA launchers
// (cuda/scale_bias_clamp/scale_bias_clamp.cu).
#pragma once

#include <cstdint>
#include <limits>

#include "cuda/common/clamp.h"
#include "cuda/common/kernel_types.h"

namespace fusedops {

// The scalar side of the op. A scale given as a tensor is read by the kernel
// from `scale` (one element of x's dtype, in x's memory: device memory on
// CUDA, never copied to the host); otherwise `scale_value` is used. Likewise
// a bias pointer of null means the number `bias_value`.
struct SbcScalars {
  const void* scale = nullptr;
  double scale_value = 1.0;
  double bias_value = 0.0;
  double lo = -std::numeric_limits<double>::infinity();  // min, or -inf when None
  double hi = std::numeric_limits<double>::infinity();   // max, or +inf when None
  bool any_bound = false;                                // min or max given
};

// Clamp and its gradient mask in the op-math type A, as torch.clamp:
// NaN propagates, min > max gives max; the gradient passes where
// min <= v <= max (zero at NaN). Without bounds the op is x * scale + bias and
// everything passes, NaN included, as torch's autograd of that expression.
template <typename A>
struct SbcClamp {
  A lo, hi;
  bool any_bound;

  // An absent bound is an infinite one here, so both are always applied.
  FUSEDOPS_HD A operator()(A v) const { return clamp_value(v, true, lo, true, hi); }
  FUSEDOPS_HD bool pass(A v) const { return !any_bound || clamp_passes(v, true, lo, true, hi); }
};

template <typename A>
SbcClamp<A> make_clamp(const SbcScalars& s) {
  return {static_cast<A>(s.lo), static_cast<A>(s.hi), s.any_bound};
}

// Where the gradients of one backward call go; null for those not asked for.
// grad_x and grad_bias_full are contiguous and x-shaped (grad_bias_full holds
// grad_out * mask, which the glue reduces to bias's shape in the rare layouts
// without a fused reduction); grad_scale has one element; grad_bias_sum
// receives the fused bias reduction: one element for a one-element bias, `C`
// for a bias broadcast along the rows of a [R, C] layout.
struct SbcGrads {
  void* grad_x = nullptr;
  void* grad_bias_full = nullptr;
  void* grad_scale = nullptr;
  void* grad_bias_sum = nullptr;
};

}  // namespace fusedops

namespace fusedops {

// Which loop a call takes, decided from the coalesced layout the same way by
// every backend.
//   Flat:    x (and grad_out) one dense run; bias a number, one element, or dense like x.
//   Rows:    a [rows, cols] layout, dense along cols (rows may be padded);
//            bias a number or one [cols] vector repeated on every row.
//   Strided: anything else.
enum class SbcPath { Flat, Rows, Strided };

// How the bias gradient is produced: not at all; reduced in the kernel to one
// element (Single) or to [cols] (Rows); or written full-size as grad_out * mask
// (Full): the gradient itself when bias has x's size, else summed to bias's
// shape by the glue (only in layouts the fused reductions do not cover).
enum class SbcBiasGrad { None, Single, Rows, Full };

struct SbcShape {
  SbcPath path = SbcPath::Strided;
  SbcBiasGrad bias_grad = SbcBiasGrad::None;
  int64_t rows = 0, cols = 0;
};

// Forward, layout (out, x, bias); a missing bias is any operand the kernels ignore.
inline SbcShape classify_forward(const StridedLayout<3>& l, bool has_bias) {
  SbcShape s;
  const int64_t* so = l.strides[0];
  const int64_t* sx = l.strides[1];
  const int64_t* sb = l.strides[2];
  if (l.ndim == 1 && so[0] == 1 && sx[0] == 1 && (!has_bias || sb[0] == 0 || sb[0] == 1)) {
    s.path = SbcPath::Flat;
  } else if (l.ndim == 2 && so[1] == 1 && so[0] == l.sizes[1] && sx[1] == 1 &&
             (!has_bias || (sb[0] == 0 && sb[1] == 1))) {
    s.path = SbcPath::Rows;
    s.rows = l.sizes[0];
    s.cols = l.sizes[1];
  }
  return s;
}

// Backward, layout (x-shaped contiguous reference, grad_out, x, bias).
inline SbcShape classify_backward(const StridedLayout<4>& l, bool has_bias, int64_t bias_numel,
                                  bool need_bias) {
  SbcShape s;
  const int64_t* sr = l.strides[0];
  const int64_t* sg = l.strides[1];
  const int64_t* sx = l.strides[2];
  const int64_t* sb = l.strides[3];
  bool all_zero = true;  // bias the same element everywhere
  for (int d = 0; d < l.ndim; ++d) all_zero = all_zero && sb[d] == 0;
  if (l.ndim == 1 && sr[0] == 1 && sg[0] == 1 && sx[0] == 1 && (!has_bias || sb[0] == 0 || sb[0] == 1)) {
    s.path = SbcPath::Flat;
  } else if (l.ndim == 2 && sr[1] == 1 && sg[1] == 1 && sx[1] == 1 &&
             (!has_bias || (sb[0] == 0 && sb[1] == 1 && (!need_bias || bias_numel == l.sizes[1])))) {
    s.path = SbcPath::Rows;
    s.rows = l.sizes[0];
    s.cols = l.sizes[1];
  }
  if (has_bias && need_bias) {
    if (all_zero && bias_numel == 1) {
      s.bias_grad = SbcBiasGrad::Single;
    } else if (s.path == SbcPath::Rows) {
      s.bias_grad = SbcBiasGrad::Rows;
    } else {
      s.bias_grad = SbcBiasGrad::Full;
    }
  }
  return s;
}

}  // namespace fusedops
