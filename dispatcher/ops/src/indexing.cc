// Advanced indexing and the ops written over index ops (Note [Advanced
// indexing]): index.Tensor (x[idx], x[mask]), index_put_ (x[idx] = v),
// nonzero, masked_select, index_add, _unique2 (torch.unique), and the
// rearrangements tril/triu, roll, repeat and repeat_interleave. All are
// composites over standard ops with kernels on every device (index_select,
// scatter, scatter_add, cumsum, sort, masked_fill, cat), so each device runs
// them natively or by its usual fallback, and autograd differentiates them
// through their parts; a plugin's own kernel for one of them still wins.
#include <algorithm>

#include "backplane/ops/ops.h"
#include "families.h"
#include "structured.h"

namespace backplane::ops {

namespace {

// Note [Advanced indexing]
// PyTorch's rule: `indices` holds, per leading dim of self, either nothing
// (the whole dim) or a tensor. An integer tensor (int64 or int32) indexes
// one dim; a bool (or uint8) tensor of k dims indexes the next k, whose
// sizes it must have, and stands for its nonzero() coordinates. The index
// tensors broadcast to one shape B. The result has B in place of the
// indexed dims when those are adjacent, else B first and then the other
// dims. Negative indices count from the end; one out of range is an error
// naming the dim, the index and the size, raised before anything is written.
//
// Every form reduces to one dimension: self's indexed dims (permuted to the
// front) flattened into one, the index tensors into one linear position
// each, and then index_select (reading) or scatter_/scatter_add_ (writing)
// along dim 0. The range check and the bool masks read one value each back
// to the host (as PyTorch's do: a mask's nonzero count decides the result's
// shape).

using OptionalTensorList = ArrayRef<std::optional<Tensor>>;
using ScatterSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&);

// The result of an op whose result is shaped like self.
OutputMeta likeSelf(const Tensor& self) {
  return OutputMeta{Shape(self.sizes().begin(), self.sizes().end()), self.dtype(), self.device()};
}

// The linear positions (int64, 1-d) of the true elements of a 1-d bool
// tensor, in order: each true element's running count is its rank, and it
// scatters its position there; the false ones all write one extra slot,
// which is dropped. One host read: the count.
Tensor truePositions(const Tensor& mask) {
  const int64_t n = mask.numel();
  const Device device = mask.device();
  if (n == 0) return empty({0}, {.dtype = ScalarType::Int64, .device = device});
  const Tensor ranks = mask.cumsum(0, ScalarType::Int64);
  const int64_t count = ranks.select(0, n - 1).cpu().item<int64_t>();
  const Tensor target = (ranks - 1).masked_fill(mask.logical_not(), Scalar(count));
  Tensor slots = empty({count + 1}, {.dtype = ScalarType::Int64, .device = device});
  BP_STANDARD_OP("scatter_.src", ScatterSig)
      .call(slots, 0, target, arange(Scalar(n), {.dtype = ScalarType::Int64, .device = device}));
  return slots.narrow(0, 0, count);
}

// The coordinates ([count, ndim] int64) of linear positions in `sizes`.
Tensor coordinates(const Tensor& positions, IntArrayRef sizes) {
  std::vector<Tensor> columns;
  int64_t stride = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    Tensor c = sizes[k] == 0 ? positions
                             : positions.floor_divide(full({}, Scalar(stride),
                                                           {.dtype = ScalarType::Int64, .device = positions.device()}));
    columns.push_back(c.remainder(
        full({}, Scalar(std::max<int64_t>(sizes[k], 1)), {.dtype = ScalarType::Int64, .device = positions.device()})));
    stride *= sizes[k];
  }
  std::reverse(columns.begin(), columns.end());
  if (columns.empty()) return empty({positions.numel(), 0}, {.dtype = ScalarType::Int64, .device = positions.device()});
  return stack(columns, 1);
}

Tensor asMask(const Tensor& t) { return t.dtype() == ScalarType::Bool ? t : t.ne(0); }

// --- nonzero, masked_select

// nonzero is structured: nonzero.out is the kernel (by default the
// coordinates computed and copied into `out`, which is resized to
// [count, self.dim()]: its size depends on the values), the functional form
// calls it with an empty out.
void nonzeroOutMeta(const Tensor& self, const Tensor& out) {
  const std::string& op = qualified<"nonzero.out">();
  checkDefined(op, self, "self");
  const OutputMeta m{Shape{}, ScalarType::Int64, self.device()};
  checkOutDtype(op, out, m);
  BP_CHECK(out.device() == self.device(), op, ": argument 'out' is on ", out.device(), " but self is on ",
           self.device(), "; pass a tensor on that device");
}

Tensor nonzeroOut(const Tensor& self, const Tensor& out) {
  const Tensor coords = coordinates(truePositions(asMask(self).reshape({-1})), self.sizes());
  checkOut(qualified<"nonzero.out">(), out,
           OutputMeta{Shape(coords.sizes().begin(), coords.sizes().end()), ScalarType::Int64, self.device()},
           {{"self", &self}});
  copyInto(out, coords);
  return out;
}

Tensor nonzeroComposite(const Tensor& self) {
  checkDefined(qualified<"nonzero">(), self, "self");
  return BP_STANDARD_OP("nonzero.out", Tensor(const Tensor&, const Tensor&))
      .callSkippingMeta(self, allocate(OutputMeta{Shape{0, self.dim()}, ScalarType::Int64, self.device()}));
}

// masked_select is structured: masked_select.out is the kernel (by default
// index_select.out of the selected positions straight into `out`, resized to
// their count), the functional form calls it with an empty out.
template <FixedString Name>
Shape checkMaskedSelect(const Tensor& self, const Tensor& mask) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, mask, "mask");
  commonDevice(op, {{"self", &self}, {"mask", &mask}});
  checkDtypes(op, standardOp<Name>(), {{"mask", &mask}});
  return broadcastShapes(op, self.sizes(), mask.sizes());
}

void maskedSelectOutMeta(const Tensor& self, const Tensor& mask, const Tensor& out) {
  const std::string& op = qualified<"masked_select.out">();
  checkMaskedSelect<"masked_select.out">(self, mask);
  checkOutDtype(op, out, likeSelf(self));
  BP_CHECK(out.device() == self.device(), op, ": argument 'out' is on ", out.device(), " but self is on ",
           self.device(), "; pass a tensor on that device");
}

