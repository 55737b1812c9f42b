// Describes broadcast, strided operands of an elementwise op as one coalesced
// StridedLayout, the form every fusedops elementwise kernel (CPU and CUDA) takes.
#pragma once

#include <array>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "cpp/kernel_types.h"

namespace fusedops {

// Strides of `t` viewed as broadcast to `shape` (right-aligned, 0 where t is
// broadcast), without creating a view.
inline c10::SmallVector<int64_t, kMaxDims> broadcast_strides(const at::Tensor& t,
                                                              at::IntArrayRef shape) {
  c10::SmallVector<int64_t, kMaxDims> strides(shape.size(), 0);
  const size_t lead = shape.size() - t.dim();
  for (size_t d = 0; d < static_cast<size_t>(t.dim()); ++d) {
    strides[lead + d] = t.size(d) == 1 ? 0 : t.stride(d);
  }
  return strides;
}

// Builds the layout of `out` (contiguous, allocated by the caller) and
// `inputs` broadcast to it: size-1 dims dropped, adjacent dims merged where
// every operand allows. If more than kMaxDims dims remain, the inputs are
// replaced by contiguous copies, so the layout always fits.
template <int N>
StridedLayout<N> elementwise_layout(const at::Tensor& out, std::array<at::Tensor*, N - 1> inputs) {
  const at::IntArrayRef shape = out.sizes();
  std::array<c10::SmallVector<int64_t, kMaxDims>, N> strides;
  strides[0] = c10::SmallVector<int64_t, kMaxDims>(out.strides().begin(), out.strides().end());
  for (int k = 1; k < N; ++k) strides[k] = broadcast_strides(*inputs[k - 1], shape);

  StridedLayout<N> layout;
  int ndim = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = ndim > 0;
    for (int k = 0; k < N && merge; ++k) {
      merge = layout.strides[k][ndim - 1] == strides[k][d] * shape[d];
    }
    if (merge) {
      layout.sizes[ndim - 1] *= shape[d];
      for (int k = 0; k < N; ++k) layout.strides[k][ndim - 1] = strides[k][d];
      continue;
    }
    if (ndim == kMaxDims) {
      for (at::Tensor* t : inputs) *t = t->expand(shape).contiguous();
      return elementwise_layout<N>(out, inputs);
    }
    layout.sizes[ndim] = shape[d];
    for (int k = 0; k < N; ++k) layout.strides[k][ndim] = strides[k][d];
    ++ndim;
  }
  if (ndim == 0) {  // a single element (or a scalar): one run of length 1
    layout.sizes[0] = 1;
    for (int k = 0; k < N; ++k) layout.strides[k][0] = 1;
    ndim = 1;
  }
  layout.ndim = ndim;
  return layout;
}

}  // namespace fusedops
