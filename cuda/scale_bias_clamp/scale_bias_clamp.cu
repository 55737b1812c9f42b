// fusedops.scale_bias_clamp CUDA kernels: out = clamp(x * scale + bias, lo, hi)
// and its backward. Torch-free: pointers, sizes, strides and a stream.
//
// Forward: one pass. Flat (dense x, bias a number / one element / dense like
// x) and Rows ([rows, cols] with a [cols] bias held in registers) move 16
// bytes per access when the pointers allow; Strided covers everything else.
//
// Backward: one pass over grad_out and x writes grad_x and per-block partial
// sums of grad_scale (sum g * mask * x) and grad_bias (sum g * mask over the
// broadcast dims), in float (double for float64). A second tiny kernel adds
// the partials in a fixed order, so results are bitwise reproducible; no
// atomics, and the scratch is O(blocks) (O(grid_y * cols) for a [cols] bias).
#include "cuda/common/common.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/common/with_flags.h"
#include "cuda/scale_bias_clamp/scale_bias_clamp.h"

namespace fusedops::cuda {
namespace {

// The backward kernels are capped at 64 registers (4 blocks of 256 threads per
// SM fit), so their persistent grid of 4 blocks per SM (which bounds the
// partial sums) is resident all at once.
constexpr int kBlocksPerSm = 4;
constexpr int kBwdUnroll = 2;  // 16-byte loads in flight per stream; the backward reads two or three
// The forward kernels need no partials: as many blocks as the work, each
// thread one 16-byte vector (flat) or two rows of one vector column (rows):
// faster than a persistent grid with vectors in flight (benchmarks/results/NOTES.md,
// "Linear's training path, the elementwise forward at the copy limit").
constexpr int kRowsPerThread = 2;

template <typename T>
struct SbcArgs {
  using A = opmath_t<T>;
  const T* scale;  // one element in device memory, or null: scale_value
  A scale_value;
  A bias_value;
  SbcClamp<A> clamp;
};

template <typename T>
SbcArgs<T> make_args(const SbcScalars& s) {
  using A = opmath_t<T>;
  return {static_cast<const T*>(s.scale), static_cast<A>(s.scale_value), static_cast<A>(s.bias_value),
          make_clamp<A>(s)};
}

__device__ __forceinline__ float fma_op(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fma_op(double a, double b, double c) { return __fma_rn(a, b, c); }

template <typename T>
__device__ __forceinline__ opmath_t<T> read_scale(const SbcArgs<T>& args) {
  return args.scale != nullptr ? to_opmath(*args.scale) : args.scale_value;
}

// The scale, and the bias where it is one value (a number or a one-element
// tensor; kDenseBias: one per element, read in the loop): what a flat kernel
// reads before its loop.
template <typename T, bool kDenseBias>
__device__ __forceinline__ void flat_scalars(const T* bias, const SbcArgs<T>& args, opmath_t<T>& s,
                                             opmath_t<T>& b0) {
  s = read_scale(args);
  b0 = (!kDenseBias && bias != nullptr) ? to_opmath(bias[0]) : args.bias_value;
}

// v = x * scale + bias with one rounding; forward and backward share it, so
// the gradient mask always agrees with the clamped output.
template <typename T>
__device__ __forceinline__ opmath_t<T> pre_clamp(T x, opmath_t<T> s, opmath_t<T> b) {
  return fma_op(to_opmath(x), s, b);
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline unsigned persistent_blocks(int64_t threads_needed, const DeviceInfo& dev) {
  const int64_t resident = int64_t(dev.sm_count) * kBlocksPerSm;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(ceil_div(threads_needed, kThreads), resident)));
}

// Sum over the block in a fixed order (warp trees, then a tree over the warp
// sums); the result is valid in thread 0. Every thread of the block calls it.
template <typename A>
__device__ A block_sum(A v, A* smem /* 32 */) {
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  const int lane = tid % 32, warp = tid / 32;
  const int warps = (blockDim.x * blockDim.y + 31) / 32;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? smem[lane] : A(0);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  }
  return v;
}

// ---------------------------------------------------------------- forward ---

template <typename T, int kVec, bool kDenseBias>
__global__ void __launch_bounds__(kThreads)
    sbc_forward_flat(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ bias,
                     SbcArgs<T> args, int64_t n) {
  using A = opmath_t<T>;
  using V = Vec<T, kVec>;
  A s, b0;
  flat_scalars<T, kDenseBias>(bias, args, s, b0);
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;  // a loop only past 2^31 - 1 blocks
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < nvec; i += stride) {
    const V xv = reinterpret_cast<const V*>(x)[i];
    V bv;
    if constexpr (kDenseBias) bv = reinterpret_cast<const V*>(bias)[i];
    V r;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const A b = kDenseBias ? to_opmath(bv.v[e]) : b0;
      r.v[e] = from_opmath<T>(args.clamp(pre_clamp(xv.v[e], s, b)));
    }
    reinterpret_cast<V*>(out)[i] = r;
  }
  // The last n % kVec elements, one per thread.
  const int64_t t = nvec * kVec + first;
  if (t < n) {
    const A b = kDenseBias ? to_opmath(bias[t]) : b0;
    out[t] = from_opmath<T>(args.clamp(pre_clamp(x[t], s, b)));
  }
}

