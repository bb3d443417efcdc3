#pragma once
// Index and dtype rules every plugin applies alike: dimension wrapping, the
// coordinate maps of flip and the pads, linear's output shape, and the
// dtype comparisons compute in. The coordinate map runs in kernels (host
// and device); the rest is host code.
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backplane/float16_conversions.h"
#include "backplane/plugin.hpp"
#include "bp_common/dtypes.h"

namespace bp_common {

// A dimension as given (negative counts from the end; a 0-d tensor has
// dims 0 and -1), as a non-negative one. The host's rule has range-checked
// it.
inline int64_t wrapDim(int64_t dim, int64_t ndim) { return dim < 0 ? dim + (ndim > 1 ? ndim : 1) : dim; }

// --- flip and pads: out[p] = self[map(p)], or the padding value

// How output coordinates map to input ones in one dim.
enum class DimMap : uint8_t { kSame, kFlip, kConstant, kReflect, kReplicate };

// The input coordinate that output coordinate c of a dim of input size
// `size` reads, `before` being the padding before it; -1: the padding value.
BP_HOST_DEVICE inline int64_t mapCoordinate(DimMap m, int64_t c, int64_t before, int64_t size) {
  int64_t u = c - before;
  switch (m) {
    case DimMap::kSame: return c;
    case DimMap::kFlip: return size - 1 - c;
    case DimMap::kConstant: return u >= 0 && u < size ? u : -1;
    case DimMap::kReflect:
      if (u < 0) u = -u;
      if (u >= size) u = 2 * (size - 1) - u;
      return u;
    case DimMap::kReplicate: return u < 0 ? 0 : u >= size ? size - 1 : u;
  }
  return c;
}

// The maps of flip(self, dims) for a tensor of `ndim` dims: `maps` and
// `before` hold at least ndim entries.
inline void flipMaps(int64_t ndim, bp::IntList dims, DimMap* maps, int64_t* before) {
  for (int64_t d = 0; d < ndim; ++d) maps[d] = DimMap::kSame, before[d] = 0;
  if (ndim > 0)
    for (int64_t d : dims) maps[wrapDim(d, ndim)] = DimMap::kFlip;
}

// The maps of a pad with `mode`: `pad` pairs (before, after) for the last
// dims, the last dim first.
inline void padMaps(int64_t ndim, bp::IntList pad, DimMap mode, DimMap* maps, int64_t* before) {
  for (int64_t d = 0; d < ndim; ++d) maps[d] = DimMap::kSame, before[d] = 0;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t d = ndim - 1 - static_cast<int64_t>(i);
    maps[d] = mode;
    before[d] = pad[2 * i];
  }
}

// The pad kernels, over a plugin's padInto(op, self, pad, mode, fill_bits,
// out) and its Storage (bp_common/dtypes.h).
template <class Storage, auto PadInto>
bp::Tensor constantPadOut(const bp::Tensor& self, bp::IntList pad, const bp::Scalar& value, const bp::Tensor& out) {
  PadInto("bp::constant_pad_nd.out", self, pad, DimMap::kConstant, elementBits<Storage>(self.dtype(), value), out);
  return out;
}
template <auto PadInto, DimMap Mode>
bp::Tensor edgePadOut(const bp::Tensor& self, bp::IntList padding, const bp::Tensor& out) {
  PadInto(Mode == DimMap::kReflect ? "bp::reflection_pad.out" : "bp::replication_pad.out", self, padding, Mode, 0, out);
  return out;
}

// masked_fill.Scalar_out over a plugin's maskedFill(op, self, mask, value, out).
template <auto MaskedFill>
bp::Tensor maskedFillScalarOut(const bp::Tensor& self, const bp::Tensor& mask, const bp::Scalar& value,
                               const bp::Tensor& out) {
  return MaskedFill("bp::masked_fill.Scalar_out", self, mask, value, out);
}

// --- sort and topk, over a plugin's sortLines(op, self, dim, descending,
// k, values, indices), which sorts each line of self along dim (ties in
// index order, NaN the largest) and writes its first k entries.
template <auto SortLines>
std::tuple<bp::Tensor, bp::Tensor> sortValuesStable(const bp::Tensor& self, std::optional<bool> /*stable*/, int64_t dim,
                                                    bool descending, const bp::Tensor& values,
                                                    const bp::Tensor& indices) {
  const int64_t len = self.dim() == 0 ? 1 : self.size(wrapDim(dim, self.dim()));
  SortLines("bp::sort.values_stable", self, dim, descending, len, values, indices);
  return {values, indices};
}
template <auto SortLines>
std::tuple<bp::Tensor, bp::Tensor> topkValues(const bp::Tensor& self, int64_t k, int64_t dim, bool largest,
                                              bool /*sorted: always*/, const bp::Tensor& values,
                                              const bp::Tensor& indices) {
  const char* op = "bp::topk.values";
  const int64_t len = self.dim() == 0 ? 1 : self.size(wrapDim(dim, self.dim()));
  BP_PLUGIN_CHECK(k >= 0 && k <= len, op, ": k = ", k, " is out of range for a dimension of size ", len);
  SortLines(op, self, dim, largest, k, values, indices);
  return {values, indices};
}

