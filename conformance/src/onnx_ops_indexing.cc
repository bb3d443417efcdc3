// Indexing in the ONNX -> standard-op table (Note [ONNX op mapping] in
// onnx_ops.cc): Gather, GatherElements, GatherND, Scatter, ScatterElements,
// ScatterND, TensorScatter, OneHot and Compress (from ONNX's tensor domain).
// How the entries read a node: onnx_node_args.h.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/ops/ops.h"
#include "onnx_node_args.h"

namespace backplane::conformance::onnx {
namespace {

// Indices with the negative ones counted from the end of a dim of size `n`, as int64.
Tensor wrapIndices(const Tensor& idx, int64_t size) {
  Tensor i = idx.to(ScalarType::Int64);
  return where(i.lt(Scalar(int64_t{0})), i + Scalar(size), i);
}

NodeRun gatherNode(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0), idx = input(n, in, 1);
  if (data.dim() == 0) return unsupported("Gather: a 0-d data input");
  const int64_t axis = normAxis(n, n.intAttr("axis", 0), data.dim());
  Tensor i = wrapIndices(idx, data.size(axis));
  Tensor picked = data.index_select(axis, i.reshape({i.numel()}));
  const Ints ds = sizesOf(data), is = sizesOf(idx);
  Ints shape(ds.begin(), ds.begin() + axis);
  shape.insert(shape.end(), is.begin(), is.end());
  shape.insert(shape.end(), ds.begin() + axis + 1, ds.end());
  return outputs({picked.reshape(shape)});
}

NodeRun gatherElements(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0);
  const int64_t axis = normAxis(n, n.intAttr("axis", 0), data.dim());
  return outputs({data.gather(axis, wrapIndices(input(n, in, 1), data.size(axis)))});
}

// Scatters `updates` into `data` along `dim` at `idx` (scatter_add's
// layout) in the order ONNX's reference does, one update after another:
// `group[e]` (row-major over the updates) numbers the earlier updates with
// the same target, so each group has distinct targets and lands in one
// replacing step (scatter_add onto zeros, picked where hit), combined with
// the data by `reduction`: none (the last update wins), mul, max or min.
Tensor scatterInOrder(Tensor data, int64_t dim, const Tensor& idx, const Tensor& updates, const Ints& group,
                      const std::string& reduction) {
  const int64_t groups = group.empty() ? 0 : *std::max_element(group.begin(), group.end()) + 1;
  for (int64_t g = 0; g < groups; ++g) {
    Ints in_group(group.size());
    for (size_t e = 0; e < group.size(); ++e) in_group[e] = group[e] == g ? 1 : 0;
    Tensor count = int64Tensor(in_group, updates.sizes(), updates.device());
    Tensor hit = callOp("scatter_add", {zeros_like(data, {.dtype = ScalarType::Int64}), dim, idx, count});
    Tensor placed = callOp(
        "scatter_add", {zeros_like(data), dim, idx, where(count.gt(Scalar(int64_t{0})), updates, zeros_like(updates))});
    Tensor combined = reduction == "mul"   ? data * placed
                      : reduction == "max" ? maximum(data, placed)
                      : reduction == "min" ? minimum(data, placed)
                                           : placed;
    data = where(hit.gt(Scalar(int64_t{0})), combined, data);
  }
  return data;
}

// For each key, how many earlier keys equal it.
Ints occurrenceNumbers(const Ints& keys) {
  std::map<int64_t, int64_t> seen;
  Ints r(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) r[i] = seen[keys[i]]++;
  return r;
}

NodeRun scatterElements(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0), updates = input(n, in, 2);
  const int64_t axis = normAxis(n, n.intAttr("axis", 0), data.dim());
  const std::string reduction = n.stringAttr("reduction", "none");
  Tensor idx = wrapIndices(input(n, in, 1), data.size(axis));
  if (reduction == "add") return outputs({callOp("scatter_add", {data, axis, idx, updates})});
  if (reduction != "none" && reduction != "mul" && reduction != "max" && reduction != "min") {
    return unsupported(n.op_type + ": unknown reduction '" + reduction + "'");
  }
  // Each update's target in data (row-major), from the indices on the host.
  const Ints index = intsOf(idx), isz = sizesOf(idx), dsz = sizesOf(data);
  Ints targets(index.size()), coord(isz.size(), 0);
  for (size_t e = 0; e < index.size(); ++e) {
    int64_t flat = 0;
    for (size_t d = 0; d < isz.size(); ++d)
      flat = flat * dsz[d] + (static_cast<int64_t>(d) == axis ? index[e] : coord[d]);
    targets[e] = flat;
    for (size_t d = isz.size(); d-- > 0;) {
      if (++coord[d] < isz[d]) break;
      coord[d] = 0;
    }
  }
  return outputs({scatterInOrder(data, axis, idx, updates, occurrenceNumbers(targets), reduction)});
}

