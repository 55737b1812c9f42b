// fusedops.add(a, b) == torch.add(a, b): shared by the CPU, Meta and CUDA kernels.
#pragma once

#include <ATen/core/Tensor.h>

#include "cpp/checks.h"

namespace fusedops {

// Checks the arguments and returns the broadcast output shape.
inline SymShape add_output_shape(const at::Tensor& a, const at::Tensor& b) {
  check_floating("add", "a", a);
  check_floating("add", "b", b);
  check_same_dtype_device("add", "a", a, "b", b);
  return broadcast_shape("add", "a", a.sym_sizes(), "b", b.sym_sizes());
}

}  // namespace fusedops
