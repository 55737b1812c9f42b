// What the host glue of every op uses from the LibTorch stable ABI (compiled
// with TORCH_TARGET_VERSION = torch 2.10, so nothing newer slips in): tensors,
// argument checks whose errors name the op and the argument, and layouts.
#pragma once

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include "cpp/common/layout.h"
#include "cuda/common/kernel_types.h"

namespace fusedops {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;

// "fusedops.<op>: <message>", and nothing else: the stable ABI passes a
// std::runtime_error's text to Python as it is (STD_TORCH_CHECK would prefix
// the C++ function and file).
template <typename... Args>
[[noreturn]] void fail(const char* op, const Args&... args) {
  std::ostringstream message;
  message << "fusedops." << op << ": ";
  (message << ... << args);
  throw std::runtime_error(message.str());
}

#define FUSEDOPS_CHECK(cond, op, ...)               \
  do {                                              \
    if (!(cond)) ::fusedops::fail(op, __VA_ARGS__); \
  } while (0)

// Sizes as Python prints them: [4, 3].
struct ShapeText {
  torch::headeronly::IntHeaderOnlyArrayRef sizes;
};
inline std::ostream& operator<<(std::ostream& out, ShapeText shape) {
  out << '[';
  for (size_t i = 0; i < shape.sizes.size(); ++i) out << (i ? ", " : "") << shape.sizes[i];
  return out << ']';
}

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Half: return "float16";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    default: return torch::headeronly::toString(t);
  }
}

inline std::string device_name(const Tensor& t) {
  const torch::stable::Device device = t.device();
  switch (device.type()) {
    case torch::headeronly::DeviceType::CPU: return "cpu";
    case torch::headeronly::DeviceType::CUDA: return "cuda:" + std::to_string(device.index());
    case torch::headeronly::DeviceType::Meta: return "meta";
    default: return "device type " + std::to_string(static_cast<int>(device.type()));
  }
}

inline std::optional<DType> kernel_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::Half: return DType::Float16;
    case ScalarType::BFloat16: return DType::BFloat16;
    case ScalarType::Float: return DType::Float32;
    case ScalarType::Double: return DType::Float64;
    default: return std::nullopt;
  }
}

// The kernels' dtype of a tensor that passed check_floating.
inline DType to_dtype(ScalarType t) { return *kernel_dtype(t); }

inline void check_floating(const char* op, const char* arg, const Tensor& t) {
  FUSEDOPS_CHECK(kernel_dtype(t.scalar_type()).has_value(), op, arg,
                 " must have a floating dtype (float16, bfloat16, float32 or float64), got ",
                 dtype_name(t.scalar_type()));
}

// `b` must be on `a`'s device: fusedops makes no cross-device copies.
inline void check_same_device(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                              const Tensor& b) {
  const torch::stable::Device da = a.device(), db = b.device();
  FUSEDOPS_CHECK(da.type() == db.type() && da.index() == db.index(), op, name_b,
                 " must be on the same device as ", name_a, " (", device_name(a), "), got ", device_name(b));
}

// `b` must match `a` in dtype and device: fusedops does no implicit promotion
// or cross-device copies.
inline void check_same_dtype_device(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                                    const Tensor& b) {
  FUSEDOPS_CHECK(a.scalar_type() == b.scalar_type(), op, name_b, " must have the same dtype as ", name_a,
                 " (", dtype_name(a.scalar_type()), "), got ", dtype_name(b.scalar_type()));
  check_same_device(op, name_a, a, name_b, b);
}

// An allocation that failed, in empty(). FUSEDOPS_OP's kernels rethrow it with
// the op's name, as a std::runtime_error whose text starts "fusedops.<op>: CUDA
// out of memory" on a GPU (the accelerator and the Python functions raise
// torch.OutOfMemoryError from it, as torch's own ops do) and "fusedops.<op>: out
// of memory" on the CPU (a RuntimeError, as torch's CPU allocator raises).
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What torch said about the last error inside its C shim: torch >= 2.13 keeps
// it (torch_exception_get_what_without_backtrace, looked up at run time: the
// glue is compiled for 2.10); 2.10-2.12 only log it to stderr themselves.
const char* torch_shim_error();

[[noreturn]] void throw_out_of_memory(const Tensor& like, torch::headeronly::IntHeaderOnlyArrayRef sizes,
                                      int32_t dtype_code);

// Row-major strides of a contiguous tensor of `sizes` (a size 0 counts as 1,
// as torch's empty does).
inline std::vector<int64_t> contiguous_strides(torch::headeronly::IntHeaderOnlyArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

// Rows of t viewed as a matrix [M, t.size(-1)]: the product of its leading sizes.
inline int64_t leading_rows(const Tensor& t) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) rows *= t.size(d);
  return rows;
}

