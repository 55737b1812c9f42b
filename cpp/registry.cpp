// The schemas of the ops still on the ATen glue (an op on the stable ABI
// defines its own, in cpp/<op>/). Backends register their kernels next to the
// kernels themselves (cpp/*.cpp, cuda/*.cpp).
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

namespace fusedops {

TORCH_LIBRARY(fusedops, m) {
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, *, str? activation=None, float? min=None, "
        "float? max=None) -> Tensor");
  m.def("linear_forward(Tensor x, Tensor weight, Tensor? bias, str? activation, float? min, float? max) "
        "-> (Tensor, Tensor)");
  m.def("linear_backward(Tensor grad, Tensor x, Tensor weight, Tensor saved, str? activation, float? min, "
        "float? max, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
  // clamp(x * scale + bias, min, max); scale_value / bias_value stand in for a
  // scale / bias given as a number (the tensor is then None).
  m.def(
      "scale_bias_clamp(Tensor x, Tensor? scale, Tensor? bias, float scale_value=1., "
      "float bias_value=0., float? min=None, float? max=None) -> Tensor");
  m.def(
      "scale_bias_clamp_backward(Tensor grad_out, Tensor x, Tensor? scale, Tensor? bias, "
      "float scale_value, float bias_value, float? min, float? max, bool[3] output_mask) "
      "-> (Tensor, Tensor, Tensor)");
}

#ifndef FUSEDOPS_WITH_CUDA
namespace {
// A build without CUDA kernels still answers CUDA tensors with a clear error
// instead of the dispatcher's "could not run ... with arguments from the CUDA backend".
void no_cuda_kernel(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK(false, "fusedops.", op.schema().operator_name().name.substr(sizeof("fusedops::") - 1),
              ": this build of fusedops (", FUSEDOPS_VERSION,
              ") has no CUDA kernels; `python -m fusedops info` prints the command that installs "
              "the CUDA wheel for this torch");
}
}  // namespace

TORCH_LIBRARY_IMPL(fusedops, CUDA, m) {
  for (const char* name : {"linear", "linear_forward", "linear_backward", "scale_bias_clamp",
                           "scale_bias_clamp_backward"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&no_cuda_kernel>());
  }
}
#endif

}  // namespace fusedops
