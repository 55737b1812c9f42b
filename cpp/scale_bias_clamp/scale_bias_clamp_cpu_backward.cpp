// fusedops.scale_bias_clamp backward on the CPU: one pass that writes grad_x
// and partial sums of grad_scale / grad_bias per fixed-size chunk (the
// chunking does not depend on the thread count), then the partials are added
// in chunk order: bitwise reproducible on any number of threads.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpp/common/cpu.h"
#include "cpp/scale_bias_clamp/scale_bias_clamp.h"
#include "cuda/common/with_flags.h"

namespace fusedops {
namespace {

// Elements per chunk of the fixed partition the reductions follow, and the
// number of independent accumulators (vectorizable, order fixed).
constexpr int64_t kChunk = 16384;
constexpr int kLanes = 8;

template <typename A>
A sum_lanes(const A (&lanes)[kLanes]) {
  A total = 0;
  for (int j = 0; j < kLanes; ++j) total += lanes[j];
  return total;
}

template <typename T>
struct BwdContext {
  using A = cpu::opmath_t<T>;
  SbcClamp<A> clamp;
  A scale, b0;
};

template <typename T, bool kUnit, bool kBiasConst, bool kBounded, bool kWriteGx, bool kWriteGb>
void backward_run_impl(const BwdContext<T>& c, int64_t len, T* __restrict__ gx, T* __restrict__ gb,
                       const T* __restrict__ g, int64_t sg, const T* __restrict__ x, int64_t sx,
                       const T* __restrict__ bias, int64_t sb, cpu::opmath_t<T> (&lane_s)[kLanes],
                       cpu::opmath_t<T> (&lane_b)[kLanes]);

// One element: gm = mask ? g : 0, branch-free (g loaded unconditionally, the
// mask a pair of float compares), so the loops vectorize. Without bounds
// everything passes, NaN included.
template <bool kBounded, typename A>
inline void bwd_element(A xa, A gv, A b, A sc, A lo, A hi, A& gm) {
  if constexpr (kBounded) {
    // A bit mask rather than a select: GCC turns `pass ? gv : 0` into a
    // (mispredicted) branch, but vectorizes the integer and.
    using U = std::conditional_t<sizeof(A) == 8, uint64_t, uint32_t>;
    const A v = xa * sc + b;
    const U mask = U(0) - U((v >= lo) & (v <= hi));
    gm = std::bit_cast<A>(std::bit_cast<U>(gv) & mask);
  } else {
    gm = gv;
  }
}

// One run of len elements. gx/gb (contiguous) may be null; bias null means b0.
// kUnit: grad_out, x and a non-null bias advance by 1 (or bias by 0 if kBiasConst).
// Element i of the run goes to lane i % kLanes: the summation order is fixed
// by the run alone. Lanes live in locals (no aliasing with the outputs).
// Whether a bound applies and which outputs are written are compile-time
// flags, so that the inner loops have no branches and vectorize.
template <typename T, bool kUnit, bool kBiasConst>
void backward_run(const BwdContext<T>& c, int64_t len, T* __restrict__ gx, T* __restrict__ gb,
                  const T* __restrict__ g, int64_t sg, const T* __restrict__ x, int64_t sx,
                  const T* __restrict__ bias, int64_t sb, cpu::opmath_t<T> (&lane_s)[kLanes],
                  cpu::opmath_t<T> (&lane_b)[kLanes]) {
  with_flags(
      [&](auto bounded, auto write_gx, auto write_gb) {
        backward_run_impl<T, kUnit, kBiasConst, bounded(), write_gx(), write_gb()>(
            c, len, gx, gb, g, sg, x, sx, bias, sb, lane_s, lane_b);
      },
      c.clamp.any_bound, gx != nullptr, gb != nullptr);
}

template <typename T, bool kUnit, bool kBiasConst, bool kBounded, bool kWriteGx, bool kWriteGb>
void backward_run_impl(const BwdContext<T>& c, int64_t len, T* __restrict__ gx, T* __restrict__ gb,
                       const T* __restrict__ g, int64_t sg, const T* __restrict__ x, int64_t sx,
                       const T* __restrict__ bias, int64_t sb, cpu::opmath_t<T> (&lane_s)[kLanes],
                       cpu::opmath_t<T> (&lane_b)[kLanes]) {
  using A = cpu::opmath_t<T>;
  const A bconst = bias ? A(bias[0]) : c.b0;
  const A sc = c.scale, lo = c.clamp.lo, hi = c.clamp.hi;
  A ls[kLanes], lb[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    ls[j] = lane_s[j];
    lb[j] = lane_b[j];
  }
  auto load = [&](int64_t k, A& xa, A& gv, A& b) {
    xa = A(kUnit ? x[k] : x[k * sx]);
    gv = A(kUnit ? g[k] : g[k * sg]);
    b = kBiasConst ? bconst : A(kUnit ? bias[k] : bias[k * sb]);
  };
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes) {
    A xa[kLanes], gm[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      A gv, b;
      load(i + j, xa[j], gv, b);
      bwd_element<kBounded>(xa[j], gv, b, sc, lo, hi, gm[j]);
    }
    if constexpr (kWriteGx) {
      for (int j = 0; j < kLanes; ++j) gx[i + j] = T(gm[j] * sc);
    }
    if constexpr (kWriteGb) {
      for (int j = 0; j < kLanes; ++j) gb[i + j] = T(gm[j]);
    }
    for (int j = 0; j < kLanes; ++j) {
      ls[j] += gm[j] * xa[j];
      lb[j] += gm[j];
    }
  }
  for (int j = 0; i < len; ++i, ++j) {
    A xa, gv, b, gm;
    load(i, xa, gv, b);
    bwd_element<kBounded>(xa, gv, b, sc, lo, hi, gm);
    if constexpr (kWriteGx) gx[i] = T(gm * sc);
    if constexpr (kWriteGb) gb[i] = T(gm);
    ls[j] += gm * xa;
    lb[j] += gm;
  }
  for (int j = 0; j < kLanes; ++j) {
    lane_s[j] = ls[j];
    lane_b[j] = lb[j];
  }
}

template <typename T>
void backward_generic(const SbcBackwardSetup& s, cpu::opmath_t<T>* partial_s, cpu::opmath_t<T>* partial_b) {
  using A = cpu::opmath_t<T>;
  const StridedLayout<4>& l = s.layout;
  const BwdContext<T> c{
      make_clamp<A>(s.scalars),
      s.scalars.scale ? A(*static_cast<const T*>(s.scalars.scale)) : A(s.scalars.scale_value),
      A(s.scalars.bias_value)};
  T* grad_x = static_cast<T*>(s.grads.grad_x);
  T* grad_bf = static_cast<T*>(s.grads.grad_bias_full);
  const T* g = static_cast<const T*>(s.grad_out.const_data_ptr());
  const T* x = static_cast<const T*>(s.x.const_data_ptr());
  const T* bias = s.bias ? static_cast<const T*>(s.bias->const_data_ptr()) : nullptr;
  const int inner = l.ndim - 1;
  const int64_t sg = l.strides[1][inner], sx = l.strides[2][inner], sb = l.strides[3][inner];
  const int64_t n = s.numel;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  cpu::parallel_for(chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      A lane_s[kLanes] = {}, lane_b[kLanes] = {};
      cpu::for_each_run(l, k * kChunk, std::min(n, (k + 1) * kChunk), [&](int64_t len, const int64_t* off) {
        T* gx = grad_x ? grad_x + off[0] : nullptr;
        T* gb = grad_bf ? grad_bf + off[0] : nullptr;
        const T* bp = bias ? bias + off[3] : nullptr;
        const bool unit = sg == 1 && sx == 1;
        if (unit && (bp == nullptr || sb == 0)) {
          backward_run<T, true, true>(c, len, gx, gb, g + off[1], sg, x + off[2], sx, bp, sb, lane_s, lane_b);
        } else if (unit && sb == 1) {
          backward_run<T, true, false>(c, len, gx, gb, g + off[1], sg, x + off[2], sx, bp, sb, lane_s,
                                       lane_b);
        } else if (bp == nullptr || sb == 0) {
          backward_run<T, false, true>(c, len, gx, gb, g + off[1], sg, x + off[2], sx, bp, sb, lane_s,
                                       lane_b);
        } else {
          backward_run<T, false, false>(c, len, gx, gb, g + off[1], sg, x + off[2], sx, bp, sb, lane_s,
                                        lane_b);
        }
      });
      partial_s[k] = sum_lanes(lane_s);
      partial_b[k] = sum_lanes(lane_b);
    }
  });
}

