// linear's sm_90a GEMM: which calls it takes, and the dispatch by dtype and
// aux (the kernels are in gemm_<dtype>[_aux].cu).
#include <cstdint>
#include <limits>

#include "cuda/linear/sm90/gemm.h"

namespace fusedops::cuda::sm90 {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

constexpr int64_t kMaxK = 4096;

}  // namespace

bool supported(const LinearGemm& g) {
  if (g.dtype != DType::BFloat16 && g.dtype != DType::Float16) return false;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (g.m <= 64 || g.n < 1 || g.k < 1 || g.m > kMax || g.n > kMax) return false;
  // Past K = 4096 the second pass is a few % of the GEMM, less than cuBLASLt's
  // mainloop gains over ours (8192^3: benchmarks/results/NOTES.md).
  if (g.k > kMaxK) return false;
  constexpr int kAlign = 8;  // 16 bytes of a 2-byte dtype
  const bool rows = g.ldx % kAlign == 0 && g.ldw % kAlign == 0 && g.n % kAlign == 0 && g.k % kAlign == 0;
  const bool pointers = aligned16(g.x) && aligned16(g.w) && aligned16(g.out) &&
                        (g.bias == nullptr || aligned16(g.bias)) && (g.aux == nullptr || aligned16(g.aux));
  return rows && pointers;
}

size_t workspace_size(const LinearGemm& g) {
  return g.dtype == DType::BFloat16 ? workspace_size_bf16(g) : workspace_size_fp16(g);
}

cudaError_t launch(const LinearGemm& g, void* workspace, cudaStream_t stream) {
  if (!supported(g)) return cudaErrorInvalidValue;
  if (g.dtype == DType::BFloat16) {
    return g.aux ? launch_bf16_aux(g, workspace, stream) : launch_bf16(g, workspace, stream);
  }
  return g.aux ? launch_fp16_aux(g, workspace, stream) : launch_fp16(g, workspace, stream);
}

}  // namespace fusedops::cuda::sm90
