// rms_norm and layer_norm (and their add_ variants) on CUDA: a group of whole
// warps per row, blockDim.y rows a block. Rows of up to kBlockThreads * kIters
// vectors are held in registers (kIters vectors a thread), read once; longer
// rows are streamed through global memory (read again from L2). Vectors of 16
// bytes of x where every pointer and the row length allow, single elements
// otherwise. Every sum is in a fixed order (cuda/common/reduce.cuh): the
// same inputs give the same bits every call.
//
// Backward: each block walks a fixed set of rows and keeps its rows' weight
// and bias gradient terms per column (registers, or its own row of the
// partial buffer when streaming); then it adds its row groups in order into
// partial[blockIdx.x, :], and column_sums_kernel adds the blocks in order.
// Its held kernel loads the next row's x and gradient before the current
// row's reductions: one block fits an SM, and they keep its loads in flight
// while it synchronizes.
#include <initializer_list>
#include <type_traits>

#include "cuda/common/copy_async.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/with_flags.h"
#include "cuda/norm/norm.h"

namespace fusedops::cuda {
namespace {

constexpr int kBlockThreads = 512;  // threads of a block: row groups of blockDim.x
// Vectors of a row a thread holds: 16 elements in 16-byte vectors, or 4
// single elements (rows that cannot be read in vectors are rare in models: a
// longer unrolled row of single elements would be most of this file's code
// and compile time; wider such rows stream).
template <int kVec>
constexpr int kHeldVectors = kVec == 1 ? 4 : 16 / kVec;
constexpr int kMaxGroups = kBlockThreads / 32;
constexpr int kForwardBlocksPerSm = 2;  // the held forward's launch bound and grid

__device__ __forceinline__ float inv_sqrt(float v) { return rsqrtf(v); }
__device__ __forceinline__ double inv_sqrt(double v) { return rsqrt(v); }

// a * b rounded, never contracted into a later add: the backward computes its
// terms twice, and both must give the same bits (a one-column row's input
// gradient, gw - mean(gw), is exactly 0).
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <int kVec, typename T>
__device__ __forceinline__ Vec<T, kVec> load_vec(const T* __restrict__ p, int64_t i) {
  return *reinterpret_cast<const Vec<T, kVec>*>(p + i);
}

template <int kVec, typename T, typename A>
__device__ __forceinline__ void load(const T* __restrict__ p, int64_t i, A (&v)[kVec]) {
  const Vec<T, kVec> x = load_vec<kVec>(p, i);
#pragma unroll
  for (int e = 0; e < kVec; ++e) v[e] = to_opmath(x.v[e]);
}

template <int kVec, typename T, typename A>
__device__ __forceinline__ void store(T* __restrict__ p, int64_t i, const A (&v)[kVec]) {
  Vec<T, kVec> x;
#pragma unroll
  for (int e = 0; e < kVec; ++e) x.v[e] = from_opmath<T>(v[e]);
  *reinterpret_cast<Vec<T, kVec>*>(p + i) = x;
}

// The typed pointers of NormForwardArgs (O: out_dtype's type).
template <typename T, typename W, typename O>
struct Forward {
  using A = opmath_t<T>;
  const T* x;
  const T* residual;
  const W* weight;
  const W* bias;
  O* out;
  T* summed;
  A* mean;
  A* rstd;
  int64_t rows, cols;
  A eps, offset;

  __device__ explicit Forward(const NormForwardArgs& a)
      : x(static_cast<const T*>(a.x)),
        residual(static_cast<const T*>(a.residual)),
        weight(static_cast<const W*>(a.weight)),
        bias(static_cast<const W*>(a.bias)),
        out(static_cast<O*>(a.out)),
        summed(static_cast<T*>(a.summed)),
        mean(static_cast<A*>(a.mean)),
        rstd(static_cast<A*>(a.rstd)),
        rows(a.rows),
        cols(a.cols),
        eps(static_cast<A>(a.eps)),
        offset(static_cast<A>(a.offset)) {}

