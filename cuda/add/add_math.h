// fusedops.add's elementwise math, a + b, as a functor of the shared
// elementwise loops (CPU: cpp/common/cpu_elementwise.h, CUDA:
// cuda/common/elementwise.cuh). Torch-free, host and device.
#pragma once

#include "cuda/common/host_device.h"

namespace fusedops {

struct AddOp {
  template <typename A>
  FUSEDOPS_HD void operator()(const A (&in)[2], A (&out)[1]) const {
    out[0] = in[0] + in[1];
  }
};

}  // namespace fusedops
