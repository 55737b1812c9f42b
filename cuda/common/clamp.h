// torch.clamp's value and gradient mask, written once for the CPU loops and
// the CUDA kernels of every op (torch-free, host and device).
#pragma once

#include "cuda/common/host_device.h"

namespace fusedops {

// torch.clamp: NaN propagates; min > max gives max.
template <typename A>
FUSEDOPS_HD A clamp_value(A v, bool has_min, A lo, bool has_max, A hi) {
  if (has_min) v = v < lo ? lo : v;
  if (has_max) v = v > hi ? hi : v;
  return v;
}

// torch.clamp's gradient mask: passes where lo <= v <= hi, zero elsewhere and at NaN.
template <typename A>
FUSEDOPS_HD bool clamp_passes(A v, bool has_min, A lo, bool has_max, A hi) {
  return (!has_min || v >= lo) && (!has_max || v <= hi) && v == v;
}

}  // namespace fusedops