Tensor maskedSelectOut(const Tensor& self, const Tensor& mask, const Tensor& out) {
  const Shape shape = checkMaskedSelect<"masked_select.out">(self, mask);
  const Tensor positions = truePositions(mask.expand(shape).reshape({-1}));
  checkOut(qualified<"masked_select.out">(), out, OutputMeta{Shape{positions.numel()}, self.dtype(), self.device()},
           {{"self", &self}, {"mask", &mask}});
  using IndexSelectOutSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&);
  return BP_STANDARD_OP("index_select.out", IndexSelectOutSig)
      .callSkippingMeta(self.expand(shape).reshape({-1}), 0, positions, out);
}

Tensor maskedSelectComposite(const Tensor& self, const Tensor& mask) {
  checkMaskedSelect<"masked_select">(self, mask);
  return BP_STANDARD_OP("masked_select.out", Tensor(const Tensor&, const Tensor&, const Tensor&))
      .callSkippingMeta(self, mask, allocate(OutputMeta{Shape{0}, self.dtype(), self.device()}));
}

// --- index.Tensor, index_put_

// An index list resolved to one integer tensor (or none) per dim.
struct IndexPlan {
  std::vector<int64_t> indexed;  // self's dims with an index tensor, in order
  std::vector<int64_t> rest;     // the others, in order
  Shape broadcast;               // the index tensors' common shape (B)
  Tensor linear;                 // int64, shape B: the position in the indexed dims, flattened
  bool adjacent = true;          // the indexed dims are consecutive: B takes their place
};

IndexPlan planIndex(std::string_view op, const Tensor& self, OptionalTensorList indices) {
  checkDefined(op, self, "self");
  BP_CHECK(indices.size() <= static_cast<size_t>(self.dim()), op, ": too many indices for a tensor of ", self.dim(),
           " dimensions (got ", indices.size(), ")");
  // Resolve masks into their coordinates; one entry per dim of self.
  std::vector<std::optional<Tensor>> per_dim;
  for (size_t i = 0; i < indices.size(); ++i) {
    const std::optional<Tensor>& entry = indices[i];
    const int64_t first = static_cast<int64_t>(per_dim.size());
    if (!entry || !entry->defined()) {
      BP_CHECK(first < self.dim(), op, ": too many indices for a tensor of ", self.dim(), " dimensions");
      per_dim.emplace_back();
      continue;
    }
    Tensor t = *entry;
    if (t.device() != self.device()) {
      BP_CHECK(t.device().type == DeviceType::CPU, op, ": index ", i, " is on ", t.device(), " but self is on ",
               self.device(), "; move it to ", self.device(), " (or keep it on the cpu)");
      t = t.to(self.device());
    }
    const ScalarType dt = t.dtype();
    if (dt == ScalarType::Bool || dt == ScalarType::UInt8) {
      BP_CHECK(first + t.dim() <= self.dim(), op, ": a mask of ", t.dim(), " dimensions at index ", i,
               " reaches past the ", self.dim(), " dimensions of self");
      for (int64_t k = 0; k < t.dim(); ++k) {
        BP_CHECK(t.size(k) == self.size(first + k), op, ": the mask at index ", i, " has shape ",
                 shapeString(t.sizes()), " but the dimensions of self it covers have sizes ",
                 shapeString(Shape(self.sizes().begin() + first, self.sizes().begin() + first + t.dim())),
                 "; a mask must match them exactly");
      }
      BP_CHECK(t.dim() > 0, op, ": a 0-d bool index is not supported; index with a mask of self's shape, or ",
               "use unsqueeze(0) to add the dimension");
      const Tensor coords = coordinates(truePositions(asMask(t).reshape({-1})), t.sizes());
      for (int64_t k = 0; k < t.dim(); ++k) per_dim.emplace_back(coords.select(1, k));
      continue;
    }
    BP_CHECK(dt == ScalarType::Int64 || dt == ScalarType::Int32, op, ": index ", i, " has dtype ", dt,
             "; tensors used as indices must be int64, int32, bool or uint8");
    BP_CHECK(first < self.dim(), op, ": too many indices for a tensor of ", self.dim(), " dimensions");
    per_dim.emplace_back(dt == ScalarType::Int64 ? t : t.to(ScalarType::Int64));
  }
  IndexPlan plan;
  for (int64_t d = 0; d < self.dim(); ++d) {
    const bool has = static_cast<size_t>(d) < per_dim.size() && per_dim[static_cast<size_t>(d)].has_value();
    (has ? plan.indexed : plan.rest).push_back(d);
  }
  BP_CHECK(!plan.indexed.empty(), op, ": no index tensor given; index with integers and slices instead");
  for (size_t j = 1; j < plan.indexed.size(); ++j) plan.adjacent &= plan.indexed[j] == plan.indexed[j - 1] + 1;
  for (int64_t d : plan.indexed) {
    const Tensor& t = *per_dim[static_cast<size_t>(d)];
    plan.broadcast = d == plan.indexed.front() ? Shape(t.sizes().begin(), t.sizes().end())
                                               : broadcastShapes(op, plan.broadcast, t.sizes());
  }
  // Range check: one host read for all index tensors.
  std::vector<Tensor> bad;
  for (int64_t d : plan.indexed) {
    const Tensor& t = *per_dim[static_cast<size_t>(d)];
    const int64_t size = self.size(d);
    bad.push_back(logical_or(t.lt(-size), t.ge(size)).any().reshape({1}));
  }
  const std::vector<bool> any_bad = cat(bad, 0).cpu().toVector<bool>();
  for (size_t j = 0; j < plan.indexed.size(); ++j) {
    if (!any_bad[j]) continue;
    const int64_t d = plan.indexed[j], size = self.size(d);
    const Tensor& t = *per_dim[static_cast<size_t>(d)];
    const Tensor out_of_range = logical_or(t.lt(-size), t.ge(size));
    const int64_t value = t.reshape({-1})
                              .index_select(0, truePositions(out_of_range.reshape({-1})).narrow(0, 0, 1))
                              .cpu()
                              .item<int64_t>();
    // kOutOfRange: Python's IndexError, as PyTorch raises.
    BP_THROW(kOutOfRange, op, ": index ", value, " is out of range for dimension ", d, " with size ", size,
             " (valid: ", -size, "..", size - 1, ")");
  }
  const TensorOptions index_options{.dtype = ScalarType::Int64, .device = self.device()};
  int64_t multiplier = 1;
  for (size_t j = plan.indexed.size(); j-- > 0;) {
    const int64_t d = plan.indexed[j], size = self.size(d);
    const Tensor& t = *per_dim[static_cast<size_t>(d)];
    Tensor wrapped = t.remainder(full({}, Scalar(std::max<int64_t>(size, 1)), index_options));
    if (multiplier != 1) wrapped = wrapped * full({}, Scalar(multiplier), index_options);
    plan.linear = plan.linear.defined() ? plan.linear + wrapped : wrapped;
    multiplier *= size;
  }
  plan.linear = plan.linear.expand(plan.broadcast);
  return plan;
}

