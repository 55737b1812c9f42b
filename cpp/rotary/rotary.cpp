// fusedops.rotary: checks, set-up, CPU kernel, registrations.
//   rotary            the public op, (q_out, k_out); Python
//                     (src/fusedops/ops/rotary.py) or accel/rotary/ registers
//                     its autograd, Python its shape function
//   _rotary_nograd    the same kernels without autograd
//   _rotary_backward  (grad_q, grad_k) from the outputs' gradients: the
//                     transposed rotation; a gradient given as None (an output
//                     not used) gets a 0-element tensor
#include "cpp/rotary/rotary.h"

#include <algorithm>

#include "cpp/common/cpu.h"
#include "cpp/common/define_op.h"
#include "cuda/common/with_flags.h"

namespace fusedops {
namespace {

// q, k or one of their gradients, named `name`.
void check_heads(const char* name, const Tensor& x) {
  check_floating(kRotary, name, x);
  FUSEDOPS_CHECK(x.dim() == 4, kRotary, name, " must be 4-D [batch, heads, seq, head_dim], got shape ",
                 ShapeText{x.sizes()});
}

// `first` (q, or the first gradient given) sets the dtype, device and shape.
void check_first(const char* name, const Tensor& x) {
  check_heads(name, x);
  FUSEDOPS_CHECK(x.size(3) % 2 == 0, kRotary, name, "'s head_dim (its last dim) must be even, got ",
                 x.size(3));
}

void check_second(const char* first_name, const Tensor& first, const char* name, const Tensor& x) {
  check_heads(name, x);
  check_same_dtype_device(kRotary, first_name, first, name, x);
  const auto a = first.sizes(), b = x.sizes();
  FUSEDOPS_CHECK(a[0] == b[0] && a[2] == b[2] && a[3] == b[3], kRotary, name, " of shape ", ShapeText{b},
                 " must match ", first_name, " of shape ", ShapeText{a},
                 " in batch, seq and head_dim (dims 0, 2 and 3)");
}

// cos or sin: `first`'s dtype, or float32 with a half-type `first`; its device.
void check_table_type(const char* first_name, const Tensor& first, const char* name, const Tensor& t) {
  check_floating(kRotary, name, t);
  const ScalarType x = first.scalar_type(), c = t.scalar_type();
  const bool half = x == ScalarType::Half || x == ScalarType::BFloat16;
  FUSEDOPS_CHECK(c == x || (half && c == ScalarType::Float), kRotary, name, " must have the same dtype as ",
                 first_name, " (", dtype_name(x), half ? ") or float32" : ")", ", got ", dtype_name(c));
  check_same_device(kRotary, first_name, first, name, t);
}

// cos: [seq, R], [batch, seq, R] or [batch, 1, seq, R] (HF's after its
// unsqueeze), batch 1 or first's, R even and <= head_dim; sin: cos's shape.
void check_tables(const char* first_name, const Tensor& first, const Tensor& cos, const Tensor& sin) {
  check_table_type(first_name, first, "cos", cos);
  check_table_type(first_name, first, "sin", sin);
  FUSEDOPS_CHECK(sin.scalar_type() == cos.scalar_type(), kRotary, "sin must have the same dtype as cos (",
                 dtype_name(cos.scalar_type()), "), got ", dtype_name(sin.scalar_type()));
  const auto c = cos.sizes(), x = first.sizes();
  const int64_t n = cos.dim();
  FUSEDOPS_CHECK(n == 2 || n == 3 || (n == 4 && c[1] == 1), kRotary,
                 "cos must be [seq, R], [batch, seq, R] or [batch, 1, seq, R], got shape ", ShapeText{c});
  FUSEDOPS_CHECK(n == 2 || c[0] == 1 || c[0] == x[0], kRotary, "cos of shape ", ShapeText{c},
                 " must have batch size 1 or ", first_name, "'s (", x[0], ")");
  FUSEDOPS_CHECK(c[n - 2] == x[2], kRotary, "cos of shape ", ShapeText{c}, " must have ", first_name,
                 "'s seq length (", x[2], ") in dim -2");
  FUSEDOPS_CHECK(c[n - 1] % 2 == 0 && c[n - 1] <= x[3], kRotary,
                 "cos's last dim (R, the rotated dims) must be even and at most ", first_name,
                 "'s head_dim (", x[3], "), got ", c[n - 1]);
  FUSEDOPS_CHECK(sin.sizes().equals(c), kRotary, "sin of shape ", ShapeText{sin.sizes()},
                 " must have cos's shape ", ShapeText{c});
}

// Whether x [batch, heads, seq, head_dim] is a [batch, seq, heads, head_dim]
// tensor seen through transpose(1, 2), as attention takes a projection's
// output: torch's `x.transpose(1, 2).is_contiguous()` (dims of size 1 do not
// count; an empty x is).
bool seq_major(const Tensor& x) {
  if (x.numel() == 0) return true;
  int64_t expected = 1;
  for (const int d : {3, 1, 2, 0}) {
    if (x.size(d) == 1) continue;
    if (x.stride(d) != expected) return false;
    expected *= x.size(d);
  }
  return true;
}

// An output for x: laid out as x where x is seq-major (so attention's output,
// which SDPA lays out as its query, and the gradients going back into the
// projections need no copy), contiguous otherwise. The shape functions
// (src/fusedops/ops/rotary.py) allocate alike.
Tensor empty_like_heads(const Tensor& x) {
  if (!seq_major(x)) return empty(x, x.sizes());
  const std::vector<int64_t> s = contiguous_strides({x.size(0), x.size(2), x.size(1), x.size(3)});
  return empty_strided(x, x.sizes(), {s[0], s[2], s[1], s[3]});
}

RotaryTensor rotary_tensor(const Tensor& in, const Tensor& out) {
  RotaryTensor t{.in = in.const_data_ptr(), .out = out.data_ptr(), .heads = in.size(1)};
  for (int d = 0; d < 4; ++d) {
    t.strides[d] = in.size(d) == 1 ? 0 : in.stride(d);
    t.out_strides[d] = out.stride(d);
  }
  return t;
}

RotaryTable rotary_table(const Tensor& t) {
  const int64_t n = t.dim();
  return {
      t.const_data_ptr(),
      {n > 2 && t.size(0) != 1 ? t.stride(0) : 0, t.size(n - 2) == 1 ? 0 : t.stride(n - 2), t.stride(n - 1)}};
}

// Everything but the two tensors, which the caller adds.
RotaryProblem rotary_problem(const Tensor& first, const Tensor& cos, const Tensor& sin, bool interleaved,
                             bool transpose) {
  RotaryProblem p;
  p.dtype = to_dtype(first.scalar_type());
  p.float_tables = cos.scalar_type() != first.scalar_type();
  p.interleaved = interleaved;
  p.transpose = transpose;
  p.batch = first.size(0);
  p.seq = first.size(2);
  p.head_dim = first.size(3);
  p.rotary_dim = cos.size(cos.dim() - 1);
  p.cos = rotary_table(cos);
  p.sin = rotary_table(sin);
  return p;
}

}  // namespace

RotaryCall rotary_setup(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin,
                        bool interleaved) {
  check_first("q", q);
  check_second("q", q, "k", k);
  check_tables("q", q, cos, sin);
  RotaryCall call{.q_out = empty_like_heads(q),
                  .k_out = empty_like_heads(k),
                  .problem = rotary_problem(q, cos, sin, interleaved, false)};
  call.problem.q = rotary_tensor(q, call.q_out);
  call.problem.k = rotary_tensor(k, call.k_out);
  return call;
}

RotaryCall rotary_backward_setup(const std::optional<Tensor>& grad_q, const std::optional<Tensor>& grad_k,
                                 const Tensor& cos, const Tensor& sin, bool interleaved) {
  if (!grad_q && !grad_k)
    return {.q_out = no_tensor(cos), .k_out = no_tensor(cos), .problem = RotaryProblem{}};
  const char* name = grad_q ? "grad_q" : "grad_k";
  const Tensor& first = grad_q ? *grad_q : *grad_k;
  check_first(name, first);
  if (grad_q && grad_k) check_second("grad_q", *grad_q, "grad_k", *grad_k);
  check_tables(name, first, cos, sin);
  RotaryCall call{.q_out = grad_q ? empty_like_heads(*grad_q) : no_tensor(first),
                  .k_out = grad_k ? empty_like_heads(*grad_k) : no_tensor(first),
                  .problem = rotary_problem(first, cos, sin, interleaved, true)};
  if (grad_q) call.problem.q = rotary_tensor(*grad_q, call.q_out);
  if (grad_k) call.problem.k = rotary_tensor(*grad_k, call.k_out);
  return call;
}

namespace {

// rotate_half's pairs (a[i], c[i]) of one dense row, i < n, in chunks: the
// rotation into op-math buffers, then each buffer rounded into its half of
// the output, loops the compiler vectorizes (one loop doing both keeps
// bfloat16's rounding, with its NaN test, scalar; float16 converts by F16C,
// cpu.h). restrict: the inputs never overlap the fresh outputs. Inlined into
// each CPU clone.
template <typename A, bool kTranspose, typename T, typename C>
[[gnu::always_inline]] inline void rotate_halves(const T* __restrict__ x_a, const T* __restrict__ x_c,
                                                 const C* __restrict__ cos_a, const C* __restrict__ cos_c,
                                                 const C* __restrict__ sin_a, const C* __restrict__ sin_c,
                                                 T* __restrict__ out_a, T* __restrict__ out_c, int64_t n) {
  constexpr int64_t kChunk = 64;
  A ya[kChunk], yc[kChunk], buf[4][kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t m = std::min(kChunk, n - i0);
    const auto xa = cpu::opmath_reader(x_a + i0, m, ya), xc = cpu::opmath_reader(x_c + i0, m, yc);
    const auto ca = cpu::opmath_reader(cos_a + i0, m, buf[0]), cc = cpu::opmath_reader(cos_c + i0, m, buf[1]);
    const auto sa = cpu::opmath_reader(sin_a + i0, m, buf[2]), sc = cpu::opmath_reader(sin_c + i0, m, buf[3]);
    for (int64_t i = 0; i < m; ++i) {
      A a = xa(i), c = xc(i);
      rotate_pair<A>(a, c, ca(i), cc(i), sa(i), sc(i), kTranspose);
      ya[i] = a;
      yc[i] = c;
    }
    cpu::from_opmath(ya, out_a + i0, m);
    cpu::from_opmath(yc, out_c + i0, m);
  }
}

// Rows [begin, end) of the problem (row r: position r / heads, head r % heads),
// each in the op-math type: the R/2 pairs, then the pass-through elements past
// R. kHalves: rotate_half's pairs (i, i + R/2) on rows dense along head_dim
// (x's and the tables'), loops the compiler vectorizes; otherwise any pairs at
// any strides. kTranspose: the backward's rotation.
template <typename T, typename C, bool kHalves, bool kTranspose>
FUSEDOPS_CPU_CLONES void rotate_rows(const RotaryProblem& p, int64_t begin, int64_t end) {
  using A = cpu::opmath_t<T>;
  const int64_t heads = p.q.heads + p.k.heads, half = p.rotary_dim / 2;
  // Pair i is (i * step, i * step + partner).
  const int64_t step = p.interleaved ? 2 : 1, partner = p.interleaved ? 1 : half;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t pos = r / heads, b = pos / p.seq, s = pos % p.seq;
    const RotaryRow row = rotary_row(p, b, s, r % heads);
    const T* x = static_cast<const T*>(row.is_q ? p.q.in : p.k.in) + row.in;
    T* out = static_cast<T*>(row.is_q ? p.q.out : p.k.out) + row.out;
    const C* cos = static_cast<const C*>(p.cos.data) + b * p.cos.strides[0] + s * p.cos.strides[1];
    const C* sin = static_cast<const C*>(p.sin.data) + b * p.sin.strides[0] + s * p.sin.strides[1];
    const int64_t sx = kHalves ? 1 : row.in_stride, sc = p.cos.strides[2], ss = p.sin.strides[2];
    if constexpr (kHalves) {
      rotate_halves<A, kTranspose>(x, x + half, cos, cos + half, sin, sin + half, out, out + half, half);
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = i * step, c = a + partner;
        A xa = A(x[a * sx]), xc = A(x[c * sx]);
        rotate_pair<A>(xa, xc, A(cos[a * sc]), A(cos[c * sc]), A(sin[a * ss]), A(sin[c * ss]), kTranspose);
        out[a] = static_cast<T>(xa);
        out[c] = static_cast<T>(xc);
      }
    }
    for (int64_t d = p.rotary_dim; d < p.head_dim; ++d) out[d] = x[d * sx];
  }
}

