// torch.backends.cuda.matmul's flags (TF32, reduced-precision reductions) for
// the GEMMs of any op. The stable ABI cannot read them: an op that runs a GEMM
// ends its schema with `int cublas_math`, packed by the Python caller
// (src/fusedops/_cublas_math.py), or -1 (the default), read when the kernel
// runs through the reader the C++ autograd accelerator installs
// (accel/common/activate.cpp); torch's default flags where none is.
#pragma once

#include <cstdint>

namespace fusedops {

struct CublasMath {
  bool allow_tf32;     // float32 may use TF32 (allow_tf32)
  int fp16_reduction;  // torch's CuBLASReductionOption for float16:
  int bf16_reduction;  // 0 reduced precision, 1 split-K only, 2 neither
};

// The flags now, packed, from the accelerator's reader; 0 where none is installed.
int64_t current_cublas_math();

inline CublasMath cublas_math_of(int64_t bits) {
  if (bits < 0) bits = current_cublas_math();
  return {.allow_tf32 = (bits & 1) != 0,
          .fp16_reduction = static_cast<int>((bits >> 1) & 3),
          .bf16_reduction = static_cast<int>((bits >> 3) & 3)};
}

}  // namespace fusedops
