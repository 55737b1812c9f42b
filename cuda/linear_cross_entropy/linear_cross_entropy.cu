// fusedops.linear_cross_entropy's kernels: a chunk's tokens, one block each
// (log-sum-exp, loss, gradient at the logits), the count of targets, the total
// loss and the bias gradient's column sums, in fixed orders (a row's online
// log-sum-exp merged by cub's block reduction, the sums by cuda/common's):
// the same bits every call.
#include <cooperative_groups.h>
#include <cub/block/block_reduce.cuh>

#include "cuda/common/common.cuh"
#include "cuda/common/copy_async.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/linear_cross_entropy/linear_cross_entropy.h"

namespace fusedops::cuda {
namespace {

// What a row's threads reduce: the online log-sum-exp, the sum of the logits
// and the target's logit (one thread holds it, the others add 0).
template <typename A>
struct RowPart {
  LseSum<A> lse;
  A sum, target;
};

struct MergeRowParts {
  template <typename A>
  __device__ RowPart<A> operator()(const RowPart<A>& a, const RowPart<A>& b) const {
    RowPart<A> out = a;
    out.lse.merge(b.lse);
    out.sum += b.sum;
    out.target += b.target;
    return out;
  }
};

// A token's row, kG logits (and bias values, and gradients) at a time: kG = 4
// moves 16 bytes of float32 logits a load, so that a thread has 4x the bytes
// in flight (a row of 128256 logits a block is otherwise bound by the loads'
// latency); kG = 1 for float64, and where the vocab or the rows' alignment
// does not allow groups of 4.
template <typename T, int kG>
__global__ void __launch_bounds__(kThreads) rows_kernel(LceRows r) {
  using A = opmath_t<T>;
  using Group = Vec<A, kG>;
  const int64_t row = blockIdx.x;
  const LceMath& m = r.math;
  const int64_t t = r.target[row];
  const A* z = static_cast<const A*>(r.logits) + row * r.ld;
  const A* bias = static_cast<const A*>(r.bias);
  T* dl = r.dlogits != nullptr ? static_cast<T*>(r.dlogits) + row * r.ld : nullptr;
  const int64_t groups = m.vocab / kG;
  if (!lce_counts(t, m)) {  // the whole block takes this branch
    if (threadIdx.x == 0) {
      static_cast<A*>(r.loss)[row] = A(0);
      if (r.lse != nullptr) static_cast<A*>(r.lse)[row] = A(0);
    }
    if (dl != nullptr) {
      for (int64_t j = threadIdx.x; j < m.vocab; j += kThreads) dl[j] = from_opmath<T>(A(0));
    }
    return;
  }
  const A cap = A(m.softcap);
  // The capped values of group g's logits plus bias.
  const auto values = [&](int64_t g) {
    Group v = *reinterpret_cast<const Group*>(z + g * kG);
    if (bias != nullptr) {
      const Group b = *reinterpret_cast<const Group*>(bias + g * kG);
#pragma unroll
      for (int i = 0; i < kG; ++i) v.v[i] += b.v[i];
    }
#pragma unroll
    for (int i = 0; i < kG; ++i) v.v[i] = lce_capped(v.v[i], cap);
    return v;
  };
  RowPart<A> part{{}, A(0), A(0)};
  const auto add = [&](A v, int64_t j) {
    part.lse.add(v);
    part.sum += v;
    if (j == t) part.target = v;
  };
  // Two groups a thread at a time: both loads in flight before either's math.
  for (int64_t g = threadIdx.x; g < groups; g += 2 * kThreads) {
    const int64_t h = g + kThreads;
    const Group v = values(g), u = h < groups ? values(h) : v;
#pragma unroll
    for (int i = 0; i < kG; ++i) add(v.v[i], g * kG + i);
    if (h < groups) {
#pragma unroll
      for (int i = 0; i < kG; ++i) add(u.v[i], h * kG + i);
    }
  }
  using Reduce = cub::BlockReduce<RowPart<A>, kThreads>;
  __shared__ typename Reduce::TempStorage temp;
  __shared__ A shared_lse;
  const RowPart<A> total = Reduce(temp).Reduce(part, MergeRowParts{});
  const bool in_range = lce_in_range(t, m);
  if (threadIdx.x == 0) {
    shared_lse = total.lse.lse();
    static_cast<A*>(r.loss)[row] = in_range ? lce_loss(shared_lse, total.target, total.sum, m) : A(NAN);
    if (r.lse != nullptr) static_cast<A*>(r.lse)[row] = shared_lse;
  }
  // Every read of pass 1 is done before pass 2 writes (dl may be z itself).
  __syncthreads();
  if (dl == nullptr) return;
  const A lse = shared_lse;
  A w = r.grad != nullptr ? static_cast<const A*>(r.grad)[row * r.grad_stride] : A(1);
  if (r.scale != nullptr) w *= *static_cast<const A*>(r.scale);
  const auto grad = [&](A v, int64_t j) {
    return from_opmath<T>(in_range ? lce_grad(v, lse, j == t, w, m) : A(NAN));
  };
  const auto store = [&](const Group& v, int64_t g) {
    Vec<T, kG> out;
#pragma unroll
    for (int i = 0; i < kG; ++i) out.v[i] = grad(v.v[i], g * kG + i);
    *reinterpret_cast<Vec<T, kG>*>(dl + g * kG) = out;
  };
  for (int64_t g = threadIdx.x; g < groups; g += 2 * kThreads) {
    const int64_t h = g + kThreads;
    const Group v = values(g), u = h < groups ? values(h) : v;
    store(v, g);
    if (h < groups) store(u, h);
  }
}

// Long rows on sm_90 and newer: rows_kernel reads a row twice (the log-sum-exp,
// then the gradient), and with a row a block, the rows in flight outgrow the L2
// cache (a thousand rows of 128256 float32 logits are 0.5 GB), so both reads
// come from memory. Here a cluster of blocks shares a row: each block copies
// its part of the logits to shared memory, every copy in flight at once, the
// parts' sums meet through distributed shared memory, and the gradient pass
// reads the held part: one read of the logits. A thread uses only the groups
// it copied (no barrier between). The parts merge in rank order (the same bits
// every call).
//
// Read once, the row is bound by instructions, not memory: so no branch a
// logit. A thread takes its maximum first, then sums exp(z - max) (exp_term);
// the target's logit is read once, by the thread holding it; the exponentials
// are the hardware's approximate ones where the gradient is a half type
// (their error, a few ulp of float32, is far below its rounding).
constexpr int kHeldThreads = 512;

template <typename T>
__device__ __forceinline__ float held_exp(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return expf(x);
  } else {
    return __expf(x);
  }
}

// exp(z - top) for a z no larger than top: 1 at the maximum (an infinite one
// included), 0 for -inf (also where every logit is -inf), NaN for NaN.
template <typename T>
[[maybe_unused]] __device__ __forceinline__ float exp_term(float z, float top) {
  const float e = held_exp<T>(z - top);
  return z == -INFINITY ? 0.0f : z == top ? 1.0f : e;
}

template <typename T>
__global__ void __launch_bounds__(kHeldThreads) held_rows_kernel(LceRows r, int64_t part_groups) {
#if __CUDA_ARCH__ >= 900
  using A = float;
  using Group = Vec<A, 4>;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), ranks = cluster.num_blocks();
  const int64_t row = blockIdx.x / ranks;
  const LceMath& m = r.math;
  const int64_t t = r.target[row];
  const A* z = static_cast<const A*>(r.logits) + row * r.ld;
  const A* bias = static_cast<const A*>(r.bias);
  T* dl = r.dlogits != nullptr ? static_cast<T*>(r.dlogits) + row * r.ld : nullptr;
  const int64_t begin = rank * part_groups, end = min(m.vocab / 4, begin + part_groups);
  const int count = static_cast<int>(max(end - begin, int64_t(0)));  // groups held here
  const auto store = [&](const Vec<T, 4>& out, int i) {
    *reinterpret_cast<Vec<T, 4>*>(dl + (begin + i) * 4) = out;
  };
  if (!lce_counts(t, m)) {  // the whole cluster takes this branch
    if (rank == 0 && threadIdx.x == 0) {
      static_cast<A*>(r.loss)[row] = A(0);
      if (r.lse != nullptr) static_cast<A*>(r.lse)[row] = A(0);
    }
    if (dl != nullptr) {
      const Vec<T, 4> zeros{
          {from_opmath<T>(A(0)), from_opmath<T>(A(0)), from_opmath<T>(A(0)), from_opmath<T>(A(0))}};
      for (int i = threadIdx.x; i < count; i += kHeldThreads) store(zeros, i);
    }
    return;
  }
  extern __shared__ Group held[];  // [part_groups]: this block's logits, then capped plus bias
  for (int i = threadIdx.x; i < count; i += kHeldThreads) copy_async_16(&held[i], z + (begin + i) * 4);
  wait_copies();
  const A cap = A(m.softcap);
  A top = -INFINITY, sum = 0;
  for (int i = threadIdx.x; i < count; i += kHeldThreads) {
    Group v = held[i];
    if (bias != nullptr || cap > A(0)) {
      const Group b = bias != nullptr ? *reinterpret_cast<const Group*>(bias + (begin + i) * 4) : Group{};
#pragma unroll
      for (int k = 0; k < 4; ++k) v.v[k] = lce_capped(v.v[k] + b.v[k], cap);
      held[i] = v;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      top = fmaxf(top, v.v[k]);  // NaN is skipped here and caught by the sum below
      sum += v.v[k];
    }
  }
  RowPart<A> part{{top, A(0)}, sum, A(0)};
  for (int i = threadIdx.x; i < count; i += kHeldThreads) {
    const Group v = held[i];
#pragma unroll
    for (int k = 0; k < 4; ++k) part.lse.sum += exp_term<T>(v.v[k], top);
  }
  // The target's place in this block's part (-1 where it is not here); the thread holding it reads it.
  const int64_t local = t - begin * 4;
  const int target_at = local >= 0 && local < int64_t(count) * 4 ? static_cast<int>(local) : -1;
  if (target_at >= 0 && target_at / 4 % kHeldThreads == int(threadIdx.x)) {
    part.target = held[target_at / 4].v[target_at % 4];
  }
  using Reduce = cub::BlockReduce<RowPart<A>, kHeldThreads>;
  __shared__ typename Reduce::TempStorage temp;
  // Raw bytes: RowPart's member initializers would be a dynamic initialization of shared memory.
  __shared__ alignas(RowPart<A>) unsigned char block_part_bytes[sizeof(RowPart<A>)];
  RowPart<A>& block_part = *reinterpret_cast<RowPart<A>*>(block_part_bytes);
  __shared__ A shared_lse;
  const RowPart<A> mine = Reduce(temp).Reduce(part, MergeRowParts{});
  if (threadIdx.x == 0) block_part = mine;
  cluster.sync();  // every block's part written
  const bool in_range = lce_in_range(t, m);
  if (threadIdx.x < 32) {  // lane k reads rank k's part; lane 0 merges them in rank order
    const RowPart<A> p =
        threadIdx.x < ranks ? *cluster.map_shared_rank(&block_part, threadIdx.x) : RowPart<A>{};
    RowPart<A> total = p;
    for (unsigned k = 1; k < ranks; ++k) {
      RowPart<A> o;
      o.lse.max = __shfl_sync(~0u, p.lse.max, k);
      o.lse.sum = __shfl_sync(~0u, p.lse.sum, k);
      o.sum = __shfl_sync(~0u, p.sum, k);
      o.target = __shfl_sync(~0u, p.target, k);
      total = MergeRowParts{}(total, o);
    }
    if (threadIdx.x == 0) {
      shared_lse = total.lse.lse();
      if (rank == 0) {
        static_cast<A*>(r.loss)[row] = in_range ? lce_loss(shared_lse, total.target, total.sum, m) : A(NAN);
        if (r.lse != nullptr) static_cast<A*>(r.lse)[row] = shared_lse;
      }
    }
  }
  cluster.sync();  // no block leaves while another reads its part; shared_lse visible
  if (dl == nullptr) return;
  const A lse = shared_lse;
  A w = r.grad != nullptr ? static_cast<const A*>(r.grad)[row * r.grad_stride] : A(1);
  if (r.scale != nullptr) w *= *static_cast<const A*>(r.scale);
  // lce_grad without its branches: the smoothing's share, the target's 1 - eps once, NaN rows whole.
  const A eps = A(m.smoothing), spread = eps / A(m.vocab), hit = A(1) - eps;
  if (!in_range) w = A(NAN);
  for (int i = threadIdx.x; i < count; i += kHeldThreads) {
    const Group v = held[i];
    Vec<T, 4> out;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      A d = held_exp<T>(v.v[k] - lse) - spread - (i * 4 + k == target_at ? hit : A(0));
      if (cap > A(0)) {
        const A u = v.v[k] / cap;
        d *= A(1) - u * u;
      }
      out.v[k] = from_opmath<T>(w * d);
    }
    store(out, i);
  }
