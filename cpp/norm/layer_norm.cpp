// fusedops.layer_norm and fusedops.add_layer_norm: the ops (see norm.h), each
// with its CPU kernel and the CUDA one (the same template on kNormCuda).
#include "cpp/common/define_op.h"
#include "cpp/norm/norm.h"

namespace fusedops {
namespace {

constexpr char kLayerNorm[] = "layer_norm";
constexpr char kAddLayerNorm[] = "add_layer_norm";

NormCall layer_norm_call(const char* op, const Tensor& x, OptTensor residual, OptTensor weight,
                         OptTensor bias, double eps, std::optional<ScalarType> out_dtype) {
  return {.op = op,
          .x = x,
          .residual = residual,
          .weight = weight,
          .bias = bias,
          .eps = eps,
          .center = true,
          .out_dtype = out_dtype};
}

template <const NormBackend& B>
Tensor layer_norm(const Tensor& x, OptTensor weight, OptTensor bias, double eps,
                  std::optional<ScalarType> out_dtype) {
  return norm_forward(layer_norm_call(kLayerNorm, x, std::nullopt, weight, bias, eps, out_dtype), B).out;
}
FUSEDOPS_OP(kLayerNorm,
            "layer_norm(Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, "
            "ScalarType? out_dtype=None) -> Tensor",
            layer_norm<kNormCpu>, layer_norm<kNormCuda>)

template <const NormBackend& B>
std::tuple<Tensor, Tensor, Tensor> layer_norm_forward(const Tensor& x, OptTensor weight, OptTensor bias,
                                                      double eps, std::optional<ScalarType> out_dtype) {
  const NormOutputs o =
      norm_forward(layer_norm_call(kLayerNorm, x, std::nullopt, weight, bias, eps, out_dtype), B);
  return {o.out, o.mean, o.rstd};
}
FUSEDOPS_OP(kLayerNorm,
            "_layer_norm_forward(Tensor x, Tensor? weight, Tensor? bias, float eps, ScalarType? out_dtype) "
            "-> (Tensor, Tensor, Tensor)",
            layer_norm_forward<kNormCpu>, layer_norm_forward<kNormCuda>)

template <const NormBackend& B>
std::tuple<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual, OptTensor weight,
                                          OptTensor bias, double eps, std::optional<ScalarType> out_dtype) {
  const NormOutputs o =
      norm_forward(layer_norm_call(kAddLayerNorm, x, residual, weight, bias, eps, out_dtype), B);
  return {o.out, o.summed};
}
FUSEDOPS_OP(
    kAddLayerNorm,
    "add_layer_norm(Tensor x, Tensor residual, Tensor? weight=None, Tensor? bias=None, float eps=1e-05, "
    "ScalarType? out_dtype=None) -> (Tensor, Tensor)",
    add_layer_norm<kNormCpu>, add_layer_norm<kNormCuda>)

template <const NormBackend& B>
std::tuple<Tensor, Tensor, Tensor, Tensor> add_layer_norm_forward(const Tensor& x, const Tensor& residual,
                                                                  OptTensor weight, OptTensor bias,
                                                                  double eps,
                                                                  std::optional<ScalarType> out_dtype) {
  const NormOutputs o =
      norm_forward(layer_norm_call(kAddLayerNorm, x, residual, weight, bias, eps, out_dtype), B);
  return {o.out, o.summed, o.mean, o.rstd};
}
FUSEDOPS_OP(kAddLayerNorm,
            "_add_layer_norm_forward(Tensor x, Tensor residual, Tensor? weight, Tensor? bias, float eps, "
            "ScalarType? out_dtype) -> (Tensor, Tensor, Tensor, Tensor)",
            add_layer_norm_forward<kNormCpu>, add_layer_norm_forward<kNormCuda>)

// The backward of layer_norm and of add_layer_norm (x: summed), errors named kOp.
template <const char* kOp, const NormBackend& B>
std::tuple<Tensor, Tensor, Tensor> layer_backward(const Tensor& grad, const Tensor& x, OptTensor weight,
                                                  const Tensor& mean, const Tensor& rstd,
                                                  OptTensor grad_summed, std::vector<bool> mask) {
  const std::vector<Tensor> g = norm_backward({.op = kOp,
                                               .grad = grad,
                                               .saved_x = x,
                                               .weight = weight,
                                               .mean = mean,
                                               .rstd = rstd,
                                               .grad_summed = grad_summed,
                                               .center = true,
                                               .mask = mask},
                                              B);
  return {g[0], g[1], g[2]};
}

template <const NormBackend& B>
std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad, const Tensor& x, OptTensor weight,
                                                       const Tensor& mean, const Tensor& rstd,
                                                       OptTensor grad_summed, std::vector<bool> mask) {
  return layer_backward<kLayerNorm, B>(grad, x, weight, mean, rstd, grad_summed, mask);
}
FUSEDOPS_OP(kLayerNorm,
            "_layer_norm_backward(Tensor grad, Tensor x, Tensor? weight, Tensor mean, Tensor rstd, "
            "Tensor? grad_summed, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
            layer_norm_backward<kNormCpu>, layer_norm_backward<kNormCuda>)

template <const NormBackend& B>
std::tuple<Tensor, Tensor, Tensor> add_layer_norm_backward(const Tensor& grad, const Tensor& x,
                                                           OptTensor weight, const Tensor& mean,
                                                           const Tensor& rstd, OptTensor grad_summed,
                                                           std::vector<bool> mask) {
  return layer_backward<kAddLayerNorm, B>(grad, x, weight, mean, rstd, grad_summed, mask);
}
FUSEDOPS_OP(kAddLayerNorm,
            "_add_layer_norm_backward(Tensor grad, Tensor x, Tensor? weight, Tensor mean, Tensor rstd, "
            "Tensor? grad_summed, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
            add_layer_norm_backward<kNormCpu>, add_layer_norm_backward<kNormCuda>)

}  // namespace
}  // namespace fusedops
