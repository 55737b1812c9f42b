// The normalization ops' checks and set-up, shared by both families and both
// backends (see norm.h): arguments checked, rows made contiguous, outputs
// allocated, then the backend's kernels.
#include "cpp/norm/norm.h"

namespace fusedops {
namespace {

bool given(const OptTensor& t) { return t.has_value() && t->defined(); }

bool half_type(ScalarType t) { return t == ScalarType::Half || t == ScalarType::BFloat16; }

// The math type's dtype: mean and rstd are kept in it.
ScalarType stats_dtype(ScalarType x) {
  return x == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
}

void check_device(const char* op, const char* arg, const Tensor& t, const Tensor& x) {
  const torch::stable::Device dx = x.device(), dt = t.device();
  FUSEDOPS_CHECK(dx.type() == dt.type() && dx.index() == dt.index(), op, arg,
                 " must be on the same device as x (", device_name(x), "), got ", device_name(t));
}

// A parameter (weight or bias): 1-D of x's last size, on x's device, of x's
// dtype or (for a half-type x) float32.
void check_param(const char* op, const char* arg, const Tensor& p, const Tensor& x) {
  check_floating(op, arg, p);
  const ScalarType xt = x.scalar_type(), pt = p.scalar_type();
  FUSEDOPS_CHECK(pt == xt || (half_type(xt) && pt == ScalarType::Float), op, arg,
                 " must have the same dtype as x (", dtype_name(xt), half_type(xt) ? ") or float32" : ")",
                 ", got ", dtype_name(pt));
  check_device(op, arg, p, x);
  FUSEDOPS_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), op, arg, " must be 1-D of x's last size (",
                 x.size(-1), "), got shape ", ShapeText{p.sizes()});
}

void check_forward(const NormCall& c) {
  check_floating(c.op, "x", c.x);
  FUSEDOPS_CHECK(c.x.dim() >= 1, c.op, "x must have at least 1 dimension [..., hidden], got a 0-dim tensor");
  if (given(c.residual)) {
    check_same_dtype_device(c.op, "x", c.x, "residual", *c.residual);
    FUSEDOPS_CHECK(c.residual->sizes().equals(c.x.sizes()), c.op, "residual of shape ",
                   ShapeText{c.residual->sizes()}, " must have x's shape ", ShapeText{c.x.sizes()});
  }
  if (given(c.weight)) check_param(c.op, "weight", *c.weight, c.x);
  if (given(c.bias)) {
    check_param(c.op, "bias", *c.bias, c.x);
    if (given(c.weight)) check_same_dtype_device(c.op, "weight", *c.weight, "bias", *c.bias);
  }
}

std::vector<int64_t> leading_shape(const Tensor& x) {
  const auto sizes = x.sizes();
  return std::vector<int64_t>(sizes.begin(), sizes.end() - 1);
}

// t's elements in row-major order (t itself where they are), or none.
OptTensor contiguous_or_none(const OptTensor& t) {
  OptTensor out;
  if (given(t)) out.emplace(torch::stable::contiguous(*t));
  return out;
}

const void* data_or_null(const OptTensor& t) { return given(t) ? t->const_data_ptr() : nullptr; }

// The output's default dtype: x's, or float32 where a parameter is (x a half type).
ScalarType default_out_dtype(const Tensor& x, const OptTensor& weight, const OptTensor& bias) {
  if (given(weight)) return weight->scalar_type() == ScalarType::Float ? ScalarType::Float : x.scalar_type();
  if (given(bias)) return bias->scalar_type() == ScalarType::Float ? ScalarType::Float : x.scalar_type();
  return x.scalar_type();
}

// The output's dtype: the default, or out_dtype where it is the default or
// (a float32 x) float16 or bfloat16.
ScalarType out_dtype_of(const NormCall& c) {
  const ScalarType wide = default_out_dtype(c.x, c.weight, c.bias), xt = c.x.scalar_type();
  if (!c.out_dtype) return wide;
  const bool narrow_allowed = xt == ScalarType::Float;
  FUSEDOPS_CHECK(*c.out_dtype == wide || (narrow_allowed && half_type(*c.out_dtype)), c.op,
                 "out_dtype must be ", dtype_name(wide), " (the default)",
                 narrow_allowed ? ", float16 or bfloat16" : "", " for a ", dtype_name(xt), " x, got ",
                 dtype_name(*c.out_dtype));
  return *c.out_dtype;
}

}  // namespace

