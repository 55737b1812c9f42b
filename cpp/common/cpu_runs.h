// CPU iteration over a StridedLayout in innermost runs, which the compiler
// vectorizes; torch-free, used inside each op's parallel loop.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/common/kernel_types.h"

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

}  // namespace fusedops::cpu