// self's dims reordered: the indexed ones first, then the rest.
std::vector<int64_t> indexedFirst(const IndexPlan& plan) {
  std::vector<int64_t> order = plan.indexed;
  order.insert(order.end(), plan.rest.begin(), plan.rest.end());
  return order;
}

// The sizes of `dims` of t, after `lead` (e.g. {L}).
Shape sizesOf(const Tensor& t, const std::vector<int64_t>& dims, Shape lead) {
  for (int64_t d : dims) lead.push_back(t.size(d));
  return lead;
}

// [B..., rest...] -> the result's layout: B in place of adjacent indexed dims.
std::vector<int64_t> resultOrder(const IndexPlan& plan) {
  const int64_t nb = static_cast<int64_t>(plan.broadcast.size());
  const int64_t before = plan.adjacent ? plan.indexed.front() : 0;
  const int64_t total = nb + static_cast<int64_t>(plan.rest.size());
  std::vector<int64_t> order;
  for (int64_t k = 0; k < before; ++k) order.push_back(nb + k);
  for (int64_t k = 0; k < nb; ++k) order.push_back(k);
  for (int64_t k = nb + before; k < total; ++k) order.push_back(k);
  return order;
}

Tensor indexComposite(const Tensor& self, OptionalTensorList indices) {
  const IndexPlan plan = planIndex(qualified<"index.Tensor">(), self, indices);
  int64_t flat = 1;
  for (int64_t d : plan.indexed) flat *= self.size(d);
  const Tensor source = self.permute(indexedFirst(plan)).reshape(sizesOf(self, plan.rest, {flat}));
  const Tensor picked = source.index_select(0, plan.linear.reshape({-1}));
  const Tensor shaped = picked.reshape(sizesOf(self, plan.rest, plan.broadcast));
  const std::vector<int64_t> order = resultOrder(plan);
  bool identity = true;
  for (size_t k = 0; k < order.size(); ++k) identity &= order[k] == static_cast<int64_t>(k);
  return identity ? shaped : shaped.permute(order).contiguous();
}

// True if dims `dims` of t (in order) can be merged into one without a copy.
bool mergeable(const Tensor& t, const std::vector<int64_t>& dims) {
  for (size_t j = 1; j < dims.size(); ++j) {
    const int64_t outer = dims[j - 1], inner = dims[j];
    if (t.size(outer) != 1 && t.size(inner) != 1 && t.stride(outer) != t.stride(inner) * t.size(inner)) return false;
  }
  return true;
}

// index_put's operands along dim 0 of self's indexed dims flattened: the
// linear index expanded to src's shape, and src (values broadcast to what
// index() would return, in [B..., rest...] order).
struct PutOperands {
  IndexPlan plan;
  Tensor index, src;
  Shape flat_sizes;  // [flat, rest sizes...]
};

