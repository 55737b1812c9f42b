// The per-element math of linear's sm_90a GEMM epilogue, on the fp32 value
// acc + bias: the erf GELU in ~15 instructions (erff takes ~38 with the
// GELU around it, which the K = 1024 GEMMs could not hide:
// benchmarks/results/NOTES.md) and torch.clamp's NaN-propagating clamp.
#pragma once

#include <cmath>

#include "cuda/common/host_device.h"

namespace fusedops::cuda::sm90 {

// GELU(x) = x * Phi(x), Phi(x) = 1 - erfc(x / sqrt2) / 2 for x >= 0 and
// erfc(-x / sqrt2) / 2 below. erfc(z) = t * 2^(Q(t) - z^2 log2 e) with
// t = 1 / (1 + p z) and Q a degree-5 polynomial, the form of Numerical
// Recipes' erfcc with its coefficients fitted anew (relative minimax on
// 0 <= z <= 9.3, p = 0.49): erfc to 6.2e-6 relative, so Phi is relatively
// accurate in the negative tail too (where 1 + erf(x) cancels), and in fp32
// arithmetic GELU is within 1.1e-6 absolute and 1.5e-5 relative of float64
// everywhere: 100x below float16's half ulp, like erff's 4.5e-7 absolute.
// +inf gives +inf, -inf NaN (inf * 0, as F.gelu), NaN stays NaN.
struct FastGelu {
  static constexpr float kP = 0.34648232278140831f;          // p / sqrt2: t from |x| directly
  static constexpr float kHalfLog2e = 0.72134752044448170f;  // x^2 / 2 * log2 e = z^2 log2 e
  // Q's coefficients, highest first; the last has the 1/2 of Phi folded in (-1).
  static constexpr float kQ5 = 0.33359384f, kQ4 = -1.07041725f, kQ3 = 0.78412864f, kQ2 = 0.3317843f,
                         kQ1 = 1.47805188f, kQ0 = -2.85713883f;

  static FUSEDOPS_HD float rcp(float v) {
#ifdef __CUDA_ARCH__
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
#else
    return 1.0f / v;
#endif
  }

  static FUSEDOPS_HD float exp2(float v) {
#ifdef __CUDA_ARCH__
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
#else
    return std::exp2(v);
#endif
  }

  static FUSEDOPS_HD float apply(float x) {
    const float t = rcp(std::fabs(x) * kP + 1.0f);
    float q = kQ5;
    q = q * t + kQ4;
    q = q * t + kQ3;
    q = q * t + kQ2;
    q = q * t + kQ1;
    q = q * t + kQ0;
    const float half_erfc = t * exp2((-x * kHalfLog2e) * x + q);  // erfc(|x| / sqrt2) / 2
    return x * (x >= 0.0f ? 1.0f - half_erfc : half_erfc);
  }
};

// torch.clamp on fp32 with NaN propagating (fminf / fmaxf would drop a NaN
// input): max.NaN then min.NaN, one instruction each, so lo > hi gives hi.
// An absent bound is -inf / +inf; a NaN bound makes the output NaN here too
// (the glue also fills it, as on every path).
FUSEDOPS_HD float clamp_nan(float v, float lo, float hi) {
#ifdef __CUDA_ARCH__
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(v), "f"(lo));
  asm("min.NaN.f32 %0, %0, %1;" : "+f"(r) : "f"(hi));
  return r;
#else
  if (v != v || lo != lo || hi != hi) return v + lo + hi;
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
#endif
}

}  // namespace fusedops::cuda::sm90
