// FUSEDOPS_HD: a function both the CPU loops (cpp/) and the CUDA kernels
// (cuda/) compile, so that the two backends share one copy of the math.
#pragma once

#ifdef __CUDACC__
#define FUSEDOPS_HD __host__ __device__ __forceinline__
#else
#define FUSEDOPS_HD inline
#endif
