// cuBLASLt GEMMs for any op: plans (descriptors + the heuristic's algorithm)
// cached per thread, run with a CallContext (torch's cuBLAS handle and current
// stream, and a workspace from torch's caching allocator).
#include "cpp/common/lt_gemm.h"

#include <torch/csrc/stable/c/shim.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "cpp/common/cuda.h"

namespace fusedops::lt {

#define FUSEDOPS_LT_CHECK(op, expr)                                                          \
  do {                                                                                       \
    const cublasStatus_t fusedops_lt_status = (expr);                                        \
    FUSEDOPS_CHECK(fusedops_lt_status == CUBLAS_STATUS_SUCCESS, op, "cuBLASLt call ", #expr, \
                   " failed: ", cublasLtGetStatusName(fusedops_lt_status), " (",             \
                   cublasLtGetStatusString(fusedops_lt_status), ")");                        \
  } while (0)

uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a == 0) return 256;
  uint32_t align = 1;
  while (align < 256 && a % (align * 2) == 0) align *= 2;
  return align;
}

namespace {

// The operand that equals t^T for a row-major view t[R, C], if cuBLASLt can
// read it in place: row-major t (unit column stride) is a column-major C x R
// matrix, used as is; column-major t (unit row stride) is R x C, used
// transposed.
std::optional<Operand> operand_of(const MatView& t) {
  const int64_t rows = t.rows, cols = t.cols;
  if (t.s1 == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? cols : t.s0;
    if (ld < cols || ld < 1) return std::nullopt;
    return Operand{.ptr = t.ptr, .op = CUBLAS_OP_N, .rows = uint64_t(cols), .cols = uint64_t(rows), .ld = ld};
  }
  if (t.s0 == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? rows : t.s1;
    if (ld < rows || ld < 1) return std::nullopt;
    return Operand{.ptr = t.ptr, .op = CUBLAS_OP_T, .rows = uint64_t(rows), .cols = uint64_t(cols), .ld = ld};
  }
  return std::nullopt;
}

bool lt_dtype(ScalarType t) {
  return t == ScalarType::Half || t == ScalarType::BFloat16 || t == ScalarType::Float;
}

bool lt_sizes(int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  return m >= 1 && n >= 1 && k >= 1 && m <= kMax && n <= kMax && k <= kMax;
}

}  // namespace

std::optional<GemmCall> row_major_gemm(const Tensor& c, const MatView& p, const MatView& q) {
  const int64_t M = p.rows, K = p.cols, N = q.cols;
  const ScalarType out = c.scalar_type();
  const bool dtypes = lt_dtype(p.dtype) && p.dtype == q.dtype && (out == p.dtype || out == ScalarType::Float);
  if (!dtypes || !lt_sizes(M, N, K)) return std::nullopt;
  const auto a = operand_of(q);  // Q^T: N x K
  const auto b = operand_of(p);  // P^T: K x M
  if (!a || !b) return std::nullopt;
  GemmCall call{};
  call.dtype = p.dtype;
  call.out_dtype = out;
  call.device = c.get_device_index();
  call.a = *a;
  call.b = *b;
  call.d = c.mutable_data_ptr();
  call.m = N;
  call.n = M;
  call.k = K;
  call.ldd = N;
  return call;
}

