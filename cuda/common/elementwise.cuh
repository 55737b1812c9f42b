// Elementwise kernels: kOut outputs computed element by element from kIn
// inputs of one type, over a StridedLayout<kOut + kIn> (the outputs first).
// `f` sees one element of every operand in the op-math type:
//   template <typename A> void operator()(const A (&in)[kIn], A (&out)[kOut]) const
// (cpp/common/cpu_elementwise.h runs the same functors on the CPU).
#pragma once

#include "cuda/common/common.cuh"

namespace fusedops::cuda {

template <typename T, int kOut, int kIn>
struct Operands {
  T* out[kOut];
  const T* in[kIn];

  bool aligned16() const {
    for (const T* p : out) {
      if (!cuda::aligned16(p)) return false;
    }
    for (const T* p : in) {
      if (!cuda::aligned16(p)) return false;
    }
    return true;
  }
};

// f on W consecutive elements of every operand, operand k's first at element
// offset off[k]: W-wide accesses (aligned by the caller), loads before stores.
template <int W, typename T, int kOut, int kIn, typename F>
__device__ __forceinline__ void apply_at(const Operands<T, kOut, kIn>& p, const int64_t (&off)[kOut + kIn],
                                         const F& f) {
  using A = opmath_t<T>;
  using V = Vec<T, W>;
  V x[kIn], y[kOut];
#pragma unroll
  for (int k = 0; k < kIn; ++k) x[k] = *reinterpret_cast<const V*>(p.in[k] + off[kOut + k]);
#pragma unroll
  for (int e = 0; e < W; ++e) {
    A a[kIn], b[kOut];
#pragma unroll
    for (int k = 0; k < kIn; ++k) a[k] = to_opmath(x[k].v[e]);
    f(a, b);
#pragma unroll
    for (int k = 0; k < kOut; ++k) y[k].v[e] = from_opmath<T>(b[k]);
  }
#pragma unroll
  for (int k = 0; k < kOut; ++k) *reinterpret_cast<V*>(p.out[k] + off[k]) = y[k];
}

template <int N>
__device__ __forceinline__ void same_offsets(int64_t i, int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = i;
}

// All operands dense: kVec-wide aligned accesses (16 bytes when the pointers
// allow, 1 element otherwise), 64-bit indices. One vector per thread and as
// many blocks as the work needs, which beat a device-sized persistent grid
// (benchmarks/results/NOTES.md, "add, grid shape"). The grid-stride loop only
// matters past 2^31 - 1 blocks.
template <typename T, int kVec, int kOut, int kIn, typename F>
__global__ void __launch_bounds__(kThreads)
    elementwise_dense_kernel(Operands<T, kOut, kIn> p, int64_t n, F f) {
  constexpr int N = kOut + kIn;
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t off[N];
  for (int64_t i = first; i < nvec; i += stride) {
    same_offsets(i * kVec, off);
    apply_at<kVec>(p, off, f);
  }
  // The last n % kVec elements, one per thread.
  const int64_t t = nvec * kVec + first;
  if (t < n) {
    same_offsets(t, off);
    apply_at<1>(p, off, f);
  }
}

// [rows, cols], every operand dense along cols with a row stride of its own
// (halves of one tensor, padded rows, a broadcast row): kVec-wide accesses
// along the row. Thread (x, y) of block (i, j) takes vector column
// i * blockDim.x + x of rows j * blockDim.y + y, then every gridDim.y *
// blockDim.y rows on.
template <typename T, int kVec, int kOut, int kIn, typename F>
__global__ void __launch_bounds__(kThreads)
    elementwise_rows_kernel(Operands<T, kOut, kIn> p, StridedLayout<kOut + kIn> layout, F f) {
  constexpr int N = kOut + kIn;
  const int64_t rows = layout.sizes[0], vec_cols = layout.sizes[1] / kVec;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= vec_cols) return;
  const int64_t row_step = int64_t(gridDim.y) * blockDim.y;
  for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < rows; r += row_step) {
    int64_t off[N];
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = r * layout.strides[k][0] + c * kVec;
    apply_at<kVec>(p, off, f);
  }
}

