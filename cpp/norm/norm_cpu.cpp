// The normalization ops' CPU kernels on torch's thread pool: rows in parallel,
// each row read in passes (sum, centered squares, output; the row stays in
// cache, a half type's converted to float32 once), math in float32 (float64
// for float64). A row's sums run in kLanes
// interleaved partial sums added in a fixed order, which the compiler keeps
// in vector registers (one running sum is a chain of dependent adds). The
// backward's weight and bias gradients are summed per fixed block of rows,
// then over the blocks in order: the same bits whatever the thread count and
// whichever of the row loops' clones (cpu.h) runs.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpp/common/cpu.h"
#include "cpp/norm/norm.h"

namespace fusedops {
namespace {

// The blocks of rows the backward sums separately: enough for any thread pool.
constexpr int64_t kCpuBlocks = 64;

// Runs body.template operator()<T, W>() for the arguments' dtypes.
template <typename Body>
void dispatch_types(DType dtype, bool wide_params, Body&& body) {
  cpu::dispatch_floating(dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      if (wide_params) return body.template operator()<T, float>();
    }
    body.template operator()<T, T>();
  });
}

// Rows per parallel task: about 16k elements.
int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)); }

// The sum of term(j) over j in [0, n): lane l adds the terms j = l mod kLanes
// in order, then the lanes are added in order.
template <typename A, typename Term>
inline A lane_sum(int64_t n, const Term& term) {
  constexpr int kLanes = 16;
  A lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += term(j + l);
  }
  for (int l = 0; j < n; ++j, ++l) lanes[l] += term(j);
  A total = 0;
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

// summed = x + residual rounded to T, and into sum its value in op math, in
// passes over the row that each vectorize (one loop over the three tensors,
// which may alias for all the compiler knows, stayed scalar in bfloat16:
// add_layer_norm's forward ran at 0.5x eager).
template <typename T, typename A>
[[gnu::always_inline]] inline void add_residual(const T* x, const T* residual, T* summed, int64_t n,
                                                A* __restrict__ sum, A* __restrict__ addend) {
  if constexpr (std::is_same_v<T, A>) {
    for (int64_t j = 0; j < n; ++j) sum[j] = x[j] + residual[j];
  } else {
    cpu::to_opmath(x, sum, n);
    cpu::to_opmath(residual, addend, n);
    for (int64_t j = 0; j < n; ++j) sum[j] += addend[j];
  }
  cpu::from_opmath(sum, summed, n);
  if constexpr (!std::is_same_v<T, A>) cpu::to_opmath(summed, sum, n);  // the rounded sum is normalized
}

// y = xhat * scale + shift with scale = offset + weight (1 without one) and
// shift = bias (-0.0 without one: y + -0.0 is y, its sign too), computed
// once a call. One loop serves every case: no test inside it (one kept
// float16's conversions scalar), no compile-time flags around it (each
// combination was another instantiation to compile).
template <typename T, typename O>
FUSEDOPS_CPU_CLONES void forward_rows(const NormForwardArgs& a, const cpu::opmath_t<T>* scale,
                                      const cpu::opmath_t<T>* shift, int64_t begin, int64_t end) {
  using A = cpu::opmath_t<T>;
  const T* x = static_cast<const T*>(a.x);
  const T* residual = static_cast<const T*>(a.residual);
  T* summed = static_cast<T*>(a.summed);
  const int64_t n = a.cols;
  const A eps = static_cast<A>(a.eps);
  // The row in op math, and a second row (the residual; float16's conversions, cpu.h).
  std::vector<A> buffers(2 * n);
  A* const buffer = buffers.data();
  A* const other = buffer + n;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = row * n;
    const A* v;
    if (residual != nullptr) {  // summed = x + residual, rounded to T: what is normalized
      add_residual(x + base, residual + base, summed + base, n, buffer, other);
      v = buffer;
    } else {
      v = cpu::as_opmath(x + base, n, buffer);
    }
    A mean = 0;
    if (a.center) {  // pivot + mean(v - pivot): exact for a large mean (cuda/norm/norm.cu)
      const A pivot = v[0];
      mean = pivot + lane_sum<A>(n, [&](int64_t j) { return v[j] - pivot; }) / A(n);
    }
    const A squares = lane_sum<A>(n, [&](int64_t j) { return (v[j] - mean) * (v[j] - mean); });
    const A rstd = A(1) / std::sqrt(squares / A(n) + eps);
    if (a.center) static_cast<A*>(a.mean)[row] = mean;
    static_cast<A*>(a.rstd)[row] = rstd;
    O* out = static_cast<O*>(a.out) + base;
    cpu::store_opmath(out, n, other, [&](int64_t j) { return (v[j] - mean) * rstd * scale[j] + shift[j]; });
  }
}

