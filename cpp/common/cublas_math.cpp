// The reader of torch.backends.cuda.matmul's flags (cublas_math.h), installed
// by src/fusedops/_accelerator.py with the accelerator's
// fusedops_accel_matmul_flags: torch's C++ API reads the flags, the stable ABI
// cannot.
#include "cpp/common/cublas_math.h"

#include <atomic>

namespace fusedops {
namespace {

std::atomic<int64_t (*)()> cublas_math_reader{nullptr};

}  // namespace

int64_t current_cublas_math() {
  const auto reader = cublas_math_reader.load(std::memory_order_relaxed);
  return reader != nullptr ? reader() : 0;
}

}  // namespace fusedops

extern "C" __attribute__((visibility("default"))) void fusedops_set_cublas_math_reader(int64_t (*reader)()) {
  fusedops::cublas_math_reader.store(reader, std::memory_order_relaxed);
}
