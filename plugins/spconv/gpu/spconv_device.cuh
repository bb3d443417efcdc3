#pragma once
// What the sparse-convolution GPU kernels share (spconv_conv.cu,
// spconv_pool.cu): the rulebook as kernels read it, the dense offset maps
// built from it, and the host-side checks of where and in what dtype a
// call's tensors are. Written in the gpu_port.h dialect, like the rest of
// the GPU plugins (Note [Sparse convolution kernels on the GPU] in
// spconv_conv.cu).
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "gpu/device_errors.h"
#include "gpu/dtypes.cuh"
#include "gpu/kernel_args.h"
#include "gpu/runtime.h"
#include "spconv/spconv.h"

// Unrolls the loop that follows on the GPU compilers (as loops.cuh).
#if !defined(BP_GPU_UNROLL)
#if defined(BP_GPU_SIM)
#define BP_GPU_UNROLL
#else
#define BP_GPU_UNROLL _Pragma("unroll")
#endif
#endif

namespace bp_spconv_gpu {

// What a broken rulebook is reported as (Note [Deferred device errors] in
// plugins/gpu/device_errors.h), in the CPU kernels' words: a pair outside
// the tensors (values: offset << 32 | pair, input row, output row,
// input rows << 32 | output rows), a count outside [0, P] (values: offset,
// count, P).
inline std::string describeRulebookPair(const bp_gpu::ErrorSite& site, const int64_t (&v)[4]) {
  return bp::detail::concat(site.op, ": pair ", v[0] & 0xffffffff, " of kernel offset ", v[0] >> 32,
                            " joins input row ", v[1], " and output row ", v[2], ", outside the ", v[3] >> 32,
                            " input and ", v[3] & 0xffffffff,
                            " output rows; was the rulebook built for these tensors?");
}
inline std::string describeRulebookCount(const bp_gpu::ErrorSite& site, const int64_t (&v)[4]) {
  return bp::detail::concat(site.op, ": indice_pair_num[", v[0], "] = ", v[1], " is outside [0, ", v[2],
                            "] (the room indice_pairs has per offset)");
}
struct RulebookSites {
  bp_gpu::ErrorSite pair, count;
};
#define BP_SPCONV_RULEBOOK_SITES(OP)                                                                              \
  RulebookSites {                                                                                                 \
    {OP, BP_INVALID_ARGUMENT, &describeRulebookPair, ""}, { OP, BP_INVALID_ARGUMENT, &describeRulebookCount, "" } \
  }
inline constexpr RulebookSites kIndiceConvSites = BP_SPCONV_RULEBOOK_SITES("spconv::indice_conv");
inline constexpr RulebookSites kIndiceConvBackwardSites = BP_SPCONV_RULEBOOK_SITES("spconv::indice_conv_backward");
inline constexpr RulebookSites kIndiceMaxpoolSites = BP_SPCONV_RULEBOOK_SITES("spconv::indice_maxpool");
inline constexpr RulebookSites kIndiceMaxpoolBackwardSites =
    BP_SPCONV_RULEBOOK_SITES("spconv::indice_maxpool_backward");
#undef BP_SPCONV_RULEBOOK_SITES

// The rulebook of a call on the device: indice_pairs [K, 2, P] and
// indice_pair_num [K], both contiguous int32. Kernels read pair j of offset
// k from row r (0: the input rows of the forward convolution, 1: its
// outputs) at pairs[(2k + r) P + j], for j < count(k). The counts are read
// on the device only: the host never waits for them, so kernels run over
// the capacity P and blocks past an offset's count leave at once. Nor does
// the host read the pairs: a kernel that meets a count outside [0, P] or a
// pair outside the tensors records it (raised at the next synchronization,
// as the CPU kernels raise at the call) and leaves it out, so that no
// kernel reads or writes outside the tensors.
struct DeviceRulebook {
  const int32_t* pairs;
  const int32_t* counts;
  int64_t K, P;
  bp_gpu::DeviceErrorSlot* slot;
  const RulebookSites* sites;

  // indice_pair_num[k], clamped to [0, P].
  __device__ int64_t count(int64_t k) const {
    const int64_t n = counts[k];
    if (n >= 0 && n <= P) return n;
    bp_gpu::raiseDeviceError(slot, &sites->count, k, n, P);
    return n < 0 ? 0 : P;
  }
  BP_GPU_HD const int32_t* row(int64_t k, int r) const { return pairs + (2 * k + r) * P; }