// Rows [begin, end) of the backward; their weight and bias gradient terms
// added into pw and pb (a block's own rows of the partial sums), where given.
// scale: offset + weight, or 1. A row's gradient and xhat are computed once
// into buffers that every pass reads.
template <typename T, typename O>
FUSEDOPS_CPU_CLONES void backward_rows(const NormBackwardArgs& a, const cpu::opmath_t<T>* scale,
                                       int64_t begin, int64_t end, cpu::opmath_t<T>* pw,
                                       cpu::opmath_t<T>* pb) {
  using A = cpu::opmath_t<T>;
  const T* grad_summed = static_cast<const T*>(a.grad_summed);
  T* grad_x = static_cast<T*>(a.grad_x);
  const int64_t n = a.cols;
  std::vector<A> buffers(4 * n);
  A* __restrict__ g = buffers.data();
  A* __restrict__ xhat = g + n;
  A* const other = xhat + n;  // float16's conversions (cpu.h)
  A* const out = other + n;
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = row * n;
    const auto x = cpu::opmath_reader(static_cast<const T*>(a.x) + base, n, other);
    const auto grad = cpu::opmath_reader(static_cast<const O*>(a.grad) + base, n, out);
    const A mean = a.center ? static_cast<const A*>(a.mean)[row] : A(0);
    const A rstd = static_cast<const A*>(a.rstd)[row];
    for (int64_t j = 0; j < n; ++j) {
      g[j] = grad(j);
      xhat[j] = (x(j) - mean) * rstd;
    }
    const A sum_gw = a.center ? lane_sum<A>(n, [&](int64_t j) { return g[j] * scale[j]; }) : A(0);
    const A sum_gwx = lane_sum<A>(n, [&](int64_t j) { return g[j] * scale[j] * xhat[j]; });
    if (pw != nullptr) {
      for (int64_t j = 0; j < n; ++j) pw[j] += g[j] * xhat[j];
    }
    if (pb != nullptr) {
      for (int64_t j = 0; j < n; ++j) pb[j] += g[j];
    }
    if (grad_x == nullptr) continue;
    const A mean_gw = a.center ? sum_gw / A(n) : A(0), mean_gwx = sum_gwx / A(n);
    const auto dx = [&](int64_t j) { return rstd * (g[j] * scale[j] - mean_gw - xhat[j] * mean_gwx); };
    if (grad_summed == nullptr) {
      cpu::store_opmath(grad_x + base, n, out, dx);
    } else {
      const auto carried = cpu::opmath_reader(grad_summed + base, n, other);
      cpu::store_opmath(grad_x + base, n, out, [&](int64_t j) { return dx(j) + carried(j); });
    }
  }
}

// scale[j] = offset + weight[j] (1 without a weight), in A.
template <typename A, typename W>
std::vector<A> scale_of(const void* weight, double offset, int64_t n) {
  std::vector<A> scale(n, A(1));
  if (weight != nullptr) {
    const W* w = static_cast<const W*>(weight);
    for (int64_t j = 0; j < n; ++j) scale[j] = static_cast<A>(offset) + A(w[j]);
  }
  return scale;
}

// out[c] = W(sum over the blocks b, in order, of partial[b, c]).
template <typename A, typename W>
void sum_blocks(const A* partial, int64_t blocks, int64_t cols, W* out) {
  cpu::parallel_for(cols, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      A total = 0;
      for (int64_t b = 0; b < blocks; ++b) total += partial[b * cols + c];
      out[c] = static_cast<W>(total);
    }
  });
}

void norm_forward_cpu(const NormForwardArgs& a) {
  dispatch_types(a.dtype, a.wide_params, [&]<typename T, typename W>() {
    using A = cpu::opmath_t<T>;
    const std::vector<A> scale = scale_of<A, W>(a.weight, a.offset, a.cols);
    std::vector<A> shift(a.cols, A(-0.0));
    if (a.bias != nullptr) {
      for (int64_t j = 0; j < a.cols; ++j) shift[j] = A(static_cast<const W*>(a.bias)[j]);
    }
    cpu::parallel_for(a.rows, row_grain(a.cols), [&](int64_t begin, int64_t end) {
      forward_rows<T, norm_out_t<T, W>>(a, scale.data(), shift.data(), begin, end);
    });
  });
}

void norm_backward_cpu(const NormBackwardArgs& a) {
  dispatch_types(a.dtype, a.wide_params, [&]<typename T, typename W>() {
    using A = cpu::opmath_t<T>;
    const std::vector<A> scale = scale_of<A, W>(a.weight, a.offset, a.cols);
    A* pw = static_cast<A*>(a.partial_weight);
    A* pb = static_cast<A*>(a.partial_bias);
    // Block b: rows [b * rows / blocks, (b + 1) * rows / blocks), its sums in row b of the partials.
    // About 16k elements a task, as the forward: tiny calls stay on this thread.
    const int64_t block_elements = std::max<int64_t>(1, a.rows / a.blocks * a.cols);
    cpu::parallel_for(a.blocks, std::max<int64_t>(1, 16384 / block_elements),
                      [&](int64_t begin, int64_t end) {
                        for (int64_t b = begin; b < end; ++b) {
                          A* bw = pw != nullptr ? pw + b * a.cols : nullptr;
                          A* bb = pb != nullptr ? pb + b * a.cols : nullptr;
                          if (bw != nullptr) std::fill(bw, bw + a.cols, A(0));
                          if (bb != nullptr) std::fill(bb, bb + a.cols, A(0));
                          backward_rows<T, norm_out_t<T, W>>(a, scale.data(), b * a.rows / a.blocks,
                                                             (b + 1) * a.rows / a.blocks, bw, bb);
                        }
                      });
    if (pw != nullptr) sum_blocks(pw, a.blocks, a.cols, static_cast<W*>(a.grad_weight));
    if (pb != nullptr) sum_blocks(pb, a.blocks, a.cols, static_cast<W*>(a.grad_bias));
  });
}

}  // namespace

const NormBackend kNormCpu{
    .forward = [](const NormForwardArgs& args, const Tensor&, const char*) { norm_forward_cpu(args); },
    .backward_blocks = [](int64_t rows, int64_t, const Tensor&,
                          const char*) { return std::min(rows, kCpuBlocks); },
    .backward = [](const NormBackwardArgs& args, const Tensor&, const char*) { norm_backward_cpu(args); },
    .narrow_output = false,  // no instantiations for a narrow out_dtype (compile time): the glue converts
};

}  // namespace fusedops