// TensorScatter (a cache update): for each batch b, update's slices along
// `axis` written from write_indices[b] on (modulo the axis in circular
// mode); the rest of past_cache kept.
NodeRun tensorScatter(const NodeTest& n, const NodeInputs& in) {
  Tensor cache = input(n, in, 0), update = input(n, in, 1);
  if (cache.dim() < 2 || update.dim() != cache.dim()) return unsupported("TensorScatter: ranks of cache and update");
  const int64_t axis = normAxis(n, n.intAttr("axis", -2), cache.dim());
  if (axis == 0) return unsupported("TensorScatter: the axis is the batch dim");
  const std::string mode = n.stringAttr("mode", "linear");
  if (mode != "linear" && mode != "circular") return unsupported("TensorScatter: mode '" + mode + "'");
  const int64_t batch = cache.size(0), max_len = cache.size(axis), len = update.size(axis);
  Ints starts(static_cast<size_t>(batch), 0);
  if (const Tensor* w = optionalInput(in, 2)) starts = intsOf(*w);
  BP_CHECK(static_cast<int64_t>(starts.size()) == batch, "TensorScatter: ", starts.size(),
           " write indices for a batch of ", batch);
  Ints positions(static_cast<size_t>(batch * len));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < len; ++s) {
      int64_t at = starts[b] + s;
      if (mode == "circular") at = ((at % max_len) + max_len) % max_len;
      BP_CHECK(at >= 0 && at < max_len, "TensorScatter: write position ", at, " is outside the cache's ", max_len);
      positions[static_cast<size_t>(b * len + s)] = at;
    }
  }
  Ints shape(static_cast<size_t>(cache.dim()), 1);
  shape[0] = batch;
  shape[axis] = len;
  Tensor idx = int64Tensor(positions, {batch, len}, cache.device()).reshape(shape).expand(update.sizes()).contiguous();
  return outputs({scatterInOrder(cache, axis, idx, update, Ints(static_cast<size_t>(update.numel()), 0), "none")});
}

NodeRun oneHot(const NodeTest& n, const NodeInputs& in) {
  Tensor indices = input(n, in, 0), values = input(n, in, 2);
  const double depth_value = input(n, in, 1).item<double>();
  BP_CHECK(depth_value >= 1 && depth_value < 9.0e18, "OneHot: depth ", depth_value, " is not a positive int64");
  const auto depth = static_cast<int64_t>(depth_value);
  BP_CHECK(values.numel() == 2, "OneHot: values must hold [off, on]");
  const int64_t r = indices.dim() + 1;
  int64_t axis = n.intAttr("axis", -1);
  BP_CHECK(axis >= -r && axis < r, "OneHot: axis ", axis, " is out of range for output rank ", r);
  if (axis < 0) axis += r;
  {
    Ints out = sizesOf(indices);
    out.insert(out.begin() + axis, depth);
    checkCreation(n, out, values.dtype());
  }
  // Non-integer indices truncate; negative ones count from depth.
  Tensor idx = wrapIndices(indices, depth).unsqueeze(axis);
  Ints shape(static_cast<size_t>(r), 1);
  shape[axis] = depth;
  Tensor pos = arange(depth, {.dtype = ScalarType::Int64, .device = indices.device()}).reshape(shape);
  Tensor flat = values.reshape({2});
  return outputs({where(pos.eq(idx), flat.select(0, 1), flat.select(0, 0))});
}

// The flat row of each index tuple (the last dim of `indices`, k long) in
// data's first `batch + k` dims collapsed, negative entries wrapped.
Tensor linearIndex(const Tensor& indices, const Ints& data_sizes, int64_t batch) {
  const int64_t k = indices.size(-1);
  Tensor idx = indices.to(ScalarType::Int64);
  Tensor linear = zeros_like(idx.select(-1, 0));
  for (int64_t j = 0; j < k; ++j) {
    const int64_t dim = data_sizes[static_cast<size_t>(batch + j)];
    linear = linear * Scalar(dim) + wrapIndices(idx.select(-1, j), dim);
  }
  if (batch > 0) {
    const int64_t per_batch = product(data_sizes, static_cast<size_t>(batch), static_cast<size_t>(batch + k));
    Ints shape(data_sizes.begin(), data_sizes.begin() + batch);
    shape.resize(static_cast<size_t>(linear.dim()), 1);
    Tensor b = arange(product(data_sizes, 0, static_cast<size_t>(batch)),
                      {.dtype = ScalarType::Int64, .device = indices.device()})
                   .reshape(shape);
    linear = linear + b * Scalar(per_batch);
  }
  return linear;
}

