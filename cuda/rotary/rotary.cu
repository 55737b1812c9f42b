// fusedops.rotary's CUDA kernel: one launch rotates q and k (or rotates their
// gradients back). A thread takes one unit (kPairs pairs) of one position for
// kHeads heads: it reads the unit's cos and sin once and applies them to each
// of those heads (the tables are per position, shared by every head), loading
// all of its heads before it stores any. Consecutive threads take consecutive
// units of a row, so each row is read and written whole by neighbouring
// threads. Where every operand is dense along head_dim with 16-byte aligned
// rows, a unit moves 16-byte vectors (kPairs = 16 / sizeof(T)); otherwise it
// is one pair, at any strides.
#include "cuda/common/common.cuh"
#include "cuda/rotary/rotary.h"

namespace fusedops::cuda {
namespace {

// Heads per thread: 2 keeps a bfloat16 vector thread near 120 registers
// (4 needs about 170: one block of 256 threads per SM).
constexpr int kHeads = 2;

// N elements at p, `stride` apart, as they are (converted when rotated);
// kVector: dense and 16-byte aligned, read as 16-byte vectors.
template <bool kVector, int N, typename T>
__device__ __forceinline__ void load(const T* p, int64_t stride, T* out) {
  if constexpr (kVector) {
    constexpr int kV = kVec16<T>;
    static_assert(N % kV == 0, "a run is whole vectors");
#pragma unroll
    for (int i = 0; i < N / kV; ++i) {
      const Vec<T, kV> v = reinterpret_cast<const Vec<T, kV>*>(p)[i];
#pragma unroll
      for (int e = 0; e < kV; ++e) out[i * kV + e] = v.v[e];
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = p[i * stride];
  }
}

// N dense elements at p (16-byte aligned where kVector), each rounded once.
template <bool kVector, int N, typename T>
__device__ __forceinline__ void store(T* p, const opmath_t<T>* in) {
  if constexpr (kVector) {
    constexpr int kV = kVec16<T>;
#pragma unroll
    for (int i = 0; i < N / kV; ++i) {
      Vec<T, kV> v;
#pragma unroll
      for (int e = 0; e < kV; ++e) v.v[e] = from_opmath<T>(in[i * kV + e]);
      reinterpret_cast<Vec<T, kV>*>(p)[i] = v;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = from_opmath<T>(in[i]);
  }
}

// A unit's 2 * kPairs elements are two runs of kPairs, at `first` and
// `second`: rotate_half's pairs (i, i + R/2) lie across the runs; GPT-J's
// pairs (2i, 2i + 1) and the pass-through elements past R fill one dense chunk.
struct Unit {
  bool rotated, halves;
  int64_t first, second;
};

template <int kPairs>
__device__ __forceinline__ Unit unit_of(const RotaryProblem& p, int64_t unit) {
  const bool rotated = unit * 2 * kPairs < p.rotary_dim;
  const bool halves = rotated && !p.interleaved;
  const int64_t first = halves ? unit * kPairs : unit * 2 * kPairs;
  return {.rotated = rotated,
          .halves = halves,
          .first = first,
          .second = first + (halves ? p.rotary_dim / 2 : kPairs)};
}

template <bool kVector, int kPairs, typename T>
__device__ __forceinline__ void load_unit(const T* p, int64_t stride, const Unit& u, T* out) {
  load<kVector, kPairs>(p + u.first * stride, stride, out);
  load<kVector, kPairs>(p + u.second * stride, stride, out + kPairs);
}

// y = the unit x rotated by its cos c and sin s, in the op-math type A.
template <int kPairs, typename A, typename T, typename C>
__device__ __forceinline__ void rotate_unit(const Unit& u, const T* x, const C* c, const C* s, bool transpose,
                                            A* y) {
#pragma unroll
  for (int e = 0; e < 2 * kPairs; ++e) y[e] = to_opmath(x[e]);
  const auto pair = [&](int a, int b) {
    rotate_pair<A>(y[a], y[b], to_opmath(c[a]), to_opmath(c[b]), to_opmath(s[a]), to_opmath(s[b]), transpose);
  };
  if (u.halves) {
#pragma unroll
    for (int t = 0; t < kPairs; ++t) pair(t, t + kPairs);
  } else if (u.rotated) {
#pragma unroll
    for (int t = 0; t < kPairs; ++t) pair(2 * t, 2 * t + 1);
  }
}

// Unit `unit` of position (b, s) for heads [head0, head0 + kHeads) (q's, then k's).
template <typename T, typename C, int kPairs, bool kVector>
__device__ __forceinline__ void rotary_unit(const RotaryProblem& p, int64_t b, int64_t s, int64_t head0,
                                            int64_t unit) {
  const Unit u = unit_of<kPairs>(p, unit);
  C cos[2 * kPairs], sin[2 * kPairs];
  if (u.rotated) {
    load_unit<kVector, kPairs>(
        static_cast<const C*>(p.cos.data) + b * p.cos.strides[0] + s * p.cos.strides[1], p.cos.strides[2], u,
        cos);
    load_unit<kVector, kPairs>(
        static_cast<const C*>(p.sin.data) + b * p.sin.strides[0] + s * p.sin.strides[1], p.sin.strides[2], u,
        sin);
  }
  const int64_t heads = p.q.heads + p.k.heads;
  RotaryRow rows[kHeads];
  T x[kHeads][2 * kPairs];
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    if (head0 + j >= heads) break;
    rows[j] = rotary_row(p, b, s, head0 + j);
    load_unit<kVector, kPairs>(static_cast<const T*>(rows[j].is_q ? p.q.in : p.k.in) + rows[j].in,
                               rows[j].in_stride, u, x[j]);
  }
#pragma unroll
  for (int j = 0; j < kHeads; ++j) {
    if (head0 + j >= heads) break;
    opmath_t<T> y[2 * kPairs];
    rotate_unit<kPairs>(u, x[j], cos, sin, p.transpose, y);
    T* out = static_cast<T*>(rows[j].is_q ? p.q.out : p.k.out) + rows[j].out;
    store<kVector, kPairs>(out + u.first, y);
    store<kVector, kPairs>(out + u.second, y + kPairs);
  }
}

// Work item i: unit i % units of head group (i / units) % groups of position
// i / (units * groups); 64-bit throughout.
template <typename T, typename C, bool kVector>
__global__ void __launch_bounds__(kThreads)
    rotary_kernel(const __grid_constant__ RotaryProblem p, int64_t units, int64_t groups, int64_t items) {
  constexpr int kPairs = kVector ? kVec16<T> : 1;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += stride) {
    const int64_t rest = i / units, pos = rest / groups;
    rotary_unit<T, C, kPairs, kVector>(p, pos / p.seq, pos % p.seq, (rest % groups) * kHeads, i % units);
  }
}

// Whether every row of a `dims`-dim operand is dense along its last dim and
// starts 16-byte aligned (vectors of `vec` elements).
bool vector_rows(const void* data, const int64_t* strides, int dims, int64_t vec) {
  if (!aligned16(data) || strides[dims - 1] != 1) return false;
  for (int d = 0; d < dims - 1; ++d) {
    if (strides[d] % vec != 0) return false;
  }
  return true;
}

template <typename T, typename C>
bool vectorizable(const RotaryProblem& p) {
  constexpr int64_t kChunk = 2 * kVec16<T>;
  const auto tensor = [](const RotaryTensor& x) {
    return x.heads == 0 || (vector_rows(x.in, x.strides, 4, kVec16<T>) && aligned16(x.out));
  };
  const auto table = [&](const RotaryTable& t) {
    return p.rotary_dim == 0 || vector_rows(t.data, t.strides, 3, kVec16<C>);
  };
  return p.head_dim % kChunk == 0 && p.rotary_dim % kChunk == 0 && tensor(p.q) && tensor(p.k) &&
         table(p.cos) && table(p.sin);
}

template <typename T, typename C, bool kVector>
cudaError_t launch(const RotaryProblem& p, cudaStream_t stream) {
  constexpr int64_t kPairs = kVector ? kVec16<T> : 1;
  const int64_t units = p.head_dim / (2 * kPairs), groups = (p.q.heads + p.k.heads + kHeads - 1) / kHeads;
  const int64_t items = p.batch * p.seq * groups * units;
  if (items == 0) return cudaSuccess;
  rotary_kernel<T, C, kVector><<<work_grid(items), kThreads, 0, stream>>>(p, units, groups, items);
  return cudaGetLastError();
}

template <typename T, typename C>
cudaError_t launch_tables(const RotaryProblem& p, cudaStream_t stream) {
  return vectorizable<T, C>(p) ? launch<T, C, true>(p, stream) : launch<T, C, false>(p, stream);
}

}  // namespace

cudaError_t launch_rotary(const RotaryProblem& p, cudaStream_t stream) {
  return dispatch_dtype(p.dtype, [&]<typename T>() {
    if constexpr (sizeof(T) == 2) {
      if (p.float_tables) return launch_tables<T, float>(p, stream);
    }
    return launch_tables<T, T>(p, stream);
  });
}

}  // namespace fusedops::cuda
