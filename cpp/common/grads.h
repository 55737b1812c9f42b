// The gradients a backward op returns: one per differentiable input, a
// 0-element stand-in (no_tensor) where autograd did not ask for it (an
// undefined tensor cannot cross the stable ABI on every torch).
#pragma once

#include <array>
#include <tuple>
#include <vector>

#include "cpp/common/stable.h"

namespace fusedops {

using Grads3 = std::tuple<Tensor, Tensor, Tensor>;

// The gradients with a no_tensor for each one not asked for (one allocation,
// only when some gradient is not asked for).
inline Grads3 fill_unrequested(std::array<Tensor, 3> grads, const std::vector<bool>& mask,
                               const Tensor& like) {
  if (!(mask[0] && mask[1] && mask[2])) {
    const Tensor none = no_tensor(like);
    for (size_t i = 0; i < 3; ++i) {
      if (!mask[i]) grads[i] = none;
    }
  }
  return {grads[0], grads[1], grads[2]};
}

}  // namespace fusedops
