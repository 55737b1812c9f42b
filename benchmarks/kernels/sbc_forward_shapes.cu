// scale_bias_clamp forward launch shapes on one GPU, without torch: the shipped
// launcher (launch_sbc_forward) against candidate kernels and cudaMemcpy in one
// process, 5 rounds of 30 back-to-back launches (median). Build and run:
//   nvcc -std=c++20 -O3 -arch=sm_90 -I. benchmarks/kernels/sbc_forward_shapes.cu \
//        cuda/scale_bias_clamp/scale_bias_clamp.cu -o sbc_forward_shapes && ./sbc_forward_shapes
// (ZEROS=1: inputs all zero instead of pseudo-random; it made no difference).
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "benchmarks/kernels/timing.cuh"
#include "cuda/common/common.cuh"
#include "cuda/scale_bias_clamp/scale_bias_clamp.h"
using namespace fusedops;
using namespace fusedops::cuda;

template <typename T>
__device__ __forceinline__ float clampf(float v, float lo, float hi) {
  float r = v < lo ? lo : v;
  return r > hi ? hi : r;
}

// U contiguous-block vectors per thread: block b covers vectors [b*256*U, (b+1)*256*U), thread t takes t,
// t+256, ...
template <typename T, int U, bool kDense, bool kScalePtr>
__global__ void __launch_bounds__(256)
    blocked(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ bias,
            const T* __restrict__ scale, float sv, float lo, float hi, int64_t nvec) {
  constexpr int kVec = 16 / sizeof(T);
  using V = Vec<T, kVec>;
  const int64_t base = int64_t(blockIdx.x) * 256 * U + threadIdx.x;
  const float s = kScalePtr ? to_opmath(*scale) : sv;
  const float b0 = kDense ? 0.f : to_opmath(bias[0]);
  V xs[U], bs[kDense ? U : 1];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + u * 256;
    if (i < nvec) {
      xs[u] = reinterpret_cast<const V*>(x)[i];
      if constexpr (kDense) bs[u] = reinterpret_cast<const V*>(bias)[i];
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = base + u * 256;
    if (i < nvec) {
      V r;
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        r.v[e] = from_opmath<T>(
            clampf<T>(__fmaf_rn(to_opmath(xs[u].v[e]), s, kDense ? to_opmath(bs[u].v[e]) : b0), lo, hi));
      reinterpret_cast<V*>(out)[i] = r;
    }
  }
}

// rows: [R, C] with [C] bias; 2-D grid, non-persistent: block (bx, by), each thread U rows of one vector
// column.
template <typename T, int U>
__global__ void __launch_bounds__(256)
    rows_blocked(T* __restrict__ out, const T* __restrict__ x, const T* __restrict__ bias,
                 const T* __restrict__ scale, float lo, float hi, int64_t rows, int64_t cvec) {
  constexpr int kVec = 16 / sizeof(T);
  using V = Vec<T, kVec>;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cvec) return;
  const float s = to_opmath(*scale);
  const V bv = reinterpret_cast<const V*>(bias)[c];
  const int64_t r0 = (int64_t(blockIdx.y) * blockDim.y * U) + threadIdx.y;
  V xs[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t r = r0 + u * blockDim.y;
    if (r < rows) xs[u] = reinterpret_cast<const V*>(x)[r * cvec + c];
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t r = r0 + u * blockDim.y;
    if (r < rows) {
      V o;
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o.v[e] = from_opmath<T>(clampf<T>(__fmaf_rn(to_opmath(xs[u].v[e]), s, to_opmath(bv.v[e])), lo, hi));
      reinterpret_cast<V*>(out)[r * cvec + c] = o;
    }
  }
}

