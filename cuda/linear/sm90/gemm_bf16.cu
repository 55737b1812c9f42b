// linear's sm_90a GEMM for bfloat16, without aux (gemm_kernel.cuh).
#include "cuda/linear/sm90/gemm_kernel.cuh"

namespace fusedops::cuda::sm90 {

size_t workspace_size_bf16(const LinearGemm& g) {
  return Sm90Linear<cutlass::bfloat16_t, false>::workspace_size(g);
}

cudaError_t launch_bf16(const LinearGemm& g, void* workspace, cudaStream_t stream) {
  return Sm90Linear<cutlass::bfloat16_t, false>::launch(g, workspace, stream);
}

}  // namespace fusedops::cuda::sm90