// --- linear

// linear(input, weight)'s output sizes: input's with the last replaced by
// weight's rows (dropped for a 1-d weight); `rows` is the product of the
// leading dims, `n` the number of outputs per row.
struct LinearShape {
  std::vector<int64_t> sizes;
  int64_t rows = 1;
  int64_t in = 0;
  int64_t n = 1;
};
inline LinearShape linearShape(const bp::Tensor& input, const bp::Tensor& weight) {
  LinearShape s;
  const bool matrix_weight = weight.dim() == 2;
  s.in = input.size(-1);
  s.n = matrix_weight ? weight.size(0) : 1;
  s.sizes.assign(input.sizes().begin(), input.sizes().end() - 1);
  for (int64_t size : s.sizes) s.rows *= size;
  if (matrix_weight) s.sizes.push_back(s.n);
  return s;
}

// The stride between rows of `x` ([..., in]) seen as one [rows, in] matrix,
// when its leading dimensions collapse into a single row stride (as a view
// would); nullopt when they do not (e.g. a permuted batch). Size-1
// dimensions take any stride.
inline std::optional<int64_t> collapsedRowStride(const bp::Tensor& x) {
  int64_t row_stride = x.size(-1) * x.stride(-1), expect = -1;
  for (int64_t d = x.dim() - 2; d >= 0; --d) {
    if (x.size(d) == 1) continue;
    if (expect < 0)
      row_stride = x.stride(d);
    else if (x.stride(d) != expect)
      return std::nullopt;
    expect = x.stride(d) * x.size(d);
  }
  return row_stride;
}

// --- comparisons

// Note [Comparison dtype]
// PyTorch converts both operands of eq, ne, lt, le, gt, ge to their
// result_type and compares there: a float32 tensor equals a float64 0-d 0.1
// (which rounds to float32's 0.1), float16 compares with 1e5 as with inf,
// an int8 tensor compares with the number 300 as with 44 (wrapped). The
// out tensor is bool and cannot carry that dtype, so the kernel derives it
// from what it sees, with the host's result_type rule (meta.h): the Tensor
// form from the operands' dtypes and dimensions, the Scalar form from the
// tensor's dtype and the number's kind.
inline int dtypeCategory(ScalarType t) { return t == ScalarType::Bool ? 0 : isFloating(t) ? 2 : 1; }

inline ScalarType comparisonDtype(const bp::Tensor& self, const bp::Tensor& other) {
  const ScalarType a = self.dtype(), b = other.dtype();
  if (a == b) return a;
  if ((self.dim() > 0) != (other.dim() > 0)) {
    // A 0-d operand takes the dimensioned one's dtype, unless its own
    // category is higher (int64 against a float32 0-d tensor: float32).
    const ScalarType dims = self.dim() > 0 ? a : b, zero_dim = self.dim() > 0 ? b : a;
    return dtypeCategory(zero_dim) > dtypeCategory(dims) ? zero_dim : dims;
  }
  if (dtypeCategory(a) != dtypeCategory(b)) return dtypeCategory(a) > dtypeCategory(b) ? a : b;
  // One category: promotion gives a dtype that holds both operands exactly,
  // and so do int64 and float64, where they compare alike.
  return dtypeCategory(a) == 1 ? ScalarType::Int64 : ScalarType::Float64;
}

inline ScalarType comparisonDtype(const bp::Tensor& self, const bp::Scalar& other) {
  const ScalarType a = self.dtype();
  if (isFloating(a)) return a;                              // the number rounds to it (1e5 in float16: inf)
  if (other.isFloatingPoint()) return ScalarType::Float32;  // PyTorch's default dtype
  if (a == ScalarType::Bool && other.isIntegral()) return ScalarType::Int64;
  return a;  // an integer wraps into the tensor's dtype (300 into int8: 44)
}

// --- errors

// Throws unless `t` (argument `arg` of `op`) is 0-d.
inline void checkZeroDim(const char* op, const bp::Tensor& t, const char* arg) {
  BP_PLUGIN_CHECK(t.dim() == 0, op, ": argument '", arg, "' must be a 0-d tensor, but has ", t.dim(), " dimensions");
}

// The message for an integral division whose divisor holds a zero (Note
// [Integer division by zero] in plugins/cpu/elementwise_more.cc).
inline std::string zeroDivisionMessage(const char* op) {
  return std::string("ZeroDivisionError: ") + op +
         ": integer division by zero (a divisor element is 0); PyTorch raises here too: convert to a floating "
         "dtype for inf/NaN results";
}

}  // namespace bp_common