PutOperands putOperands(std::string_view op, const Tensor& self, OptionalTensorList indices, const Tensor& values) {
  checkDefined(op, values, "values");
  BP_CHECK(values.dtype() == self.dtype(), op, ": 'values' has dtype ", values.dtype(), " but 'self' has dtype ",
           self.dtype(), "; convert values with .to(", self.dtype(), ")");
  Tensor moved;
  const Tensor& vals =
      values.device() == self.device() || values.dim() != 0 ? values : onDevice(values, self.device(), moved);
  BP_CHECK(vals.device() == self.device(), op, ": 'values' is on ", vals.device(), " but 'self' is on ", self.device(),
           "; move values to ", self.device());
  PutOperands r{planIndex(op, self, indices), {}, {}, {}};
  const IndexPlan& plan = r.plan;
  const std::vector<int64_t> order = resultOrder(plan);
  Shape result_shape(order.size());
  const Shape natural = sizesOf(self, plan.rest, plan.broadcast);
  for (size_t k = 0; k < order.size(); ++k) result_shape[k] = natural[static_cast<size_t>(order[k])];
  const Shape shape = broadcastShapes(op, result_shape, vals.sizes());
  BP_CHECK(shape == result_shape, op, ": 'values' of shape ", shapeString(vals.sizes()),
           " cannot be broadcast to the indexed shape ", shapeString(result_shape));
  std::vector<int64_t> inverse(order.size());
  for (size_t k = 0; k < order.size(); ++k) inverse[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
  const Tensor src = vals.is_alias_of(self) ? vals.clone() : vals;
  r.src = src.expand(result_shape).permute(inverse).reshape(sizesOf(self, plan.rest, {plan.linear.numel()}));
  int64_t flat = 1;
  for (int64_t d : plan.indexed) flat *= self.size(d);
  r.flat_sizes = sizesOf(self, plan.rest, {flat});
  Shape index_shape(r.flat_sizes.size(), 1);
  index_shape[0] = -1;
  r.index = plan.linear.reshape(index_shape).expand(r.src.sizes());
  return r;
}

Tensor scatterAlong0(const Tensor& target, const PutOperands& p, bool accumulate, bool in_place) {
  if (in_place) {
    if (accumulate) return BP_STANDARD_OP("scatter_add_", ScatterSig).call(target, 0, p.index, p.src);
    return BP_STANDARD_OP("scatter_.src", ScatterSig).call(target, 0, p.index, p.src);
  }
  if (accumulate) return BP_STANDARD_OP("scatter_add", ScatterSig).call(target, 0, p.index, p.src);
  return BP_STANDARD_OP("scatter.src", ScatterSig).call(target, 0, p.index, p.src);
}

// self with values put at indices, as a new tensor: no write into self or a
// view of it, so that autograd records it like any functional op.
Tensor indexPut(const Tensor& self, OptionalTensorList indices, const Tensor& values, bool accumulate) {
  const std::string& op = qualified<"index_put">();
  checkDefined(op, self, "self");
  const PutOperands p = putOperands(op, self, indices, values);
  const std::vector<int64_t> order = indexedFirst(p.plan);
  const Tensor permuted = self.permute(order);
  const Tensor result = scatterAlong0(permuted.reshape(p.flat_sizes), p, accumulate, false);
  std::vector<int64_t> back(order.size());
  for (size_t k = 0; k < order.size(); ++k) back[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
  return result.view(permuted.sizes()).permute(back).contiguous();
}

// In place: scatter_ straight into self when its indexed dims merge into one
// without a copy, else into a contiguous copy written back. A self or values
// that requires grad goes through the functional form and copy_, since
// autograd refuses in-place writes into views of tensors that require grad.
Tensor indexPutInplace(const Tensor& self, OptionalTensorList indices, const Tensor& values, bool accumulate) {
  const std::string& op = qualified<"index_put_">();
  checkDefined(op, self, "self");
  if (self.requires_grad() || (values.defined() && values.requires_grad())) {
    self.copy_(indexPut(self, indices, values, accumulate));
    return self;
  }
  const PutOperands p = putOperands(op, self, indices, values);
  const Tensor permuted = self.permute(indexedFirst(p.plan));
  const bool in_place = mergeable(self, p.plan.indexed);
  const Tensor work = in_place ? permuted : permuted.contiguous();
  scatterAlong0(work.view(p.flat_sizes), p, accumulate, true);
  if (!in_place) permuted.copy_(work);
  return self;
}

// --- index_add: self[..., index[i], ...] += alpha * source[..., i, ...] along dim.

template <FixedString Name>
Tensor indexAddSource(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha,
                      Tensor& expanded_index) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  checkDefined(op, index, "index");
  checkDefined(op, source, "source");
  commonDevice(op, {{"self", &self}, {"index", &index}, {"source", &source}});
  checkDtypes(op, standardOp<Name>(), {{"index", &index}});
  BP_CHECK(index.dim() <= 1, op, ": argument 'index' must be 1-d or 0-d, but has shape ", shapeString(index.sizes()));
  BP_CHECK(source.dtype() == self.dtype(), op, ": 'source' has dtype ", source.dtype(), " but 'self' has dtype ",
           self.dtype(), "; convert source with .to(", self.dtype(), ")");
  const int64_t d = wrapDim(op, dim, self.dim());
  BP_CHECK(std::max<int64_t>(source.dim(), 1) == std::max<int64_t>(self.dim(), 1), op, ": 'source' has shape ",
           shapeString(source.sizes()), " but must have as many dimensions as 'self' (", shapeString(self.sizes()),
           ")");
  for (int64_t k = 0; k < self.dim(); ++k) {
    const int64_t want = k == d ? index.numel() : self.size(k);
    BP_CHECK(source.dim() == 0 ? want == 1 : source.size(k) == want, op, ": 'source' has shape ",
             shapeString(source.sizes()), " but needs size ", want, " in dimension ", k, " (",
             k == d ? "the number of indices" : "self's size", ")");
  }
  checkAlpha(op, self.dtype(), alpha);
  Shape shape(static_cast<size_t>(std::max<int64_t>(self.dim(), 1)), 1);
  shape[static_cast<size_t>(d)] = -1;
  const Tensor src = source.dim() == 0 ? source.reshape({1}) : source;
  expanded_index = index.to(ScalarType::Int64).reshape(shape).expand(src.sizes());
  const bool one = alpha.isIntegral() ? alpha.to<int64_t>() == 1 : alpha.to<double>() == 1.0;
  return one ? src : src * alpha;
}

// index_add is structured: index_add.out is the kernel (by default
// scatter_add's out= form), the functional form allocates and calls it.
using IndexAddOutSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&, const Scalar&, const Tensor&);

void indexAddOutMeta(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha,
                     const Tensor& out) {
  const std::string& op = qualified<"index_add.out">();
  Tensor idx;
  indexAddSource<"index_add.out">(self, dim, index, source, alpha, idx);
  checkOutDtype(op, out, likeSelf(self));
  checkOut(op, out, likeSelf(self), {{"self", &self}, {"index", &index}, {"source", &source}});
}

Tensor indexAddOut(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha,
                   const Tensor& out) {
  Tensor idx;
  const Tensor src = indexAddSource<"index_add.out">(self, dim, index, source, alpha, idx);
  const bool scalar = self.dim() == 0;
  using ScatterAddOutSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&, const Tensor&);
  BP_STANDARD_OP("scatter_add.out", ScatterAddOutSig)
      .call(scalar ? self.reshape({1}) : self, scalar ? 0 : dim, idx, src, scalar ? out.reshape({1}) : out);
  return out;
}

Tensor indexAdd(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  Tensor idx;
  indexAddSource<"index_add">(self, dim, index, source, alpha, idx);  // its own checks, before allocating
  return BP_STANDARD_OP("index_add.out", IndexAddOutSig)
      .callSkippingMeta(self, dim, index, source, alpha, allocate(likeSelf(self)));
}

Tensor indexAddInplace(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                       const Scalar& alpha) {
  Tensor idx;
  const Tensor src = indexAddSource<"index_add_">(self, dim, index, source, alpha, idx);
  const Tensor base = self.dim() == 0 ? self.reshape({1}) : self;
  BP_STANDARD_OP("scatter_add_", ScatterSig).call(base, self.dim() == 0 ? 0 : dim, idx, src);
  return self;
}

// --- tril, triu: zeros above (below) the diagonal of the last two dims.

template <FixedString Name, bool Lower>
Tensor triangleMask(const Tensor& self, int64_t diagonal) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  BP_CHECK(self.dim() >= 2, op,
           ": needs a tensor of at least 2 dimensions (a matrix or a batch of them), but self has ", self.dim());
  const TensorOptions options{.dtype = ScalarType::Int64, .device = self.device()};
  const Tensor rows = arange(Scalar(self.size(-2)), options).unsqueeze(1);
  const Tensor cols = arange(Scalar(self.size(-1)), options).unsqueeze(0);
  const Tensor offset = cols - rows;  // column minus row: 0 on the diagonal
  const Tensor diag = full({}, Scalar(diagonal), options);
  return Lower ? offset.gt(diag) : offset.lt(diag);  // true where the result is zero
}

