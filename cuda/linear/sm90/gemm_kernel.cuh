// linear's sm_90a GEMM as CUTLASS types: TMA loads, warp-specialized kernels
// (ping-pong: one consumer warpgroup's epilogue overlaps the other's MMA;
// cooperative: two warpgroups on one 128x256 tile), and CUTLASS's per-column
// bias + activation (+ aux store) epilogue tree whose activation node is our
// functor (ClampedAct below) on acc + bias in fp32. Included by one .cu per
// dtype (gemm_<dtype>.cu), so the heavy instantiations compile in parallel.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <type_traits>

#include "cuda/linear/sm90/epilogue_math.cuh"
#include "cuda/linear/sm90/gemm.h"

namespace fusedops::cuda::sm90 {

// The run-time part of the epilogue: the clamp's bounds (+-inf where absent).
// CUTLASS's Sm90Compute node hands a functor's `Arguments` (looked up on
// Fn<float>) to every call on an Array of values: the one type serves both.
struct Bounds {
  float lo, hi;
};

// clamp(act(v), lo, hi), the activation fixed at compile time, as the
// activation functor of the epilogue tree (called on an Array of floats).
template <Act kAct>
struct ClampedAct {
  template <class T>
  struct Fn {
    using Arguments = Bounds;

    static CUTLASS_DEVICE float one(float v, const Bounds& b) {
      if constexpr (kAct == Act::Gelu) v = FastGelu::apply(v);
      return clamp_nan(v, b.lo, b.hi);
    }

    CUTLASS_DEVICE T operator()(const T& v, const Bounds& b) const {
      if constexpr (std::is_same_v<T, float>) {
        return one(v, b);
      } else {
        T r;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < T::kElements; ++i) r[i] = one(v[i], b);
        return r;
      }
    }
  };
};

// 128x128 per consumer warpgroup (ping-pong: two tiles in flight per CTA),
// K in steps of 64; clusters of two along N share x's tile by multicast.
struct PingPong128 {
  using TileShape = cute::Shape<cute::Int<kPingPong128.rows>, cute::Int<kPingPong128.cols>, cute::_64>;
  using ClusterShape =
      cute::Shape<cute::Int<kPingPong128.cluster_m>, cute::Int<kPingPong128.cluster_n>, cute::_1>;
  using Schedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
};

// Two consumer warpgroups on one 128x256 tile; clusters of two along M share
// w's tile. Its mainloop is faster at K >= 2048 (4096^3: NOTES.md), where the
// epilogue, not overlapped here, is a small part of a tile's time.
struct Cooperative256 {
  using TileShape = cute::Shape<cute::Int<kCooperative256.rows>, cute::Int<kCooperative256.cols>, cute::_64>;
  using ClusterShape =
      cute::Shape<cute::Int<kCooperative256.cluster_m>, cute::Int<kCooperative256.cluster_n>, cute::_1>;
  using Schedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
};

// What every kernel of ours takes from g besides its epilogue tree's own
// arguments: the problem, x and w, the dense output, the SM count and the
// tile order.
template <class Gemm>
typename Gemm::Arguments gemm_arguments(const LinearGemm& g) {
  using Kernel = typename Gemm::GemmKernel;
  using Element = typename Gemm::ElementA;
  typename Kernel::StrideA sx{};
  typename Kernel::StrideB sw{};
  typename Kernel::StrideD sd{};
  cute::get<0>(sx) = g.ldx;
  cute::get<0>(sw) = g.ldw;
  cute::get<0>(sd) = g.n;
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1};
  args.mainloop = {static_cast<const Element*>(g.x), sx, static_cast<const Element*>(g.w), sw};
  args.epilogue.ptr_C = nullptr;
  args.epilogue.ptr_D = static_cast<Element*>(g.out);
  args.epilogue.dD = sd;
  args.hw_info.sm_count = g.sm_count;
  const TileOrder order = order_for(g);
  using Options = typename Kernel::TileScheduler::RasterOrderOptions;
  args.scheduler.max_swizzle_size = order.swizzle;
  args.scheduler.raster_order = order.raster == Raster::AlongM   ? Options::AlongM
                                : order.raster == Raster::AlongN ? Options::AlongN
                                                                 : Options::Heuristic;
  return args;
}

// Runs the GEMM with args; workspace null: *bytes = the workspace it needs.
template <class Gemm>
cudaError_t run_gemm(const typename Gemm::Arguments& args, void* workspace, size_t* bytes,
                     cudaStream_t stream) {
  if (workspace == nullptr && bytes != nullptr) {
    *bytes = Gemm::get_workspace_size(args);
    return cudaSuccess;
  }
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
  if (gemm.run(stream) != cutlass::Status::kSuccess) {
    const cudaError_t error = cudaGetLastError();
    return error == cudaSuccess ? cudaErrorLaunchFailure : error;
  }
  return cudaGetLastError();
}

