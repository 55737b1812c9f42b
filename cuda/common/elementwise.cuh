// Binary elementwise kernels: out = f(a, b) over a StridedLayout<3>.
#pragma once

#include "cuda/common/common.cuh"

namespace fusedops::cuda {

// All operands dense: kVec-wide aligned accesses (16 bytes when the pointers
// allow, 1 element otherwise), 64-bit indices. One vector per thread and as
// many blocks as the work needs: on the H200 this moved 4.36 TB/s against
// 4.12-4.16 TB/s for a device-sized persistent grid with 1-4 vectors in flight
// per thread (2^28 float32, benchmarks/results/NOTES.md). The grid-stride loop
// only matters past 2^31 - 1 blocks.
template <typename T, int kVec, typename F>
__global__ void __launch_bounds__(kThreads)
binary_contiguous_kernel(T* __restrict__ out, const T* __restrict__ a, const T* __restrict__ b,
                         int64_t n, F f) {
  using V = Vec<T, kVec>;
  const V* va = reinterpret_cast<const V*>(a);
  const V* vb = reinterpret_cast<const V*>(b);
  V* vo = reinterpret_cast<V*>(out);
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < nvec; i += stride) {
    const V x = va[i], y = vb[i];
    V r;
#pragma unroll
    for (int e = 0; e < kVec; ++e) r.v[e] = from_opmath<T>(f(to_opmath(x.v[e]), to_opmath(y.v[e])));
    vo[i] = r;
  }
  // The last n % kVec elements, one per thread.
  const int64_t t = nvec * kVec + first;
  if (t < n) out[t] = from_opmath<T>(f(to_opmath(a[t]), to_opmath(b[t])));
}

// Any strides and broadcasting.
template <typename T, typename F>
__global__ void __launch_bounds__(kThreads)
binary_strided_kernel(T* out, const T* a, const T* b, StridedLayout<3> layout, int64_t n, F f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t off[3];
    strided_offsets(layout, i, off);
    out[off[0]] = from_opmath<T>(f(to_opmath(a[off[1]]), to_opmath(b[off[2]])));
  }
}

template <typename T, typename F>
cudaError_t launch_binary(T* out, const T* a, const T* b, const StridedLayout<3>& layout,
                          int64_t n, cudaStream_t stream, F f) {
  if (!layout.contiguous()) {
    binary_strided_kernel<T><<<work_grid(n), kThreads, 0, stream>>>(out, a, b, layout, n, f);
  } else if (aligned16(out) && aligned16(a) && aligned16(b)) {
    constexpr int kVec = kVec16<T>;
    const int64_t threads = std::max<int64_t>(n / kVec, n % kVec);
    binary_contiguous_kernel<T, kVec><<<work_grid(threads), kThreads, 0, stream>>>(out, a, b, n, f);
  } else {
    binary_contiguous_kernel<T, 1><<<work_grid(n), kThreads, 0, stream>>>(out, a, b, n, f);
  }
  return cudaGetLastError();
}

}  // namespace fusedops::cuda
