// Device-side building blocks shared by the fusedops CUDA kernels. Torch-free:
// kernels see pointers, sizes, strides and a stream, nothing else.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/kernel_types.h"

namespace fusedops::cuda {

// Arithmetic type: float for the half types (reduced-precision math
// accumulates in float32), the type itself otherwise.
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<__half> { using type = float; };
template <> struct OpMath<__nv_bfloat16> { using type = float; };
template <typename T> using opmath_t = typename OpMath<T>::type;

__device__ __forceinline__ float to_opmath(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_opmath(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_opmath(float v) { return v; }
__device__ __forceinline__ double to_opmath(double v) { return v; }

template <typename T> __device__ __forceinline__ T from_opmath(opmath_t<T> v);
template <> __device__ __forceinline__ __half from_opmath<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_opmath<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ float from_opmath<float>(float v) { return v; }
template <> __device__ __forceinline__ double from_opmath<double>(double v) { return v; }

// kVec elements moved as one aligned access (16 bytes for kVec = 16 / sizeof(T)).
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T v[kVec];
};

template <typename T>
constexpr int kVec16 = 16 / sizeof(T);

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Threads per block of the fusedops kernels.
constexpr int kThreads = 256;

// One thread per work item, up to the largest grid a launch takes.
inline unsigned work_grid(int64_t work_items) {
  const int64_t blocks = (work_items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 0x7fffffff));
}

// Element offsets of flat index i in each operand of a StridedLayout.
template <int N>
__device__ __forceinline__ void strided_offsets(const StridedLayout<N>& layout, int64_t i,
                                                int64_t (&offsets)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) offsets[k] = 0;
  for (int d = layout.ndim - 1; d >= 0; --d) {
    const int64_t index = i % layout.sizes[d];
    i /= layout.sizes[d];
#pragma unroll
    for (int k = 0; k < N; ++k) offsets[k] += index * layout.strides[k][d];
  }
}

// Runs body.template operator()<T>() with T the CUDA type of `dtype`.
template <typename Body>
cudaError_t dispatch_dtype(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::Float16: return body.template operator()<__half>();
    case DType::BFloat16: return body.template operator()<__nv_bfloat16>();
    case DType::Float32: return body.template operator()<float>();
    case DType::Float64: return body.template operator()<double>();
  }
  return cudaErrorInvalidValue;
}

}  // namespace fusedops::cuda