// [rows, cols] with a [cols] bias (or a number): tasks are fixed blocks of
// rows x columns; each adds its column sums into its row of partial_b
// ([row_chunks, cols]) and its scale sum into partial_s[task].
constexpr int64_t kColBlock = 4096;
constexpr int64_t kMinRows = 64;

struct RowsTiling {
  int64_t rows_per_chunk, row_chunks, col_blocks;
};

inline RowsTiling rows_tiling(int64_t rows, int64_t cols) {
  RowsTiling t;
  const int64_t width = std::min(cols, kColBlock);
  t.rows_per_chunk = std::max(kMinRows, (kChunk + width - 1) / width);
  t.row_chunks = (rows + t.rows_per_chunk - 1) / t.rows_per_chunk;
  t.col_blocks = (cols + kColBlock - 1) / kColBlock;
  return t;
}

template <typename T>
void backward_rows(const SbcBackwardSetup& s, const RowsTiling& t, cpu::opmath_t<T>* partial_s,
                   cpu::opmath_t<T>* partial_b) {
  using A = cpu::opmath_t<T>;
  const BwdContext<T> c{
      make_clamp<A>(s.scalars),
      s.scalars.scale ? A(*static_cast<const T*>(s.scalars.scale)) : A(s.scalars.scale_value),
      A(s.scalars.bias_value)};
  T* grad_x = static_cast<T*>(s.grads.grad_x);
  const T* g = static_cast<const T*>(s.grad_out.const_data_ptr());
  const T* x = static_cast<const T*>(s.x.const_data_ptr());
  const T* bias = s.bias ? static_cast<const T*>(s.bias->const_data_ptr()) : nullptr;
  const int64_t rows = s.shape.rows, cols = s.shape.cols;
  const int64_t sg = s.layout.strides[1][0], sx = s.layout.strides[2][0];
  cpu::parallel_for(t.row_chunks * t.col_blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) {
      const int64_t rc = task / t.col_blocks, cb = task % t.col_blocks;
      const int64_t c0 = cb * kColBlock, width = std::min(kColBlock, cols - c0);
      const int64_t r0 = rc * t.rows_per_chunk, r1 = std::min(rows, r0 + t.rows_per_chunk);
      A* __restrict__ pb = partial_b ? partial_b + rc * cols + c0 : nullptr;
      if (pb) std::fill(pb, pb + width, A(0));
      A lane_s[kLanes] = {}, lane_dummy[kLanes] = {};
      T gm_buf[kColBlock];
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict__ gr = g + r * sg + c0;
        const T* __restrict__ xr = x + r * sx + c0;
        const T* __restrict__ br = bias ? bias + c0 : nullptr;
        T* __restrict__ gxr = grad_x ? grad_x + r * cols + c0 : nullptr;
        // The row is one unit-stride run; g * mask (exact in T) goes through
        // a row buffer into the column sums.
        T* gm_row = pb ? gm_buf : nullptr;
        if (br) {
          backward_run<T, true, false>(c, width, gxr, gm_row, gr, 1, xr, 1, br, 1, lane_s, lane_dummy);
        } else {
          backward_run<T, true, true>(c, width, gxr, gm_row, gr, 1, xr, 1, nullptr, 0, lane_s, lane_dummy);
        }
        if (pb) {
          for (int64_t i = 0; i < width; ++i) pb[i] += A(gm_buf[i]);
        }
      }
      partial_s[task] = sum_lanes(lane_s);
    }
  });
}

