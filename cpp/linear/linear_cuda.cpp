// fusedops.linear on CUDA: GEMMs through cuBLASLt (cpp/common/lt_gemm.h) with
// bias / activation / bias-gradient epilogues, the rest in one elementwise
// pass (cuda/linear/); on sm_90 the erf GELU and the clamps in our own GEMM's
// epilogue instead (cuda/linear/sm90/, where the build had CUTLASS);
// torch's addmm / mm (C shims) where cuBLASLt has no algorithm (float64, odd
// layouts, empty sizes).
#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cuda.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "cpp/common/cuda.h"
#include "cpp/common/lt_gemm.h"
#include "cpp/linear/linear.h"
#include "cuda/linear/linear.h"
#ifdef FUSEDOPS_WITH_CUTLASS
#include "cuda/linear/sm90/gemm.h"
#endif

namespace fusedops {
namespace {

void mm_fallback(const Tensor& out, const Tensor& a, const Tensor& b, const OptTensor& bias = std::nullopt) {
  torch_mm<aoti_torch_cuda_addmm_out, aoti_torch_cuda_mm_out>(out, a, b, bias);
}

void run_epilogue(const Tensor& z, const Tensor& out, const LinearEpilogue& e) {
  cuda::check_cuda(
      kLinear, cuda::launch_linear_epilogue(to_dtype(z.scalar_type()), z.const_data_ptr(),
                                            out.mutable_data_ptr(), z.numel(), e, cuda::current_stream(z)));
}

// ---- forward ----------------------------------------------------------------------------

// The forward's buffers, contiguous [M, N]: out, and z (the pre-activation,
// which is out itself unless the backward needs z apart).
struct ForwardBuffers {
  Tensor out, z;
  bool want_aux;
};

// Which activation cuBLASLt's epilogue applies. Its GELU is the tanh form;
// only the half types use it (its fast tanh is below float32's precision).
// relu with a clamp needs z for the backward, so cuBLASLt leaves it to the pass.
Activation lt_activation(const LinearEpilogue& e, ScalarType dtype, bool want_aux, int64_t N) {
  const bool half = dtype == ScalarType::Half || dtype == ScalarType::BFloat16;
  if (e.act == Activation::Relu && !want_aux) return Activation::Relu;
  if (e.act == Activation::GeluTanh && half && (!want_aux || N % 8 == 0)) return Activation::GeluTanh;
  return Activation::None;
}

cublasLtEpilogue_t lt_epilogue(Activation act, bool with_bias, bool want_aux) {
  switch (act) {
    case Activation::Relu: return with_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case Activation::GeluTanh:
      if (want_aux) return with_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      return with_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return with_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// The epilogue reads a dense, aligned bias; copying another one costs N
// elements, far less than a fallback GEMM.
Tensor dense_bias(const Tensor& bias) {
  const bool dense = bias.stride(0) == 1 || bias.size(0) == 1;
  if (dense && lt::alignment_of(bias.const_data_ptr()) >= 16) return bias;
  Tensor copy = empty(bias, {bias.size(0)});
  torch::stable::copy_(copy, bias);
  return copy;
}

#ifdef FUSEDOPS_WITH_CUTLASS
// FUSEDOPS_LINEAR_SM90, read once per process, as the tile configuration our
// sm_90a GEMM runs in: unset or 1, Tiles::ByRule (where its rule prefers it);
// 0, none (cuBLASLt + the pass: the same-run A/B and the tests of that path on
// sm_90); pingpong / cooperative, that configuration wherever the kernels can
// run (measurements of the rule, tests of each kernel at any size).
std::optional<cuda::sm90::Tiles> sm90_tiles() {
  using cuda::sm90::Tiles;
  struct Setting {
    bool valid;
    std::optional<Tiles> tiles;
  };
  static const Setting setting = []() -> Setting {
    const char* v = std::getenv("FUSEDOPS_LINEAR_SM90");
    if (v == nullptr || std::strcmp(v, "1") == 0) return {.valid = true, .tiles = Tiles::ByRule};
    if (std::strcmp(v, "0") == 0) return {.valid = true, .tiles = std::nullopt};
    if (std::strcmp(v, "pingpong") == 0) return {.valid = true, .tiles = Tiles::PingPong128};
    if (std::strcmp(v, "cooperative") == 0) return {.valid = true, .tiles = Tiles::Cooperative256};
    return {.valid = false, .tiles = std::nullopt};
  }();
  FUSEDOPS_CHECK(
      setting.valid, kLinear,
      "the environment variable FUSEDOPS_LINEAR_SM90 must be unset, 0, 1, pingpong or cooperative");
  return setting.tiles;
}

// FUSEDOPS_LINEAR_SM90_ORDER, read once per process: the tile order (swizzle
// 1, 2, 4 or 8, then m or n for the raster's direction, else CUTLASS's
// heuristic), e.g. 8m; unset: by the rule (measurements of that rule).
cuda::sm90::TileOrder sm90_order() {
  using cuda::sm90::Raster;
  struct Setting {
    bool valid;
    cuda::sm90::TileOrder order;
  };
  static const Setting setting = []() -> Setting {
    const char* v = std::getenv("FUSEDOPS_LINEAR_SM90_ORDER");
    if (v == nullptr) return {.valid = true, .order = {}};
    const std::string s(v);
    if (s.empty() || s.size() > 2 || std::strchr("1248", s[0]) == nullptr)
      return {.valid = false, .order = {}};
    Raster raster = Raster::Heuristic;
    if (s.size() == 2) {
      if (s[1] != 'm' && s[1] != 'n') return {.valid = false, .order = {}};
      raster = s[1] == 'm' ? Raster::AlongM : Raster::AlongN;
    }
    return {.valid = true, .order = {.swizzle = s[0] - '0', .raster = raster}};
  }();
  FUSEDOPS_CHECK(setting.valid, kLinear,
                 "the environment variable FUSEDOPS_LINEAR_SM90_ORDER must be unset or a swizzle of 1, 2, 4 "
                 "or 8 followed by m, n or nothing (e.g. 8m)");
  return setting.order;
}

// What our GEMM's epilogue does of `e`: the erf GELU (with aux z when the
// backward needs it) or no activation, then the clamp; relu before a clamp is
// the clamp with lo raised to 0 (clamp(relu(v), lo, hi) = clamp(v, max(lo, 0),
// hi), NaN included). Plain linear, relu and the tanh GELU keep cuBLASLt's own
// epilogues, which need no pass.
std::optional<cuda::sm90::LinearGemm> sm90_epilogue(const LinearEpilogue& e, bool want_aux) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  cuda::sm90::LinearGemm g{};
  g.lo = static_cast<float>(e.has_min ? e.min : -kInf);
  g.hi = static_cast<float>(e.has_max ? e.max : kInf);
  if (e.act == Activation::Gelu) {
    g.act = cuda::sm90::Act::Gelu;
    return g;
  }
  if (!e.clamps() || want_aux || (e.act != Activation::None && e.act != Activation::Relu))
    return std::nullopt;
  g.act = cuda::sm90::Act::None;
  if (e.act == Activation::Relu) g.lo = g.lo > 0.0f ? g.lo : 0.0f;
  return g;
}

// The whole forward of an erf GELU or a clamp (which cuBLASLt's epilogues
// lack) in our sm_90a GEMM, where the call is one the kernel takes
// (cuda/linear/sm90/gemm.h: dtype, 16-byte alignment) and its rule prefers
// (M > 64, a grid that fills the GPU, K <= 4096 unless the grid is swizzled) or a tile
// configuration is forced;
// false otherwise (nothing was written).
bool forward_sm90(const Tensor& x2d, const Tensor& weight, const OptTensor& bias, const LinearEpilogue& e,
                  const ForwardBuffers& buf) {
  std::optional<cuda::sm90::LinearGemm> epilogue = sm90_epilogue(e, buf.want_aux);
  if (!epilogue) return false;
  const std::optional<cuda::sm90::Tiles> tiles = sm90_tiles();
  if (!tiles) return false;
  const int device = x2d.get_device_index();
  if (x2d.stride(1) != 1 || weight.stride(1) != 1 || x2d.stride(0) < x2d.size(1) ||
      weight.stride(0) < weight.size(1) || !cuda::device_info(kLinear, device).sm90) {
    return false;
  }
  cuda::sm90::LinearGemm g = *epilogue;
  g.dtype = to_dtype(x2d.scalar_type());
  g.x = x2d.const_data_ptr();
  g.ldx = x2d.stride(0);
  g.w = weight.const_data_ptr();
  g.ldw = weight.stride(0);
  g.out = buf.out.mutable_data_ptr();
  g.aux = buf.want_aux ? buf.z.mutable_data_ptr() : nullptr;
  g.m = x2d.size(0);
  g.n = weight.size(0);
  g.k = x2d.size(1);
  g.sm_count = cuda::device_info(kLinear, device).sm_count;
  g.tiles = *tiles;
  g.order = sm90_order();
  if (!cuda::sm90::supported(g) || (g.tiles == cuda::sm90::Tiles::ByRule && !cuda::sm90::preferred(g)))
    return false;
  Tensor b;
  if (has_bias(bias)) {
    b = dense_bias(*bias);
    g.bias = b.const_data_ptr();
    if (!cuda::sm90::supported(g)) return false;
  }
  const size_t bytes = cuda::sm90::workspace_size(g);
  Tensor workspace;
  if (bytes > 0) workspace = empty(x2d, {static_cast<int64_t>(bytes)}, ScalarType::Byte);
  cuda::check_cuda(kLinear, cuda::sm90::launch(g, bytes > 0 ? workspace.mutable_data_ptr() : nullptr,
                                               cuda::current_stream(x2d)));
  return true;
}
#endif

// The GEMM and what cuBLASLt can do of the epilogue, then the rest in one
// pass; false when cuBLASLt has no algorithm (nothing was written).
bool forward_lt(const Tensor& x2d, const Tensor& weight, const OptTensor& bias, const LinearEpilogue& e,
                const ForwardBuffers& buf, const CublasMath& math) {
  std::optional<lt::GemmCall> call =
      lt::row_major_gemm(buf.out, lt::view_of(x2d), lt::transposed(lt::view_of(weight)));
  if (!call) return false;
  Tensor b;
  if (has_bias(bias)) {
    b = dense_bias(*bias);
    call->bias = b.mutable_data_ptr();
  }
  const Activation act = lt_activation(e, x2d.scalar_type(), buf.want_aux, call->m);
  call->epilogue = lt_epilogue(act, has_bias(bias), buf.want_aux);
  if (act == Activation::GeluTanh && buf.want_aux) {
    call->aux = buf.z.mutable_data_ptr();
    call->aux_ld = call->m;
  }
  // Without the activation in the GEMM and with an aux, the GEMM writes z and
  // the pass writes out; otherwise the GEMM writes out and the pass (if any)
  // works in place.
  const bool gemm_to_z = buf.want_aux && act == Activation::None;
  call->d = gemm_to_z ? buf.z.mutable_data_ptr() : buf.out.mutable_data_ptr();
  lt::CallContext ctx(kLinear, x2d);
  if (!lt::lt_gemm(*call, math, ctx)) return false;
  LinearEpilogue rest = e;
  if (act != Activation::None) rest.act = Activation::None;
  if (!rest.identity()) run_epilogue(gemm_to_z ? buf.z : buf.out, buf.out, rest);
  return true;
}

// out = clamp(act(x @ weight^T + bias)); with `aux`, also the pre-activation
// z when the backward needs it (e.needs_aux()).
Tensor linear_cuda_impl(const Tensor& x, const Tensor& weight, const OptTensor& bias, const LinearEpilogue& e,
                        Tensor* aux, int64_t cublas_math) {
  const std::vector<int64_t> shape = linear_output_shape(x, weight, bias);
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  const int64_t M = leading_rows(x), N = weight.size(0);
  ForwardBuffers buf;
  buf.want_aux = aux != nullptr && e.needs_aux();
  buf.out = empty(x, {M, N});
  buf.z = buf.want_aux ? empty(x, {M, N}) : buf.out;
  if (buf.out.numel() > 0) {
    const Tensor x2d = as_matrix(x);
#ifdef FUSEDOPS_WITH_CUTLASS
    const bool done = forward_sm90(x2d, weight, bias, e, buf);
#else
    const bool done = false;
#endif
    if (!done && !forward_lt(x2d, weight, bias, e, buf, cublas_math_of(cublas_math))) {
      // torch's GEMM (any layout, float64, empty K), then the whole epilogue.
      mm_fallback(buf.z, x2d, transpose2d(weight), bias);
      if (!e.identity()) run_epilogue(buf.z, buf.out, e);
    }
    if (e.nan_bound()) fill_nan(buf.out);
  }
  const auto as_output = [&](const Tensor& t) {
    return shape.size() == 2 ? t : torch::stable::view(t, shape);
  };
  if (buf.want_aux) *aux = as_output(buf.z);
  return as_output(buf.out);
}

// ---- backward ---------------------------------------------------------------------------

// The gradient at the pre-activation z as a [M, N] matrix (grad itself,
// viewed, when the epilogue is the identity). With `grad_b`, the pass also
// writes the bias gradient where it can (a dense grad, the usual case: one
// read of grad_z less than cuBLASLt's BGRADB or a sum); returns whether it did.
bool grad_z_cuda(const Tensor& grad2d, const Tensor& saved, const LinearEpilogue& e, Tensor& grad_z,
                 const Tensor* grad_b) {
  if (e.identity()) {
    grad_z = grad2d;
    return false;
  }
  const int64_t M = grad2d.size(0), N = grad2d.size(1);
  grad_z = empty(grad2d, {M, N});
  const Tensor s = torch::stable::contiguous(saved);
  const DType dtype = to_dtype(grad2d.scalar_type());
  const int64_t gs0 = grad2d.stride(0), gs1 = grad2d.stride(1);
  const int64_t partials =
      grad_b == nullptr ? 0
                        : cuda::linear_grad_bias_partials(dtype, grad2d.const_data_ptr(), gs0, gs1,
                                                          s.const_data_ptr(), grad_z.const_data_ptr(), M, N);
  Tensor partial;
  if (partials > 0) {
    const bool wide = grad2d.scalar_type() == ScalarType::Double;
    partial = empty(grad2d, {partials}, wide ? ScalarType::Double : ScalarType::Float);
  }
  cuda::check_cuda(kLinear, cuda::launch_linear_grad_z(dtype, grad2d.const_data_ptr(), gs0, gs1,
                                                       s.const_data_ptr(), grad_z.mutable_data_ptr(), M, N, e,
                                                       partials > 0 ? grad_b->mutable_data_ptr() : nullptr,
                                                       partials > 0 ? partial.mutable_data_ptr() : nullptr,
                                                       cuda::current_stream(grad2d)));
  return partials > 0;
}

// grad_x[M, K] = grad_z[M, N] . weight[N, K], in grad's leading shape.
Tensor grad_x_cuda(const Tensor& grad, const Tensor& grad_z, const Tensor& weight, const CublasMath& math,
                   lt::CallContext& ctx) {
  const std::vector<int64_t> shape = grad_x_shape(grad, weight);
  Tensor gx2d = empty(grad, {grad_z.size(0), weight.size(1)});
  if (gx2d.numel() > 0) {
    std::optional<lt::GemmCall> call = lt::row_major_gemm(gx2d, lt::view_of(grad_z), lt::view_of(weight));
    if (!call || !lt::lt_gemm(*call, math, ctx)) mm_fallback(gx2d, grad_z, weight);
  }
  return shape.size() == 2 ? gx2d : torch::stable::view(gx2d, shape);
}

// grad_w[N, K] = grad_z^T[N, M] . x[M, K]; with `grad_b`, the bias gradient
// from the same GEMM (BGRADB) when cuBLASLt takes it. Returns whether grad_b
// was written.
bool grad_w_cuda(const Tensor& grad_w, const Tensor& grad_z, const Tensor& x, const Tensor* grad_b,
                 const CublasMath& math, lt::CallContext& ctx) {
  if (grad_w.numel() == 0) return false;
  const Tensor x2d = as_matrix(x);
  std::optional<lt::GemmCall> call =
      lt::row_major_gemm(grad_w, lt::transposed(lt::view_of(grad_z)), lt::view_of(x2d));
  if (call && grad_b != nullptr) {
    call->epilogue = CUBLASLT_EPILOGUE_BGRADB;
    call->bias = grad_b->mutable_data_ptr();
  }
  if (call && lt::lt_gemm(*call, math, ctx)) return grad_b != nullptr;
  mm_fallback(grad_w, transpose2d(grad_z), x2d);
  return false;
}

}  // namespace

Tensor linear_cuda(const Tensor& x, const Tensor& weight, OptTensor bias, OptStr activation, OptDouble min,
                   OptDouble max, int64_t cublas_math) {
  return linear_cuda_impl(x, weight, bias, linear_epilogue(activation, min, max), nullptr, cublas_math);
}

LinearForward linear_forward_cuda(const Tensor& x, const Tensor& weight, OptTensor bias, OptStr activation,
                                  OptDouble min, OptDouble max, int64_t cublas_math) {
  const LinearEpilogue e = linear_epilogue(activation, min, max);
  Tensor aux;
  Tensor out = linear_cuda_impl(x, weight, bias, e, &aux, cublas_math);
  return {out, e.needs_aux() ? aux : no_tensor(out)};
}

LinearGrads linear_backward_cuda(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                 const Tensor& saved, OptStr activation, OptDouble min, OptDouble max,
                                 std::vector<bool> mask, int64_t cublas_math) {
  const LinearEpilogue e = linear_epilogue(activation, min, max);
  linear_check_backward(grad, x, weight, saved, mask, e);
  const CublasMath math = cublas_math_of(cublas_math);
  const torch::stable::accelerator::DeviceGuard guard(grad.get_device_index());
  const Tensor grad2d = as_matrix(grad);
  const int64_t N = grad2d.size(1);
  Tensor grad_x, grad_w, grad_b, grad_z;
  if (mask[2]) grad_b = empty(grad, {N});
  bool grad_b_done = grad_z_cuda(grad2d, saved, e, grad_z, mask[2] ? &grad_b : nullptr);
  lt::CallContext ctx(kLinear, grad);
  if (mask[0]) grad_x = grad_x_cuda(grad, grad_z, weight, math, ctx);
  if (mask[1]) {
    grad_w = empty(grad, {N, x.size(-1)});
    grad_b_done |= grad_w_cuda(grad_w, grad_z, x, mask[2] && !grad_b_done ? &grad_b : nullptr, math, ctx);
  }
  if (mask[2] && !grad_b_done) {
    const int64_t rows_dim = 0;
    torch::stable::sum_out(grad_b, grad_z, torch::headeronly::IntHeaderOnlyArrayRef(&rows_dim, 1));
  }
  return fill_unrequested({grad_x, grad_w, grad_b}, mask, grad);
}

}  // namespace fusedops
