// fusedops.linear_cross_entropy: checks, the chunk rule, the CPU device
// (torch's GEMMs through the C shims in opmath, the half types converted to
// float32; the row math in parallel loops) and the ops' schemas. See
// linear_cross_entropy.h for the ops, chunks.h for the algorithm.
#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h>

#include <cstdlib>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cpp/common/cpu.h"
#include "cpp/common/define_op.h"
#include "cpp/linear_cross_entropy/chunks.h"

namespace fusedops {
namespace {

constexpr const char* kOp = kLinearCrossEntropy;

Reduction reduction_of(std::string_view r) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  fail(kOp, "reduction must be \"mean\", \"sum\" or \"none\", got \"", r, "\"");
}

void check_matrices(const Tensor& x, const Tensor& weight, const OptTensor& bias) {
  check_floating(kOp, "x", x);
  check_floating(kOp, "weight", weight);
  check_same_dtype_device(kOp, "x", x, "weight", weight);
  FUSEDOPS_CHECK(x.dim() >= 1, kOp, "x must have at least 1 dimension [..., hidden], got a 0-dim tensor");
  FUSEDOPS_CHECK(weight.dim() == 2 && weight.size(0) >= 1, kOp,
                 "weight must be 2-D [vocab, hidden] with vocab >= 1, got shape ", ShapeText{weight.sizes()});
  FUSEDOPS_CHECK(x.size(-1) == weight.size(1), kOp, "x of shape ", ShapeText{x.sizes()},
                 " and weight of shape ", ShapeText{weight.sizes()},
                 " do not match: x's last dimension must equal weight's hidden size (", weight.size(1), ")");
  if (has_bias(bias)) {
    check_floating(kOp, "bias", *bias);
    check_same_dtype_device(kOp, "x", x, "bias", *bias);
    FUSEDOPS_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0), kOp,
                   "bias must be 1-D of size vocab (", weight.size(0), "), got shape ",
                   ShapeText{bias->sizes()});
  }
}

// target [...] (x's leading shape), int64 or int32, as a contiguous int64 [N].
Tensor check_target(const Tensor& target, const Tensor& x) {
  const ScalarType t = target.scalar_type();
  FUSEDOPS_CHECK(t == ScalarType::Long || t == ScalarType::Int, kOp,
                 "target must have an integer dtype (int64 or int32), got ", dtype_name(t));
  const torch::stable::Device dt = target.device(), dx = x.device();
  FUSEDOPS_CHECK(dt.type() == dx.type() && dt.index() == dx.index(), kOp,
                 "target must be on the same device as x (", device_name(x), "), got ", device_name(target));
  const auto xs = x.sizes();
  const std::vector<int64_t> leading(xs.begin(), xs.end() - 1);
  const auto ts = target.sizes();
  FUSEDOPS_CHECK(std::vector<int64_t>(ts.begin(), ts.end()) == leading, kOp, "target of shape ",
                 ShapeText{ts}, " must have x's leading shape ", ShapeText{leading});
  const int64_t n = leading_rows(x);
  Tensor flat = torch::stable::reshape(target, {n});
  return t == ScalarType::Long ? lce::as_type(flat, t) : lce::as_type(flat, ScalarType::Long);
}

}  // namespace

LceProblem lce_problem(const Tensor& x, const Tensor& weight, const Tensor& target, const OptTensor& bias,
                       int64_t ignore_index, const std::string& reduction, double label_smoothing,
                       OptDouble softcap) {
  check_matrices(x, weight, bias);
  LceProblem p;
  p.target = check_target(target, x);
  p.reduction = reduction_of(reduction);
  FUSEDOPS_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, kOp,
                 "label_smoothing must be in [0, 1], got ", label_smoothing);
  FUSEDOPS_CHECK(!softcap || (*softcap > 0.0 && std::isfinite(*softcap)), kOp,
                 "softcap must be a positive number or None, got ", softcap.value_or(0.0));
  p.x = as_matrix(x);
  p.weight = weight;
  p.bias = has_bias(bias) ? bias : std::nullopt;
  const auto xs = x.sizes(), ts = target.sizes();
  p.x_shape.assign(xs.begin(), xs.end());
  p.token_shape.assign(ts.begin(), ts.end());
  p.rows = p.x.size(0);
  p.hidden = x.size(-1);
  p.dtype = x.scalar_type();
  p.opmath = p.dtype == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
  p.math = {.vocab = weight.size(0),
            .ignore_index = ignore_index,
            .smoothing = label_smoothing,
            .softcap = softcap.value_or(0.0)};
  return p;
}