// Any strides and broadcasting, one element per thread.
template <typename T, int kOut, int kIn, typename F>
__global__ void __launch_bounds__(kThreads)
    elementwise_strided_kernel(Operands<T, kOut, kIn> p, StridedLayout<kOut + kIn> layout, int64_t n, F f) {
  constexpr int N = kOut + kIn;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[N];
    strided_offsets(layout, i, off);
    apply_at<1>(p, off, f);
  }
}

// Whether a layout is [rows, cols] with every operand dense along cols.
template <int N>
bool rows_layout(const StridedLayout<N>& layout) {
  if (layout.ndim != 2) return false;
  for (int k = 0; k < N; ++k) {
    if (layout.strides[k][1] != 1) return false;
  }
  return true;
}

// Whether the rows kernel may take kVec-wide accesses: whole vectors per row,
// every row starting 16-byte aligned.
template <int kVec, typename T, int kOut, int kIn>
bool rows_vectorize(const Operands<T, kOut, kIn>& p, const StridedLayout<kOut + kIn>& layout) {
  if (layout.sizes[1] % kVec != 0 || !p.aligned16()) return false;
  for (int k = 0; k < kOut + kIn; ++k) {
    if (layout.strides[k][0] % kVec != 0) return false;
  }
  return true;
}

// The rows kernel with kVec-wide accesses: a block of 256 threads, as many
// along the row as its vector columns need (a power of two), the rest across
// rows; up to 65535 row bands, each thread looping over the rest. Rows of at
// most 2^31 - 1 blocks of columns (launch_elementwise sends longer ones to the
// strided kernel).
template <int kVec, typename T, int kOut, int kIn, typename F>
cudaError_t launch_rows(const Operands<T, kOut, kIn>& p, const StridedLayout<kOut + kIn>& layout,
                        cudaStream_t stream, const F& f) {
  const int64_t rows = layout.sizes[0], vec_cols = layout.sizes[1] / kVec;
  unsigned bx = 1;
  while (bx < kThreads && bx < vec_cols) bx *= 2;
  const unsigned by = kThreads / bx;
  const int64_t col_blocks = (vec_cols + bx - 1) / bx, row_bands = (rows + by - 1) / by;
  const dim3 grid(unsigned(col_blocks), unsigned(std::min<int64_t>(row_bands, 65535)));
  elementwise_rows_kernel<T, kVec><<<grid, dim3(bx, by), 0, stream>>>(p, layout, f);
  return cudaGetLastError();
}

// out_k = f(in) over `layout` (coalesced, n > 0 elements) on `stream`.
template <typename T, int kOut, int kIn, typename F>
cudaError_t launch_elementwise(const Operands<T, kOut, kIn>& p, const StridedLayout<kOut + kIn>& layout,
                               int64_t n, cudaStream_t stream, const F& f) {
  constexpr int kVec = kVec16<T>;
  if (layout.contiguous()) {
    if (p.aligned16()) {
      const int64_t threads = std::max<int64_t>(n / kVec, n % kVec);
      elementwise_dense_kernel<T, kVec><<<work_grid(threads), kThreads, 0, stream>>>(p, n, f);
    } else {
      elementwise_dense_kernel<T, 1><<<work_grid(n), kThreads, 0, stream>>>(p, n, f);
    }
  } else if (rows_layout(layout) && layout.sizes[1] / kThreads < 0x7fffffff) {
    return rows_vectorize<kVec>(p, layout) ? launch_rows<kVec>(p, layout, stream, f)
                                           : launch_rows<1>(p, layout, stream, f);
  } else {
    elementwise_strided_kernel<T><<<work_grid(n), kThreads, 0, stream>>>(p, layout, n, f);
  }
  return cudaGetLastError();
}

}  // namespace fusedops::cuda
