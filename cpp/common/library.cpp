// The fusedops operator namespace. Each op defines its schemas next to its
// kernels, as a fragment (cpp/<op>/<op>.cpp).
#include <torch/csrc/stable/library.h>

STABLE_TORCH_LIBRARY(fusedops, m) {}