// Every row, position by position (the tables' row stays in cache across the
// heads), on torch's threads.
template <typename T, typename C>
void rotary_rows(const RotaryProblem& p) {
  const int64_t heads = p.q.heads + p.k.heads, rows = p.batch * p.seq * heads;
  if (rows == 0 || p.head_dim == 0) return;
  const auto dense = [](const RotaryTensor& x) { return x.heads == 0 || x.strides[3] == 1; };
  const bool halves = !p.interleaved && dense(p.q) && dense(p.k) &&
                      (p.rotary_dim == 0 || (p.cos.strides[2] == 1 && p.sin.strides[2] == 1));
  with_flags(
      [&](auto halves, auto transpose) {
        cpu::parallel_for(
            rows, std::max<int64_t>(1, cpu::kGrain / p.head_dim), [&](int64_t begin, int64_t end) {
              rotate_rows<T, C, decltype(halves)::value, decltype(transpose)::value>(p, begin, end);
            });
      },
      halves, p.transpose);
}

void rotary_run_cpu(const RotaryProblem& p) {
  cpu::dispatch_floating(p.dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      if (p.float_tables) return rotary_rows<T, float>(p);
    }
    rotary_rows<T, T>(p);
  });
}

RotaryOutputs rotary_cpu(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin,
                         bool interleaved) {
  const RotaryCall call = rotary_setup(q, k, cos, sin, interleaved);
  rotary_run_cpu(call.problem);
  return {call.q_out, call.k_out};
}

FUSEDOPS_OP(kRotary,
            "rotary(Tensor q, Tensor k, Tensor cos, Tensor sin, bool interleaved=False) -> (Tensor, Tensor)",
            rotary_cpu, rotary_cuda)

RotaryOutputs rotary_backward_cpu(const std::optional<Tensor>& grad_q, const std::optional<Tensor>& grad_k,
                                  const Tensor& cos, const Tensor& sin, bool interleaved) {
  const RotaryCall call = rotary_backward_setup(grad_q, grad_k, cos, sin, interleaved);
  rotary_run_cpu(call.problem);
  return {call.q_out, call.k_out};
}

FUSEDOPS_OP(kRotary,
            "_rotary_backward(Tensor? grad_q, Tensor? grad_k, Tensor cos, Tensor sin, bool interleaved) "
            "-> (Tensor, Tensor)",
            rotary_backward_cpu, rotary_backward_cuda)

}  // namespace

}  // namespace fusedops
