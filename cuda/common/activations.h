// The activations of every op and their derivatives, written once for the CPU
// loops and the CUDA kernels (torch-free, host and device): linear's epilogues
// (None, Relu, Gelu, GeluTanh) and the gated ops' (Silu, Gelu, GeluTanh). The
// formulas are torch's own (aten's CPU and CUDA kernels), so that special
// values (inf, NaN) come out as torch's do.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/common/host_device.h"
#ifndef __CUDA_ARCH__
#include "cuda/common/vector_math.h"
#endif

namespace fusedops {

enum class Activation : int8_t { None, Relu, Gelu, GeluTanh, Silu };

// exp, erf and tanh of the activations: on the host in float, the branch-free
// ones the CPU loops vectorize through (cuda/common/vector_math.h); std's
// (the device's intrinsics in CUDA) otherwise.
template <typename A>
FUSEDOPS_HD A act_exp(A v) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_same_v<A, float>) return vector_math::exp(v);
#endif
  using std::exp;
  return exp(v);
}

template <typename A>
FUSEDOPS_HD A act_erf(A v) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_same_v<A, float>) return vector_math::erf(v);
#endif
  using std::erf;
  return erf(v);
}

template <typename A>
FUSEDOPS_HD A act_tanh(A v) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_same_v<A, float>) return vector_math::tanh(v);
#endif
  using std::tanh;
  return tanh(v);
}

// torch.relu: NaN stays NaN; its gradient is 1 where v > 0, else 0.
template <typename A>
FUSEDOPS_HD A relu(A v) {
  return v < A(0) ? A(0) : v;
}

template <typename A>
FUSEDOPS_HD A relu_grad(A v) {
  return v > A(0) ? A(1) : A(0);
}

// F.gelu(v): v * Phi(v), Phi the normal CDF by erf.
template <typename A>
FUSEDOPS_HD A gelu_erf(A v) {
  return A(0.5) * v * (A(1) + act_erf(v * A(0.70710678118654752440)));
}

template <typename A>
FUSEDOPS_HD A gelu_erf_grad(A v) {
  const A cdf = A(0.5) * (A(1) + act_erf(v * A(0.70710678118654752440)));
  const A pdf = act_exp(A(-0.5) * v * v) * A(0.39894228040143267794);
  return cdf + v * pdf;
}

// F.gelu(v, approximate="tanh").
template <typename A>
FUSEDOPS_HD A gelu_tanh(A v) {
  const A inner = A(0.79788456080286535588) * (v + A(0.044715) * v * v * v);
  return A(0.5) * v * (A(1) + act_tanh(inner));
}

template <typename A>
FUSEDOPS_HD A gelu_tanh_grad(A v) {
  const A beta = A(0.79788456080286535588);
  const A kappa = A(0.044715);
  const A v2 = v * v;
  const A t = act_tanh(beta * (v + kappa * v2 * v));
  return A(0.5) * (A(1) + t) + A(0.5) * v * (A(1) - t * t) * beta * (A(1) + A(3) * kappa * v2);
}

// F.silu(v) = v * sigmoid(v), as torch computes it: v / (1 + exp(-v)).
template <typename A>
FUSEDOPS_HD A silu(A v) {
  return v / (A(1) + act_exp(-v));
}

// torch's silu_backward: s * (1 + v * (1 - s)), s = sigmoid(v).
template <typename A>
FUSEDOPS_HD A silu_grad(A v) {
  const A s = A(1) / (A(1) + act_exp(-v));
  return s * (A(1) + v * (A(1) - s));
}

template <typename A>
FUSEDOPS_HD A activate(Activation act, A v) {
  switch (act) {
    case Activation::Relu: return relu(v);
    case Activation::Gelu: return gelu_erf(v);
    case Activation::GeluTanh: return gelu_tanh(v);
    case Activation::Silu: return silu(v);
    default: return v;
  }
}

// d act(v) / dv.
template <typename A>
FUSEDOPS_HD A activate_grad(Activation act, A v) {
  switch (act) {
    case Activation::Relu: return relu_grad(v);
    case Activation::Gelu: return gelu_erf_grad(v);
    case Activation::GeluTanh: return gelu_tanh_grad(v);
    case Activation::Silu: return silu_grad(v);
    default: return A(1);
  }
}

}  // namespace fusedops
