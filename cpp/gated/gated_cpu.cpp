// fusedops.swiglu / fusedops.geglu on the CPU: the shared elementwise loop
// with the functors of cuda/gated/gated_math.h (float32, float64) or their
// twins below that look the activation up by the gate's 16 bits (bfloat16,
// float16), and below each kernel the op it serves.
//   swiglu, geglu                      the public ops; Python
//                                      (src/fusedops/ops/_gated.py) registers
//                                      their autograd and shape functions
//   _swiglu_nograd, _geglu_nograd      the same kernels without autograd
//   _swiglu_backward, _geglu_backward  (grad_gate, grad_up), see gated.h
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "cpp/common/cpu_elementwise.h"
#include "cpp/common/define_op.h"
#include "cpp/gated/gated.h"
#include "cuda/gated/gated_math.h"

namespace fusedops {
namespace {

// A bfloat16 or float16 gate has 2^16 values: act(gate) and act'(gate) of
// each, computed once by activations.h's float math, replace that math (~80
// float operations an element for erf, ~40 for exp) by a load each (where
// that is faster: kByTable). The same bits (NaN's sign aside);
// benchmarks/results/NOTES.md, "The CPU gated ops by table".
struct ActivationTable {
  float act[1 << 16], grad[1 << 16];
};

template <typename T, Activation kAct>
const ActivationTable& activation_table() {
  static const std::unique_ptr<ActivationTable> table = [] {
    auto t = std::make_unique<ActivationTable>();
    std::vector<T> values(1 << 16);
    for (uint32_t i = 0; i < values.size(); ++i) values[i] = std::bit_cast<T>(static_cast<uint16_t>(i));
    std::vector<float> gates(values.size());  // converted as the loops convert them (F16C: NaNs made quiet)
    cpu::to_opmath(values.data(), gates.data(), gates.size());
    for (uint32_t i = 0; i < values.size(); ++i) {
      t->act[i] = activate(kAct, gates[i]);
      t->grad[i] = activate_grad(kAct, gates[i]);
    }
    return t;
  }();
  return *table;
}

// GatedForward and GatedBackward with act and act' looked up by the gate's
// bits; in[] as the layouts order the inputs, the gate's own slot unused.
struct GatedForwardByTable {
  const ActivationTable* table;
  [[gnu::always_inline]] void operator()(uint32_t gate, const float (&in)[2], float (&out)[1]) const {
    out[0] = table->act[gate] * in[1];
  }
};

struct GatedBackwardByTable {
  const ActivationTable* table;
  [[gnu::always_inline]] void operator()(uint32_t gate, const float (&in)[3], float (&out)[2]) const {
    const float grad = in[0], up = in[2];
    out[0] = grad * up * table->grad[gate];
    out[1] = grad * table->act[gate];
  }
};

// One run of a bfloat16 or float16 kernel (cpu::for_each_operand_run's):
// f(gate's bits, the other inputs in float32) element by element. A run of
// dense bfloat16 operands goes straight through (its conversions vectorize
// in place); other runs, and float16's (converted by F16C), a block at a
// time, as cpu::elementwise_run does. The gate is the input before last:
// (gate, up) or (grad, gate, up).
template <typename T, int kOut, int kIn, typename F>
FUSEDOPS_CPU_CLONES void by_table_run(T* const (&out)[kOut], const T* const (&in)[kIn],
                                      const int64_t (&s)[kOut + kIn], int64_t len, const F& f) {
  constexpr int kGate = kIn - 2;
  const auto bits_at = [&](int64_t i) {
    return reinterpret_cast<const uint16_t*>(in[kGate] + i * s[kOut + kGate]);
  };
  const auto each = [&](int64_t n, const uint16_t* gate, const auto& read, const auto& write) {
    for (int64_t i = 0; i < n; ++i) {
      float a[kIn] = {}, b[kOut];
      for (int k = 0; k < kIn; ++k) {
        if (k != kGate) a[k] = read(k, i);
      }
      f(gate[i], a, b);
      for (int k = 0; k < kOut; ++k) write(k, i, b[k]);
    }
  };
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    if (std::all_of(s, s + kOut + kIn, [](int64_t stride) { return stride == 1; })) {
      return each(
          len, bits_at(0), [&](int k, int64_t i) { return float(in[k][i]); },
          [&](int k, int64_t i, float v) { out[k][i] = T(v); });
    }
  }
  float x[kIn][cpu::kBlock], y[kOut][cpu::kBlock];
  uint16_t gate[cpu::kBlock];  // the gate's block, copied as the other inputs are converted
  for (int64_t i0 = 0; i0 < len; i0 += cpu::kBlock) {
    const int64_t m = std::min(cpu::kBlock, len - i0);
    for (int k = 0; k < kIn; ++k) {
      if (k != kGate) cpu::load_block(x[k], in[k] + i0 * s[kOut + k], s[kOut + k], m);
    }
    cpu::load_block(gate, bits_at(i0), s[kOut + kGate], m);
    each(m, gate, [&](int k, int64_t i) { return x[k][i]; }, [&](int k, int64_t i, float v) { y[k][i] = v; });
    for (int k = 0; k < kOut; ++k) cpu::store_block(out[k] + i0 * s[k], y[k], s[k], m);
  }
}

// f over `layout` by by_table_run.
template <typename T, int kOut, int kIn, typename F>
void by_table(const StridedLayout<kOut + kIn>& layout, int64_t numel, T* const (&out)[kOut],
              const T* const (&in)[kIn], const F& f) {
  cpu::for_each_operand_run(layout, numel, out, in,
                            [&](T* const(&o)[kOut], const T* const(&x)[kIn], const int64_t(&s)[kOut + kIn],
                                int64_t len) { by_table_run(o, x, s, len, f); });
}

// Where the tables win: every bfloat16 gate (the values of a gate's usual
// range fit L1 in a few KB), float16's for GELU only (its mantissa is 8x
// bfloat16's, so are the lookups' cache lines: slower than SiLU's exp,
// faster than GELU's erf).
template <typename T, Activation kAct>
constexpr bool kByTable =
    std::is_same_v<T, c10::BFloat16> || (std::is_same_v<T, c10::Half> && kAct != Activation::Silu);

Tensor gated_cpu(const char* op, Activation act, const Tensor& gate, const OptTensor& up) {
  const GatedForwardCall c = gated_forward_setup(op, gate, up);
  const int64_t n = c.out.numel();
  if (n == 0) return c.out;
  dispatch_gate(act, [&]<Activation kAct>() {
    cpu::dispatch_floating(to_dtype(gate.scalar_type()), [&]<typename T>() {
      T* const out[] = {static_cast<T*>(c.out.data_ptr())};
      const T* const in[] = {static_cast<const T*>(c.gate_data), static_cast<const T*>(c.up_data)};
      if constexpr (kByTable<T, kAct>) {
        by_table(c.layout, n, out, in, GatedForwardByTable{&activation_table<T, kAct>()});
      } else {
        cpu::elementwise(c.layout, n, out, in, GatedForward<kAct>{});
      }
    });
  });
  return c.out;
}

GatedGrads gated_backward_cpu(const char* op, Activation act, const Tensor& grad, const Tensor& gate,
                              const OptTensor& up) {
  const GatedBackwardCall c = gated_backward_setup(op, grad, gate, up);
  if (c.numel == 0) return {c.grad_gate, c.grad_up};
  dispatch_gate(act, [&]<Activation kAct>() {
    cpu::dispatch_floating(to_dtype(gate.scalar_type()), [&]<typename T>() {
      T* const out[] = {static_cast<T*>(c.grad_gate_data), static_cast<T*>(c.grad_up_data)};
      const T* const in[] = {static_cast<const T*>(c.grad_data), static_cast<const T*>(c.gate_data),
                             static_cast<const T*>(c.up_data)};
      if constexpr (kByTable<T, kAct>) {
        by_table(c.layout, c.numel, out, in, GatedBackwardByTable{&activation_table<T, kAct>()});
      } else {
        cpu::elementwise(c.layout, c.numel, out, in, GatedBackward<kAct>{});
      }
    });
  });
  return {c.grad_gate, c.grad_up};
}

Tensor swiglu_cpu(const Tensor& gate, OptTensor up) { return gated_cpu(kSwiglu, Activation::Silu, gate, up); }
FUSEDOPS_OP(kSwiglu, "swiglu(Tensor gate, Tensor? up=None) -> Tensor", swiglu_cpu, swiglu_cuda)

Tensor geglu_cpu(const Tensor& gate, OptTensor up, std::string approximate) {
  return gated_cpu(kGeglu, geglu_activation(approximate), gate, up);
}
FUSEDOPS_OP(kGeglu, "geglu(Tensor gate, Tensor? up=None, str approximate='none') -> Tensor", geglu_cpu,
            geglu_cuda)

GatedGrads swiglu_backward_cpu(const Tensor& grad, const Tensor& gate, OptTensor up) {
  return gated_backward_cpu(kSwiglu, Activation::Silu, grad, gate, up);
}
FUSEDOPS_OP(kSwiglu, "_swiglu_backward(Tensor grad, Tensor gate, Tensor? up) -> (Tensor, Tensor)",
            swiglu_backward_cpu, swiglu_backward_cuda)

GatedGrads geglu_backward_cpu(const Tensor& grad, const Tensor& gate, OptTensor up, std::string approximate) {
  return gated_backward_cpu(kGeglu, geglu_activation(approximate), grad, gate, up);
}
FUSEDOPS_OP(kGeglu,
            "_geglu_backward(Tensor grad, Tensor gate, Tensor? up, str approximate) -> (Tensor, Tensor)",
            geglu_backward_cpu, geglu_backward_cuda)

}  // namespace

}  // namespace fusedops
