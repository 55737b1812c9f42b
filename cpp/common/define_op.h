// How an op is defined: FUSEDOPS_OP(kOp, schema, cpu_kernel, cuda_kernel),
// written right below the op's CPU kernel, defines the op in the fusedops
// library and registers its two kernels. In a CPU-only build the CUDA kernel is
// a stand-in with the same signature that tells the user which wheel has it:
// every op's definition says it, so no op can be forgotten, and there is no
// list of op names anywhere. A public op (a name without a leading '_') also
// gets its `_<name>_nograd` twin, the same schema and kernels without the
// Python autograd, which its Python wrapper calls when no gradient is needed.
#pragma once

#include <string>
#include <utility>
#include <vector>

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

// `kernel` with its out-of-memory errors named after the op (empty() does not
// know which op allocates).
template <const char* kOp, auto kernel>
struct NamedErrors;

template <const char* kOp, typename R, typename... Args, R (*kernel)(Args...)>
struct NamedErrors<kOp, kernel> {
  static R call(Args... args) {
    try {
      return kernel(std::forward<Args>(args)...);
    } catch (const OutOfMemory& error) {
      fail(kOp, error.what());
    }
  }
};

using Library = torch::stable::detail::StableLibrary;
using BoxedKernel = void (*)(StableIValue*, uint64_t, uint64_t);

// The schemas FUSEDOPS_OP's `schema` defines: itself and, for a public op, its
// _<name>_nograd twin. The ops have no overload names ("name(args) -> ret").
inline std::vector<std::string> op_schemas(const char* schema) {
  const std::string op = schema;
  if (op[0] == '_') return {op};
  const size_t paren = op.find('(');
  return {op, "_" + op.substr(0, paren) + "_nograd" + op.substr(paren)};
}

inline void define_op(Library& m, const char* schema) {
  for (const std::string& s : op_schemas(schema)) m.def(s.c_str());
}

inline void impl_op(Library& m, const char* schema, BoxedKernel kernel) {
  for (const std::string& s : op_schemas(schema)) m.impl(s.substr(0, s.find('(')).c_str(), kernel);
}

}  // namespace fusedops

// kOp: a namespace-scope `constexpr char[]` holding the op's public name, which
// the CPU-only build's CUDA stand-in names in its error.
#define FUSEDOPS_OP(kOp, schema, cpu, cuda)                                                 \
  STABLE_TORCH_LIBRARY_FRAGMENT(fusedops, m) { ::fusedops::define_op(m, schema); }          \
  STABLE_TORCH_LIBRARY_IMPL(fusedops, CPU, m) {                                             \
    ::fusedops::impl_op(m, schema, TORCH_BOX((&::fusedops::NamedErrors<kOp, &cpu>::call))); \
  }                                                                                         \
  STABLE_TORCH_LIBRARY_IMPL(fusedops, CUDA, m) {                                            \
    ::fusedops::impl_op(m, schema, FUSEDOPS_CUDA_KERNEL(kOp, cuda));                        \
  }

#ifdef FUSEDOPS_WITH_CUDA
#define FUSEDOPS_CUDA_KERNEL(kOp, fn) TORCH_BOX((&::fusedops::NamedErrors<kOp, &fn>::call))
#else
#define FUSEDOPS_CUDA_KERNEL(kOp, fn) TORCH_BOX((::fusedops::no_cuda_kernel<kOp, decltype(fn)>))
#endif