  // v = x[i, i + kVec) as loaded in xv (+ residual's rv, rounded to T and
  // stored in summed).
  template <int kVec>
  __device__ __forceinline__ void input(int64_t i, const Vec<T, kVec>& xv, const Vec<T, kVec>& rv,
                                        A (&v)[kVec]) const {
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = to_opmath(xv.v[e]);
    if (residual == nullptr) return;
#pragma unroll
    for (int e = 0; e < kVec; ++e) v[e] = to_opmath(from_opmath<T>(v[e] + to_opmath(rv.v[e])));
    store<kVec>(summed, i, v);
  }

  template <int kVec>
  __device__ __forceinline__ void input(int64_t i, A (&v)[kVec]) const {
    Vec<T, kVec> rv;
    if (residual != nullptr) rv = load_vec<kVec>(residual, i);
    input<kVec>(i, load_vec<kVec>(x, i), rv, v);
  }

  // out[i, i + kVec) from v; c: the column of i.
  template <int kVec>
  __device__ __forceinline__ void output(int64_t i, int64_t c, const A (&v)[kVec], A mu, A rs) const {
    A y[kVec], w[kVec], b[kVec];
    if (weight != nullptr) load<kVec>(weight, c, w);
    if (bias != nullptr) load<kVec>(bias, c, b);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      y[e] = (v[e] - mu) * rs;
      if (weight != nullptr) y[e] *= offset + w[e];
      if (bias != nullptr) y[e] += b[e];
    }
    store<kVec>(out, i, y);
  }

  // layer_norm's pivot: the row's first value (summed, for the add_ ops).
  // The mean is pivot + mean(v - pivot): a sum of terms of the row's spread,
  // not of its magnitude, which keeps a large mean exact.
  __device__ __forceinline__ A pivot(int64_t row) const {
    const int64_t i = row * cols;
    if (residual == nullptr) return to_opmath(x[i]);
    return to_opmath(from_opmath<T>(to_opmath(x[i]) + to_opmath(residual[i])));
  }

  __device__ __forceinline__ void stats(int64_t row, A mu, A rs) const {
    if (threadIdx.x != 0 || row >= rows) return;
    if (mean != nullptr) mean[row] = mu;
    rstd[row] = rs;
  }
};

// Whether layer_norm's held forward (no residual) runs staged: x copied to
// shared memory a row ahead, on a grid of the blocks that fit the device at
// once. Rows of 16-bit 16-byte vectors: 1.09-1.40x on an H100; rms_norm's
// rows, float32's and a staged add_layer_norm lost 1-8% (benchmarks/results/
// NOTES.md, "layer_norm's forward staged by cp.async").
template <typename T, bool kCenter, int kVec, int kIters>
constexpr bool kStagedForward = kCenter && sizeof(T) == 2 && kVec * sizeof(T) == 16 && kIters <= 4;

// Row `row` of f (every thread of a row group runs the loop the same number
// of times: the reductions synchronize the group; a group past the last row
// joins the reductions with zeros and writes nothing). Two blocks an SM (at
// most 64 registers a thread): layer_norm's 73 had left one, a quarter of the
// SM's threads. kStaged: each block walks its rows and copies the next row's x
// to shared memory during this row's reductions (no registers to spare for
// it), so the SM's loads stay in flight while it synchronizes; each thread
// reads back only what it copied: no barrier.
template <typename T, typename W, typename O, bool kCenter, int kVec, int kIters, bool kStaged>
__global__ void __launch_bounds__(kBlockThreads, kForwardBlocksPerSm)
    forward_held_kernel(NormForwardArgs args) {
  using A = opmath_t<T>;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  constexpr bool kCopies = false;  // no cp.async: a copy would hold registers
#else
  constexpr bool kCopies = kStaged;
#endif
  __shared__ A smem[kMaxGroups * 33];
  __shared__ Vec<T, kVec> staged[kCopies ? kIters * kBlockThreads : 1];
  const Forward<T, W, O> f(args);
  const int thread = threadIdx.y * blockDim.x + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.y;
  const auto stage = [&](int64_t row) {
    if constexpr (kCopies) {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        const int64_t c = (int64_t(i) * blockDim.x + threadIdx.x) * kVec;
        if (row < f.rows && c < f.cols)
          copy_async_16(&staged[i * kBlockThreads + thread], f.x + row * f.cols + c);
      }
    }
  };
  stage(int64_t(blockIdx.x) * blockDim.y + threadIdx.y);
  for (int64_t first = int64_t(blockIdx.x) * blockDim.y; first < f.rows; first += step) {
    const int64_t row = first + threadIdx.y;
    const bool active = row < f.rows;
    const A shift = kCenter && active ? f.pivot(row) : A(0);
    A v[kIters][kVec];
    A sum = 0;
    if constexpr (kCopies) wait_copies();
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int64_t c = (int64_t(i) * blockDim.x + threadIdx.x) * kVec;
      if (!active || c >= f.cols) continue;
      const int64_t at = row * f.cols + c;
      Vec<T, kVec> rv;
      if (f.residual != nullptr) rv = load_vec<kVec>(f.residual, at);
      f.template input<kVec>(at, kCopies ? staged[i * kBlockThreads + thread] : load_vec<kVec>(f.x, at), rv,
                             v[i]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum += v[i][e] - shift;
    }
    stage(row + step);  // in flight during this row's reductions
    A mu = 0;
    if constexpr (kCenter) mu = shift + group_allreduce(sum, smem) / A(f.cols);
    A squares = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int64_t c = (int64_t(i) * blockDim.x + threadIdx.x) * kVec;
      if (!active || c >= f.cols) continue;
#pragma unroll
      for (int e = 0; e < kVec; ++e) squares += (v[i][e] - mu) * (v[i][e] - mu);
    }
    const A rs = inv_sqrt(group_allreduce(squares, smem) / A(f.cols) + f.eps);
    f.stats(row, mu, rs);
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int64_t c = (int64_t(i) * blockDim.x + threadIdx.x) * kVec;
      if (active && c < f.cols) f.template output<kVec>(row * f.cols + c, c, v[i], mu, rs);
    }
  }
}