// tril and triu are structured (Note [The standard operator table]):
// tril.out is the kernel, by default a composite over masked_fill's out=
// form; the functional form allocates the result and calls it, so a
// backend's native tril.out serves both.
using TriangleOutSig = Tensor(const Tensor&, int64_t, const Tensor&);

template <FixedString Name, bool Lower>
void triangleOutMeta(const Tensor& self, int64_t diagonal, const Tensor& out) {
  (void)diagonal;
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  BP_CHECK(self.dim() >= 2, op,
           ": needs a tensor of at least 2 dimensions (a matrix or a batch of them), but self has ", self.dim());
  checkOutDtype(op, out, likeSelf(self));
  checkOut(op, out, likeSelf(self), {{"self", &self}});
}

template <FixedString Name, bool Lower>
Tensor triangleOut(const Tensor& self, int64_t diagonal, const Tensor& out) {
  using Sig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);
  return BP_STANDARD_OP("masked_fill.Scalar_out", Sig)
      .callSkippingMeta(self, triangleMask<Name, Lower>(self, diagonal), Scalar(0), out);
}

template <FixedString Name, FixedString OutName, bool Lower>
Tensor triangle(const Tensor& self, int64_t diagonal) {
  triangleMask<Name, Lower>(self, diagonal);  // the functional form's own checks, before allocating
  return BP_STANDARD_OP(OutName.c_str(), TriangleOutSig).callSkippingMeta(self, diagonal, allocate(likeSelf(self)));
}

template <FixedString Name, bool Lower>
Tensor triangleInplace(const Tensor& self, int64_t diagonal) {
  using Sig = Tensor(const Tensor&, const Tensor&, const Scalar&);
  return BP_STANDARD_OP("masked_fill_.Scalar", Sig).call(self, triangleMask<Name, Lower>(self, diagonal), Scalar(0));
}

// --- roll: elements shifted along dims, wrapping around.

// roll is structured: roll.out is the kernel (by default the shifted parts
// concatenated, the last dim's straight into `out`), the functional form
// allocates and calls it.
using RollOutSig = Tensor(const Tensor&, IntArrayRef, IntArrayRef, const Tensor&);

template <FixedString Name>
void checkRoll(const Tensor& self, IntArrayRef shifts, IntArrayRef dims) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  BP_CHECK(!shifts.empty(), op, ": 'shifts' must name at least one shift");
  if (dims.empty()) {
    BP_CHECK(shifts.size() == 1, op, ": without 'dims' the tensor is rolled flattened, which takes one shift, not ",
             shifts.size());
    return;
  }
  BP_CHECK(shifts.size() == dims.size(), op, ": 'shifts' and 'dims' must have one entry each per rolled dim, but have ",
           shifts.size(), " and ", dims.size());
  for (int64_t d : dims) wrapDim(op, d, self.dim());
}

void rollOutMeta(const Tensor& self, IntArrayRef shifts, IntArrayRef dims, const Tensor& out) {
  const std::string& op = qualified<"roll.out">();
  checkRoll<"roll.out">(self, shifts, dims);
  checkOutDtype(op, out, likeSelf(self));
  checkOut(op, out, likeSelf(self), {{"self", &self}});
}

Tensor rollOut(const Tensor& self, IntArrayRef shifts, IntArrayRef dims, const Tensor& out) {
  const std::string& op = qualified<"roll.out">();
  if (dims.empty()) {  // rolled flattened
    const int64_t dim0[] = {0}, flat[] = {-1};
    if (out.is_contiguous()) {
      rollOut(self.reshape(IntArrayRef(flat, 1)), shifts, IntArrayRef(dim0, 1), out.view(IntArrayRef(flat, 1)));
    } else {
      Tensor tmp = allocate(likeSelf(self)).view(IntArrayRef(flat, 1));
      rollOut(self.reshape(IntArrayRef(flat, 1)), shifts, IntArrayRef(dim0, 1), tmp);
      copyInto(out, tmp.view(self.sizes()));
    }
    return out;
  }
  // The dims that move, with their shift in [1, n).
  absl::InlinedVector<std::pair<int64_t, int64_t>, 4> moves;
  for (size_t j = 0; j < dims.size(); ++j) {
    const int64_t d = wrapDim(op, dims[j], self.dim());
    const int64_t n = self.dim() == 0 ? 1 : self.size(d);
    if (n == 0 || self.dim() == 0) continue;
    const int64_t s = ((shifts[j] % n) + n) % n;
    if (s != 0) moves.emplace_back(d, s);
  }
  if (moves.empty()) {
    copyInto(out, self);
    return out;
  }
  Tensor x = self;
  for (size_t j = 0; j < moves.size(); ++j) {
    const auto [d, s] = moves[j];
    const int64_t n = x.size(d);
    const Tensor parts[] = {x.narrow(d, n - s, s), x.narrow(d, 0, n - s)};
    if (j + 1 < moves.size()) {
      x = cat(TensorList(parts, 2), d);
    } else {
      using CatOutSig = Tensor(TensorList, int64_t, const Tensor&);
      BP_STANDARD_OP("cat.out", CatOutSig).call(TensorList(parts, 2), d, out);
    }
  }
  return out;
}

Tensor rollComposite(const Tensor& self, IntArrayRef shifts, IntArrayRef dims) {
  checkRoll<"roll">(self, shifts, dims);
  return BP_STANDARD_OP("roll.out", RollOutSig).callSkippingMeta(self, shifts, dims, allocate(likeSelf(self)));
}

// --- repeat: the tensor tiled `repeats` times along each dim.

// repeat is structured: repeat.out is the kernel (by default a copy of
// the expanded view into `out`), the functional form allocates and calls it.
using RepeatOutSig = Tensor(const Tensor&, IntArrayRef, const Tensor&);

