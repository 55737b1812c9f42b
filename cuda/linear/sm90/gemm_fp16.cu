// linear's sm_90a GEMM for float16, without aux (gemm_kernel.cuh).
#include "cuda/linear/sm90/gemm_kernel.cuh"

namespace fusedops::cuda::sm90 {

size_t workspace_size_fp16(const LinearGemm& g) {
  return Sm90Linear<cutlass::half_t, false>::workspace_size(g);
}

cudaError_t launch_fp16(const LinearGemm& g, void* workspace, cudaStream_t stream) {
  return Sm90Linear<cutlass::half_t, false>::launch(g, workspace, stream);
}

}  // namespace fusedops::cuda::sm90
