// Errors from inside torch's C shim: the out-of-memory report of empty().
#include <dlfcn.h>

#include <cstdio>

#include "cpp/common/stable.h"

namespace fusedops {

const char* torch_shim_error() {
  using Getter = const char* (*)();
  static const Getter getter = [] {
    void* torch_cpu = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    return torch_cpu
               ? reinterpret_cast<Getter>(dlsym(torch_cpu, "torch_exception_get_what_without_backtrace"))
               : nullptr;
  }();
  return getter ? getter() : nullptr;
}

void throw_out_of_memory(const Tensor& like, torch::headeronly::IntHeaderOnlyArrayRef sizes,
                         int32_t dtype_code) {
  const auto dtype = static_cast<ScalarType>(dtype_code);
  int64_t bytes = static_cast<int64_t>(aoti_torch_dtype_element_size(dtype_code));
  for (const int64_t size : sizes) bytes *= size;
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  const bool cuda = like.device().type() == torch::headeronly::DeviceType::CUDA;
  std::ostringstream message;
  message << (cuda ? "CUDA out of memory" : "out of memory") << ": cannot allocate a " << dtype_name(dtype)
          << " tensor of shape " << ShapeText{sizes} << " (" << bytes << " bytes, " << gib << ") on "
          << device_name(like);
  if (const char* torch_says = torch_shim_error(); torch_says != nullptr && *torch_says != '\0') {
    message << " (torch: " << torch_says << ")";
  }
  throw OutOfMemory(message.str());
}

}  // namespace fusedops