void lce_check_grad(const Tensor& grad, const LceProblem& p) {
  check_floating(kOp, "grad", grad);
  FUSEDOPS_CHECK(grad.scalar_type() == p.opmath, kOp, "grad must have the loss's dtype (",
                 dtype_name(p.opmath), "), got ", dtype_name(grad.scalar_type()));
  const torch::stable::Device dg = grad.device(), dx = p.x.device();
  FUSEDOPS_CHECK(dg.type() == dx.type() && dg.index() == dx.index(), kOp,
                 "grad must be on the same device as x (", device_name(p.x), "), got ", device_name(grad));
  const auto gs = grad.sizes();
  const std::vector<int64_t> expected =
      p.reduction == Reduction::None ? p.token_shape : std::vector<int64_t>{};
  FUSEDOPS_CHECK(std::vector<int64_t>(gs.begin(), gs.end()) == expected, kOp, "grad of shape ", ShapeText{gs},
                 " must have the loss's shape ", ShapeText{expected});
}

void lce_check_lse(const Tensor& lse, const LceProblem& p) {
  FUSEDOPS_CHECK(lse.scalar_type() == p.opmath, kOp, "lse must have the loss's dtype (", dtype_name(p.opmath),
                 "), got ", dtype_name(lse.scalar_type()));
  const torch::stable::Device dl = lse.device(), dx = p.x.device();
  FUSEDOPS_CHECK(dl.type() == dx.type() && dl.index() == dx.index(), kOp,
                 "lse must be on the same device as x (", device_name(p.x), "), got ", device_name(lse));
  FUSEDOPS_CHECK(lse.dim() == 1 && lse.size(0) == p.rows && lse.is_contiguous(), kOp,
                 "lse must be contiguous of shape [", p.rows, "] (a value a token), got shape ",
                 ShapeText{lse.sizes()});
}

namespace {

// A positive integer from the environment variable `name`, or nullopt where it is unset.
std::optional<int64_t> positive_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  FUSEDOPS_CHECK(end != v && *end == '\0' && n > 0, kOp, "the environment variable ", name,
                 " must be unset or a positive integer, got \"", v, "\"");
  return n;
}

// A slab's gradient at the logits near this size: with N = 16384 tokens, 8192 columns of bfloat16 (their
// float32 logits a quarter of the rows at a time beside it where the GEMM's epilogue does not compute it:
// 384 MB in all).
constexpr int64_t kSlabBytes = int64_t(256) << 20;
constexpr int64_t kMinSlabCols = 128;

// A chunk's buffers near this size: with V = 128256, 1024 tokens of float32 logits, or 2048 of a bfloat16
// gradient (with 512 of float32 logits beside it: 788 MB in all either way). Half of it without gradients
// (the loss alone, the vocab slabs' forward): its chunk adds to the step's peak, at the end of the forward.
constexpr int64_t kChunkBytes = int64_t(512) << 20;
constexpr int64_t kMinChunkRows = 128;

// Bytes an element of the buffer the rules below size: own_dl, a half-type gradient at the logits; else the
// opmath logits.
int64_t buffer_element_bytes(const LceProblem& p, bool own_dl) {
  return own_dl ? 2 : p.opmath == ScalarType::Double ? 8 : 4;
}

}  // namespace

int64_t lce_slab_cols(const LceProblem& p, bool own_dl) {
  if (const std::optional<int64_t> cols = positive_env("FUSEDOPS_LCE_SLAB_COLS")) return *cols;
  const int64_t bytes = buffer_element_bytes(p, own_dl);
  const int64_t cols = kSlabBytes / (bytes * std::max<int64_t>(p.rows, 1)) / kMinSlabCols * kMinSlabCols;
  return std::max(cols, kMinSlabCols);
}

