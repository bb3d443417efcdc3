// The data-movement standard operators: cat, stack, index_select, gather,
// scatter_add, scatter, masked_fill and embedding. The structured ones (Note [The
// standard operator table]) have an `op.out` that plugins implement, with a
// meta kernel that runs the shape/dtype/index rule; the functional and
// in-place forms are composites over it. stack and embedding are composites
// over cat and index_select (their reshaping is metadata-only, Note [Views
// live in the core]). Index VALUES live in device memory, so the range check
// of each index is the kernel's (as in PyTorch); everything else is checked
// here, for every device.
#include <cmath>
#include <limits>

#include "backplane/ops/ops.h"
#include "families.h"
#include "structured.h"

namespace backplane::ops {

namespace {

// --- Shared checks

// For ops that do not convert (index_select, gather, scatter_add, as in
// PyTorch): `out` must have the result's dtype exactly.
void checkSameDtype(std::string_view op, const Tensor& out, ScalarType dtype, const char* out_name = "out") {
  BP_CHECK(!out.defined() || out.dtype() == dtype, op, ": argument '", out_name, "' has dtype ", out.dtype(),
           " but the result has dtype ", dtype, "; this op does not convert, pass a tensor of dtype ", dtype);
}

// The size of dimension d, with a 0-d tensor counting as shape [1] (as
// PyTorch's scatter/gather rules do).
int64_t sizeOr1(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.size(d); }
int64_t dimOr1(const Tensor& t) { return std::max<int64_t>(t.dim(), 1); }

// True if a and b have a memory location in common (bytes of one storage).
bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0 || !a.is_alias_of(b)) return false;
  auto range = [](const Tensor& t) {
    const int64_t item = static_cast<int64_t>(t.itemsize());
    int64_t first = t.storage_offset() * item, last = first;
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d) * item;
    return std::pair<int64_t, int64_t>(first, last + item);
  };
  auto [a0, a1] = range(a);
  auto [b0, b1] = range(b);
  return a0 < b1 && b0 < a1;
}

// The device of every tensor of a list; throws naming the two that differ.
Device listDevice(std::string_view op, TensorList tensors) {
  for (size_t i = 1; i < tensors.size(); ++i) {
    BP_CHECK(tensors[i].device() == tensors[0].device(), op,
             ": expected all tensors on one device, but tensor 0 is on ", tensors[0].device(), " and tensor ", i,
             " is on ", tensors[i].device(), "; move them to one device with .to() first");
  }
  return tensors[0].device();
}

// cat.out and stack.out read every input while writing `out`.
void checkOutDisjoint(std::string_view op, const Tensor& out, TensorList tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    BP_CHECK(!overlaps(tensors[i], out), op, ": argument 'out' shares memory with tensor ", i,
             " of the input list; write into a separate tensor");
  }
}

// --- cat / stack

using CatOutSig = Tensor(TensorList, int64_t, const Tensor&);

// cat skips 1-d tensors with no elements whatever the other tensors' shapes:
// PyTorch keeps this for code written when every empty tensor had shape [0].
bool catSkips(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

template <FixedString Name>
OutputMeta catMeta(TensorList tensors, int64_t dim) {
  const std::string& op = qualified<Name>();
  BP_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
  ResultTypeState dtype;
  const Tensor* ref = nullptr;  // the first tensor that is not skipped
  size_t ref_index = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    BP_CHECK(t.defined(), op, ": tensor ", i, " of the list is undefined");
    BP_CHECK(t.dim() > 0, op, ": tensor ", i, " of the list is 0-d, and 0-d tensors cannot be concatenated; ",
             "reshape it to [1] or use stack");
    dtype.add(t);
    if (!ref && !catSkips(t)) {
      ref = &t;
      ref_index = i;
    }
  }
  const Device device = listDevice(op, tensors);
  if (!ref) return OutputMeta{Shape{0}, dtype.result(), device};
  const int64_t d = wrapDim(op, dim, ref->dim());
  Shape sizes(ref->sizes().begin(), ref->sizes().end());
  sizes[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (catSkips(t)) continue;
    BP_CHECK(t.dim() == ref->dim(), op, ": tensors must have the same number of dimensions, but tensor ", ref_index,
             " has shape ", shapeString(ref->sizes()), " and tensor ", i, " has shape ", shapeString(t.sizes()));
    for (int64_t k = 0; k < t.dim(); ++k) {
      BP_CHECK(k == d || t.size(k) == ref->size(k), op, ": sizes of tensors must match except in dimension ", d,
               " (the one concatenated), but tensor ", i, " has size ", t.size(k), " in dimension ", k,
               " where tensor ", ref_index, " has ", ref->size(k), " (shapes ", shapeString(t.sizes()), " and ",
               shapeString(ref->sizes()), ")");
    }
    sizes[d] += t.size(d);
  }
  return OutputMeta{std::move(sizes), dtype.result(), device};
}

