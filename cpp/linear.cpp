// fusedops.linear: CPU kernels (at::addmm + one fused parallel epilogue pass,
// forward and backward), Meta kernels, autograd, autocast.
#include "cpp/linear.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <limits>

#include "cpp/autograd_utils.h"

namespace fusedops {
namespace {

using OptTensor = std::optional<at::Tensor>;
using OptStr = std::optional<c10::string_view>;
using OptDouble = std::optional<double>;

// Rows of x viewed as a matrix [M, K]: the product of its leading sizes.
int64_t leading_rows(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

// ---- CPU ----------------------------------------------------------------------

// Elements per parallel task: smaller when each element costs an erf or tanh.
int64_t cpu_grain(const LinearEpilogue& e) {
  return e.act == Activation::Gelu || e.act == Activation::GeluTanh ? 4096 : 32768;
}

// z = x2d @ weight^T (+ bias): contiguous [M, N].
at::Tensor gemm_cpu(const at::Tensor& x2d, const at::Tensor& weight, const OptTensor& bias) {
  return has_bias(bias) ? at::addmm(*bias, x2d, weight.t()) : at::mm(x2d, weight.t());
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
  }
}

// out[i] = clamp(T(act(z[i]))) over n contiguous elements; out may be z.
void epilogue_cpu(const at::Tensor& z, const at::Tensor& out, const LinearEpilogue& e) {
  const int64_t n = z.numel();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, z.scalar_type(), "fusedops.linear", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* src = z.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    const acc_t lo = e.has_min ? static_cast<acc_t>(e.min) : -std::numeric_limits<acc_t>::infinity();
    const acc_t hi = e.has_max ? static_cast<acc_t>(e.max) : std::numeric_limits<acc_t>::infinity();
    dispatch_epilogue(e, [&]<Activation kAct, bool kClamps>() {
      at::parallel_for(0, n, cpu_grain(e), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          // Rounded to scalar_t after the activation, as F.linear -> act -> clamp does.
          acc_t y = acc_t(static_cast<scalar_t>(activate(kAct, acc_t(src[i]))));
          if constexpr (kClamps) y = clamp_value(y, true, lo, true, hi);
          dst[i] = static_cast<scalar_t>(y);
        }
      });
    });
  });
}

at::Tensor linear_cpu_impl(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                           const LinearEpilogue& e, at::Tensor* aux) {
  const SymShape shape = linear_output_shape(x, weight, bias);
  const at::Tensor x2d = x.reshape({leading_rows(x), x.size(-1)});
  at::Tensor z = gemm_cpu(x2d, weight, bias);
  at::Tensor out = z;
  if (aux != nullptr && e.needs_aux()) {
    out = at::empty_like(z);
    *aux = z.view(c10::asIntArrayRefUnchecked(shape));
  }
  if (!e.identity() && z.numel() > 0) {
    if (e.act == Activation::Gelu || e.act == Activation::GeluTanh) {
      // This extension is built for baseline x86-64, where a scalar erf/tanh
      // costs several times the GEMM of a typical layer; ATen's GELU is
      // vectorized per CPU. So: GELU by ATen (z -> out), the clamp in place.
      at::gelu_out(out, z, e.act == Activation::Gelu ? "none" : "tanh");
      LinearEpilogue rest = e;
      rest.act = Activation::None;
      if (!rest.identity()) epilogue_cpu(out, out, rest);
    } else {
      epilogue_cpu(z, out, e);
    }
  }
  return out.view(c10::asIntArrayRefUnchecked(shape));
}

// grad_z = grad * act'(s) * [lo <= T(act(s)) <= hi] over [M, N]; grad has any
// strides, s (the saved tensor) and grad_z are contiguous.
void grad_z_cpu(const at::Tensor& grad2d, const at::Tensor& saved, const at::Tensor& grad_z,
                const LinearEpilogue& e) {
  const int64_t rows = grad_z.size(0), cols = grad_z.size(1);
  const int64_t gs0 = grad2d.stride(0), gs1 = grad2d.stride(1);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, grad_z.scalar_type(), "fusedops.linear", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* g = grad2d.const_data_ptr<scalar_t>();
    const scalar_t* s = saved.const_data_ptr<scalar_t>();
    scalar_t* gz = grad_z.mutable_data_ptr<scalar_t>();
    const acc_t lo = static_cast<acc_t>(e.min), hi = static_cast<acc_t>(e.max);
    const bool clamps = e.clamps();
    const int64_t grain = std::max<int64_t>(1, cpu_grain(e) / std::max<int64_t>(cols, 1));
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const scalar_t* g_row = g + i * gs0;
        const scalar_t* s_row = s + i * cols;
        scalar_t* gz_row = gz + i * cols;
        for (int64_t j = 0; j < cols; ++j) {
          const acc_t v = acc_t(s_row[j]);
          acc_t d = activate_grad(e.act, v);
          if (clamps) {
            const acc_t y = acc_t(static_cast<scalar_t>(activate(e.act, v)));
            d = clamp_passes(y, e.has_min, lo, e.has_max, hi) ? d : acc_t(0);
          }
          gz_row[j] = static_cast<scalar_t>(acc_t(g_row[j * gs1]) * d);
        }
      }
    });
  });
}