// The [cols] bias of vector column c (or the number, for no bias tensor), in
// the op-math type: what the row kernels keep in registers.
template <typename T, int kVec>
__device__ __forceinline__ void load_bias_column(const T* bias, int64_t c, const SbcArgs<T>& args,
                                                 opmath_t<T> (&b)[kVec]) {
  if (bias != nullptr) {
    const Vec<T, kVec> bv = reinterpret_cast<const Vec<T, kVec>*>(bias)[c];
#pragma unroll
    for (int e = 0; e < kVec; ++e) b[e] = to_opmath(bv.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) b[e] = args.bias_value;
  }
}

// [rows, cols]: block (i, j) covers column block i (blockDim.x vector columns)
// of row band j (blockDim.y * kRowsPerThread rows); thread (x, y) takes rows y
// and y + blockDim.y of the band in one vector column. Where the bands do not
// fit in gridDim.y the grid is one-dimensional, band-major (any row count
// fits). This version ran bfloat16 65536x4096 1.9% faster than the 1-D-only
// one before it (bench A/B in one run); launched on either grid it reaches
// memcpy speed there (benchmarks/results/*sbc-rows-grid.txt), so the gain is
// not the grid alone. No loop: a band loop cost bfloat16 8% (59 registers
// instead of 32). The x loads go out before the scale and bias loads.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    sbc_forward_rows(T* __restrict__ out, const T* __restrict__ x, int64_t sx, const T* __restrict__ bias,
                     SbcArgs<T> args, int64_t rows, int64_t cols, unsigned col_blocks) {
  using A = opmath_t<T>;
  using V = Vec<T, kVec>;
  const bool one_d = gridDim.y == 1;
  const unsigned band = one_d ? blockIdx.x / col_blocks : blockIdx.y;
  const int64_t c = int64_t(one_d ? blockIdx.x - band * col_blocks : blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols / kVec) return;
  const int64_t r0 = int64_t(band) * blockDim.y * kRowsPerThread + threadIdx.y;
  V xs[kRowsPerThread];
#pragma unroll
  for (int u = 0; u < kRowsPerThread; ++u) {
    const int64_t r = r0 + u * int64_t(blockDim.y);
    if (r < rows) xs[u] = reinterpret_cast<const V*>(x + r * sx)[c];
  }
  const A s = read_scale(args);
  A b[kVec];
  load_bias_column<T, kVec>(bias, c, args, b);
#pragma unroll
  for (int u = 0; u < kRowsPerThread; ++u) {
    const int64_t r = r0 + u * int64_t(blockDim.y);
    if (r < rows) {
      V o;
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = from_opmath<T>(args.clamp(pre_clamp(xs[u].v[e], s, b[e])));
      reinterpret_cast<V*>(out + r * cols)[c] = o;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sbc_forward_strided(T* out, const T* x, const T* bias, SbcArgs<T> args, StridedLayout<3> layout,
                        int64_t n) {
  using A = opmath_t<T>;
  const A s = read_scale(args);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[3];
    strided_offsets(layout, i, off);
    const A b = bias != nullptr ? to_opmath(bias[off[2]]) : args.bias_value;
    out[off[0]] = from_opmath<T>(args.clamp(pre_clamp(x[off[1]], s, b)));
  }
}

// Row-kernel block shape: enough threads along a row for its vector columns
// (a power of two up to 256), the rest of the 256 along rows.
inline void rows_block(int64_t vec_cols, unsigned& bx, unsigned& by) {
  bx = 1;
  while (bx < 256 && bx < vec_cols) bx *= 2;
  by = kThreads / bx;
}

template <typename T>
cudaError_t forward_t(T* out, const T* x, const T* bias, const StridedLayout<3>& layout, int64_t n,
                      const SbcScalars& scalars, cudaStream_t stream) {
  const SbcArgs<T> args = make_args<T>(scalars);
  const SbcShape shape = classify_forward(layout, bias != nullptr);
  constexpr int kVec = kVec16<T>;
  if (shape.path == SbcPath::Flat) {
    const bool dense = bias != nullptr && layout.strides[2][0] == 1;
    const bool vec = aligned16(out) && aligned16(x) && (!dense || aligned16(bias));
    const int64_t v = vec ? kVec : 1;
    const unsigned grid = work_grid(std::max<int64_t>(n / v, n % v));
    with_flags(
        [&](auto vectorized, auto dense_bias) {
          sbc_forward_flat<T, vectorized ? kVec : 1, dense_bias>
              <<<grid, kThreads, 0, stream>>>(out, x, bias, args, n);
        },
        vec, dense);
  } else if (shape.path == SbcPath::Rows) {
    const int64_t rows = shape.rows, cols = shape.cols, sx = layout.strides[1][0];
    const bool vec = cols % kVec == 0 && sx % kVec == 0 && aligned16(out) && aligned16(x) &&
                     (bias == nullptr || aligned16(bias));
    const int64_t vec_cols = vec ? cols / kVec : cols;
    unsigned bx, by;
    rows_block(vec_cols, bx, by);
    const int64_t col_blocks = ceil_div(vec_cols, bx), bands = ceil_div(rows, int64_t(by) * kRowsPerThread);
    if (col_blocks * bands > 0x7fffffff) return cudaErrorInvalidConfiguration;  // > 2^39 elements
    const auto cb = static_cast<unsigned>(col_blocks);
    const dim3 grid = bands <= 65535 ? dim3(cb, unsigned(bands)) : dim3(unsigned(col_blocks * bands));
    const dim3 block(bx, by);
    with_flags(
        [&](auto vectorized) {
          sbc_forward_rows<T, vectorized ? kVec : 1>
              <<<grid, block, 0, stream>>>(out, x, sx, bias, args, rows, cols, cb);
        },
        vec);
  } else {
    sbc_forward_strided<T><<<work_grid(n), kThreads, 0, stream>>>(out, x, bias, args, layout, n);
  }
  return cudaGetLastError();
}

// --------------------------------------------------------------- backward ---

// Per element: gm = mask ? g : 0; grad_x = gm * scale; bias grad gm; scale grad gm * x.
template <typename T>
struct BwdElement {
  using A = opmath_t<T>;
  A gx, gm, gs;
  __device__ __forceinline__ BwdElement(T g, T x, A s, A b, const SbcClamp<A>& clamp) {
    const A xa = to_opmath(x);
    gm = clamp.pass(fma_op(xa, s, b)) ? to_opmath(g) : A(0);
    gx = gm * s;
    gs = gm * xa;
  }
};

// The flat and strided kernels' partials: [gridDim.x] block sums of the
// scale gradient, then [gridDim.x] block sums of gm.
template <typename A>
__device__ void write_flat_partials(A acc_s, A acc_b, A* partials) {
  __shared__ A smem[32];
  const A sum_s = block_sum(acc_s, smem);
  const A sum_b = block_sum(acc_b, smem);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum_s;
    partials[gridDim.x + blockIdx.x] = sum_b;
  }
}

// What one thread of the flat backward carries: the scalars, where the
// gradients go, and its sums of the scale gradient and of gm.
template <typename T, bool kDenseBias>
struct FlatBackward {
  using A = opmath_t<T>;
  A s, b0;
  SbcClamp<A> clamp;
  T* grad_x;
  T* grad_bias_full;
  A acc_s = 0, acc_b = 0;

  // The W elements of vector i (W = kVec; 1 for the last n % kVec elements).
  template <int W>
  __device__ __forceinline__ void operator()(int64_t i, const Vec<T, W>& gv, const Vec<T, W>& xv,
                                             const Vec<T, W>& bv) {
    Vec<T, W> ox, ob;
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const BwdElement<T> el(gv.v[e], xv.v[e], s, kDenseBias ? to_opmath(bv.v[e]) : b0, clamp);
      ox.v[e] = from_opmath<T>(el.gx);
      ob.v[e] = from_opmath<T>(el.gm);
      acc_s += el.gs;
      acc_b += el.gm;
    }
    if (grad_x != nullptr) reinterpret_cast<Vec<T, W>*>(grad_x)[i] = ox;
    if (grad_bias_full != nullptr) reinterpret_cast<Vec<T, W>*>(grad_bias_full)[i] = ob;
  }
};

