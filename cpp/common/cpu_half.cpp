// float16 <-> float32 conversions of the CPU kernels (cpu.h): F16C where the
// CPU has it, chosen per call by libgcc's CPU flags (read once at load).
#include "cpp/common/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FUSEDOPS_F16C 1
#endif

namespace fusedops::cpu {

#ifdef FUSEDOPS_F16C
namespace {

bool has_f16c() { return __builtin_cpu_supports("f16c"); }

__attribute__((target("avx,f16c"))) void half_to_float_f16c(const c10::Half* src, float* dst, int64_t n) {
  const auto* bits = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(bits[i]);
}

__attribute__((target("avx,f16c"))) void float_to_half_f16c(const float* src, c10::Half* dst, int64_t n) {
  auto* bits = reinterpret_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bits + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) bits[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

}  // namespace
#endif

void half_to_float(const c10::Half* src, float* dst, int64_t n) {
#ifdef FUSEDOPS_F16C
  if (has_f16c()) return half_to_float_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
}

void float_to_half(const float* src, c10::Half* dst, int64_t n) {
#ifdef FUSEDOPS_F16C
  if (has_f16c()) return float_to_half_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = c10::Half(src[i]);
}

}  // namespace fusedops::cpu
