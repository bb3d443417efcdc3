// Data-movement kernels of the GPU plugins, mirroring the CPU plugin's
// (plugins/cpu/data_movement.cc): cat, index_select, gather, scatter_add
// and masked_fill (stack and embedding are host composites over cat and
// index_select). Each computes into the `out` the host has sized with the
// op's rule. Moving an element does not depend on what it means, so the
// gathers move raw elements of the element's size (one instantiation per
// size, not per dtype); cat and masked_fill, whose `out` may have another
// dtype, convert through copyCast.

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "bp_common/indexing.h"
#include "bp_common/registration.h"
#include "index_check.cuh"
#include "kernel_args.h"
#include "kernels.h"
#include "loops.cuh"

namespace bp_gpu {
namespace {

using bp_common::wrapDim;

void checkSameDtype(const char* op, const bp::Tensor& t, const char* arg, const bp::Tensor& self) {
  BP_PLUGIN_CHECK(t.dtype() == self.dtype(), op, ": argument '", arg, "' has dtype ", bp::name(t.dtype()),
                  " but 'self' has dtype ", bp::name(self.dtype()), "; pass '", arg, "' of dtype ",
                  bp::name(self.dtype()));
}

// Same elements in the same places: scatter_add's out needs no copy of self.
bool sameLayout(const bp::Tensor& a, const bp::Tensor& b) {
  return a.data_ptr() == b.data_ptr() && a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides();
}

// Calls f(I{}) with the C++ type of an index tensor (int32 or int64).
template <class F>
decltype(auto) visitIndex(const char* op, const bp::Tensor& index, F&& f) {
  auto refuse = [&] { checkDtype(op, index, "index", {ScalarType::Int64, ScalarType::Int32}); };
  return bp_common::visitIndexDtype(index.dtype(), refuse, f);
}

// --- cat

bp::Tensor cat_out(const std::vector<bp::Tensor>& tensors, int64_t dim, const bp::Tensor& out) {
  const char* op = "bp::cat.out";
  const bp::Device device = callDevice(op, out, "out");
  for (const bp::Tensor& t : tensors) checkOnDevice(op, t, "tensors", device);
  if (out.numel() == 0) return out;
  // The host's rule has checked dim against the inputs' rank, which is out's.
  const int64_t d = wrapDim(dim, out.dim());
  int64_t offset = 0;
  for (const bp::Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0) continue;  // skipped by cat's rule (legacy empty tensor)
    const bp::Tensor slice = out.as_strided(t.sizes(), out.strides(), out.storage_offset() + offset * out.stride(d));
    copyCast(op, slice, t);
    offset += t.size(d);
  }
  return out;
}

// --- gathers: out[p] = self[q] where q is p moved along one dimension to an
// index value: index_select (one index per slice) and gather (one per element).
// An out-of-range index value is recorded and reads as zero (Note [Index
// checks on the device]).

BP_GPU_INDEX_SITE(kIndexSelectSite, "bp::index_select.out", "'self'");
BP_GPU_INDEX_SITE(kGatherSite, "bp::gather.out", "'self'");

// The index element of iteration element i: (i / inner) % count, row-major
// (index_select: the position along dim; gather: i itself).
struct IndexElement {
  int64_t inner, count;
};

template <class E, class I>
__global__ void gatherKernel(OffsetCalculator<3> walk, int64_t n, E* out, const I* index, const E* self,
                             int64_t self_step, IndexCheck check, IndexElement element) {
  gridStride(n, [&](int64_t i) {
    const Offsets<3> o = walk.get(i);
    const I v = index[o.v[1]];
    out[o.v[0]] = indexInRange(check, v, i / element.inner % element.count)
                      ? self[o.v[2] + static_cast<int64_t>(v) * self_step]
                      : E{};
  });
}

// Runs gatherKernel over `shape` with the operands' aligned strides.
template <class I>
void gatherInto(const char* op, const bp::Tensor& out, const bp::Tensor& index, const bp::Tensor& self,
                bp::IntList shape, const std::array<const int64_t*, 3>& strides, int64_t self_step,
                const IndexCheck& check, IndexElement element) {
  const int64_t n = out.numel();
  visitItemSize(self.element_size(), [&](auto tag) {
    using E = decltype(tag);
    launchElements(&gatherKernel<E, I>, n, 1, out.device().index, makeOffsetCalculator<3>(op, shape, strides), n,
                   static_cast<E*>(out.data_ptr()), static_cast<const I*>(index.data_ptr()),
                   static_cast<const E*>(self.data_ptr()), self_step, check, element);
  });
}

// At most kMaxDims strides per operand ride in the kernel arguments.
void checkRank(const char* op, int64_t ndim) {
  BP_PLUGIN_CHECK(ndim <= kMaxDims, op, ": tensors of ", ndim, " dimensions are not supported on ", BP_GPU_NAME,
                  " (at most ", kMaxDims, ")");
}

// index_select: out[..., i, ...] = self[..., index[i], ...] along dim.
bp::Tensor index_select_out(const bp::Tensor& self, int64_t dim, const bp::Tensor& index, const bp::Tensor& out) {
  const char* op = "bp::index_select.out";
  const bp::Device device = callDevice(op, out, "out");
  checkOnDevice(op, self, "self", device);
  checkOnDevice(op, index, "index", device);
  checkSameDtype(op, out, "out", self);
  checkRank(op, self.dim());
  return visitIndex(op, index, [&](auto index_tag) {
    using I = decltype(index_tag);
    if (out.numel() == 0) return out;
    const int64_t d = wrapDim(dim, self.dim());
    // Over out's shape: self moves with out except along d, where the index
    // (1-d, walked along d) picks the slice.
    int64_t self_strides[kMaxDims], index_strides[kMaxDims];
    int64_t inner = 1;  // out's elements per step along d
    for (int64_t k = 0; k < self.dim(); ++k) {
      self_strides[k] = k == d ? 0 : self.stride(k);
      index_strides[k] = k == d && index.dim() == 1 ? index.stride(0) : 0;
      if (k > d) inner *= out.size(k);
    }
    gatherInto<I>(op, out, index, self, out.sizes(), {out.strides().data(), index_strides, self_strides},
                  self.dim() == 0 ? 0 : self.stride(d),
                  indexCheck(device.index, kIndexSelectSite, self.dim() == 0 ? 1 : self.size(d), d),
                  IndexElement{inner, index.numel()});
    return out;
  });
}

// gather: out[p] = self[p with p[dim] = index[p]].
bp::Tensor gather_out(const bp::Tensor& self, int64_t dim, const bp::Tensor& index, bool, const bp::Tensor& out) {
  const char* op = "bp::gather.out";
  const bp::Device device = callDevice(op, out, "out");
  checkOnDevice(op, self, "self", device);
  checkOnDevice(op, index, "index", device);
  checkSameDtype(op, out, "out", self);
  checkDtype(op, index, "index", {ScalarType::Int64});
  checkRank(op, index.dim());
  if (index.numel() == 0) return out;
  const int64_t d = wrapDim(dim, self.dim());
  // Over index's shape; the host's rule made index's other sizes fit self's
  // and the ranks equal (a 0-d tensor counting as 1-d).
  int64_t self_strides[kMaxDims];
  for (int64_t k = 0; k < index.dim(); ++k) self_strides[k] = k == d || self.dim() == 0 ? 0 : self.stride(k);
  gatherInto<int64_t>(op, out, index, self, index.sizes(), {out.strides().data(), index.strides().data(), self_strides},
                      self.dim() == 0 ? 0 : self.stride(d),
                      indexCheck(device.index, kGatherSite, self.dim() == 0 ? 1 : self.size(d), d),
                      IndexElement{1, index.numel()});
  return out;
}

// --- scatter_add: out = self; out[p with p[dim] = index[p]] += src[p].
// --- scatter: the same with = .

template <class T>
inline constexpr bool kHasAtomicAdd =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;

// Steps along the scattered dimension, for the dtypes without atomicAdd.
struct ScatterSteps {
  int64_t length;  // elements per line (1 with atomics: every element is its own line)
  int64_t index, src;
  int64_t out;  // out's stride along dim: what an index value moves
};

// Each thread adds one line of index along dim, in order. With atomicAdd
// the lines are single elements and every element is its own thread; the
// other dtypes (float16, bfloat16, int8, uint8) take whole lines, which no
// two threads share (positions that differ outside dim never meet), so
// their sums are race-free and deterministic, in the CPU plugin's order.
// An out-of-range index value is recorded and its element skipped (Note
// [Index checks on the device]); `inner` (index's elements per step along
// dim) turns a line and a step into the element's row-major position.
template <class T>
__global__ void scatterAddKernel(OffsetCalculator<3> walk, int64_t n, const int64_t* index, const T* src, T* out,
                                 ScatterSteps steps, IndexCheck check, int64_t inner) {
  gridStride(n, [&](int64_t i) {
    const Offsets<3> o = walk.get(i);
    for (int64_t k = 0; k < steps.length; ++k) {
      const int64_t v = index[o.v[0] + k * steps.index];
      const int64_t element = steps.length == 1 ? i : (i / inner * steps.length + k) * inner + i % inner;
      if (!indexInRange(check, v, element)) continue;
      T* dst = out + o.v[2] + v * steps.out;
      const T add = src[o.v[1] + k * steps.src];
      if constexpr (std::is_same_v<T, int64_t>) {  // two's complement: the unsigned sum has the same bits
        atomicAdd(reinterpret_cast<unsigned long long*>(dst), static_cast<unsigned long long>(add));
      } else if constexpr (kHasAtomicAdd<T>) {
        atomicAdd(dst, add);
      } else {
        *dst = store<T>(load(*dst) + load(add));
      }
    }
  });
}

// scatter (=): every element is its own thread; where two name one place,
// which lands is unspecified, as in PyTorch's CUDA kernel.
template <class T>
__global__ void scatterKernel(OffsetCalculator<3> walk, int64_t n, const int64_t* index, const T* src, T* out,
                              int64_t out_step, IndexCheck check) {
  gridStride(n, [&](int64_t i) {
    const Offsets<3> o = walk.get(i);
    const int64_t v = index[o.v[0]];
    if (indexInRange(check, v, i)) out[o.v[2] + v * out_step] = src[o.v[1]];
  });
}

BP_GPU_INDEX_SITE(kScatterAddSite, "bp::scatter_add.out", "'self'");
BP_GPU_INDEX_SITE(kScatterSite, "bp::scatter.src_out", "'self'");

template <bool Add>
bp::Tensor scatterInto(const char* op, const bp::Tensor& self, int64_t dim, const bp::Tensor& index,
                       const bp::Tensor& src, const bp::Tensor& out) {
  const bp::Device device = callDevice(op, out, "out");
  checkOnDevice(op, self, "self", device);
  checkOnDevice(op, index, "index", device);
  checkOnDevice(op, src, "src", device);
  checkSameDtype(op, out, "out", self);
  checkSameDtype(op, src, "src", self);
  checkDtype(op, index, "index", {ScalarType::Int64});
  checkRank(op, index.dim());
  const int64_t d = wrapDim(dim, self.dim());
  if (!sameLayout(out, self)) copyCast(op, out, self);
  if (index.numel() == 0) return out;
  const IndexCheck check =
      indexCheck(device.index, Add ? kScatterAddSite : kScatterSite, self.dim() == 0 ? 1 : self.size(d), d);
  const auto along = [&](const bp::Tensor& t) { return t.dim() == 0 ? 0 : t.stride(d); };
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    int64_t shape[kMaxDims], index_strides[kMaxDims], src_strides[kMaxDims], out_strides[kMaxDims];
    ScatterSteps steps{1, 0, 0, along(out)};
    int64_t ndim = 0, inner = 1;
    for (int64_t k = 0; k < index.dim(); ++k) {
      if (k > d) inner *= index.size(k);
      if (Add && k == d && !kHasAtomicAdd<T>) continue;  // walked inside the kernel, as a line
      shape[ndim] = index.size(k);
      index_strides[ndim] = index.stride(k);
      src_strides[ndim] = src.stride(k);
      out_strides[ndim] = k == d ? 0 : out.stride(k);
      ++ndim;
    }
    if (Add && !kHasAtomicAdd<T>) steps = {index.dim() == 0 ? 1 : index.size(d), along(index), along(src), along(out)};
    const OffsetCalculator<3> walk = makeOffsetCalculator<3>(op, bp::IntList(shape, static_cast<size_t>(ndim)),
                                                             {index_strides, src_strides, out_strides});
    int64_t lines = 1;
    for (int64_t k = 0; k < ndim; ++k) lines *= shape[k];
    const auto* index_data = static_cast<const int64_t*>(index.data_ptr());
    const auto* src_data = static_cast<const T*>(src.data_ptr());
    auto* out_data = static_cast<T*>(out.data_ptr());
    if constexpr (Add)
      launchElements(&scatterAddKernel<T>, lines, 1, device.index, walk, lines, index_data, src_data, out_data, steps,
                     check, inner);
    else
      launchElements(&scatterKernel<T>, lines, 1, device.index, walk, lines, index_data, src_data, out_data, along(out),
                     check);
  });
  return out;
}