// Dense x and grad_out. partials (if not null): see write_flat_partials (the
// gm sums serve a one-element bias).
template <typename T, int kVec, bool kDenseBias>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    sbc_backward_flat(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ bias,
                      SbcArgs<T> args, int64_t n, T* __restrict__ grad_x, T* __restrict__ grad_bias_full,
                      opmath_t<T>* __restrict__ partials) {
  using V = Vec<T, kVec>;
  FlatBackward<T, kDenseBias> step{{}, {}, args.clamp, grad_x, grad_bias_full};
  flat_scalars<T, kDenseBias>(bias, args, step.s, step.b0);
  const V* vg = reinterpret_cast<const V*>(g);
  const V* vx = reinterpret_cast<const V*>(x);
  const V* vb = reinterpret_cast<const V*>(bias);
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kBwdUnroll - 1) * stride < nvec; i += kBwdUnroll * stride) {
    V gs[kBwdUnroll], xs[kBwdUnroll], bs[kBwdUnroll];
#pragma unroll
    for (int u = 0; u < kBwdUnroll; ++u) {
      gs[u] = vg[i + u * stride];
      xs[u] = vx[i + u * stride];
      if constexpr (kDenseBias) bs[u] = vb[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kBwdUnroll; ++u) step(i + u * stride, gs[u], xs[u], bs[u]);
  }
  for (; i < nvec; i += stride) {
    V bv;
    if constexpr (kDenseBias) bv = vb[i];
    step(i, vg[i], vx[i], bv);
  }
  const int64_t t = nvec * kVec + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) step(t, Vec<T, 1>{{g[t]}}, Vec<T, 1>{{x[t]}}, Vec<T, 1>{{kDenseBias ? bias[t] : T()}});
  if (partials != nullptr) write_flat_partials(step.acc_s, step.acc_b, partials);
}