// A tensor of `sizes` and `strides` on `like`'s device, of `like`'s dtype
// unless given. torch's empty_strided called through the C shim:
// torch::stable's new_empty goes through the dispatcher, a microsecond or two
// a call that small calls notice.
inline Tensor empty_strided(const Tensor& like, torch::headeronly::IntHeaderOnlyArrayRef sizes,
                            torch::headeronly::IntHeaderOnlyArrayRef strides,
                            std::optional<ScalarType> dtype = std::nullopt) {
  int32_t device_type = 0, device_index = 0, dtype_code = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(like.get(), &device_type));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(like.get(), &device_index));
  if (dtype.has_value()) {
    dtype_code = static_cast<int32_t>(*dtype);  // the shim's dtype codes are torch's ScalarType values
  } else {
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(like.get(), &dtype_code));
  }
  AtenTensorHandle handle = nullptr;
  if (aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(), dtype_code,
                               device_type, device_index, &handle) != AOTI_TORCH_SUCCESS) {
    throw_out_of_memory(like, sizes, dtype_code);
  }
  return Tensor(handle);
}

// A contiguous tensor of `sizes`, as above.
inline Tensor empty(const Tensor& like, torch::headeronly::IntHeaderOnlyArrayRef sizes,
                    std::optional<ScalarType> dtype = std::nullopt) {
  return empty_strided(like, sizes, contiguous_strides(sizes), dtype);
}

// torch.clamp with a NaN bound gives NaN everywhere; the kernels' clamp
// (v < lo ? lo : v) would pass v through, so the glue fills such outputs
// (the gradient mask, lo <= v <= hi, is already false everywhere).
inline bool nan_bound(std::optional<double> min, std::optional<double> max) {
  return (min && std::isnan(*min)) || (max && std::isnan(*max));
}

inline Tensor fill_nan(const Tensor& t) {
  return torch::stable::fill_(t, std::numeric_limits<double>::quiet_NaN());
}

// torch.broadcast_shapes with an error naming both arguments.
inline std::vector<int64_t> broadcast_shape(const char* op, const char* name_a, const Tensor& a,
                                            const char* name_b, const Tensor& b) {
  const auto sa = a.sizes(), sb = b.sizes();
  const size_t ndim = std::max(sa.size(), sb.size());
  std::vector<int64_t> out(ndim, 1);
  for (size_t i = 0; i < ndim; ++i) {
    const int64_t x = i < ndim - sa.size() ? 1 : sa[i - (ndim - sa.size())];
    const int64_t y = i < ndim - sb.size() ? 1 : sb[i - (ndim - sb.size())];
    FUSEDOPS_CHECK(x == y || x == 1 || y == 1, op, name_a, " of shape ", ShapeText{sa}, " and ", name_b,
                   " of shape ", ShapeText{sb}, " do not broadcast (dimension ", i, ": ", x, " vs ", y, ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// A 0-element tensor of `like`'s dtype and device standing for an output not
// computed, a gradient not asked for or an aux not needed (an undefined tensor
// cannot cross the stable ABI on every torch).
inline Tensor no_tensor(const Tensor& like) { return empty(like, {0}); }

// The layout over `sizes` of a contiguous output (operand 0, allocated by the
// caller) and `inputs` broadcast to it. A null input (a value the kernels take
// as a number) gets zero strides. Past kMaxDims dims after coalescing, the
// inputs are replaced by contiguous copies (copy_ broadcasts), so the layout
// always fits.
template <int N>
StridedLayout<N> elementwise_layout(torch::headeronly::IntHeaderOnlyArrayRef sizes,
                                    std::array<Tensor*, N - 1> inputs) {
  const int ndim = static_cast<int>(sizes.size());
  std::array<std::vector<int64_t>, N> strides;
  strides[0] = contiguous_strides(sizes);
  std::array<const int64_t*, N> pointers{strides[0].data()};
  for (int k = 1; k < N; ++k) {
    strides[k].assign(ndim, 0);
    if (const Tensor* t = inputs[k - 1]) {
      broadcast_strides(static_cast<int>(t->dim()), t->sizes().data(), t->strides().data(), ndim,
                        strides[k].data());
    }
    pointers[k] = strides[k].data();
  }
  StridedLayout<N> layout;
  if (coalesce<N>(ndim, sizes.data(), pointers, layout)) return layout;
  for (Tensor* t : inputs) {
    if (t == nullptr) continue;
    Tensor dense = empty(*t, sizes);
    torch::stable::copy_(dense, *t);
    *t = dense;
  }
  return elementwise_layout<N>(sizes, inputs);
}

}  // namespace fusedops
