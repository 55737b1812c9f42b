// The rows forward of scale_bias_clamp with a 1-D grid (band = blockIdx.x / column blocks) or a 2-D one
// (band = blockIdx.y), x loaded before or after the scale and bias, against cudaMemcpy in one process
// (median of 7 rounds of back-to-back launches), twice. It includes the .cu to reach its helpers. Build:
// nvcc -std=c++20 -O3 -arch=sm_90 -I. benchmarks/kernels/sbc_rows_grid.cu -o sbc_rows_grid
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "cuda/scale_bias_clamp/scale_bias_clamp.cu"
using namespace fusedops;
using namespace fusedops::cuda;

#define CK(x)                                                     \
  do {                                                            \
    cudaError_t e = (x);                                          \
    if (e != cudaSuccess) {                                       \
      printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); \
      exit(1);                                                    \
    }                                                             \
  } while (0)

// kGrid2D: blockIdx.y = band (no division); kXFirst: x loads before scale/bias loads.
template <typename T, int kVec, bool kGrid2D, bool kXFirst>
__global__ void __launch_bounds__(kThreads)
    rows_v(T* __restrict__ out, const T* __restrict__ x, int64_t sx, const T* __restrict__ bias,
           SbcArgs<T> args, int64_t rows, int64_t cols, unsigned col_blocks) {
  using A = opmath_t<T>;
  using V = Vec<T, kVec>;
  const unsigned band = kGrid2D ? blockIdx.y : blockIdx.x / col_blocks;
  const unsigned cb = kGrid2D ? blockIdx.x : blockIdx.x - band * col_blocks;
  const int64_t c = int64_t(cb) * blockDim.x + threadIdx.x;
  if (c >= cols / kVec) return;
  const int64_t r0 = int64_t(band) * blockDim.y * kRowsPerThread + threadIdx.y;
  A s;
  A b[kVec];
  if (!kXFirst) {
    s = read_scale(args);
    load_bias_column<T, kVec>(bias, c, args, b);
  }
  V xs[kRowsPerThread];
#pragma unroll
  for (int u = 0; u < kRowsPerThread; ++u) {
    const int64_t r = r0 + u * int64_t(blockDim.y);
    if (r < rows) xs[u] = reinterpret_cast<const V*>(x + r * sx)[c];
  }
  if (kXFirst) {
    s = read_scale(args);
    load_bias_column<T, kVec>(bias, c, args, b);
  }
#pragma unroll
  for (int u = 0; u < kRowsPerThread; ++u) {
    const int64_t r = r0 + u * int64_t(blockDim.y);
    if (r < rows) {
      V o;
#pragma unroll
      for (int e = 0; e < kVec; ++e) o.v[e] = from_opmath<T>(args.clamp(pre_clamp(xs[u].v[e], s, b[e])));
      reinterpret_cast<V*>(out + r * cols)[c] = o;
    }
  }
}

template <typename T>
__global__ void fill(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = from_opmath<T>(float(h & 0xffff) / 32768.f - 1.f);
  }
}

template <typename F>
float time_us(F f, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int round = 0; round < 7; ++round) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; ++i) f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f / reps);
  }
  std::sort(t.begin(), t.end());
  return t[3];
}

template <typename T>
void run(const char* name, DType dt, int64_t rows) {
  const int64_t cols = 4096, n = rows * cols, bytes = n * sizeof(T);
  constexpr int kVec = 16 / sizeof(T);
  const int reps = n >= (1 << 28) ? 20 : 200;
  T *x, *b, *o, *s;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMalloc(&o, bytes));
  CK(cudaMalloc(&b, cols * sizeof(T)));
  CK(cudaMalloc(&s, 16));
  fill<T><<<1024, 256>>>(x, n, 1);
  fill<T><<<16, 256>>>(b, cols, 2);
  fill<T><<<1, 32>>>(s, 1, 3);
  CK(cudaDeviceSynchronize());
  StridedLayout<3> r;
  r.ndim = 2;
  r.sizes[0] = rows;
  r.sizes[1] = cols;
  r.strides[0][0] = cols;
  r.strides[0][1] = 1;
  r.strides[1][0] = cols;
  r.strides[1][1] = 1;
  r.strides[2][0] = 0;
  r.strides[2][1] = 1;
  SbcScalars sc;
  sc.scale = s;
  sc.lo = -0.5;
  sc.hi = 0.5;
  sc.any_bound = true;
  const SbcArgs<T> args = make_args<T>(sc);
  const int64_t vec_cols = cols / kVec;
  unsigned bx, by;
  rows_block(vec_cols, bx, by);
  const unsigned cbk = unsigned(ceil_div(vec_cols, int64_t(bx))),
                 bands = unsigned(ceil_div(rows, int64_t(by) * kRowsPerThread));
  const dim3 block(bx, by);
  for (int round = 0; round < 2; ++round) {
    const double copy_us = time_us([&] { cudaMemcpyAsync(o, x, bytes, cudaMemcpyDeviceToDevice); }, reps);
    auto report = [&](const char* v, double us) {
      printf("%-9s [%lld, 4096] %-26s %8.2f us %6.0f GB/s %6.1f%% of memcpy\n", name, (long long)rows, v, us,
             2.0 * bytes / us / 1e3, 100.0 * copy_us / us);
    };
    report("memcpy", copy_us);
    report("shipped", time_us([&] { launch_sbc_forward(dt, o, x, b, r, n, sc, 0); }, reps));
    report("1d xfirst (shipped <= 4abb097)", time_us(
                                                 [&] {
                                                   rows_v<T, kVec, false, true><<<cbk * bands, block>>>(
                                                       o, x, cols, b, args, rows, cols, cbk);
                                                 },
                                                 reps));
    report("1d bias first", time_us(
                                [&] {
                                  rows_v<T, kVec, false, false>
                                      <<<cbk * bands, block>>>(o, x, cols, b, args, rows, cols, cbk);
                                },
                                reps));
    report("2d xfirst", time_us(
                            [&] {
                              rows_v<T, kVec, true, true>
                                  <<<dim3(cbk, bands), block>>>(o, x, cols, b, args, rows, cols, cbk);
                            },
                            reps));
    report("2d bias first", time_us(
                                [&] {
                                  rows_v<T, kVec, true, false>
                                      <<<dim3(cbk, bands), block>>>(o, x, cols, b, args, rows, cols, cbk);
                                },
                                reps));
  }
  CK(cudaGetLastError());
  CK(cudaFree(x));
  CK(cudaFree(b));
  CK(cudaFree(o));
  CK(cudaFree(s));
}

int main() {
  for (int64_t rows : {int64_t(65536), int64_t(4096), int64_t(256)}) {
    run<__nv_bfloat16>("bfloat16", DType::BFloat16, rows);
    run<float>("float32", DType::Float32, rows);
  }
}