int64_t lce_chunk_rows(const LceProblem& p, bool grads, bool own_dl) {
  if (const std::optional<int64_t> rows = positive_env("FUSEDOPS_LCE_CHUNK_ROWS")) return *rows;
  const int64_t bytes = buffer_element_bytes(p, own_dl) * (grads ? 1 : 2);
  const int64_t rows = kChunkBytes / (bytes * p.math.vocab) / kMinChunkRows * kMinChunkRows;
  return std::max(rows, kMinChunkRows);
}

namespace {

// ---- the CPU device (see chunks.h) ------------------------------------------------------

// A row's sums run along the vocab one logit after another (and the bias gradient's down a chunk's rows): in
// float32 their rounding grew to 1e-5 of the log-sum-exp at 40004 classes, 8x eager torch's error (its sums
// are blocked), and the bias gradient's over 1000 tokens to 13x. So they are summed in float64.
template <typename A>
void rows_cpu(const LceRows& r) {
  using Sum = std::conditional_t<std::is_same_v<A, float>, double, A>;
  const LceMath& m = r.math;
  const A* bias = static_cast<const A*>(r.bias);
  const int64_t grain = std::max<int64_t>(1, 32768 / m.vocab);
  cpu::parallel_for(r.rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t t = r.target[i];
      const A* z = static_cast<const A*>(r.logits) + i * r.ld;
      A* dl = r.dlogits != nullptr ? static_cast<A*>(r.dlogits) + i * r.ld : nullptr;
      A& loss = static_cast<A*>(r.loss)[i];
      A* lse_out = r.lse != nullptr ? static_cast<A*>(r.lse) + i : nullptr;
      if (!lce_counts(t, m)) {
        loss = A(0);
        if (lse_out != nullptr) *lse_out = A(0);
        if (dl != nullptr) std::fill(dl, dl + m.vocab, A(0));
        continue;
      }
      const auto value = [&](int64_t j) {
        return lce_capped(z[j] + (bias != nullptr ? bias[j] : A(0)), A(m.softcap));
      };
      LseSum<Sum> lse;
      Sum sum = 0;
      A target = 0;
      for (int64_t j = 0; j < m.vocab; ++j) {
        const A v = value(j);
        lse.add(v);
        sum += v;
        if (j == t) target = v;
      }
      const bool in_range = lce_in_range(t, m);  // always, past the target check
      const Sum exact_lse = lse.lse();
      const A row_lse = A(exact_lse);
      loss = in_range ? A(lce_loss<Sum>(exact_lse, target, sum, m)) : A(NAN);
      if (lse_out != nullptr) *lse_out = row_lse;
      if (dl == nullptr) continue;
      A w = r.grad != nullptr ? static_cast<const A*>(r.grad)[i * r.grad_stride] : A(1);
      if (r.scale != nullptr) w *= *static_cast<const A*>(r.scale);
      for (int64_t j = 0; j < m.vocab; ++j) dl[j] = lce_grad(value(j), row_lse, j == t, w, m);
    }
  });
}

template <typename A>
void column_sums_cpu(const Tensor& acc, const Tensor& dl, bool accumulate) {
  const int64_t rows = dl.size(0), cols = dl.size(1), ld = dl.stride(0);
  const A* src = static_cast<const A*>(dl.const_data_ptr());
  A* dst = static_cast<A*>(acc.mutable_data_ptr());
  using Sum = std::conditional_t<std::is_same_v<A, float>, double, A>;  // as rows_cpu's sums
  cpu::parallel_for(cols, 1024, [&](int64_t begin, int64_t end) {
    std::vector<Sum> sums(end - begin, Sum(0));
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = begin; j < end; ++j) sums[j - begin] += src[i * ld + j];
    }
    for (int64_t j = begin; j < end; ++j) dst[j] = A((accumulate ? Sum(dst[j]) : Sum(0)) + sums[j - begin]);
  });
}

// A target neither ignore_index nor in [0, V): torch's CPU ops raise too.
void check_target_range(const LceProblem& p) {
  const int64_t* t = static_cast<const int64_t*>(p.target.const_data_ptr());
  for (int64_t i = 0; i < p.rows; ++i) {
    FUSEDOPS_CHECK(!lce_counts(t[i], p.math) || lce_in_range(t[i], p.math), kOp, "target ", t[i],
                   " is out of bounds: a target must be in [0, ", p.math.vocab, ") or ignore_index (",
                   p.math.ignore_index, ")");
  }
}