void catOutMeta(TensorList tensors, int64_t dim, const Tensor& out) {
  const std::string& op = qualified<"cat.out">();
  checkOut(op, out, catMeta<"cat.out">(tensors, dim), {});
  checkOutDisjoint(op, out, tensors);
}

Tensor catFunctional(TensorList tensors, int64_t dim) {
  Tensor out = allocate(catMeta<"cat">(tensors, dim));
  return BP_STANDARD_OP("cat.out", CatOutSig).callSkippingMeta(tensors, dim, out);
}

// stack(tensors, dim) is cat of the tensors unsqueezed at dim.
struct StackPlan {
  OutputMeta meta;
  int64_t dim;  // wrapped into [0, rank of the result)
};

template <FixedString Name>
StackPlan stackPlan(TensorList tensors, int64_t dim) {
  const std::string& op = qualified<Name>();
  BP_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
  ResultTypeState dtype;
  for (size_t i = 0; i < tensors.size(); ++i) {
    BP_CHECK(tensors[i].defined(), op, ": tensor ", i, " of the list is undefined");
    BP_CHECK(tensors[i].sizes() == tensors[0].sizes(), op, ": expected all tensors to have the same shape, but ",
             "tensor 0 has shape ", shapeString(tensors[0].sizes()), " and tensor ", i, " has shape ",
             shapeString(tensors[i].sizes()));
    dtype.add(tensors[i]);
  }
  const Device device = listDevice(op, tensors);
  const int64_t d = wrapDim(op, dim, tensors[0].dim() + 1);
  Shape sizes(tensors[0].sizes().begin(), tensors[0].sizes().end());
  sizes.insert(sizes.begin() + d, static_cast<int64_t>(tensors.size()));
  return StackPlan{OutputMeta{std::move(sizes), dtype.result(), device}, d};
}

Tensor stackInto(TensorList tensors, int64_t dim, const Tensor& out) {
  std::vector<Tensor> views;
  views.reserve(tensors.size());
  for (const Tensor& t : tensors) views.push_back(t.unsqueeze(dim));
  return BP_STANDARD_OP("cat.out", CatOutSig).callSkippingMeta(TensorList(views), dim, out);
}

void stackOutMeta(TensorList tensors, int64_t dim, const Tensor& out) {
  const std::string& op = qualified<"stack.out">();
  checkOut(op, out, stackPlan<"stack.out">(tensors, dim).meta, {});
  checkOutDisjoint(op, out, tensors);
}

Tensor stackOut(TensorList tensors, int64_t dim, const Tensor& out) {
  // The meta kernel has checked the arguments and sized `out`.
  return stackInto(tensors, stackPlan<"stack.out">(tensors, dim).dim, out);
}

Tensor stackFunctional(TensorList tensors, int64_t dim) {
  StackPlan plan = stackPlan<"stack">(tensors, dim);
  return stackInto(tensors, plan.dim, allocate(plan.meta));
}

// --- index_select

using IndexSelectOutSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&);

template <FixedString Name>
OutputMeta indexSelectMeta(const Tensor& self, int64_t dim, const Tensor& index) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, index, "index");
  const Device device = commonDevice(op, {{"self", &self}, {"index", &index}});
  checkDtypes(op, standardOp<Name>(), {{"index", &index}});
  BP_CHECK(index.dim() <= 1, op, ": argument 'index' must be 1-d or 0-d, but has shape ", shapeString(index.sizes()),
           "; flatten it with reshape(-1)");
  const int64_t d = wrapDim(op, dim, self.dim());
  Shape sizes(self.sizes().begin(), self.sizes().end());
  if (self.dim() == 0) {
    BP_CHECK(index.numel() == 1, op, ": selecting from a 0-d tensor takes exactly one index (0), but 'index' has ",
             index.numel(), " elements");
  } else {
    sizes[d] = index.numel();
  }
  return OutputMeta{std::move(sizes), self.dtype(), device};
}

void indexSelectOutMeta(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out) {
  const std::string& op = qualified<"index_select.out">();
  OutputMeta m = indexSelectMeta<"index_select.out">(self, dim, index);
  checkSameDtype(op, out, m.dtype);
  checkOut(op, out, m, {{"self", &self}, {"index", &index}});
}

Tensor indexSelectFunctional(const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor out = allocate(indexSelectMeta<"index_select">(self, dim, index));
  return BP_STANDARD_OP("index_select.out", IndexSelectOutSig).callSkippingMeta(self, dim, index, out);
}

// --- gather

using GatherOutSig = Tensor(const Tensor&, int64_t, const Tensor&, bool, const Tensor&);

