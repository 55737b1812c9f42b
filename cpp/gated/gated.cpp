// fusedops.swiglu / fusedops.geglu: checks and the set-up both backends share
// (see gated.h). gate and up have one shape (no broadcasting: a gated MLP's
// two projections always match); the layout is built from the operands'
// strides directly, so the halves of a split gate need no view.
#include "cpp/gated/gated.h"

#include <array>

namespace fusedops {

Activation geglu_activation(const std::string& approximate) {
  if (approximate == "none") return Activation::Gelu;
  if (approximate == "tanh") return Activation::GeluTanh;
  fail(kGeglu, "approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
}

namespace {

// Checks gate and up; returns the output's shape.
std::vector<int64_t> output_shape(const char* op, const Tensor& gate, const OptTensor& up) {
  check_floating(op, "gate", gate);
  const auto sizes = gate.sizes();
  std::vector<int64_t> shape(sizes.begin(), sizes.end());
  if (up.has_value()) {
    check_floating(op, "up", *up);
    check_same_dtype_device(op, "gate", gate, "up", *up);
    FUSEDOPS_CHECK(up->sizes().equals(sizes), op, "up of shape ", ShapeText{up->sizes()},
                   " must have gate's shape ", ShapeText{sizes});
    return shape;
  }
  FUSEDOPS_CHECK(!shape.empty(), op,
                 "gate must have at least 1 dimension when up is None (its last is split ",
                 "into gate and up halves)");
  FUSEDOPS_CHECK(shape.back() % 2 == 0, op, "gate's last dimension must be even when up is None (split into ",
                 "gate and up halves), got gate of shape ", ShapeText{sizes});
  shape.back() /= 2;
  return shape;
}

// The operands' layout over `shape`, each operand given by its strides (of
// shape's rank); false past kMaxDims dims.
template <int N>
bool layout_of(const std::vector<int64_t>& shape, const std::array<const int64_t*, N>& strides,
               StridedLayout<N>& layout) {
  return coalesce<N>(static_cast<int>(shape.size()), shape.data(), strides, layout);
}

// Operands that do not coalesce into kMaxDims dims are read from contiguous
// copies (rare: odd strides in more than 8 dims), which always do.
void make_contiguous(Tensor& t) { t = torch::stable::contiguous(t); }

// Bytes from element 0 of `t` (gate, or its gradient) to that of its up half,
// d elements on along the last dim.
int64_t up_half_bytes(const Tensor& t, int64_t d) {
  return d * t.strides()[t.dim() - 1] * static_cast<int64_t>(t.element_size());
}

}  // namespace

GatedForwardCall gated_forward_setup(const char* op, const Tensor& gate, const OptTensor& up) {
  const std::vector<int64_t> shape = output_shape(op, gate, up);
  GatedForwardCall c{.out = empty(gate, shape), .gate = gate, .up = up};
  if (c.out.numel() == 0) return c;
  const std::vector<int64_t> out_strides = contiguous_strides(shape);
  const auto build = [&] {
    return layout_of<3>(
        shape, {out_strides.data(), c.gate.strides().data(), (c.up ? *c.up : c.gate).strides().data()},
        c.layout);
  };
  if (!build()) {
    make_contiguous(c.gate);
    if (c.up) make_contiguous(*c.up);
    build();
  }
  c.gate_data = c.gate.const_data_ptr();
  c.up_data = c.up ? c.up->const_data_ptr()
                   : static_cast<const char*>(c.gate_data) + up_half_bytes(c.gate, shape.back());
  return c;
}

GatedBackwardCall gated_backward_setup(const char* op, const Tensor& grad, const Tensor& gate,
                                       const OptTensor& up) {
  const std::vector<int64_t> shape = output_shape(op, gate, up);
  check_floating(op, "grad", grad);
  check_same_dtype_device(op, "gate", gate, "grad", grad);
  FUSEDOPS_CHECK(grad.sizes().equals(shape), op, "grad of shape ", ShapeText{grad.sizes()},
                 " must have the output's shape ", ShapeText{shape});
  GatedBackwardCall c{.grad_gate = empty(gate, gate.sizes()),
                      .grad_up = up ? empty(gate, shape) : no_tensor(gate),
                      .grad = grad,
                      .gate = gate,
                      .up = up};
  c.numel = grad.numel();
  if (c.numel == 0) return c;
  // Both gradients are dense of gate's shape (in halves of one tensor when up is None).
  const std::vector<int64_t> grad_strides = contiguous_strides(gate.sizes());
  const auto build = [&] {
    return layout_of<5>(shape,
                        {grad_strides.data(), grad_strides.data(), c.grad.strides().data(),
                         c.gate.strides().data(), (c.up ? *c.up : c.gate).strides().data()},
                        c.layout);
  };
  if (!build()) {
    make_contiguous(c.grad);
    make_contiguous(c.gate);
    if (c.up) make_contiguous(*c.up);
    build();
  }
  c.grad_gate_data = c.grad_gate.data_ptr();
  c.grad_up_data = up ? c.grad_up.data_ptr()
                      : static_cast<char*>(c.grad_gate_data) + up_half_bytes(c.grad_gate, shape.back());
  c.grad_data = c.grad.const_data_ptr();
  c.gate_data = c.gate.const_data_ptr();
  c.up_data = c.up ? c.up->const_data_ptr()
                   : static_cast<const char*>(c.gate_data) + up_half_bytes(c.gate, shape.back());
  return c;
}

}  // namespace fusedops
