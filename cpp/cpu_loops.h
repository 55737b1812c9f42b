// CPU iteration over a StridedLayout: parallel over the flat index range,
// then tight loops over innermost runs that the compiler vectorizes.
#pragma once

// The C++ sources are compiled with OpenMP (CMakeLists.txt), the CUDA ones
// are not: at::parallel_for's inline definition must not differ between them.
#ifdef __CUDACC__
#error "cpp/cpu_loops.h is for the C++ (OpenMP) sources, not CUDA ones"
#endif

#include <algorithm>

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include "cpp/kernel_types.h"

namespace fusedops::cpu {

// Elements per parallel task: large enough to amortize scheduling.
constexpr int64_t kGrain = 32768;

// Calls fn(len, offsets) for each run of the innermost dimension inside the
// flat range [begin, end); offsets[k] is operand k's element offset of the
// run's first element, and the run advances by layout.strides[k][ndim - 1].
template <int N, typename F>
void for_each_run(const StridedLayout<N>& layout, int64_t begin, int64_t end, F&& fn) {
  const int inner = layout.ndim - 1;
  int64_t index[kMaxDims];
  int64_t offsets[N] = {};
  int64_t rest = begin;
  for (int d = inner; d >= 0; --d) {
    index[d] = rest % layout.sizes[d];
    rest /= layout.sizes[d];
    for (int k = 0; k < N; ++k) offsets[k] += index[d] * layout.strides[k][d];
  }
  for (int64_t pos = begin; pos < end;) {
    const int64_t len = std::min(layout.sizes[inner] - index[inner], end - pos);
    fn(len, static_cast<const int64_t*>(offsets));
    pos += len;
    index[inner] += len;
    for (int k = 0; k < N; ++k) offsets[k] += len * layout.strides[k][inner];
    for (int d = inner; d > 0 && index[d] == layout.sizes[d]; --d) {
      for (int k = 0; k < N; ++k) {
        offsets[k] += layout.strides[k][d - 1] - index[d] * layout.strides[k][d];
      }
      index[d] = 0;
      ++index[d - 1];
    }
  }
}

// out = f(a, b) elementwise in the op-math type (float for half types), in
// parallel. The common cases (all dense; b constant along the run) get loops
// without strides so they vectorize.
template <typename T, typename F>
void binary_kernel(const StridedLayout<3>& layout, int64_t numel, T* out, const T* a, const T* b,
                   F f) {
  using acc_t = at::opmath_type<T>;
  const int inner = layout.ndim - 1;
  const int64_t so = layout.strides[0][inner];
  const int64_t sa = layout.strides[1][inner];
  const int64_t sb = layout.strides[2][inner];
  at::parallel_for(0, numel, kGrain, [&](int64_t begin, int64_t end) {
    for_each_run(layout, begin, end, [&](int64_t len, const int64_t* off) {
      T* __restrict__ o = out + off[0];
      const T* __restrict__ x = a + off[1];
      const T* __restrict__ y = b + off[2];
      if (so == 1 && sa == 1 && sb == 1) {
        for (int64_t i = 0; i < len; ++i) o[i] = static_cast<T>(f(acc_t(x[i]), acc_t(y[i])));
      } else if (so == 1 && sa == 1 && sb == 0) {
        const acc_t yv = acc_t(y[0]);
        for (int64_t i = 0; i < len; ++i) o[i] = static_cast<T>(f(acc_t(x[i]), yv));
      } else {
        for (int64_t i = 0; i < len; ++i) {
          o[i * so] = static_cast<T>(f(acc_t(x[i * sa]), acc_t(y[i * sb])));
        }
      }
    });
  });
}

}  // namespace fusedops::cpu