template <FixedString Name>
OutputMeta gatherMeta(const Tensor& self, int64_t dim, const Tensor& index) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, index, "index");
  const Device device = commonDevice(op, {{"self", &self}, {"index", &index}});
  checkDtypes(op, standardOp<Name>(), {{"index", &index}});
  const int64_t d = wrapDim(op, dim, self.dim());
  BP_CHECK(dimOr1(index) == dimOr1(self), op, ": argument 'index' must have as many dimensions as 'self' (", self.dim(),
           "), but has shape ", shapeString(index.sizes()));
  if (index.numel() != 0) {
    for (int64_t k = 0; k < index.dim() && k < self.dim(); ++k) {
      BP_CHECK(k == d || index.size(k) <= self.size(k), op, ": 'index' has size ", index.size(k), " in dimension ", k,
               " but 'self' only ", self.size(k), "; except in dimension ", d,
               " (the one gathered along) index may not be larger than self (shapes ", shapeString(index.sizes()),
               " and ", shapeString(self.sizes()), ")");
    }
  }
  return OutputMeta{Shape(index.sizes().begin(), index.sizes().end()), self.dtype(), device};
}

void gatherOutMeta(const Tensor& self, int64_t dim, const Tensor& index, bool, const Tensor& out) {
  const std::string& op = qualified<"gather.out">();
  OutputMeta m = gatherMeta<"gather.out">(self, dim, index);
  checkSameDtype(op, out, m.dtype);
  checkOut(op, out, m, {{"self", &self}, {"index", &index}});
}

Tensor gatherFunctional(const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad) {
  Tensor out = allocate(gatherMeta<"gather">(self, dim, index));
  return BP_STANDARD_OP("gather.out", GatherOutSig).callSkippingMeta(self, dim, index, sparse_grad, out);
}

// --- scatter_add

using ScatterAddOutSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&, const Tensor&);
using ScatterSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&);

template <FixedString Name>
OutputMeta scatterAddMeta(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, index, "index");
  checkDefined(op, src, "src");
  const Device device = commonDevice(op, {{"self", &self}, {"index", &index}, {"src", &src}});
  checkDtypes(op, standardOp<Name>(), {{"index", &index}});
  BP_CHECK(src.dtype() == self.dtype(), op, ": 'src' has dtype ", src.dtype(), " but 'self' has dtype ", self.dtype(),
           "; they must match: convert src with .to(", self.dtype(), ")");
  const int64_t d = wrapDim(op, dim, self.dim());
  BP_CHECK(dimOr1(index) == dimOr1(self), op, ": argument 'index' must have as many dimensions as 'self' (", self.dim(),
           "), but has shape ", shapeString(index.sizes()));
  BP_CHECK(dimOr1(src) == dimOr1(self), op, ": argument 'src' must have as many dimensions as 'self' (", self.dim(),
           "), but has shape ", shapeString(src.sizes()));
  if (index.numel() != 0) {
    for (int64_t k = 0; k < dimOr1(index); ++k) {
      BP_CHECK(sizeOr1(index, k) <= sizeOr1(src, k), op, ": 'index' has size ", sizeOr1(index, k), " in dimension ", k,
               " but 'src' only ", sizeOr1(src, k), "; index may not be larger than src (shapes ",
               shapeString(index.sizes()), " and ", shapeString(src.sizes()), ")");
      BP_CHECK(k == d || sizeOr1(index, k) <= sizeOr1(self, k), op, ": 'index' has size ", sizeOr1(index, k),
               " in dimension ", k, " but 'self' only ", sizeOr1(self, k), "; except in dimension ", d,
               " (the one scattered along) index may not be larger than self (shapes ", shapeString(index.sizes()),
               " and ", shapeString(self.sizes()), ")");
    }
  }
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), self.dtype(), device};
}

void scatterAddOutMeta(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const Tensor& out) {
  const std::string& op = qualified<"scatter_add.out">();
  OutputMeta m = scatterAddMeta<"scatter_add.out">(self, dim, index, src);
  checkSameDtype(op, out, m.dtype);
  checkOut(op, out, m, {{"self", &self}, {"index", &index}, {"src", &src}});
}

Tensor scatterAddFunctional(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = allocate(scatterAddMeta<"scatter_add">(self, dim, index, src));
  return BP_STANDARD_OP("scatter_add.out", ScatterAddOutSig).callSkippingMeta(self, dim, index, src, out);
}

Tensor scatterAddInplace(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const std::string& op = qualified<"scatter_add_">();
  checkOut(op, self, scatterAddMeta<"scatter_add_">(self, dim, index, src), {{"index", &index}, {"src", &src}}, "self");
  return BP_STANDARD_OP("scatter_add.out", ScatterAddOutSig).callSkippingMeta(self, dim, index, src, self);
}

