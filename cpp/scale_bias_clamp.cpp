// fusedops.scale_bias_clamp: CPU kernels, Meta (shape) kernels and autograd.
//
// CPU forward: one parallel pass over coalesced runs, with dense inner loops
// the compiler vectorizes. CPU backward: one pass that writes grad_x and
// partial sums of grad_scale / grad_bias per fixed-size chunk (the chunking
// does not depend on the thread count), then the partials are added in chunk
// order: bitwise reproducible on any number of threads.
#include "cpp/scale_bias_clamp.h"

#include <bit>
#include <cstdint>
#include <type_traits>

#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "cpp/autograd_utils.h"
#include "cpp/cpu_loops.h"

namespace fusedops {

std::tuple<at::Tensor, at::Tensor, at::Tensor> sbc_backward_finish(SbcBackwardSetup& s) {
  at::Tensor grad_bias = s.grad_bias;
  if (s.grad_bias_full.defined()) grad_bias = at::sum_to(s.grad_bias_full, s.bias_sizes);
  return {s.grad_x, s.grad_scale, grad_bias};
}

namespace {

using OptTensor = std::optional<at::Tensor>;

// ------------------------------------------------------------- CPU forward --

template <typename T>
void forward_cpu_kernel(const SbcForwardSetup& s) {
  using A = at::opmath_type<T>;
  const StridedLayout<3>& l = s.layout;
  const SbcClamp<A> clamp = make_clamp<A>(s.scalars);
  const A scale = s.scalars.scale ? A(*static_cast<const T*>(s.scalars.scale)) : A(s.scalars.scale_value);
  const A b0 = A(s.scalars.bias_value);
  T* out = s.out.mutable_data_ptr<T>();
  const T* x = s.x.const_data_ptr<T>();
  const T* bias = s.bias.defined() ? s.bias.const_data_ptr<T>() : nullptr;
  const int inner = l.ndim - 1;
  const int64_t so = l.strides[0][inner], sx = l.strides[1][inner], sb = l.strides[2][inner];
  at::parallel_for(0, s.out.numel(), cpu::kGrain, [&](int64_t begin, int64_t end) {
    const A lo = clamp.lo, hi = clamp.hi, sc = scale;
    auto f = [lo, hi, sc](A xv, A b) {
      const A v = xv * sc + b;
      const A r = v < lo ? lo : v;
      return r > hi ? hi : r;
    };
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

at::Tensor sbc_cpu(const at::Tensor& x, const OptTensor& scale, const OptTensor& bias,
                   double scale_value, double bias_value, std::optional<double> min,
                   std::optional<double> max) {
  sbc_check(x, scale, bias);
  SbcForwardSetup s = sbc_forward_setup(x, scale, bias, scale_value, bias_value, min, max);
  if (s.out.numel() == 0) return s.out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "fusedops.scale_bias_clamp",
                                  [&] { forward_cpu_kernel<scalar_t>(s); });
  return s.out;
}

// ------------------------------------------------------------ CPU backward --

// Elements per chunk of the fixed partition the reductions follow, and the
// number of independent accumulators (vectorizable, order fixed).
constexpr int64_t kChunk = 16384;
constexpr int kLanes = 8;

template <typename A>
A sum_lanes(const A (&lanes)[kLanes]) {
  A total = 0;
  for (int j = 0; j < kLanes; ++j) total += lanes[j];
  return total;
}

template <typename T>
struct BwdContext {
  using A = at::opmath_type<T>;
  SbcClamp<A> clamp;
  A scale, b0;
};

template <typename T, bool kUnit, bool kBiasConst, bool kBounded, bool kWriteGx, bool kWriteGb>
void backward_run_impl(const BwdContext<T>& c, int64_t len, T* __restrict__ gx, T* __restrict__ gb,
                       const T* __restrict__ g, int64_t sg, const T* __restrict__ x, int64_t sx,
                       const T* __restrict__ bias, int64_t sb, at::opmath_type<T> (&lane_s)[kLanes],
                       at::opmath_type<T> (&lane_b)[kLanes]);

// Calls f(std::bool_constant<flag>...) for the runtime flags: one
// instantiation of f per combination.
template <typename F>
void with_flags(F&& f) {
  f();
}

template <typename F, typename... Rest>
void with_flags(F&& f, bool flag, Rest... rest) {
  if (flag) {
    with_flags([&](auto... later) { f(std::true_type{}, later...); }, rest...);
  } else {
    with_flags([&](auto... later) { f(std::false_type{}, later...); }, rest...);
  }
}

// One run of len elements. gx/gb (contiguous) may be null; bias null means b0.
// kUnit: grad_out, x and a non-null bias advance by 1 (or bias by 0 if kBiasConst).
// One element: gm = mask ? g : 0, branch-free (g loaded unconditionally, the
// mask a pair of float compares), so the loops vectorize. Without bounds
// everything passes, NaN included.
template <bool kBounded, typename A>
inline void bwd_element(A xa, A gv, A b, A sc, A lo, A hi, A& gm) {
  if constexpr (kBounded) {
    // A bit mask rather than a select: GCC turns `pass ? gv : 0` into a
    // (mispredicted) branch, but vectorizes the integer and.
    using U = std::conditional_t<sizeof(A) == 8, uint64_t, uint32_t>;
    const A v = xa * sc + b;
    const U mask = U(0) - U((v >= lo) & (v <= hi));
    gm = std::bit_cast<A>(std::bit_cast<U>(gv) & mask);
  } else {
    gm = gv;
  }
}

// One run of len elements. gx/gb (contiguous) may be null; bias null means b0.
// kUnit: grad_out, x and a non-null bias advance by 1 (or bias by 0 if kBiasConst).
// Element i of the run goes to lane i % kLanes: the summation order is fixed
// by the run alone. Lanes live in locals (no aliasing with the outputs).
// Whether a bound applies and which outputs are written are compile-time
// flags, so that the inner loops have no branches and vectorize.
template <typename T, bool kUnit, bool kBiasConst>
void backward_run(const BwdContext<T>& c, int64_t len, T* __restrict__ gx, T* __restrict__ gb,
                  const T* __restrict__ g, int64_t sg, const T* __restrict__ x, int64_t sx,
                  const T* __restrict__ bias, int64_t sb, at::opmath_type<T> (&lane_s)[kLanes],
                  at::opmath_type<T> (&lane_b)[kLanes]) {
  with_flags(
      [&](auto bounded, auto write_gx, auto write_gb) {
        backward_run_impl<T, kUnit, kBiasConst, bounded(), write_gx(), write_gb()>(c, len, gx, gb, g, sg, x, sx,
                                                                                 bias, sb, lane_s, lane_b);
      },
      c.clamp.any_bound, gx != nullptr, gb != nullptr);
}

template <typename T, bool kUnit, bool kBiasConst, bool kBounded, bool kWriteGx, bool kWriteGb>
void backward_run_impl(const BwdContext<T>& c, int64_t len, T* __restrict__ gx, T* __restrict__ gb,
                       const T* __restrict__ g, int64_t sg, const T* __restrict__ x, int64_t sx,
                       const T* __restrict__ bias, int64_t sb, at::opmath_type<T> (&lane_s)[kLanes],
                       at::opmath_type<T> (&lane_b)[kLanes]) {
  using A = at::opmath_type<T>;
  const A bconst = bias ? A(bias[0]) : c.b0;
  const A sc = c.scale, lo = c.clamp.lo, hi = c.clamp.hi;
  A ls[kLanes], lb[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    ls[j] = lane_s[j];
    lb[j] = lane_b[j];
  }
  auto load = [&](int64_t k, A& xa, A& gv, A& b) {
    xa = A(kUnit ? x[k] : x[k * sx]);
    gv = A(kUnit ? g[k] : g[k * sg]);
    b = kBiasConst ? bconst : A(kUnit ? bias[k] : bias[k * sb]);
  };
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes) {
    A xa[kLanes], gm[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      A gv, b;
      load(i + j, xa[j], gv, b);
      bwd_element<kBounded>(xa[j], gv, b, sc, lo, hi, gm[j]);
    }
    if constexpr (kWriteGx) {
      for (int j = 0; j < kLanes; ++j) gx[i + j] = T(gm[j] * sc);
    }
    if constexpr (kWriteGb) {
      for (int j = 0; j < kLanes; ++j) gb[i + j] = T(gm[j]);
    }
    for (int j = 0; j < kLanes; ++j) {
      ls[j] += gm[j] * xa[j];
      lb[j] += gm[j];
    }
  }
  for (int j = 0; i < len; ++i, ++j) {
    A xa, gv, b, gm;
    load(i, xa, gv, b);
    bwd_element<kBounded>(xa, gv, b, sc, lo, hi, gm);
    if constexpr (kWriteGx) gx[i] = T(gm * sc);
    if constexpr (kWriteGb) gb[i] = T(gm);
    ls[j] += gm * xa;
    lb[j] += gm;
  }
  for (int j = 0; j < kLanes; ++j) {
    lane_s[j] = ls[j];
    lane_b[j] = lb[j];
  }
}

template <typename T>
void backward_generic(const SbcBackwardSetup& s, at::opmath_type<T>* partial_s,
                      at::opmath_type<T>* partial_b) {
  using A = at::opmath_type<T>;
  const StridedLayout<4>& l = s.layout;
  const BwdContext<T> c{make_clamp<A>(s.scalars),
                        s.scalars.scale ? A(*static_cast<const T*>(s.scalars.scale)) : A(s.scalars.scale_value),
                        A(s.scalars.bias_value)};
  T* grad_x = static_cast<T*>(s.grads.grad_x);
  T* grad_bf = static_cast<T*>(s.grads.grad_bias_full);
  const T* g = s.grad_out.const_data_ptr<T>();
  const T* x = s.x.const_data_ptr<T>();
  const T* bias = s.bias.defined() ? s.bias.const_data_ptr<T>() : nullptr;
  const int inner = l.ndim - 1;
  const int64_t sg = l.strides[1][inner], sx = l.strides[2][inner], sb = l.strides[3][inner];
  const int64_t n = s.numel;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      A lane_s[kLanes] = {}, lane_b[kLanes] = {};
      cpu::for_each_run(l, k * kChunk, std::min(n, (k + 1) * kChunk), [&](int64_t len, const int64_t* off) {
        T* gx = grad_x ? grad_x + off[0] : nullptr;
        T* gb = grad_bf ? grad_bf + off[0] : nullptr;
        const T* bp = bias ? bias + off[3] : nullptr;
        const bool unit = sg == 1 && sx == 1;
        if (unit && (bp == nullptr || sb == 0)) {
          backward_run<T, true, true>(c, len, gx, gb, g + off[1], sg, x + off[2], sx, bp, sb, lane_s, lane_b);
        } else if (unit && sb == 1) {
          backward_run<T, true, false>(c, len, gx, gb, g + off[1], sg, x + off[2], sx, bp, sb, lane_s, lane_b);
        } else if (bp == nullptr || sb == 0) {
          backward_run<T, false, true>(c, len, gx, gb, g + off[1], sg, x + off[2], sx, bp, sb, lane_s, lane_b);
        } else {
          backward_run<T, false, false>(c, len, gx, gb, g + off[1], sg, x + off[2], sx, bp, sb, lane_s, lane_b);
        }
      });
      partial_s[k] = sum_lanes(lane_s);
      partial_b[k] = sum_lanes(lane_b);
    }
  });
}

