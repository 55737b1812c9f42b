// Fixed-order reductions shared by the kernels: a sum over a group of a
// block's threads, broadcast to the group, and the column sums of a [rows, cols] matrix of partial
// sums. The order of every addition depends only on the sizes and the launch
// shape, never on timing: the same inputs give the same bits every call.
#pragma once

#include "cuda/common/common.cuh"

namespace fusedops::cuda {

// A barrier of the threads of one threadIdx.y only (named barrier 1 + y; 0 is
// __syncthreads'): the block's other groups go on with their rows.
__device__ __forceinline__ void group_sync() {
  if (blockDim.y == 1) {
    __syncthreads();
  } else {
    asm volatile("bar.sync %0, %1;" ::"r"(1 + threadIdx.y), "r"(blockDim.x) : "memory");
  }
}

// The sum of v over the threads of one threadIdx.y (a group of whole warps:
// blockDim.x a multiple of 32), in every thread of the group: warp trees, then
// a tree over the group's warp sums. Every thread of the group calls it (it
// synchronizes the group; groups of one warp only shuffle); smem holds 33
// values per group (smem[threadIdx.y * 33 + ...]) and may be reused by the
// next call. At most 15 groups of two or more warps (hardware barriers 1-15).
template <typename A>
__device__ __forceinline__ A group_allreduce(A v, A* smem) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  if (warps == 1) return __shfl_sync(0xffffffffu, v, 0);
  A* mine = smem + threadIdx.y * 33;
  group_sync();  // a previous call's readers are done with smem
  if (lane == 0) mine[warp] = v;
  group_sync();
  if (warp == 0) {
    v = lane < warps ? mine[lane] : A(0);
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) mine[32] = v;
  }
  group_sync();
  return mine[32];
}

// out[c] = O(sum over r of partial[r, c]) for a [rows, cols] partial: a block
// (32, 8) takes 32 columns, thread (x, y) the rows y, y + 8, ..., then thread
// (x, 0) adds the 8 in order.
template <typename A, typename O>
__global__ void __launch_bounds__(256)
    column_sums_kernel(const A* __restrict__ partial, int64_t rows, int64_t cols, O* __restrict__ out) {
  __shared__ A smem[8][33];
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x;
  A v = 0;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += 8) v += partial[r * cols + c];
  }
  smem[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    A sum = smem[0][threadIdx.x];
#pragma unroll
    for (int y = 1; y < 8; ++y) sum += smem[y][threadIdx.x];
    out[c] = from_opmath<O>(sum);
  }
}

template <typename A, typename O>
cudaError_t launch_column_sums(const A* partial, int64_t rows, int64_t cols, O* out, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  const auto blocks = static_cast<unsigned>((cols + 31) / 32);
  column_sums_kernel<A, O><<<blocks, dim3(32, 8), 0, stream>>>(partial, rows, cols, out);
  return cudaGetLastError();
}

}  // namespace fusedops::cuda