// --- scatter: out = self; out[p with p[dim] = index[p]] = src[p] (or value).
// scatter_add's rule; where two elements of index name one place, which one
// lands there is unspecified on a GPU (as in PyTorch), the last along dim on
// the CPU. The .value forms fill a tensor of index's shape and scatter it.

void scatterOutMeta(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const Tensor& out) {
  const std::string& op = qualified<"scatter.src_out">();
  OutputMeta m = scatterAddMeta<"scatter.src_out">(self, dim, index, src);
  checkSameDtype(op, out, m.dtype);
  checkOut(op, out, m, {{"self", &self}, {"index", &index}, {"src", &src}});
}

Tensor scatterFunctional(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = allocate(scatterAddMeta<"scatter.src">(self, dim, index, src));
  return BP_STANDARD_OP("scatter.src_out", ScatterAddOutSig).callSkippingMeta(self, dim, index, src, out);
}

Tensor scatterInplace(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const std::string& op = qualified<"scatter_.src">();
  checkOut(op, self, scatterAddMeta<"scatter_.src">(self, dim, index, src), {{"index", &index}, {"src", &src}}, "self");
  return BP_STANDARD_OP("scatter.src_out", ScatterAddOutSig).callSkippingMeta(self, dim, index, src, self);
}

template <FixedString Name>
Tensor scatterValueSource(const Tensor& self, const Tensor& index, const Scalar& value) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, index, "index");
  checkScalarConverts(op, "value", value, self.dtype());
  return full(index.sizes(), value, {.dtype = self.dtype(), .device = self.device()});
}

Tensor scatterValue(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return BP_STANDARD_OP("scatter.src", ScatterSig)
      .call(self, dim, index, scatterValueSource<"scatter.value">(self, index, value));
}

Tensor scatterValueInplace(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return BP_STANDARD_OP("scatter_.src", ScatterSig)
      .call(self, dim, index, scatterValueSource<"scatter_.value">(self, index, value));
}

// --- masked_fill: out = mask ? value : self, with self and mask broadcast.

using MaskedFillScalarOutSig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);
using MaskedFillTensorOutSig = Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&);

template <FixedString Name>
OutputMeta maskedFillMeta(const Tensor& self, const Tensor& mask) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, mask, "mask");
  const Device device = commonDevice(op, {{"self", &self}, {"mask", &mask}});
  checkDtypes(op, standardOp<Name>(), {{"mask", &mask}});
  return OutputMeta{broadcastShapes(op, self.sizes(), mask.sizes()), self.dtype(), device};
}

// A tensor value must be 0-d, on self's device or a cpu scalar (as PyTorch).
void checkValueTensor(std::string_view op, const Tensor& value, Device device) {
  checkDefined(op, value, "value");
  BP_CHECK(value.dim() == 0, op, ": argument 'value' must be a 0-d tensor, but has shape ", shapeString(value.sizes()),
           "; pass a Scalar or a tensor of one element reshaped to []");
  BP_CHECK(value.device() == device || value.device().isCpu(), op, ": argument 'value' is on ", value.device(),
           " but 'self' is on ", device, "; move it to ", device, " or to the cpu");
}

// In place the result must keep self's shape: mask broadcasts to it.
void checkMaskInplace(std::string_view op, const Tensor& self, const OutputMeta& m) {
  BP_CHECK(IntArrayRef(m.sizes.data(), m.sizes.size()) == self.sizes(), op, ": the mask does not broadcast to ",
           "self's shape ", shapeString(self.sizes()), " (self and mask broadcast to ",
           shapeString(IntArrayRef(m.sizes.data(), m.sizes.size())), "); in place, the mask's shape must ",
           "broadcast to self's");
}

void maskedFillScalarOutMeta(const Tensor& self, const Tensor& mask, const Scalar& value, const Tensor& out) {
  const std::string& op = qualified<"masked_fill.Scalar_out">();
  OutputMeta m = maskedFillMeta<"masked_fill.Scalar_out">(self, mask);
  checkScalarConverts(op, "value", value, self.dtype());
  checkOut(op, out, m, {{"self", &self}, {"mask", &mask}});
}

void maskedFillTensorOutMeta(const Tensor& self, const Tensor& mask, const Tensor& value, const Tensor& out) {
  const std::string& op = qualified<"masked_fill.Tensor_out">();
  OutputMeta m = maskedFillMeta<"masked_fill.Tensor_out">(self, mask);
  checkValueTensor(op, value, m.device);
  checkOut(op, out, m, {{"self", &self}, {"mask", &mask}, {"value", &value}});
}