// [rows, cols] with a [cols] bias (or a number): tasks are fixed blocks of
// rows x columns; each adds its column sums into its row of partial_b
// ([row_chunks, cols]) and its scale sum into partial_s[task].
constexpr int64_t kColBlock = 4096;
constexpr int64_t kMinRows = 64;

struct RowsTiling {
  int64_t rows_per_chunk, row_chunks, col_blocks;
};

inline RowsTiling rows_tiling(int64_t rows, int64_t cols) {
  RowsTiling t;
  const int64_t width = std::min(cols, kColBlock);
  t.rows_per_chunk = std::max(kMinRows, (kChunk + width - 1) / width);
  t.row_chunks = (rows + t.rows_per_chunk - 1) / t.rows_per_chunk;
  t.col_blocks = (cols + kColBlock - 1) / kColBlock;
  return t;
}

template <typename T>
void backward_rows(const SbcBackwardSetup& s, const RowsTiling& t, at::opmath_type<T>* partial_s,
                   at::opmath_type<T>* partial_b) {
  using A = at::opmath_type<T>;
  const BwdContext<T> c{make_clamp<A>(s.scalars),
                        s.scalars.scale ? A(*static_cast<const T*>(s.scalars.scale)) : A(s.scalars.scale_value),
                        A(s.scalars.bias_value)};
  T* grad_x = static_cast<T*>(s.grads.grad_x);
  const T* g = s.grad_out.const_data_ptr<T>();
  const T* x = s.x.const_data_ptr<T>();
  const T* bias = s.bias.defined() ? s.bias.const_data_ptr<T>() : nullptr;
  const int64_t rows = s.shape.rows, cols = s.shape.cols;
  const int64_t sg = s.layout.strides[1][0], sx = s.layout.strides[2][0];
  at::parallel_for(0, t.row_chunks * t.col_blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) {
      const int64_t rc = task / t.col_blocks, cb = task % t.col_blocks;
      const int64_t c0 = cb * kColBlock, width = std::min(kColBlock, cols - c0);
      const int64_t r0 = rc * t.rows_per_chunk, r1 = std::min(rows, r0 + t.rows_per_chunk);
      A* __restrict__ pb = partial_b ? partial_b + rc * cols + c0 : nullptr;
      if (pb) std::fill(pb, pb + width, A(0));
      A lane_s[kLanes] = {}, lane_dummy[kLanes] = {};
      T gm_buf[kColBlock];
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict__ gr = g + r * sg + c0;
        const T* __restrict__ xr = x + r * sx + c0;
        const T* __restrict__ br = bias ? bias + c0 : nullptr;
        T* __restrict__ gxr = grad_x ? grad_x + r * cols + c0 : nullptr;
        // The row is one unit-stride run; g * mask (exact in T) goes through
        // a row buffer into the column sums.
        T* gm_row = pb ? gm_buf : nullptr;
        if (br) {
          backward_run<T, true, false>(c, width, gxr, gm_row, gr, 1, xr, 1, br, 1, lane_s, lane_dummy);
        } else {
          backward_run<T, true, true>(c, width, gxr, gm_row, gr, 1, xr, 1, nullptr, 0, lane_s, lane_dummy);
        }
        if (pb) {
          for (int64_t i = 0; i < width; ++i) pb[i] += A(gm_buf[i]);
        }
      }
      partial_s[task] = sum_lanes(lane_s);
    }
  });
}

