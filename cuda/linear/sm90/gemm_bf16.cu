// linear's sm_90a GEMM kernels for bfloat16 (gemm_kernel.cuh): six instantiations.
#include "cuda/linear/sm90/gemm_kernel.cuh"

namespace fusedops::cuda::sm90 {

cudaError_t run_bf16(const LinearGemm& g, Tiles tiles, void* workspace, size_t* bytes, cudaStream_t stream) {
  return run_typed<cutlass::bfloat16_t>(g, tiles, workspace, bytes, stream);
}

}  // namespace fusedops::cuda::sm90