Tensor maskedFillScalar(const Tensor& self, const Tensor& mask, const Scalar& value) {
  OutputMeta m = maskedFillMeta<"masked_fill.Scalar">(self, mask);
  checkScalarConverts(qualified<"masked_fill.Scalar">(), "value", value, self.dtype());
  Tensor out = allocate(m);
  return BP_STANDARD_OP("masked_fill.Scalar_out", MaskedFillScalarOutSig).callSkippingMeta(self, mask, value, out);
}

Tensor maskedFillScalarInplace(const Tensor& self, const Tensor& mask, const Scalar& value) {
  const std::string& op = qualified<"masked_fill_.Scalar">();
  OutputMeta m = maskedFillMeta<"masked_fill_.Scalar">(self, mask);
  checkMaskInplace(op, self, m);
  checkScalarConverts(op, "value", value, self.dtype());
  checkOut(op, self, m, {{"mask", &mask}}, "self");
  return BP_STANDARD_OP("masked_fill.Scalar_out", MaskedFillScalarOutSig).callSkippingMeta(self, mask, value, self);
}

Tensor maskedFillTensor(const Tensor& self, const Tensor& mask, const Tensor& value) {
  OutputMeta m = maskedFillMeta<"masked_fill.Tensor">(self, mask);
  checkValueTensor(qualified<"masked_fill.Tensor">(), value, m.device);
  Tensor out = allocate(m);
  return BP_STANDARD_OP("masked_fill.Tensor_out", MaskedFillTensorOutSig).callSkippingMeta(self, mask, value, out);
}

Tensor maskedFillTensorInplace(const Tensor& self, const Tensor& mask, const Tensor& value) {
  const std::string& op = qualified<"masked_fill_.Tensor">();
  OutputMeta m = maskedFillMeta<"masked_fill_.Tensor">(self, mask);
  checkMaskInplace(op, self, m);
  checkValueTensor(op, value, m.device);
  checkOut(op, self, m, {{"mask", &mask}, {"value", &value}}, "self");
  return BP_STANDARD_OP("masked_fill.Tensor_out", MaskedFillTensorOutSig).callSkippingMeta(self, mask, value, self);
}

// --- embedding: rows of `weight` picked by `indices`, i.e.
// index_select(weight, 0, indices.flatten()) viewed as indices.shape + [dim].
// padding_idx, scale_grad_by_freq and sparse only change the gradient.

void embeddingMeta(const Tensor& weight, const Tensor& indices, int64_t, bool, bool) {
  const std::string& op = qualified<"embedding">();
  checkDefined(op, weight, "weight");
  checkDefined(op, indices, "indices");
  commonDevice(op, {{"weight", &weight}, {"indices", &indices}});
  BP_CHECK(weight.dim() == 2, op, ": argument 'weight' must be 2-d [num_embeddings, embedding_dim], but has shape ",
           shapeString(weight.sizes()));
  checkDtypes(op, standardOp<"embedding">(), {{"indices", &indices}});
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t, bool, bool) {
  // The meta kernel has checked the arguments.
  Tensor rows = BP_STANDARD_OP("index_select", Tensor(const Tensor&, int64_t, const Tensor&))
                    .call(weight, 0, indices.reshape({int64_t{-1}}));
  Shape sizes(indices.sizes().begin(), indices.sizes().end());
  sizes.push_back(weight.size(1));
  return rows.view(sizes);
}

// --- flip, pad (Note [Flip and pad])
//
// Note [Flip and pad]
// As PyTorch: flip reverses the listed dims (wrapped, each at most once).
// pad(self, pad, mode, value) is torch.nn.functional.pad: `pad` holds
// (before, after) pairs for the last dims, the last dim first, and the mode
// picks one of PyTorch's ops, which are standard ops too:
//   * constant: constant_pad_nd, any number of dims; negative pads crop;
//     `value` must fit the dtype (as fill_).
//   * reflect: reflection_pad{1,2,3}d, mirror without repeating the edge;
//     each pad must be smaller than its dim.
//   * replicate: replication_pad{1,2,3}d, the edge element repeated.
// Reflect and replicate pad the last 1, 2 or 3 dims of an input with one
// leading batch dim or none (2-3, 3-4 or 4-5 dims), take no bool input and
// no value. PyTorch's 'circular' mode is not provided. The out= forms of
// these ops do not convert: `out` has self's dtype.

using FlipOutSig = Tensor(const Tensor&, IntArrayRef, const Tensor&);

template <FixedString Name>
OutputMeta flipMeta(const Tensor& self, IntArrayRef dims) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  absl::InlinedVector<bool, 6> seen(static_cast<size_t>(std::max<int64_t>(self.dim(), 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrapDim(op, d, self.dim());
    BP_CHECK(!seen[static_cast<size_t>(w)], op, ": dimension ", w, " appears more than once in dims ",
             shapeString(dims), "; name each dimension once");
    seen[static_cast<size_t>(w)] = true;
  }
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), self.dtype(), self.device()};
}

