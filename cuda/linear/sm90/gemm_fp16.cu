// linear's sm_90a GEMM kernels for half (gemm_kernel.cuh): six instantiations.
#include "cuda/linear/sm90/gemm_kernel.cuh"

namespace fusedops::cuda::sm90 {

cudaError_t run_fp16(const LinearGemm& g, Tiles tiles, void* workspace, size_t* bytes, cudaStream_t stream) {
  return run_typed<cutlass::half_t>(g, tiles, workspace, bytes, stream);
}

}  // namespace fusedops::cuda::sm90
