// The normalization ops' CPU kernels on torch's thread pool: rows in parallel,
// each row read in passes (sum, centered squares, output; the row stays in
// cache), math in float32 (float64 for float64). A row's sums run in kLanes
// interleaved partial sums added in a fixed order, which the compiler keeps
// in vector registers (one running sum is a chain of dependent adds). The
// backward's weight and bias gradients are summed per fixed block of rows,
// then over the blocks in order: the same bits whatever the thread count and
// whichever of the row loops' AVX2 and baseline clones runs.
#include <cmath>

#include "cpp/common/cpu.h"
#include "cpp/norm/norm.h"
#include "cuda/common/with_flags.h"

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

// kScaled, kShifted: a weight, a bias (compile-time: a test in the loop, with
// float16's branchy conversions, keeps it from vectorizing).
template <typename T, typename W, bool kScaled, bool kShifted>
FUSEDOPS_CPU_CLONES void forward_rows(const NormForwardArgs& a, int64_t begin, int64_t end) {
  using A = cpu::opmath_t<T>;
  using O = norm_out_t<T, W>;
  const T* x = static_cast<const T*>(a.x);
  const T* residual = static_cast<const T*>(a.residual);
  const W* weight = static_cast<const W*>(a.weight);
  const W* bias = static_cast<const W*>(a.bias);
  T* summed = static_cast<T*>(a.summed);
  const int64_t n = a.cols;
  const A eps = static_cast<A>(a.eps), offset = static_cast<A>(a.offset);
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = row * n;
    const T* v = x + base;
    if (residual != nullptr) {  // summed = x + residual, rounded to T: what is normalized
      for (int64_t j = 0; j < n; ++j)
        summed[base + j] = static_cast<T>(A(x[base + j]) + A(residual[base + j]));
      v = summed + base;
    }
    A mean = 0;
    if (a.center) {  // pivot + mean(v - pivot): exact for a large mean (cuda/norm/norm.cu)
      const A pivot = A(v[0]);
      mean = pivot + lane_sum<A>(n, [&](int64_t j) { return A(v[j]) - pivot; }) / A(n);
    }
    const A squares = lane_sum<A>(n, [&](int64_t j) { return (A(v[j]) - mean) * (A(v[j]) - mean); });
    const A rstd = A(1) / std::sqrt(squares / A(n) + eps);
    if (a.center) static_cast<A*>(a.mean)[row] = mean;
    static_cast<A*>(a.rstd)[row] = rstd;
    O* out = static_cast<O*>(a.out) + base;
    for (int64_t j = 0; j < n; ++j) {
      A y = (A(v[j]) - mean) * rstd;
      if constexpr (kScaled) y *= offset + A(weight[j]);
      if constexpr (kShifted) y += A(bias[j]);
      out[j] = static_cast<O>(y);
    }
  }
}

// Rows [begin, end) of the backward; their weight and bias gradient terms
// added into pw and pb (a block's own rows of the partial sums), where given.
// kScaled: a weight.
template <typename T, typename W, bool kScaled>
FUSEDOPS_CPU_CLONES void backward_rows(const NormBackwardArgs& a, int64_t begin, int64_t end,
                                       cpu::opmath_t<T>* pw, cpu::opmath_t<T>* pb) {
  using A = cpu::opmath_t<T>;
  using O = norm_out_t<T, W>;
  const W* weight = static_cast<const W*>(a.weight);
  const T* grad_summed = static_cast<const T*>(a.grad_summed);
  T* grad_x = static_cast<T*>(a.grad_x);
  const int64_t n = a.cols;
  const A offset = static_cast<A>(a.offset);
  const auto scaled = [&](A g, int64_t j) {
    if constexpr (kScaled) return g * (offset + A(weight[j]));
    return g;
  };
  for (int64_t row = begin; row < end; ++row) {
    const int64_t base = row * n;
    const T* x = static_cast<const T*>(a.x) + base;
    const O* g = static_cast<const O*>(a.grad) + base;
    const A mean = a.center ? static_cast<const A*>(a.mean)[row] : A(0);
    const A rstd = static_cast<const A*>(a.rstd)[row];
    const auto xhat = [&](int64_t j) { return (A(x[j]) - mean) * rstd; };
    const A sum_gw = a.center ? lane_sum<A>(n, [&](int64_t j) { return scaled(A(g[j]), j); }) : A(0);
    const A sum_gwx = lane_sum<A>(n, [&](int64_t j) { return scaled(A(g[j]), j) * xhat(j); });
    if (pw != nullptr) {
      for (int64_t j = 0; j < n; ++j) pw[j] += A(g[j]) * xhat(j);
    }
    if (pb != nullptr) {
      for (int64_t j = 0; j < n; ++j) pb[j] += A(g[j]);
    }
    if (grad_x == nullptr) continue;
    const A mean_gw = a.center ? sum_gw / A(n) : A(0), mean_gwx = sum_gwx / A(n);
    const auto dx = [&](int64_t j) { return rstd * (scaled(A(g[j]), j) - mean_gw - xhat(j) * mean_gwx); };
    if (grad_summed == nullptr) {
      for (int64_t j = 0; j < n; ++j) grad_x[base + j] = static_cast<T>(dx(j));
    } else {
      for (int64_t j = 0; j < n; ++j) grad_x[base + j] = static_cast<T>(dx(j) + A(grad_summed[base + j]));
    }
  }
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
    with_flags(
        [&](auto scaled, auto shifted) {
          cpu::parallel_for(a.rows, row_grain(a.cols), [&](int64_t begin, int64_t end) {
            forward_rows<T, W, decltype(scaled)::value, decltype(shifted)::value>(a, begin, end);
          });
        },
        a.weight != nullptr, a.bias != nullptr);
  });
}

void norm_backward_cpu(const NormBackwardArgs& a) {
  dispatch_types(a.dtype, a.wide_params, [&]<typename T, typename W>() {
    using A = cpu::opmath_t<T>;
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
                          for (int64_t j = 0; j < a.cols; ++j) {
                            if (bw != nullptr) bw[j] = 0;
                            if (bb != nullptr) bb[j] = 0;
                          }
                          with_flags(
                              [&](auto scaled) {
                                backward_rows<T, W, decltype(scaled)::value>(
                                    a, b * a.rows / a.blocks, (b + 1) * a.rows / a.blocks, bw, bb);
                              },
                              a.weight != nullptr);
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
};

}  // namespace fusedops