// A row too long to hold: one row a block, x (or summed) read again for each
// pass.
template <typename T, typename W, typename O, bool kCenter, int kVec>
__global__ void __launch_bounds__(kBlockThreads) forward_streamed_kernel(NormForwardArgs args) {
  using A = opmath_t<T>;
  __shared__ A smem[33];
  const Forward<T, W, O> f(args);
  const T* source = f.residual != nullptr ? f.summed : f.x;  // summed: written by this same thread
  const int64_t step = int64_t(blockDim.x) * kVec;
  for (int64_t row = blockIdx.x; row < f.rows; row += gridDim.x) {
    const int64_t base = row * f.cols;
    const A shift = kCenter ? f.pivot(row) : A(0);
    A sum = 0;
    for (int64_t c = int64_t(threadIdx.x) * kVec; c < f.cols; c += step) {
      A v[kVec];
      f.template input<kVec>(base + c, v);
#pragma unroll
      for (int e = 0; e < kVec; ++e) sum += v[e] - shift;
    }
    A mu = 0;
    if constexpr (kCenter) mu = shift + group_allreduce(sum, smem) / A(f.cols);
    A squares = 0;
    for (int64_t c = int64_t(threadIdx.x) * kVec; c < f.cols; c += step) {
      A v[kVec];
      load<kVec>(source, base + c, v);
#pragma unroll
      for (int e = 0; e < kVec; ++e) squares += (v[e] - mu) * (v[e] - mu);
    }
    const A rs = inv_sqrt(group_allreduce(squares, smem) / A(f.cols) + f.eps);
    f.stats(row, mu, rs);
    for (int64_t c = int64_t(threadIdx.x) * kVec; c < f.cols; c += step) {
      A v[kVec];
      load<kVec>(source, base + c, v);
      f.template output<kVec>(base + c, c, v, mu, rs);
    }
  }
}

// ---------------------------------------------------------------- backward ---

// The typed pointers of NormBackwardArgs (O: out_dtype's type, grad's).
template <typename T, typename W, typename O>
struct Backward {
  using A = opmath_t<T>;
  const O* grad;
  const T* x;
  const W* weight;
  const A* mean;
  const A* rstd;
  const T* grad_summed;
  T* grad_x;
  A* partial_weight;
  A* partial_bias;
  int64_t rows, cols;
  A offset;

