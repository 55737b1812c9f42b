// The CPU twin of cuda/common/elementwise.cuh: kOut outputs computed element
// by element from kIn inputs of one type, over a StridedLayout<kOut + kIn>
// (the outputs first), on torch's intra-op threads, with the same functors:
//   template <typename A> void operator()(const A (&in)[kIn], A (&out)[kOut]) const
//
// A run with every operand dense goes straight through f, element by element,
// a loop the compiler vectorizes (c10::BFloat16 conversions included). Other
// runs (strides, a broadcast operand), and float16's (converted by F16C a
// block at a time, cpu.h), go through in blocks: the inputs gathered into
// op-math buffers, f over the buffers, the results scattered.
//
// On x86-64 both run loops are compiled for AVX-512, AVX2 and the wheel's
// baseline (SSE2), and the loader picks one by the CPU (cpu.h;
// benchmarks/results/NOTES.md, "The shared CPU elementwise loop in the half types").
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpp/common/cpu.h"

namespace fusedops::cpu {

// Elements per conversion block: the buffers of five operands stay in L1.
constexpr int64_t kBlock = 256;

template <typename A, typename T>
inline void load_block(A* __restrict__ dst, const T* __restrict__ src, int64_t stride, int64_t m) {
  if (stride == 1) {
    to_opmath(src, dst, m);
  } else if (stride == 0) {  // broadcast
    std::fill(dst, dst + m, A(src[0]));
  } else {
    for (int64_t i = 0; i < m; ++i) dst[i] = A(src[i * stride]);
  }
}

template <typename T, typename A>
inline void store_block(T* __restrict__ dst, const A* __restrict__ src, int64_t stride, int64_t m) {
  if (stride == 1) {
    from_opmath(src, dst, m);
  } else {
    for (int64_t i = 0; i < m; ++i) dst[i * stride] = T(src[i]);
  }
}

// out_k[i] = f(in[i])_k for i < len, every operand dense: the loop the
// compiler vectorizes, over the operands themselves or over op-math buffers.
template <typename T, int kOut, int kIn, typename F>
[[gnu::always_inline]] inline void dense_loop(T* const (&out)[kOut], const T* const (&in)[kIn], int64_t len,
                                              const F& f) {
  using A = opmath_t<T>;
  for (int64_t i = 0; i < len; ++i) {
    A a[kIn], b[kOut];
    for (int k = 0; k < kIn; ++k) a[k] = A(in[k][i]);
    f(a, b);
    for (int k = 0; k < kOut; ++k) out[k][i] = T(b[k]);
  }
}

// One run of len elements: operand k starts at p_k and advances by s[k].
template <typename T, int kOut, int kIn, typename F>
FUSEDOPS_CPU_CLONES void elementwise_run(T* const (&out)[kOut], const T* const (&in)[kIn],
                                         const int64_t (&s)[kOut + kIn], int64_t len, const F& f) {
  using A = opmath_t<T>;
  A x[kIn][kBlock], y[kOut][kBlock];
  const A* xs[kIn];
  A* ys[kOut];
  for (int k = 0; k < kIn; ++k) xs[k] = x[k];
  for (int k = 0; k < kOut; ++k) ys[k] = y[k];
  for (int64_t i0 = 0; i0 < len; i0 += kBlock) {
    const int64_t m = std::min(kBlock, len - i0);
    for (int k = 0; k < kIn; ++k) load_block(x[k], in[k] + i0 * s[kOut + k], s[kOut + k], m);
    dense_loop(ys, xs, m, f);
    for (int k = 0; k < kOut; ++k) store_block(out[k] + i0 * s[k], y[k], s[k], m);
  }
}

// A run with every operand dense: no buffers.
template <typename T, int kOut, int kIn, typename F>
FUSEDOPS_CPU_CLONES void elementwise_dense_run(T* const (&out)[kOut], const T* const (&in)[kIn], int64_t len,
                                               const F& f) {
  dense_loop(out, in, len, f);
}

// run(o, x, s, len) for each run of `layout` (numel > 0 elements), on
// torch's intra-op threads: o[k] / x[k] point at the run's first element of
// output / input k, operand k advances by s[k] (outputs first). out[k] /
// in[k] point at operand k's element 0.
template <typename T, int kOut, int kIn, typename Run>
void for_each_operand_run(const StridedLayout<kOut + kIn>& layout, int64_t numel, T* const (&out)[kOut],
                          const T* const (&in)[kIn], const Run& run) {
  int64_t s[kOut + kIn];
  for (int k = 0; k < kOut + kIn; ++k) s[k] = layout.strides[k][layout.ndim - 1];
  parallel_for(numel, kGrain, [&](int64_t begin, int64_t end) {
    for_each_run(layout, begin, end, [&](int64_t len, const int64_t* off) {
      T* o[kOut];
      const T* x[kIn];
      for (int k = 0; k < kOut; ++k) o[k] = out[k] + off[k];
      for (int k = 0; k < kIn; ++k) x[k] = in[k] + off[kOut + k];
      run(o, x, s, len);
    });
  });
}

// out_k = f(in) over `layout` (numel > 0 elements); out[k] / in[k] point at
// operand k's element 0.
template <typename T, int kOut, int kIn, typename F>
void elementwise(const StridedLayout<kOut + kIn>& layout, int64_t numel, T* const (&out)[kOut],
                 const T* const (&in)[kIn], const F& f) {
  bool dense = true;
  for (int k = 0; k < kOut + kIn; ++k) dense = dense && layout.strides[k][layout.ndim - 1] == 1;
  for_each_operand_run(
      layout, numel, out, in,
      [&](T* const(&o)[kOut], const T* const(&x)[kIn], const int64_t(&s)[kOut + kIn], int64_t len) {
        if constexpr (!std::is_same_v<T, c10::Half>) {
          if (dense) return elementwise_dense_run(o, x, len, f);
        }
        elementwise_run(o, x, s, len, f);
      });
}

}  // namespace fusedops::cpu
