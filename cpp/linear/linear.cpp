// fusedops.linear: schemas, checks, CPU kernels (torch's addmm / mm through
// the AOTI C shims + one fused parallel epilogue pass, forward and backward),
// registrations. See linear.h for the ops.
#include "cpp/linear/linear.h"

#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h>

#include <algorithm>
#include <array>
#include <limits>
#include <string_view>

#include "cpp/common/cpu.h"
#include "cpp/common/define_op.h"

namespace fusedops {

LinearEpilogue linear_epilogue(const OptStr& activation, OptDouble min, OptDouble max) {
  LinearEpilogue e;
  if (activation.has_value()) {
    const std::string_view a = *activation;
    if (a == "relu") {
      e.act = Activation::Relu;
    } else if (a == "gelu") {
      e.act = Activation::Gelu;
    } else if (a == "gelu_tanh") {
      e.act = Activation::GeluTanh;
    } else {
      fail(kLinear, "activation must be None, \"relu\", \"gelu\" or \"gelu_tanh\", got \"", a, "\"");
    }
  }
  e.has_min = min.has_value();
  e.has_max = max.has_value();
  e.min = min.value_or(0.0);
  e.max = max.value_or(0.0);
  // relu(z) >= 0 >= min: a lower bound <= 0 after relu changes neither the
  // value nor the gradient, so it costs no pass.
  if (e.act == Activation::Relu && e.has_min && e.min <= 0.0) e.has_min = false;
  return e;
}

std::vector<int64_t> linear_output_shape(const Tensor& x, const Tensor& weight, const OptTensor& bias) {
  check_floating(kLinear, "x", x);
  check_floating(kLinear, "weight", weight);
  check_same_dtype_device(kLinear, "x", x, "weight", weight);
  FUSEDOPS_CHECK(x.dim() >= 1, kLinear,
                 "x must have at least 1 dimension [..., in_features], got a 0-dim tensor");
  FUSEDOPS_CHECK(weight.dim() == 2, kLinear, "weight must be 2-D [out_features, in_features], got shape ",
                 ShapeText{weight.sizes()});
  FUSEDOPS_CHECK(x.size(-1) == weight.size(1), kLinear, "x of shape ", ShapeText{x.sizes()},
                 " and weight of shape ", ShapeText{weight.sizes()},
                 " do not match: x's last dimension must equal weight's in_features (", weight.size(1), ")");
  if (has_bias(bias)) {
    check_floating(kLinear, "bias", *bias);
    check_same_dtype_device(kLinear, "x", x, "bias", *bias);
    FUSEDOPS_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0), kLinear,
                   "bias must be 1-D of size out_features (", weight.size(0), "), got shape ",
                   ShapeText{bias->sizes()});
  }
  const auto sizes = x.sizes();
  std::vector<int64_t> shape(sizes.begin(), sizes.end() - 1);
  shape.push_back(weight.size(0));
  return shape;
}

std::vector<int64_t> grad_x_shape(const Tensor& grad, const Tensor& weight) {
  const auto sizes = grad.sizes();
  std::vector<int64_t> shape(sizes.begin(), sizes.end() - 1);
  shape.push_back(weight.size(1));
  return shape;
}

namespace {

// ---- CPU GEMMs: torch's own kernels through the C shims ---------------------------

void mm_cpu(const Tensor& out, const Tensor& a, const Tensor& b, const OptTensor& bias = std::nullopt) {
  torch_mm<aoti_torch_cpu_addmm_out, aoti_torch_cpu_mm_out>(out, a, b, bias);
}

// out = gelu(z) by ATen (vectorized per CPU; this extension is built for
// baseline x86-64, where a scalar erf/tanh costs several times the GEMM of a
// typical layer).
void gelu_cpu(const Tensor& z, const Tensor& out, Activation act) {
  std::array<StableIValue, 3> stack{
      torch::stable::detail::from(z),
      torch::stable::detail::from(std::string(act == Activation::Gelu ? "none" : "tanh")),
      torch::stable::detail::from(out)};
  TORCH_ERROR_CODE_CHECK(torch_call_dispatcher("aten::gelu", "out", stack.data(), TORCH_ABI_VERSION));
  (void)torch::stable::detail::to<Tensor>(stack[0]);  // releases the returned reference to out
}

// ---- CPU epilogue ---------------------------------------------------------------------

// Elements per parallel task: smaller when each element costs an erf or tanh.
int64_t cpu_grain(const LinearEpilogue& e) {
  return e.act == Activation::Gelu || e.act == Activation::GeluTanh ? 4096 : 32768;
}

// Calls body.template operator()<kAct, kClamps>() with the epilogue's
// activation and whether it clamps as constants, so each loop is branch-free
// (and vectorizes where the activation does).
template <typename Body>
void dispatch_epilogue(const LinearEpilogue& e, Body&& body) {
  auto with_act = [&]<Activation kAct>() {
    if (e.clamps()) {
      body.template operator()<kAct, true>();
    } else {
      body.template operator()<kAct, false>();
    }
  };
  switch (e.act) {
    case Activation::None: return with_act.template operator()<Activation::None>();
    case Activation::Relu: return with_act.template operator()<Activation::Relu>();
    case Activation::Gelu: return with_act.template operator()<Activation::Gelu>();
    case Activation::GeluTanh: return with_act.template operator()<Activation::GeluTanh>();
    case Activation::Silu: return;  // not linear's: linear_epilogue never makes it
  }
}

// out[i] = clamp(T(act(z[i]))) over n contiguous elements; out may be z.
void epilogue_cpu(const Tensor& z, const Tensor& out, const LinearEpilogue& e) {
  const int64_t n = z.numel();
  cpu::dispatch_floating(to_dtype(z.scalar_type()), [&]<typename T>() {
    using A = cpu::opmath_t<T>;
    const T* src = static_cast<const T*>(z.const_data_ptr());
    T* dst = static_cast<T*>(out.mutable_data_ptr());
    const A lo = e.has_min ? static_cast<A>(e.min) : -std::numeric_limits<A>::infinity();
    const A hi = e.has_max ? static_cast<A>(e.max) : std::numeric_limits<A>::infinity();
    dispatch_epilogue(e, [&]<Activation kAct, bool kClamps>() {
      cpu::parallel_for(n, cpu_grain(e), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          // Rounded to T after the activation, as F.linear -> act -> clamp does.
          A y = A(static_cast<T>(activate(kAct, A(src[i]))));
          if constexpr (kClamps) y = clamp_value(y, true, lo, true, hi);
          dst[i] = static_cast<T>(y);
        }
      });
    });
  });
}