void flipOutMeta(const Tensor& self, IntArrayRef dims, const Tensor& out) {
  const std::string& op = qualified<"flip.out">();
  OutputMeta m = flipMeta<"flip.out">(self, dims);
  checkDefined(op, out, "out");
  checkSameDtype(op, out, m.dtype);
  checkOut(op, out, m, {});
  BP_CHECK(!overlaps(self, out), op, ": argument 'out' shares memory with 'self'; flip into a separate tensor");
}

Tensor flipFunctional(const Tensor& self, IntArrayRef dims) {
  Tensor out = allocate(flipMeta<"flip">(self, dims));
  return BP_STANDARD_OP("flip.out", FlipOutSig).callSkippingMeta(self, dims, out);
}

// constant_pad_nd: the padded shape; throws for a bad pad list.
template <FixedString Name>
OutputMeta constantPadMeta(const Tensor& self, IntArrayRef pad, const Scalar& value) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  const int64_t nd = self.dim();
  BP_CHECK(pad.size() % 2 == 0, op, ": the pad list ", shapeString(pad), " has odd length ", pad.size(),
           "; pass a (before, after) pair per padded dimension");
  BP_CHECK(static_cast<int64_t>(pad.size()) <= 2 * nd, op, ": the pad list ", shapeString(pad), " pads ",
           pad.size() / 2, " dimensions but the input has only ", nd, "; pass at most ", 2 * nd, " values");
  Shape sizes(self.sizes().begin(), self.sizes().end());
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const size_t d = static_cast<size_t>(nd) - 1 - i;
    const int64_t n = sizes[d] + pad[2 * i] + pad[2 * i + 1];
    BP_CHECK(n >= 0, op, ": dimension ", d, " of size ", sizes[d], " padded by ", pad[2 * i], " and ", pad[2 * i + 1],
             " would have negative size ", n, "; crop less");
    sizes[d] = n;
  }
  checkScalarConverts(op, "the padding value", value, self.dtype());
  return OutputMeta{std::move(sizes), self.dtype(), self.device()};
}

using ConstantPadOutSig = Tensor(const Tensor&, IntArrayRef, const Scalar&, const Tensor&);

void constantPadOutMeta(const Tensor& self, IntArrayRef pad, const Scalar& value, const Tensor& out) {
  const std::string& op = qualified<"constant_pad_nd.out">();
  OutputMeta m = constantPadMeta<"constant_pad_nd.out">(self, pad, value);
  checkDefined(op, out, "out");
  checkSameDtype(op, out, m.dtype);
  checkOut(op, out, m, {});
  BP_CHECK(!overlaps(self, out), op, ": argument 'out' shares memory with 'self'; pad into a separate tensor");
}

Tensor constantPadFunctional(const Tensor& self, IntArrayRef pad, const Scalar& value) {
  Tensor out = allocate(constantPadMeta<"constant_pad_nd">(self, pad, value));
  return BP_STANDARD_OP("constant_pad_nd.out", ConstantPadOutSig).callSkippingMeta(self, pad, value, out);
}

// reflection_pad{N}d / replication_pad{N}d over the last N dims.
template <FixedString Name, int N, bool Reflect>
OutputMeta edgePadMeta(const Tensor& self, IntArrayRef padding) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDtypes(op, standardOp<Name>(), {{"self", &self}});
  BP_CHECK(static_cast<int>(padding.size()) == 2 * N, op, ": expected ", 2 * N, " padding values (before and after ",
           "for each of the last ", N, " dims), got ", padding.size());
  const int64_t nd = self.dim();
  BP_CHECK(nd == N + 1 || nd == N + 2, op, ": expected a ", N + 1, "-d input or a ", N + 2,
           "-d batch of them, got shape ", shapeString(self.sizes()));
  for (int64_t d = nd - N - 1 + (nd == N + 2 ? 1 : 0); d < nd; ++d) {
    BP_CHECK(self.size(d) != 0, op, ": dimension ", d, " of the input of shape ", shapeString(self.sizes()),
             " is empty; only the batch dimension may have size 0");
  }
  Shape sizes(self.sizes().begin(), self.sizes().end());
  for (int i = 0; i < N; ++i) {
    const size_t d = static_cast<size_t>(nd - 1 - i);
    const int64_t before = padding[static_cast<size_t>(2 * i)], after = padding[static_cast<size_t>(2 * i + 1)];
    if (Reflect) {
      BP_CHECK(before < sizes[d] && after < sizes[d], op, ": padding (", before, ", ", after, ") of dimension ", d,
               " must be smaller than its size ", sizes[d], " (input shape ", shapeString(self.sizes()),
               "); reflection cannot reach further, use mode 'replicate' or 'constant'");
    }
    const int64_t n = sizes[d] + before + after;
    BP_CHECK(n >= 1, op, ": dimension ", d, " of size ", sizes[d], " padded by ", before, " and ", after,
             " would have size ", n, "; the result needs at least 1");
    sizes[d] = n;
  }
  return OutputMeta{std::move(sizes), self.dtype(), self.device()};
}