// The gradient at the pre-activation z, as a [M, N] matrix (grad itself,
// viewed, when the epilogue is the identity).
at::Tensor grad_z_matrix(const at::Tensor& grad, const at::Tensor& saved, const LinearEpilogue& e,
                         int64_t rows, int64_t cols) {
  const at::Tensor grad2d = grad.reshape({rows, cols});
  if (e.identity()) return grad2d;
  at::Tensor grad_z = at::empty({rows, cols}, grad.options());
  if (grad_z.numel() > 0) grad_z_cpu(grad2d, saved.contiguous(), grad_z, e);
  return grad_z;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward_cpu(
    const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& saved,
    OptStr activation, OptDouble min, OptDouble max, std::array<bool, 3> mask) {
  const LinearEpilogue e = linear_epilogue(activation, min, max);
  const int64_t cols = grad.size(-1);
  const int64_t rows = leading_rows(grad);
  const at::Tensor grad_z = grad_z_matrix(grad, saved, e, rows, cols);
  const at::Tensor none = at::empty({0}, grad.options());
  at::Tensor grad_x = none, grad_w = none, grad_b = none;
  if (mask[0]) {
    SymShape shape(grad.sym_sizes().begin(), grad.sym_sizes().end() - 1);
    shape.push_back(weight.sym_size(1));
    grad_x = at::mm(grad_z, weight).view(c10::asIntArrayRefUnchecked(shape));
  }
  if (mask[1]) grad_w = at::mm(grad_z.t(), x.reshape({rows, x.size(-1)}));
  if (mask[2]) grad_b = at::sum(grad_z, 0);
  return {grad_x, grad_w, grad_b};
}

at::Tensor linear_cpu(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                      OptStr activation, OptDouble min, OptDouble max) {
  return linear_cpu_impl(x, weight, bias, linear_epilogue(activation, min, max), nullptr);
}

std::tuple<at::Tensor, at::Tensor> linear_forward_cpu(const at::Tensor& x, const at::Tensor& weight,
                                                      const OptTensor& bias, OptStr activation,
                                                      OptDouble min, OptDouble max) {
  at::Tensor aux = at::empty({0}, x.options());
  at::Tensor out = linear_cpu_impl(x, weight, bias, linear_epilogue(activation, min, max), &aux);
  return {out, aux};
}

// ---- Meta -----------------------------------------------------------------------

at::Tensor linear_meta(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                       OptStr activation, OptDouble min, OptDouble max) {
  linear_epilogue(activation, min, max);
  return at::empty_symint(linear_output_shape(x, weight, bias), x.options());
}

std::tuple<at::Tensor, at::Tensor> linear_forward_meta(const at::Tensor& x, const at::Tensor& weight,
                                                       const OptTensor& bias, OptStr activation,
                                                       OptDouble min, OptDouble max) {
  const LinearEpilogue e = linear_epilogue(activation, min, max);
  const SymShape shape = linear_output_shape(x, weight, bias);
  at::Tensor aux = e.needs_aux() ? at::empty_symint(shape, x.options()) : at::empty({0}, x.options());
  return {at::empty_symint(shape, x.options()), aux};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward_meta(
    const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& saved,
    OptStr activation, OptDouble min, OptDouble max, std::array<bool, 3> mask) {
  linear_epilogue(activation, min, max);
  const at::Tensor none = at::empty({0}, grad.options());
  at::Tensor grad_x = none, grad_w = none, grad_b = none;
  if (mask[0]) {
    SymShape shape(grad.sym_sizes().begin(), grad.sym_sizes().end() - 1);
    shape.push_back(weight.sym_size(1));
    grad_x = at::empty_symint(shape, grad.options());
  }
  if (mask[1]) grad_w = at::empty_symint({grad.sym_size(-1), x.sym_size(-1)}, grad.options());
  if (mask[2]) grad_b = at::empty_symint({grad.sym_size(-1)}, grad.options());
  return {grad_x, grad_w, grad_b};
}

// ---- Autograd -------------------------------------------------------------------

const auto& linear_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("fusedops::linear", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const OptTensor&,
                                               OptStr, OptDouble, OptDouble)>();
  return op;
}

const auto& linear_forward_op() {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fusedops::linear_forward", "")
          .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const OptTensor&,
                                                    OptStr, OptDouble, OptDouble)>();
  return op;
}