// out = epilogue(z) for a contiguous z; GELU by ATen, the clamp after it.
void apply_epilogue_cpu(const Tensor& z, const Tensor& out, const LinearEpilogue& e) {
  if (e.identity() || z.numel() == 0) return;
  if (e.act != Activation::Gelu && e.act != Activation::GeluTanh) return epilogue_cpu(z, out, e);
  gelu_cpu(z, out, e.act);
  LinearEpilogue rest = e;
  rest.act = Activation::None;
  if (!rest.identity()) epilogue_cpu(out, out, rest);
}

// out = clamp(act(x @ weight^T + bias)); with `aux`, also the pre-activation
// z when the backward needs it.
Tensor linear_cpu_impl(const Tensor& x, const Tensor& weight, const OptTensor& bias, const LinearEpilogue& e,
                       Tensor* aux) {
  const std::vector<int64_t> shape = linear_output_shape(x, weight, bias);
  const int64_t M = leading_rows(x), N = weight.size(0);
  Tensor z = empty(x, {M, N});
  mm_cpu(z, as_matrix(x), transpose2d(weight), bias);
  Tensor out = z;
  if (aux != nullptr && e.needs_aux()) {
    out = empty(z, {M, N});
    *aux = shape.size() == 2 ? z : torch::stable::view(z, shape);
  }
  apply_epilogue_cpu(z, out, e);
  if (e.nan_bound()) fill_nan(out);
  return shape.size() == 2 ? out : torch::stable::view(out, shape);
}

// ---- CPU backward ---------------------------------------------------------------------

// grad_z = grad * act'(s) * [lo <= T(act(s)) <= hi] over [M, N]; grad has any
// strides, s (the saved tensor) and grad_z are contiguous.
void grad_z_cpu(const Tensor& grad2d, const Tensor& saved, const Tensor& grad_z, const LinearEpilogue& e) {
  const int64_t rows = grad_z.size(0), cols = grad_z.size(1);
  const int64_t gs0 = grad2d.stride(0), gs1 = grad2d.stride(1);
  cpu::dispatch_floating(to_dtype(grad_z.scalar_type()), [&]<typename T>() {
    using A = cpu::opmath_t<T>;
    const T* g = static_cast<const T*>(grad2d.const_data_ptr());
    const T* s = static_cast<const T*>(saved.const_data_ptr());
    T* gz = static_cast<T*>(grad_z.mutable_data_ptr());
    const A lo = static_cast<A>(e.min), hi = static_cast<A>(e.max);
    const bool clamps = e.clamps();
    const int64_t grain = std::max<int64_t>(1, cpu_grain(e) / std::max<int64_t>(cols, 1));
    cpu::parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T* g_row = g + i * gs0;
        const T* s_row = s + i * cols;
        T* gz_row = gz + i * cols;
        for (int64_t j = 0; j < cols; ++j) {
          const A v = A(s_row[j]);
          A d = activate_grad(e.act, v);
          if (clamps) {
            const A y = A(static_cast<T>(activate(e.act, v)));
            d = clamp_passes(y, e.has_min, lo, e.has_max, hi) ? d : A(0);
          }
          gz_row[j] = static_cast<T>(A(g_row[j * gs1]) * d);
        }
      }
    });
  });
}

