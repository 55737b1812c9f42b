// The per-token math of fusedops.linear_cross_entropy, written once for the
// CPU loops (cpp/linear_cross_entropy/) and the CUDA kernels (torch-free, host
// and device). "opmath" is float32 for the half types and float32, float64 for
// float64: the logits, the losses, the accumulated gradients and the scalars
// are of it. A token's logits z (opmath), Gemma 2's softcap c > 0 applied
// first (z -> c * tanh(z / c)), give
//   loss = lse - (1 - eps) * z[t] - eps / V * sum_j z[j]
// (torch's cross entropy with label smoothing eps, lse = log sum_j exp z[j]),
// and the gradient at logit j, for a factor w of the token's loss,
//   w * (exp(z[j] - lse) - eps / V - (j == t) * (1 - eps)) * (1 - (z[j] / c)^2).
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/common/kernel_types.h"

namespace fusedops {

// The options the row math reads (softcap 0: none).
struct LceMath {
  int64_t vocab;
  int64_t ignore_index;
  double smoothing;
  double softcap;
};

// One chunk of tokens, as the CPU loop and the CUDA kernel take it: their
// logits, targets, losses and, where `dlogits` is given, the gradient at their
// logits.
struct LceRows {
  DType dtype = DType::Float32;     // of dlogits: the GEMMs' input dtype (x's on CUDA, opmath on the CPU)
  const void* logits = nullptr;     // [rows, ld] opmath: x . weight^T, without the bias
  const void* bias = nullptr;       // [vocab] opmath, or null
  const int64_t* target = nullptr;  // [rows]
  void* loss = nullptr;             // [rows] opmath: 0 where ignored, NaN where the target is out of range
  void* dlogits = nullptr;          // [rows, ld] of dtype, or null; may be logits itself (same type)
  void* lse = nullptr;              // [rows] opmath: the rows' log-sum-exp (of the capped logits), or null
  const void* grad = nullptr;       // the tokens' factors (opmath), grad[i * grad_stride]; null: 1
  int64_t grad_stride = 0;          // 0: one factor for every token
  const void* scale = nullptr;  // an opmath device scalar multiplying every factor (a mean's 1 / n), or null
  int64_t rows = 0, ld = 0;
  LceMath math{};
};

// The gradient at a slab of the vocab, columns [col0, col0 + cols), from the
// rows' log-sum-exp of a first pass (the vocab-slab algorithm of chunks.h):
// no reduction, an element at a time. Rows whose target is ignored get 0,
// those out of range NaN.
struct LceSlab {
  DType dtype = DType::Float32;     // of dlogits
  const void* logits = nullptr;     // [rows, ld] opmath: x . weight[col0 : col0 + cols]^T, without the bias
  const void* bias = nullptr;       // [vocab] opmath (all of it), or null
  const int64_t* target = nullptr;  // [rows]
  const void* lse = nullptr;        // [rows] opmath
  void* dlogits = nullptr;          // [rows, ld] of dtype; may be logits itself (same type)
  const void* grad = nullptr;       // as LceRows'
  int64_t grad_stride = 0;
  const void* scale = nullptr;
  int64_t rows = 0, ld = 0, col0 = 0, cols = 0;
  LceMath math{};
};

template <typename A>
FUSEDOPS_HD A lce_capped(A z, A softcap) {
  return softcap > A(0) ? softcap * std::tanh(z / softcap) : z;
}

// A running max and sum of exp(z - max) (the online log-sum-exp), mergeable.
template <typename A>
struct LseSum {
  A max = -INFINITY;
  A sum = 0;

  FUSEDOPS_HD void add(A z) {
    if (z == A(-INFINITY)) return;  // exp(-inf) adds nothing (and -inf - -inf is NaN)
    if (z > max) {
      sum = sum * std::exp(max - z) + A(1);
      max = z;
    } else {
      sum += std::exp(z - max);  // NaN z lands here and makes the sum NaN
    }
  }
  FUSEDOPS_HD void merge(const LseSum& o) {
    if (o.sum == A(0)) return;
    if (sum == A(0)) {
      *this = o;
      return;
    }
    const A m = max > o.max ? max : o.max;
    sum = sum * std::exp(max - m) + o.sum * std::exp(o.max - m);
    max = m;
  }
  FUSEDOPS_HD A lse() const { return max + std::log(sum); }
};

// Whether a token takes part: its target is not ignore_index.
FUSEDOPS_HD bool lce_counts(int64_t target, const LceMath& m) { return target != m.ignore_index; }

// A counted token whose target is a class: 0 <= target < V.
FUSEDOPS_HD bool lce_in_range(int64_t target, const LceMath& m) { return target >= 0 && target < m.vocab; }

// The token's loss from its (capped) lse, target logit and sum of logits.
template <typename A>
FUSEDOPS_HD A lce_loss(A lse, A z_target, A z_sum, const LceMath& m) {
  const A eps = A(m.smoothing);
  return lse - (A(1) - eps) * z_target - eps / A(m.vocab) * z_sum;
}

// The gradient at one logit whose capped value is z (see the header), for
// the token's factor w.
template <typename A>
FUSEDOPS_HD A lce_grad(A z, A lse, bool is_target, A w, const LceMath& m) {
  const A eps = A(m.smoothing);
  A d = std::exp(z - lse) - eps / A(m.vocab) - (is_target ? A(1) - eps : A(0));
  if (m.softcap > 0) {
    const A u = z / A(m.softcap);
    d *= A(1) - u * u;
  }
  return w * d;
}

// The slab's gradient at (row i, column j of the slab): lce_grad with the
// row's factor, 0 for an ignored target, NaN for one out of range.
template <typename A>
FUSEDOPS_HD A lce_slab_grad(const LceSlab& s, int64_t i, int64_t j) {
  const int64_t t = s.target[i];
  const LceMath& m = s.math;
  if (!lce_counts(t, m)) return A(0);
  if (!lce_in_range(t, m)) return A(NAN);
  const int64_t col = s.col0 + j;
  A z = static_cast<const A*>(s.logits)[i * s.ld + j];
  if (s.bias != nullptr) z += static_cast<const A*>(s.bias)[col];
  z = lce_capped(z, A(m.softcap));
  A w = s.grad != nullptr ? static_cast<const A*>(s.grad)[i * s.grad_stride] : A(1);
  if (s.scale != nullptr) w *= *static_cast<const A*>(s.scale);
  return lce_grad(z, static_cast<const A*>(s.lse)[i], col == t, w, m);
}

}  // namespace fusedops
