// fusedops.linear_cross_entropy on CUDA: the CUDA device of chunks.h. The
// GEMMs read x and weight as they are (float16 / bfloat16 / float32 through
// cuBLASLt, a float32 output: the logits and the gradient accumulators are
// never rounded to a half type), the row math is cuda/linear_cross_entropy/;
// torch's GEMM, in opmath, where cuBLASLt has no algorithm (float64, layouts
// it cannot read). On sm_90 the vocab slabs' gradient at the logits comes
// straight out of our own GEMM's epilogue (sm90/slab_gemm.h) where it can.
#include <torch/csrc/inductor/aoti_torch/generated/c_shim_cuda.h>

#include <cstdlib>
#include <cstring>

#include "cpp/common/cuda.h"
#include "cpp/common/lt_gemm.h"
#include "cpp/linear_cross_entropy/chunks.h"
#include "cuda/linear_cross_entropy/linear_cross_entropy.h"
#ifdef FUSEDOPS_WITH_CUTLASS
#include "cuda/linear_cross_entropy/sm90/slab_gemm.h"
#endif

namespace fusedops {
namespace {

constexpr const char* kOp = kLinearCrossEntropy;

// FUSEDOPS_LCE_SLAB_GEMM, read each call: unset or 1, the slab gradient from
// our sm_90a GEMM where it can run; 0, never (the same-run A/B, the tests of
// the unfused path on sm_90).
bool slab_gemm_wanted() {
  const char* v = std::getenv("FUSEDOPS_LCE_SLAB_GEMM");
  const bool valid = v == nullptr || std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0;
  FUSEDOPS_CHECK(valid, kOp, "the environment variable FUSEDOPS_LCE_SLAB_GEMM must be unset, 0 or 1, got \"",
                 v, "\"");
  return v == nullptr || v[0] == '1';
}

// Create it under the op's device guard.
class CudaDevice {
 public:
  CudaDevice(const LceProblem& p, int64_t cublas_math)
      : p_(&p), math_(cublas_math_of(cublas_math)), ctx_(kOp, p.x), stream_(cuda::current_stream(p.x)) {}

  Tensor weight() const { return p_->weight; }
  ScalarType operand_dtype() const { return p_->dtype; }
  // cuBLASLt reads a matrix with a unit stride; other rows are copied.
  Tensor x_rows(int64_t begin, int64_t rows) const {
    const Tensor xc = lce::rows_of(p_->x, begin, rows);
    return xc.stride(1) == 1 || xc.stride(0) == 1 ? xc : torch::stable::contiguous(xc);
  }
  void mm(const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate) {
    if (std::optional<lt::GemmCall> call = lt::row_major_gemm(out, lt::view_of(a), lt::view_of(b))) {
      call->accumulate = accumulate;
      if (lt::lt_gemm(*call, math_, ctx_)) return;
    }
    const ScalarType t = out.scalar_type();
    torch_mm<aoti_torch_cuda_addmm_out, aoti_torch_cuda_mm_out>(out, lce::as_type(a, t), lce::as_type(b, t),
                                                                accumulate ? OptTensor(out) : std::nullopt);
  }
  void rows(const LceRows& r) const { cuda::check_cuda(kOp, cuda::launch_lce_rows(r, stream_)); }
  void slab_grad(const LceSlab& s) const { cuda::check_cuda(kOp, cuda::launch_lce_slab_grad(s, stream_)); }
  // The slab's gradient at the logits for all of s's rows, dl = that of x . ws^T, straight out of our sm_90a
  // GEMM's epilogue (sm90/slab_gemm.h) where the device, the dtype and the layouts allow it; false
  // otherwise (nothing was written).
  bool slab_grad_gemm(const Tensor& dl, const Tensor& x, const Tensor& ws, const LceSlab& s) {
    if (!slab_gemm_wanted()) return false;  // checked on every CUDA build
#ifdef FUSEDOPS_WITH_CUTLASS
    const DeviceInfo info = cuda::device_info(kOp, p_->x.get_device_index());
    constexpr int64_t kExactColumns = int64_t(1) << 24;  // the column indices as floats
    if (!info.sm90 || s.math.vocab >= kExactColumns || x.stride(1) != 1 || ws.stride(1) != 1 ||
        p_->opmath != ScalarType::Float) {
      return false;
    }
    cuda::sm90::SlabGemm g{};
    g.gemm.dtype = to_dtype(x.scalar_type());
    g.gemm.act = cuda::sm90::Act::None;
    g.gemm.x = x.const_data_ptr();
    g.gemm.ldx = x.stride(0);
    g.gemm.w = ws.const_data_ptr();
    g.gemm.ldw = ws.stride(0);
    g.gemm.out = dl.mutable_data_ptr();
    g.gemm.m = s.rows;
    g.gemm.n = s.cols;
    g.gemm.k = x.size(1);
    g.gemm.sm_count = info.sm_count;
    if (!cuda::sm90::supported(g.gemm)) return false;  // before the rows' values are written for nothing
    if (!slab_rows_) {                            // the rows' values and the column indices, once a backward
      const int64_t rows = (s.rows + 3) / 4 * 4;  // each vector 16-byte aligned
      slab_rows_ = empty(p_->x, {2 * rows + s.math.vocab}, ScalarType::Float);
      float* base = static_cast<float*>(slab_rows_->mutable_data_ptr());
      float* columns = base + 2 * rows;
      cuda::check_cuda(kOp, cuda::launch_lce_slab_rows(s, base, base + rows, columns, stream_));
      rows_view_ = {static_cast<const float*>(s.lse), base, base + rows};
      columns_ = columns;
    }
    g.bias = s.bias != nullptr ? static_cast<const float*>(s.bias) + s.col0 : nullptr;
    g.columns = columns_ + s.col0;
    g.rows = rows_view_;
    g.softcap = static_cast<float>(s.math.softcap);
    g.spread = static_cast<float>(s.math.smoothing / static_cast<double>(s.math.vocab));
    g.hit = static_cast<float>(1.0 - s.math.smoothing);
    if (!cuda::sm90::slab_supported(g)) return false;
    const size_t bytes = cuda::sm90::slab_workspace_size(g);
    Tensor workspace;
    if (bytes > 0) workspace = empty(p_->x, {static_cast<int64_t>(bytes)}, ScalarType::Byte);
    cuda::check_cuda(
        kOp, cuda::sm90::launch_slab_gemm(g, bytes > 0 ? workspace.mutable_data_ptr() : nullptr, stream_));
    return true;
#else
    (void)dl, (void)x, (void)ws, (void)s;
    return false;
#endif
  }
  void column_sums(const Tensor& acc, const Tensor& dl, bool accumulate) const {
    cuda::check_cuda(kOp, cuda::launch_lce_column_sums(to_dtype(dl.scalar_type()), dl.const_data_ptr(),
                                                       dl.size(0), dl.size(1), dl.stride(0),
                                                       acc.mutable_data_ptr(), accumulate, stream_));
  }
  void count(const Tensor& counts) const {
    cuda::check_cuda(kOp, cuda::launch_lce_count(
                              to_dtype(p_->opmath), static_cast<const int64_t*>(p_->target.const_data_ptr()),
                              p_->rows, p_->math.ignore_index, counts.mutable_data_ptr(), stream_));
  }
  void total(const Tensor& out, const Tensor& loss, const OptTensor& count) const {
    cuda::check_cuda(kOp, cuda::launch_lce_total(to_dtype(loss.scalar_type()), loss.const_data_ptr(),
                                                 loss.numel(), count ? count->const_data_ptr() : nullptr,
                                                 out.mutable_data_ptr(), stream_));
  }