// The rows kernel's partials, both in a fixed order: partial_scale
// [gridDim.y * gridDim.x], the block sums of the scale gradient; partial_bias
// [gridDim.y, cols], the column sums of gm over the block's rows (threadIdx.y).
template <typename A, int kVec>
__device__ void write_rows_partials(A acc_s, const A (&acc_b)[kVec], int64_t cols, A* partial_scale,
                                    A* partial_bias) {
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  if (partial_bias != nullptr) {
    __shared__ A smem_cols[kThreads * kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) smem_cols[tid * kVec + e] = acc_b[e];
    __syncthreads();
    const int width = blockDim.x * kVec;
    for (int j = tid; j < width; j += kThreads) {
      A sum = 0;
      for (int y = 0; y < int(blockDim.y); ++y) sum += smem_cols[y * width + j];
      const int64_t col = int64_t(blockIdx.x) * width + j;
      if (col < cols) partial_bias[int64_t(blockIdx.y) * cols + col] = sum;
    }
  }
  if (partial_scale != nullptr) {
    __shared__ A smem[32];
    const A sum = block_sum(acc_s, smem);
    if (tid == 0) partial_scale[int64_t(blockIdx.y) * gridDim.x + blockIdx.x] = sum;
  }
}

// [rows, cols] with a [cols] bias (or a number). Thread (x, y) owns one
// vector column and the rows y, y + grid rows, ...; it keeps the bias and the
// column sums of gm in registers; partials: see write_rows_partials.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    sbc_backward_rows(const T* __restrict__ g, int64_t sg, const T* __restrict__ x, int64_t sx,
                      const T* __restrict__ bias, SbcArgs<T> args, int64_t rows, int64_t cols,
                      T* __restrict__ grad_x, opmath_t<T>* __restrict__ partial_scale,
                      opmath_t<T>* __restrict__ partial_bias) {
  using A = opmath_t<T>;
  using V = Vec<T, kVec>;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  A acc_s = 0;
  A acc_b[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) acc_b[e] = 0;
  if (c < cols / kVec) {
    const A s = read_scale(args);
    A b[kVec];
    load_bias_column<T, kVec>(bias, c, args, b);
    auto process = [&](int64_t r, const V& gv, const V& xv) {
      V ox;
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        const BwdElement<T> el(gv.v[e], xv.v[e], s, b[e], args.clamp);
        ox.v[e] = from_opmath<T>(el.gx);
        acc_s += el.gs;
        acc_b[e] += el.gm;
      }
      if (grad_x != nullptr) reinterpret_cast<V*>(grad_x + r * cols)[c] = ox;
    };
    const int64_t rstride = int64_t(gridDim.y) * blockDim.y;
    int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
    for (; r + (kBwdUnroll - 1) * rstride < rows; r += kBwdUnroll * rstride) {
      V gs[kBwdUnroll], xs[kBwdUnroll];
#pragma unroll
      for (int u = 0; u < kBwdUnroll; ++u) {
        gs[u] = reinterpret_cast<const V*>(g + (r + u * rstride) * sg)[c];
        xs[u] = reinterpret_cast<const V*>(x + (r + u * rstride) * sx)[c];
      }
#pragma unroll
      for (int u = 0; u < kBwdUnroll; ++u) process(r + u * rstride, gs[u], xs[u]);
    }
    for (; r < rows; r += rstride) {
      process(r, reinterpret_cast<const V*>(g + r * sg)[c], reinterpret_cast<const V*>(x + r * sx)[c]);
    }
  }
  write_rows_partials<A, kVec>(acc_s, acc_b, cols, partial_scale, partial_bias);
}