NodeRun gatherND(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0), indices = input(n, in, 1);
  const int64_t batch = n.intAttr("batch_dims", 0);
  if (indices.dim() < 1) return unsupported("GatherND: 0-d indices");
  const int64_t k = indices.size(-1);
  if (batch < 0 || batch + k > data.dim() || batch >= indices.dim()) {
    return unsupported("GatherND: batch_dims and the index length do not fit the data");
  }
  const Ints ds = sizesOf(data), is = sizesOf(indices);
  Ints flat{product(ds, 0, static_cast<size_t>(batch + k))};
  flat.insert(flat.end(), ds.begin() + batch + k, ds.end());
  Tensor linear = linearIndex(indices, ds, batch);
  Ints out(is.begin(), is.end() - 1);
  out.insert(out.end(), ds.begin() + batch + k, ds.end());
  return outputs({data.reshape(flat).index_select(0, linear.reshape({linear.numel()})).reshape(out)});
}

NodeRun scatterND(const NodeTest& n, const NodeInputs& in) {
  Tensor data = input(n, in, 0), indices = input(n, in, 1), updates = input(n, in, 2);
  const std::string reduction = n.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min") {
    return unsupported("ScatterND: unknown reduction '" + reduction + "'");
  }
  if (indices.dim() < 1 || indices.size(-1) > data.dim()) return unsupported("ScatterND: index tuples too long");
  const int64_t k = indices.size(-1);
  const Ints ds = sizesOf(data);
  Ints flat{product(ds, 0, static_cast<size_t>(k))};
  flat.insert(flat.end(), ds.begin() + k, ds.end());
  Tensor linear = linearIndex(indices, ds, 0);
  const int64_t m = linear.numel();
  Ints upd_shape{m};
  upd_shape.insert(upd_shape.end(), ds.begin() + k, ds.end());
  Ints idx_shape(upd_shape.size(), 1);
  idx_shape[0] = m;
  Tensor idx = linear.reshape(idx_shape).expand(upd_shape).contiguous();
  Tensor d = data.reshape(flat), u = updates.reshape(upd_shape);
  if (reduction == "add") return outputs({callOp("scatter_add", {d, int64_t{0}, idx, u}).reshape(ds)});
  // In order, tuple by tuple: each element of a tuple's slice is in its group.
  const Ints tuple_group = occurrenceNumbers(intsOf(linear));
  const int64_t per_tuple = m == 0 ? 0 : u.numel() / m;
  Ints group(static_cast<size_t>(u.numel()));
  for (size_t e = 0; e < group.size(); ++e) group[e] = tuple_group[e / static_cast<size_t>(per_tuple)];
  return outputs({scatterInOrder(d, 0, idx, u, group, reduction).reshape(ds)});
}

NodeRun compress(const NodeTest& n, const NodeInputs& in) {
  Tensor x = input(n, in, 0);
  const std::vector<int64_t> cond = intsOf(input(n, in, 1));
  int64_t axis = 0;
  if (n.has("axis")) {
    axis = normAxis(n, n.intAttr("axis", 0), x.dim());
  } else {
    x = x.reshape({x.numel()});
  }
  Ints keep;
  for (size_t i = 0; i < cond.size() && static_cast<int64_t>(i) < x.size(axis); ++i) {
    if (cond[i] != 0) keep.push_back(static_cast<int64_t>(i));
  }
  return outputs({x.index_select(axis, int64Tensor(keep, {static_cast<int64_t>(keep.size())}, x.device()))});
}

}  // namespace

void registerIndexingNodes() {
  registerNode("Gather", [](const NodeTest& n, const NodeInputs& in, Device) { return gatherNode(n, in); });
  registerNode("GatherElements", [](const NodeTest& n, const NodeInputs& in, Device) { return gatherElements(n, in); });
  registerNode("ScatterElements",
               [](const NodeTest& n, const NodeInputs& in, Device) { return scatterElements(n, in); });
  registerNode("Scatter", [](const NodeTest& n, const NodeInputs& in, Device) { return scatterElements(n, in); });
  registerNode("TensorScatter", [](const NodeTest& n, const NodeInputs& in, Device) { return tensorScatter(n, in); });
  registerNode("OneHot", [](const NodeTest& n, const NodeInputs& in, Device) { return oneHot(n, in); });
  registerNode("GatherND", [](const NodeTest& n, const NodeInputs& in, Device) { return gatherND(n, in); });
  registerNode("ScatterND", [](const NodeTest& n, const NodeInputs& in, Device) { return scatterND(n, in); });
  registerNode("Compress", [](const NodeTest& n, const NodeInputs& in, Device) { return compress(n, in); });
}

}  // namespace backplane::conformance::onnx