// Shipped-rows structure with switches: kLoop (band loop), kRawBias (keep the bias vector raw, convert per
// use)
template <typename T, bool kLoop, bool kRawBias>
__global__ void __launch_bounds__(256)
    rows_mine(T* __restrict__ out, const T* __restrict__ x, int64_t sx, const T* __restrict__ bias,
              const T* __restrict__ scale, float lo, float hi, int64_t rows, int64_t cols) {
  constexpr int kVec = 16 / sizeof(T);
  using V = Vec<T, kVec>;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols / kVec) return;
  const float s = scale != nullptr ? to_opmath(*scale) : 1.f;
  float b[kVec];
  V bv;
  if constexpr (kRawBias)
    bv = reinterpret_cast<const V*>(bias)[c];
  else if (bias != nullptr) {
    const V t = reinterpret_cast<const V*>(bias)[c];
#pragma unroll
    for (int e = 0; e < kVec; ++e) b[e] = to_opmath(t.v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < kVec; ++e) b[e] = 0.f;
  }
  const int64_t band = int64_t(blockDim.y) * 2;
  int64_t r0 = int64_t(blockIdx.y) * band + threadIdx.y;
  do {
    V xs[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t r = r0 + u * int64_t(blockDim.y);
      if (r < rows) xs[u] = reinterpret_cast<const V*>(x + r * sx)[c];
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t r = r0 + u * int64_t(blockDim.y);
      if (r >= rows) break;
      V o;
#pragma unroll
      for (int e = 0; e < kVec; ++e)
        o.v[e] = from_opmath<T>(
            clampf<T>(__fmaf_rn(to_opmath(xs[u].v[e]), s, kRawBias ? to_opmath(bv.v[e]) : b[e]), lo, hi));
      reinterpret_cast<V*>(out + r * cols)[c] = o;
    }
    r0 += int64_t(gridDim.y) * band;
  } while (kLoop && r0 < rows);
}
template <typename T>
void run(const char* name, DType dt, int64_t n) {
  const int64_t bytes = n * sizeof(T);
  constexpr int kVec = 16 / sizeof(T);
  T *x, *b, *o, *s;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMalloc(&o, bytes));
  CK(cudaMalloc(&s, 16));
  CK(cudaMemset(s, 0, 16));
  if (getenv("ZEROS")) {
    CK(cudaMemset(x, 0, bytes));
    CK(cudaMemset(b, 0, bytes));
  } else {
    fill_random<T><<<1024, 256>>>(x, n, 1);
    fill_random<T><<<1024, 256>>>(b, n, 2);
    fill_random<T><<<1, 32>>>(s, 1, 3);
  }
  CK(cudaDeviceSynchronize());
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  DeviceInfo dev{sms};
  const double copy_us = time_us([&] { cudaMemcpyAsync(o, x, bytes, cudaMemcpyDeviceToDevice); });
  const double copy_gbs = 2.0 * bytes / copy_us / 1e3;
  auto report = [&](const char* v, double us, double nbytes) {
    printf("%-9s n=2^%-2d %-34s %8.1f us %6.0f GB/s %5.1f%% of copy\n", name, __builtin_ctzll(n), v, us,
           nbytes / us / 1e3, 100.0 * nbytes / us / 1e3 / copy_gbs);
  };
  report("memcpy", copy_us, 2.0 * bytes);
  const int64_t nvec = n / kVec;
  // same-shape bias
  StridedLayout<3> l;
  l.ndim = 1;
  l.sizes[0] = n;
  l.strides[0][0] = l.strides[1][0] = l.strides[2][0] = 1;
  SbcScalars sc;
  sc.scale = s;
  sc.lo = -0.5;
  sc.hi = 0.5;
  sc.any_bound = true;
  report("shipped same", time_us([&] { launch_sbc_forward(dt, o, x, b, l, n, sc, 0); }), 3.0 * bytes);
  // U vectors per thread, scale read from memory or passed by value.
  const auto flat = [&]<int U, bool kScalePtr>(const char* label) {
    const auto grid = unsigned((nvec + 256 * U - 1) / (256 * U));
    report(label,
           time_us([&] { blocked<T, U, true, kScalePtr><<<grid, 256>>>(o, x, b, s, 1.f, -.5f, .5f, nvec); }),
           3.0 * bytes);
  };
  flat.template operator()<1, true>("1 vec/thread same");
  flat.template operator()<2, true>("2 vec/thread same");
  flat.template operator()<4, true>("4 vec/thread same");
  flat.template operator()<2, false>("2 vec/thread same scale-by-value");
  // rows [n/4096, 4096] with a [4096] bias
  const int64_t cols = 4096, rows = n / cols, cvec = cols / kVec;
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
  report("shipped rows", time_us([&] { launch_sbc_forward(dt, o, x, b, r, n, sc, 0); }), 2.0 * bytes);
  // The rows kernel of section 2 of the results, with / without its band loop
  // and with the bias converted up front / at use.
  const auto mine = [&]<bool kLoop, bool kRawBias>(const char* label) {
    const dim3 block(256, 1), grid(unsigned((cvec + 255) / 256), unsigned((rows + 1) / 2));
    report(label, time_us([&] {
             rows_mine<T, kLoop, kRawBias><<<grid, block>>>(o, x, cols, b, s, -.5f, .5f, rows, cols);
           }),
           2.0 * bytes);
  };
  mine.template operator()<true, false>("rows mine loop");
  mine.template operator()<false, false>("rows mine noloop");
  mine.template operator()<true, true>("rows mine loop rawbias");
  mine.template operator()<false, true>("rows mine noloop rawbias");
  for (int U : {2}) {
    if ((rows + U - 1) / U > 65535) continue;
    const dim3 block(256, 1), grid(unsigned((cvec + 255) / 256), unsigned((rows + U - 1) / U));
    const char* v = U == 1 ? "rows 1 row/thread" : U == 2 ? "rows 2 rows/thread" : "rows 4 rows/thread";
    report(v, time_us([&] {
             if (U == 1) rows_blocked<T, 1><<<grid, block>>>(o, x, b, s, -.5f, .5f, rows, cvec);
             if (U == 2) rows_blocked<T, 2><<<grid, block>>>(o, x, b, s, -.5f, .5f, rows, cvec);
             if (U == 4) rows_blocked<T, 4><<<grid, block>>>(o, x, b, s, -.5f, .5f, rows, cvec);
           }),
           2.0 * bytes);
  }
  CK(cudaGetLastError());
  free_all(x, b, o, s);
}

int main() {
  for (int64_t n : {int64_t(1) << 28, int64_t(1) << 24, int64_t(1) << 20}) {
    run<float>("float32", DType::Float32, n);
    run<__nv_bfloat16>("bfloat16", DType::BFloat16, n);
  }
}