  __device__ explicit Backward(const NormBackwardArgs& a)
      : grad(static_cast<const O*>(a.grad)),
        x(static_cast<const T*>(a.x)),
        weight(static_cast<const W*>(a.weight)),
        mean(static_cast<const A*>(a.mean)),
        rstd(static_cast<const A*>(a.rstd)),
        grad_summed(static_cast<const T*>(a.grad_summed)),
        grad_x(static_cast<T*>(a.grad_x)),
        partial_weight(static_cast<A*>(a.partial_weight)),
        partial_bias(static_cast<A*>(a.partial_bias)),
        rows(a.rows),
        cols(a.cols),
        offset(static_cast<A>(a.offset)) {}

  // xhat, g = grad and gw = grad * (offset + weight) from x and grad at
  // column c as loaded (xv, gv).
  template <int kVec>
  __device__ __forceinline__ void terms(const Vec<T, kVec>& xv, const Vec<O, kVec>& gv, int64_t c, A mu, A rs,
                                        A (&xhat)[kVec], A (&g)[kVec], A (&gw)[kVec]) const {
    A w[kVec];
    if (weight != nullptr) load<kVec>(weight, c, w);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      xhat[e] = (to_opmath(xv.v[e]) - mu) * rs;
      g[e] = to_opmath(gv.v[e]);
      gw[e] = weight != nullptr ? mul_rn(g[e], offset + w[e]) : g[e];
    }
  }

  // A thread's share of one row in the held kernel: x and grad as loaded
  // (element e of x[i] at column (i * blockDim.x + threadIdx.x) * kVec + e),
  // and the row's statistics.
  template <int kVec, int kIters>
  struct HeldRow {
    Vec<T, kVec> x[kIters];
    Vec<O, kVec> g[kIters];
    A mu, rs;
  };

  // r = row `row` (nothing for a row past the last).
  template <bool kCenter, int kVec, int kIters>
  __device__ __forceinline__ void fetch(int64_t row, HeldRow<kVec, kIters>& r) const {
    if (row >= rows) return;
    r.mu = kCenter ? mean[row] : A(0);
    r.rs = rstd[row];
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int64_t c = (int64_t(i) * blockDim.x + threadIdx.x) * kVec;
      if (c >= cols) continue;
      r.x[i] = load_vec<kVec>(x, row * cols + c);
      r.g[i] = load_vec<kVec>(grad, row * cols + c);
    }
  }

  // grad_x[i, i + kVec) = rs * (gw - mean(gw) - xhat * mean(gw * xhat)) (+ grad_summed).
  template <int kVec>
  __device__ __forceinline__ void input_grad(int64_t i, A rs, A mean_gw, A mean_gwx, const A (&xhat)[kVec],
                                             const A (&gw)[kVec]) const {
    A dx[kVec], extra[kVec];
    if (grad_summed != nullptr) load<kVec>(grad_summed, i, extra);
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      dx[e] = rs * (gw[e] - mean_gw - xhat[e] * mean_gwx);
      if (grad_summed != nullptr) dx[e] += extra[e];
    }
    store<kVec>(grad_x, i, dx);
  }
};

// The block's per-column sums `held` (one set per row group) added over its
// groups in order into partial[blockIdx.x, :]. smem: kBlockThreads * kVec values.
template <int kVec, int kIters, typename A>
__device__ void write_partial(A* __restrict__ partial, int64_t cols, const A (&held)[kIters][kVec], A* smem) {
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    __syncthreads();
#pragma unroll
    for (int e = 0; e < kVec; ++e) smem[(threadIdx.y * blockDim.x + threadIdx.x) * kVec + e] = held[i][e];
    __syncthreads();
    // Thread tid takes column c0 + tid of this iteration's blockDim.x * kVec.
    const int64_t c0 = int64_t(i) * blockDim.x * kVec;
    for (int k = tid; k < int(blockDim.x) * kVec; k += blockDim.x * blockDim.y) {
      if (c0 + k >= cols) break;
      A total = 0;
      for (int y = 0; y < int(blockDim.y); ++y) total += smem[y * blockDim.x * kVec + k];
      partial[int64_t(blockIdx.x) * cols + c0 + k] = total;
    }
  }
}

