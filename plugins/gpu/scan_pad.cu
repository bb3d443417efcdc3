// GPU kernels of cumsum, cumprod, flip and the pads (constant_pad_nd,
// reflection_pad{1,2,3}d, replication_pad{1,2,3}d), mirroring the CPU
// plugin's plugins/cpu/sort_scan_pad.cc value for value (sort and topk are
// in sort.cu).
//
//   * cumsum, cumprod: the input converted to out's dtype (as the reductions
//     do, kernel_args.h's as()), then a parallel scan of each line along
//     `dim` (Note [GPU scans]) in double for the floating dtypes (as the CPU
//     kernel, so that long float32 lines give the same sums: a float
//     accumulator stops counting at 2^24), wrapping uint64 for integers.
//   * flip and pads: one thread per output element maps each coordinate to
//     the input's (or to the padding value) and moves the element's bytes,
//     one instantiation per element size.
//
// Note [GPU scans]
// A line is a row of Note [GPU row reductions]: `lanes` threads of a block
// walk it in tiles of `lanes` elements, lane l taking element l of the
// tile; an inclusive scan of the tile across the lanes (Hillis-Steele in
// shared memory: log2(lanes) steps) plus the carry of the tiles before it
// gives each element's result, and the tile's total joins the carry. Short
// lines get few lanes and a block serves many of them, so [1e6, 4] keeps
// every thread busy, and a long line is scanned by a whole block instead of
// one thread. The combination order is a fixed tree, so results are
// deterministic; integer sums and products are exact modulo 2^64 in any
// order, and the floating ones differ from the CPU's sequential double
// sums only by double rounding.
#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "block_reduce.cuh"
#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"

