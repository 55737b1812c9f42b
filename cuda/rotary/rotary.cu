// fusedops.rotary's CUDA kernel: one launch rotates q and k (or rotates their
// gradients back). A block takes whole positions (b, s): threadIdx.x is a unit
// (kPairs pairs) of head_dim, threadIdx.y a lane of heads, threadIdx.z one of
// the block's positions. A thread reads its unit's cos and sin once and applies
// them to kHeads heads at a time (the tables are per position, shared by every
// head), loading those heads before it stores any. No thread divides an index
// but once a position, so the kernel's time goes to memory. Where every operand
// is dense along head_dim with 16-byte aligned rows, a unit moves 16-byte
// vectors (kPairs = 16 / sizeof(T)); otherwise it is one pair, at any strides.
#include "cuda/common/common.cuh"
#include "cuda/rotary/rotary.h"

namespace fusedops::cuda {
namespace {

// A run: kPairs consecutive elements along head_dim, kept packed as loaded
// (whole 16-byte vectors where kVector: one of x, two of float32 tables for a
// 16-bit x) and converted one element at a time where used, so a thread holds
// its heads and tables in few registers.
template <typename T, int kPairs>
using Run = Vec<T, kPairs>;

template <bool kVector, int kPairs, typename T>
__device__ __forceinline__ Run<T, kPairs> load_run(const T* p, int64_t stride) {
  Run<T, kPairs> r;
  if constexpr (kVector) {
    constexpr int kV = kVec16<T>;
    static_assert(kPairs % kV == 0, "a run is whole vectors");
#pragma unroll
    for (int i = 0; i < kPairs / kV; ++i) {
      const Vec<T, kV> v = reinterpret_cast<const Vec<T, kV>*>(p)[i];
#pragma unroll
      for (int e = 0; e < kV; ++e) r.v[i * kV + e] = v.v[e];
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPairs; ++i) r.v[i] = p[i * stride];
  }
  return r;
}

template <bool kVector, int kPairs, typename T>
__device__ __forceinline__ void store_run(T* p, const Run<T, kPairs>& r) {
  if constexpr (kVector) {
    constexpr int kV = kVec16<T>;
#pragma unroll
    for (int i = 0; i < kPairs / kV; ++i) {
      Vec<T, kV> v;
#pragma unroll
      for (int e = 0; e < kV; ++e) v.v[e] = r.v[i * kV + e];
      reinterpret_cast<Vec<T, kV>*>(p)[i] = v;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPairs; ++i) p[i] = r.v[i];
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

// A unit's two runs; element e of the unit is first[e] or second[e - kPairs].
template <typename T, int kPairs>
struct Runs {
  Run<T, kPairs> first, second;
  __device__ __forceinline__ T& operator[](int e) { return e < kPairs ? first.v[e] : second.v[e - kPairs]; }
  __device__ __forceinline__ const T& operator[](int e) const {
    return e < kPairs ? first.v[e] : second.v[e - kPairs];
  }
};

template <bool kVector, int kPairs, typename T>
__device__ __forceinline__ Runs<T, kPairs> load_unit(const T* p, int64_t stride, const Unit& u) {
  return {load_run<kVector, kPairs>(p + u.first * stride, stride),
          load_run<kVector, kPairs>(p + u.second * stride, stride)};
}

// Each rotated pair (a, b) of the unit as its two elements' indices.
template <int kPairs, typename F>
__device__ __forceinline__ void for_pairs(const Unit& u, F&& pair) {
  if (u.halves) {
#pragma unroll
    for (int t = 0; t < kPairs; ++t) pair(t, t + kPairs);
  } else {
#pragma unroll
    for (int t = 0; t < kPairs; ++t) pair(2 * t, 2 * t + 1);
  }
}

// The backward's sin table: rotate_pair's transpose (sin_a, sin_b) ->
// (-sin_b, -sin_a), done once on a unit's table instead of at every head.
template <int kPairs, typename C>
__device__ __forceinline__ void transpose_sin(const Unit& u, Runs<C, kPairs>& s) {
  for_pairs<kPairs>(u, [&](int a, int b) {
    const C t = s[a];
    s[a] = -s[b];
    s[b] = -t;
  });
}

// The unit x rotated by its cos c and sin s (in the op-math type, each element
// rounded once); pass-through units as they are.
template <int kPairs, typename T, typename C>
__device__ __forceinline__ Runs<T, kPairs> rotate_unit(const Unit& u, const Runs<T, kPairs>& x,
                                                       const Runs<C, kPairs>& c, const Runs<C, kPairs>& s) {
  if (!u.rotated) return x;
  Runs<T, kPairs> y;
  for_pairs<kPairs>(u, [&](int a, int b) {
    opmath_t<T> ya = to_opmath(x[a]), yb = to_opmath(x[b]);
    rotate_pair<opmath_t<T>>(ya, yb, to_opmath(c[a]), to_opmath(c[b]), to_opmath(s[a]), to_opmath(s[b]),
                             /*transpose=*/false);
    y[a] = from_opmath<T>(ya);
    y[b] = from_opmath<T>(yb);
  });
  return y;
}

// Heads a thread loads before it stores any: one of a 16-bit type (its unit
// of 16 elements and their tables take about 80 registers; two heads, 108,
// ran 0.9x as fast on an H100), two of wider ones. A block's most threads.
template <typename T>
constexpr int kHeads = sizeof(T) == 2 ? 1 : 2;
constexpr int64_t kBlockThreads = 256;

// Position (b, s) of unit u (its cos and sin in c, s) for heads [head0, head0 +
// kHeads) (q's, then k's).
template <bool kVector, int kPairs, typename T, typename C>
__device__ __forceinline__ void rotate_heads(const RotaryProblem& p, int64_t b, int64_t s, int64_t head0,
                                             const Unit& u, const Runs<C, kPairs>& cos,
                                             const Runs<C, kPairs>& sin) {
  const int64_t heads = p.q.heads + p.k.heads;
  RotaryRow rows[kHeads<T>];
  Runs<T, kPairs> x[kHeads<T>];
#pragma unroll
  for (int j = 0; j < kHeads<T>; ++j) {
    if (head0 + j >= heads) break;
    rows[j] = rotary_row(p, b, s, head0 + j);
    x[j] = load_unit<kVector, kPairs>(static_cast<const T*>(rows[j].is_q ? p.q.in : p.k.in) + rows[j].in,
                                      rows[j].in_stride, u);
  }
#pragma unroll
  for (int j = 0; j < kHeads<T>; ++j) {
    if (head0 + j >= heads) break;
    const Runs<T, kPairs> y = rotate_unit<kPairs>(u, x[j], cos, sin);
    T* out = static_cast<T*>(rows[j].is_q ? p.q.out : p.k.out) + rows[j].out;
    store_run<kVector, kPairs>(out + u.first, y.first);
    store_run<kVector, kPairs>(out + u.second, y.second);
  }
}

// Position blockIdx.x * blockDim.z + threadIdx.z, then a grid's worth further.
template <typename T, typename C, bool kVector>
__global__ void __launch_bounds__(kBlockThreads) rotary_kernel(const __grid_constant__ RotaryProblem p) {
  constexpr int kPairs = kVector ? kVec16<T> : 1;
  const int64_t units = p.head_dim / (2 * kPairs), heads = p.q.heads + p.k.heads, positions = p.batch * p.seq;
  for (int64_t pos = int64_t(blockIdx.x) * blockDim.z + threadIdx.z; pos < positions;
       pos += int64_t(gridDim.x) * blockDim.z) {
    const int64_t b = pos / p.seq, s = pos - b * p.seq;
    for (int64_t unit = threadIdx.x; unit < units; unit += blockDim.x) {
      const Unit u = unit_of<kPairs>(p, unit);
      Runs<C, kPairs> cos{}, sin{};
      if (u.rotated) {
        cos = load_unit<kVector, kPairs>(
            static_cast<const C*>(p.cos.data) + b * p.cos.strides[0] + s * p.cos.strides[1], p.cos.strides[2],
            u);
        sin = load_unit<kVector, kPairs>(
            static_cast<const C*>(p.sin.data) + b * p.sin.strides[0] + s * p.sin.strides[1], p.sin.strides[2],
            u);
        if (p.transpose) transpose_sin<kPairs>(u, sin);
      }
      for (int64_t head0 = threadIdx.y * kHeads<T>; head0 < heads; head0 += blockDim.y * kHeads<T>) {
        rotate_heads<kVector, kPairs, T>(p, b, s, head0, u, cos, sin);
      }
    }
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
    return x.heads == 0 ||
           (vector_rows(x.in, x.strides, 4, kVec16<T>) && vector_rows(x.out, x.out_strides, 4, kVec16<T>));
  };
  const auto table = [&](const RotaryTable& t) {
    return p.rotary_dim == 0 || vector_rows(t.data, t.strides, 3, kVec16<C>);
  };
  return p.head_dim % kChunk == 0 && p.rotary_dim % kChunk == 0 && tensor(p.q) && tensor(p.k) &&
         table(p.cos) && table(p.sin);
}

// The block: every unit of a row across (up to kBlockThreads), the heads split
// in equal lanes (Llama's 32 + 8 bfloat16 heads of 128: 8 units by 20 lanes,
// each lane one head a pass, two passes), and as many positions as then fit
// (at most 64: CUDA's limit on blockDim.z).
template <typename T, typename C, bool kVector>
cudaError_t launch(const RotaryProblem& p, cudaStream_t stream) {
  constexpr int64_t kPairs = kVector ? kVec16<T> : 1;
  const int64_t units = p.head_dim / (2 * kPairs),
                head_groups = (p.q.heads + p.k.heads + kHeads<T> - 1) / kHeads<T>;
  const int64_t positions = p.batch * p.seq;
  if (positions == 0 || units == 0 || head_groups == 0) return cudaSuccess;
  const int64_t x = std::min<int64_t>(units, kBlockThreads), lanes = kBlockThreads / x;
  const int64_t passes = (head_groups + lanes - 1) / lanes;
  const int64_t y = (head_groups + passes - 1) / passes;
  const int64_t z = std::min({kBlockThreads / (x * y), positions, int64_t{64}});
  const int64_t blocks = std::min<int64_t>((positions + z - 1) / z, 0x7fffffff);
  rotary_kernel<T, C, kVector>
      <<<unsigned(blocks), dim3(unsigned(x), unsigned(y), unsigned(z)), 0, stream>>>(p);
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
