// linear's sm_90a GEMM as CUTLASS types: TMA loads, warp-specialized ping-pong
// (one consumer warpgroup's epilogue overlaps the other's MMA, which hides the
// erf GELU), and an epilogue that applies our own functor (Gelu, below) to
// acc + bias in fp32 through CUTLASS's per-column-bias + activation (+ aux
// store) visitor tree. Included by one .cu per dtype and aux or not
// (gemm_<dtype>[_aux].cu), so the heavy instantiations compile in parallel.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <type_traits>

#include "cuda/linear/linear_math.h"
#include "cuda/linear/sm90/gemm.h"

namespace fusedops::cuda::sm90 {

// The erf GELU on the fp32 value acc + bias, as the CUTLASS activation
// functor (called on a float or on an Array of them). A compile-time functor:
// a run-time choice of activation and bounds inside the epilogue loop halved
// the GEMM's speed (benchmarks/results/NOTES.md).
template <class T>
struct Gelu {
  CUTLASS_DEVICE T operator()(const T& v) const {
    if constexpr (std::is_same_v<T, float>) {
      return gelu_erf(v);
    } else {
      T r;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < T::kElements; ++i) r[i] = gelu_erf(v[i]);
      return r;
    }
  }
};

// 128x128 per consumer warpgroup (ping-pong: two tiles in flight per CTA),
// K in steps of 64; clusters of two along N share x's tile by multicast.
struct PingPong128 {
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;
  using Schedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
};

template <class T, bool kAux, class Config = PingPong128>
struct Sm90Linear {
  using Layout = cutlass::layout::RowMajor;      // x [M, K], out and aux [M, N]
  using LayoutW = cutlass::layout::ColumnMajor;  // w [N, K] row-major is K x N column-major
  static constexpr int kAlign = 16 / sizeof(T);  // TMA: 16-byte rows
  using TileShape = typename Config::TileShape;
  using ClusterShape = typename Config::ClusterShape;

  using FusionOp = std::conditional_t<
      kAux,
      cutlass::epilogue::fusion::LinCombPerColBiasEltActAux<Layout, Gelu, T, float, T, T, T, float, kAlign,
                                                            kAlign>,
      cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Gelu, T, float, T, T, float, kAlign>>;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, Layout, kAlign, T, Layout, kAlign,
      typename Config::EpilogueSchedule, FusionOp>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, Layout, kAlign, T, LayoutW, kAlign, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Config::Schedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Gemm::Arguments arguments(const LinearGemm& g) {
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
    auto& fusion = args.epilogue.thread;
    fusion.bias_ptr = static_cast<const Element*>(g.bias);  // null: the broadcast's zero
    if constexpr (kAux) {
      fusion.aux_ptr = static_cast<Element*>(g.aux);
      fusion.dAux = sd;
    }
    args.epilogue.ptr_C = nullptr;
    args.epilogue.ptr_D = static_cast<Element*>(g.out);
    args.epilogue.dD = sd;
    args.hw_info.sm_count = g.sm_count;
    return args;
  }

  static size_t workspace_size(const LinearGemm& g) { return Gemm::get_workspace_size(arguments(g)); }

  static cudaError_t launch(const LinearGemm& g, void* workspace, cudaStream_t stream) {
    const typename Gemm::Arguments args = arguments(g);
    Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
    if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
    if (gemm.run(stream) != cutlass::Status::kSuccess) {
      const cudaError_t error = cudaGetLastError();
      return error == cudaSuccess ? cudaErrorLaunchFailure : error;
    }
    return cudaGetLastError();
  }
};

}  // namespace fusedops::cuda::sm90
