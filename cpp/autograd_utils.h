// Shared by the ops' Autograd kernels.
#pragma once

#include <initializer_list>
#include <optional>

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

namespace fusedops {

// True when grad mode is on and one of the tensors (null or undefined ones
// skipped) requires grad.
inline bool any_requires_grad(std::initializer_list<const at::Tensor*> tensors) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : tensors) {
    if (t != nullptr && t->defined() && t->requires_grad()) return true;
  }
  return false;
}

// Whether an op's Autograd kernel must go through its autograd Function: a
// gradient is wanted, or an input carries a forward-mode tangent (which the
// Function rejects with an error instead of dropping it). Otherwise the
// kernel calls straight through, which saves a node, the saved tensors and
// about a microsecond of host time per call.
inline bool needs_autograd(std::initializer_list<const at::Tensor*> tensors) {
  if (any_requires_grad(tensors)) return true;
  for (const at::Tensor* t : tensors) {
    if (t != nullptr && t->defined() && t->_fw_grad(/*level=*/0).defined()) return true;
  }
  return false;
}

inline const at::Tensor* optional_ptr(const std::optional<at::Tensor>& t) {
  return t.has_value() ? &*t : nullptr;
}

}  // namespace fusedops
