// cuBLASLt GEMMs for any op's CUDA glue, with cached plans (lt_gemm_cuda.cpp):
// inputs of one dtype (float16, bfloat16, float32), the output of that dtype or
// float32, optionally accumulated into (beta = 1).
//
// Layouts. torch tensors are row-major, cuBLASLt is column-major: a row-major
// C[M, N] is a column-major N x M matrix with ld = N. So a row-major product
// C = P[M, K] . Q[K, N] is computed as the column-major C^T = Q^T . P^T with
// m = N, n = M, k = K, cuBLAS A := Q^T and B := P^T (see operand_of). For the
// forward, P = x[M, K], Q = weight^T: the bias (per output feature) is per
// row of the column-major D, which is what CUBLASLT_EPILOGUE_BIAS broadcasts.
// For linear's weight gradient dW[N, K] = grad_z^T . x, B = grad_z (k = M,
// n = N), so CUBLASLT_EPILOGUE_BGRADB's reduction over k is the bias gradient.
#pragma once

#include <cublasLt.h>

#include <optional>

#include "cpp/common/cublas_math.h"
#include "cpp/common/stable.h"

namespace fusedops::lt {

// One operand of a column-major GEMM: stored rows x cols with leading dim ld,
// used as op(stored).
struct Operand {
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

// A row-major view M[rows, cols] of `dtype` with element (r, c) at ptr + r *
// s0 + c * s1 (elements), described without creating a tensor (transposes are
// free).
struct MatView {
  const void* ptr;
  int64_t rows, cols, s0, s1;
  ScalarType dtype;
};

inline MatView view_of(const Tensor& t) {
  return {.ptr = t.const_data_ptr(),
          .rows = t.size(0),
          .cols = t.size(1),
          .s0 = t.stride(0),
          .s1 = t.stride(1),
          .dtype = t.scalar_type()};
}
inline MatView transposed(const MatView& v) {
  return {.ptr = v.ptr, .rows = v.cols, .cols = v.rows, .s0 = v.s1, .s1 = v.s0, .dtype = v.dtype};
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt's
// heuristics assume of a pointer.
uint32_t alignment_of(const void* p);

// One GEMM request: D (column-major m x n, ldd) = op(A) . op(B) [+ epilogue]
// (+ D itself where `accumulate`); A and B of `dtype`, D of `out_dtype`.
struct GemmCall {
  ScalarType dtype, out_dtype;
  int device;
  Operand a, b;
  void* d;
  int64_t m, n, k, ldd;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;  // bias (forward) or bias gradient (BGRADB)
  void* aux = nullptr;   // GELU_AUX: the pre-activation, column-major m x n, ld aux_ld
  int64_t aux_ld = 0;
  bool accumulate = false;
};

// GEMM request for the row-major C[M, N] (contiguous) = P[M, K] . Q[K, N], P
// and Q of one dtype, C of it or float32; nullopt when cuBLASLt cannot take it
// (dtypes, sizes, an operand it cannot read in place): the caller falls back
// to torch's mm.
std::optional<GemmCall> row_major_gemm(const Tensor& c, const MatView& p, const MatView& q);

// What the GEMMs of one op call share: torch's cuBLAS handle and current
// stream, read once, and one workspace from torch's caching allocator on that
// stream, grown when a GEMM asks for more. The GEMMs run one after another on
// the stream, so one buffer serves them all (and CUDA graph capture records it
// like any tensor). Create it under the op's device guard; `op` names the op in
// errors.
class CallContext {
 public:
  CallContext(const char* op, const Tensor& like);
  const char* op() const { return op_; }
  // Read at the first GEMM, as torch's ops do: after the op's outputs are
  // allocated, which makes the device's context current on a fresh thread
  // (autograd's device threads), so cuBLAS need not warn that it sets it.
  cublasLtHandle_t handle();
  cudaStream_t stream() const { return stream_; }
  // At least `bytes` of workspace (null for 0).
  void* workspace(size_t bytes);

 private:
  const char* op_;
  Tensor like_;
  cublasLtHandle_t handle_ = nullptr;
  cudaStream_t stream_;
  Tensor buffer_;
  size_t size_ = 0;
};

// Runs the GEMM in `ctx` if cuBLASLt has an algorithm for it; false means the
// caller must fall back (nothing was written).
bool lt_gemm(const GemmCall& call, const CublasMath& math, CallContext& ctx);

}  // namespace fusedops::lt
