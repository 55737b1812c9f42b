// fusedops.linear_cross_entropy(x, weight, target, bias, *, ignore_index,
// reduction, label_smoothing, softcap)
//   == F.cross_entropy(F.linear(x, weight, bias).float(), target, ...)
// without the logits of all tokens at once: the tokens go in chunks
// (chunks.h), each chunk's logits in opmath (float32; float64 for float64
// inputs, see cuda/linear_cross_entropy/lce_math.h), so the extra memory is
// one chunk of logits and, with gradients, the opmath weight-gradient
// accumulator [V, H] (and in the half types on CUDA a chunk's gradient at the
// logits, the logits then a quarter of the chunk). The checks and the op
// bodies are shared by the CPU (linear_cross_entropy.cpp) and CUDA
// (linear_cross_entropy_cuda.cpp) devices.
//
// Ops (schemas in linear_cross_entropy.cpp; the loss is opmath: 0-dim for
// "mean" and "sum", target's shape for "none"):
//   linear_cross_entropy            the public op: the loss only.
//   _linear_cross_entropy_nograd    the same without autograd.
//   _linear_cross_entropy_forward   (..., output_mask) -> (loss, grad_x,
//       grad_weight, grad_bias), "mean" and "sum" only: the loss and its
//       gradients (opmath, not yet rounded) from the same chunk pass, three
//       GEMMs a chunk. A gradient not asked for comes back empty. Autograd
//       multiplies them by the incoming gradient: _linear_cross_entropy_scale.
//   _linear_cross_entropy_lse       (...) -> (loss, lse): the loss and the
//       rows' log-sum-exp (opmath [N]), one GEMM a chunk.
//   _linear_cross_entropy_backward  (grad, x, weight, target, bias, ...,
//       output_mask, cublas_math, lse=None) -> (grad_x, grad_weight,
//       grad_bias) in x's dtype, for any reduction, grad of the loss's shape:
//       with the forward's lse by vocab slabs (three GEMMs, no [V, H]
//       accumulator: chunks.h's run_slabs), without it each token chunk's
//       logits recomputed (four GEMMs a chunk in all).
//   _linear_cross_entropy_scale     (grad, saved, dtype) -> dtype(saved * grad),
//       grad an opmath 0-dim tensor.
// Every op but the last ends with `int cublas_math` (cpp/common/cublas_math.h).
//
// No op synchronizes the host: the count of targets (a mean's divisor) stays
// on the device. A target that is neither ignore_index nor in [0, V) is an
// error on the CPU (as torch's); on CUDA, where checking would synchronize,
// that token's loss and gradient rows are NaN.
//
// FUSEDOPS_LCE_CHUNK_ROWS and FUSEDOPS_LCE_SLAB_COLS (read each call) set the
// tokens a chunk and the columns a slab; unset, lce_chunk_rows' and
// lce_slab_cols' rules. For tests and measurements.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cpp/common/grads.h"
#include "cpp/common/matrix.h"
#include "cpp/common/stable.h"
#include "cuda/linear_cross_entropy/lce_math.h"

namespace fusedops {

inline constexpr char kLinearCrossEntropy[] = "linear_cross_entropy";

using OptDouble = std::optional<double>;

enum class Reduction { None, Mean, Sum };

// The op's arguments, checked, with x, weight and target as matrices.
struct LceProblem {
  Tensor x;                                   // [N, H] (a view where x's strides allow it)
  Tensor weight;                              // [V, H]
  OptTensor bias;                             // [V]
  Tensor target;                              // [N], int64, contiguous
  std::vector<int64_t> x_shape, token_shape;  // x's and target's shapes
  int64_t rows, hidden;
  ScalarType dtype, opmath;
  Reduction reduction;
  LceMath math;
};

LceProblem lce_problem(const Tensor& x, const Tensor& weight, const Tensor& target, const OptTensor& bias,
                       int64_t ignore_index, const std::string& reduction, double label_smoothing,
                       OptDouble softcap);

// grad matches the loss of `p` (its shape, the opmath dtype, x's device).
void lce_check_grad(const Tensor& grad, const LceProblem& p);

// Tokens a chunk: FUSEDOPS_LCE_CHUNK_ROWS, else as many as keep a chunk's
// buffers near kChunkBytes (half of it without `grads`; at least
// kMinChunkRows): its opmath logits or, with `own_dl` (the gradient at the
// logits narrower than opmath, in a buffer of its own), that gradient, the
// logits then a chunk's rows / kLogitsShare.
int64_t lce_chunk_rows(const LceProblem& p, bool grads, bool own_dl);
inline constexpr int64_t kLogitsShare = 4;

// Columns a vocab slab (chunks.h's run_slabs): FUSEDOPS_LCE_SLAB_COLS, else as
// many as keep the slab's gradient at the logits [N, cols] near kSlabBytes.
int64_t lce_slab_cols(const LceProblem& p, bool own_dl);

// lse matches the rows of `p` (opmath [N], contiguous, x's device).
void lce_check_lse(const Tensor& lse, const LceProblem& p);

using LceForward = std::tuple<Tensor, Tensor, Tensor, Tensor>;
using LceLoss = std::tuple<Tensor, Tensor>;

Tensor linear_cross_entropy_cuda(const Tensor& x, const Tensor& weight, const Tensor& target, OptTensor bias,
                                 int64_t ignore_index, std::string reduction, double label_smoothing,
                                 OptDouble softcap, int64_t cublas_math);
LceForward linear_cross_entropy_forward_cuda(const Tensor& x, const Tensor& weight, const Tensor& target,
                                             OptTensor bias, int64_t ignore_index, std::string reduction,
                                             double label_smoothing, OptDouble softcap,
                                             std::vector<bool> mask, int64_t cublas_math);
LceLoss linear_cross_entropy_lse_cuda(const Tensor& x, const Tensor& weight, const Tensor& target,
                                      OptTensor bias, int64_t ignore_index, std::string reduction,
                                      double label_smoothing, OptDouble softcap, int64_t cublas_math);
Grads3 linear_cross_entropy_backward_cuda(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                          const Tensor& target, OptTensor bias, int64_t ignore_index,
                                          std::string reduction, double label_smoothing, OptDouble softcap,
                                          std::vector<bool> mask, int64_t cublas_math, OptTensor lse);
Tensor linear_cross_entropy_scale_cuda(const Tensor& grad, const Tensor& saved, ScalarType dtype);

}  // namespace fusedops
