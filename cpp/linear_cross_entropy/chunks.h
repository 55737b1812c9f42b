// fusedops.linear_cross_entropy's chunk loop and op bodies, written once for
// both devices. A Device (CpuDevice in linear_cross_entropy.cpp, CudaDevice in
// linear_cross_entropy_cuda.cpp) gives:
//   Tensor weight()                     weight as the GEMMs' operand
//   Tensor x_rows(begin, rows)          x's rows as the GEMMs' operand
//   ScalarType operand_dtype()          their dtype (the gradient at the logits is of it)
//   void mm(out, a, b, accumulate)      out (opmath, or of the operands' dtype; contiguous) (+)= a . b
//   void rows(const LceRows&)           a chunk's row math (cuda/linear_cross_entropy/lce_math.h)
//   void slab_grad(const LceSlab&)      a vocab slab's gradient at the logits (lce_math.h)
//   bool slab_grad_gemm(dl, x, ws, s)   that gradient for all of s's rows straight from x . ws^T where the
//                                       device has such a GEMM (no logits buffer); false: not done
//   void column_sums(acc, dl, accumulate)   acc[j] (+)= sum_i dl[i, j], in row order
//   void count(counts)                  counts = (n, 1 / n), n the targets not ignored
//   void total(out, loss, count)        out = sum(loss) (/ *count), in a fixed order
//   void scale(out, saved, grad)        out = out's dtype(saved * grad)
#pragma once

#include <algorithm>
#include <vector>

#include "cpp/linear_cross_entropy/linear_cross_entropy.h"

