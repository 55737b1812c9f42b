// The elementwise part of fusedops.linear, shared by the CPU loops and the CUDA
// kernels: which activation and clamp follow the GEMM (their math is
// cuda/common/activations.h and cuda/common/clamp.h). Torch-free, host and device.
#pragma once

#include "cuda/common/activations.h"
#include "cuda/common/clamp.h"

namespace fusedops {

// What follows the GEMM: out = clamp(act(z), lo, hi). Bounds are optional.
struct LinearEpilogue {
  Activation act = Activation::None;
  bool has_min = false;
  bool has_max = false;
  double min = 0;
  double max = 0;

  bool clamps() const { return has_min || has_max; }
  bool identity() const { return act == Activation::None && !clamps(); }
  // torch.clamp with a NaN bound gives NaN everywhere (the glue fills the output).
  bool nan_bound() const { return (has_min && min != min) || (has_max && max != max); }
  // What the backward needs besides x and weight:
  // relu alone is differentiated from its output, like torch's relu; any
  // other activation or a clamp needs the pre-activation z.
  bool needs_aux() const { return act == Activation::Gelu || act == Activation::GeluTanh || clamps(); }
};

}  // namespace fusedops