 private:
  const LceProblem* p_;
  CublasMath math_;
  lt::CallContext ctx_;
  cudaStream_t stream_;
#ifdef FUSEDOPS_WITH_CUTLASS
  OptTensor slab_rows_;  // slab_grad_gemm's vectors, written on its first call
  cuda::sm90::SlabRows rows_view_{};
  const float* columns_ = nullptr;
#endif
};

struct CudaScale {
  cudaStream_t stream_;

  void scale(const Tensor& out, const Tensor& saved, const Tensor& grad) const {
    cuda::check_cuda(
        kOp, cuda::launch_lce_scale(to_dtype(out.scalar_type()), saved.const_data_ptr(),
                                    grad.const_data_ptr(), out.mutable_data_ptr(), out.numel(), stream_));
  }
};

}  // namespace

Tensor linear_cross_entropy_cuda(const Tensor& x, const Tensor& weight, const Tensor& target, OptTensor bias,
                                 int64_t ignore_index, std::string reduction, double label_smoothing,
                                 OptDouble softcap, int64_t cublas_math) {
  const LceProblem p =
      lce_problem(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap);
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  CudaDevice dev(p, cublas_math);
  return lce::loss(dev, p);
}

LceForward linear_cross_entropy_forward_cuda(const Tensor& x, const Tensor& weight, const Tensor& target,
                                             OptTensor bias, int64_t ignore_index, std::string reduction,
                                             double label_smoothing, OptDouble softcap,
                                             std::vector<bool> mask, int64_t cublas_math) {
  const LceProblem p =
      lce_problem(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap);
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  CudaDevice dev(p, cublas_math);
  return lce::forward(dev, p, mask);
}

LceLoss linear_cross_entropy_lse_cuda(const Tensor& x, const Tensor& weight, const Tensor& target,
                                      OptTensor bias, int64_t ignore_index, std::string reduction,
                                      double label_smoothing, OptDouble softcap, int64_t cublas_math) {
  const LceProblem p =
      lce_problem(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap);
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  CudaDevice dev(p, cublas_math);
  return lce::loss_and_lse(dev, p);
}

Grads3 linear_cross_entropy_backward_cuda(const Tensor& grad, const Tensor& x, const Tensor& weight,
                                          const Tensor& target, OptTensor bias, int64_t ignore_index,
                                          std::string reduction, double label_smoothing, OptDouble softcap,
                                          std::vector<bool> mask, int64_t cublas_math, OptTensor lse) {
  const LceProblem p =
      lce_problem(x, weight, target, bias, ignore_index, reduction, label_smoothing, softcap);
  const torch::stable::accelerator::DeviceGuard guard(x.get_device_index());
  CudaDevice dev(p, cublas_math);
  return lce::backward(dev, p, grad, mask, lse);
}

Tensor linear_cross_entropy_scale_cuda(const Tensor& grad, const Tensor& saved, ScalarType dtype) {
  const torch::stable::accelerator::DeviceGuard guard(saved.get_device_index());
  CudaScale dev{cuda::current_stream(saved)};
  return lce::scale(dev, grad, saved, dtype);
}

}  // namespace fusedops
