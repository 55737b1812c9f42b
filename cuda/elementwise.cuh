// Binary elementwise kernels: out = f(a, b) over a StridedLayout<3>.
#pragma once

#include "cuda/common.cuh"

namespace fusedops::cuda {

// All operands dense: kVec-wide aligned accesses (16 bytes when the pointers
// allow, 1 element otherwise), kUnroll independent loads in flight per thread
// before the first use, 64-bit indices.
template <typename T, int kVec, int kUnroll, typename F>
__global__ void __launch_bounds__(kThreads)
binary_contiguous_kernel(T* __restrict__ out, const T* __restrict__ a, const T* __restrict__ b,
                         int64_t n, F f) {
  using V = Vec<T, kVec>;
  const V* va = reinterpret_cast<const V*>(a);
  const V* vb = reinterpret_cast<const V*>(b);
  V* vo = reinterpret_cast<V*>(out);
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < nvec; i += kUnroll * stride) {
    V x[kUnroll], y[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      x[u] = va[i + u * stride];
      y[u] = vb[i + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      V r;
#pragma unroll
      for (int e = 0; e < kVec; ++e) r.v[e] = from_opmath<T>(f(to_opmath(x[u].v[e]), to_opmath(y[u].v[e])));
      vo[i + u * stride] = r;
    }
  }
  for (; i < nvec; i += stride) {
    const V x = va[i], y = vb[i];
    V r;
#pragma unroll
    for (int e = 0; e < kVec; ++e) r.v[e] = from_opmath<T>(f(to_opmath(x.v[e]), to_opmath(y.v[e])));
    vo[i] = r;
  }
  // The last n % kVec elements, one per thread.
  const int64_t t = nvec * kVec + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
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
                          int64_t n, const DeviceInfo& dev, cudaStream_t stream, F f) {
  constexpr int kUnroll = 2;
  if (layout.contiguous()) {
    if (aligned16(out) && aligned16(a) && aligned16(b)) {
      constexpr int kVec = kVec16<T>;
      const int64_t items = std::max<int64_t>(n / kVec / kUnroll, n % kVec);
      binary_contiguous_kernel<T, kVec, kUnroll><<<grid_size(items, dev), kThreads, 0, stream>>>(out, a, b, n, f);
    } else {
      binary_contiguous_kernel<T, 1, kUnroll><<<grid_size(n / kUnroll + 1, dev), kThreads, 0, stream>>>(out, a, b, n, f);
    }
  } else {
    binary_strided_kernel<T><<<grid_size(n, dev), kThreads, 0, stream>>>(out, a, b, layout, n, f);
  }
  return cudaGetLastError();
}

}  // namespace fusedops::cuda
