// Plain types shared by the host glue (cpp/) and the kernels (cuda/). Nothing
// here knows torch: the kernels compile without torch headers.
#pragma once

#include <cstdint>

namespace fusedops {

enum class DType { Float16, BFloat16, Float32, Float64 };

// Up to this many dimensions survive coalescing; beyond that the glue
// materializes the inputs contiguously (rare: only odd strides in >8 dims).
constexpr int kMaxDims = 8;

// N operands (index 0 is the output) iterated together in row-major order of
// `sizes`; strides are in elements, 0 where an operand is broadcast.
template <int N>
struct StridedLayout {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  // True when every operand is one dense run: the vectorized fast path.
  bool contiguous() const {
    if (ndim != 1) return false;
    for (int k = 0; k < N; ++k) {
      if (strides[k][0] != 1) return false;
    }
    return true;
  }
};

// What a launcher needs to size its grid, read once per device by the glue;
// and whether the device runs sm_90a code (compute capability 9.0 exactly:
// the CUTLASS GEMMs' wgmma runs on no other arch).
struct DeviceInfo {
  int sm_count;
  bool sm90;
};

}  // namespace fusedops
