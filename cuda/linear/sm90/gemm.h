// Launcher of linear's own Hopper GEMM (sm_90a, CUTLASS; gemm.cu): out[M, N] =
// clamp(act(x[M, K] . w[N, K]^T + bias), lo, hi) with act the erf GELU or
// none, on the fp32 accumulator, and for the GELU optionally aux = the
// pre-activation z (rounded to the dtype) for the backward. Torch-free.
// Compiled only where CUTLASS's headers were found (FUSEDOPS_WITH_CUTLASS);
// the caller checks the device is sm_90, that `supported` holds and (unless
// it forces a tile configuration) `preferred`, else it takes the cuBLASLt path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/common/kernel_types.h"

namespace fusedops::cuda::sm90 {

// The epilogue's activation, a compile-time choice in the kernels (a
// run-time switch per element halved the GEMM's speed: NOTES.md).
enum class Act : int8_t { None, Gelu };

// The tile configuration: by the rule on the shape (tiles_for), or one forced
// (measurements of the rule, tests of either kernel at any size).
enum class Tiles : int8_t { ByRule, PingPong128, Cooperative256 };

// Each configuration's output tile (rows x cols) and cluster (in tiles along
// M x N): gemm_kernel.cuh builds its kernels from these, the rule (gemm.cu)
// counts tiles and padding by them.
struct TileGeometry {
  int rows, cols, cluster_m, cluster_n;
};
inline constexpr TileGeometry kPingPong128{128, 128, 1, 2};
inline constexpr TileGeometry kCooperative256{128, 256, 2, 1};

// The order in which the persistent kernels visit output tiles (CUTLASS's
// tile scheduler): along M or N, `swizzle` (1, 2, 4 or 8) tiles wide, so that
// the tiles of one wave share rows of x and of w in L2. swizzle 0: by the rule
// (order_for).
enum class Raster : int8_t { Heuristic, AlongM, AlongN };
struct TileOrder {
  int swizzle = 0;
  Raster raster = Raster::Heuristic;
};

// Row-major x [M, K] (row stride ldx), w [N, K] (row stride ldw), out and aux
// dense [M, N]; bias [N] dense or null; aux null when not wanted. lo / hi:
// the clamp's bounds in fp32, -inf / +inf where absent (every call clamps:
// two instructions per element).
struct LinearGemm {
  DType dtype;
  Act act;
  float lo, hi;
  const void* x;
  int64_t ldx;
  const void* w;
  int64_t ldw;
  const void* bias;
  void* out;
  void* aux;
  int64_t m, n, k;
  int sm_count;
  Tiles tiles = Tiles::ByRule;
  TileOrder order{};
};

// What the kernels take: float16 / bfloat16, aux only with the GELU, sizes
// within int32, and what TMA needs: 16-byte aligned pointers and row strides.
bool supported(const LinearGemm& g);

// Where, of the supported calls, our GEMM is faster than cuBLASLt + the pass
// (a static rule on the shape, gemm.cu): the caller takes cuBLASLt elsewhere.
bool preferred(const LinearGemm& g);

// The tile configuration that runs: g.tiles where forced, else by the rule.
Tiles tiles_for(const LinearGemm& g);

// The tile order that runs: g.order where forced, else by the rule.
TileOrder order_for(const LinearGemm& g);

// Workspace bytes the launch needs (the tile scheduler's; may be 0).
size_t workspace_size(const LinearGemm& g);

cudaError_t launch(const LinearGemm& g, void* workspace, cudaStream_t stream);

// Per dtype, one heavy translation unit each (gemm_<dtype>.cu), so that the
// two compile in parallel; `workspace` null: return its size in *bytes only.
cudaError_t run_bf16(const LinearGemm& g, Tiles tiles, void* workspace, size_t* bytes, cudaStream_t stream);
cudaError_t run_fp16(const LinearGemm& g, Tiles tiles, void* workspace, size_t* bytes, cudaStream_t stream);

}  // namespace fusedops::cuda::sm90
