// FUSEDOPS_HD: a function both the CPU loops (cpp/) and the CUDA kernels
// (cuda/) compile, so that the two backends share one copy of the math.
// Always inlined on both: GCC does not inline a function of the default target
// into the CPU loops' AVX-512 and AVX2 clones (cpp/common/cpu_elementwise.h) by itself,
// and one call left in a loop keeps it from vectorizing.
#pragma once

#ifdef __CUDACC__
#define FUSEDOPS_HD __host__ __device__ __forceinline__
#else
#define FUSEDOPS_HD inline __attribute__((always_inline))
#endif
