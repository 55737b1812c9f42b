// The accelerator's entry points, called by src/fusedops/_accelerator.py
// through ctypes after the stable library (fusedops._C) has defined the ops.
#include <cstdint>
#include <string>

#include <ATen/Context.h>

#include "accel/common/accel.h"

namespace fusedops::accel {

std::vector<std::pair<const char*, Registration>>& registrations() {
  static std::vector<std::pair<const char*, Registration>> all;
  return all;
}

namespace {

std::string& last_error() {
  static std::string error;
  return error;
}

int64_t option(at::CuBLASReductionOption o) { return static_cast<int64_t>(o); }

}  // namespace
}  // namespace fusedops::accel

extern "C" {

// The ops this accelerator gives C++ autograd, comma-separated.
__attribute__((visibility("default"))) const char* fusedops_accel_ops() {
  static const std::string ops = [] {
    std::string names;
    for (const auto& [op, registration] : fusedops::accel::registrations()) {
      if (!names.empty()) names += ',';
      names += op;
    }
    return names;
  }();
  return ops.c_str();
}

// Registers every op's kernels (once); nullptr, or what went wrong.
__attribute__((visibility("default"))) const char* fusedops_accel_activate() {
  using namespace fusedops::accel;
  static Libraries* libraries = nullptr;
  if (libraries != nullptr) return nullptr;
  try {
    using torch::Library;
    libraries =
        new Libraries{Library(Library::IMPL, "fusedops", c10::DispatchKey::AutogradCPU, __FILE__, __LINE__),
                      Library(Library::IMPL, "fusedops", c10::DispatchKey::AutogradCUDA, __FILE__, __LINE__),
                      Library(Library::IMPL, "fusedops", c10::DispatchKey::AutocastCPU, __FILE__, __LINE__),
                      Library(Library::IMPL, "fusedops", c10::DispatchKey::AutocastCUDA, __FILE__, __LINE__)};
    for (const auto& [op, registration] : registrations()) registration(*libraries);
    return nullptr;
  } catch (const std::exception& error) {
    last_error() = error.what();
    return last_error().c_str();
  }
}

// torch.backends.cuda.matmul's flags now, packed as cpp/common/cublas_math.h's
// CublasMath reads them: the stable library asks for them through this
// function (the stable ABI cannot read them), so linear follows them as
// F.linear does, on every path into the op.
__attribute__((visibility("default"))) int64_t fusedops_accel_matmul_flags() {
  const at::Context& context = at::globalContext();
  return static_cast<int64_t>(context.allowTF32CuBLAS()) |
         (fusedops::accel::option(context.allowFP16ReductionCuBLAS()) << 1) |
         (fusedops::accel::option(context.allowBF16ReductionCuBLAS()) << 3);
}
}