bp::Tensor scatter_add_out(const bp::Tensor& self, int64_t dim, const bp::Tensor& index, const bp::Tensor& src,
                           const bp::Tensor& out) {
  return scatterInto<true>("bp::scatter_add.out", self, dim, index, src, out);
}

bp::Tensor scatter_src_out(const bp::Tensor& self, int64_t dim, const bp::Tensor& index, const bp::Tensor& src,
                           const bp::Tensor& out) {
  return scatterInto<false>("bp::scatter.src_out", self, dim, index, src, out);
}

// --- masked_fill: out = mask ? value : self, self and mask broadcast to out.

// The fill value's bits in out's dtype: converted to self's dtype first (as
// PyTorch, which fills self's dtype and then writes out). The host has
// range-checked a Scalar value; masked_fill_tensor_out checks a 0-d value
// tensor's.
uint64_t fillBits(const bp::Scalar& value, ScalarType self_type, ScalarType out_type) {
  return visitAnyDtype(self_type, [&](auto self_tag) {
    using S = decltype(self_tag);
    const S s = scalarTo<S>(value);
    return visitAnyDtype(out_type, [&](auto out_tag) {
      using O = decltype(out_tag);
      const O o = convert<O>(s);
      uint64_t bits = 0;
      std::memcpy(&bits, &o, sizeof(O));
      return bits;
    });
  });
}

