// fusedops.add(a, b) == torch.add(a, b): shared by the CPU, Meta and CUDA kernels.
#pragma once

#include <ATen/core/Tensor.h>

#include "cpp/checks.h"

namespace fusedops {

// Checks the arguments and returns the broadcast output shape; concrete for
// the kernels, symbolic for the Meta kernel.
template <typename Size>
c10::SmallVector<Size, kMaxDims> add_output_shape(const at::Tensor& a, const at::Tensor& b) {
  check_floating("add", "a", a);
  check_floating("add", "b", b);
  check_same_dtype_device("add", "a", a, "b", b);
  if constexpr (std::is_same_v<Size, c10::SymInt>) {
    return broadcast_shape("add", "a", a.sym_sizes(), "b", b.sym_sizes());
  } else {
    return broadcast_shape("add", "a", a.sizes(), "b", b.sizes());
  }
}

}  // namespace fusedops
