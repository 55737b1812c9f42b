// linear's sm_90a GEMM for bfloat16, writing the pre-activation z too (gemm_kernel.cuh).
#include "cuda/linear/sm90/gemm_kernel.cuh"

namespace fusedops::cuda::sm90 {

cudaError_t launch_bf16_aux(const LinearGemm& g, void* workspace, cudaStream_t stream) {
  return Sm90Linear<cutlass::bfloat16_t, true>::launch(g, workspace, stream);
}

}  // namespace fusedops::cuda::sm90
