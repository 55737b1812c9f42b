// Argument checks with messages that name the op and the argument:
// "fusedops.add: b must have the same dtype as a (float32), got float64".
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymInt.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include "cpp/kernel_types.h"

#define FUSEDOPS_CHECK(cond, op, ...) TORCH_CHECK((cond), "fusedops.", op, ": ", __VA_ARGS__)

namespace fusedops {

using Shape = c10::SmallVector<int64_t, kMaxDims>;
using SymShape = c10::SmallVector<c10::SymInt, kMaxDims>;

inline void check_floating(const char* op, const char* arg, const at::Tensor& t) {
  FUSEDOPS_CHECK(t.defined(), op, arg, " must be a tensor, got None");
  FUSEDOPS_CHECK(at::isFloatingType(t.scalar_type()), op, arg,
                 " must have a floating dtype (float16, bfloat16, float32 or float64), got ",
                 t.scalar_type());
}

// `b` must match `a` in dtype and device: fusedops does no implicit promotion
// or cross-device copies.
inline void check_same_dtype_device(const char* op, const char* name_a, const at::Tensor& a,
                                    const char* name_b, const at::Tensor& b) {
  FUSEDOPS_CHECK(a.scalar_type() == b.scalar_type(), op, name_b,
                 " must have the same dtype as ", name_a, " (", a.scalar_type(), "), got ",
                 b.scalar_type());
  FUSEDOPS_CHECK(a.device() == b.device(), op, name_b, " must be on the same device as ",
                 name_a, " (", a.device(), "), got ", b.device());
}

// torch.broadcast_shapes with an error naming both arguments. Kernels call it
// with concrete sizes (IntArrayRef, fast), Meta kernels with symbolic ones.
template <typename Size>
c10::SmallVector<Size, kMaxDims> broadcast_shape(const char* op, const char* name_a,
                                                 c10::ArrayRef<Size> a, const char* name_b,
                                                 c10::ArrayRef<Size> b) {
  const size_t ndim = std::max(a.size(), b.size());
  c10::SmallVector<Size, kMaxDims> out(ndim, Size(1));
  for (size_t i = 0; i < ndim; ++i) {
    const Size& sa = i < ndim - a.size() ? out[i] : a[i - (ndim - a.size())];
    const Size& sb = i < ndim - b.size() ? out[i] : b[i - (ndim - b.size())];
    FUSEDOPS_CHECK(sa == sb || sa == 1 || sb == 1, op, name_a, " of shape ", a, " and ", name_b,
                   " of shape ", b, " do not broadcast (dimension ", i, ": ", sa, " vs ", sb, ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

// A build without CUDA kernels still answers CUDA tensors with a clear error
// instead of the dispatcher's "could not run ... with arguments from the CUDA
// backend" (ATen glue; the stable ops use cpp/common/cuda_registration.h).
inline void no_cuda_kernel(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK(false, "fusedops.", op.schema().operator_name().name.substr(sizeof("fusedops::") - 1),
              ": this build of fusedops (", FUSEDOPS_VERSION,
              ") has no CUDA kernels; `python -m fusedops info` prints the command that installs "
              "the CUDA wheel for this torch");
}

inline DType to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return DType::Float16;
    case at::kBFloat16: return DType::BFloat16;
    case at::kFloat: return DType::Float32;
    case at::kDouble: return DType::Float64;
    default: TORCH_CHECK(false, "fusedops: unsupported dtype ", t);
  }
}

}  // namespace fusedops
