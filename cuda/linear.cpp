// fusedops.linear on CUDA: GEMMs through cuBLASLt with bias / activation /
// bias-gradient epilogues, the rest in one elementwise pass; at::addmm / at::mm
// where cuBLASLt has no algorithm (float64, odd layouts, empty sizes).
//
// Layouts. torch tensors are row-major, cuBLASLt is column-major: a row-major
// C[M, N] is a column-major N x M matrix with ld = N. So a row-major product
// C = P[M, K] . Q[K, N] is computed as the column-major C^T = Q^T . P^T with
// m = N, n = M, k = K, cuBLAS A := Q^T and B := P^T (see operand_of). For the
// forward, P = x[M, K], Q = weight^T: the bias (per output feature) is per
// row of the column-major D, which is what CUBLASLT_EPILOGUE_BIAS broadcasts.
// For the weight gradient dW[N, K] = grad_z^T . x, B = grad_z (k = M, n = N),
// so CUBLASLT_EPILOGUE_BGRADB's reduction over k is the bias gradient.
#include <ATen/core/Tensor.h>
#include <ATen/Context.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>
#include <torch/library.h>

#include <cstring>
#include <limits>
#include <type_traits>
#include <memory>
#include <unordered_map>

#include "cpp/linear.h"
#include "cuda/glue.h"
#include "cuda/linear_kernel.h"

