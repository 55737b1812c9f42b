// Coalescing of broadcast, strided operands into one StridedLayout: torch-free,
// shared by the glue of every elementwise op.
#pragma once

#include <array>
#include <cstdint>

#include "cuda/common/kernel_types.h"

namespace fusedops {

// Strides of a tensor of `dims` sizes/strides viewed as broadcast to the
// `ndim` sizes of the output (right-aligned, 0 where it is broadcast).
inline void broadcast_strides(int dims, const int64_t* sizes, const int64_t* strides, int ndim,
                              int64_t* out) {
  const int lead = ndim - dims;
  for (int d = 0; d < ndim; ++d) out[d] = 0;
  for (int d = 0; d < dims; ++d) out[lead + d] = sizes[d] == 1 ? 0 : strides[d];
}

// The layout of N operands over `shape` (ndim sizes), strides[k] the k-th
// operand's strides over that shape: size-1 dims dropped, adjacent dims merged
// where every operand allows. False when more than kMaxDims dims remain.
template <int N>
bool coalesce(int ndim, const int64_t* shape, const std::array<const int64_t*, N>& strides,
              StridedLayout<N>& layout) {
  layout = StridedLayout<N>{};
  int dims = 0;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] == 1) continue;
    bool merge = dims > 0;
    for (int k = 0; k < N && merge; ++k) merge = layout.strides[k][dims - 1] == strides[k][d] * shape[d];
    if (merge) {
      layout.sizes[dims - 1] *= shape[d];
      for (int k = 0; k < N; ++k) layout.strides[k][dims - 1] = strides[k][d];
      continue;
    }
    if (dims == kMaxDims) return false;
    layout.sizes[dims] = shape[d];
    for (int k = 0; k < N; ++k) layout.strides[k][dims] = strides[k][d];
    ++dims;
  }
  if (dims == 0) {  // a single element (or a scalar): one run of length 1
    layout.sizes[0] = 1;
    for (int k = 0; k < N; ++k) layout.strides[k][0] = 1;
    dims = 1;
  }
  layout.ndim = dims;
  return true;
}

}  // namespace fusedops
