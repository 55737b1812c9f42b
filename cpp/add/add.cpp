// fusedops.add: schema, checks, CPU kernel, registrations.
//   add          the public op; Python (src/fusedops/ops/add.py) registers its
//                autograd and shape function
//   _add_nograd  the same kernels without autograd, which fusedops.add calls
//                when no gradient is needed (no Python autograd cost)
#include "cpp/add/add.h"

#include "cpp/common/cpu.h"
#include "cpp/common/define_op.h"

namespace fusedops {

std::vector<int64_t> add_output_shape(const Tensor& a, const Tensor& b) {
  check_floating("add", "a", a);
  check_floating("add", "b", b);
  check_same_dtype_device("add", "a", a, "b", b);
  return broadcast_shape("add", "a", a, "b", b);
}

namespace {

// out = a + b in the op-math type, in parallel. The common cases (all dense; b
// constant along the run) get loops without strides, which vectorize.
template <typename T>
void add_kernel(const StridedLayout<3>& layout, int64_t numel, T* out, const T* a, const T* b) {
  using A = cpu::opmath_t<T>;
  const int inner = layout.ndim - 1;
  const int64_t so = layout.strides[0][inner], sa = layout.strides[1][inner], sb = layout.strides[2][inner];
  cpu::parallel_for(numel, cpu::kGrain, [&](int64_t begin, int64_t end) {
    cpu::for_each_run(layout, begin, end, [&](int64_t len, const int64_t* off) {
      T* __restrict__ o = out + off[0];
      const T* __restrict__ x = a + off[1];
      const T* __restrict__ y = b + off[2];
      if (so == 1 && sa == 1 && sb == 1) {
        for (int64_t i = 0; i < len; ++i) o[i] = static_cast<T>(A(x[i]) + A(y[i]));
      } else if (so == 1 && sa == 1 && sb == 0) {
        const A yv = A(y[0]);
        for (int64_t i = 0; i < len; ++i) o[i] = static_cast<T>(A(x[i]) + yv);
      } else {
        for (int64_t i = 0; i < len; ++i) o[i * so] = static_cast<T>(A(x[i * sa]) + A(y[i * sb]));
      }
    });
  });
}

Tensor add_cpu(const Tensor& a, const Tensor& b) {
  Tensor out = empty(a, add_output_shape(a, b));
  if (out.numel() == 0) return out;
  Tensor x = a, y = b;
  const auto layout = elementwise_layout<3>(out.sizes(), {&x, &y});
  cpu::dispatch_floating(to_dtype(a.scalar_type()), [&]<typename T>() {
    add_kernel<T>(layout, out.numel(), static_cast<T*>(out.data_ptr()), static_cast<const T*>(x.data_ptr()),
                  static_cast<const T*>(y.data_ptr()));
  });
  return out;
}

constexpr char kAdd[] = "add";
FUSEDOPS_OP(kAdd, "add(Tensor a, Tensor b) -> Tensor", add_cpu, add_cuda)

}  // namespace

}  // namespace fusedops
