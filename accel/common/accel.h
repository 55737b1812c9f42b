// What the C++ autograd of every op shares. accel/ is the only code compiled
// against torch's full C++ API: one build per torch minor, loaded only under
// that exact minor (src/fusedops/_accelerator.py), never linked by the stable
// library. It calls the stable library's ops through the dispatcher.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>
#include <torch/version.h>

#include <array>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fusedops::accel {

using at::Tensor;
using OptTensor = std::optional<Tensor>;
using torch::autograd::variable_list;

// The stable library's op `fusedops::<name>`, looked up once by its caller.
template <typename Signature>
c10::TypedOperatorHandle<Signature> fusedops_op(const char* name) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow((std::string("fusedops::") + name).c_str(), "")
      .typed<Signature>();
}

// torch 2.10-2.12 hold autograd nodes in shared_ptr, 2.13 on in intrusive_ptr.
template <typename N, typename... Args>
auto make_node(Args&&... args) {
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 13
  return std::shared_ptr<N>(new N(std::forward<Args>(args)...), torch::autograd::deleteNode);
#else
  return c10::make_intrusive<N>(std::forward<Args>(args)...);
#endif
}

// The ops have no forward-mode formula: a dual input is refused, or its
// tangent would be dropped silently.
inline bool is_dual(const Tensor& t) { return t.defined() && t._fw_grad(/*level=*/0).defined(); }
inline bool is_dual(const OptTensor& t) { return t.has_value() && is_dual(*t); }

template <typename... Ts>
void refuse_forward_ad(const char* op, const Ts&... tensors) {
  const bool dual = (... || is_dual(tensors));
  TORCH_CHECK(!dual, "fusedops.", op,
              ": forward-mode AD (a dual tensor input) is not supported: no jvp formula");
}

// A CUDA out-of-memory in the stable library arrives as a std::runtime_error
// (the stable ABI carries no exception types) whose text says so
// (cpp/common/stable.h); it leaves here as torch's OutOfMemoryError, which
// Python sees as torch.OutOfMemoryError.
template <typename F>
decltype(auto) with_torch_errors(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    if (what.find(": CUDA out of memory") != std::string::npos) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, what);
    }
    throw;
  }
}

// Runs `f` (a call of a stable op) below autograd, as torch's generated
// autograd kernels run theirs.
template <typename F>
decltype(auto) below_autograd(F&& f) {
  at::AutoDispatchBelowADInplaceOrView guard;
  return with_torch_errors(std::forward<F>(f));
}

// A backward op: below autograd unless a graph of the gradient is being built
// (create_graph=True), where its own (Python) autograd refuses a double
// backward when that graph is differentiated.
template <typename F>
decltype(auto) backward_call(F&& f) {
  if (at::GradMode::is_enabled()) return with_torch_errors(std::forward<F>(f));
  return below_autograd(std::forward<F>(f));
}

// A backward op's gradients (a tuple of N tensors) as the node's outputs:
// undefined where not asked for (the op returns an empty stand-in there).
template <typename... Grads>
variable_list requested(std::tuple<Grads...>&& grads, const std::array<bool, sizeof...(Grads)>& mask) {
  variable_list out(sizeof...(Grads));
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((out[I] = mask[I] ? std::move(std::get<I>(grads)) : Tensor()), ...);
  }(std::index_sequence_for<Grads...>{});
  return out;
}

// A SavedVariable of an output would be a SavedVariable(out, true), whose
// unpacking differs between the node pointer types; a detached alias shares
// out's version counter, so an in-place change of out is still detected.
inline torch::autograd::SavedVariable save_output(const Tensor& out) {
  return torch::autograd::SavedVariable(out.detach(), false);
}

inline Tensor unpack(const torch::autograd::SavedVariable& saved) { return saved.unpack(); }

// An output saved as SavedVariable(out, true) (after set_history), unpacked
// with `node`, its grad_fn: where the backward is itself differentiated
// (create_graph=True), the output keeps its place in the graph, which
// save_output's detached alias does not.
inline Tensor unpack_output(const torch::autograd::SavedVariable& saved, torch::autograd::Node* node) {
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 13
  return saved.unpack(node->shared_from_this());
#else
  return saved.unpack(c10::intrusive_ptr<torch::autograd::Node>::reclaim_copy(node));
#endif
}

// Where an op's kernels are registered: its C++ autograd at AutogradCPU and
// AutogradCUDA (more specific than the Autograd key Python's
// register_autograd uses, so no load order can make Python's win), and
// autocast where an op has it.
struct Libraries;

// The autograd of `backward_op`, the backward of the public op `op`: it runs
// below autograd, and where its gradients are themselves to be differentiated
// (create_graph=True) they hang on a node that refuses that, naming `op` and
// what to use instead. Compiled backward graphs call the backward ops
// directly: Python's register_autograd kernel cost them ~13 us a call.
void refuse_double_backward(Libraries& libraries, const char* backward_op, const char* op,
                            const char* instead = "torch ops");

struct Libraries {
  torch::Library autograd_cpu, autograd_cuda, autocast_cpu, autocast_cuda;

  template <typename Fn>
  void autograd(const char* op, Fn fn) {
    autograd_cpu.impl(op, fn);
    autograd_cuda.impl(op, fn);
  }
  // op's autograd, and its backward op's (_<op>_backward) refusal of a double backward.
  template <typename Fn>
  void autograd_and_backward(const char* op, Fn fn, const char* instead = "torch ops") {
    autograd(op, fn);
    refuse_double_backward(*this, ("_" + std::string(op) + "_backward").c_str(), op, instead);
  }
};

// Each op file registers its kernels by one FUSEDOPS_ACCEL_OP(name, fn); the
// registrations run when the loader activates the accelerator, not at load.
using Registration = void (*)(Libraries&);
std::vector<std::pair<const char*, Registration>>& registrations();
struct RegisterOp {
  RegisterOp(const char* op, Registration r) { registrations().emplace_back(op, r); }
};
#define FUSEDOPS_ACCEL_OP(name, fn) \
  static const ::fusedops::accel::RegisterOp fusedops_accel_##name(#name, fn)

}  // namespace fusedops::accel