template <typename T, typename W, typename O, bool kCenter, int kVec, int kIters>
__global__ void __launch_bounds__(kBlockThreads, 1) backward_held_kernel(NormBackwardArgs args) {
  using A = opmath_t<T>;
  __shared__ A smem[kMaxGroups * 33];
  __shared__ A sums[kBlockThreads * kVec];
  const Backward<T, W, O> b(args);
  A dw[kIters][kVec] = {}, db[kIters][kVec] = {};
  const int64_t step = int64_t(gridDim.x) * blockDim.y;
  typename Backward<T, W, O>::template HeldRow<kVec, kIters> next;
  b.template fetch<kCenter>(int64_t(blockIdx.x) * blockDim.y + threadIdx.y, next);
  for (int64_t first = int64_t(blockIdx.x) * blockDim.y; first < b.rows; first += step) {
    const int64_t row = first + threadIdx.y;
    const bool active = row < b.rows;
    const auto r = next;
    b.template fetch<kCenter>(row + step, next);  // in flight during this row's reductions
    A sum_gw = 0, sum_gwx = 0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int64_t c = (int64_t(i) * blockDim.x + threadIdx.x) * kVec;
      if (!active || c >= b.cols) continue;
      A xhat[kVec], g[kVec], gw[kVec];
      b.template terms<kVec>(r.x[i], r.g[i], c, r.mu, r.rs, xhat, g, gw);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        sum_gw += gw[e];
        sum_gwx += gw[e] * xhat[e];
        dw[i][e] += g[e] * xhat[e];
        if constexpr (kCenter) db[i][e] += g[e];  // rms_norm has no bias
      }
    }
    const A mean_gwx = group_allreduce(sum_gwx, smem) / A(b.cols);
    A mean_gw = 0;
    if constexpr (kCenter) mean_gw = group_allreduce(sum_gw, smem) / A(b.cols);
    if (b.grad_x == nullptr) continue;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int64_t c = (int64_t(i) * blockDim.x + threadIdx.x) * kVec;
      if (!active || c >= b.cols) continue;
      A xhat[kVec], g[kVec], gw[kVec];  // recomputed: holding them takes the registers the next row needs
      b.template terms<kVec>(r.x[i], r.g[i], c, r.mu, r.rs, xhat, g, gw);
      b.template input_grad<kVec>(row * b.cols + c, r.rs, mean_gw, mean_gwx, xhat, gw);
    }
  }
  if (b.partial_weight != nullptr) write_partial<kVec>(b.partial_weight, b.cols, dw, sums);
  if (b.partial_bias != nullptr) write_partial<kVec>(b.partial_bias, b.cols, db, sums);
}

// A row too long to hold: one row group a block; its column sums go
// straight to its own row of the partial buffers (each element is only ever
// touched by one thread).
template <typename T, typename W, typename O, bool kCenter, int kVec>
__global__ void __launch_bounds__(kBlockThreads) backward_streamed_kernel(NormBackwardArgs args) {
  using A = opmath_t<T>;
  __shared__ A smem[33];
  const Backward<T, W, O> b(args);
  const int64_t step = int64_t(blockDim.x) * kVec;
  A* pw = b.partial_weight != nullptr ? b.partial_weight + int64_t(blockIdx.x) * b.cols : nullptr;
  A* pb = b.partial_bias != nullptr ? b.partial_bias + int64_t(blockIdx.x) * b.cols : nullptr;
  for (int64_t c = int64_t(threadIdx.x) * kVec; c < b.cols; c += step) {
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      if (pw != nullptr) pw[c + e] = 0;
      if (pb != nullptr) pb[c + e] = 0;
    }
  }
  for (int64_t row = blockIdx.x; row < b.rows; row += gridDim.x) {
    const int64_t base = row * b.cols;
    const A mu = kCenter ? b.mean[row] : A(0);
    const A rs = b.rstd[row];
    A sum_gw = 0, sum_gwx = 0;
    for (int64_t c = int64_t(threadIdx.x) * kVec; c < b.cols; c += step) {
      A xhat[kVec], g[kVec], gw[kVec];
      b.template terms<kVec>(load_vec<kVec>(b.x, base + c), load_vec<kVec>(b.grad, base + c), c, mu, rs, xhat,
                             g, gw);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        sum_gw += gw[e];
        sum_gwx += gw[e] * xhat[e];
        if (pw != nullptr) pw[c + e] += g[e] * xhat[e];
        if (pb != nullptr) pb[c + e] += g[e];
      }
    }
    const A mean_gwx = group_allreduce(sum_gwx, smem) / A(b.cols);
    A mean_gw = 0;
    if constexpr (kCenter) mean_gw = group_allreduce(sum_gw, smem) / A(b.cols);
    if (b.grad_x == nullptr) continue;
    for (int64_t c = int64_t(threadIdx.x) * kVec; c < b.cols; c += step) {
      A xhat[kVec], g[kVec], gw[kVec];
      b.template terms<kVec>(load_vec<kVec>(b.x, base + c), load_vec<kVec>(b.grad, base + c), c, mu, rs, xhat,
                             g, gw);
      b.template input_grad<kVec>(base + c, rs, mean_gw, mean_gwx, xhat, gw);
    }
  }
}