// Everything in opmath: weight converted once, x a chunk at a time; the
// gradient at the logits replaces them.
class CpuDevice {
 public:
  explicit CpuDevice(const LceProblem& p) : p_(p), weight_(lce::as_type(p.weight, p.opmath)) {
    check_target_range(p);
  }
  Tensor weight() const { return weight_; }
  ScalarType operand_dtype() const { return p_.opmath; }
  Tensor x_rows(int64_t begin, int64_t rows) const {
    const Tensor xc = lce::rows_of(p_.x, begin, rows);
    return xc.scalar_type() == p_.opmath ? xc : lce::as_type(xc, p_.opmath);
  }
  void mm(const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate) const {
    torch_mm<aoti_torch_cpu_addmm_out, aoti_torch_cpu_mm_out>(out, a, b,
                                                              accumulate ? OptTensor(out) : std::nullopt);
  }
  void rows(const LceRows& r) const {
    with_opmath([&]<typename A>() { rows_cpu<A>(r); });
  }
  void column_sums(const Tensor& acc, const Tensor& dl, bool accumulate) const {
    with_opmath([&]<typename A>() { column_sums_cpu<A>(acc, dl, accumulate); });
  }
  void slab_grad(const LceSlab& s) const {
    with_opmath([&]<typename A>() {
      cpu::parallel_for(s.rows, std::max<int64_t>(1, 32768 / s.cols), [&](int64_t begin, int64_t end) {
        A* dl = static_cast<A*>(s.dlogits);
        for (int64_t i = begin; i < end; ++i) {
          for (int64_t j = 0; j < s.cols; ++j) dl[i * s.ld + j] = lce_slab_grad<A>(s, i, j);
        }
      });
    });
  }
  bool slab_grad_gemm(const Tensor&, const Tensor&, const Tensor&, const LceSlab&) const { return false; }

  void count(const Tensor& counts) const {
    const int64_t* t = static_cast<const int64_t*>(p_.target.const_data_ptr());
    int64_t n = 0;
    for (int64_t i = 0; i < p_.rows; ++i) n += lce_counts(t[i], p_.math);
    with_opmath([&]<typename A>() {
      A* c = static_cast<A*>(counts.mutable_data_ptr());
      c[0] = A(n);
      c[1] = A(1) / A(n);
    });
  }
  void total(const Tensor& out, const Tensor& loss, const OptTensor& count) const {
    with_opmath([&]<typename A>() {
      const A* l = static_cast<const A*>(loss.const_data_ptr());
      double sum = 0;  // in double: the order is fixed, the rounding small
      for (int64_t i = 0; i < loss.numel(); ++i) sum += double(l[i]);
      if (count) sum /= double(*static_cast<const A*>(count->const_data_ptr()));
      *static_cast<A*>(out.mutable_data_ptr()) = A(sum);
    });
  }

 private:
  template <typename Body>
  void with_opmath(Body&& body) const {
    if (p_.opmath == ScalarType::Double) return body.template operator()<double>();
    body.template operator()<float>();
  }

  const LceProblem& p_;
  Tensor weight_;
};

// out = out's dtype(saved * grad), saved contiguous.
void scale_cpu(const Tensor& out, const Tensor& saved, const Tensor& grad) {
  const int64_t n = out.numel();
  cpu::dispatch_floating(to_dtype(out.scalar_type()), [&]<typename T>() {
    const auto run = [&]<typename A>() {
      const A* s = static_cast<const A*>(saved.const_data_ptr());
      const A g = *static_cast<const A*>(grad.const_data_ptr());
      T* o = static_cast<T*>(out.mutable_data_ptr());
      cpu::parallel_for(n, 32768, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) o[i] = static_cast<T>(s[i] * g);
      });
    };
    if (saved.scalar_type() == ScalarType::Double) return run.template operator()<double>();
    run.template operator()<float>();
  });
}