#else
  __trap();  // never launched where clusters are not (held_rows_here)
#endif
}

// A vocab slab's gradient (lce_slab_grad's math): blockIdx.y walks the rows,
// whose target, factor and log-sum-exp are read once; the x blocks a row's
// columns, kG at a time (16 bytes of float32 logits a load for kG = 4). The
// exponentials are the fast ones where the gradient is a half type, as
// held_rows_kernel's.
template <typename T, int kG>
__global__ void __launch_bounds__(kThreads) slab_grad_kernel(LceSlab s) {
  using A = opmath_t<T>;
  const LceMath& m = s.math;
  const A cap = A(m.softcap), spread = A(m.smoothing) / A(m.vocab), hit = A(1) - A(m.smoothing);
  const int64_t groups = s.cols / kG;
  for (int64_t i = blockIdx.y; i < s.rows; i += gridDim.y) {
    const int64_t t = s.target[i];
    T* dl = static_cast<T*>(s.dlogits) + i * s.ld;
    const int64_t first = int64_t(blockIdx.x) * kThreads + threadIdx.x,
                  stride = int64_t(gridDim.x) * kThreads;
    if (!lce_counts(t, m)) {
      for (int64_t g = first; g < groups; g += stride) {
#pragma unroll
        for (int k = 0; k < kG; ++k) dl[g * kG + k] = from_opmath<T>(A(0));
      }
      continue;
    }
    A w = s.grad != nullptr ? static_cast<const A*>(s.grad)[i * s.grad_stride] : A(1);
    if (s.scale != nullptr) w *= *static_cast<const A*>(s.scale);
    if (!lce_in_range(t, m)) w = A(NAN);
    const A lse = static_cast<const A*>(s.lse)[i];
    const int64_t target_at = t - s.col0;  // the target's column in the slab (outside it: never met)
    const A* z = static_cast<const A*>(s.logits) + i * s.ld;
    const A* bias = s.bias != nullptr ? static_cast<const A*>(s.bias) + s.col0 : nullptr;
    for (int64_t g = first; g < groups; g += stride) {
      Vec<A, kG> v = *reinterpret_cast<const Vec<A, kG>*>(z + g * kG);
      Vec<T, kG> out;
#pragma unroll
      for (int k = 0; k < kG; ++k) {
        const A zk = lce_capped(v.v[k] + (bias != nullptr ? bias[g * kG + k] : A(0)), cap);
        A e;
        if constexpr (std::is_same_v<T, A>) {
          e = std::exp(zk - lse);
        } else {
          e = __expf(zk - lse);
        }
        A d = e - spread - (g * kG + k == target_at ? hit : A(0));
        if (cap > A(0)) {
          const A u = zk / cap;
          d *= A(1) - u * u;
        }
        out.v[k] = from_opmath<T>(w * d);
      }
      *reinterpret_cast<Vec<T, kG>*>(dl + g * kG) = out;
    }
  }
}