NormOutputs norm_forward(const NormCall& call, const NormBackend& backend) {
  check_forward(call);
  const ScalarType out_type = out_dtype_of(call);
  const Tensor x = torch::stable::contiguous(call.x);
  const OptTensor residual = contiguous_or_none(call.residual);
  const OptTensor weight = contiguous_or_none(call.weight);
  const OptTensor bias = contiguous_or_none(call.bias);
  const ScalarType wide_type = default_out_dtype(x, weight, bias);
  // Without kernels of its own for a narrow out_dtype (the CPU: none to compile),
  // the backend writes the wide output, rounded once to out_type below: the same bits.
  const bool convert = out_type != wide_type && !backend.narrow_output;
  const std::vector<int64_t> lead = leading_shape(x);
  NormOutputs o;
  o.out = empty(x, x.sizes(), convert ? wide_type : out_type);
  o.rstd = empty(x, lead, stats_dtype(x.scalar_type()));
  if (residual) o.summed = empty(x, x.sizes());
  if (call.center) o.mean = empty(x, lead, stats_dtype(x.scalar_type()));
  const NormForwardArgs args{
      .x = x.const_data_ptr(),
      .residual = data_or_null(residual),
      .weight = data_or_null(weight),
      .bias = data_or_null(bias),
      .out = o.out.mutable_data_ptr(),
      .summed = residual ? o.summed.mutable_data_ptr() : nullptr,
      .mean = call.center ? o.mean.mutable_data_ptr() : nullptr,
      .rstd = o.rstd.mutable_data_ptr(),
      .rows = leading_rows(x),
      .cols = x.size(-1),
      .eps = call.eps,
      .offset = call.offset,
      .dtype = to_dtype(x.scalar_type()),
      .out_dtype = to_dtype(o.out.scalar_type()),
      .wide_params = wide_type != x.scalar_type(),
      .center = call.center,
  };
  if (x.numel() > 0) backend.forward(args, x, call.op);
  if (convert) o.out = torch::stable::to(o.out, out_type);
  return o;
}

namespace {

void check_backward(const NormBackwardCall& c) {
  const Tensor& x = c.saved_x;
  check_floating(c.op, "x", x);
  FUSEDOPS_CHECK(x.dim() >= 1, c.op, "x must have at least 1 dimension [..., hidden], got a 0-dim tensor");
  check_floating(c.op, "grad", c.grad);
  check_device(c.op, "grad", c.grad, x);
  FUSEDOPS_CHECK(c.grad.sizes().equals(x.sizes()), c.op, "grad of shape ", ShapeText{c.grad.sizes()},
                 " must have x's shape ", ShapeText{x.sizes()});
  const ScalarType expected = default_out_dtype(x, c.weight, std::nullopt);
  const ScalarType gt = c.grad.scalar_type(), xt = x.scalar_type();
  const bool narrow_allowed = xt == ScalarType::Float;  // a float32 x's narrow out_dtype
  FUSEDOPS_CHECK(gt == expected || (half_type(xt) && !given(c.weight) && gt == ScalarType::Float) ||
                     (narrow_allowed && half_type(gt)),
                 c.op, "grad must have the output's dtype (", dtype_name(expected),
                 narrow_allowed ? ", or the float16 or bfloat16 out_dtype" : "", "), got ", dtype_name(gt));
  if (given(c.weight)) check_param(c.op, "weight", *c.weight, x);
  const int64_t rows = leading_rows(x);
  const ScalarType st = stats_dtype(xt);
  const auto check_stats = [&](const char* arg, const Tensor& t) {
    FUSEDOPS_CHECK(t.scalar_type() == st && t.numel() == rows, c.op, arg, " must have ", rows, " ",
                   dtype_name(st), " elements (one per row of x), got ", t.numel(), " of ",
                   dtype_name(t.scalar_type()));
    check_device(c.op, arg, t, x);
  };
  check_stats("rstd", c.rstd);
  if (c.center) {
    FUSEDOPS_CHECK(given(c.mean), c.op, "mean must be given");
    check_stats("mean", *c.mean);
  }
  if (given(c.grad_summed)) {
    check_same_dtype_device(c.op, "x", x, "grad_summed", *c.grad_summed);
    FUSEDOPS_CHECK(c.grad_summed->sizes().equals(x.sizes()), c.op, "grad_summed of shape ",
                   ShapeText{c.grad_summed->sizes()}, " must have x's shape ", ShapeText{x.sizes()});
  }
  const size_t grads = c.center ? 3 : 2;
  FUSEDOPS_CHECK(c.mask.size() == grads, c.op, "output_mask must have ", grads, " elements, got ",
                 c.mask.size());
}

}  // namespace