template <typename T>
void backward_cpu_kernel(SbcBackwardSetup& s) {
  using A = at::opmath_type<T>;
  const at::ScalarType acc = c10::CppTypeToScalarType<A>::value;
  const bool rows = s.shape.path == SbcPath::Rows;
  const RowsTiling tiling = rows ? rows_tiling(s.shape.rows, s.shape.cols) : RowsTiling{};
  const int64_t tasks = rows ? tiling.row_chunks * tiling.col_blocks : (s.numel + kChunk - 1) / kChunk;
  at::Tensor partial_s = at::empty({tasks}, at::TensorOptions().dtype(acc));
  at::Tensor partial_b;
  if (rows) {
    if (s.shape.bias_grad == SbcBiasGrad::Rows) {
      partial_b = at::empty({tiling.row_chunks, s.shape.cols}, at::TensorOptions().dtype(acc));
    }
    backward_rows<T>(s, tiling, partial_s.data_ptr<A>(), partial_b.defined() ? partial_b.data_ptr<A>() : nullptr);
  } else {
    partial_b = at::empty({tasks}, at::TensorOptions().dtype(acc));
    backward_generic<T>(s, partial_s.data_ptr<A>(), partial_b.data_ptr<A>());
  }
  // Final sums in a fixed order.
  auto sum_in_order = [](const A* p, int64_t n) {
    A total = 0;
    for (int64_t i = 0; i < n; ++i) total += p[i];
    return total;
  };
  if (s.grads.grad_scale) {
    *static_cast<T*>(s.grads.grad_scale) = T(sum_in_order(partial_s.data_ptr<A>(), tasks));
  }
  if (s.shape.bias_grad == SbcBiasGrad::Single) {
    *static_cast<T*>(s.grads.grad_bias_sum) = T(sum_in_order(partial_b.data_ptr<A>(), tasks));
  } else if (s.shape.bias_grad == SbcBiasGrad::Rows) {
    const A* p = partial_b.data_ptr<A>();
    T* out = static_cast<T*>(s.grads.grad_bias_sum);
    const int64_t cols = s.shape.cols, chunks = tiling.row_chunks;
    at::parallel_for(0, cols, kColBlock, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; c += kColBlock) {
        const int64_t w = std::min(kColBlock, c1 - c);
        A acc_cols[kColBlock];
        for (int64_t i = 0; i < w; ++i) acc_cols[i] = p[c + i];
        for (int64_t r = 1; r < chunks; ++r) {
          for (int64_t i = 0; i < w; ++i) acc_cols[i] += p[r * cols + c + i];
        }
        for (int64_t i = 0; i < w; ++i) out[c + i] = T(acc_cols[i]);
      }
    });
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sbc_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& x, const OptTensor& scale, const OptTensor& bias,
    double scale_value, double bias_value, std::optional<double> min, std::optional<double> max,
    std::array<bool, 3> mask) {
  sbc_check_backward(grad_out, x, scale, bias);
  SbcBackwardSetup s = sbc_backward_setup(grad_out, x, scale, bias, scale_value, bias_value, min, max, mask);
  if (s.numel > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(),
                                    "fusedops.scale_bias_clamp_backward",
                                    [&] { backward_cpu_kernel<scalar_t>(s); });
  }
  return sbc_backward_finish(s);
}

