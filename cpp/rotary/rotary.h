// fusedops.rotary(q, k, cos, sin, interleaved) == HF transformers'
// apply_rotary_pos_emb(q, k, cos, sin): host side of the op. Checks, set-up,
// the CPU kernel and the registrations are in rotary.cpp, the CUDA glue in
// rotary_cuda.cpp, the kernel and the math both share in cuda/rotary/,
// autograd and the shape functions in src/fusedops/ops/rotary.py (C++ autograd:
// accel/rotary/).
#pragma once

#include <optional>
#include <tuple>

#include "cpp/common/stable.h"
#include "cuda/rotary/rotary_params.h"

namespace fusedops {

constexpr char kRotary[] = "rotary";

// (q_out, k_out), or the backward's (grad_q, grad_k).
using RotaryOutputs = std::tuple<Tensor, Tensor>;

// One call's outputs (allocated: seq-major where the input is, else
// contiguous; rotary.cpp's empty_like_heads) and the problem that fills them.
struct RotaryCall {
  Tensor q_out, k_out;
  RotaryProblem problem;
};

// Checks the forward's arguments and allocates its outputs.
RotaryCall rotary_setup(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin,
                        bool interleaved);

// The same for the backward, which rotates the given output gradients back
// (the transposed rotation); a gradient not given (an output that was not
// used) gets a 0-element output and no work.
RotaryCall rotary_backward_setup(const std::optional<Tensor>& grad_q, const std::optional<Tensor>& grad_k,
                                 const Tensor& cos, const Tensor& sin, bool interleaved);

RotaryOutputs rotary_cuda(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin,
                          bool interleaved);
RotaryOutputs rotary_backward_cuda(const std::optional<Tensor>& grad_q, const std::optional<Tensor>& grad_k,
                                   const Tensor& cos, const Tensor& sin, bool interleaved);

}  // namespace fusedops
