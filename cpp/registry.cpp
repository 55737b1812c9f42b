// The fusedops operator namespace. Each op defines its schemas next to its
// kernels (cpp/<op>/ on the stable ABI; cpp/linear.cpp and
// cpp/scale_bias_clamp.cpp on the ATen glue until they move).
#include <torch/library.h>

TORCH_LIBRARY(fusedops, m) {}
