// fusedops.add(a, b) == torch.add(a, b): host side of the op. The CPU kernel and
// the registrations are in add.cpp, the CUDA glue in add_cuda.cpp, the kernels
// in cuda/add/, autograd and the shape function in src/fusedops/ops/add.py.
#pragma once

#include "cpp/common/stable.h"

namespace fusedops {

// The op's public name: its schema's and its errors'.
constexpr char kAdd[] = "add";

// Checks a and b; returns the broadcast output shape.
std::vector<int64_t> add_output_shape(const Tensor& a, const Tensor& b);

Tensor add_cuda(const Tensor& a, const Tensor& b);

}  // namespace fusedops
