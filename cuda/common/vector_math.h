// exp, erf and tanh in float for the CPU loops, branch-free so that the loops
// that call them vectorize (glibc's expf, erff and tanhf are calls no loop
// vectorizes through: the gated ops' CPU kernels ran at 0.03-0.6x torch's,
// whose own use Sleef). Host only; activations.h calls them for float (and so
// for bfloat16 and float16, whose math is float) and std's otherwise.
//
// Each is a polynomial of ours (least squares on Chebyshev nodes against
// float64, coefficients rounded to float). Against float64 over all 2^32
// floats (tools/check_vector_math.cpp): exp within 1.3 ulp, erf within 2.8 ulp
// and tanh within 1.4 ulp; inf and NaN come out as std's do.
// tests/test_gated.py holds the ops that use them to torch's own float32
// accuracy.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#include "cuda/common/host_device.h"

namespace fusedops::vector_math {

// p(t) = c[0] + c[1] t + ... by Horner's rule.
template <int N>
FUSEDOPS_HD float poly(const float (&c)[N], float t) {
  float r = c[N - 1];
  for (int i = N - 2; i >= 0; --i) r = r * t + c[i];
  return r;
}

// 2^k for k in [-126, 127], by the exponent field.
FUSEDOPS_HD float pow2(int32_t k) { return std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23); }

// e^x = 2^n e^r, n = round(x / ln 2), |r| <= ln(2) / 2, e^r = 1 + r + r^2 p(r).
FUSEDOPS_HD float exp(float x) {
  constexpr float kP[] = {
      0.5f, 0.16666667163f, 0.041666466743f, 0.0083333728835f, 0.0013933600858f, 0.00019849647651f};
  // Clamped so that n fits the two steps of 2^n below (NaN goes to the low end: its
  // result is replaced at the end). e^x is inf above kMaxFinite (the largest float
  // whose e^x rounds to a finite float) and rounds to 0 below -103.98.
  constexpr float kMaxFinite = 88.72283172607421875f;
  float c = x > -104.0f ? x : -104.0f;
  c = c < 88.8f ? c : 88.8f;
  // Round to nearest by the 1.5 * 2^23 shift: no rounding instruction (SSE2 has none).
  constexpr float kShift = 12582912.0f;
  const float n = (c * 1.44269504089f + kShift) - kShift;
  const float r = (c - n * 0.693359375f) - n * -2.12194440e-4f;  // ln 2 in two parts
  const float er = 1.0f + r + r * r * poly(kP, r);
  // 2^n in two factors, each a normal float: n goes down to -150 (denormal results).
  const int32_t k = static_cast<int32_t>(n), k1 = k >> 1;
  const float y = er * pow2(k1) * pow2(k - k1);
  return x != x ? x : (x > kMaxFinite ? std::numeric_limits<float>::infinity() : y);
}

// erf(x) = x p(x^2) for |x| < 1; 1 - q(|x| - 2.46) up to 3.92, where it rounds
// to 1: there erfc = q, a polynomial of its own, within ~1.5 ulp of 1 (1 - erfc
// keeps only erfc's absolute error). e^(-x^2) times a polynomial, as before,
// cost an exp: float32 GELU ran 1.45x as long.
FUSEDOPS_HD float erf(float x) {
  constexpr float kSmall[] = {1.1283792257f,    -0.37612628937f,    0.11283612251f,    -0.026854809374f,
                              0.0051900534891f, -0.00080243538832f, 0.000078982098785f};
  constexpr float kLarge[] = {0.00050332688261f,  -0.0026562369894f, 0.0065357484855f,   -0.009832456708f,
                              0.009904964827f,    -0.0067995456047f, 0.002963119885f,    -0.00045933123329f,
                              -0.00039067873149f, 0.00029961674591f, -5.1896404329e-05f, -2.4706278055e-05f,
                              9.1669207904e-06f,  -9.48172314e-08f};
  const float a = x < 0.0f ? -x : x;
  const float small = a * poly(kSmall, a * a);
  const float large = 1.0f - poly(kLarge, a - 2.46f);
  const float r = a < 1.0f ? small : (a < 3.92f ? large : 1.0f);
  return x != x ? x : (x < 0.0f ? -r : r);
}

// tanh(x) = x p(x^2) for |x| < 0.625, else 1 - 2 / (e^(2|x|) + 1).
FUSEDOPS_HD float tanh(float x) {
  constexpr float kSmall[] = {1.0f,
                              -0.33333331347f,
                              0.13333201408f,
                              -0.053946506232f,
                              0.021699897945f,
                              -0.0081761647016f,
                              0.0021422361024f};
  const float a = x < 0.0f ? -x : x;
  const float small = a * poly(kSmall, a * a);
  const float large = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  const float r = a < 0.625f ? small : large;
  return x != x ? x : (x < 0.0f ? -r : r);
}

}  // namespace fusedops::vector_math