template <typename T>
void backward_cpu_kernel(const SbcBackwardSetup& s) {
  using A = cpu::opmath_t<T>;
  const bool rows = s.shape.path == SbcPath::Rows;
  const RowsTiling tiling = rows ? rows_tiling(s.shape.rows, s.shape.cols) : RowsTiling{};
  const int64_t tasks = rows ? tiling.row_chunks * tiling.col_blocks : (s.numel + kChunk - 1) / kChunk;
  // Host scratch: no tensor (nor dispatcher call) needed.
  std::vector<A> partial_s(tasks), partial_b;
  if (rows) {
    if (s.shape.bias_grad == SbcBiasGrad::Rows) partial_b.resize(tiling.row_chunks * s.shape.cols);
    backward_rows<T>(s, tiling, partial_s.data(), partial_b.empty() ? nullptr : partial_b.data());
  } else {
    partial_b.resize(tasks);
    backward_generic<T>(s, partial_s.data(), partial_b.data());
  }
  // Final sums in a fixed order.
  auto sum_in_order = [](const A* p, int64_t n) {
    A total = 0;
    for (int64_t i = 0; i < n; ++i) total += p[i];
    return total;
  };
  if (s.grads.grad_scale) {
    *static_cast<T*>(s.grads.grad_scale) = T(sum_in_order(partial_s.data(), tasks));
  }
  if (s.shape.bias_grad == SbcBiasGrad::Single) {
    *static_cast<T*>(s.grads.grad_bias_sum) = T(sum_in_order(partial_b.data(), tasks));
  } else if (s.shape.bias_grad == SbcBiasGrad::Rows) {
    const A* p = partial_b.data();
    T* out = static_cast<T*>(s.grads.grad_bias_sum);
    const int64_t cols = s.shape.cols, chunks = tiling.row_chunks;
    cpu::parallel_for(cols, kColBlock, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; c += kColBlock) {
        const int64_t w = std::min(kColBlock, c1 - c);
        A acc_cols[kColBlock];
        for (int64_t i = 0; i < w; ++i) acc_cols[i] = p[c + i];
        for (int64_t r = 1; r < chunks; ++r) {
          for (int64_t i = 0; i < w; ++i) acc_cols[i] += p[r * cols + c + i];
        }
        for (int64_t i = 0; i < w; ++i) out[c + i] = T(acc_cols[i]);
      }
    });
  }
}

}  // namespace

void sbc_backward_cpu_kernel(const SbcBackwardSetup& s) {
  cpu::dispatch_floating(to_dtype(s.x.scalar_type()), [&]<typename T>() { backward_cpu_kernel<T>(s); });
}

}  // namespace fusedops
