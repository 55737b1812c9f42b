// The vocab slab's gradient GEMM (slab_gemm.h) as CUTLASS types: linear's
// mainloop and tile configurations (cuda/linear/sm90/gemm_kernel.cuh) under
// an epilogue tree of our own, whose one compute node takes the accumulator,
// two per-column vectors (bias, column index) and three per-row ones (lse,
// factor, target column) and applies lce_grad (cuda/linear_cross_entropy/
// lce_math.h) in float32. bfloat16 and float16, one translation unit.
#include <cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp>
#include <cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp>
#include <cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp>

#include "cuda/common/common.cuh"
#include "cuda/linear/sm90/gemm_kernel.cuh"
#include "cuda/linear_cross_entropy/sm90/slab_gemm.h"

namespace fusedops::cuda::sm90 {
namespace {

namespace fusion = cutlass::epilogue::fusion;

struct SlabMath {
  float softcap, spread, hit;
};

// w * (exp(z - lse) - spread - (column == target) * hit) * (1 - (z / c)^2)
// for z = c * tanh((acc + bias) / c) (z = acc + bias without a softcap); 0
// where the target is ignored (-1). exp as __expf: the output is a half type,
// as the held rows kernel's (cuda/linear_cross_entropy/linear_cross_entropy.cu).
template <class V>
struct SlabGrad {
  using Arguments = SlabMath;

  CUTLASS_DEVICE V operator()(const V& acc, const V& bias, const V& column, const V& lse, const V& factor,
                              const V& target, const SlabMath& m) const {
    V out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < V::kElements; ++i) {
      float z = acc[i] + bias[i], shrink = 1.0f;
      if (m.softcap > 0.0f) {
        const float u = tanhf(z / m.softcap);
        z = m.softcap * u;
        shrink = 1.0f - u * u;
      }
      const float d = __expf(z - lse[i]) - m.spread - (column[i] == target[i] ? m.hit : 0.0f);
      out[i] = target[i] == -1.0f ? 0.0f : factor[i] * d * shrink;
    }
    return out;
  }
};

template <class T, class Config>
struct Sm90SlabGrad {
  using PerColumn =
      fusion::Sm90RowBroadcast<0, typename Config::TileShape, float, float>;             // a value a column
  using PerRow = fusion::Sm90ColBroadcast<0, typename Config::TileShape, float, float>;  // a value a row
  using Tree =
      fusion::Sm90EVT<fusion::Sm90Compute<SlabGrad, T, float, cutlass::FloatRoundStyle::round_to_nearest>,
                      fusion::Sm90AccFetch, PerColumn, PerColumn, PerRow, PerRow, PerRow>;
  using Gemm = typename Sm90Gemm<T, Config, Tree>::Gemm;

  static cudaError_t run(const SlabGemm& s, void* workspace, size_t* bytes, cudaStream_t stream) {
    typename Gemm::Arguments args = gemm_arguments<Gemm>(s.gemm);
    // The tree's children in order, then its node's math (a null bias: the broadcast's zero).
    args.epilogue.thread = {{},
                            {s.bias},
                            {s.columns},
                            {s.rows.lse},
                            {s.rows.factor},
                            {s.rows.target},
                            {s.softcap, s.spread, s.hit}};
    return run_gemm<Gemm>(args, workspace, bytes, stream);
  }
};

cudaError_t run(const SlabGemm& s, void* workspace, size_t* bytes, cudaStream_t stream) {
  return run_by_tiles<Sm90SlabGrad>(s, workspace, bytes, stream);
}

}  // namespace

bool slab_supported(const SlabGemm& s) {
  const bool vectors = (s.bias == nullptr || aligned16(s.bias)) && aligned16(s.columns) &&
                       aligned16(s.rows.lse) && aligned16(s.rows.factor) && aligned16(s.rows.target);
  return supported(s.gemm) && s.gemm.act == Act::None && s.gemm.bias == nullptr && s.gemm.aux == nullptr &&
         vectors;
}

size_t slab_workspace_size(const SlabGemm& s) {
  size_t bytes = 0;
  return run(s, nullptr, &bytes, nullptr) == cudaSuccess ? bytes : 0;
}

cudaError_t launch_slab_gemm(const SlabGemm& s, void* workspace, cudaStream_t stream) {
  if (!slab_supported(s)) return cudaErrorInvalidValue;
  return run(s, workspace, nullptr, stream);
}

}  // namespace fusedops::cuda::sm90
