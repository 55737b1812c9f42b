// How an op file defines its ops: one row per op with its schema and its CPU
// and CUDA kernels, the CUDA one being the kernel itself in a CUDA build and, in a
// CPU-only build, a stand-in with the same signature that tells the user which
// wheel has the kernel. Every op's row says it, so no op can be forgotten:
// there is no list of op names anywhere.
#pragma once

#include <cstring>
#include <string>

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

using BoxedKernel = void (*)(StableIValue*, uint64_t, uint64_t);

// One op: its schema (the name is what precedes the '(') and its kernels,
// TORCH_BOX(&fn) on the CPU and FUSEDOPS_CUDA_KERNEL on CUDA.
struct OpDef {
  const char* schema;
  BoxedKernel cpu;
  BoxedKernel cuda;

  std::string name() const { return std::string(schema, std::strcspn(schema, "(")); }
};

}  // namespace fusedops

// Defines every op of `ops` (an array of OpDef) in the fusedops library and
// registers its CPU and CUDA kernels.
#define FUSEDOPS_DEFINE_OPS(ops)                                                \
  STABLE_TORCH_LIBRARY_FRAGMENT(fusedops, m) {                                  \
    for (const ::fusedops::OpDef& op : ops) m.def(op.schema);                   \
  }                                                                             \
  STABLE_TORCH_LIBRARY_IMPL(fusedops, CPU, m) {                                 \
    for (const ::fusedops::OpDef& op : ops) m.impl(op.name().c_str(), op.cpu);  \
  }                                                                             \
  STABLE_TORCH_LIBRARY_IMPL(fusedops, CUDA, m) {                                \
    for (const ::fusedops::OpDef& op : ops) m.impl(op.name().c_str(), op.cuda); \
  }

// FUSEDOPS_CUDA_KERNEL(kAddName, add_cuda): kAddName a namespace-scope
// `constexpr char[]` holding the op's name.
#ifdef FUSEDOPS_WITH_CUDA
#define FUSEDOPS_CUDA_KERNEL(op_name, fn) TORCH_BOX(&fn)
#else
#define FUSEDOPS_CUDA_KERNEL(op_name, fn) TORCH_BOX((::fusedops::no_cuda_kernel<op_name, decltype(fn)>))
#endif