namespace fusedops::lce {

// Rows [begin, begin + n) of t, a view.
inline Tensor rows_of(Tensor t, int64_t begin, int64_t n) {
  return begin == 0 && n == t.size(0) ? t : torch::stable::narrow(t, 0, begin, n);
}

// t as a contiguous tensor of `dtype` (t itself where it is one).
inline Tensor as_type(const Tensor& t, ScalarType dtype) {
  if (t.scalar_type() == dtype && t.is_contiguous()) return t;
  Tensor out = empty(t, t.sizes(), dtype);
  torch::stable::copy_(out, t);
  return out;
}

// What the chunk loop writes (opmath, contiguous): the tokens' losses and the
// gradient accumulators asked for; and what it multiplies each token's
// gradient by: factor (a 0-dim tensor, or one a token) times scale (0-dim).
struct ChunkOutputs {
  Tensor loss;                           // [N]
  OptTensor lse = std::nullopt;          // [N]: the rows' log-sum-exp
  OptTensor grad_x = std::nullopt;       // [N, H]
  OptTensor grad_weight = std::nullopt;  // [V, H]
  OptTensor grad_bias = std::nullopt;    // [V]
  OptTensor factor = std::nullopt;       // none: 1
  OptTensor scale = std::nullopt;        // none: 1
};

template <typename Device>
void run_chunks(Device& dev, const LceProblem& p, ChunkOutputs& out) {
  const bool grads = out.grad_x || out.grad_weight || out.grad_bias;
  if (p.rows == 0) {  // no chunk: the sums over tokens are 0
    if (out.grad_weight) torch::stable::zero_(*out.grad_weight);
    if (out.grad_bias) torch::stable::zero_(*out.grad_bias);
    return;
  }
  // The gradient at the logits is in the GEMMs' operand dtype. Where that is opmath it replaces the logits;
  // where it is narrower it has a buffer of a chunk's rows, and the logits one of a quarter of them
  // (lce_chunk_rows): each GEMM of the gradients then sums over 4x the tokens the logits buffer holds, and
  // the weight's [V, H] accumulator is read and written 4x less often.
  const bool own_dl = grads && dev.operand_dtype() != p.opmath;
  const int64_t V = p.math.vocab, chunk = std::min(lce_chunk_rows(p, grads, own_dl), p.rows);
  const int64_t logit_rows = own_dl ? (chunk + kLogitsShare - 1) / kLogitsShare : chunk;
  const Tensor weight = dev.weight();
  Tensor bias;  // in opmath: the row math adds it
  if (has_bias(p.bias)) bias = as_type(*p.bias, p.opmath);
  const Tensor logits = empty(p.x, {logit_rows, V}, p.opmath);
  Tensor dl;
  if (grads) dl = own_dl ? empty(p.x, {chunk, V}, dev.operand_dtype()) : logits;
  const bool per_token = out.factor && out.factor->dim() > 0;
  LceRows r{.dtype = to_dtype(dev.operand_dtype()),
            .bias = has_bias(p.bias) ? bias.const_data_ptr() : nullptr,
            .grad_stride = per_token ? 1 : 0,
            .scale = out.scale ? out.scale->const_data_ptr() : nullptr,
            .ld = V,
            .math = p.math};
  for (int64_t begin = 0; begin < p.rows; begin += chunk) {
    const int64_t n = std::min(chunk, p.rows - begin);
    const Tensor xc = dev.x_rows(begin, n);
    for (int64_t part = 0; part < n; part += logit_rows) {  // the chunk's logits, logit_rows at a time
      const int64_t m = std::min(logit_rows, n - part), first = begin + part;
      const Tensor lc = rows_of(logits, 0, m);
      dev.mm(lc, rows_of(xc, part, m), transpose2d(weight), false);
      r.logits = lc.const_data_ptr();
      r.target = static_cast<const int64_t*>(rows_of(p.target, first, m).const_data_ptr());
      r.loss = rows_of(out.loss, first, m).mutable_data_ptr();
      r.lse = out.lse ? rows_of(*out.lse, first, m).mutable_data_ptr() : nullptr;
      r.dlogits = grads ? rows_of(dl, part, m).mutable_data_ptr() : nullptr;
      r.grad = !out.factor ? nullptr
               : per_token ? rows_of(*out.factor, first, m).const_data_ptr()
                           : out.factor->const_data_ptr();
      r.rows = m;
      dev.rows(r);
    }
    if (!grads) continue;
    const Tensor dlc = rows_of(dl, 0, n);
    if (out.grad_x) dev.mm(rows_of(*out.grad_x, begin, n), dlc, weight, false);
    if (out.grad_weight) dev.mm(*out.grad_weight, transpose2d(dlc), xc, begin > 0);
    if (out.grad_bias) dev.column_sums(*out.grad_bias, dlc, begin > 0);
  }
}

// The first `rows * cols` elements of a flat buffer as a contiguous [rows, cols] matrix.
inline Tensor matrix_in(Tensor flat, int64_t rows, int64_t cols) {
  return torch::stable::view(torch::stable::narrow(flat, 0, 0, rows * cols), {rows, cols});
}

// The gradients a slab of the vocab at a time, from the rows' log-sum-exp of a first pass (loss_and_lse): for
// each slab, its logits for all tokens (recomputed, a part of the rows at a time) and their gradient G [N,
// slab] (or G straight out of the GEMM's epilogue where the device has one: slab_grad_gemm), then weight's
// gradient for the slab, G^T . x, one GEMM over all tokens rounded once to its dtype (no [V, H] accumulator),
// and x's, G . weight[slab], accumulated slab after slab in opmath [N, H]. Four GEMMs in all with the first
// pass's, against the token chunks' three: the memory of a slab instead of weight's opmath gradient.
// `grad_weight` is in weight's dtype; the other outputs opmath.
template <typename Device>
void run_slabs(Device& dev, const LceProblem& p, const Tensor& lse, ChunkOutputs& out) {
  if (p.rows == 0) {
    if (out.grad_weight) torch::stable::zero_(*out.grad_weight);
    if (out.grad_bias) torch::stable::zero_(*out.grad_bias);
    return;
  }
  const bool own_dl = dev.operand_dtype() != p.opmath;
  const int64_t N = p.rows, V = p.math.vocab, slab = std::min(lce_slab_cols(p, own_dl), V);
  const int64_t logit_rows = own_dl ? (N + kLogitsShare - 1) / kLogitsShare : N;
  const Tensor weight = dev.weight(), x = dev.x_rows(0, N);
  Tensor bias;
  if (has_bias(p.bias)) bias = as_type(*p.bias, p.opmath);
  const Tensor dl_flat = empty(p.x, {N * slab}, dev.operand_dtype());
  OptTensor logits_flat;  // the unfused path's opmath logits: the gradient itself where it is opmath
  if (!own_dl) logits_flat = dl_flat;
  // Weight's gradient straight from the GEMM (rounded once in it) where the operands are of its dtype, else
  // through an opmath slab.
  const bool dw_direct = dev.operand_dtype() == p.dtype;
  const Tensor dw_slab = out.grad_weight && !dw_direct ? empty(p.x, {slab * p.hidden}, p.opmath) : Tensor();
  const bool per_token = out.factor && out.factor->dim() > 0;
  LceSlab s{.dtype = to_dtype(dev.operand_dtype()),
            .bias = has_bias(p.bias) ? bias.const_data_ptr() : nullptr,
            .target = static_cast<const int64_t*>(p.target.const_data_ptr()),
            .lse = lse.const_data_ptr(),
            .grad = out.factor ? out.factor->const_data_ptr() : nullptr,
            .grad_stride = per_token ? 1 : 0,
            .scale = out.scale ? out.scale->const_data_ptr() : nullptr,
            .rows = N,
            .math = p.math};
  for (int64_t col0 = 0; col0 < V; col0 += slab) {
    const int64_t cols = std::min(slab, V - col0);
    const Tensor ws = rows_of(weight, col0, cols);
    const Tensor dl = matrix_in(dl_flat, N, cols);
    s.col0 = col0;
    s.cols = cols;
    if (!dev.slab_grad_gemm(dl, x, ws, s)) {
      if (!logits_flat) logits_flat = empty(p.x, {logit_rows * slab}, p.opmath);
      for (int64_t first = 0; first < N; first += logit_rows) {  // the logits, logit_rows at a time
        const int64_t m = std::min(logit_rows, N - first);
        const Tensor lc = matrix_in(*logits_flat, m, cols);
        dev.mm(lc, rows_of(x, first, m), transpose2d(ws), false);
        LceSlab part = s;
        part.logits = lc.const_data_ptr();
        part.target = s.target + first;
        part.lse = rows_of(lse, first, m).const_data_ptr();
        part.dlogits = rows_of(dl, first, m).mutable_data_ptr();
        if (per_token) part.grad = rows_of(*out.factor, first, m).const_data_ptr();
        part.rows = m;
        part.ld = cols;
        dev.slab_grad(part);
      }
    }
    if (out.grad_x) dev.mm(*out.grad_x, dl, ws, col0 > 0);
    if (out.grad_weight) {
      Tensor dst = rows_of(*out.grad_weight, col0, cols);
      const Tensor dw = dw_direct ? dst : matrix_in(dw_slab, cols, p.hidden);
      dev.mm(dw, transpose2d(dl), x, false);
      if (!dw_direct) torch::stable::copy_(dst, dw);
    }
    if (out.grad_bias) {
      Tensor db = torch::stable::narrow(*out.grad_bias, 0, col0, cols);
      dev.column_sums(db, dl, false);
    }
  }
}

// (n, 1 / n) of the targets not ignored where the reduction is a mean.
template <typename Device>
OptTensor mean_counts(Device& dev, const LceProblem& p) {
  if (p.reduction != Reduction::Mean) return std::nullopt;
  Tensor counts = empty(p.x, {2}, p.opmath);
  dev.count(counts);
  return counts;
}

// The loss from the tokens' losses: them (target's shape), their sum or mean.
template <typename Device>
Tensor reduce_loss(Device& dev, const LceProblem& p, const Tensor& loss, const OptTensor& counts) {
  if (p.reduction == Reduction::None) return torch::stable::view(loss, p.token_shape);
  Tensor out = empty(p.x, {}, p.opmath);
  dev.total(out, loss, counts ? OptTensor(rows_of(*counts, 0, 1)) : std::nullopt);
  return out;
}

inline OptTensor accumulator(bool wanted, const LceProblem& p, std::vector<int64_t> sizes,
                             std::optional<ScalarType> dtype = std::nullopt) {
  return wanted ? OptTensor(empty(p.x, sizes, dtype.value_or(p.opmath))) : std::nullopt;
}

// The public op: the loss.
template <typename Device>
Tensor loss(Device& dev, const LceProblem& p) {
  const OptTensor counts = mean_counts(dev, p);
  ChunkOutputs out{.loss = empty(p.x, {p.rows}, p.opmath)};
  run_chunks(dev, p, out);
  return reduce_loss(dev, p, out.loss, counts);
}

// _linear_cross_entropy_lse: the loss and the rows' log-sum-exp (opmath [N]), which the backward's vocab
// slabs start from.
template <typename Device>
std::tuple<Tensor, Tensor> loss_and_lse(Device& dev, const LceProblem& p) {
  const OptTensor counts = mean_counts(dev, p);
  ChunkOutputs out{.loss = empty(p.x, {p.rows}, p.opmath), .lse = empty(p.x, {p.rows}, p.opmath)};
  run_chunks(dev, p, out);
  return {reduce_loss(dev, p, out.loss, counts), *out.lse};
}

// _linear_cross_entropy_forward: the loss and its opmath gradients.
template <typename Device>
LceForward forward(Device& dev, const LceProblem& p, const std::vector<bool>& mask) {
  FUSEDOPS_CHECK(mask.size() == 3, kLinearCrossEntropy, "output_mask must have 3 elements, got ",
                 mask.size());
  FUSEDOPS_CHECK(
      p.reduction != Reduction::None, kLinearCrossEntropy,
      "_linear_cross_entropy_forward takes reduction \"mean\" or \"sum\": with \"none\" the gradient "
      "needs the incoming gradient of every token (_linear_cross_entropy_backward)");
  const OptTensor counts = mean_counts(dev, p);
  ChunkOutputs out{.loss = empty(p.x, {p.rows}, p.opmath),
                   .grad_x = accumulator(mask[0], p, {p.rows, p.hidden}),
                   .grad_weight = accumulator(mask[1], p, {p.math.vocab, p.hidden}),
                   .grad_bias = accumulator(mask[2] && has_bias(p.bias), p, {p.math.vocab}),
                   .scale = counts ? OptTensor(rows_of(*counts, 1, 1)) : std::nullopt};
  run_chunks(dev, p, out);
  const Tensor none = no_tensor(out.loss);
  return {reduce_loss(dev, p, out.loss, counts),
          out.grad_x ? torch::stable::view(*out.grad_x, p.x_shape) : none, out.grad_weight.value_or(none),
          out.grad_bias.value_or(none)};
}

// _linear_cross_entropy_backward: the gradients for `grad`, in x's dtype: from the forward's log-sum-exp by
// vocab slabs (run_slabs) where it is given, else by token chunks with each chunk's logits recomputed.
template <typename Device>
Grads3 backward(Device& dev, const LceProblem& p, const Tensor& grad, const std::vector<bool>& mask,
                const OptTensor& lse) {
  FUSEDOPS_CHECK(mask.size() == 3, kLinearCrossEntropy, "output_mask must have 3 elements, got ",
                 mask.size());
  lce_check_grad(grad, p);
  if (lse) lce_check_lse(*lse, p);
  const OptTensor counts = mean_counts(dev, p);
  const bool per_token = p.reduction == Reduction::None;
  ChunkOutputs out{.loss = empty(p.x, {p.rows}, p.opmath),
                   .grad_x = accumulator(mask[0], p, {p.rows, p.hidden}),
                   .grad_weight = accumulator(mask[1], p, {p.math.vocab, p.hidden}, lse ? p.dtype : p.opmath),
                   .grad_bias = accumulator(mask[2] && has_bias(p.bias), p, {p.math.vocab}),
                   .factor = per_token ? torch::stable::reshape(as_type(grad, p.opmath), {p.rows}) : grad,
                   .scale = counts ? OptTensor(rows_of(*counts, 1, 1)) : std::nullopt};
  if (lse) {
    run_slabs(dev, p, *lse, out);
  } else {
    run_chunks(dev, p, out);
  }
  const auto rounded = [&](const OptTensor& acc) { return acc ? as_type(*acc, p.dtype) : Tensor(); };
  const Tensor grad_x = out.grad_x ? torch::stable::view(rounded(out.grad_x), p.x_shape) : Tensor();
  return fill_unrequested({grad_x, rounded(out.grad_weight), rounded(out.grad_bias)},
                          {mask[0], mask[1], mask[2] && has_bias(p.bias)}, grad);
}

// _linear_cross_entropy_scale.
template <typename Device>
Tensor scale(Device& dev, const Tensor& grad, const Tensor& saved, ScalarType dtype) {
  check_floating(kLinearCrossEntropy, "saved", saved);
  check_floating(kLinearCrossEntropy, "grad", grad);
  check_same_dtype_device(kLinearCrossEntropy, "saved", saved, "grad", grad);
  FUSEDOPS_CHECK(grad.dim() == 0, kLinearCrossEntropy, "grad must be 0-dim, got shape ",
                 ShapeText{grad.sizes()});
  FUSEDOPS_CHECK(kernel_dtype(dtype).has_value(), kLinearCrossEntropy, "dtype must be a floating dtype, got ",
                 dtype_name(dtype));
  Tensor out = empty(saved, saved.sizes(), dtype);
  if (out.numel() > 0) dev.scale(out, as_type(saved, saved.scalar_type()), grad);
  return out;
}

}  // namespace fusedops::lce