struct CpuScale {
  void scale(const Tensor& out, const Tensor& saved, const Tensor& grad) const {
    scale_cpu(out, saved, grad);
  }
};

// ---- the ops ------------------------------------------------------------------------------

Tensor linear_cross_entropy_cpu(const Tensor& x, const Tensor& weight, const Tensor& target, OptTensor bias,
                                int64_t ignore_index, std::string reduction, double label_smoothing,
                                OptDouble softcap, int64_t cublas_math) {
  const LceProblem p =
      lce_problem(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap);
  CpuDevice dev(p);
  return lce::loss(dev, p);
}
FUSEDOPS_OP(
    kLinearCrossEntropy,
    "linear_cross_entropy(Tensor x, Tensor weight, Tensor target, Tensor? bias=None, int ignore_index=-100, "
    "str reduction=\"mean\", float label_smoothing=0.0, float? softcap=None, int cublas_math=-1) -> Tensor",
    linear_cross_entropy_cpu, linear_cross_entropy_cuda)

LceForward linear_cross_entropy_forward_cpu(const Tensor& x, const Tensor& weight, const Tensor& target,
                                            OptTensor bias, int64_t ignore_index, std::string reduction,
                                            double label_smoothing, OptDouble softcap, std::vector<bool> mask,
                                            int64_t cublas_math) {
  const LceProblem p =
      lce_problem(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap);
  CpuDevice dev(p);
  return lce::forward(dev, p, mask);
}
FUSEDOPS_OP(
    kLinearCrossEntropy,
    "_linear_cross_entropy_forward(Tensor x, Tensor weight, Tensor target, Tensor? bias, int ignore_index, "
    "str reduction, float label_smoothing, float? softcap, bool[3] output_mask, int cublas_math=-1) -> "
    "(Tensor, Tensor, Tensor, Tensor)",
    linear_cross_entropy_forward_cpu, linear_cross_entropy_forward_cuda)

LceLoss linear_cross_entropy_lse_cpu(const Tensor& x, const Tensor& weight, const Tensor& target,
                                     OptTensor bias, int64_t ignore_index, std::string reduction,
                                     double label_smoothing, OptDouble softcap, int64_t cublas_math) {
  const LceProblem p =
      lce_problem(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap);
  CpuDevice dev(p);
  return lce::loss_and_lse(dev, p);
}
FUSEDOPS_OP(
    kLinearCrossEntropy,
    "_linear_cross_entropy_lse(Tensor x, Tensor weight, Tensor target, Tensor? bias, int ignore_index, "
    "str reduction, float label_smoothing, float? softcap, int cublas_math=-1) -> (Tensor, Tensor)",
    linear_cross_entropy_lse_cpu, linear_cross_entropy_lse_cuda)

Grads3 linear_cross_entropy_backward_cpu(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                         const Tensor& target, OptTensor bias, int64_t ignore_index,
                                         std::string reduction, double label_smoothing, OptDouble softcap,
                                         std::vector<bool> mask, int64_t cublas_math, OptTensor lse) {
  const LceProblem p =
      lce_problem(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap);
  CpuDevice dev(p);
  return lce::backward(dev, p, grad, mask, lse);
}
FUSEDOPS_OP(
    kLinearCrossEntropy,
    "_linear_cross_entropy_backward(Tensor grad, Tensor x, Tensor weight, Tensor target, Tensor? bias, "
    "int ignore_index, str reduction, float label_smoothing, float? softcap, bool[3] output_mask, "
    "int cublas_math=-1, Tensor? lse=None) -> (Tensor, Tensor, Tensor)",
    linear_cross_entropy_backward_cpu, linear_cross_entropy_backward_cuda)

Tensor linear_cross_entropy_scale_cpu(const Tensor& grad, const Tensor& saved, ScalarType dtype) {
  CpuScale dev;
  return lce::scale(dev, grad, saved, dtype);
}
FUSEDOPS_OP(kLinearCrossEntropy,
            "_linear_cross_entropy_scale(Tensor grad, Tensor saved, ScalarType dtype) -> Tensor",
            linear_cross_entropy_scale_cpu, linear_cross_entropy_scale_cuda)

}  // namespace

}  // namespace fusedops
