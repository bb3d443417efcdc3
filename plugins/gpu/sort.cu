// The GPU plugins' sort.values_stable and topk.values, with the CPU
// plugin's order (plugins/cpu/sort_scan_pad.cc): ascending or descending
// with NaN the largest value, equal values in index order (stable), topk's
// k first entries of that order.
//
// Note [Bitonic sort on the GPU]
// Each line along `dim` is copied, as (opmath value, index) pairs, into a
// scratch row padded to P = the power of two covering its length; a padding
// entry (index >= the line's length) comes after every real one. The order
// "a before b" (the value's order, then the smaller index) is strict and
// total, so a sorting network gives exactly the stable order, and a bitonic
// network sorts every row at once with no data-dependent control flow:
//
//   for (size = 2; size <= P; size *= 2)        // sorted runs of `size`
//     for (stride = size / 2; stride > 0; stride /= 2)
//       each i with partner l = i ^ stride > i: order (i, l) ascending
//       when (i & size) == 0, descending otherwise.
//
// Steps whose stride is below kTile run in a block's shared memory on a
// tile of kTile entries (one launch runs every such step of a size, or all
// of them up to kTile when sorting the tiles first); the steps with larger
// strides, only in rows longer than kTile, run one launch each over global
// memory. A row of up to kTile entries is sorted in one launch; longer
// rows take (log2(P / kTile) + 1) * log2(P / kTile) / 2 global steps.
//
// Note [topk as a selection]
// topk with k <= kTile / 2 of rows longer than a tile does not sort the
// whole row. With K the power of two covering k, each round sorts every
// tile of kTile entries on its own (best first, in shared memory) and keeps
// its first K, so a row of L entries becomes L / kTile * K; when it fits in
// one tile, it is sorted and its first k are the result. This is exact: an
// entry among the row's first k has fewer than k entries before it in the
// whole row, so fewer than K in its tile, and survives every round; the
// order is strict and total and the entries keep their indices, so ties and
// NaN come out as the full sort's. A row of 2^17 entries and k = 10 takes
// two rounds (2^17 -> 2,048 -> 32 entries), 7 launches in all, where the
// full sort takes 38.
#include <algorithm>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"