namespace bp_gpu {
namespace {

using bp_common::DimMap;
using bp_common::mapCoordinate;
using bp_common::wrapDim;

// --- cumsum, cumprod

template <class O>
using scan_acc_t = std::conditional_t<kIsFloating<O>, double, uint64_t>;

struct ScanArgs {
  OffsetCalculator<2> lines;  // the other dims: {input offset, output offset} of line i
  int64_t count, len, in_step, out_step;
  bool slots_fastest;
};

template <class Acc, bool Prod>
__device__ inline Acc scanCombine(Acc a, Acc b) {
  if constexpr (Prod)
    return a * b;
  else
    return a + b;
}

template <class O, bool Prod>
__global__ void scanKernel(ScanArgs args, const O* in, O* out) {
  using Acc = scan_acc_t<O>;
  __shared__ Acc shared[kReduceThreads];
  const RowLane t = rowLane(args.slots_fastest);
  const int i = t.slot * t.lanes + t.lane;
  const Acc identity = Prod ? Acc(1) : Acc(0);
  for (int64_t first = firstRow(t); first < args.count; first += rowStep(t)) {
    const int64_t r = first + t.slot;
    const bool valid = r < args.count;
    const Offsets<2> at = valid ? args.lines.get(r) : Offsets<2>{};
    Acc carry = identity;
    for (int64_t base = 0; base < args.len; base += t.lanes) {
      const int64_t j = base + t.lane;
      const bool here = valid && j < args.len;
      Acc value = here ? static_cast<Acc>(load(in[at.v[0] + j * args.in_step])) : identity;
      shared[i] = value;
      __syncthreads();
      for (int s = 1; s < t.lanes; s *= 2) {
        const Acc earlier = t.lane >= s ? shared[i - s] : identity;
        __syncthreads();
        value = scanCombine<Acc, Prod>(earlier, value);
        shared[i] = value;
        __syncthreads();
      }
      const Acc result = scanCombine<Acc, Prod>(carry, value);
      if (here) {
        if constexpr (kIsFloating<O>)
          out[at.v[1] + j * args.out_step] = store<O>(result);
        else
          out[at.v[1] + j * args.out_step] = store<O>(static_cast<int64_t>(result));  // modulo 2^64
      }
      carry = scanCombine<Acc, Prod>(carry, shared[t.slot * t.lanes + t.lanes - 1]);
      __syncthreads();  // shared is written again by the next tile
    }
  }
}

template <bool Prod>
bp::Tensor scanInto(const char* op, const bp::Tensor& self, int64_t dim, const bp::Tensor& out) {
  const bp::Device device = callDevice(op, out, "out");
  checkOnDevice(op, self, "self", device);
  checkDtype(op, self, "self", bp::kAllScalarTypes);
  checkDtype(op, out, "out", bp::kAllScalarTypes);
  BP_PLUGIN_CHECK(self.dim() <= kMaxDims, op, ": tensors of ", self.dim(), " dimensions are not supported on ",
                  BP_GPU_NAME, " (at most ", kMaxDims, ")");
  if (out.numel() == 0) return out;
  bp::Tensor converted;
  const bp::Tensor& x = as(op, self, out.dtype(), converted);  // x is self when out is self (in place)
  const int64_t nd = x.dim(), d = wrapDim(dim, nd);
  const LinesAlong l = linesAlong(op, x, out, d);
  ScanArgs args{};
  args.lines = l.lines;
  args.len = l.len;
  args.count = l.count;
  args.in_step = l.in_step;
  args.out_step = l.out_step;
  const RowLayout layout = rowLayoutFor(l.len, l.in_step == 1, l.lines.strides[0][0], l.lines.sizes[0]);
  args.slots_fastest = layout.slots_fastest;
  visitDtype(out.dtype(), [&](auto tag) {
    using O = decltype(tag);
    launchRows(&scanKernel<O, Prod>, args.count, layout.lanes, args.slots_fastest, 0, device.index, args,
               static_cast<const O*>(x.data_ptr()), static_cast<O*>(out.data_ptr()));
  });
  return out;
}

bp::Tensor cumsum_out(const bp::Tensor& self, int64_t dim, std::optional<ScalarType>, const bp::Tensor& out) {
  return scanInto<false>("bp::cumsum.out", self, dim, out);
}

bp::Tensor cumprod_out(const bp::Tensor& self, int64_t dim, std::optional<ScalarType>, const bp::Tensor& out) {
  return scanInto<true>("bp::cumprod.out", self, dim, out);
}

// --- flip and pads: out[p] = self[map(p)], or the padding value

// Per output dim (outermost first): sizes and strides of out and self, the
// padding before, and how coordinates map. Passed by value.
struct Mapping {
  int nd;
  int64_t out_sizes[kMaxDims], out_strides[kMaxDims], in_sizes[kMaxDims], in_strides[kMaxDims];
  int64_t before[kMaxDims];
  DimMap map[kMaxDims];
};

template <class E>
__global__ void gatherMappedKernel(Mapping m, int64_t n, E* out, const E* in, E fill) {
  gridStride(n, [&](int64_t i) {
    int64_t rest = i, out_off = 0, in_off = 0;
    bool padding = false;
    for (int d = m.nd - 1; d >= 0; --d) {
      const int64_t c = rest % m.out_sizes[d];
      rest /= m.out_sizes[d];
      out_off += c * m.out_strides[d];
      const int64_t u = mapCoordinate(m.map[d], c, m.before[d], m.in_sizes[d]);
      if (u < 0)
        padding = true;
      else
        in_off += u * m.in_strides[d];
    }
    out[out_off] = padding ? fill : in[in_off];
  });
}

// Writes out from self through `maps` (one per dim of self); `fill_bits`
// holds the padding value's bytes in self's dtype.
void gatherMapped(const char* op, const bp::Tensor& self, const bp::Tensor& out, const DimMap* maps,
                  const int64_t* before, uint64_t fill_bits) {
  const bp::Device device = callDevice(op, out, "out");
  checkOnDevice(op, self, "self", device);
  BP_PLUGIN_CHECK(out.dtype() == self.dtype(), op, ": expected 'out' of dtype ", bp::name(self.dtype()), ", got ",
                  bp::name(out.dtype()));
  if (out.numel() == 0) return;
  Mapping m{};
  m.nd = static_cast<int>(self.dim());
  for (int d = 0; d < m.nd; ++d) {
    m.out_sizes[d] = out.size(d);
    m.out_strides[d] = out.stride(d);
    m.in_sizes[d] = self.size(d);
    m.in_strides[d] = self.stride(d);
    m.before[d] = before[d];
    m.map[d] = maps[d];
  }
  visitItemSize(self.element_size(), [&](auto tag) {
    using E = decltype(tag);
    E fill;
    std::memcpy(&fill, &fill_bits, sizeof(E));
    launchElements(&gatherMappedKernel<E>, out.numel(), 1, device.index, m, out.numel(),
                   static_cast<E*>(out.data_ptr()), static_cast<const E*>(self.data_ptr()), fill);
  });
}

void checkRank(const char* op, const bp::Tensor& self) {
  BP_PLUGIN_CHECK(self.dim() <= kMaxDims, op, ": tensors of ", self.dim(), " dimensions are not supported on ",
                  BP_GPU_NAME, " (at most ", kMaxDims, ")");
}

bp::Tensor flip_out(const bp::Tensor& self, bp::IntList dims, const bp::Tensor& out) {
  const char* op = "bp::flip.out";
  checkRank(op, self);
  DimMap maps[kMaxDims];
  int64_t before[kMaxDims];
  bp_common::flipMaps(self.dim(), dims, maps, before);
  gatherMapped(op, self, out, maps, before, 0);
  return out;
}

// `pad` pairs (before, after) for the last dims, the last dim first.
void padInto(const char* op, const bp::Tensor& self, bp::IntList pad, DimMap mode, uint64_t fill,
             const bp::Tensor& out) {
  checkRank(op, self);
  DimMap maps[kMaxDims];
  int64_t before[kMaxDims];
  bp_common::padMaps(self.dim(), pad, mode, maps, before);
  gatherMapped(op, self, out, maps, before, fill);
}

// The pad kernels: plugins/common's, over padInto.
constexpr auto constant_pad_nd_out = &bp_common::constantPadOut<GpuStorage, &padInto>;
template <DimMap Mode>
constexpr auto edge_pad_out = &bp_common::edgePadOut<&padInto, Mode>;

}  // namespace

void registerScanPadKernels(bp::Library& m, int32_t type) { BP_REGISTER_SCAN_PAD_KERNELS(m, type); }

}  // namespace bp_gpu