const auto& linear_backward_op() {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fusedops::linear_backward", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
              const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, OptStr, OptDouble,
              OptDouble, std::array<bool, 3>)>();
  return op;
}

c10::IValue optional_ivalue(OptDouble v) { return v.has_value() ? c10::IValue(*v) : c10::IValue(); }
OptDouble optional_double(const c10::IValue& v) {
  return v.isNone() ? OptDouble() : OptDouble(v.toDouble());
}

// Saves x only when weight needs a gradient and weight only when x does, and
// of the output side only what linear_backward reads (see cpp/linear.h).
class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, const OptTensor& bias, OptStr activation,
                            OptDouble min, OptDouble max) {
    const LinearEpilogue e = linear_epilogue(activation, min, max);
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, aux] = linear_forward_op().call(x, weight, bias, activation, min, max);
    const bool grad_x = x.requires_grad(), grad_w = weight.requires_grad();
    at::Tensor saved;
    if (e.needs_aux()) {
      saved = aux;
    } else if (e.act == Activation::Relu) {
      saved = out;
    }
    ctx->save_for_backward({grad_w ? x : at::Tensor(), grad_x ? weight : at::Tensor(), saved});
    if (activation.has_value()) ctx->saved_data["activation"] = std::string(*activation);
    ctx->saved_data["has_bias"] = has_bias(bias);
    ctx->saved_data["min"] = optional_ivalue(min);
    ctx->saved_data["max"] = optional_ivalue(max);
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& grad = grads[0];
    // A bias of None is no input of the autograd node: index 2 exists only with a bias.
    const bool with_bias = ctx->saved_data["has_bias"].toBool();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0), ctx->needs_input_grad(1),
                                      with_bias && ctx->needs_input_grad(2)};
    if (!grad.defined() || !(mask[0] || mask[1] || mask[2])) {
      return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    const at::Tensor placeholder = at::empty({0}, grad.options());
    auto pick = [&](const at::Tensor& t) { return t.defined() ? t : placeholder; };
    const c10::IValue& act = ctx->saved_data["activation"];
    std::string act_name = act.isString() ? act.toStringRef() : std::string();
    const OptStr activation = act.isString() ? OptStr(act_name) : OptStr();
    auto [grad_x, grad_w, grad_b] = linear_backward_op().call(
        grad, pick(saved[0]), pick(saved[1]), pick(saved[2]), activation,
        optional_double(ctx->saved_data["min"]), optional_double(ctx->saved_data["max"]), mask);
    return {mask[0] ? grad_x : at::Tensor(), mask[1] ? grad_w : at::Tensor(),
            mask[2] ? grad_b : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor linear_autograd(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                           OptStr activation, OptDouble min, OptDouble max) {
  if (!needs_autograd({&x, &weight, optional_ptr(bias)})) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return linear_op().call(x, weight, bias, activation, min, max);
  }
  return LinearFunction::apply(x, weight, bias, activation, min, max);
}

// The internal ops compute gradients but are not themselves differentiable:
// a graph through them (double backward, create_graph=True) ends in a node
// that says so when it is reached.
//
// Autograd nodes are held by std::shared_ptr before torch 2.13 and by
// c10::intrusive_ptr from then on; build the error node with whichever this
// torch uses (the other branch is never instantiated).
using NodePtr = std::decay_t<decltype(std::declval<const at::Tensor&>().grad_fn())>;

template <typename Ptr = NodePtr, typename... Args>
Ptr make_error_node(Args&&... args) {
  if constexpr (std::is_same_v<Ptr, std::shared_ptr<torch::autograd::Node>>) {
    return std::make_shared<torch::autograd::Error>(std::forward<Args>(args)...);
  } else {
    return c10::make_intrusive<torch::autograd::Error>(std::forward<Args>(args)...);
  }
}

void attach_error_node(std::vector<at::Tensor> outputs, const at::Tensor& a, const at::Tensor& b,
                       const at::Tensor& c, const at::Tensor& d) {
  const NodePtr node = make_error_node(
      "fusedops.linear: double backward is not supported (fusedops.linear's backward is not itself "
      "differentiable); use F.linear and torch ops where higher-order gradients are needed",
      torch::autograd::collect_next_edges(a, b, c, d));
  for (at::Tensor& t : outputs) {
    if (t.defined() && t.numel() > 0) torch::autograd::set_history(t, node);
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward_autograd(
    const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& saved,
    OptStr activation, OptDouble min, OptDouble max, std::array<bool, 3> mask) {
  std::tuple<at::Tensor, at::Tensor, at::Tensor> result;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    result = linear_backward_op().call(grad, x, weight, saved, activation, min, max, mask);
  }
  if (!any_requires_grad({&grad, &x, &weight, &saved})) return result;
  attach_error_node({std::get<0>(result), std::get<1>(result), std::get<2>(result)}, grad, x, weight, saved);
  return result;
}

std::tuple<at::Tensor, at::Tensor> linear_forward_autograd(const at::Tensor& x, const at::Tensor& weight,
                                                           const OptTensor& bias, OptStr activation,
                                                           OptDouble min, OptDouble max) {
  std::tuple<at::Tensor, at::Tensor> result;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    result = linear_forward_op().call(x, weight, bias, activation, min, max);
  }
  if (!any_requires_grad({&x, &weight, optional_ptr(bias)})) return result;
  const at::Tensor b = has_bias(bias) ? *bias : at::Tensor();
  attach_error_node({std::get<0>(result), std::get<1>(result)}, x, weight, b, at::Tensor());
  return result;
}

// ---- Autocast ---------------------------------------------------------------------

// F.linear's autocast policy (lower_precision_fp): floating tensors on the
// autocast device, except float64, are cast to the autocast dtype.
template <c10::DeviceType kDevice, c10::DispatchKey kKey>
at::Tensor linear_autocast(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                           OptStr activation, OptDouble min, OptDouble max) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(kKey);
  const at::ScalarType to = at::autocast::get_autocast_dtype(kDevice);
  return linear_op().call(at::autocast::cached_cast(to, x, kDevice),
                          at::autocast::cached_cast(to, weight, kDevice),
                          at::autocast::cached_cast(to, bias, kDevice), activation, min, max);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fusedops, m) {
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, *, str? activation=None, float? min=None, "
        "float? max=None) -> Tensor");
  m.def("linear_forward(Tensor x, Tensor weight, Tensor? bias, str? activation, float? min, float? max) "
        "-> (Tensor, Tensor)");
  m.def("linear_backward(Tensor grad, Tensor x, Tensor weight, Tensor saved, str? activation, float? min, "
        "float? max, bool[3] output_mask) -> (Tensor, Tensor, Tensor)");
}