bp::Tensor maskedFill(const char* op, const bp::Tensor& self, const bp::Tensor& mask, const bp::Scalar& value,
                      const bp::Tensor& out) {
  const bp::Device device = callDevice(op, out, "out");
  checkOnDevice(op, self, "self", device);
  checkOnDeviceOrCpuScalar(op, mask, "mask", device);
  checkDtype(op, mask, "mask", {ScalarType::Bool});
  const uint64_t bits = fillBits(value, self.dtype(), out.dtype());
  if (out.numel() == 0) return out;
  bp::Tensor holder;
  const SelectOperand cond =
      isCpuScalar(mask) ? SelectOperand{nullptr, cpuScalarAs<bool>(mask) ? 1u : 0u} : SelectOperand{&mask, 0};
  selectInto(op, out, cond, SelectOperand{nullptr, bits}, SelectOperand{&as(op, self, out.dtype(), holder), 0});
  return out;
}

constexpr auto masked_fill_scalar_out = &bp_common::maskedFillScalarOut<&maskedFill>;

bp::Tensor masked_fill_tensor_out(const bp::Tensor& self, const bp::Tensor& mask, const bp::Tensor& value,
                                  const bp::Tensor& out) {
  const char* op = "bp::masked_fill.Tensor_out";
  bp_common::checkZeroDim(op, value, "value");
  checkOnDeviceOrCpuScalar(op, value, "value", out.device());
  const bp::Scalar v = scalarOf(value);
  // The value is data the host has not read: its range is checked here.
  bp_common::checkScalarFits(op, v, self.dtype());
  return maskedFill(op, self, mask, v, out);
}

}  // namespace

void registerDataMovementKernels(bp::Library& m, int32_t type) { BP_REGISTER_DATA_MOVEMENT_KERNELS(m, type); }

}  // namespace bp_gpu