// Any layout. Same partials as sbc_backward_flat.
template <typename T>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    sbc_backward_strided(const T* g, const T* x, const T* bias, SbcArgs<T> args, StridedLayout<4> layout,
                         int64_t n, T* grad_x, T* grad_bias_full, opmath_t<T>* partials) {
  using A = opmath_t<T>;
  const A s = read_scale(args);
  A acc_s = 0, acc_b = 0;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[4];
    strided_offsets(layout, i, off);
    const A b = bias != nullptr ? to_opmath(bias[off[3]]) : args.bias_value;
    const BwdElement<T> el(g[off[1]], x[off[2]], s, b, args.clamp);
    if (grad_x != nullptr) grad_x[off[0]] = from_opmath<T>(el.gx);
    if (grad_bias_full != nullptr) grad_bias_full[off[0]] = from_opmath<T>(el.gm);
    acc_s += el.gs;
    acc_b += el.gm;
  }
  if (partials != nullptr) write_flat_partials(acc_s, acc_b, partials);
}

// out[0] = sum of partials[0, n) in a fixed order; one block.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sbc_reduce_partials(const opmath_t<T>* __restrict__ partials, int64_t n, T* __restrict__ out) {
  using A = opmath_t<T>;
  __shared__ A smem[32];
  A v = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) v += partials[i];
  v = block_sum(v, smem);
  if (threadIdx.x == 0) *out = from_opmath<T>(v);
}

