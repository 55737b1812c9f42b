// fusedops.add: CPU kernel, Meta (shape) kernel and autograd.
#include "cpp/add.h"

#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "cpp/autograd_utils.h"
#include "cpp/cpu_loops.h"
#include "cpp/elementwise.h"

namespace fusedops {
namespace {

at::Tensor add_cpu(const at::Tensor& a, const at::Tensor& b) {
  const Shape shape = add_output_shape<int64_t>(a, b);
  at::Tensor out = at::empty(shape, a.options());
  if (out.numel() == 0) return out;
  at::Tensor x = a, y = b;
  const auto layout = elementwise_layout<3>(out, {&x, &y});
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "fusedops.add", [&] {
    cpu::binary_kernel<scalar_t>(layout, out.numel(), out.mutable_data_ptr<scalar_t>(),
                                 x.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
                                 [](auto u, auto v) { return u + v; });
  });
  return out;
}

at::Tensor add_meta(const at::Tensor& a, const at::Tensor& b) {
  return at::empty_symint(add_output_shape<c10::SymInt>(a, b), a.options());
}

const auto& add_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("fusedops::add", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op;
}

// Gradients flow to both inputs, summed over the dimensions each was
// broadcast along (torch.add's rule). The backward uses only differentiable
// torch ops, so double backward works too.
class AddFunction : public torch::autograd::Function<AddFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a,
                            const at::Tensor& b) {
    ctx->saved_data["a_sizes"] = a.sym_sizes();
    ctx->saved_data["b_sizes"] = b.sym_sizes();
    at::AutoDispatchBelowADInplaceOrView guard;
    return add_op().call(a, b);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor& grad = grads[0];
    at::Tensor grad_a, grad_b;
    if (ctx->needs_input_grad(0)) {
      grad_a = at::sum_to(grad, ctx->saved_data["a_sizes"].toSymIntVector());
    }
    if (ctx->needs_input_grad(1)) {
      grad_b = at::sum_to(grad, ctx->saved_data["b_sizes"].toSymIntVector());
    }
    return {grad_a, grad_b};
  }
};

at::Tensor add_autograd(const at::Tensor& a, const at::Tensor& b) {
  if (!needs_autograd({&a, &b})) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return add_op().call(a, b);
  }
  return AddFunction::apply(a, b);
}

}  // namespace

TORCH_LIBRARY_IMPL(fusedops, CPU, m) { m.impl("add", &add_cpu); }
TORCH_LIBRARY_IMPL(fusedops, Meta, m) { m.impl("add", &add_meta); }
TORCH_LIBRARY_IMPL(fusedops, Autograd, m) { m.impl("add", &add_autograd); }

}  // namespace fusedops