namespace fusedops {
namespace {

using OptTensor = std::optional<at::Tensor>;
using OptStr = std::optional<c10::string_view>;
using OptDouble = std::optional<double>;

#define FUSEDOPS_LT_CHECK(expr)                                                                        \
  do {                                                                                                 \
    const cublasStatus_t fusedops_lt_status = (expr);                                                  \
    FUSEDOPS_CHECK(fusedops_lt_status == CUBLAS_STATUS_SUCCESS, "linear", "cuBLASLt call ", #expr,      \
                   " failed: ", cublasLtGetStatusName(fusedops_lt_status), " (",                        \
                   cublasLtGetStatusString(fusedops_lt_status), ")");                                   \
  } while (0)

// ---- cuBLASLt: cached plans --------------------------------------------------------

// One operand of a column-major GEMM: stored rows x cols with leading dim ld,
// used as op(stored).
struct Operand {
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

// A row-major view M[rows, cols] with element (r, c) at ptr + r * s0 + c * s1
// (elements), described without creating a tensor (transposes are free).
struct MatView {
  const void* ptr;
  int64_t rows, cols, s0, s1;
};

MatView view_of(const at::Tensor& t) { return {t.const_data_ptr(), t.size(0), t.size(1), t.stride(0), t.stride(1)}; }
MatView transposed(const MatView& v) { return {v.ptr, v.cols, v.rows, v.s1, v.s0}; }

// The operand that equals t^T for a row-major view t[R, C], if cuBLASLt can
// read it in place: row-major t (unit column stride) is a column-major C x R
// matrix, used as is; column-major t (unit row stride) is R x C, used
// transposed.
std::optional<Operand> operand_of(const MatView& t) {
  const int64_t rows = t.rows, cols = t.cols;
  Operand o;
  o.ptr = t.ptr;
  if (t.s1 == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? cols : t.s0;
    if (ld < cols || ld < 1) return std::nullopt;
    o.op = CUBLAS_OP_N;
    o.rows = cols;
    o.cols = rows;
    o.ld = ld;
    return o;
  }
  if (t.s0 == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? rows : t.s1;
    if (ld < rows || ld < 1) return std::nullopt;
    o.op = CUBLAS_OP_T;
    o.rows = rows;
    o.cols = cols;
    o.ld = ld;
    return o;
  }
  return std::nullopt;
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt's
// heuristics assume of a pointer.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a == 0) return 256;
  uint32_t align = 1;
  while (align < 256 && a % (align * 2) == 0) align *= 2;
  return align;
}

cudaDataType_t cuda_type(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return CUDA_R_16F;
    case at::kBFloat16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// Everything an algorithm choice depends on.
struct PlanKey {
  int32_t device;
  int32_t dtype;
  int32_t compute;
  int32_t epilogue;
  int32_t trans_a, trans_b;
  uint32_t reduction_mask;
  uint32_t align_a, align_b, align_d, align_bias, align_aux;
  int64_t m, n, k, lda, ldb, ldd, aux_ld;
  uint64_t workspace;

  bool operator==(const PlanKey& o) const { return std::memcmp(this, &o, sizeof(PlanKey)) == 0; }
};
static_assert(std::has_unique_object_representations_v<PlanKey>, "PlanKey is hashed bytewise");

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    // FNV-1a over the bytes.
    uint64_t h = 1469598103934665603ull;
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    for (size_t i = 0; i < sizeof(PlanKey); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// Descriptors and the chosen algorithm for one PlanKey; `ok` is false when
// cuBLASLt has no algorithm for it (the caller falls back).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool ok = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// One GEMM request: D (column-major m x n, ldd) = op(A) . op(B) [+ epilogue].
struct GemmCall {
  at::ScalarType dtype;
  int device;
  Operand a, b;
  void* d;
  int64_t m, n, k, ldd;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;  // bias (forward) or bias gradient (BGRADB)
  void* aux = nullptr;   // GELU_AUX: the pre-activation, column-major m x n, ld aux_ld
  int64_t aux_ld = 0;
};

bool epilogue_has_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_BGRADB;
}
bool epilogue_has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

cublasComputeType_t compute_type(at::ScalarType dtype) {
  if (dtype == at::kFloat && at::globalContext().allowTF32CuBLAS()) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

// torch's reduced-precision-reduction settings for half types, as reduction
// schemes cuBLASLt may use.
uint32_t reduction_mask(at::ScalarType dtype) {
  if (dtype != at::kHalf && dtype != at::kBFloat16) return CUBLASLT_REDUCTION_SCHEME_MASK;
  const at::CuBLASReductionOption option = dtype == at::kHalf ? at::globalContext().allowFP16ReductionCuBLAS()
                                                              : at::globalContext().allowBF16ReductionCuBLAS();
  switch (option) {
    case at::CuBLASReductionOption::AllowReducedPrecisionWithSplitK: return CUBLASLT_REDUCTION_SCHEME_MASK;
    case at::CuBLASReductionOption::DisallowReducedPrecisionAllowSplitK:
      return CUBLASLT_REDUCTION_SCHEME_MASK & ~uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
    default: return CUBLASLT_REDUCTION_SCHEME_NONE;
  }
}

void set_pointers(cublasLtMatmulDesc_t desc, const GemmCall& c) {
  if (epilogue_has_bias(c.epilogue)) {
    FUSEDOPS_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias,
                                                     sizeof(c.bias)));
  }
  if (epilogue_has_aux(c.epilogue)) {
    FUSEDOPS_LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &c.aux,
                                                     sizeof(c.aux)));
  }
}

std::unique_ptr<Plan> make_plan(const GemmCall& c, const PlanKey& key, cublasLtHandle_t handle) {
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t type = cuda_type(c.dtype);
  FUSEDOPS_LT_CHECK(cublasLtMatmulDescCreate(&plan->desc, static_cast<cublasComputeType_t>(key.compute), CUDA_R_32F));
  const int32_t ta = c.a.op, tb = c.b.op;
  FUSEDOPS_LT_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  FUSEDOPS_LT_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const uint32_t epilogue = c.epilogue;
  FUSEDOPS_LT_CHECK(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  if (epilogue_has_aux(c.epilogue)) {
    FUSEDOPS_LT_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &c.aux_ld,
                                                     sizeof(c.aux_ld)));
  }
  // The heuristic reads the alignment of these pointers (part of the key).
  set_pointers(plan->desc, c);
  FUSEDOPS_LT_CHECK(cublasLtMatrixLayoutCreate(&plan->a, type, c.a.rows, c.a.cols, c.a.ld));
  FUSEDOPS_LT_CHECK(cublasLtMatrixLayoutCreate(&plan->b, type, c.b.rows, c.b.cols, c.b.ld));
  FUSEDOPS_LT_CHECK(cublasLtMatrixLayoutCreate(&plan->d, type, c.m, c.n, c.ldd));

