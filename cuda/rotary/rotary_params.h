// Torch-free description of one fusedops.rotary call, forward or backward, and
// the math of one pair: shared by the CPU loop (cpp/rotary/rotary.cpp) and the
// CUDA kernel (cuda/rotary/rotary.cu), so both rotate alike.
#pragma once

#include <cstdint>

#include "cuda/common/host_device.h"
#include "cuda/common/kernel_types.h"

namespace fusedops {

// One of q and k (or of their gradients): `in` is [batch, heads, seq,
// head_dim] with any strides (in elements; 0 along a dim of size 1), `out` a
// tensor of the same shape, dense along head_dim. heads == 0: nothing to do (a
// gradient not asked for).
struct RotaryTensor {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t heads = 0;
  int64_t strides[4] = {};      // of `in`: batch, heads, seq, head_dim
  int64_t out_strides[4] = {};  // of `out`, the last 1
};

// cos or sin: one value per rotated element of each position, [b, s, r] at
// b * strides[0] + s * strides[1] + r * strides[2] (strides[0] = 0 where the
// batch shares one table).
struct RotaryTable {
  const void* data = nullptr;
  int64_t strides[3] = {};
};

struct RotaryProblem {
  DType dtype = DType::Float32;  // of q, k and the outputs
  bool float_tables = false;     // cos and sin are float32 (q and k a half type); else of `dtype`
  bool interleaved = false;      // GPT-J's pairs (2i, 2i + 1); else rotate_half's (i, i + R/2)
  bool transpose = false;        // the backward: the transposed rotation
  int64_t batch = 0, seq = 0, head_dim = 0, rotary_dim = 0;
  RotaryTable cos, sin;
  RotaryTensor q, k;
};

// Where row (b, h, s) is: h counts q's heads, then k's.
struct RotaryRow {
  bool is_q;
  int64_t in, out, in_stride;  // in elements: in's first element, out's, in's stride along head_dim
};

FUSEDOPS_HD RotaryRow rotary_row(const RotaryProblem& p, int64_t b, int64_t s, int64_t h) {
  const bool is_q = h < p.q.heads;
  const RotaryTensor& x = is_q ? p.q : p.k;
  const int64_t head = is_q ? h : h - p.q.heads;
  return {.is_q = is_q,
          .in = b * x.strides[0] + head * x.strides[1] + s * x.strides[2],
          .out = b * x.out_strides[0] + head * x.out_strides[1] + s * x.out_strides[2],
          .in_stride = x.strides[3]};
}

// One pair (a, b) in the op-math type: HF's x * cos + rotate_half(x) * sin,
// where rotate_half(x) is -x_b at a and x_a at b (GPT-J's rotate_every_two
// likewise for (2i, 2i + 1)). Every element has its own cos and sin, as HF's
// formula reads them, so any tables give its result. The transpose (the
// backward) swaps sin_a and sin_b and negates them: with HF's tables, whose
// two elements of a pair share one angle, a rotation by -sin.
template <typename A>
FUSEDOPS_HD void rotate_pair(A& xa, A& xb, A cos_a, A cos_b, A sin_a, A sin_b, bool transpose) {
  if (transpose) {
    const A t = sin_a;
    sin_a = -sin_b;
    sin_b = -t;
  }
  const A a = xa * cos_a - xb * sin_a;
  xb = xb * cos_b + xa * sin_b;
  xa = a;
}

}  // namespace fusedops
