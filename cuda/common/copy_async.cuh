// 16 bytes at a time from global to shared memory without holding registers
// (cp.async, sm_80 on): a thread can have all of its copies in flight at once.
#pragma once

namespace fusedops::cuda {

[[maybe_unused]] __device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(shared))),
               "l"(global)
               : "memory");
#endif
}

// Waits for this thread's copies (and makes them visible to it).
[[maybe_unused]] __device__ __forceinline__ void wait_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

}  // namespace fusedops::cuda
