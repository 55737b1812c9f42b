// CPU kernels on the stable ABI: the element types behind each floating
// dtype, the op-math type they compute in, torch's thread pool.
#pragma once

#include <cstdint>

#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include "cpp/common/cpu_runs.h"
#include "cpp/common/stable.h"

// A CPU loop compiled twice on x86-64, for AVX2 and for the wheel's baseline
// (SSE2); the loader picks one by the CPU (GCC's target_clones). What it calls
// must be inlined into it (always_inline) to be compiled for AVX2 too.
#if defined(__x86_64__) && defined(__GNUC__)
#define FUSEDOPS_CPU_CLONES __attribute__((target_clones("avx2", "default")))
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
