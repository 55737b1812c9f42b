// CPU kernels on the stable ABI: the element types behind each floating
// dtype, the op-math type they compute in, torch's thread pool.
#pragma once

#include <cstdint>
#include <type_traits>

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include "cpp/common/cpu_runs.h"
#include "cpp/common/stable.h"

// A CPU loop compiled three times on x86-64, for AVX-512 (x86-64-v4), for
// AVX2 (x86-64-v3) and for the wheel's baseline (SSE2); the loader picks one
// by the CPU (GCC's target_clones). What it calls must be inlined into it
// (always_inline) to be compiled for the wider ISAs too. All three round
// alike (no FMA contraction: CMakeLists.txt).
#if defined(__x86_64__) && defined(__GNUC__)
#define FUSEDOPS_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FUSEDOPS_CPU_CLONES
#endif

namespace fusedops::cpu {

// Reduced-precision math accumulates in float32.
template <typename T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<c10::Half> {
  using type = float;
};
template <>
struct OpMath<c10::BFloat16> {
  using type = float;
};
template <typename T>
using opmath_t = typename OpMath<T>::type;

// float16 <-> float32 over n elements: F16C's vector conversions where the CPU
// has them (IEEE round to nearest even: c10's bits for every number), c10's
// portable ones elsewhere (a branchy scalar routine the compiler cannot
// vectorize). Out of line: a clone cannot inline F16C's intrinsics, and one
// call a row or block costs nothing (cpu_half.cpp).
void half_to_float(const c10::Half* src, float* dst, int64_t n);
void float_to_half(const float* src, c10::Half* dst, int64_t n);

// dst[i] = A(src[i]) for i < n: float16 by F16C, the other types in a loop
// the caller's clone vectorizes.
template <typename A, typename T>
[[gnu::always_inline]] inline void to_opmath(const T* __restrict__ src, A* __restrict__ dst, int64_t n) {
  if constexpr (std::is_same_v<T, c10::Half>) {
    half_to_float(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = A(src[i]);
  }
}

// n elements of T in op math: src itself where T is A, else converted into buf.
template <typename A, typename T>
[[gnu::always_inline]] inline const A* as_opmath(const T* src, int64_t n, A* buf) {
  if constexpr (std::is_same_v<T, A>) {
    return src;
  } else {
    to_opmath(src, buf, n);
    return buf;
  }
}

// Reads n elements of T as op math, reader(i) = A(src[i]): float16's
// converted into buf first (F16C), the other types where read (inside the
// caller's loop, which vectorizes them).
template <typename A, typename T>
[[gnu::always_inline]] inline auto opmath_reader(const T* src, int64_t n, A* buf) {
  if constexpr (std::is_same_v<T, c10::Half>) {
    half_to_float(src, buf, n);
    return [buf](int64_t i) { return buf[i]; };
  } else {
    return [src](int64_t i) { return A(src[i]); };
  }
}

// dst[i] = T(src[i]) for i < n.
template <typename T, typename A>
[[gnu::always_inline]] inline void from_opmath(const A* __restrict__ src, T* __restrict__ dst, int64_t n) {
  if constexpr (std::is_same_v<T, c10::Half>) {
    float_to_half(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
  }
}

// out[i] = T(value(i)) for i < n: float16's through buf (n op-math elements)
// converted by F16C, the other types directly.
template <typename T, typename A, typename F>
[[gnu::always_inline]] inline void store_opmath(T* out, int64_t n, A* buf, const F& value) {
  if constexpr (std::is_same_v<T, c10::Half>) {
    for (int64_t i = 0; i < n; ++i) buf[i] = value(i);
    float_to_half(buf, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(value(i));
  }
}

// Runs body.template operator()<T>() with T the element type of `dtype`.
template <typename Body>
decltype(auto) dispatch_floating(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::Float16: return body.template operator()<c10::Half>();
    case DType::BFloat16: return body.template operator()<c10::BFloat16>();
    case DType::Float32: return body.template operator()<float>();
    case DType::Float64: break;
  }
  return body.template operator()<double>();
}

// f(begin, end) over [0, n) in chunks of at least `grain`, on torch's
// intra-op threads (torch.set_num_threads applies). f must not throw.
template <typename F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  torch::stable::parallel_for(0, n, grain, f);
}

}  // namespace fusedops::cpu
