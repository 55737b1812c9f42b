// ATen CPU loops of the ops not yet on the stable ABI: parallel over the flat
// index range (at::parallel_for), then cpu_runs.h's innermost runs.
#pragma once

// The C++ sources are compiled with OpenMP (CMakeLists.txt), the CUDA ones
// are not: at::parallel_for's inline definition must not differ between them.
#ifdef __CUDACC__
#error "cpp/cpu_loops.h is for the C++ (OpenMP) sources, not CUDA ones"
#endif

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include "cpp/common/cpu_runs.h"