// Kernel<T, Config>::run(call, ...) for call.gemm's dtype and tile
// configuration: the dispatch of a GEMM of ours with its own epilogue tree
// (`Call` holds a LinearGemm `gemm` and the tree's arguments).
template <template <class, class> class Kernel, class Call>
cudaError_t run_by_tiles(const Call& call, void* workspace, size_t* bytes, cudaStream_t stream) {
  const bool coop = tiles_for(call.gemm) == Tiles::Cooperative256;
  if (call.gemm.dtype == DType::BFloat16) {
    return coop ? Kernel<cutlass::bfloat16_t, Cooperative256>::run(call, workspace, bytes, stream)
                : Kernel<cutlass::bfloat16_t, PingPong128>::run(call, workspace, bytes, stream);
  }
  return coop ? Kernel<cutlass::half_t, Cooperative256>::run(call, workspace, bytes, stream)
              : Kernel<cutlass::half_t, PingPong128>::run(call, workspace, bytes, stream);
}

// The kernel types of a GEMM of ours, x [M, K] . w [N, K]^T in T, whose
// epilogue is `FusionOp` (a CUTLASS fusion operation or epilogue tree) on the
// float32 accumulator, writing a dense [M, N] of T.
template <class T, class Config, class FusionOp>
struct Sm90Gemm {
  using Layout = cutlass::layout::RowMajor;      // x [M, K], out [M, N]
  using LayoutW = cutlass::layout::ColumnMajor;  // w [N, K] row-major is K x N column-major
  static constexpr int kAlign = 16 / sizeof(T);  // TMA: 16-byte rows

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Config::TileShape,
      typename Config::ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto, float, float, void,
      Layout, kAlign, T, Layout, kAlign, typename Config::EpilogueSchedule, FusionOp>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, Layout, kAlign, T, LayoutW, kAlign, float,
      typename Config::TileShape, typename Config::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Config::Schedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// linear's: CUTLASS's per-column bias + activation (+ aux z) tree.
template <class T, Act kAct, bool kAux, class Config>
struct Sm90Linear {
  static constexpr int kAlign = 16 / sizeof(T);
  template <class V>
  using Fn = typename ClampedAct<kAct>::template Fn<V>;

  using FusionOp = std::conditional_t<
      kAux,
      cutlass::epilogue::fusion::LinCombPerColBiasEltActAux<cutlass::layout::RowMajor, Fn, T, float, T, T, T,
                                                            float, kAlign, kAlign>,
      cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Fn, T, float, T, T, float, kAlign>>;
  using Gemm = typename Sm90Gemm<T, Config, FusionOp>::Gemm;

  // The bounds reach the functor only if the tree's activation node takes them.
  static_assert(
      std::is_same_v<
          typename Sm90Gemm<T, Config, FusionOp>::Epilogue::FusionCallbacks::Arguments::ActivationArguments,
          Bounds>);

  static cudaError_t run(const LinearGemm& g, void* workspace, size_t* bytes, cudaStream_t stream) {
    typename Gemm::Arguments args = gemm_arguments<Gemm>(g);
    auto& fusion = args.epilogue.thread;
    fusion.bias_ptr = static_cast<const T*>(g.bias);  // null: the broadcast's zero
    fusion.activation = Bounds{g.lo, g.hi};
    if constexpr (kAux) {
      fusion.aux_ptr = static_cast<T*>(g.aux);
      fusion.dAux = args.epilogue.dD;
    }
    return run_gemm<Gemm>(args, workspace, bytes, stream);
  }
};

// Every kernel of one dtype and tile configuration: GELU or clamp only, aux
// only with the GELU (the backward of a clamp alone keeps cuBLASLt, which
// writes z, + the pass).
template <class T, class Config>
cudaError_t run_config(const LinearGemm& g, void* workspace, size_t* bytes, cudaStream_t stream) {
  if (g.act == Act::None) return Sm90Linear<T, Act::None, false, Config>::run(g, workspace, bytes, stream);
  if (g.aux != nullptr) return Sm90Linear<T, Act::Gelu, true, Config>::run(g, workspace, bytes, stream);
  return Sm90Linear<T, Act::Gelu, false, Config>::run(g, workspace, bytes, stream);
}

template <class T>
cudaError_t run_typed(const LinearGemm& g, Tiles tiles, void* workspace, size_t* bytes, cudaStream_t stream) {
  return tiles == Tiles::Cooperative256 ? run_config<T, Cooperative256>(g, workspace, bytes, stream)
                                        : run_config<T, PingPong128>(g, workspace, bytes, stream);
}

}  // namespace fusedops::cuda::sm90
