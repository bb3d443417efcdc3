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

template <class E, class I>
__global__ void gatherKernel(OffsetCalculator<3> walk, int64_t n, E* out, const I* index, const E* self,
                             int64_t self_step) {
  gridStride(n, [&](int64_t i) {
    const Offsets<3> o = walk.get(i);
    out[o.v[0]] = self[o.v[2] + static_cast<int64_t>(index[o.v[1]]) * self_step];
  });
}

// Runs gatherKernel over `shape` with the operands' aligned strides.
template <class I>
void gatherInto(const char* op, const bp::Tensor& out, const bp::Tensor& index, const bp::Tensor& self,
                bp::IntList shape, const std::array<const int64_t*, 3>& strides, int64_t self_step) {
  const int64_t n = out.numel();
  visitItemSize(self.element_size(), [&](auto tag) {
    using E = decltype(tag);
    launchElements(&gatherKernel<E, I>, n, 1, out.device().index, makeOffsetCalculator<3>(op, shape, strides), n,
                   static_cast<E*>(out.data_ptr()), static_cast<const I*>(index.data_ptr()),
                   static_cast<const E*>(self.data_ptr()), self_step);
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
    const int64_t d = wrapDim(dim, self.dim());
    checkIndexRange<I>(op, index, self.dim() == 0 ? 1 : self.size(d), d, "'self'");
    // Over out's shape: self moves with out except along d, where the index
    // (1-d, walked along d) picks the slice.
    int64_t self_strides[kMaxDims], index_strides[kMaxDims];
    for (int64_t k = 0; k < self.dim(); ++k) {
      self_strides[k] = k == d ? 0 : self.stride(k);
      index_strides[k] = k == d && index.dim() == 1 ? index.stride(0) : 0;
    }
    gatherInto<I>(op, out, index, self, out.sizes(), {out.strides().data(), index_strides, self_strides},
                  self.dim() == 0 ? 0 : self.stride(d));
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
  checkIndexRange<int64_t>(op, index, self.dim() == 0 ? 1 : self.size(d), d, "'self'");
  // Over index's shape; the host's rule made index's other sizes fit self's
  // and the ranks equal (a 0-d tensor counting as 1-d).
  int64_t self_strides[kMaxDims];
  for (int64_t k = 0; k < index.dim(); ++k) self_strides[k] = k == d || self.dim() == 0 ? 0 : self.stride(k);
  gatherInto<int64_t>(op, out, index, self, index.sizes(), {out.strides().data(), index.strides().data(), self_strides},
                      self.dim() == 0 ? 0 : self.stride(d));
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
template <class T>
__global__ void scatterAddKernel(OffsetCalculator<3> walk, int64_t n, const int64_t* index, const T* src, T* out,
                                 ScatterSteps steps) {
  gridStride(n, [&](int64_t i) {
    const Offsets<3> o = walk.get(i);
    for (int64_t k = 0; k < steps.length; ++k) {
      T* dst = out + o.v[2] + index[o.v[0] + k * steps.index] * steps.out;
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
                              int64_t out_step) {
  gridStride(n, [&](int64_t i) {
    const Offsets<3> o = walk.get(i);
    out[o.v[2] + index[o.v[0]] * out_step] = src[o.v[1]];
  });
}

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
  checkIndexRange<int64_t>(op, index, self.dim() == 0 ? 1 : self.size(d), d, "'self'");  // before out changes
  if (!sameLayout(out, self)) copyCast(op, out, self);
  if (index.numel() == 0) return out;
  const auto along = [&](const bp::Tensor& t) { return t.dim() == 0 ? 0 : t.stride(d); };
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    int64_t shape[kMaxDims], index_strides[kMaxDims], src_strides[kMaxDims], out_strides[kMaxDims];
    ScatterSteps steps{1, 0, 0, along(out)};
    int64_t ndim = 0;
    for (int64_t k = 0; k < index.dim(); ++k) {
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
      launchElements(&scatterAddKernel<T>, lines, 1, device.index, walk, lines, index_data, src_data, out_data, steps);
    else
      launchElements(&scatterKernel<T>, lines, 1, device.index, walk, lines, index_data, src_data, out_data,
                     along(out));
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
