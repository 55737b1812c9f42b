// Elementwise kernels of fusedops.linear: the epilogue the GEMM could not do
// (activation and/or clamp, one pass, in place or z -> out) and the gradient
// at the pre-activation (one pass over grad and the saved tensor).
#include "cuda/common/common.cuh"
#include "cuda/linear/linear.h"

namespace fusedops::cuda {
namespace {

template <typename A>
struct Bounds {
  bool has_min, has_max;
  A lo, hi;
};

template <typename T, Activation kAct>
__device__ __forceinline__ T epilogue_value(T z, const Bounds<opmath_t<T>>& b) {
  using A = opmath_t<T>;
  // Rounded to T after the activation, as F.linear -> act -> clamp does.
  const A y = to_opmath(from_opmath<T>(activate(kAct, to_opmath(z))));
  return from_opmath<T>(clamp_value(y, b.has_min, b.lo, b.has_max, b.hi));
}

template <typename T, Activation kAct, bool kClamps>
__device__ __forceinline__ T grad_value(T g, T s, const Bounds<opmath_t<T>>& b) {
  using A = opmath_t<T>;
  const A v = to_opmath(s);
  A d = activate_grad(kAct, v);
  if constexpr (kClamps) {
    const A y = to_opmath(from_opmath<T>(activate(kAct, v)));
    d = clamp_passes(y, b.has_min, b.lo, b.has_max, b.hi) ? d : A(0);
  }
  return from_opmath<T>(to_opmath(g) * d);
}

// out = epilogue(z) over n elements, kVec per access (z and out may alias, so
// no __restrict__).
template <typename T, int kVec, Activation kAct>
__global__ void __launch_bounds__(kThreads)
epilogue_kernel(const T* z, T* out, int64_t n, Bounds<opmath_t<T>> b) {
  using V = Vec<T, kVec>;
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < nvec; i += stride) {
    V v = reinterpret_cast<const V*>(z)[i];
#pragma unroll
    for (int e = 0; e < kVec; ++e) v.v[e] = epilogue_value<T, kAct>(v.v[e], b);
    reinterpret_cast<V*>(out)[i] = v;
  }
  const int64_t t = nvec * kVec + first;
  if (t < n) out[t] = epilogue_value<T, kAct>(z[t], b);
}

// grad_z from a dense grad: kVec per access.
template <typename T, int kVec, Activation kAct, bool kClamps>
__global__ void __launch_bounds__(kThreads)
grad_z_dense_kernel(const T* __restrict__ grad, const T* __restrict__ saved, T* __restrict__ grad_z, int64_t n,
                    Bounds<opmath_t<T>> b) {
  using V = Vec<T, kVec>;
  const int64_t nvec = n / kVec;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < nvec; i += stride) {
    const V g = reinterpret_cast<const V*>(grad)[i];
    const V s = reinterpret_cast<const V*>(saved)[i];
    V r;
#pragma unroll
    for (int e = 0; e < kVec; ++e) r.v[e] = grad_value<T, kAct, kClamps>(g.v[e], s.v[e], b);
    reinterpret_cast<V*>(grad_z)[i] = r;
  }
  const int64_t t = nvec * kVec + first;
  if (t < n) grad_z[t] = grad_value<T, kAct, kClamps>(grad[t], saved[t], b);
}

// grad_z from a grad of any 2-D strides (expanded, transposed, ...).
template <typename T, Activation kAct, bool kClamps>
__global__ void __launch_bounds__(kThreads)
grad_z_strided_kernel(const T* __restrict__ grad, int64_t gs0, int64_t gs1, const T* __restrict__ saved,
                      T* __restrict__ grad_z, int64_t rows, int64_t cols, Bounds<opmath_t<T>> b) {
  const int64_t n = rows * cols;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / cols, c = i - r * cols;
    grad_z[i] = grad_value<T, kAct, kClamps>(grad[r * gs0 + c * gs1], saved[i], b);
  }
}

template <typename Body>
cudaError_t dispatch_activation(Activation act, Body&& body) {
  switch (act) {
    case Activation::None: return body.template operator()<Activation::None>();
    case Activation::Relu: return body.template operator()<Activation::Relu>();
    case Activation::Gelu: return body.template operator()<Activation::Gelu>();
    case Activation::GeluTanh: return body.template operator()<Activation::GeluTanh>();
  }
  return cudaErrorInvalidValue;
}

template <typename T>
Bounds<opmath_t<T>> bounds_of(const LinearEpilogue& e) {
  using A = opmath_t<T>;
  return {e.has_min, e.has_max, static_cast<A>(e.min), static_cast<A>(e.max)};
}

}  // namespace

cudaError_t launch_linear_epilogue(DType dtype, const void* z, void* out, int64_t n, const LinearEpilogue& e,
                                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&]<typename T>() {
    return dispatch_activation(e.act, [&]<Activation kAct>() {
      const T* zt = static_cast<const T*>(z);
      T* ot = static_cast<T*>(out);
      const auto b = bounds_of<T>(e);
      if (aligned16(zt) && aligned16(ot)) {
        constexpr int kVec = kVec16<T>;
        const int64_t items = std::max<int64_t>(n / kVec, n % kVec);
        epilogue_kernel<T, kVec, kAct><<<work_grid(items), kThreads, 0, stream>>>(zt, ot, n, b);
      } else {
        epilogue_kernel<T, 1, kAct><<<work_grid(n), kThreads, 0, stream>>>(zt, ot, n, b);
      }
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_linear_grad_z(DType dtype, const void* grad, int64_t gs0, int64_t gs1, const void* saved,
                                 void* grad_z, int64_t rows, int64_t cols, const LinearEpilogue& e,
                                 cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&]<typename T>() {
    return dispatch_activation(e.act, [&]<Activation kAct>() {
      auto launch = [&]<bool kClamps>() {
        const T* g = static_cast<const T*>(grad);
        const T* s = static_cast<const T*>(saved);
        T* gz = static_cast<T*>(grad_z);
        const auto b = bounds_of<T>(e);
        const bool dense = (gs1 == 1 || cols == 1) && (gs0 == cols || rows == 1);
        if (dense && aligned16(g) && aligned16(s) && aligned16(gz)) {
          constexpr int kVec = kVec16<T>;
          const int64_t items = std::max<int64_t>(n / kVec, n % kVec);
          grad_z_dense_kernel<T, kVec, kAct, kClamps><<<work_grid(items), kThreads, 0, stream>>>(g, s, gz, n, b);
        } else if (dense) {
          grad_z_dense_kernel<T, 1, kAct, kClamps><<<work_grid(n), kThreads, 0, stream>>>(g, s, gz, n, b);
        } else {
          grad_z_strided_kernel<T, kAct, kClamps>
              <<<work_grid(n), kThreads, 0, stream>>>(g, gs0, gs1, s, gz, rows, cols, b);
        }
        return cudaGetLastError();
      };
      return e.clamps() ? launch.template operator()<true>() : launch.template operator()<false>();
    });
  });
}

}  // namespace fusedops::cuda
