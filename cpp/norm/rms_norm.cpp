// fusedops.rms_norm and fusedops.add_rms_norm: the ops (see norm.h), each
// with its CPU kernel and the CUDA one (the same template on kNormCuda).
#include "cpp/common/define_op.h"
#include "cpp/norm/norm.h"

namespace fusedops {
namespace {

constexpr char kRmsNorm[] = "rms_norm";
constexpr char kAddRmsNorm[] = "add_rms_norm";

NormCall add_rms_norm_call(const Tensor& x, const Tensor& residual, OptTensor weight, double eps,
                           double offset, std::optional<ScalarType> out_dtype) {
  return {.op = kAddRmsNorm,
          .x = x,
          .residual = residual,
          .weight = weight,
          .eps = eps,
          .offset = offset,
          .out_dtype = out_dtype};
}

template <const NormBackend& B>
Tensor rms_norm(const Tensor& x, OptTensor weight, double eps, double offset,
                std::optional<ScalarType> out_dtype) {
  return norm_forward(
             {.op = kRmsNorm, .x = x, .weight = weight, .eps = eps, .offset = offset, .out_dtype = out_dtype},
             B)
      .out;
}
FUSEDOPS_OP(kRmsNorm,
            "rms_norm(Tensor x, Tensor? weight=None, float eps=1e-06, float offset=0.0, "
            "ScalarType? out_dtype=None) -> Tensor",
            rms_norm<kNormCpu>, rms_norm<kNormCuda>)

template <const NormBackend& B>
std::tuple<Tensor, Tensor> rms_norm_forward(const Tensor& x, OptTensor weight, double eps, double offset,
                                            std::optional<ScalarType> out_dtype) {
  const NormOutputs o = norm_forward(
      {.op = kRmsNorm, .x = x, .weight = weight, .eps = eps, .offset = offset, .out_dtype = out_dtype}, B);
  return {o.out, o.rstd};
}
FUSEDOPS_OP(kRmsNorm,
            "_rms_norm_forward(Tensor x, Tensor? weight, float eps, float offset, ScalarType? out_dtype) "
            "-> (Tensor, Tensor)",
            rms_norm_forward<kNormCpu>, rms_norm_forward<kNormCuda>)

template <const NormBackend& B>
std::tuple<Tensor, Tensor> add_rms_norm(const Tensor& x, const Tensor& residual, OptTensor weight, double eps,
                                        double offset, std::optional<ScalarType> out_dtype) {
  const NormOutputs o = norm_forward(add_rms_norm_call(x, residual, weight, eps, offset, out_dtype), B);
  return {o.out, o.summed};
}
FUSEDOPS_OP(kAddRmsNorm,
            "add_rms_norm(Tensor x, Tensor residual, Tensor? weight=None, float eps=1e-06, float offset=0.0, "
            "ScalarType? out_dtype=None) -> (Tensor, Tensor)",
            add_rms_norm<kNormCpu>, add_rms_norm<kNormCuda>)

template <const NormBackend& B>
std::tuple<Tensor, Tensor, Tensor> add_rms_norm_forward(const Tensor& x, const Tensor& residual,
                                                        OptTensor weight, double eps, double offset,
                                                        std::optional<ScalarType> out_dtype) {
  const NormOutputs o = norm_forward(add_rms_norm_call(x, residual, weight, eps, offset, out_dtype), B);
  return {o.out, o.summed, o.rstd};
}
FUSEDOPS_OP(kAddRmsNorm,
            "_add_rms_norm_forward(Tensor x, Tensor residual, Tensor? weight, float eps, float offset, "
            "ScalarType? out_dtype) -> (Tensor, Tensor, Tensor)",
            add_rms_norm_forward<kNormCpu>, add_rms_norm_forward<kNormCuda>)

// The backward of rms_norm and of add_rms_norm (x: summed), errors named kOp.
template <const char* kOp, const NormBackend& B>
std::tuple<Tensor, Tensor> rms_backward(const Tensor& grad, const Tensor& x, OptTensor weight,
                                        const Tensor& rstd, double offset, OptTensor grad_summed,
                                        std::vector<bool> mask) {
  const std::vector<Tensor> g = norm_backward({.op = kOp,
                                               .grad = grad,
                                               .saved_x = x,
                                               .weight = weight,
                                               .rstd = rstd,
                                               .grad_summed = grad_summed,
                                               .offset = offset,
                                               .mask = mask},
                                              B);
  return {g[0], g[1]};
}

template <const NormBackend& B>
std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad, const Tensor& x, OptTensor weight,
                                             const Tensor& rstd, double offset, OptTensor grad_summed,
                                             std::vector<bool> mask) {
  return rms_backward<kRmsNorm, B>(grad, x, weight, rstd, offset, grad_summed, mask);
}
FUSEDOPS_OP(kRmsNorm,
            "_rms_norm_backward(Tensor grad, Tensor x, Tensor? weight, Tensor rstd, float offset, "
            "Tensor? grad_summed, bool[2] output_mask) -> (Tensor, Tensor)",
            rms_norm_backward<kNormCpu>, rms_norm_backward<kNormCuda>)

template <const NormBackend& B>
std::tuple<Tensor, Tensor> add_rms_norm_backward(const Tensor& grad, const Tensor& x, OptTensor weight,
                                                 const Tensor& rstd, double offset, OptTensor grad_summed,
                                                 std::vector<bool> mask) {
  return rms_backward<kAddRmsNorm, B>(grad, x, weight, rstd, offset, grad_summed, mask);
}
FUSEDOPS_OP(kAddRmsNorm,
            "_add_rms_norm_backward(Tensor grad, Tensor x, Tensor? weight, Tensor rstd, float offset, "
            "Tensor? grad_summed, bool[2] output_mask) -> (Tensor, Tensor)",
            add_rms_norm_backward<kNormCpu>, add_rms_norm_backward<kNormCuda>)

}  // namespace
}  // namespace fusedops