// The result's shape, and the view of self it copies: self with a size-1
// dim before each of its dims (and before the leading new ones), expanded
// to the repeats.
template <FixedString Name>
Tensor repeatSource(const Tensor& self, IntArrayRef repeats, Shape& result) {
  const std::string& op = qualified<Name>();
  checkDefined(op, self, "self");
  BP_CHECK(repeats.size() >= static_cast<size_t>(self.dim()), op, ": 'repeats' has ", repeats.size(),
           " entries but self has ", self.dim(), " dimensions; give at least one per dimension");
  const size_t lead = repeats.size() - static_cast<size_t>(self.dim());
  Shape interleaved, expanded;
  result.clear();
  for (size_t k = 0; k < repeats.size(); ++k) {
    BP_CHECK(repeats[k] >= 0, op, ": repeats must be non-negative, but entry ", k, " is ", repeats[k]);
    const int64_t size = k < lead ? 1 : self.size(static_cast<int64_t>(k - lead));
    interleaved.insert(interleaved.end(), {1, size});
    expanded.insert(expanded.end(), {repeats[k], size});
    result.push_back(repeats[k] * size);
  }
  return self.reshape(interleaved).expand(expanded);
}

void repeatOutMeta(const Tensor& self, IntArrayRef repeats, const Tensor& out) {
  const std::string& op = qualified<"repeat.out">();
  Shape result;
  repeatSource<"repeat.out">(self, repeats, result);
  const OutputMeta m{result, self.dtype(), self.device()};
  checkOutDtype(op, out, m);
  checkOut(op, out, m, {{"self", &self}});
}

Tensor repeatOut(const Tensor& self, IntArrayRef repeats, const Tensor& out) {
  Shape result;
  const Tensor source = repeatSource<"repeat.out">(self, repeats, result);
  if (out.numel() == 0) return out;
  // `out` has the result's shape; seen with the expanded view's dims (each
  // repeat and size pair split apart), one copy fills it. A strided `out`
  // that has no such view gets the tiled result copied in.
  Shape split(source.sizes().begin(), source.sizes().end());
  if (out.is_contiguous()) {
    copyInto(out.view(IntArrayRef(split.data(), split.size())), source);
  } else {
    copyInto(out, source.reshape(IntArrayRef(result.data(), result.size())));
  }
  return out;
}

Tensor repeatComposite(const Tensor& self, IntArrayRef repeats) {
  Shape result;
  repeatSource<"repeat">(self, repeats, result);
  return BP_STANDARD_OP("repeat.out", RepeatOutSig)
      .callSkippingMeta(self, repeats, allocate(OutputMeta{result, self.dtype(), self.device()}));
}

// --- repeat_interleave: each element (slice along dim) repeated in place,
// by one count or by a count per element. Without dim, the flattened tensor.

Tensor repeatInterleaveInt(const Tensor& self, int64_t repeats, std::optional<int64_t> dim,
                           std::optional<int64_t> output_size) {
  const std::string& op = qualified<"repeat_interleave.self_int">();
  checkDefined(op, self, "self");
  BP_CHECK(repeats >= 0, op, ": repeats must be non-negative, got ", repeats);
  const Tensor x = dim ? (self.dim() == 0 ? self.reshape({1}) : self) : self.reshape({-1});
  const int64_t d = dim ? wrapDim(op, *dim, self.dim()) : 0;
  BP_CHECK(!output_size || *output_size == x.size(d) * repeats, op, ": output_size is ", output_size.value_or(0),
           " but the repeated dim has ", x.size(d) * repeats, " elements");
  Shape expanded(x.sizes().begin(), x.sizes().end()), result = expanded;
  expanded.insert(expanded.begin() + d + 1, repeats);
  result[static_cast<size_t>(d)] *= repeats;
  return x.unsqueeze(d + 1).expand(expanded).reshape(result).contiguous();
}

// For counts [r0, r1, ...] (int64, 1-d), the source position of each output:
// [0 (r0 times), 1 (r1 times), ...]. Each element with a nonzero count marks
// where its run starts; a running count of the marks is the position. One
// host read: the total (and the smallest count, which must not be negative).
Tensor runPositions(std::string_view op, const Tensor& counts, std::optional<int64_t> output_size) {
  const Device device = counts.device();
  const TensorOptions options{.dtype = ScalarType::Int64, .device = device};
  const Tensor c = counts.to(ScalarType::Int64);
  if (c.numel() == 0) return empty({0}, options);
  const Tensor parts[] = {c.sum().reshape({1}), c.amin({0}).reshape({1})};
  const std::vector<int64_t> read = cat(TensorList(parts, 2), 0).cpu().toVector<int64_t>();
  BP_CHECK(read[1] >= 0, op, ": repeats must be non-negative, but one is ", read[1]);
  const int64_t total = read[0];
  BP_CHECK(!output_size || *output_size == total, op, ": output_size is ", output_size.value_or(0),
           " but the repeats add up to ", total);
  const Tensor starts = c.cumsum(0) - c;
  Tensor marks = zeros({total + 1}, options);
  BP_STANDARD_OP("scatter_add_", ScatterSig).call(marks, 0, starts, ones({c.numel()}, options));
  return marks.cumsum(0).narrow(0, 0, total) - 1;
}

Tensor repeatInterleaveTensor(const Tensor& self, const Tensor& repeats, std::optional<int64_t> dim,
                              std::optional<int64_t> output_size) {
  const std::string& op = qualified<"repeat_interleave.self_Tensor">();
  checkDefined(op, self, "self");
  checkDefined(op, repeats, "repeats");
  commonDevice(op, {{"self", &self}, {"repeats", &repeats}});
  checkDtypes(op, standardOp<"repeat_interleave.self_Tensor">(), {{"repeats", &repeats}});
  const Tensor x = dim ? (self.dim() == 0 ? self.reshape({1}) : self) : self.reshape({-1});
  const int64_t d = dim ? wrapDim(op, *dim, self.dim()) : 0;
  BP_CHECK(repeats.dim() <= 1, op, ": repeats must be 0-d or 1-d, but has shape ", shapeString(repeats.sizes()));
  if (repeats.dim() == 0 || repeats.numel() == 1) {
    const int64_t r = repeats.reshape({}).cpu().item<int64_t>();
    return repeatInterleaveInt(self, r, dim, output_size);
  }
  BP_CHECK(repeats.numel() == x.size(d), op, ": repeats has ", repeats.numel(), " counts but dim ", d, " has ",
           x.size(d), " elements; give one count per element");
  return x.index_select(d, runPositions(op, repeats, output_size));
}

Tensor repeatInterleaveCounts(const Tensor& repeats, std::optional<int64_t> output_size) {
  const std::string& op = qualified<"repeat_interleave.Tensor">();
  checkDefined(op, repeats, "repeats");
  checkDtypes(op, standardOp<"repeat_interleave.Tensor">(), {{"repeats", &repeats}});
  BP_CHECK(repeats.dim() == 1, op, ": repeats must be 1-d, but has shape ", shapeString(repeats.sizes()));
  return runPositions(op, repeats, output_size);
}