namespace {

// ---- plan keys --------------------------------------------------------------------------

// Everything an algorithm choice depends on.
struct PlanKey {
  int32_t device;
  int32_t dtype, out_dtype, accumulate;
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

bool epilogue_has_bias(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
         e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         e == CUBLASLT_EPILOGUE_BGRADB;
}
bool epilogue_has_aux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

// float32 may use TF32 where torch.backends.cuda.matmul.allow_tf32 says so.
cublasComputeType_t compute_type(ScalarType dtype, const CublasMath& math) {
  return dtype == ScalarType::Float && math.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// torch's reduced-precision-reduction settings for the half types, as the
// reduction schemes cuBLASLt may use.
uint32_t reduction_mask(ScalarType dtype, const CublasMath& math) {
  if (dtype != ScalarType::Half && dtype != ScalarType::BFloat16) return CUBLASLT_REDUCTION_SCHEME_MASK;
  switch (dtype == ScalarType::Half ? math.fp16_reduction : math.bf16_reduction) {
    case 0: return CUBLASLT_REDUCTION_SCHEME_MASK;
    case 1: return CUBLASLT_REDUCTION_SCHEME_MASK & ~uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
    default: return CUBLASLT_REDUCTION_SCHEME_NONE;
  }
}

// The most workspace an algorithm may ask for. Where the output has at most 32
// rows (cuBLAS's n), torch's own cuBLASLt default, 1 MiB: with more the
// heuristic takes split-K + a reduce kernel, slower than torch's addmm.
// Elsewhere torch's cuBLAS workspace, 32 MiB on compute capability 9, 10 and
// 12, 8 MiB + 128 KiB otherwise: 1 MiB made large GEMMs slower
// (benchmarks/results/NOTES.md, "cuBLASLt's workspace at small M").
// CUBLASLT_WORKSPACE_SIZE (KiB) overrides both, as in torch.
constexpr int64_t kFewRows = 32;

uint64_t workspace_limit(const GemmCall& c, const char* op) {
  static const uint64_t env_kib = [] {
    const char* value = std::getenv("CUBLASLT_WORKSPACE_SIZE");
    return value != nullptr ? std::strtoull(value, nullptr, 10) : 0ull;
  }();
  if (env_kib > 0) return env_kib * 1024;
  if (c.n <= kFewRows) return 1ull << 20;
  static std::mutex mutex;
  static std::array<uint64_t, 64> cache{};
  std::lock_guard<std::mutex> lock(mutex);
  uint64_t& limit = cache.at(c.device);
  if (limit == 0) {
    int major = 0;
    cuda::check_cuda(op, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c.device));
    limit = major == 9 || major == 10 || major == 12 ? 32ull << 20 : (8ull << 20) + (128ull << 10);
  }
  return limit;
}

PlanKey plan_key(const GemmCall& c, const CublasMath& math, const char* op) {
  PlanKey key;
  std::memset(&key, 0, sizeof(key));
  key.device = c.device;
  key.dtype = static_cast<int32_t>(c.dtype);
  key.out_dtype = static_cast<int32_t>(c.out_dtype);
  key.accumulate = c.accumulate;
  key.compute = static_cast<int32_t>(compute_type(c.dtype, math));
  key.epilogue = static_cast<int32_t>(c.epilogue);
  key.trans_a = c.a.op;
  key.trans_b = c.b.op;
  key.reduction_mask = reduction_mask(c.dtype, math);
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
  key.workspace = workspace_limit(c, op);
  return key;
}

// ---- plans ------------------------------------------------------------------------------

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

void set_pointers(const char* op, cublasLtMatmulDesc_t desc, const GemmCall& c) {
  if (epilogue_has_bias(c.epilogue)) {
    FUSEDOPS_LT_CHECK(
        op, cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof(c.bias)));
  }
  if (epilogue_has_aux(c.epilogue)) {
    FUSEDOPS_LT_CHECK(op, cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                         &c.aux, sizeof(c.aux)));
  }
}

