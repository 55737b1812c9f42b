// The vocab slab's gradient at the logits straight out of an sm_90a GEMM
// (CUTLASS; slab_gemm.cu): dl[M, cols] = lce_grad of the logits x . w^T
// (+ bias), computed by the epilogue on the float32 accumulator and rounded
// once to x's dtype, so the slab's float32 logits never reach memory (the
// unfused path writes them, reads them back and writes dl: chunks.h's
// run_slabs). Torch-free. Compiled only where CUTLASS's headers were found
// (FUSEDOPS_WITH_CUTLASS); the caller checks the device is sm_90 and that
// `slab_supported` holds, else it takes the unfused path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda/linear/sm90/gemm.h"

namespace fusedops::cuda::sm90 {

// The rows' values the epilogue reads, float32 [M] each: the forward's lse,
// and what launch_lce_slab_rows writes once a backward: the factor (grad x
// scale; NaN where the target is out of range) and the target's column as a
// float (-1 where it is ignored: those rows get 0).
struct SlabRows {
  const float* lse;
  const float* factor;
  const float* target;
};

// gemm: x [M, K] (row stride ldx), w = the slab's rows of weight [cols, K],
// out = dl [M, cols] dense; its bias, act and clamp are unused. columns:
// float32 [cols], the slab's column indices (exact: the caller keeps the
// vocab below 2^24); bias: float32 [cols] or null.
struct SlabGemm {
  LinearGemm gemm;
  const float* bias;
  const float* columns;
  SlabRows rows;
  float softcap;  // 0: none
  float spread;   // label smoothing / V
  float hit;      // 1 - label smoothing
};

// What the kernel takes: linear's `supported` for the GEMM (no bias, act or
// aux of its own) and 16-byte aligned vectors.
bool slab_supported(const SlabGemm& s);

// Workspace bytes the launch needs (the tile scheduler's; may be 0).
size_t slab_workspace_size(const SlabGemm& s);

cudaError_t launch_slab_gemm(const SlabGemm& s, void* workspace, cudaStream_t stream);

}  // namespace fusedops::cuda::sm90
