#pragma once
// What the structural entries of the ONNX -> standard-op table (Note [ONNX
// op mapping] in onnx_ops.cc) share: a node's inputs and attributes read on
// the host, ONNX axes as dims, shapes, and standard ops called by name. The
// entries are in one file per family of ops: onnx_ops_reduction.cc,
// onnx_ops_math.cc, onnx_ops_conv_pool.cc, onnx_ops_normalization.cc,
// onnx_ops_attention.cc, onnx_ops_indexing.cc, onnx_ops_data_movement.cc,
// onnx_ops_creation.cc and onnx_ops_resampling.cc.
//
// Each entry reads the attributes (and the inputs that carry attributes
// from some opset on: axes, shapes, pads, k) on the host, decides
// "unsupported" before calling any op where no standard op expresses the
// node exactly, and composes Backplane's standard ops on the device under
// test.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "backplane/conformance/onnx_ops.h"
#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"

namespace backplane::conformance::onnx {

using Ints = std::vector<int64_t>;

inline const Tensor* optionalInput(const NodeInputs& in, size_t i) {
  return i < in.size() && in[i] ? &*in[i] : nullptr;
}

inline Tensor input(const NodeTest& n, const NodeInputs& in, size_t i) {
  const Tensor* t = optionalInput(in, i);
  BP_CHECK(t != nullptr, n.op_type, ": input ", i, " is required but missing");
  return *t;
}

inline bool wantsOutput(const NodeTest& n, size_t i) { return i < n.outputs.size() && !n.outputs[i].empty(); }

inline Ints intsOf(const Tensor& t) { return t.toVector<int64_t>(); }

// An ONNX axis in [-rank, rank) as a dim in [0, rank).
inline int64_t normAxis(const NodeTest& n, int64_t axis, int64_t rank) {
  BP_CHECK(axis >= -rank && axis < std::max<int64_t>(rank, 1), n.op_type, ": axis ", axis, " is out of range for rank ",
           rank);
  return axis < 0 ? axis + rank : axis;
}

inline Ints normAxes(const NodeTest& n, Ints axes, int64_t rank) {
  for (int64_t& a : axes) a = normAxis(n, a, rank);
  std::sort(axes.begin(), axes.end());
  BP_CHECK(std::adjacent_find(axes.begin(), axes.end()) == axes.end(), n.op_type, ": an axis is repeated");
  return axes;
}

inline Ints allAxes(int64_t rank) {
  Ints r(static_cast<size_t>(rank));
  std::iota(r.begin(), r.end(), 0);
  return r;
}

inline Ints sizesOf(const Tensor& t) { return Ints(t.sizes().begin(), t.sizes().end()); }

inline int64_t product(const Ints& v, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

// A host int64 vector as a 1-d tensor on `device`.
inline Tensor int64Tensor(const Ints& v, IntArrayRef sizes, Device device) {
  return Tensor(tensorFromVector(v, sizes, Device(DeviceType::CPU))).to(device);
}

// Calls a standard op with no C++ function in ops.h, by name.
inline Tensor callOp(const std::string& name, Stack stack) {
  Dispatcher::singleton().findOpOrThrow("bp::" + name).callBoxed(stack);
  return Tensor(stack.at(0).toTensor());
}

// Squeezes `dims` (ascending) out of t, last first.
inline Tensor squeezeDims(Tensor t, const Ints& dims) {
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) t = t.squeeze(*it);
  return t;
}

}  // namespace backplane::conformance::onnx