  cublasLtMatmulPreference_t pref = nullptr;
  FUSEDOPS_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)>
      pref_owner(pref, &cublasLtMatmulPreferenceDestroy);
  const uint64_t workspace = key.workspace;
  FUSEDOPS_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                         sizeof(workspace)));
  FUSEDOPS_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                         &key.reduction_mask, sizeof(key.reduction_mask)));
  FUSEDOPS_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                         &key.align_a, sizeof(key.align_a)));
  FUSEDOPS_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                         &key.align_b, sizeof(key.align_b)));
  FUSEDOPS_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                         &key.align_d, sizeof(key.align_d)));
  FUSEDOPS_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                         &key.align_d, sizeof(key.align_d)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->d,
                                                               plan->d, pref, 1, &result, &found);
  // NOT_SUPPORTED (or no result) means no algorithm fits: fall back. Any
  // other failure is a bug worth reporting.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return plan;
  FUSEDOPS_LT_CHECK(status);
  if (result.state != CUBLAS_STATUS_SUCCESS) return plan;
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  plan->ok = true;
  return plan;
}

// Plans per thread (no lock on the hot path; autograd's device threads get
// their own), keyed by everything the algorithm depends on, so repeated calls
// skip descriptor creation and the heuristic search.
using PlanCache = std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash>;
constexpr size_t kMaxPlans = 1024;

// Runs the GEMM if cuBLASLt has an algorithm for it; false means the caller
// must fall back (nothing was written).
bool lt_gemm(const GemmCall& c) {
  static thread_local PlanCache cache;
  const size_t workspace_size = at::cuda::getCUDABlasLtWorkspaceSize();
  PlanKey key;
  std::memset(&key, 0, sizeof(key));
  key.device = c.device;
  key.dtype = static_cast<int32_t>(c.dtype);
  key.compute = static_cast<int32_t>(compute_type(c.dtype));
  key.epilogue = static_cast<int32_t>(c.epilogue);
  key.trans_a = c.a.op;
  key.trans_b = c.b.op;
  key.reduction_mask = reduction_mask(c.dtype);
  key.align_a = alignment_of(c.a.ptr);
  key.align_b = alignment_of(c.b.ptr);
  key.align_d = alignment_of(c.d);
  key.align_bias = epilogue_has_bias(c.epilogue) ? alignment_of(c.bias) : 0;
  key.align_aux = epilogue_has_aux(c.epilogue) ? alignment_of(c.aux) : 0;
  key.m = c.m;
  key.n = c.n;
  key.k = c.k;
  key.lda = c.a.ld;
  key.ldb = c.b.ld;
  key.ldd = c.ldd;
  key.aux_ld = c.aux_ld;
  key.workspace = workspace_size;

  cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxPlans) cache.clear();
    it = cache.emplace(key, make_plan(c, key, handle)).first;
  }
  Plan& plan = *it->second;
  if (!plan.ok) return false;
  set_pointers(plan.desc, c);
  void* workspace = plan.workspace > 0 ? at::cuda::getCUDABlasLtWorkspace() : nullptr;
  const float alpha = 1.0f, beta = 0.0f;
  FUSEDOPS_LT_CHECK(cublasLtMatmul(handle, plan.desc, &alpha, c.a.ptr, plan.a, c.b.ptr, plan.b, &beta, c.d, plan.d,
                                   c.d, plan.d, &plan.algo, workspace, plan.workspace,
                                   c10::cuda::getCurrentCUDAStream()));
  return true;
}

bool lt_dtype(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat; }

bool lt_sizes(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return m >= 1 && n >= 1 && k >= 1 && m <= kMax && n <= kMax && k <= kMax;
}

// GEMM request for the row-major C[M, N] (contiguous) = P[M, K] . Q[K, N];
// nullopt when an operand cannot be read in place.
std::optional<GemmCall> row_major_gemm(const at::Tensor& c, const MatView& p, const MatView& q) {
  const int64_t M = p.rows, K = p.cols, N = q.cols;
  if (!lt_dtype(c.scalar_type()) || !lt_sizes(M, N, K)) return std::nullopt;
  auto a = operand_of(q);  // Q^T: N x K
  auto b = operand_of(p);  // P^T: K x M
  if (!a || !b) return std::nullopt;
  GemmCall call{};
  call.dtype = c.scalar_type();
  call.device = c.get_device();
  call.a = *a;
  call.b = *b;
  call.d = c.data_ptr();
  call.m = N;
  call.n = M;
  call.k = K;
  call.ldd = N;
  return call;
}