// ------------------------------------------------------------------ launch ---

// Whether a row of `vectors` fits a block's threads at `iters` vectors each.
bool held(int64_t vectors, int iters) { return vectors <= int64_t(iters) * kBlockThreads; }

// The threads a held row takes (whole warps), and the block: as many rows as
// fit kBlockThreads.
int row_threads(int64_t vectors, int iters) {
  const int64_t threads = (vectors + iters - 1) / iters;
  return static_cast<int>(std::clamp<int64_t>((threads + 31) / 32 * 32, 32, kBlockThreads));
}

dim3 block_shape(int64_t vectors, int iters) {
  const int x = row_threads(vectors, iters);
  return dim3(x, kBlockThreads / x);
}

// The forward holds a row of 16-bit elements in 3 vectors a thread where that
// leaves fewer threads idle than 2 (hidden 768: one warp of 3 vectors, where 2
// take two warps with a quarter idle and their reductions cross warps).
bool three_fit_better(int64_t vectors) {
  return held(vectors, 2) && row_threads(vectors, 3) * 3 < row_threads(vectors, 2) * 2;
}

bool aligned(const void* p, int bytes) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Whether every row of every operand starts 16-byte aligned for x's vectors
// (the other operands' vectors of kVec elements aligned to their size).
template <typename T, typename W, typename O>
bool vectorizable(int64_t cols, std::initializer_list<const void*> ts, std::initializer_list<const void*> ws,
                  std::initializer_list<const void*> os) {
  constexpr int kVec = kVec16<T>;
  if (cols % kVec != 0) return false;
  for (const void* p : ts)
    if (!aligned(p, kVec * sizeof(T))) return false;
  for (const void* p : ws)
    if (!aligned(p, kVec * sizeof(W))) return false;
  for (const void* p : os)
    if (!aligned(p, kVec * sizeof(O))) return false;
  return true;
}

// Runs body.template operator()<T, W, O>() for the arguments' dtypes: x's,
// the parameters', the output's (norm_out_t<T, W>, or a float32 x's float16
// or bfloat16 out_dtype: the only other output instantiated).
template <typename Body>
cudaError_t dispatch_types(DType dtype, bool wide_params, DType out_dtype, Body&& body) {
  return dispatch_dtype(dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      if (wide_params) return body.template operator()<T, float, float>();
    }
    if constexpr (std::is_same_v<T, float>) {
      if (out_dtype == DType::BFloat16) return body.template operator()<T, T, __nv_bfloat16>();
      if (out_dtype == DType::Float16) return body.template operator()<T, T, __half>();
    }
    return body.template operator()<T, T, T>();
  });
}

unsigned grid_of(int64_t blocks) { return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 0x7fffffff)); }

}  // namespace

