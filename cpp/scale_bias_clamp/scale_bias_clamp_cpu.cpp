// fusedops.scale_bias_clamp on the CPU. Forward: one parallel pass over
// coalesced runs, with dense inner loops the compiler vectorizes. The backward
// loops are in scale_bias_clamp_cpu_backward.cpp.
#include "cpp/common/cpu.h"
#include "cpp/common/define_op.h"
#include "cpp/scale_bias_clamp/scale_bias_clamp.h"

namespace fusedops {
namespace {

template <typename T>
void forward_cpu_kernel(const SbcForwardSetup& s, int64_t numel) {
  using A = cpu::opmath_t<T>;
  const StridedLayout<3>& l = s.layout;
  const SbcClamp<A> clamp = make_clamp<A>(s.scalars);
  const A scale = s.scalars.scale ? A(*static_cast<const T*>(s.scalars.scale)) : A(s.scalars.scale_value);
  const A b0 = A(s.scalars.bias_value);
  T* out = static_cast<T*>(s.out.data_ptr());
  const T* x = static_cast<const T*>(s.x.const_data_ptr());
  const T* bias = s.bias ? static_cast<const T*>(s.bias->const_data_ptr()) : nullptr;
  const int inner = l.ndim - 1;
  const int64_t so = l.strides[0][inner], sx = l.strides[1][inner], sb = l.strides[2][inner];
  cpu::parallel_for(numel, cpu::kGrain, [&](int64_t begin, int64_t end) {
    auto f = [clamp, sc = scale](A xv, A b) { return clamp(xv * sc + b); };
    cpu::for_each_run(l, begin, end, [&](int64_t len, const int64_t* off) {
      T* __restrict__ o = out + off[0];
      const T* __restrict__ xp = x + off[1];
      const T* __restrict__ bp = bias ? bias + off[2] : nullptr;
      if (so == 1 && sx == 1 && bp != nullptr && sb == 1) {
        for (int64_t i = 0; i < len; ++i) o[i] = T(f(A(xp[i]), A(bp[i])));
      } else if (so == 1 && sx == 1 && (bp == nullptr || sb == 0)) {
        const A b = bp ? A(bp[0]) : b0;
        for (int64_t i = 0; i < len; ++i) o[i] = T(f(A(xp[i]), b));
      } else {
        for (int64_t i = 0; i < len; ++i) {
          const A b = bp ? A(bp[i * sb]) : b0;
          o[i * so] = T(f(A(xp[i * sx]), b));
        }
      }
    });
  });
}

}  // namespace

Tensor sbc_cpu(const Tensor& x, const OptTensor& scale, const OptTensor& bias, double scale_value,
               double bias_value, std::optional<double> min, std::optional<double> max) {
  const SbcForwardSetup s = sbc_forward_setup(x, scale, bias, scale_value, bias_value, min, max);
  const int64_t numel = s.out.numel();
  if (numel == 0) return s.out;
  if (nan_bound(min, max)) return fill_nan(s.out);
  cpu::dispatch_floating(to_dtype(x.scalar_type()), [&]<typename T>() { forward_cpu_kernel<T>(s, numel); });
  return s.out;
}
// clamp(x * scale + bias, min, max); scale_value / bias_value stand in for a
// scale / bias given as a number (the tensor is then None).
FUSEDOPS_OP(kSbc,
            "scale_bias_clamp(Tensor x, Tensor? scale, Tensor? bias, float scale_value=1., "
            "float bias_value=0., float? min=None, float? max=None) -> Tensor",
            sbc_cpu, sbc_cuda)

SbcGradTensors sbc_backward_cpu(const Tensor& grad_out, const Tensor& x, const OptTensor& scale,
                                const OptTensor& bias, double scale_value, double bias_value,
                                std::optional<double> min, std::optional<double> max,
                                std::vector<bool> mask) {
  const SbcBackwardSetup s =
      sbc_backward_setup(grad_out, x, scale, bias, scale_value, bias_value, min, max, mask);
  if (s.numel > 0) sbc_backward_cpu_kernel(s);
  return sbc_backward_finish(s);
}
FUSEDOPS_OP(kSbc,
            "_scale_bias_clamp_backward(Tensor grad_out, Tensor x, Tensor? scale, Tensor? bias, "
            "float scale_value, float bias_value, float? min, float? max, bool[3] output_mask) "
            "-> (Tensor, Tensor, Tensor)",
            sbc_backward_cpu, sbc_backward_cuda)

}  // namespace fusedops
