// fusedops.add: schema, checks, CPU kernel, registrations.
//   add          the public op; Python (src/fusedops/ops/add.py) registers its
//                autograd and shape function
//   _add_nograd  the same kernels without autograd, which fusedops.add calls
//                when no gradient is needed (no Python autograd cost)
#include "cpp/add/add.h"

#include "cpp/common/cpu_elementwise.h"
#include "cpp/common/define_op.h"
#include "cuda/add/add_math.h"

namespace fusedops {

std::vector<int64_t> add_output_shape(const Tensor& a, const Tensor& b) {
  check_floating(kAdd, "a", a);
  check_floating(kAdd, "b", b);
  check_same_dtype_device(kAdd, "a", a, "b", b);
  return broadcast_shape(kAdd, "a", a, "b", b);
}

namespace {

Tensor add_cpu(const Tensor& a, const Tensor& b) {
  Tensor out = empty(a, add_output_shape(a, b));
  if (out.numel() == 0) return out;
  Tensor x = a, y = b;
  const auto layout = elementwise_layout<3>(out.sizes(), {&x, &y});
  cpu::dispatch_floating(to_dtype(a.scalar_type()), [&]<typename T>() {
    cpu::elementwise<T, 1, 2>(layout, out.numel(), {static_cast<T*>(out.data_ptr())},
                              {static_cast<const T*>(x.data_ptr()), static_cast<const T*>(y.data_ptr())},
                              AddOp{});
  });
  return out;
}

FUSEDOPS_OP(kAdd, "add(Tensor a, Tensor b) -> Tensor", add_cpu, add_cuda)

}  // namespace

}  // namespace fusedops