// --- _unique2 (torch.unique without dim): the sorted distinct values, and
// on request each element's position among them (inverse) and how often
// each occurs (counts); the ones not asked for are empty, as in PyTorch.
// A stable sort, then a run starts wherever a value differs from the one
// before it (so each NaN is its own run); one host read: the run count.
std::tuple<Tensor, Tensor, Tensor> unique2(const Tensor& self, bool sorted, bool return_inverse, bool return_counts) {
  const std::string& op = qualified<"_unique2">();
  checkDefined(op, self, "self");
  const TensorOptions index_options{.dtype = ScalarType::Int64, .device = self.device()};
  const int64_t n = self.numel();
  if (n == 0) {
    return {empty({0}, {.dtype = self.dtype(), .device = self.device()}),
            return_inverse ? empty(self.sizes(), index_options) : empty({0}, index_options), empty({0}, index_options)};
  }
  const auto [values, order] = self.reshape({-1}).sort(0, false);
  const Tensor parts[] = {full({1}, Scalar(true), {.dtype = ScalarType::Bool, .device = self.device()}),
                          values.narrow(0, 1, n - 1).ne(values.narrow(0, 0, n - 1))};
  const Tensor starts = cat(TensorList(parts, 2), 0);
  const Tensor distinct = values.index_select(0, truePositions(starts));
  const Tensor group = starts.cumsum(0, ScalarType::Int64) - 1;  // each sorted element's run
  Tensor inverse = empty({0}, index_options), counts = empty({0}, index_options);
  if (return_inverse) {
    inverse = empty({n}, index_options);
    BP_STANDARD_OP("scatter_.src", ScatterSig).call(inverse, 0, order, group);
    inverse = inverse.reshape(self.sizes());
  }
  if (return_counts) {
    counts = zeros({distinct.numel()}, index_options);
    BP_STANDARD_OP("scatter_add_", ScatterSig).call(counts, 0, group, ones({n}, index_options));
  }
  (void)sorted;  // always sorted: PyTorch allows any order when sorted=False
  return {distinct, inverse, counts};
}

// --- isclose: |self - other| <= atol + rtol * |other| (PyTorch's rule).

Tensor iscloseComposite(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  const std::string& op = qualified<"isclose">();
  checkDefined(op, self, "self");
  checkDefined(op, other, "other");
  BP_CHECK(self.dtype() == other.dtype(), op, ": 'self' has dtype ", self.dtype(), " and 'other' ", other.dtype(),
           "; they must match (convert one with .to())");
  BP_CHECK(rtol >= 0 && atol >= 0, op, ": rtol and atol must be non-negative, got rtol=", rtol, " atol=", atol);
  Tensor close = self.eq(other);
  if (rtol == 0 && atol == 0) return close;
  const bool floating = isFloatingType(self.dtype());
  const Tensor a = floating ? self : self.to(ScalarType::Float32);
  const Tensor b = floating ? other : other.to(ScalarType::Float32);
  if (equal_nan && floating) close = logical_or(close, logical_and(a.isnan(), b.isnan()));
  const Tensor error = (a - b).abs();
  const Tensor allowed = b.abs() * rtol + atol;
  return logical_or(close, logical_and(error.isfinite(), error.le(allowed)));
}

}  // namespace

