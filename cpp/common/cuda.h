// CUDA glue on the stable ABI: the device guard, torch's current stream, the
// device facts launchers size their grids by, and launch checks.
#pragma once

#include <array>
#include <mutex>

#include <cuda_runtime_api.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>

#include "cpp/common/stable.h"

namespace fusedops::cuda {

// torch's current stream on the tensor's device: the raw cudaStream_t (a
// torch::stable Stream's id() is not one).
inline cudaStream_t current_stream(const Tensor& t) {
  void* stream = nullptr;
  FUSEDOPS_CHECK(aoti_torch_get_current_cuda_stream(t.get_device_index(), &stream) == AOTI_TORCH_SUCCESS,
                 "cuda", "torch could not give its current CUDA stream");
  return static_cast<cudaStream_t>(stream);
}

inline void check_cuda(const char* op, cudaError_t error) {
  FUSEDOPS_CHECK(error == cudaSuccess, op, "CUDA error: ", cudaGetErrorString(error));
}

// SM count and arch of `device`, read once per device.
inline DeviceInfo device_info(const char* op, int device) {
  static std::mutex mutex;
  static std::array<DeviceInfo, 64> cache{};
  std::lock_guard<std::mutex> lock(mutex);
  DeviceInfo& info = cache.at(device);
  if (info.sm_count == 0) {
    int major = 0, minor = 0;
    check_cuda(op, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    check_cuda(op, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    info.sm90 = major == 9 && minor == 0;
    check_cuda(op, cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device));
  }
  return info;
}

}  // namespace fusedops::cuda
