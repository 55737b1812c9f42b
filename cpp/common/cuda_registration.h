// How an op registers its CUDA kernel: the kernel itself in a CUDA build; in a
// CPU-only build a stand-in with the same signature that tells the user which
// wheel has the kernel. Every op's registration says it, so no op can be
// forgotten: there is no list of op names anywhere.
#pragma once

#include "cpp/common/stable.h"

namespace fusedops {

template <const char* kOp, typename Signature>
struct NoCudaKernel;

template <const char* kOp, typename R, typename... Args>
struct NoCudaKernel<kOp, R(Args...)> {
  static R call(Args...) {
    const std::string version = FUSEDOPS_VERSION;
    const std::string base = version.substr(0, version.find('+'));
    fail(kOp, "this build of fusedops (", version, ") has no CUDA kernels; install the CUDA wheel of your ",
         "torch's CUDA major, fusedops==", base, "+cu13 or fusedops==", base, "+cu12 ",
         "(`python -m fusedops info` prints the command that installs it for this torch)");
  }
};

template <const char* kOp, typename Signature>
inline constexpr auto no_cuda_kernel = &NoCudaKernel<kOp, Signature>::call;

}  // namespace fusedops

// FUSEDOPS_CUDA_KERNEL(kAddName, add_cuda): kAddName a namespace-scope
// `constexpr char[]` holding the op's name.
#ifdef FUSEDOPS_WITH_CUDA
#define FUSEDOPS_CUDA_KERNEL(op_name, fn) TORCH_BOX(&fn)
#else
#define FUSEDOPS_CUDA_KERNEL(op_name, fn) TORCH_BOX((::fusedops::no_cuda_kernel<op_name, decltype(fn)>))
#endif
