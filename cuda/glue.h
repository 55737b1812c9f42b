// Host-side helpers for the CUDA registrations: device facts, launch checks.
#pragma once

#include <array>
#include <mutex>

#include <c10/core/Device.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime_api.h>

#include "cpp/checks.h"
#include "cpp/kernel_types.h"

namespace fusedops::cuda {

// SM count of `device`, read once per device.
inline DeviceInfo device_info(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::array<DeviceInfo, 64> cache{};
  std::lock_guard<std::mutex> lock(mutex);
  DeviceInfo& info = cache.at(device);
  if (info.sm_count == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&info.sm_count, cudaDevAttrMultiProcessorCount, device));
  }
  return info;
}

inline void check_launch(const char* op, cudaError_t error) {
  FUSEDOPS_CHECK(error == cudaSuccess, op, "CUDA kernel launch failed: ", cudaGetErrorString(error));
}

}  // namespace fusedops::cuda
