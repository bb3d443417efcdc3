// GPU kernels of cumsum, cumprod, flip and the pads (constant_pad_nd,
// reflection_pad{1,2,3}d, replication_pad{1,2,3}d), mirroring the CPU
// plugin's plugins/cpu/sort_scan_pad.cc value for value. sort and topk have
// no GPU kernel: they reach the CPU kernel through the declared-kernel rules
// (CPU fallback), as docs/operators.md says.
//
//   * cumsum, cumprod: the input converted to out's dtype (as the reductions do,
//     kernel_args.h's as()), then one thread per line along `dim` adds
//     (multiplies) its elements in order in double for the floating dtypes (as the CPU
//     kernel, so that long float32 lines give the same sums: a float
//     accumulator stops counting at 2^24), wrapping uint64 for integers. Parallel over lines, serial
//     along one: a scan of a few very long lines uses few threads.
//   * flip and pads: one thread per output element maps each coordinate to
//     the input's (or to the padding value) and moves the element's bytes,
//     one instantiation per element size.
#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

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
};

template <class O, bool Prod>
__global__ void scanKernel(ScanArgs args, const O* in, O* out) {
  using Acc = scan_acc_t<O>;
  gridStride(args.count, [&](int64_t i) {
    const Offsets<2> at = args.lines.get(i);
    Acc acc = Prod ? 1 : 0;
    for (int64_t j = 0; j < args.len; ++j) {
      const Acc v = static_cast<Acc>(load(in[at.v[0] + j * args.in_step]));
      if constexpr (Prod)
        acc *= v;
      else
        acc += v;
      if constexpr (kIsFloating<O>)
        out[at.v[1] + j * args.out_step] = store<O>(acc);
      else
        out[at.v[1] + j * args.out_step] = store<O>(static_cast<int64_t>(acc));  // modulo 2^64
    }
  });
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
  visitDtype(out.dtype(), [&](auto tag) {
    using O = decltype(tag);
    launchElements(&scanKernel<O, Prod>, args.count, 1, device.index, args, static_cast<const O*>(x.data_ptr()),
                   static_cast<O*>(out.data_ptr()));
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
