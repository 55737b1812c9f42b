// The elementwise part of fusedops.linear, shared by the CPU loops and the CUDA
// kernels: activation and its gradient (the clamp is cuda/common/clamp.h). Torch-free, host and device.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/common/clamp.h"

namespace fusedops {

enum class Activation : int8_t { None, Relu, Gelu, GeluTanh };

// What follows the GEMM: out = clamp(act(z), lo, hi). Bounds are optional.
struct LinearEpilogue {
  Activation act = Activation::None;
  bool has_min = false;
  bool has_max = false;
  double min = 0;
  double max = 0;

  bool clamps() const { return has_min || has_max; }
  bool identity() const { return act == Activation::None && !clamps(); }
  // torch.clamp with a NaN bound gives NaN everywhere (the glue fills the output).
  bool nan_bound() const { return (has_min && min != min) || (has_max && max != max); }
  // What the backward needs besides x and weight:
  // relu alone is differentiated from its output, like torch's relu; any
  // other activation or a clamp needs the pre-activation z.
  bool needs_aux() const { return act == Activation::Gelu || act == Activation::GeluTanh || clamps(); }
};

template <typename A>
FUSEDOPS_HD A gelu_erf(A v) {
  using std::erf;
  return A(0.5) * v * (A(1) + erf(v * A(0.70710678118654752440)));
}

template <typename A>
FUSEDOPS_HD A gelu_tanh(A v) {
  using std::tanh;
  const A inner = A(0.79788456080286535588) * (v + A(0.044715) * v * v * v);
  return A(0.5) * v * (A(1) + tanh(inner));
}

template <typename A>
FUSEDOPS_HD A activate(Activation act, A v) {
  switch (act) {
    case Activation::Relu: return v < A(0) ? A(0) : v;  // NaN stays NaN, like torch.relu
    case Activation::Gelu: return gelu_erf(v);
    case Activation::GeluTanh: return gelu_tanh(v);
    default: return v;
  }
}

// d act(v) / dv, with torch's formulas (relu: 1 where v > 0, else 0).
template <typename A>
FUSEDOPS_HD A activate_grad(Activation act, A v) {
  using std::erf;
  using std::exp;
  using std::tanh;
  switch (act) {
    case Activation::Relu: return v > A(0) ? A(1) : A(0);
    case Activation::Gelu: {
      const A cdf = A(0.5) * (A(1) + erf(v * A(0.70710678118654752440)));
      const A pdf = exp(A(-0.5) * v * v) * A(0.39894228040143267794);
      return cdf + v * pdf;
    }
    case Activation::GeluTanh: {
      const A beta = A(0.79788456080286535588);
      const A kappa = A(0.044715);
      const A v2 = v * v;
      const A t = tanh(beta * (v + kappa * v2 * v));
      return A(0.5) * (A(1) + t) + A(0.5) * v * (A(1) - t * t) * beta * (A(1) + A(3) * kappa * v2);
    }
    default: return A(1);
  }
}

}  // namespace fusedops