cudaError_t launch_norm_forward(const NormForwardArgs& a, const DeviceInfo& device, cudaStream_t stream) {
  if (a.rows == 0 || a.cols == 0) return cudaSuccess;
  return dispatch_types(a.dtype, a.wide_params, a.out_dtype, [&]<typename T, typename W, typename O>() {
    const bool vec = vectorizable<T, W, O>(a.cols, {a.x, a.residual, a.summed}, {a.weight, a.bias}, {a.out});
    with_flags(
        [&](auto center, auto vector) {
          constexpr bool kCenter = decltype(center)::value;
          constexpr int kVec = decltype(vector)::value ? kVec16<T> : 1;
          constexpr int kIters = kHeldVectors<kVec>;
          const int64_t vectors = a.cols / kVec;
          const auto held_launch = [&]<int kHeldIters>() {
            const dim3 block = block_shape(vectors, kHeldIters);
            const int64_t row_blocks = (a.rows + block.y - 1) / block.y;
            if constexpr (kStagedForward<T, kCenter, kVec, kHeldIters>) {
              if (a.residual == nullptr) {
                const int64_t blocks =
                    std::min<int64_t>(row_blocks, int64_t(device.sm_count) * kForwardBlocksPerSm);
                forward_held_kernel<T, W, O, kCenter, kVec, kHeldIters, true>
                    <<<grid_of(blocks), block, 0, stream>>>(a);
                return;
              }
            }
            forward_held_kernel<T, W, O, kCenter, kVec, kHeldIters, false>
                <<<grid_of(row_blocks), block, 0, stream>>>(a);
          };
          if (!held(vectors, kIters)) {
            forward_streamed_kernel<T, W, O, kCenter, kVec><<<grid_of(a.rows), kBlockThreads, 0, stream>>>(a);
          } else if constexpr (kVec == 8) {
            if (three_fit_better(vectors)) {
              held_launch.template operator()<3>();
            } else {
              held_launch.template operator()<kIters>();
            }
          } else {
            held_launch.template operator()<kIters>();
          }
        },
        a.center, vec);
    return cudaGetLastError();
  });
}

// Sized for rows of 16-byte vectors (16 elements a thread, whatever the dtype);
// rows of single elements run on the same grid (any grid gives every row).
int64_t norm_backward_blocks(int64_t rows, int64_t cols, const DeviceInfo& device) {
  const int64_t groups = held(cols, 16) ? kBlockThreads / row_threads(cols, 16) : 1;
  return std::min<int64_t>((rows + groups - 1) / groups, int64_t(device.sm_count) * 2);
}

cudaError_t launch_norm_backward(const NormBackwardArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.cols == 0) return cudaSuccess;
  return dispatch_types(a.dtype, a.wide_params, a.out_dtype, [&]<typename T, typename W, typename O>() {
    using A = opmath_t<T>;
    const bool vec = vectorizable<T, W, O>(a.cols, {a.x, a.grad_summed, a.grad_x}, {a.weight}, {a.grad});
    with_flags(
        [&](auto center, auto vector) {
          constexpr bool kCenter = decltype(center)::value;
          constexpr int kVec = decltype(vector)::value ? kVec16<T> : 1;
          constexpr int kIters = kHeldVectors<kVec>;
          const int64_t vectors = a.cols / kVec;
          const unsigned grid = grid_of(a.blocks);
          if (!held(vectors, kIters)) {
            backward_streamed_kernel<T, W, O, kCenter, kVec><<<grid, kBlockThreads, 0, stream>>>(a);
          } else {
            backward_held_kernel<T, W, O, kCenter, kVec, kIters>
                <<<grid, block_shape(vectors, kIters), 0, stream>>>(a);
          }
        },
        a.center, vec);
    cudaError_t error = cudaGetLastError();
    if (error == cudaSuccess && a.grad_weight != nullptr) {
      error = launch_column_sums(static_cast<const A*>(a.partial_weight), a.blocks, a.cols,
                                 static_cast<W*>(a.grad_weight), stream);
    }
    if (error == cudaSuccess && a.grad_bias != nullptr) {
      error = launch_column_sums(static_cast<const A*>(a.partial_bias), a.blocks, a.cols,
                                 static_cast<W*>(a.grad_bias), stream);
    }
    return error;
  });
}

}  // namespace fusedops::cuda