  // Whether pair j of offset k, whose rows are `src` (in row `src_row` of
  // the rulebook) and `dst`, lies inside tensors of src_rows and dst_rows
  // rows; if not, records it.
  __device__ bool pairInRange(int64_t k, int64_t j, int src_row, int64_t src, int64_t dst, int64_t src_rows,
                              int64_t dst_rows) const {
    if (src >= 0 && src < src_rows && dst >= 0 && dst < dst_rows) return true;
    const bool forward = src_row == 0;  // src is the input row
    bp_gpu::raiseDeviceError(slot, &sites->pair, k << 32 | j, forward ? src : dst, forward ? dst : src,
                             forward ? src_rows << 32 | dst_rows : dst_rows << 32 | src_rows);
    return false;
  }
};

// Threads per block of the elementwise-shaped kernels (maps, pooling).
inline constexpr int kMapThreads = 256;

// Note [Offset maps]
// map[k * dst_rows + d] = the source row that destination row d takes at
// kernel offset k, or -1: the rulebook turned around so that a kernel
// owning destination rows finds its sources without searching. For the
// forward convolution the destinations are the output rows and the sources
// the input rows; for the input gradient (and the max pooling backward) the
// other way round. One thread per pair of the capacity, all offsets in one
// launch (x: pair tiles x offsets); pairs whose rows fall outside the
// tensors are recorded and left out, so no kernel reads or writes outside
// them.
template <int kBlock>
__global__ void buildMapKernel(DeviceRulebook rb, int src_row, int64_t src_rows, int64_t dst_rows, int64_t tiles,
                               int32_t* map) {
  const int64_t k = blockIdx.x / tiles;
  const int64_t j = (blockIdx.x % tiles) * kBlock + threadIdx.x;
  if (j >= rb.count(k)) return;
  const int32_t s = rb.row(k, src_row)[j], d = rb.row(k, 1 - src_row)[j];
  if (rb.pairInRange(k, j, src_row, s, d, src_rows, dst_rows)) map[k * dst_rows + d] = s;
}

// The call's device and the stream its work is queued on; the guard makes
// the device current for the call.
struct CallContext {
  explicit CallContext(bp::Device d) : device(d), guard(d.index), stream(bp_gpu::currentStream(d.index)) {}
  bp::Device device;
  bp_gpu::DeviceGuard guard;
  gpuStream_t stream;
};

// A grid's x dimension of `blocks` blocks of `threads` threads, checked
// against what every GPU takes: CUDA up to 2^31 - 1 blocks in x, HIP fewer
// than 2^32 threads in x (grid x block).
inline unsigned gridX(const char* op, int64_t blocks, int threads) {
  BP_PLUGIN_CHECK(blocks <= INT32_MAX && blocks * threads <= int64_t{UINT32_MAX}, op, ": the call needs ", blocks,
                  " thread blocks of ", threads, " threads, more than one launch takes on ", BP_GPU_NAME,
                  "; split the rulebook");
  return static_cast<unsigned>(blocks);
}

// The offset map of Note [Offset maps]: int32 [K, dst_rows] on the call's
// device, -1 where no pair reaches. Two queued operations, no host wait.
inline bp::Tensor offsetMap(const char* op, const CallContext& call, const DeviceRulebook& rb, int src_row,
                            int64_t src_rows, int64_t dst_rows) {
  bp::Tensor map = bp::Tensor::empty({rb.K, dst_rows}, bp::ScalarType::Int32, call.device);
  if (map.numel() == 0) return map;
  // All bits set: -1 in every int32.
  bp_gpu::check(gpuMemsetAsync(map.data_ptr(), 0xFF, static_cast<size_t>(map.numel()) * sizeof(int32_t), call.stream),
                op);
  const int64_t tiles = (rb.P + kMapThreads - 1) / kMapThreads;
  bp_gpu::launch(&buildMapKernel<kMapThreads>, dim3(gridX(op, tiles * rb.K, kMapThreads)), dim3(kMapThreads), 0,
                 call.stream, rb, src_row, src_rows, dst_rows, tiles, map.device_ptr<int32_t>());
  return map;
}

// Throws unless `t` is on the call's device, in the terms of the CPU
// kernels' device check.
inline void checkOnCallDevice(const char* op, const bp::Tensor& t, const char* name, bp::Device device) {
  BP_PLUGIN_CHECK(t.device() == device, op, ": this is the ", BP_GPU_NAME, " kernel, running on ",
                  bp_gpu::deviceName(device), ", but ", name, " is on ", bp_gpu::deviceName(t.device()),
                  "; move it there with .to(\"", bp_gpu::deviceName(device), "\")");
}

// The floating dtypes the kernels take.
inline void checkFloat(const char* op, const bp::Tensor& t, const char* name) {
  bp_gpu::checkDtype(
      op, t, name,
      {bp::ScalarType::Float16, bp::ScalarType::BFloat16, bp::ScalarType::Float32, bp::ScalarType::Float64});
}

// The rulebook of a call of the op `sites` name, contiguous (copied on the
// device when it is not; the copies are kept alive by the caller's
// holders).
inline DeviceRulebook deviceRulebook(const RulebookSites& sites, bp::Device device, const bp::Tensor& pairs,
                                     const bp::Tensor& counts, bp::Tensor& pairs_holder, bp::Tensor& counts_holder) {
  pairs_holder = bp_spconv::contiguous(pairs);
  counts_holder = bp_spconv::contiguous(counts);
  const int64_t K = pairs.size(0), P = pairs.size(2);
  return DeviceRulebook{K * P == 0 ? nullptr : pairs_holder.device_ptr<const int32_t>(),
                        K == 0 ? nullptr : counts_holder.device_ptr<const int32_t>(),
                        K,
                        P,
                        bp_gpu::deviceErrorSlot(device.index),
                        &sites};
}

// A[i, c] as the kernels' arithmetic type (float for the 16-bit floats).
template <class T>
BP_GPU_HD inline bp_gpu::opmath_t<T> value(const T* base, int64_t i) {
  return bp_gpu::load(base[i]);
}

// Calls f(T{}) with the kernel storage type of a floating dtype (one that
// checkFloat accepted).
template <class F>
void visitFloat(bp::ScalarType t, F&& f) {
  switch (t) {
    case bp::ScalarType::Float16: return f(bp_gpu::Half{});
    case bp::ScalarType::BFloat16: return f(bp_gpu::BFloat16{});
    case bp::ScalarType::Float64: return f(double{});
    default: return f(float{});
  }
}

}  // namespace bp_spconv_gpu