template <typename T>
SbcBackwardPlan plan_t(const SbcBackwardProblem& p, const DeviceInfo& dev) {
  constexpr int kVec = kVec16<T>;
  SbcBackwardPlan plan;
  const SbcShape& sh = p.shape;
  const SbcGrads& gr = p.grads;
  const bool reduce = gr.grad_scale != nullptr || sh.bias_grad == SbcBiasGrad::Single;
  auto ok = [](const void* ptr) { return ptr == nullptr || aligned16(ptr); };
  if (sh.path == SbcPath::Flat) {
    const bool dense = p.bias != nullptr && p.layout.strides[3][0] == 1;
    plan.vectorized = aligned16(p.grad_out) && aligned16(p.x) && (!dense || aligned16(p.bias)) &&
                      ok(gr.grad_x) && ok(gr.grad_bias_full);
    const int64_t v = plan.vectorized ? kVec : 1;
    plan.grid_x = persistent_blocks(std::max<int64_t>(p.numel / v / kBwdUnroll, p.numel % v), dev);
    plan.partial_elems = reduce ? 2 * int64_t(plan.grid_x) : 0;
  } else if (sh.path == SbcPath::Rows) {
    const int64_t sg = p.layout.strides[1][0], sx = p.layout.strides[2][0];
    plan.vectorized = sh.cols % kVec == 0 && sg % kVec == 0 && sx % kVec == 0 && aligned16(p.grad_out) &&
                      aligned16(p.x) && ok(p.bias) && ok(gr.grad_x);
    const int64_t vec_cols = plan.vectorized ? sh.cols / kVec : sh.cols;
    rows_block(vec_cols, plan.block_x, plan.block_y);
    const int64_t gx = ceil_div(vec_cols, plan.block_x);
    const int64_t target = int64_t(dev.sm_count) * kBlocksPerSm;
    const int64_t gy =
        std::min<int64_t>({ceil_div(sh.rows, plan.block_y), std::max<int64_t>(1, target / gx), 65535});
    plan.grid_x = static_cast<unsigned>(std::min<int64_t>(gx, 0x7fffffff));
    plan.grid_y = static_cast<unsigned>(gy);
    plan.partial_elems =
        (gr.grad_scale != nullptr ? gx * gy : 0) + (sh.bias_grad == SbcBiasGrad::Rows ? gy * sh.cols : 0);
  } else {
    plan.grid_x = persistent_blocks(p.numel, dev);
    plan.partial_elems = reduce ? 2 * int64_t(plan.grid_x) : 0;
  }
  return plan;
}