// ---- forward --------------------------------------------------------------------------

int64_t leading_rows(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

void run_epilogue(const at::Tensor& z, const at::Tensor& out, const LinearEpilogue& e) {
  cuda::check_launch("linear", cuda::launch_linear_epilogue(to_dtype(z.scalar_type()), z.const_data_ptr(),
                                                            out.data_ptr(), z.numel(), e,
                                                            c10::cuda::getCurrentCUDAStream()));
}

// out = clamp(act(x @ weight^T + bias)); with `aux`, also the pre-activation
// z when the backward needs it (e.needs_aux()).
at::Tensor linear_cuda_impl(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias_opt,
                            const LinearEpilogue& e, at::Tensor* aux) {
  const SymShape shape = linear_output_shape(x, weight, bias_opt);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::IntArrayRef out_shape = c10::asIntArrayRefUnchecked(shape);
  at::Tensor out = at::empty(out_shape, x.options());
  const bool want_aux = aux != nullptr && e.needs_aux();
  at::Tensor z_buf = want_aux ? at::empty(out_shape, x.options()) : out;
  if (want_aux) *aux = z_buf;
  if (out.numel() == 0) return out;

  const int64_t M = leading_rows(x), K = x.size(-1), N = weight.size(0);
  const at::Tensor x2d = x.dim() == 2 ? x : x.reshape({M, K});
  const bool with_bias = has_bias(bias_opt);
  const at::ScalarType dtype = x.scalar_type();

  std::optional<GemmCall> call = row_major_gemm(out, view_of(x2d), transposed(view_of(weight)));
  if (call) {
    at::Tensor bias;
    if (with_bias) {
      bias = *bias_opt;
      // The epilogue reads a dense bias; copying a strided or misaligned one
      // costs N elements, far less than a fallback GEMM.
      if ((bias.stride(0) != 1 && N > 1) || alignment_of(bias.const_data_ptr()) < 16) {
        bias = bias.clone(at::MemoryFormat::Contiguous);
      }
      call->bias = const_cast<void*>(bias.const_data_ptr());
    }
    // Which part of the epilogue cuBLASLt does. Its GELU is the tanh form;
    // only the half types use it (its fast tanh is below float32's precision).
    // relu with a clamp needs z for the backward, so cuBLASLt leaves it to the pass.
    const bool half = dtype == at::kHalf || dtype == at::kBFloat16;
    Activation lt_act = Activation::None;
    if (e.act == Activation::Relu && !want_aux) lt_act = Activation::Relu;
    if (e.act == Activation::GeluTanh && half && (!want_aux || N % 8 == 0)) lt_act = Activation::GeluTanh;
    cublasLtEpilogue_t epi = with_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    if (lt_act == Activation::Relu) epi = with_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    if (lt_act == Activation::GeluTanh) {
      if (want_aux) {
        epi = with_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        call->aux = z_buf.data_ptr();
        call->aux_ld = N;
      } else {
        epi = with_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      }
    }
    call->epilogue = epi;
    // Without the activation in the GEMM and with an aux, the GEMM writes z
    // and the pass writes out; otherwise the GEMM writes out and the pass (if
    // any) works in place.
    const bool gemm_to_z = want_aux && lt_act == Activation::None;
    call->d = gemm_to_z ? z_buf.data_ptr() : out.data_ptr();
    if (lt_gemm(*call)) {
      LinearEpilogue rest = e;
      if (lt_act != Activation::None) rest.act = Activation::None;
      if (!rest.identity()) run_epilogue(gemm_to_z ? z_buf : out, out, rest);
      return out;
    }
  }

  // Fallback: at::addmm / at::mm (cuBLAS, any layout, float64, empty K),
  // then the whole epilogue in one pass.
  at::Tensor z2d = z_buf.view({M, N});
  if (with_bias) {
    at::addmm_out(z2d, *bias_opt, x2d, weight.t());
  } else {
    at::mm_out(z2d, x2d, weight.t());
  }
  if (!e.identity()) run_epilogue(z_buf, out, e);
  return out;
}

at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias, OptStr activation,
                       OptDouble min, OptDouble max) {
  return linear_cuda_impl(x, weight, bias, linear_epilogue(activation, min, max), nullptr);
}

