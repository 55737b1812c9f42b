// fusedops.swiglu(gate, up) == F.silu(gate) * up and
// fusedops.geglu(gate, up, approximate) == F.gelu(gate, approximate=approximate) * up:
// host side of the two gated ops, one kernel family with the activation a
// template parameter. Checks and set-up in gated.cpp, the CPU kernels and the
// ops' definitions in gated_cpu.cpp, the CUDA glue in gated_cuda.cpp, the
// kernels and their math in cuda/gated/, autograd and the shape functions in
// src/fusedops/ops/_gated.py (C++ autograd: accel/gated/).
//
// up=None splits gate's last dim in halves: gate[..., :d] is the gate,
// gate[..., d:] the up (vLLM's SiluAndMul). Both halves are strided views of
// gate, read in place; the backward writes both halves of its one gradient.
//
// Ops (schemas in gated_cpu.cpp): swiglu, geglu (public; their _nograd twins
// come with them) and _swiglu_backward, _geglu_backward (grad, gate, up) ->
// (grad_gate, grad_up), the activation recomputed from gate (the product is
// never saved); grad_up is a 0-element stand-in when up is None, grad_gate
// then holding both halves.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cpp/common/stable.h"
#include "cuda/common/activations.h"

namespace fusedops {

using GatedGrads = std::tuple<Tensor, Tensor>;

constexpr char kSwiglu[] = "swiglu";
constexpr char kGeglu[] = "geglu";

// geglu's approximate ("none" or "tanh") as its activation.
Activation geglu_activation(const std::string& approximate);

// One checked forward call: the output and the layout (out, gate, up) the
// kernels iterate; gate_data / up_data point at element 0 of each (the halves
// of gate when up is None).
struct GatedForwardCall {
  Tensor out, gate;  // gate: the argument, or a contiguous copy (> kMaxDims dims)
  OptTensor up;
  const void* gate_data = nullptr;
  const void* up_data = nullptr;
  StridedLayout<3> layout{};
};

GatedForwardCall gated_forward_setup(const char* op, const Tensor& gate, const OptTensor& up);

// One checked backward call: the gradients and the layout (grad_gate, grad_up,
// grad, gate, up).
struct GatedBackwardCall {
  Tensor grad_gate, grad_up, grad, gate;  // grad, gate: the arguments or contiguous copies
  OptTensor up;
  void* grad_gate_data = nullptr;
  void* grad_up_data = nullptr;
  const void* grad_data = nullptr;
  const void* gate_data = nullptr;
  const void* up_data = nullptr;
  StridedLayout<5> layout{};
  int64_t numel = 0;  // of the output (one half of grad_gate when up is None)
};

GatedBackwardCall gated_backward_setup(const char* op, const Tensor& grad, const Tensor& gate,
                                       const OptTensor& up);

Tensor swiglu_cuda(const Tensor& gate, OptTensor up);
Tensor geglu_cuda(const Tensor& gate, OptTensor up, std::string approximate);
GatedGrads swiglu_backward_cuda(const Tensor& grad, const Tensor& gate, OptTensor up);
GatedGrads geglu_backward_cuda(const Tensor& grad, const Tensor& gate, OptTensor up, std::string approximate);

}  // namespace fusedops