// The rows' values of the fused slab GEMM's epilogue (launch_lce_slab_rows),
// and the vocab's column indices, a thread an element of either.
__global__ void __launch_bounds__(kThreads)
    slab_rows_kernel(LceSlab s, float* __restrict__ factor, float* __restrict__ target,
                     float* __restrict__ columns) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i < s.math.vocab) columns[i] = float(i);
  if (i >= s.rows) return;
  const int64_t t = s.target[i];
  const LceMath& m = s.math;
  float w = s.grad != nullptr ? static_cast<const float*>(s.grad)[i * s.grad_stride] : 1.0f;
  if (s.scale != nullptr) w *= *static_cast<const float*>(s.scale);
  factor[i] = lce_in_range(t, m) ? w : NAN;
  target[i] = !lce_counts(t, m) ? -1.0f : lce_in_range(t, m) ? float(t) : -2.0f;
}

template <typename A>
__global__ void __launch_bounds__(kThreads) count_kernel(const int64_t* __restrict__ target, int64_t n,
                                                         int64_t ignore_index, A* __restrict__ counts) {
  __shared__ int64_t smem[33];
  int64_t count = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) count += target[i] != ignore_index;
  const int64_t total = group_allreduce(count, smem);
  if (threadIdx.x == 0) {
    counts[0] = A(total);
    counts[1] = A(1) / A(total);
  }
}

