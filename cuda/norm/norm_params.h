// The normalization ops' arguments:
// rms_norm and layer_norm over the last dim of contiguous rows, optionally
// after adding a residual (add_rms_norm, add_layer_norm). Torch-free; the
// host glue (cpp/norm/) fills these; the CPU kernels and the CUDA launchers
// (cuda/norm/norm.h) read them.
//
// Types: T is x's (and residual's, summed's, grad_x's) dtype; the parameters
// (weight, bias) are T, or float32 for a float16 or bfloat16 x (`wide_params`),
// and the output is the wider of the two, as torch.result_type says, or (a
// float32 x's out_dtype) float16 or bfloat16: `out_dtype`, which the backward's
// gradient also has. Math in A = float32 (float64 for float64 x); mean and
// rstd are saved per row in A.
#pragma once

#include <type_traits>

#include "cuda/common/kernel_types.h"

namespace fusedops {

// The output's element type for x's T and the parameters' W: the wider one.
template <typename T, typename W>
using norm_out_t = std::conditional_t<(sizeof(W) > sizeof(T)), W, T>;

struct NormForwardArgs {
  const void* x;
  const void* residual;  // null: no add
  const void* weight;    // null: no scale
  const void* bias;      // null: no shift (layer_norm only)
  void* out;             // [rows, cols] of out_dtype
  void* summed;          // x + residual in T, where residual is given
  void* mean;            // [rows] in A, layer_norm only
  void* rstd;            // [rows] in A
  int64_t rows, cols;
  double eps, offset;  // y = xhat * (offset + weight) + bias
  DType dtype;         // T
  DType out_dtype;     // norm_out_t's, or float16 or bfloat16 for a float32 T
  bool wide_params;    // weight and bias are float32 (T is a half type)
  bool center;         // layer_norm: subtract the mean
};

struct NormBackwardArgs {
  const void* grad;    // [rows, cols] of out_dtype
  const void* x;       // what was normalized (summed, for the add_ ops)
  const void* weight;  // null: no scale
  const void* mean;    // layer_norm only
  const void* rstd;
  const void* grad_summed;  // null, or [rows, cols] in T, added to grad_x
  void* grad_x;             // null: not asked for
  void* grad_weight;        // null: not asked for; in the parameters' dtype
  void* grad_bias;          // null: not asked for
  void* partial_weight;     // [blocks, cols] of A: the blocks' sums for grad_weight
  void* partial_bias;       // the same for grad_bias
  int64_t rows, cols, blocks;
  double offset;
  DType dtype;
  DType out_dtype;  // grad's
  bool wide_params;
  bool center;
};

}  // namespace fusedops