void addIndexingOps(std::vector<StandardOp>& ops) {
  auto add = [&](std::string schema, KernelFunction composite) {
    ops.push_back(StandardOp{std::move(schema), {}, std::move(composite), "indexing"});
  };
  using K = KernelFunction;
  constexpr ScalarTypeSet kIndex = {ScalarType::Int32, ScalarType::Int64};
  constexpr ScalarTypeSet kIndices = {ScalarType::Int32, ScalarType::Int64, ScalarType::Bool, ScalarType::UInt8};
  add("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor", K::makeFromFunction(BP_FN(indexComposite)));
  ops.back().dtypes = {{"indices", kIndices, "index with an int64 tensor or a bool mask, "}};
  add("index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(indexPutInplace)));
  ops.back().dtypes = {{"indices", kIndices, "index with an int64 tensor or a bool mask, "}};
  add("index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor",
      K::makeFromFunction(BP_FN(indexPut)));
  ops.back().dtypes = {{"indices", kIndices, "index with an int64 tensor or a bool mask, "}};
  add("nonzero(Tensor self) -> Tensor", K::makeFromFunction(BP_FN(nonzeroComposite)));
  add("nonzero.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", K::makeFromFunction(BP_FN(nonzeroOut)));
  ops.back().meta = K::makeFromFunction(BP_FN(nonzeroOutMeta));
  add("masked_select(Tensor self, Tensor mask) -> Tensor", K::makeFromFunction(BP_FN(maskedSelectComposite)));
  ops.back().dtypes = {{"mask", {ScalarType::Bool}, "make one with a comparison (mask != 0), "}};
  add("masked_select.out(Tensor self, Tensor mask, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(maskedSelectOut)));
  ops.back().dtypes = {{"mask", {ScalarType::Bool}, "make one with a comparison (mask != 0), "}};
  ops.back().meta = K::makeFromFunction(BP_FN(maskedSelectOutMeta));
  add("index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
      K::makeFromFunction(BP_FN(indexAdd)));
  ops.back().dtypes = {{"index", kIndex}};
  add("index_add.out(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1, Tensor(a!) out) -> "
      "Tensor(a!)",
      K::makeFromFunction(BP_FN(indexAddOut)));
  ops.back().dtypes = {{"index", kIndex}};
  ops.back().meta = K::makeFromFunction(BP_FN(indexAddOutMeta));
  add("index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(indexAddInplace)));
  ops.back().dtypes = {{"index", kIndex}};
  add("tril(Tensor self, int diagonal=0) -> Tensor", K::makeFromFunction(BP_FN((triangle<"tril", "tril.out", true>))));
  add("tril.out(Tensor self, int diagonal=0, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((triangleOut<"tril.out", true>))));
  ops.back().meta = K::makeFromFunction(BP_FN((triangleOutMeta<"tril.out", true>)));
  add("tril_(Tensor(a!) self, int diagonal=0) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((triangleInplace<"tril_", true>))));
  add("triu(Tensor self, int diagonal=0) -> Tensor", K::makeFromFunction(BP_FN((triangle<"triu", "triu.out", false>))));
  add("triu.out(Tensor self, int diagonal=0, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((triangleOut<"triu.out", false>))));
  ops.back().meta = K::makeFromFunction(BP_FN((triangleOutMeta<"triu.out", false>)));
  add("triu_(Tensor(a!) self, int diagonal=0) -> Tensor(a!)",
      K::makeFromFunction(BP_FN((triangleInplace<"triu_", false>))));
  add("roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor", K::makeFromFunction(BP_FN(rollComposite)));
  add("roll.out(Tensor self, SymInt[1] shifts, int[1] dims=[], *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(rollOut)));
  ops.back().meta = K::makeFromFunction(BP_FN(rollOutMeta));
  add("repeat(Tensor self, SymInt[] repeats) -> Tensor", K::makeFromFunction(BP_FN(repeatComposite)));
  add("repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out) -> Tensor(a!)",
      K::makeFromFunction(BP_FN(repeatOut)));
  ops.back().meta = K::makeFromFunction(BP_FN(repeatOutMeta));
  add("repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, SymInt? output_size=None) -> Tensor",
      K::makeFromFunction(BP_FN(repeatInterleaveInt)));
  add("repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, SymInt? output_size=None) -> "
      "Tensor",
      K::makeFromFunction(BP_FN(repeatInterleaveTensor)));
  ops.back().dtypes = {{"repeats", kIndex}};
  add("repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor",
      K::makeFromFunction(BP_FN(repeatInterleaveCounts)));
  ops.back().dtypes = {{"repeats", kIndex}};
  add("_unique2(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> (Tensor, "
      "Tensor, Tensor)",
      K::makeFromFunction(BP_FN(unique2)));
  add("isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False) -> Tensor",
      K::makeFromFunction(BP_FN(iscloseComposite)));
  // Out= forms derived from the functional ones (Note [Derived out= forms]).
  ops.push_back(
      derivedOut("index.Tensor_out(Tensor self, Tensor?[] indices, *, Tensor(a!) out) -> Tensor(a!)", "index.Tensor"));
  ops.push_back(
      derivedOut("index_put.out(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False, *, Tensor(a!) "
                 "out) -> Tensor(a!)",
                 "index_put"));
  ops.push_back(
      derivedOut("repeat_interleave.Tensor_out(Tensor repeats, *, int? output_size=None, Tensor(a!) out) -> Tensor(a!)",
                 "repeat_interleave.Tensor"));
  ops.push_back(
      derivedOut("_unique2.out(Tensor self, bool sorted=True, bool return_inverse=False, bool return_counts=False, *, "
                 "Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
                 "_unique2"));
}

}  // namespace backplane::ops

// The C++ API (backplane/ops/ops.h, backplane/ops/tensor.h) of these ops and of scatter.
namespace backplane {

namespace {
using OptionalTensorList = ArrayRef<std::optional<Tensor>>;
using ScatterSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&);
using ScatterValueSig = Tensor(const Tensor&, int64_t, const Tensor&, const Scalar&);
using IndexAddSig = Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&, const Scalar&);
using CloseSig = Tensor(const Tensor&, const Tensor&, double, double, bool);
}  // namespace

Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  return BP_STANDARD_OP("scatter.src", ScatterSig).call(self, dim, index, src);
}
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value) {
  return BP_STANDARD_OP("scatter.value", ScatterValueSig).call(self, dim, index, value);
}
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  return BP_STANDARD_OP("index_add", IndexAddSig).call(self, dim, index, source, alpha);
}
Tensor index(const Tensor& self, OptionalTensorList indices) {
  return BP_STANDARD_OP("index.Tensor", Tensor(const Tensor&, OptionalTensorList)).call(self, indices);
}
const Tensor& index_put_(const Tensor& self, OptionalTensorList indices, const Tensor& values, bool accumulate) {
  BP_STANDARD_OP("index_put_", Tensor(const Tensor&, OptionalTensorList, const Tensor&, bool))
      .call(self, indices, values, accumulate);
  return self;
}
Tensor nonzero(const Tensor& self) { return BP_STANDARD_OP("nonzero", Tensor(const Tensor&)).call(self); }
Tensor masked_select(const Tensor& self, const Tensor& mask) {
  return BP_STANDARD_OP("masked_select", Tensor(const Tensor&, const Tensor&)).call(self, mask);
}
Tensor tril(const Tensor& self, int64_t diagonal) {
  return BP_STANDARD_OP("tril", Tensor(const Tensor&, int64_t)).call(self, diagonal);
}
Tensor triu(const Tensor& self, int64_t diagonal) {
  return BP_STANDARD_OP("triu", Tensor(const Tensor&, int64_t)).call(self, diagonal);
}
Tensor roll(const Tensor& self, IntArrayRef shifts, IntArrayRef dims) {
  return BP_STANDARD_OP("roll", Tensor(const Tensor&, IntArrayRef, IntArrayRef)).call(self, shifts, dims);
}
Tensor repeat(const Tensor& self, IntArrayRef repeats) {
  return BP_STANDARD_OP("repeat", Tensor(const Tensor&, IntArrayRef)).call(self, repeats);
}
Tensor isclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  return BP_STANDARD_OP("isclose", CloseSig).call(self, other, rtol, atol, equal_nan);
}
// Not an op of the table: a question about isclose's result, answered on the host.
bool allclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  return isclose(self, other, rtol, atol, equal_nan).all().cpu().item<bool>();
}

Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return ::backplane::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Scalar& value) const {
  return ::backplane::scatter(*this, dim, index, value);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) const {
  return ::backplane::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::nonzero() const { return ::backplane::nonzero(*this); }
Tensor Tensor::masked_select(const Tensor& mask) const { return ::backplane::masked_select(*this, mask); }
Tensor Tensor::tril(int64_t diagonal) const { return ::backplane::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return ::backplane::triu(*this, diagonal); }
Tensor Tensor::roll(IntArrayRef shifts, IntArrayRef dims) const { return ::backplane::roll(*this, shifts, dims); }
Tensor Tensor::repeat(IntArrayRef repeats) const { return ::backplane::repeat(*this, repeats); }

}  // namespace backplane
