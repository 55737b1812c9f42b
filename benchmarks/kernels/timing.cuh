// What the kernel experiments share: CUDA error checks, pseudo-random inputs
// and the timer (the median over rounds of back-to-back launches).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/common/common.cuh"

#define CK(x)                                                     \
  do {                                                            \
    cudaError_t e = (x);                                          \
    if (e != cudaSuccess) {                                       \
      printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); \
      exit(1);                                                    \
    }                                                             \
  } while (0)

// p[i] in [-1, 1), a hash of i and seed.
template <typename T>
__global__ void fill_random(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = fusedops::cuda::from_opmath<T>(float(h & 0xffff) / 32768.f - 1.f);
  }
}

// Microseconds per launch of f: the median over `rounds` rounds of `reps`
// back-to-back launches, after 5 warm-up launches.
template <typename F>
float time_us(F f, int reps = 30, int rounds = 5) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int round = 0; round < rounds; ++round) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f / reps);
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

// cudaFree of every pointer, checked.
template <typename... P>
void free_all(P*... p) {
  const auto free_one = [](void* q) { CK(cudaFree(q)); };
  (free_one(p), ...);
}