std::tuple<at::Tensor, at::Tensor> linear_forward_cuda(const at::Tensor& x, const at::Tensor& weight,
                                                       const OptTensor& bias, OptStr activation, OptDouble min,
                                                       OptDouble max) {
  at::Tensor aux;
  at::Tensor out = linear_cuda_impl(x, weight, bias, linear_epilogue(activation, min, max), &aux);
  if (!aux.defined()) aux = at::empty({0}, x.options());
  return {out, aux};
}

// ---- backward -------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward_cuda(
    const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& saved,
    OptStr activation, OptDouble min, OptDouble max, std::array<bool, 3> mask) {
  const LinearEpilogue e = linear_epilogue(activation, min, max);
  const c10::cuda::CUDAGuard guard(grad.device());
  const int64_t N = grad.size(-1);
  const int64_t M = leading_rows(grad);
  const at::Tensor grad2d = grad.dim() == 2 ? grad : grad.reshape({M, N});
  at::Tensor grad_z = grad2d;
  if (!e.identity()) {
    grad_z = at::empty({M, N}, grad.options());
    const at::Tensor s = saved.contiguous();
    cuda::check_launch("linear", cuda::launch_linear_grad_z(
                                     to_dtype(grad.scalar_type()), grad2d.const_data_ptr(), grad2d.stride(0),
                                     grad2d.stride(1), s.const_data_ptr(), grad_z.data_ptr(), M, N, e,
                                     c10::cuda::getCurrentCUDAStream()));
  }
  const at::Tensor none = at::empty({0}, grad.options());
  at::Tensor grad_x = none, grad_w = none, grad_b = none;

  if (mask[0]) {  // grad_x[M, K] = grad_z[M, N] . weight[N, K]
    const int64_t K = weight.size(1);
    SymShape shape(grad.sym_sizes().begin(), grad.sym_sizes().end() - 1);
    shape.push_back(K);
    grad_x = at::empty(c10::asIntArrayRefUnchecked(shape), grad.options());
    if (grad_x.numel() > 0) {
      at::Tensor gx2d = grad_x.view({M, K});
      std::optional<GemmCall> call = row_major_gemm(gx2d, view_of(grad_z), view_of(weight));
      if (!call || !lt_gemm(*call)) at::mm_out(gx2d, grad_z, weight);
    }
  }
  if (mask[1]) {  // grad_w[N, K] = grad_z^T[N, M] . x[M, K], grad_b fused (BGRADB)
    const int64_t K = x.size(-1);
    const at::Tensor x2d = x.dim() == 2 ? x : x.reshape({M, K});
    grad_w = at::empty({N, K}, grad.options());
    if (mask[2]) grad_b = at::empty({N}, grad.options());
    bool done = grad_w.numel() == 0;
    if (!done) {
      std::optional<GemmCall> call = row_major_gemm(grad_w, transposed(view_of(grad_z)), view_of(x2d));
      if (call && mask[2]) {
        call->epilogue = CUBLASLT_EPILOGUE_BGRADB;
        call->bias = grad_b.data_ptr();
      }
      done = call && lt_gemm(*call);
      if (!done) {
        at::mm_out(grad_w, grad_z.t(), x2d);
      } else {
        mask[2] = false;  // written by the epilogue
      }
    }
  }
  if (mask[2]) {
    if (!grad_b.defined() || grad_b.numel() != N) grad_b = at::empty({N}, grad.options());
    at::sum_out(grad_b, grad_z, {0});
  }
  return {grad_x, grad_w, grad_b};
}

}  // namespace

TORCH_LIBRARY_IMPL(fusedops, CUDA, m) {
  m.impl("linear", &linear_cuda);
  m.impl("linear_forward", &linear_forward_cuda);
  m.impl("linear_backward", &linear_backward_cuda);
}

}  // namespace fusedops
