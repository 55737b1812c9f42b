// The elementwise math of fusedops.swiglu and fusedops.geglu, act(gate) * up
// and its gradients, as functors of the shared elementwise loops (CPU:
// cpp/common/cpu_elementwise.h, CUDA: cuda/common/elementwise.cuh). Torch-free,
// host and device; kAct is Silu (swiglu), Gelu or GeluTanh (geglu).
#pragma once

#include "cuda/common/activations.h"

namespace fusedops {

// out = act(gate) * up.
template <Activation kAct>
struct GatedForward {
  template <typename A>
  FUSEDOPS_HD void operator()(const A (&in)[2], A (&out)[1]) const {
    out[0] = activate(kAct, in[0]) * in[1];
  }
};

// From (grad, gate, up), recomputing act(gate): grad_gate = grad * up *
// act'(gate), grad_up = grad * act(gate).
template <Activation kAct>
struct GatedBackward {
  template <typename A>
  FUSEDOPS_HD void operator()(const A (&in)[3], A (&out)[2]) const {
    const A grad = in[0], gate = in[1], up = in[2];
    out[0] = grad * up * activate_grad(kAct, gate);
    out[1] = grad * activate(kAct, gate);
  }
};

// body.template operator()<kAct>() with kAct = act, one of the gated ops'
// activations (Silu, Gelu, GeluTanh). Host side: the CPU kernels and the
// CUDA launchers.
template <typename Body>
decltype(auto) dispatch_gate(Activation act, Body&& body) {
  switch (act) {
    case Activation::Gelu: return body.template operator()<Activation::Gelu>();
    case Activation::GeluTanh: return body.template operator()<Activation::GeluTanh>();
    default: return body.template operator()<Activation::Silu>();
  }
}

}  // namespace fusedops