using EdgePadOutSig = Tensor(const Tensor&, IntArrayRef, const Tensor&);

template <FixedString Name, int N, bool Reflect>
void edgePadOutMeta(const Tensor& self, IntArrayRef padding, const Tensor& out) {
  const std::string& op = qualified<Name>();
  OutputMeta m = edgePadMeta<Name, N, Reflect>(self, padding);
  checkDefined(op, out, "out");
  checkSameDtype(op, out, m.dtype);
  checkOut(op, out, m, {});
  BP_CHECK(!overlaps(self, out), op, ": argument 'out' shares memory with 'self'; pad into a separate tensor");
}

template <FixedString Name, FixedString OutName, int N, bool Reflect>
Tensor edgePadFunctional(const Tensor& self, IntArrayRef padding) {
  Tensor out = allocate(edgePadMeta<Name, N, Reflect>(self, padding));
  return BP_STANDARD_OP(OutName.c_str(), EdgePadOutSig).callSkippingMeta(self, padding, out);
}

// torch.nn.functional.pad.
Tensor padFunctional(const Tensor& self, IntArrayRef pad, std::string_view mode, std::optional<double> value) {
  const std::string& op = qualified<"pad">();
  checkDefined(op, self, "self");
  const bool reflect = mode == "reflect", replicate = mode == "replicate";
  BP_CHECK(mode == "constant" || reflect || replicate, op, ": unknown padding mode '", mode,
           "'; pass 'constant', 'reflect' or 'replicate' ('circular' is not provided)");
  BP_CHECK(pad.size() % 2 == 0, op, ": the pad list ", shapeString(pad), " has odd length ", pad.size(),
           "; pass a (before, after) pair per padded dimension");
  BP_CHECK(static_cast<int64_t>(pad.size()) <= 2 * self.dim(), op, ": the pad list ", shapeString(pad), " pads ",
           pad.size() / 2, " dimensions but the input has only ", self.dim(), "; pass at most ", 2 * self.dim(),
           " values");
  if (!reflect && !replicate) {
    return BP_STANDARD_OP("constant_pad_nd", Tensor(const Tensor&, IntArrayRef, const Scalar&))
        .call(self, pad, Scalar(value.value_or(0.0)));
  }
  BP_CHECK(!value || *value == 0, op, ": padding mode '", mode, "' takes no value (got ", *value,
           "); pass value=None or use mode 'constant'");
  const int64_t n = static_cast<int64_t>(pad.size()) / 2, nd = self.dim();
  BP_CHECK(n >= 1 && n <= 3 && (nd == n + 1 || nd == n + 2), op, ": mode '", mode, "' pads the last 1, 2 or 3 ",
           "dims of an input with at most one more leading (batch) dim than a sample has, but got ", pad.size(),
           " pad values for an input of shape ", shapeString(self.sizes()),
           "; pad 1 dim of a 2-3d, 2 dims of a 3-4d or 3 dims of a 4-5d input");
  static const char* const kReflect[] = {"reflection_pad1d", "reflection_pad2d", "reflection_pad3d"};
  static const char* const kReplicate[] = {"replication_pad1d", "replication_pad2d", "replication_pad3d"};
  const char* name = (reflect ? kReflect : kReplicate)[n - 1];
  return Dispatcher::singleton()
      .findOpOrThrow(strCat(kStandardNamespace, "::", name))
      .typed<Tensor(const Tensor&, IntArrayRef)>()
      .call(self, pad);
}

void addFlipAndPadOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "data_movement"});
  };
  using K = KernelFunction;
  add("flip(Tensor self, int[] dims) -> Tensor", {}, K::makeFromFunction(BP_FN(flipFunctional)));
  add("flip.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!)", K::makeFromFunction(BP_FN(flipOutMeta)));
  add("pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor", {},
      K::makeFromFunction(BP_FN(padFunctional)));
  add("constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor", {},
      K::makeFromFunction(BP_FN(constantPadFunctional)));
  add("constant_pad_nd.out(Tensor self, SymInt[] pad, Scalar value=0, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(constantPadOutMeta)));
  const size_t first_edge = ops.size();
#define BP_EDGE_PAD(NAME, N, REFLECT)                                                      \
  add(NAME "(Tensor self, SymInt[" #N "] padding) -> Tensor", {},                          \
      K::makeFromFunction(BP_FN((edgePadFunctional<NAME, NAME ".out", N / 2, REFLECT>)))); \
  add(NAME ".out(Tensor self, SymInt[" #N "] padding, *, Tensor(a!) out) -> Tensor(a!)",   \
      K::makeFromFunction(BP_FN((edgePadOutMeta<NAME ".out", N / 2, REFLECT>))))
  BP_EDGE_PAD("reflection_pad1d", 2, true);
  BP_EDGE_PAD("reflection_pad2d", 4, true);
  BP_EDGE_PAD("reflection_pad3d", 6, true);
  BP_EDGE_PAD("replication_pad1d", 2, false);
  BP_EDGE_PAD("replication_pad2d", 4, false);
  BP_EDGE_PAD("replication_pad3d", 6, false);
#undef BP_EDGE_PAD
  for (size_t i = first_edge; i < ops.size(); ++i) ops[i].dtypes = {{"self", ScalarTypeSet::allBut(ScalarType::Bool)}};
}

}  // namespace

void addDataMovementOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction meta = {}, KernelFunction composite = {}) {
    ops.push_back(StandardOp{std::move(schema), std::move(meta), std::move(composite), "data_movement"});
  };
  // Gives the entries added since `first` (the forms of one op) its dtype
  // rule (Note [Dtype rules live in metas]).
  auto declare = [&](size_t first, const std::vector<ArgumentDtypes>& dtypes) {
    for (size_t i = first; i < ops.size(); ++i) ops[i].dtypes = dtypes;
  };
  constexpr ScalarTypeSet kIndex = {ScalarType::Int64};
  constexpr ScalarTypeSet kIndexOrInt32 = {ScalarType::Int32, ScalarType::Int64};
  constexpr ScalarTypeSet kMask = {ScalarType::Bool};
  add("cat(Tensor[] tensors, int dim=0) -> Tensor", {}, KernelFunction::makeFromFunction(BP_FN(catFunctional)));
  add("cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(catOutMeta)));
  add("stack(Tensor[] tensors, int dim=0) -> Tensor", {}, KernelFunction::makeFromFunction(BP_FN(stackFunctional)));
  add("stack.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(stackOutMeta)), KernelFunction::makeFromFunction(BP_FN(stackOut)));

  add("index_select(Tensor self, int dim, Tensor index) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(indexSelectFunctional)));
  add("index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(indexSelectOutMeta)));
  declare(ops.size() - 2, {{"index", kIndexOrInt32}});
  add("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(gatherFunctional)));
  add("gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(gatherOutMeta)));
  declare(ops.size() - 2, {{"index", kIndex}});
  add("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(scatterAddFunctional)));
  add("scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN(scatterAddInplace)));
  add("scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(scatterAddOutMeta)));
  declare(ops.size() - 3, {{"index", kIndex}});
  add("scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(scatterFunctional)));
  add("scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN(scatterInplace)));
  add("scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(scatterOutMeta)));
  add("scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(scatterValue)));
  add("scatter_.value(Tensor(a!) self, int dim, Tensor index, Scalar value) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN(scatterValueInplace)));
  declare(ops.size() - 5, {{"index", kIndex}});

  add("masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(maskedFillScalar)));
  add("masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN(maskedFillScalarInplace)));
  add("masked_fill.Scalar_out(Tensor self, Tensor mask, Scalar value, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(maskedFillScalarOutMeta)));
  add("masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor", {},
      KernelFunction::makeFromFunction(BP_FN(maskedFillTensor)));
  add("masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)", {},
      KernelFunction::makeFromFunction(BP_FN(maskedFillTensorInplace)));
  add("masked_fill.Tensor_out(Tensor self, Tensor mask, Tensor value, *, Tensor(a!) out) -> Tensor(a!)",
      KernelFunction::makeFromFunction(BP_FN(maskedFillTensorOutMeta)));
  declare(ops.size() - 6, {{"mask", kMask, "make one with a comparison (mask != 0), "}});

  add("embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, "
      "bool sparse=False) -> Tensor",
      KernelFunction::makeFromFunction(BP_FN(embeddingMeta)), KernelFunction::makeFromFunction(BP_FN(embedding)));
  declare(ops.size() - 1, {{"indices", kIndexOrInt32}});

  addFlipAndPadOps(ops);
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  ops.push_back(
      derivedOut("scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out) -> Tensor(a!)",
                 "scatter.value"));
  ops.push_back(
      derivedOut("embedding.out(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, bool "
                 "sparse=False, *, Tensor(a!) out) -> Tensor(a!)",
                 "embedding"));
}

}  // namespace backplane::ops
