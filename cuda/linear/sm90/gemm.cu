// linear's sm_90a GEMM: which calls it takes, its tile rule, and the dispatch
// by dtype (the kernels are in gemm_<dtype>.cu).
#include <cstdint>
#include <initializer_list>
#include <limits>

#include "cuda/common/common.cuh"
#include "cuda/linear/sm90/gemm.h"

namespace fusedops::cuda::sm90 {
namespace {

constexpr int64_t kMaxK = 4096;

// The output tiles of g in configuration t: rows along M, cols along N.
struct Grid {
  int64_t rows, cols;
  int64_t tiles() const { return rows * cols; }
};
Grid grid_of(const LinearGemm& g, const TileGeometry& t) {
  return {(g.m + t.rows - 1) / t.rows, (g.n + t.cols - 1) / t.cols};
}

cudaError_t run(const LinearGemm& g, void* workspace, size_t* bytes, cudaStream_t stream) {
  const Tiles tiles = tiles_for(g);
  return g.dtype == DType::BFloat16 ? run_bf16(g, tiles, workspace, bytes, stream)
                                    : run_fp16(g, tiles, workspace, bytes, stream);
}

}  // namespace

bool supported(const LinearGemm& g) {
  if (g.dtype != DType::BFloat16 && g.dtype != DType::Float16) return false;
  if (g.aux != nullptr && g.act != Act::Gelu) return false;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (g.m < 1 || g.n < 1 || g.k < 1 || g.m > kMax || g.n > kMax || g.k > kMax) return false;
  constexpr int kAlign = 8;  // 16 bytes of a 2-byte dtype
  const bool rows = g.ldx % kAlign == 0 && g.ldw % kAlign == 0 && g.n % kAlign == 0 && g.k % kAlign == 0;
  const bool pointers = aligned16(g.x) && aligned16(g.w) && aligned16(g.out) &&
                        (g.bias == nullptr || aligned16(g.bias)) && (g.aux == nullptr || aligned16(g.aux));
  return rows && pointers;
}

// M <= 64 is a GEMV-like shape cuBLASLt serves better. Past K = 4096 the
// second pass is a few % of the GEMM, less than cuBLASLt's mainloop gains
// over ours, unless the grid is large enough for a swizzled tile order
// (order_for; 8192^3: 1.02x cuBLASLt + the pass with it, 0.99x without).
// Below about two waves of 128x128 tiles cuBLASLt's smaller tiles fill the
// GPU where ours cannot (benchmarks/results/NOTES.md, "The tile rule by
// device time").
bool preferred(const LinearGemm& g) {
  const int64_t tiles128 = grid_of(g, kPingPong128).tiles();
  return g.m > 64 && (g.k <= kMaxK || order_for(g).swizzle > 1) &&
         4 * tiles128 >= 7 * static_cast<int64_t>(g.sm_count);
}

// Cooperative 128x256 where K is long enough for its faster mainloop to
// outweigh an epilogue it does not overlap, and the grid still fills the GPU
// twice over; ping-pong 128x128 elsewhere (NOTES.md, "The tile rule by device
// time").
Tiles tiles_for(const LinearGemm& g) {
  if (g.tiles != Tiles::ByRule) return g.tiles;
  const bool coop =
      g.k >= 2048 && grid_of(g, kCooperative256).tiles() >= 2 * static_cast<int64_t>(g.sm_count);
  return coop ? Tiles::Cooperative256 : Tiles::PingPong128;
}

// Grids of 2048 or more 128x128 tiles (15 waves on an H200) are swizzled:
// each wave takes its tiles 8 wide along M, so they share rows of x and w in
// L2 (NOTES.md, "Tile orders for the sm_90a GEMM": 2-4% at 4096 tiles, no gain
// at 1024). CUTLASS pads each side of the grid to a multiple of swizzle x
// cluster, and a padded tile costs a whole mainloop (a swizzle of 8 over 8
// tile rows doubled the time): so the widest swizzle that pads nothing, else
// none.
TileOrder order_for(const LinearGemm& g) {
  if (g.order.swizzle != 0) return g.order;
  if (grid_of(g, kPingPong128).tiles() < 2048) return {1, Raster::Heuristic};
  const TileGeometry& t = tiles_for(g) == Tiles::Cooperative256 ? kCooperative256 : kPingPong128;
  const Grid grid = grid_of(g, t);
  for (int swizzle : {8, 4, 2}) {
    if (grid.rows % (swizzle * t.cluster_m) == 0 && grid.cols % (swizzle * t.cluster_n) == 0)
      return {swizzle, Raster::AlongM};
  }
  return {1, Raster::Heuristic};
}

size_t workspace_size(const LinearGemm& g) {
  size_t bytes = 0;
  return run(g, nullptr, &bytes, nullptr) == cudaSuccess ? bytes : 0;
}

cudaError_t launch(const LinearGemm& g, void* workspace, cudaStream_t stream) {
  if (!supported(g)) return cudaErrorInvalidValue;
  return run(g, workspace, nullptr, stream);
}

}  // namespace fusedops::cuda::sm90