#ifndef FUSEDOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(fusedops, CUDA, m) {
  for (const char* name : {"linear", "linear_forward", "linear_backward"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&no_cuda_kernel>());
  }
}
#endif

TORCH_LIBRARY_IMPL(fusedops, CPU, m) {
  m.impl("linear", &linear_cpu);
  m.impl("linear_forward", &linear_forward_cpu);
  m.impl("linear_backward", &linear_backward_cpu);
}
TORCH_LIBRARY_IMPL(fusedops, Meta, m) {
  m.impl("linear", &linear_meta);
  m.impl("linear_forward", &linear_forward_meta);
  m.impl("linear_backward", &linear_backward_meta);
}
TORCH_LIBRARY_IMPL(fusedops, Autograd, m) {
  m.impl("linear", &linear_autograd);
  m.impl("linear_forward", &linear_forward_autograd);
  m.impl("linear_backward", &linear_backward_autograd);
}
TORCH_LIBRARY_IMPL(fusedops, AutocastCPU, m) {
  m.impl("linear", &linear_autocast<c10::DeviceType::CPU, c10::DispatchKey::AutocastCPU>);
}
TORCH_LIBRARY_IMPL(fusedops, AutocastCUDA, m) {
  m.impl("linear", &linear_autocast<c10::DeviceType::CUDA, c10::DispatchKey::AutocastCUDA>);
}

}  // namespace fusedops