// The gradient at the pre-activation z as a [M, N] matrix (grad itself,
// viewed, when the epilogue is the identity).
Tensor grad_z_matrix(const Tensor& grad, const Tensor& saved, const LinearEpilogue& e) {
  const Tensor grad2d = as_matrix(grad);
  if (e.identity()) return grad2d;
  Tensor grad_z = empty(grad, {grad2d.size(0), grad2d.size(1)});
  if (grad_z.numel() > 0) grad_z_cpu(grad2d, torch::stable::contiguous(saved), grad_z, e);
  return grad_z;
}

}  // namespace

void linear_check_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& saved,
                           const std::vector<bool>& mask, const LinearEpilogue& e) {
  FUSEDOPS_CHECK(mask.size() == 3, kLinear, "output_mask must have 3 elements, got ", mask.size());
  check_floating(kLinear, "grad", grad);
  FUSEDOPS_CHECK(grad.dim() >= 1, kLinear, "grad must have at least 1 dimension, got a 0-dim tensor");
  // An input no requested gradient reads may be a stand-in of grad's dtype and device (grad itself).
  check_same_dtype_device(kLinear, "grad", grad, "x", x);
  check_same_dtype_device(kLinear, "grad", grad, "weight", weight);
  check_same_dtype_device(kLinear, "grad", grad, "saved", saved);
  const int64_t rows = leading_rows(grad), cols = grad.size(-1);
  if (mask[0]) {
    FUSEDOPS_CHECK(weight.dim() == 2 && weight.size(0) == cols, kLinear, "weight of shape ",
                   ShapeText{weight.sizes()}, " does not match grad of shape ", ShapeText{grad.sizes()});
  }
  if (mask[1]) {
    FUSEDOPS_CHECK(x.dim() >= 1 && leading_rows(x) == rows, kLinear, "x of shape ", ShapeText{x.sizes()},
                   " does not match grad of shape ", ShapeText{grad.sizes()});
  }
  if (!e.identity()) {
    FUSEDOPS_CHECK(saved.numel() == rows * cols, kLinear, "saved must have grad's ", rows * cols,
                   " elements, got ", saved.numel());
  }
}

namespace {

Tensor linear_cpu(const Tensor& x, const Tensor& weight, OptTensor bias, OptStr activation, OptDouble min,
                  OptDouble max, int64_t cublas_math) {
  return linear_cpu_impl(x, weight, bias, linear_epilogue(activation, min, max), nullptr);
}
FUSEDOPS_OP(kLinear,
            "linear(Tensor x, Tensor weight, Tensor? bias=None, str? activation=None, float? min=None, "
            "float? max=None, int cublas_math=-1) -> Tensor",
            linear_cpu, linear_cuda)

LinearForward linear_forward_cpu(const Tensor& x, const Tensor& weight, OptTensor bias, OptStr activation,
                                 OptDouble min, OptDouble max, int64_t cublas_math) {
  const LinearEpilogue e = linear_epilogue(activation, min, max);
  Tensor aux;
  Tensor out = linear_cpu_impl(x, weight, bias, e, &aux);
  return {out, e.needs_aux() ? aux : no_tensor(out)};
}
FUSEDOPS_OP(kLinear,
            "_linear_forward(Tensor x, Tensor weight, Tensor? bias, str? activation, float? min, float? max, "
            "int cublas_math=-1) -> (Tensor, Tensor)",
            linear_forward_cpu, linear_forward_cuda)

LinearGrads linear_backward_cpu(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                const Tensor& saved, OptStr activation, OptDouble min, OptDouble max,
                                std::vector<bool> mask, int64_t cublas_math) {
  const LinearEpilogue e = linear_epilogue(activation, min, max);
  linear_check_backward(grad, x, weight, saved, mask, e);
  const Tensor grad_z = grad_z_matrix(grad, saved, e);
  Tensor grad_x, grad_w, grad_b;
  if (mask[0]) {  // grad_x[M, K] = grad_z[M, N] . weight[N, K]
    const std::vector<int64_t> shape = grad_x_shape(grad, weight);
    grad_x = empty(grad, {grad_z.size(0), weight.size(1)});
    mm_cpu(grad_x, grad_z, weight);
    if (shape.size() != 2) grad_x = torch::stable::view(grad_x, shape);
  }
  if (mask[1]) {  // grad_w[N, K] = grad_z^T[N, M] . x[M, K]
    grad_w = empty(grad, {grad_z.size(1), x.size(-1)});
    mm_cpu(grad_w, transpose2d(grad_z), as_matrix(x));
  }
  if (mask[2]) {
    const int64_t rows_dim = 0;
    grad_b = torch::stable::sum(grad_z, torch::headeronly::IntHeaderOnlyArrayRef(&rows_dim, 1));
  }
  return fill_unrequested({grad_x, grad_w, grad_b}, mask, grad);
}
FUSEDOPS_OP(kLinear,
            "_linear_backward(Tensor grad, Tensor x, Tensor weight, Tensor saved, str? activation, "
            "float? min, float? max, bool[3] output_mask, int cublas_math=-1) -> (Tensor, Tensor, Tensor)",
            linear_backward_cpu, linear_backward_cuda)

}  // namespace

}  // namespace fusedops