// ------------------------------------------------------------------- Meta --

at::Tensor sbc_meta(const at::Tensor& x, const OptTensor& scale, const OptTensor& bias, double,
                    double, std::optional<double>, std::optional<double>) {
  sbc_check(x, scale, bias);
  return at::empty_symint(x.sym_sizes(), x.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sbc_backward_meta(
    const at::Tensor& grad_out, const at::Tensor& x, const OptTensor& scale, const OptTensor& bias,
    double, double, std::optional<double>, std::optional<double>, std::array<bool, 3> mask) {
  sbc_check_backward(grad_out, x, scale, bias);
  at::Tensor grad_x, grad_scale, grad_bias;
  if (mask[0]) grad_x = at::empty_symint(x.sym_sizes(), x.options());
  if (mask[1] && present(scale)) grad_scale = at::empty_symint(scale->sym_sizes(), x.options());
  if (mask[2] && present(bias)) grad_bias = at::empty_symint(bias->sym_sizes(), x.options());
  return {grad_x, grad_scale, grad_bias};
}

// --------------------------------------------------------------- Autograd --

const auto& forward_op() {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fusedops::scale_bias_clamp", "")
          .typed<at::Tensor(const at::Tensor&, const OptTensor&, const OptTensor&, double, double,
                            std::optional<double>, std::optional<double>)>();
  return op;
}

const auto& backward_op() {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("fusedops::scale_bias_clamp_backward", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
              const at::Tensor&, const at::Tensor&, const OptTensor&, const OptTensor&, double,
              double, std::optional<double>, std::optional<double>, std::array<bool, 3>)>();
  return op;
}

// The backward recomputes v = x * scale + bias (and the clamp mask) from x
// instead of saving the output.
class SbcFunction : public torch::autograd::Function<SbcFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const OptTensor& scale, const OptTensor& bias, double scale_value,
                            double bias_value, std::optional<double> min,
                            std::optional<double> max) {
    const bool has_scale = present(scale) != nullptr, has_bias = present(bias) != nullptr;
    ctx->save_for_backward({x, has_scale ? *scale : at::Tensor(), has_bias ? *bias : at::Tensor()});
    // needs_input_grad counts only the tensor arguments that were given.
    ctx->saved_data["scale_edge"] = has_scale ? int64_t(1) : int64_t(-1);
    ctx->saved_data["bias_edge"] = has_bias ? int64_t(has_scale ? 2 : 1) : int64_t(-1);
    ctx->saved_data["scale_value"] = scale_value;
    ctx->saved_data["bias_value"] = bias_value;
    ctx->saved_data["min"] = min;
    ctx->saved_data["max"] = max;
    at::AutoDispatchBelowADInplaceOrView guard;
    return forward_op().call(x, scale, bias, scale_value, bias_value, min, max);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t scale_edge = ctx->saved_data["scale_edge"].toInt();
    const int64_t bias_edge = ctx->saved_data["bias_edge"].toInt();
    const std::array<bool, 3> mask = {ctx->needs_input_grad(0),
                                      scale_edge >= 0 && ctx->needs_input_grad(scale_edge),
                                      bias_edge >= 0 && ctx->needs_input_grad(bias_edge)};
    auto opt = [](const at::Tensor& t) { return t.defined() ? OptTensor(t) : OptTensor(); };
    auto [grad_x, grad_scale, grad_bias] = backward_op().call(
        grads[0], saved[0], opt(saved[1]), opt(saved[2]), ctx->saved_data["scale_value"].toDouble(),
        ctx->saved_data["bias_value"].toDouble(), ctx->saved_data["min"].toOptional<double>(),
        ctx->saved_data["max"].toOptional<double>(), mask);
    return {grad_x, grad_scale, grad_bias, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor sbc_autograd(const at::Tensor& x, const OptTensor& scale, const OptTensor& bias,
                        double scale_value, double bias_value, std::optional<double> min,
                        std::optional<double> max) {
  if (!needs_autograd({&x, optional_ptr(scale), optional_ptr(bias)})) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return forward_op().call(x, scale, bias, scale_value, bias_value, min, max);
  }
  return SbcFunction::apply(x, scale, bias, scale_value, bias_value, min, max);
}

// The backward op is not differentiable: its outputs carry a grad_fn that
// raises, so a double backward fails loudly instead of giving wrong grads.
class SbcBackwardFunction : public torch::autograd::Function<SbcBackwardFunction> {
 public:
  static torch::autograd::variable_list forward(
      torch::autograd::AutogradContext* ctx, const at::Tensor& grad_out, const at::Tensor& x,
      const OptTensor& scale, const OptTensor& bias, double scale_value, double bias_value,
      std::optional<double> min, std::optional<double> max, std::array<bool, 3> mask) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [grad_x, grad_scale, grad_bias] =
        backward_op().call(grad_out, x, scale, bias, scale_value, bias_value, min, max, mask);
    // Only the defined gradients are outputs (autograd cannot wrap undefined ones).
    torch::autograd::variable_list out;
    for (const at::Tensor& t : {grad_x, grad_scale, grad_bias}) {
      if (t.defined()) out.push_back(t);
    }
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list) {
    TORCH_CHECK(false, "fusedops.scale_bias_clamp: double backward is not supported");
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> sbc_backward_autograd(
    const at::Tensor& grad_out, const at::Tensor& x, const OptTensor& scale, const OptTensor& bias,
    double scale_value, double bias_value, std::optional<double> min, std::optional<double> max,
    std::array<bool, 3> mask) {
  const auto out =
      SbcBackwardFunction::apply(grad_out, x, scale, bias, scale_value, bias_value, min, max, mask);
  const std::array<bool, 3> defined = {mask[0], mask[1] && present(scale), mask[2] && present(bias)};
  at::Tensor grads[3];
  size_t next = 0;
  for (int i = 0; i < 3; ++i) {
    if (defined[i]) grads[i] = out.at(next++);
  }
  return {grads[0], grads[1], grads[2]};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(fusedops, m) {
  // clamp(x * scale + bias, min, max); scale_value / bias_value stand in for a
  // scale / bias given as a number (the tensor is then None).
  m.def(
      "scale_bias_clamp(Tensor x, Tensor? scale, Tensor? bias, float scale_value=1., "
      "float bias_value=0., float? min=None, float? max=None) -> Tensor");
  m.def(
      "scale_bias_clamp_backward(Tensor grad_out, Tensor x, Tensor? scale, Tensor? bias, "
      "float scale_value, float bias_value, float? min, float? max, bool[3] output_mask) "
      "-> (Tensor, Tensor, Tensor)");
}

#ifndef FUSEDOPS_WITH_CUDA
TORCH_LIBRARY_IMPL(fusedops, CUDA, m) {
  for (const char* name : {"scale_bias_clamp", "scale_bias_clamp_backward"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&no_cuda_kernel>());
  }
}
#endif

TORCH_LIBRARY_IMPL(fusedops, CPU, m) {
  m.impl("scale_bias_clamp", &sbc_cpu);
  m.impl("scale_bias_clamp_backward", &sbc_backward_cpu);
}
TORCH_LIBRARY_IMPL(fusedops, Meta, m) {
  m.impl("scale_bias_clamp", &sbc_meta);
  m.impl("scale_bias_clamp_backward", &sbc_backward_meta);
}
TORCH_LIBRARY_IMPL(fusedops, Autograd, m) {
  m.impl("scale_bias_clamp", &sbc_autograd);
  m.impl("scale_bias_clamp_backward", &sbc_backward_autograd);
}

}  // namespace fusedops