namespace bp_gpu {
namespace {

using bp_common::wrapDim;

constexpr int kSortThreads = 512;
constexpr int64_t kTile = 2 * kSortThreads;

struct SortArgs {
  int64_t rows, len, padded;  // lines, real entries per line, P
  bool descending;
};

// Whether entry (va, ia) comes before (vb, ib) (Note [Bitonic sort on the GPU]).
template <class V>
__device__ inline bool before(V va, int64_t ia, V vb, int64_t ib, const SortArgs& a) {
  const bool pa = ia >= a.len, pb = ib >= a.len;
  if (pa || pb) return pb && (!pa || ia < ib);
  if constexpr (kIsFloating<V>) {
    const bool na = va != va, nb = vb != vb;
    if (na || nb) {
      if (na && nb) return ia < ib;
      return a.descending ? na : nb;
    }
  }
  if (va == vb) return ia < ib;
  return a.descending ? va > vb : va < vb;
}

// One compare-exchange of positions i < l of a row.
template <class V>
__device__ inline void orderPair(V* v, int64_t* idx, int64_t i, int64_t l, bool ascending, const SortArgs& a) {
  const bool swap = ascending ? before(v[l], idx[l], v[i], idx[i], a) : before(v[i], idx[i], v[l], idx[l], a);
  if (swap) {
    const V tv = v[i];
    v[i] = v[l];
    v[l] = tv;
    const int64_t ti = idx[i];
    idx[i] = idx[l];
    idx[l] = ti;
  }
}

// Row r's line copied in as (value, index) pairs, padded to P.
template <class T, class V>
__global__ void sortLoadKernel(SortArgs a, OffsetCalculator<2> lines, int64_t step, const T* in, V* keys,
                               int64_t* idx) {
  gridStride(a.rows * a.padded, [&](int64_t e) {
    const int64_t r = e / a.padded, j = e % a.padded;
    idx[e] = j;
    keys[e] = j < a.len ? load(in[lines.get(r).v[0] + j * step]) : V(0);
  });
}

// Every step of sizes from first_size to last_size with strides below the
// tile (each tile of kTile, or of P when shorter, in shared memory).
// own_order: every tile sorted best first, as a row of its own (Note [topk
// as a selection]), instead of in the direction of its place in its row.
template <class V>
__global__ void sortTileKernel(SortArgs a, V* keys, int64_t* idx, int64_t first_size, int64_t last_size,
                               bool own_order) {
  const int64_t tile = a.padded < kTile ? a.padded : kTile;
  V* sv = dynamicShared<V>();
  int64_t* si = reinterpret_cast<int64_t*>(sv + kTile);
  const int64_t tiles = a.rows * (a.padded / tile);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t base = t * tile;                           // in the scratch
    const int64_t in_row = own_order ? 0 : base % a.padded;  // the tile's first position in its row
    for (int64_t j = threadIdx.x; j < tile; j += blockDim.x) {
      sv[j] = keys[base + j];
      si[j] = idx[base + j];
    }
    __syncthreads();
    for (int64_t size = first_size; size <= last_size; size *= 2) {
      for (int64_t stride = (size / 2 < tile ? size / 2 : tile / 2); stride > 0; stride /= 2) {
        for (int64_t p = threadIdx.x; p < tile / 2; p += blockDim.x) {
          const int64_t i = 2 * stride * (p / stride) + p % stride;
          orderPair(sv, si, i, i + stride, ((in_row + i) & size) == 0, a);
        }
        __syncthreads();
      }
    }
    for (int64_t j = threadIdx.x; j < tile; j += blockDim.x) {
      keys[base + j] = sv[j];
      idx[base + j] = si[j];
    }
    __syncthreads();  // the next tile overwrites the shared copy
  }
}

// One step (size, stride >= the tile) over every row, in global memory.
template <class V>
__global__ void sortStepKernel(SortArgs a, V* keys, int64_t* idx, int64_t size, int64_t stride) {
  gridStride(a.rows * (a.padded / 2), [&](int64_t e) {
    const int64_t r = e / (a.padded / 2), p = e % (a.padded / 2);
    const int64_t i = 2 * stride * (p / stride) + p % stride;
    orderPair(keys + r * a.padded, idx + r * a.padded, i, i + stride, (i & size) == 0, a);
  });
}

// The first `keep` entries of every tile of kTile into a row of
// rows * (a.padded / kTile * keep) entries (Note [topk as a selection]).
template <class V>
__global__ void selectCompactKernel(SortArgs a, int64_t keep, const V* keys, const int64_t* idx, V* out_keys,
                                    int64_t* out_idx) {
  const int64_t kept = a.padded / kTile * keep;  // per row
  gridStride(a.rows * kept, [&](int64_t e) {
    const int64_t r = e / kept, t = e % kept / keep, j = e % keep;
    const int64_t from = r * a.padded + t * kTile + j;
    out_keys[e] = keys[from];
    out_idx[e] = idx[from];
  });
}

// The first k entries of each sorted row into values and indices.
template <class T, class V>
__global__ void sortStoreKernel(SortArgs a, int64_t k, OffsetCalculator<2> lines, int64_t values_step,
                                int64_t indices_step, const V* keys, const int64_t* idx, T* values, int64_t* indices) {
  gridStride(a.rows * k, [&](int64_t e) {
    const int64_t r = e / k, j = e % k;
    const Offsets<2> at = lines.get(r);
    values[at.v[0] + j * values_step] = store<T>(keys[r * a.padded + j]);
    indices[at.v[1] + j * indices_step] = idx[r * a.padded + j];
  });
}

// Sorts the lines of self along `dim` and writes the first k entries of
// each into values and indices (of self's shape but k along dim; the host
// sized them). The line is copied first, so values may be self.
void sortLines(const char* op, const bp::Tensor& self, int64_t dim, bool descending, int64_t k,
               const bp::Tensor& values, const bp::Tensor& indices) {
  const bp::Device device = callDevice(op, self, "self");
  checkOnDevice(op, values, "values", device);
  checkOnDevice(op, indices, "indices", device);
  BP_PLUGIN_CHECK(values.dtype() == self.dtype() && indices.dtype() == ScalarType::Int64, op,
                  ": expected 'values' of dtype ", bp::name(self.dtype()), " and 'indices' of dtype int64");
  BP_PLUGIN_CHECK(self.dim() <= kMaxDims, op, ": tensors of ", self.dim(), " dimensions are not supported on ",
                  BP_GPU_NAME, " (at most ", kMaxDims, ")");
  if (k == 0 || self.numel() == 0) return;
  const int64_t d = wrapDim(dim, self.dim());
  const LinesAlong in = linesAlong(op, self, self, d);
  const LinesAlong out = linesAlong(op, values, indices, d);
  int64_t padded = 1;
  while (padded < in.len) padded *= 2;
  SortArgs a{in.count, in.len, padded, descending};
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using V = opmath_t<T>;
    // The keys in the opmath type's dtype: float32 for the 16-bit floats.
    const ScalarType key_dtype = self.dtype() == ScalarType::Float16 || self.dtype() == ScalarType::BFloat16
                                     ? ScalarType::Float32
                                     : self.dtype();
    const bp::Tensor keys = bp::Tensor::empty({a.rows * padded}, key_dtype, device);
    const bp::Tensor order = bp::Tensor::empty({a.rows * padded}, ScalarType::Int64, device);
    V* kp = static_cast<V*>(keys.data_ptr());
    int64_t* ip = static_cast<int64_t*>(order.data_ptr());
    launchElements(&sortLoadKernel<T, V>, a.rows * padded, 1, device.index, a, in.lines, in.in_step,
                   static_cast<const T*>(self.data_ptr()), kp, ip);
    const int64_t tile = std::min(padded, kTile);
    const int threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(kSortThreads, tile / 2)));
    const size_t shared = static_cast<size_t>(kTile) * (sizeof(V) + sizeof(int64_t));
    const int64_t tiles = a.rows * (padded / tile);
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(tiles, static_cast<int64_t>(limits(device.index).sm_count) * 16));
    auto tilePass = [&](int64_t first_size, int64_t last_size, bool own_order = false) {
      DeviceGuard guard(device.index);
      launch(&sortTileKernel<V>, dim3(blocks), dim3(static_cast<unsigned>(threads)), shared,
             currentStream(device.index), a, kp, ip, first_size, last_size, own_order);
    };
    // Note [topk as a selection]'s second scratch: alive until the store
    // below has been queued, which may read it.
    bp::Tensor keys2, order2;
    if (k <= kTile / 2 && padded > kTile) {
      // Ping-pong between the scratch and a second one the size of the
      // first round's survivors.
      int64_t keep = 1;
      while (keep < k) keep *= 2;
      const int64_t second = a.rows * (padded / kTile * keep);
      keys2 = bp::Tensor::empty({second}, key_dtype, device);
      order2 = bp::Tensor::empty({second}, ScalarType::Int64, device);
      V* spare_k = static_cast<V*>(keys2.data_ptr());
      int64_t* spare_i = static_cast<int64_t*>(order2.data_ptr());
      while (a.padded > kTile) {
        tilePass(2, kTile, true);
        launchElements(&selectCompactKernel<V>, a.rows * (a.padded / kTile * keep), 1, device.index, a, keep, kp, ip,
                       spare_k, spare_i);
        std::swap(kp, spare_k);
        std::swap(ip, spare_i);
        a.padded = a.padded / kTile * keep;
      }
      tilePass(2, a.padded, true);  // the row fits in one tile: `blocks` covers it
    } else {
      if (padded > 1) tilePass(2, tile);
      for (int64_t size = 2 * tile; size <= padded; size *= 2) {
        for (int64_t stride = size / 2; stride >= tile; stride /= 2)
          launchElements(&sortStepKernel<V>, a.rows * (padded / 2), 1, device.index, a, kp, ip, size, stride);
        tilePass(size, size);
      }
    }
    launchElements(&sortStoreKernel<T, V>, a.rows * k, 1, device.index, a, k, out.lines, out.in_step, out.out_step, kp,
                   ip, static_cast<T*>(values.data_ptr()), static_cast<int64_t*>(indices.data_ptr()));
  });
}

constexpr auto sort_values_stable = &bp_common::sortValuesStable<&sortLines>;
constexpr auto topk_values = &bp_common::topkValues<&sortLines>;

}  // namespace

void registerSortKernels(bp::Library& m, int32_t type) { BP_REGISTER_SORT_KERNELS(m, type); }

}  // namespace bp_gpu