template <typename T>
void set_desc(const char* op, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
              const T& value) {
  FUSEDOPS_LT_CHECK(op, cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

template <typename T>
void set_pref(const char* op, cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
              const T& value) {
  FUSEDOPS_LT_CHECK(op, cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
}

cudaDataType_t cuda_type(ScalarType dtype) {
  return dtype == ScalarType::Half ? CUDA_R_16F : dtype == ScalarType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

// The matmul descriptor and the A, B, D layouts of `c` (C is D).
void describe(const char* op, Plan& plan, const GemmCall& c, const PlanKey& key) {
  FUSEDOPS_LT_CHECK(
      op, cublasLtMatmulDescCreate(&plan.desc, static_cast<cublasComputeType_t>(key.compute), CUDA_R_32F));
  set_desc(op, plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(c.a.op));
  set_desc(op, plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(c.b.op));
  set_desc(op, plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(c.epilogue));
  if (epilogue_has_aux(c.epilogue)) set_desc(op, plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, c.aux_ld);
  // The heuristic reads the alignment of these pointers (part of the key).
  set_pointers(op, plan.desc, c);
  FUSEDOPS_LT_CHECK(op, cublasLtMatrixLayoutCreate(&plan.a, cuda_type(c.dtype), c.a.rows, c.a.cols, c.a.ld));
  FUSEDOPS_LT_CHECK(op, cublasLtMatrixLayoutCreate(&plan.b, cuda_type(c.dtype), c.b.rows, c.b.cols, c.b.ld));
  FUSEDOPS_LT_CHECK(op, cublasLtMatrixLayoutCreate(&plan.d, cuda_type(c.out_dtype), c.m, c.n, c.ldd));
}

// cuBLASLt's first algorithm suits an output of the operands' dtype. For a float32 output of half operands
// without an epilogue (linear_cross_entropy's logits and gradient accumulators) it took 320x128 tiles for the
// loss's logits at Llama 3's vocab, whose last wave was 15% idle; its own fifth candidate, 144x128 tiles
// filling their last wave, ran 16% faster (H100; benchmarks/results/NOTES.md, "The loss's logits GEMM by its
// last wave"). So there the candidate whose tiles fill their last wave best (waves / ceil(waves)) replaces
// the first where it fills at least kFillGain more of it: smaller gains were lost to the tile shapes' own
// rates (the weight gradient's GEMM ran 5% slower on tiles that filled 0.4% more). Every candidate computed
// the same bits there (none splits K).
constexpr int kCandidates = 8;
constexpr float kFillGain = 0.02f;

bool widens_halves(const GemmCall& c) {
  return c.out_dtype == ScalarType::Float && c.dtype != ScalarType::Float &&
         c.epilogue == CUBLASLT_EPILOGUE_DEFAULT;
}

int fullest_last_wave(const cublasLtMatmulHeuristicResult_t* results, int found) {
  const auto fill = [](const cublasLtMatmulHeuristicResult_t& r) {
    return r.state == CUBLAS_STATUS_SUCCESS && r.wavesCount > 0 ? r.wavesCount / std::ceil(r.wavesCount)
                                                                : 0.0f;
  };
  if (fill(results[0]) == 0.0f) return 0;  // waves unknown: the heuristic's own choice
  int best = 0;
  for (int i = 1; i < found; ++i) {
    if (fill(results[i]) > fill(results[best])) best = i;
  }
  return fill(results[best]) >= fill(results[0]) + kFillGain ? best : 0;
}

std::unique_ptr<Plan> make_plan(const char* op, const GemmCall& c, const PlanKey& key,
                                cublasLtHandle_t handle) {
  auto plan = std::make_unique<Plan>();
  describe(op, *plan, c, key);
  cublasLtMatmulPreference_t pref = nullptr;
  FUSEDOPS_LT_CHECK(op, cublasLtMatmulPreferenceCreate(&pref));
  const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                        decltype(&cublasLtMatmulPreferenceDestroy)>
      pref_owner(pref, &cublasLtMatmulPreferenceDestroy);
  set_pref(op, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, key.workspace);
  set_pref(op, pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, key.reduction_mask);
  set_pref(op, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
  set_pref(op, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
  set_pref(op, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
  set_pref(op, pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);

  std::array<cublasLtMatmulHeuristicResult_t, kCandidates> results{};
  const int wanted = widens_halves(c) ? kCandidates : 1;
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->d,
                                                               plan->d, pref, wanted, results.data(), &found);
  // NOT_SUPPORTED (or no result) means no algorithm fits: fall back. Any
  // other failure is a bug worth reporting.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) return plan;
  FUSEDOPS_LT_CHECK(op, status);
  const cublasLtMatmulHeuristicResult_t& result = results[fullest_last_wave(results.data(), found)];
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

}  // namespace

CallContext::CallContext(const char* op, const Tensor& like)
    : op_(op), like_(like), stream_(cuda::current_stream(like)) {}

// torch's cuBLAS handle for the current device (the caller's device guard),
// which cuBLAS documents to be usable as a cuBLASLt handle: torch's own
// getCurrentCUDABlasLtHandle is this cast on CUDA.
cublasLtHandle_t CallContext::handle() {
  if (handle_ == nullptr) {
    void* handle = nullptr;
    TORCH_ERROR_CODE_CHECK(torch_get_current_cuda_blas_handle(&handle));
    handle_ = reinterpret_cast<cublasLtHandle_t>(handle);
  }
  return handle_;
}

void* CallContext::workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > size_) {
    buffer_ = empty(like_, {static_cast<int64_t>(bytes)}, ScalarType::Byte);
    size_ = bytes;
  }
  return buffer_.mutable_data_ptr();
}

bool lt_gemm(const GemmCall& c, const CublasMath& math, CallContext& ctx) {
  static thread_local PlanCache cache;
  const PlanKey key = plan_key(c, math, ctx.op());
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxPlans) cache.clear();
    it = cache.emplace(key, make_plan(ctx.op(), c, key, ctx.handle())).first;
  }
  Plan& plan = *it->second;
  if (!plan.ok) return false;
  set_pointers(ctx.op(), plan.desc, c);
  const float alpha = 1.0f, beta = c.accumulate ? 1.0f : 0.0f;
  FUSEDOPS_LT_CHECK(ctx.op(), cublasLtMatmul(ctx.handle(), plan.desc, &alpha, c.a.ptr, plan.a, c.b.ptr,
                                             plan.b, &beta, c.d, plan.d, c.d, plan.d, &plan.algo,
                                             ctx.workspace(plan.workspace), plan.workspace, ctx.stream()));
  return true;
}

}  // namespace fusedops::lt
