// scale_bias_clamp's rows forward (sbc_forward_rows, [rows, 4096] with a
// [4096] bias) launched on the 2-D grid it ships with (column block, band) and
// on the 1-D band-major grid it falls back to past 65535 bands (one division
// per block), against cudaMemcpy of the same bytes, in one process, twice. It
// includes the .cu to launch the kernel itself. Build and run:
//   nvcc -std=c++20 -O3 -arch=sm_90 -I. benchmarks/kernels/sbc_rows_grid.cu -o sbc_rows_grid &&
//   ./sbc_rows_grid
#include <cuda_bf16.h>

#include "benchmarks/kernels/timing.cuh"
#include "cuda/scale_bias_clamp/scale_bias_clamp.cu"

using namespace fusedops;
using namespace fusedops::cuda;

template <typename T>
void run(const char* name, int64_t rows) {
  const int64_t cols = 4096, n = rows * cols, bytes = n * sizeof(T);
  constexpr int kVec = kVec16<T>;
  const int reps = n >= (int64_t(1) << 28) ? 20 : 200;
  T *x, *b, *o, *s;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMalloc(&o, bytes));
  CK(cudaMalloc(&b, cols * sizeof(T)));
  CK(cudaMalloc(&s, 16));
  fill_random<T><<<1024, 256>>>(x, n, 1);
  fill_random<T><<<16, 256>>>(b, cols, 2);
  fill_random<T><<<1, 32>>>(s, 1, 3);
  CK(cudaDeviceSynchronize());
  const SbcScalars scalars{.scale = s, .lo = -0.5, .hi = 0.5, .any_bound = true};
  const SbcArgs<T> args = make_args<T>(scalars);
  unsigned bx, by;
  rows_block(cols / kVec, bx, by);
  const auto col_blocks = unsigned(ceil_div(cols / kVec, int64_t(bx)));
  const auto bands = unsigned(ceil_div(rows, int64_t(by) * kRowsPerThread));
  const auto launch = [&](dim3 grid) {
    return time_us(
        [&] {
          sbc_forward_rows<T, kVec><<<grid, dim3(bx, by)>>>(o, x, cols, b, args, rows, cols, col_blocks);
        },
        reps, 7);
  };
  for (int round = 0; round < 2; ++round) {
    const double copy_us = time_us([&] { cudaMemcpyAsync(o, x, bytes, cudaMemcpyDeviceToDevice); }, reps, 7);
    const auto report = [&](const char* grid, double us) {
      printf("%-9s [%lld, 4096] %-8s %8.2f us %6.0f GB/s %6.1f%% of memcpy\n", name, (long long)rows, grid,
             us, 2.0 * bytes / us / 1e3, 100.0 * copy_us / us);
    };
    report("memcpy", copy_us);
    report("2-D", launch(dim3(col_blocks, bands)));
    report("1-D", launch(dim3(col_blocks * bands)));
  }
  CK(cudaGetLastError());
  free_all(x, b, o, s);
}

int main() {
  for (int64_t rows : {int64_t(65536), int64_t(4096), int64_t(256)}) {
    run<__nv_bfloat16>("bfloat16", rows);
    run<float>("float32", rows);
  }
}