template <typename A>
__global__ void __launch_bounds__(kThreads)
    total_kernel(const A* __restrict__ loss, int64_t n, const A* __restrict__ count, A* __restrict__ out) {
  __shared__ A smem[33];
  A sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) sum += loss[i];
  const A total = group_allreduce(sum, smem);
  if (threadIdx.x == 0) *out = count != nullptr ? total / *count : total;
}

// The bias gradient's column sums, accumulated chunk after chunk: a thread a
// column, its rows in order (dlogits of the inputs' dtype, the sums float64,
// stored opmath; cuda/common/reduce.cuh's column sums neither accumulate nor
// read a half type). A float32 sum down a thousand rows in order was 13x
// further from float64 torch than eager torch's blocked sums.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    bias_sums_kernel(const T* __restrict__ dl, int64_t rows, int64_t cols, int64_t ld,
                     opmath_t<T>* __restrict__ acc, bool accumulate) {
  const int64_t j = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (j >= cols) return;
  double sum = 0;
  for (int64_t i = 0; i < rows; ++i) sum += to_opmath(dl[i * ld + j]);
  acc[j] = static_cast<opmath_t<T>>(accumulate ? acc[j] + sum : sum);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    scale_kernel(const opmath_t<T>* __restrict__ acc, const opmath_t<T>* __restrict__ factor,
                 T* __restrict__ out, int64_t n) {
  const opmath_t<T> f = *factor;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    out[i] = from_opmath<T>(acc[i] * f);
  }
}

