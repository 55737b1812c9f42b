// cuda/common/vector_math.h's exp, erf and tanh against float64 over every
// float, the error in units in the last place of the correctly rounded result
// (worst case and where). About two minutes a function:
//
//   g++ -std=c++20 -O2 -I. tools/check_vector_math.cpp -o /tmp/check_vector_math
//   /tmp/check_vector_math
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "cuda/common/vector_math.h"

namespace {

// |got - ref| in ulps of the float nearest ref (denormal ulps below the normal
// range); 0 where both are the same inf or NaN, inf where only one is.
double ulp_error(float got, double ref) {
  const float nearest = static_cast<float>(ref);
  if (std::isnan(ref) || std::isinf(nearest)) {
    const bool same = std::isnan(ref) ? std::isnan(got) : got == nearest;
    return same ? 0.0 : std::numeric_limits<double>::infinity();
  }
  int exponent = 0;
  std::frexp(ref, &exponent);
  const double ulp = std::ldexp(1.0, std::max(exponent, -125) - 24);
  return std::fabs(static_cast<double>(got) - ref) / ulp;
}

template <typename Ours, typename Exact>
void check(const char* name, Ours ours, Exact exact) {
  double worst = 0.0;
  float worst_x = 0.0f;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); ++bits) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    const double error = ulp_error(ours(x), exact(static_cast<double>(x)));
    if (error > worst) worst = error, worst_x = x;
  }
  std::printf("%-4s worst %.3f ulp at x = %a\n", name, worst, worst_x);
}

}  // namespace

int main() {
  namespace vm = fusedops::vector_math;
  check("exp", vm::exp, [](double x) { return std::exp(x); });
  check("erf", vm::erf, [](double x) { return std::erf(x); });
  check("tanh", vm::tanh, [](double x) { return std::tanh(x); });
}
