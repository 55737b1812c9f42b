// Describes broadcast, strided operands of an elementwise op as one coalesced
// StridedLayout, the form every fusedops elementwise kernel (CPU and CUDA) takes.
// ATen glue; the coalescing itself is cpp/common/layout.h.
#pragma once

#include <array>

#include <ATen/core/Tensor.h>

#include "cpp/common/layout.h"

namespace fusedops {

// Builds the layout of `out` (contiguous, allocated by the caller) and
// `inputs` broadcast to it. If more than kMaxDims dims remain, the inputs are
// replaced by contiguous copies, so the layout always fits.
template <int N>
StridedLayout<N> elementwise_layout(const at::Tensor& out, std::array<at::Tensor*, N - 1> inputs) {
  const int ndim = static_cast<int>(out.dim());
  std::array<c10::SmallVector<int64_t, kMaxDims>, N - 1> input_strides;
  std::array<const int64_t*, N> strides{out.strides().data()};
  for (int k = 1; k < N; ++k) {
    const at::Tensor& t = *inputs[k - 1];
    input_strides[k - 1].resize(ndim);
    broadcast_strides(static_cast<int>(t.dim()), t.sizes().data(), t.strides().data(), ndim,
                      input_strides[k - 1].data());
    strides[k] = input_strides[k - 1].data();
  }
  StridedLayout<N> layout;
  if (!coalesce<N>(ndim, out.sizes().data(), strides, layout)) {
    for (at::Tensor* t : inputs) *t = t->expand(out.sizes()).contiguous();
    return elementwise_layout<N>(out, inputs);
  }
  return layout;
}

}  // namespace fusedops