// Runs body.template operator()<A>() with A the opmath type of `dtype`.
template <typename Body>
cudaError_t dispatch_opmath(DType dtype, Body&& body) {
  if (dtype == DType::Float64) return body.template operator()<double>();
  return body.template operator()<float>();
}

// held_rows_kernel's shape for a row of `groups` groups of 4 float32 logits:
// the fewest blocks (a portable cluster: up to 8) whose parts fit 64 KiB
// (three blocks a multiprocessor), up to 96 KiB for 8 (two); none (0) for rows
// short enough that rows_kernel's second read finds them in the L2 cache, or
// too long to hold.
struct HeldShape {
  int blocks = 0;
  int64_t part_groups = 0;
};

constexpr int64_t kHeldPart = (64 << 10) / sizeof(Vec<float, 4>), kHeldLongestPart = kHeldPart * 3 / 2;

HeldShape held_shape(int64_t groups) {
  constexpr int64_t kShortRow = 8192 / 4;
  if (groups < kShortRow) return {};
  for (int blocks = 1; blocks <= 8; blocks *= 2) {
    const int64_t part = (groups + blocks - 1) / blocks;
    if (part <= kHeldPart || (blocks == 8 && part <= kHeldLongestPart)) return {blocks, part};
  }
  return {};
}

// Whether held_rows_kernel<T> runs as itself on this device: the code loaded
// for it was compiled for sm_90 or newer (its PTX version: a newer device
// compiling an older arch's PTX would run the body compiled out).
template <typename T>
bool held_rows_here() {
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, held_rows_kernel<T>) != cudaSuccess) {
    (void)cudaGetLastError();  // no image for this device: not an error of the launch
    return false;
  }
  return attributes.ptxVersion >= 90;
}

template <typename T>
cudaError_t launch_held_rows(const LceRows& r, HeldShape shape, cudaStream_t stream) {
  const size_t smem = shape.part_groups * sizeof(Vec<float, 4>);
  // The longest part's bytes, whatever this call's: one value, so that host threads setting it side by side
  // agree.
  const cudaError_t set =
      cudaFuncSetAttribute(held_rows_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(kHeldLongestPart * sizeof(Vec<float, 4>)));
  if (set != cudaSuccess) return set;
  // All of shared memory, not the least that one block needs: three blocks a multiprocessor.
  const cudaError_t carveout = cudaFuncSetAttribute(
      held_rows_kernel<T>, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  if (carveout != cudaSuccess) return carveout;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(shape.blocks);
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(r.rows * shape.blocks));
  config.blockDim = dim3(kHeldThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, held_rows_kernel<T>, r, shape.part_groups);
}

}  // namespace

