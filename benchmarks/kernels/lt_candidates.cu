// Every algorithm cuBLASLt's heuristic offers (its first 8) for linear_cross_entropy's GEMMs, timed, with the
// heuristic's waves (what cpp/common/lt_gemm_cuda.cpp chooses by) and, for float32 outputs, whether each
// computes the same bits as the first. Row-major out[n, m] = x[n, k] . w[m, k]^T and the gradients' layouts,
// as the op's cuBLASLt calls see them (column-major). Build and run (cuBLAS headers and library from torch's
// nvidia/cu13):
//   nvcc -std=c++20 -O2 -arch=sm_90 -I. -I$CU/include benchmarks/kernels/lt_candidates.cu -o lt_candidates \
//        -L$CU/lib -l:libcublasLt.so.13 -Xlinker -rpath=$CU/lib && ./lt_candidates
#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "benchmarks/kernels/timing.cuh"

#define LT(x)                                                 \
  do {                                                        \
    cublasStatus_t s = (x);                                   \
    if (s != CUBLAS_STATUS_SUCCESS) {                         \
      printf("cuBLASLt status %d at %d\n", int(s), __LINE__); \
      exit(1);                                                \
    }                                                         \
  } while (0)

struct Gemm {
  const char* label;
  int64_t m, n, k;  // column-major D (m x n) = op(A) . op(B)
  bool trans_a, trans_b;
  cudaDataType_t out;
  float beta;
};

void run(cublasLtHandle_t handle, const Gemm& g, const void* a, const void* b, void* d, void* workspace,
         size_t workspace_bytes) {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulPreference_t pref;
  LT(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  LT(g.trans_a ? cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, g.k, g.m, g.k)
               : cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, g.m, g.k, g.m));
  LT(g.trans_b ? cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, g.n, g.k, g.n)
               : cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, g.k, g.n, g.k));
  LT(cublasLtMatrixLayoutCreate(&ld, g.out, g.m, g.n, g.m));
  LT(cublasLtMatmulPreferenceCreate(&pref));
  LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                          sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t results[8];
  int found = 0;
  LT(cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 8, results, &found));
  const float alpha = 1;
  const size_t count = size_t(g.m) * g.n;
  std::vector<float> first, mine;
  for (int i = 0; i < found; ++i) {
    const cublasLtMatmulAlgo_t* algo = &results[i].algo;
    const float us = time_us(
        [&] {
          LT(cublasLtMatmul(handle, desc, &alpha, a, la, b, lb, &g.beta, d, ld, d, ld, algo, workspace,
                            workspace_bytes, nullptr));
        },
        20, 3);
    int tile = 0;
    size_t size = 0;
    LT(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &size));
    const float waves = results[i].wavesCount, fill = waves > 0 ? waves / std::ceil(waves) : 0;
    printf(
        "%-10s m %6ld n %6ld k %6ld  #%d tile id %3d  waves %7.2f (last %3.0f%% full)  %.3f ms  %4.0f "
        "TFLOP/s",
        g.label, long(g.m), long(g.n), long(g.k), i, tile, waves, 100 * fill, us / 1e3,
        2.0 * g.m * g.n * g.k / us / 1e6);
    if (g.out == CUDA_R_32F && g.beta == 0) {  // the same bits as the first candidate?
      mine.resize(count);
      CK(cudaMemcpy(mine.data(), d, count * sizeof(float), cudaMemcpyDeviceToHost));
      if (i == 0) first = mine;
      printf("  %s",
             std::memcmp(first.data(), mine.data(), count * sizeof(float)) == 0 ? "same bits" : "DIFFERS");
    }
    printf("\n");
  }
  LT(cublasLtMatmulPreferenceDestroy(pref));
  LT(cublasLtMatrixLayoutDestroy(ld));
  LT(cublasLtMatrixLayoutDestroy(lb));
  LT(cublasLtMatrixLayoutDestroy(la));
  LT(cublasLtMatmulDescDestroy(desc));
}

int main() {
  const int64_t V = 128256, H = 2048, kMost = 151936 * 4096;  // elements of the largest operand
  __nv_bfloat16 *w, *x;
  void *d, *workspace;
  const size_t workspace_bytes = size_t(32) << 20;  // torch's and lt_gemm's on sm_90
  CK(cudaMalloc(&w, kMost * sizeof(__nv_bfloat16)));
  CK(cudaMalloc(&x, kMost * sizeof(__nv_bfloat16)));
  CK(cudaMalloc(&d, kMost * sizeof(float)));
  CK(cudaMalloc(&workspace, workspace_bytes));
  fill_random<<<1024, 256>>>(w, kMost, 1);
  fill_random<<<1024, 256>>>(x, kMost, 2);
  CK(cudaGetLastError());
  cublasLtHandle_t handle;
  LT(cublasLtCreate(&handle));
  std::vector<Gemm> gemms;
  // The logits of `tokens` rows: column-major (V x tokens) = w (op T of H x V) . x^T (H x tokens).
  for (int64_t tokens : {512, 1024, 2048})
    gemms.push_back({"logits", V, tokens, H, true, false, CUDA_R_32F, 0});
  for (int64_t vocab : {32000, 151936})
    gemms.push_back({"logits", vocab, 512, H, true, false, CUDA_R_32F, 0});
  for (int64_t vocab : {int64_t(32000), V, int64_t(151936)}) {
    gemms.push_back({"logits", vocab, 1024, 4096, true, false, CUDA_R_32F, 0});
  }
  // x's gradient of 2048 tokens: column-major (H x tokens) = w^T (H x V) . dl^T (V x tokens).
  gemms.push_back({"grad_x", H, 2048, V, false, false, CUDA_R_32F, 0});
  // weight's gradient of 2048 tokens, alone and accumulated: (H x V) (+)= x^T (H x tokens) . dl (op T of V x
  // tokens).
  for (float beta : {0.f, 1.f}) gemms.push_back({"grad_w", H, V, 2048, false, true, CUDA_R_32F, beta});
  for (const Gemm& g : gemms) {
    const bool grad_w = std::strcmp(g.label, "grad_w") == 0;  // x is its A, the gradient at the logits its B
    run(handle, g, grad_w ? x : w, grad_w ? w : x, d, workspace, workspace_bytes);
  }
  LT(cublasLtDestroy(handle));
  free_all(w, x, d, workspace);
  return 0;
}