// The rows path: the main kernel, then the fixed-order reductions of its partials.
template <typename T>
cudaError_t backward_rows_t(const SbcBackwardProblem& p, const SbcBackwardPlan& plan, opmath_t<T>* partials,
                            cudaStream_t stream) {
  using A = opmath_t<T>;
  const SbcShape& sh = p.shape;
  T* grad_x = static_cast<T*>(p.grads.grad_x);
  T* grad_scale = static_cast<T*>(p.grads.grad_scale);
  if (plan.grid_x == 0x7fffffffu || p.grads.grad_bias_full != nullptr) return cudaErrorInvalidConfiguration;
  const dim3 grid(plan.grid_x, plan.grid_y), block(plan.block_x, plan.block_y);
  const int64_t blocks = int64_t(plan.grid_x) * plan.grid_y;
  A* partial_scale = grad_scale != nullptr ? partials : nullptr;
  A* partial_bias = sh.bias_grad == SbcBiasGrad::Rows ? partials + (partial_scale ? blocks : 0) : nullptr;
  with_flags(
      [&](auto vectorized) {
        sbc_backward_rows<T, vectorized ? kVec16<T> : 1><<<grid, block, 0, stream>>>(
            static_cast<const T*>(p.grad_out), p.layout.strides[1][0], static_cast<const T*>(p.x),
            p.layout.strides[2][0], static_cast<const T*>(p.bias), make_args<T>(p.scalars), sh.rows, sh.cols,
            grad_x, partial_scale, partial_bias);
      },
      plan.vectorized);
  if (partial_scale != nullptr) {
    sbc_reduce_partials<T><<<1, kThreads, 0, stream>>>(partial_scale, blocks, grad_scale);
  }
  if (partial_bias != nullptr) {
    return launch_column_sums(partial_bias, int64_t(plan.grid_y), sh.cols,
                              static_cast<T*>(p.grads.grad_bias_sum), stream);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward_t(const SbcBackwardProblem& p, const SbcBackwardPlan& plan, void* partials_raw,
                       cudaStream_t stream) {
  using A = opmath_t<T>;
  A* partials = plan.partial_elems > 0 ? static_cast<A*>(partials_raw) : nullptr;
  const SbcShape& sh = p.shape;
  if (sh.path == SbcPath::Rows) return backward_rows_t<T>(p, plan, partials, stream);
  constexpr int kVec = kVec16<T>;
  const SbcArgs<T> args = make_args<T>(p.scalars);
  const T* g = static_cast<const T*>(p.grad_out);
  const T* x = static_cast<const T*>(p.x);
  const T* bias = static_cast<const T*>(p.bias);
  T* grad_x = static_cast<T*>(p.grads.grad_x);
  T* grad_bias_full = static_cast<T*>(p.grads.grad_bias_full);
  T* grad_scale = static_cast<T*>(p.grads.grad_scale);
  T* grad_bias_sum = static_cast<T*>(p.grads.grad_bias_sum);
  const int64_t n = p.numel;
  const unsigned grid = plan.grid_x;
  if (sh.path == SbcPath::Flat) {
    const bool dense = bias != nullptr && p.layout.strides[3][0] == 1;
    with_flags(
        [&](auto vectorized, auto dense_bias) {
          sbc_backward_flat<T, vectorized ? kVec : 1, dense_bias>
              <<<grid, kThreads, 0, stream>>>(g, x, bias, args, n, grad_x, grad_bias_full, partials);
        },
        plan.vectorized, dense);
  } else {
    sbc_backward_strided<T>
        <<<grid, kThreads, 0, stream>>>(g, x, bias, args, p.layout, n, grad_x, grad_bias_full, partials);
  }
  if (partials != nullptr && grad_scale != nullptr) {
    sbc_reduce_partials<T><<<1, kThreads, 0, stream>>>(partials, grid, grad_scale);
  }
  if (partials != nullptr && sh.bias_grad == SbcBiasGrad::Single) {
    sbc_reduce_partials<T><<<1, kThreads, 0, stream>>>(partials + grid, grid, grad_bias_sum);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_sbc_forward(DType dtype, void* out, const void* x, const void* bias,
                               const StridedLayout<3>& layout, int64_t numel, const SbcScalars& scalars,
                               cudaStream_t stream) {
  return dispatch_dtype(dtype, [&]<typename T>() {
    return forward_t(static_cast<T*>(out), static_cast<const T*>(x), static_cast<const T*>(bias), layout,
                     numel, scalars, stream);
  });
}

SbcBackwardPlan plan_sbc_backward(const SbcBackwardProblem& problem, const DeviceInfo& dev) {
  switch (problem.dtype) {
    case DType::Float16: return plan_t<__half>(problem, dev);
    case DType::BFloat16: return plan_t<__nv_bfloat16>(problem, dev);
    case DType::Float32: return plan_t<float>(problem, dev);
    case DType::Float64: return plan_t<double>(problem, dev);
  }
  return {};
}

cudaError_t launch_sbc_backward(const SbcBackwardProblem& problem, const SbcBackwardPlan& plan,
                                void* partials, cudaStream_t stream) {
  return dispatch_dtype(problem.dtype,
                        [&]<typename T>() { return backward_t<T>(problem, plan, partials, stream); });
}

}  // namespace fusedops::cuda