cudaError_t launch_lce_rows(const LceRows& r, cudaStream_t stream) {
  if (r.rows == 0) return cudaSuccess;
  return dispatch_dtype(r.dtype, [&]<typename T>() {
    constexpr int kG = std::is_same_v<opmath_t<T>, float> ? 4 : 1;
    // Whole groups, every row's start aligned to one (of logits, bias values and gradients): the vocab and
    // the rows' stride multiples of kG.
    const auto aligned = [](const void* p, size_t bytes) {
      return p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0;
    };
    const bool grouped = r.math.vocab % kG == 0 && r.ld % kG == 0 && aligned(r.logits, kG * sizeof(float)) &&
                         aligned(r.bias, kG * sizeof(float)) && aligned(r.dlogits, kG * sizeof(T));
    if constexpr (kG == 4) {
      const HeldShape shape = grouped ? held_shape(r.math.vocab / kG) : HeldShape{};
      if (shape.blocks > 0 && held_rows_here<T>()) {
        if (launch_held_rows<T>(r, shape, stream) == cudaSuccess) return cudaSuccess;
        // Not launched (its cluster not schedulable here, e.g. on a slice of a GPU): a block a row instead,
        // and no error left behind for the next op (one of the device's, sticky, comes back from the launch
        // below).
        (void)cudaGetLastError();
      }
    }
    if (grouped) {
      rows_kernel<T, kG><<<static_cast<unsigned>(r.rows), kThreads, 0, stream>>>(r);
    } else {
      rows_kernel<T, 1><<<static_cast<unsigned>(r.rows), kThreads, 0, stream>>>(r);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_lce_slab_grad(const LceSlab& s, cudaStream_t stream) {
  if (s.rows == 0 || s.cols == 0) return cudaSuccess;
  return dispatch_dtype(s.dtype, [&]<typename T>() {
    constexpr int kG = std::is_same_v<opmath_t<T>, float> ? 4 : 1;
    const auto aligned = [](const void* p, size_t bytes) {
      return reinterpret_cast<uintptr_t>(p) % bytes == 0;
    };
    const bool grouped = s.cols % kG == 0 && s.ld % kG == 0 && aligned(s.logits, kG * sizeof(float)) &&
                         aligned(s.dlogits, kG * sizeof(T));
    const unsigned rows = static_cast<unsigned>(std::min<int64_t>(s.rows, 65535));
    if (grouped) {
      slab_grad_kernel<T, kG><<<dim3(work_grid(s.cols / kG), rows), kThreads, 0, stream>>>(s);
    } else {
      slab_grad_kernel<T, 1><<<dim3(work_grid(s.cols), rows), kThreads, 0, stream>>>(s);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_lce_slab_rows(const LceSlab& s, float* factor, float* target, float* columns,
                                 cudaStream_t stream) {
  if (s.dtype == DType::Float64) return cudaErrorInvalidValue;  // the epilogue's vectors are float32
  slab_rows_kernel<<<work_grid(std::max(s.rows, s.math.vocab)), kThreads, 0, stream>>>(s, factor, target,
                                                                                       columns);
  return cudaGetLastError();
}

cudaError_t launch_lce_count(DType dtype, const int64_t* target, int64_t n, int64_t ignore_index,
                             void* counts, cudaStream_t stream) {
  return dispatch_opmath(dtype, [&]<typename A>() {
    count_kernel<A><<<1, kThreads, 0, stream>>>(target, n, ignore_index, static_cast<A*>(counts));
    return cudaGetLastError();
  });
}

cudaError_t launch_lce_total(DType dtype, const void* loss, int64_t n, const void* count, void* out,
                             cudaStream_t stream) {
  return dispatch_opmath(dtype, [&]<typename A>() {
    total_kernel<A><<<1, kThreads, 0, stream>>>(static_cast<const A*>(loss), n, static_cast<const A*>(count),
                                                static_cast<A*>(out));
    return cudaGetLastError();
  });
}

cudaError_t launch_lce_column_sums(DType dtype, const void* dlogits, int64_t rows, int64_t cols, int64_t ld,
                                   void* acc, bool accumulate, cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&]<typename T>() {
    bias_sums_kernel<T><<<work_grid(cols), kThreads, 0, stream>>>(
        static_cast<const T*>(dlogits), rows, cols, ld, static_cast<opmath_t<T>*>(acc), accumulate);
    return cudaGetLastError();
  });
}

cudaError_t launch_lce_scale(DType dtype, const void* acc, const void* factor, void* out, int64_t n,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dispatch_dtype(dtype, [&]<typename T>() {
    const unsigned blocks = std::min<unsigned>(work_grid(n), 65535u);
    scale_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const opmath_t<T>*>(acc),
                                                     static_cast<const opmath_t<T>*>(factor),
                                                     static_cast<T*>(out), n);
    return cudaGetLastError();
  });
}

}  // namespace fusedops::cuda