std::vector<Tensor> norm_backward(const NormBackwardCall& call, const NormBackend& backend) {
  check_backward(call);
  const Tensor x = torch::stable::contiguous(call.saved_x);
  Tensor grad = torch::stable::contiguous(call.grad);
  // The parameters' dtype: the wider of grad's and x's (float32 for a half-type x's float32 output; a float32
  // x's output may be narrower).
  const ScalarType param_type = grad.element_size() > x.element_size() ? grad.scalar_type() : x.scalar_type();
  // A backend without narrow-output kernels reads a float32 x's narrow gradient converted to float32.
  if (grad.element_size() < x.element_size() && !backend.narrow_output)
    grad = torch::stable::to(grad, param_type);
  const OptTensor weight = contiguous_or_none(call.weight);
  const OptTensor grad_summed = contiguous_or_none(call.grad_summed);
  const Tensor rstd = torch::stable::contiguous(call.rstd);
  const OptTensor mean = contiguous_or_none(call.mean);
  const int64_t rows = leading_rows(x), cols = x.size(-1);
  const bool want_x = call.mask[0], want_w = call.mask[1], want_b = call.center && call.mask[2];
  std::vector<Tensor> grads(call.mask.size());
  if (want_x) grads[0] = empty(x, x.sizes());
  const int64_t blocks = rows > 0 && cols > 0 ? backend.backward_blocks(rows, cols, x, call.op) : 0;
  Tensor partial;
  if ((want_w || want_b) && blocks > 0) {
    partial = empty(x, {int64_t(want_w) + int64_t(want_b), blocks, cols}, stats_dtype(x.scalar_type()));
  }
  for (size_t i = 1; i < grads.size(); ++i) {
    if (!call.mask[i]) continue;
    // Sums over no rows are zeros; otherwise the kernels write every element.
    grads[i] = blocks > 0 ? empty(x, {cols}, param_type) : torch::stable::new_zeros(x, {cols}, param_type);
  }
  const auto partial_row = [&](int64_t i) {
    return static_cast<char*>(partial.mutable_data_ptr()) +
           i * blocks * cols * static_cast<int64_t>(partial.element_size());
  };
  const NormBackwardArgs args{
      .grad = grad.const_data_ptr(),
      .x = x.const_data_ptr(),
      .weight = data_or_null(weight),
      .mean = data_or_null(mean),
      .rstd = rstd.const_data_ptr(),
      .grad_summed = data_or_null(grad_summed),
      .grad_x = want_x ? grads[0].mutable_data_ptr() : nullptr,
      .grad_weight = want_w ? grads[1].mutable_data_ptr() : nullptr,
      .grad_bias = want_b ? grads[2].mutable_data_ptr() : nullptr,
      .partial_weight = want_w && blocks > 0 ? partial_row(0) : nullptr,
      .partial_bias = want_b && blocks > 0 ? partial_row(want_w ? 1 : 0) : nullptr,
      .rows = rows,
      .cols = cols,
      .blocks = blocks,
      .offset = call.offset,
      .dtype = to_dtype(x.scalar_type()),
      .out_dtype = to_dtype(grad.scalar_type()),
      .wide_params = param_type != x.scalar_type(),
      .center = call.center,
  };
  if (blocks > 0) backend.backward(args, x, call.op);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!call.mask[i]) grads[i] = no_tensor(x);
  }
  return grads;
}

}  // namespace fusedops
