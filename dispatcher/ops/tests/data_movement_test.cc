// Standard operators, family "data_movement": each op against a naive
// reference computed here from the inputs' values, through the CPU plugin.
// Data movement is exact, so results must match bit for bit (tolerance 0).
#include "ops_test_util.h"
#include "test_device.h"

namespace backplane::ops_test {
namespace {

using ::testing::HasSubstr;

const ScalarType kAllTypes[] = {ScalarType::Bool,     ScalarType::UInt8,   ScalarType::Int8,
                                ScalarType::Int32,    ScalarType::Int64,   ScalarType::Float16,
                                ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};

using Sizes = std::vector<int64_t>;

// Values in [0, 5): representable in every dtype (bool gets 0 and 1).
Tensor data(const Sizes& sizes, ScalarType dtype, uint32_t seed, Device device = Device(DeviceType::CPU)) {
  return randomTensor(sizes, dtype, seed, 0, 5, device);
}

// Integers in [0, 3) in any dtype: sums of a few stay exact even in float16.
Tensor intData(const Sizes& sizes, ScalarType dtype, uint32_t seed) {
  return fromDoubles(values(randomTensor(sizes, ScalarType::Int64, seed, 0, 2.4)), sizes, dtype);
}

Tensor i64(const std::vector<double>& v, const Sizes& sizes) { return fromDoubles(v, sizes, ScalarType::Int64); }

int64_t numelOf(const Sizes& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}
// Row-major position <-> multi-index.
Sizes unravel(int64_t flat, const Sizes& shape) {
  Sizes idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
int64_t ravel(const Sizes& idx, const Sizes& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}
Sizes shapeOf(const Tensor& t) { return Sizes(t.sizes().begin(), t.sizes().end()); }

// The row-major values of t converted to dtype (what a copy to dtype holds).
std::vector<double> as(const Tensor& t, ScalarType dtype) { return values(fromDoubles(values(t), t.sizes(), dtype)); }

void expectExact(const Tensor& actual, const std::vector<double>& expected, const Sizes& sizes, ScalarType dtype) {
  expectClose(actual, expected, sizes, dtype, 0);
}

// --- cat

std::vector<double> catReference(const std::vector<Tensor>& ts, int64_t dim, ScalarType dtype, Sizes* out_shape) {
  const Tensor* ref = nullptr;
  for (const Tensor& t : ts)
    if (!(t.dim() == 1 && t.numel() == 0)) {
      ref = &t;
      break;
    }
  if (!ref) {
    *out_shape = {0};
    return {};
  }
  const int64_t d = dim < 0 ? dim + ref->dim() : dim;
  Sizes shape = shapeOf(*ref);
  shape[d] = 0;
  for (const Tensor& t : ts)
    if (!(t.dim() == 1 && t.numel() == 0)) shape[d] += t.size(d);
  std::vector<double> out(static_cast<size_t>(numelOf(shape)));
  int64_t offset = 0;
  for (const Tensor& t : ts) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    std::vector<double> v = as(t, dtype);
    for (int64_t i = 0; i < t.numel(); ++i) {
      Sizes idx = unravel(i, shapeOf(t));
      idx[d] += offset;
      out[ravel(idx, shape)] = v[i];
    }
    offset += t.size(d);
  }
  *out_shape = shape;
  return out;
}

void expectCat(const std::vector<Tensor>& ts, int64_t dim, ScalarType dtype) {
  Sizes shape;
  std::vector<double> expected = catReference(ts, dim, dtype, &shape);
  expectExact(callT("cat", {ts, dim}), expected, shape, dtype);
}

TEST(CatTest, EveryDtypeAlongEveryDim) {
  for (ScalarType t : kAllTypes) {
    SCOPED_TRACE(scalarTypeName(t));
    expectCat({data({2, 3, 4}, t, 1), data({2, 3, 4}, t, 2)}, 0, t);
    expectCat({data({2, 3, 4}, t, 1), data({2, 5, 4}, t, 2), data({2, 1, 4}, t, 3)}, 1, t);
    expectCat({data({2, 3, 4}, t, 1), data({2, 3, 2}, t, 2)}, -1, t);
    expectCat({data({2, 3, 4}, t, 1), data({2, 5, 4}, t, 2)}, -2, t);
  }
}

TEST(CatTest, NonContiguousAndExpandedInputs) {
  Tensor transposed = data({4, 3}, ScalarType::Float32, 1).transpose(0, 1);                 // [3, 4]
  Tensor strided = data({3, 8}, ScalarType::Float32, 2).slice(1, 0, 8, 2);                  // [3, 4]
  Tensor expanded = data({1, 4}, ScalarType::Float32, 3).expand({int64_t{2}, int64_t{4}});  // stride 0
  expectCat({transposed, strided, expanded}, 0, ScalarType::Float32);
  expectCat({transposed, strided}, 1, ScalarType::Float32);
}

TEST(CatTest, PromotesDtypes) {
  expectCat({data({2, 2}, ScalarType::Int32, 1), data({2, 2}, ScalarType::Float32, 2)}, 0, ScalarType::Float32);
  expectCat({data({2, 2}, ScalarType::Bool, 1), data({2, 2}, ScalarType::UInt8, 2)}, 1, ScalarType::UInt8);
  expectCat({data({2, 2}, ScalarType::Float16, 1), data({2, 2}, ScalarType::BFloat16, 2)}, 0, ScalarType::Float32);
  // int8 with uint8 gives int32 here (PyTorch: int16, which Backplane lacks).
  expectCat({data({2, 2}, ScalarType::Int8, 1), data({2, 2}, ScalarType::UInt8, 2)}, 0, ScalarType::Int16);
}

TEST(CatTest, SkipsLegacyEmptyTensorsOnly) {
  Tensor legacy = data({0}, ScalarType::Float32, 1);
  expectCat({data({2, 3}, ScalarType::Float32, 2), legacy, data({1, 3}, ScalarType::Float32, 3)}, 0,
            ScalarType::Float32);
  expectCat({legacy, data({2, 3}, ScalarType::Float32, 2)}, 1, ScalarType::Float32);
  // A legacy empty tensor still takes part in type promotion.
  expectCat({data({2, 3}, ScalarType::Int32, 2), data({0}, ScalarType::Float64, 1)}, 0, ScalarType::Float64);
  Tensor all_legacy = callT("cat", {std::vector<Tensor>{legacy, legacy}, int64_t{0}});
  EXPECT_EQ(all_legacy.sizes(), IntArrayRef({0}));
  // Empty tensors of other shapes are not skipped: they must match.
  expectCat({data({0, 3}, ScalarType::Float32, 1), data({2, 3}, ScalarType::Float32, 2)}, 0, ScalarType::Float32);
  expectCat({data({2, 0}, ScalarType::Float32, 1), data({2, 0}, ScalarType::Float32, 2)}, 0, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("cat",
                      {std::vector<Tensor>{data({0, 3}, ScalarType::Float32, 1), data({2, 4}, ScalarType::Float32, 2)},
                       int64_t{0}});
              }),
              HasSubstr("sizes of tensors must match except in dimension 0"));
}

TEST(CatTest, OutIsResizedOrCheckedAndMayConvert) {
  std::vector<Tensor> ts{data({2, 3}, ScalarType::Float32, 1), data({1, 3}, ScalarType::Float32, 2)};
  Sizes shape;
  std::vector<double> expected = catReference(ts, 0, ScalarType::Float64, &shape);
  Tensor out = emptyTensor({0}, ScalarType::Float64);
  Tensor r = callT("cat.out", {ts, int64_t{0}, out});
  EXPECT_EQ(r.unsafeGetImpl(), out.unsafeGetImpl());
  expectExact(out, expected, shape, ScalarType::Float64);
  // A non-contiguous out of the right shape is written in place.
  Tensor buffer = fromDoubles(std::vector<double>(9 * 2, -7), {9, 2}, ScalarType::Float32);
  Tensor strided_out = buffer.slice(0, 0, 9, 3).t();  // [2, 3] with strides [1, 6]
  callT("cat.out", {std::vector<Tensor>{ts[1], ts[1]}, int64_t{0}, strided_out});
  expectExact(strided_out, catReference({ts[1], ts[1]}, 0, ScalarType::Float32, &shape), {2, 3}, ScalarType::Float32);
  EXPECT_EQ(values(buffer)[2], -7);  // the rows between are untouched
  EXPECT_THAT(errorOf([&] {
                callT("cat.out", {ts, int64_t{0}, emptyTensor({2, 3})});
              }),
              HasSubstr("has shape [2, 3] but the result has shape [3, 3]"));
  EXPECT_THAT(errorOf([&] {
                callT("cat.out", {ts, int64_t{0}, emptyTensor({3, 3}, ScalarType::Int32)});
              }),
              HasSubstr("cannot be cast"));
  Tensor rows = data({6, 3}, ScalarType::Float32, 3);
  EXPECT_THAT(errorOf([&] {
                callT("cat.out",
                      {std::vector<Tensor>{rows.slice(0, 0, 1), rows.slice(0, 1, 4)}, int64_t{0}, rows.slice(0, 2, 6)});
              }),
              HasSubstr("shares memory with tensor 1 of the input list"));
  // Sharing a storage without overlapping is fine.
  callT("cat.out", {std::vector<Tensor>{rows.slice(0, 0, 1), rows.slice(0, 1, 2)}, int64_t{0}, rows.slice(0, 4, 6)});
  EXPECT_EQ(values(rows.slice(0, 4, 6)), values(rows.slice(0, 0, 2)));
}

TEST(CatTest, ClearErrors) {
  auto cat = [](std::vector<Tensor> ts, int64_t dim) { return errorOf([&] { callT("cat", {ts, dim}); }); };
  Tensor a = data({2, 3}, ScalarType::Float32, 1);
  EXPECT_THAT(cat({}, 0), HasSubstr("expected a non-empty list"));
  EXPECT_THAT(cat({a, data({}, ScalarType::Float32, 2)}, 0), HasSubstr("tensor 1 of the list is 0-d"));
  EXPECT_THAT(cat({a, data({2, 3, 1}, ScalarType::Float32, 2)}, 0),
              HasSubstr("same number of dimensions, but tensor 0 has shape [2, 3] and tensor 1 has shape [2, 3, 1]"));
  std::string mismatch = cat({a, a, data({2, 4}, ScalarType::Float32, 2)}, 0);
  EXPECT_THAT(mismatch, HasSubstr("sizes of tensors must match except in dimension 0"));
  EXPECT_THAT(mismatch, HasSubstr("tensor 2 has size 4 in dimension 1"));
  EXPECT_THAT(cat({a, a}, 2), HasSubstr("dimension 2 is out of range"));
  EXPECT_THAT(cat({a, a}, -3), HasSubstr("dimension -3 is out of range"));
  auto& dev = testing::TestDevice::install("testdev", 2);
  EXPECT_THAT(cat({a, data({2, 3}, ScalarType::Float32, 2, dev.device())}, 0),
              HasSubstr("expected all tensors on one device, but tensor 0 is on cpu"));
}

TEST(CatTest, BigTensorsUseThreadsAndMatch) {
  // Big enough for the parallel path; non-contiguous so the copy is strided.
  Tensor a = data({600, 300}, ScalarType::Float32, 1).t();
  Tensor b = data({300, 200}, ScalarType::Float32, 2);
  expectCat({a, b}, 1, ScalarType::Float32);
  expectCat({data({300, 300}, ScalarType::Int64, 3), data({200, 300}, ScalarType::Int32, 4)}, 0, ScalarType::Int64);
}

TEST(CatTest, RunsOnADeviceThroughCpuFallback) {
  auto& dev = testing::TestDevice::install("testdev", 2);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  Tensor a = data({2, 3}, ScalarType::Float16, 1), b = data({2, 2}, ScalarType::Float16, 2);
  Tensor r = callT("cat", {std::vector<Tensor>{fromDoubles(values(a), {2, 3}, ScalarType::Float16, dev.device()),
                                               fromDoubles(values(b), {2, 2}, ScalarType::Float16, dev.device())},
                           int64_t{-1}});
  EXPECT_EQ(r.device(), dev.device());
  Sizes shape;
  expectExact(r, catReference({a, b}, -1, ScalarType::Float16, &shape), shape, ScalarType::Float16);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
}

// --- stack

std::vector<double> stackReference(const std::vector<Tensor>& ts, int64_t dim, ScalarType dtype, Sizes* out_shape) {
  Sizes shape = shapeOf(ts[0]);
  const int64_t d = dim < 0 ? dim + ts[0].dim() + 1 : dim;
  shape.insert(shape.begin() + d, static_cast<int64_t>(ts.size()));
  std::vector<double> out(static_cast<size_t>(numelOf(shape)));
  for (size_t k = 0; k < ts.size(); ++k) {
    std::vector<double> v = as(ts[k], dtype);
    for (int64_t i = 0; i < ts[k].numel(); ++i) {
      Sizes idx = unravel(i, shapeOf(ts[k]));
      idx.insert(idx.begin() + d, static_cast<int64_t>(k));
      out[ravel(idx, shape)] = v[i];
    }
  }
  *out_shape = shape;
  return out;
}

TEST(StackTest, MatchesReferenceForEveryDim) {
  for (ScalarType t : {ScalarType::Bool, ScalarType::Float16, ScalarType::Int64, ScalarType::Float32}) {
    SCOPED_TRACE(scalarTypeName(t));
    std::vector<Tensor> ts{data({2, 3}, t, 1), data({3, 2}, t, 2).t(), data({2, 3}, t, 3)};
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      Sizes shape;
      std::vector<double> expected = stackReference(ts, dim, t, &shape);
      expectExact(callT("stack", {ts, dim}), expected, shape, t);
    }
  }
}

TEST(StackTest, ZeroDimEmptyPromotionAndOut) {
  std::vector<Tensor> scalars{data({}, ScalarType::Int32, 1), data({}, ScalarType::Float32, 2)};
  Sizes shape;
  expectExact(callT("stack", {scalars, int64_t{0}}), stackReference(scalars, 0, ScalarType::Float32, &shape), {2},
              ScalarType::Float32);
  std::vector<Tensor> empties{data({0, 3}, ScalarType::Float32, 1), data({0, 3}, ScalarType::Float32, 2)};
  EXPECT_EQ(callT("stack", {empties, int64_t{1}}).sizes(), IntArrayRef({0, 2, 3}));
  std::vector<Tensor> legacy{data({0}, ScalarType::Float32, 1), data({0}, ScalarType::Float32, 2)};
  EXPECT_EQ(callT("stack", {legacy, int64_t{0}}).sizes(), IntArrayRef({2, 0}));

  std::vector<Tensor> ts{data({2, 2}, ScalarType::Float32, 1), data({2, 2}, ScalarType::Float32, 2)};
  Tensor out = emptyTensor({0}, ScalarType::Float64);
  callT("stack.out", {ts, int64_t{1}, out});
  expectExact(out, stackReference(ts, 1, ScalarType::Float64, &shape), shape, ScalarType::Float64);
  EXPECT_THAT(errorOf([&] {
                callT("stack.out", {ts, int64_t{1}, emptyTensor({2, 2})});
              }),
              HasSubstr("has shape [2, 2] but the result has shape [2, 2, 2]"));
  Tensor buffer = data({2, 2, 2}, ScalarType::Float32, 3);
  EXPECT_THAT(errorOf([&] {
                callT("stack.out", {std::vector<Tensor>{buffer.select(0, 1), ts[0]}, int64_t{0}, buffer});
              }),
              HasSubstr("shares memory with tensor 0"));
}

TEST(StackTest, ClearErrors) {
  auto stack = [](std::vector<Tensor> ts, int64_t dim) { return errorOf([&] { callT("stack", {ts, dim}); }); };
  Tensor a = data({2, 3}, ScalarType::Float32, 1);
  EXPECT_THAT(stack({}, 0), HasSubstr("expected a non-empty list"));
  EXPECT_THAT(stack({a, data({3, 2}, ScalarType::Float32, 2)}, 0),
              HasSubstr("tensor 0 has shape [2, 3] and tensor 1 has shape [3, 2]"));
  EXPECT_THAT(stack({a, a}, 3), HasSubstr("dimension 3 is out of range"));
  EXPECT_THAT(stack({a, a}, -4), HasSubstr("dimension -4 is out of range"));
  auto& dev = testing::TestDevice::install("testdev", 2);
  EXPECT_THAT(stack({a, data({2, 3}, ScalarType::Float32, 2, dev.device())}, 0),
              HasSubstr("expected all tensors on one device"));
  // Note [Rank limit]: a result of 65 dims is refused, through the call and the out= form.
  Tensor deep = data(Sizes(64, 1), ScalarType::Float32, 3);
  EXPECT_EQ(callT("stack", {std::vector<Tensor>{deep.view({1})}, int64_t{0}}).dim(), 2);
  EXPECT_THAT(stack({deep, deep}, 0), HasSubstr("a tensor has at most 64 dimensions; got 65"));
  Tensor out = emptyTensor({0}, ScalarType::Float32);
  EXPECT_THAT(errorOf([&] {
                callT("stack.out", {std::vector<Tensor>{deep}, int64_t{64}, out});
              }),
              HasSubstr("a tensor has at most 64 dimensions; got 65"));
}

// --- index_select

std::vector<double> indexSelectReference(const Tensor& self, int64_t dim, const std::vector<double>& index,
                                         Sizes* out_shape) {
  Sizes shape = shapeOf(self);
  std::vector<double> v = values(self);
  if (shape.empty()) {
    *out_shape = {};
    return v;
  }
  const int64_t d = dim < 0 ? dim + self.dim() : dim;
  shape[d] = static_cast<int64_t>(index.size());
  std::vector<double> out(static_cast<size_t>(numelOf(shape)));
  for (size_t i = 0; i < out.size(); ++i) {
    Sizes idx = unravel(static_cast<int64_t>(i), shape);
    idx[d] = static_cast<int64_t>(index[idx[d]]);
    out[i] = v[ravel(idx, shapeOf(self))];
  }
  *out_shape = shape;
  return out;
}

TEST(IndexSelectTest, EveryDtypeDimAndIndexType) {
  for (ScalarType t : kAllTypes) {
    SCOPED_TRACE(scalarTypeName(t));
    Tensor self = data({3, 4, 5}, t, 1);
    for (ScalarType it : {ScalarType::Int64, ScalarType::Int32}) {
      for (int64_t dim : {0, 1, 2, -1, -3}) {
        const int64_t n = self.size(dim);
        std::vector<double> index{static_cast<double>(n - 1), 0, static_cast<double>(n / 2), 0};
        Sizes shape;
        std::vector<double> expected = indexSelectReference(self, dim, index, &shape);
        expectExact(callT("index_select", {self, dim, fromDoubles(index, {4}, it)}), expected, shape, t);
      }
    }
  }
}

TEST(IndexSelectTest, NonContiguousZeroDimAndEmpty) {
  Tensor self = data({5, 4}, ScalarType::Float16, 1).t();         // [4, 5]
  Tensor index = i64({4, 9, 0, 9, 2, 9}, {6}).slice(0, 0, 6, 2);  // [4, 0, 2], stride 2
  Sizes shape;
  expectExact(callT("index_select", {self, int64_t{1}, index}), indexSelectReference(self, 1, {4, 0, 2}, &shape), shape,
              ScalarType::Float16);
  // 0-d index: one slice, the dimension kept with size 1.
  expectExact(callT("index_select", {self, int64_t{0}, i64({3}, {})}), indexSelectReference(self, 0, {3}, &shape),
              shape, ScalarType::Float16);
  // 0-d self: one index, 0.
  Tensor scalar = data({}, ScalarType::Int8, 2);
  expectExact(callT("index_select", {scalar, int64_t{0}, i64({0}, {1})}), values(scalar), {}, ScalarType::Int8);
  // Empty index and empty self.
  EXPECT_EQ(callT("index_select", {self, int64_t{0}, i64({}, {0})}).sizes(), IntArrayRef({0, 5}));
  EXPECT_EQ(callT("index_select", {data({0, 3}, ScalarType::Bool, 1), int64_t{1}, i64({2, 2}, {2})}).sizes(),
            IntArrayRef({0, 2}));
}

TEST(IndexSelectTest, OutSemantics) {
  Tensor self = data({3, 4}, ScalarType::Int32, 1);
  Tensor out = emptyTensor({0}, ScalarType::Int32);
  Tensor r = callT("index_select.out", {self, int64_t{0}, i64({2, 1}, {2}), out});
  EXPECT_EQ(r.unsafeGetImpl(), out.unsafeGetImpl());
  Sizes shape;
  expectExact(out, indexSelectReference(self, 0, {2, 1}, &shape), shape, ScalarType::Int32);
  Tensor strided_out = emptyTensor({4, 2}, ScalarType::Int32).t();
  callT("index_select.out", {self, int64_t{0}, i64({0, 2}, {2}), strided_out});
  expectExact(strided_out, indexSelectReference(self, 0, {0, 2}, &shape), shape, ScalarType::Int32);
  EXPECT_THAT(errorOf([&] {
                callT("index_select.out", {self, int64_t{0}, i64({0}, {1}), emptyTensor({0})});
              }),
              HasSubstr("has dtype float32 but the result has dtype int32; this op does not convert"));
  EXPECT_THAT(errorOf([&] {
                callT("index_select.out", {self, int64_t{0}, i64({0}, {1}), emptyTensor({2, 4}, ScalarType::Int32)});
              }),
              HasSubstr("has shape [2, 4] but the result has shape [1, 4]"));
}

TEST(IndexSelectTest, ClearErrors) {
  Tensor self = data({3, 4}, ScalarType::Float32, 1);
  auto select = [&](const Tensor& s, int64_t dim, const Tensor& index) {
    return errorOf([&] { callT("index_select", {s, dim, index}); });
  };
  std::string out_of_range = select(self, 1, i64({0, 4}, {2}));
  EXPECT_THAT(out_of_range, HasSubstr("index 4 (element 1 of 'index') is out of range for dimension 1"));
  EXPECT_THAT(out_of_range, HasSubstr("valid indices are 0 to 3"));
  EXPECT_THAT(select(self, 0, fromDoubles({-1}, {1}, ScalarType::Int32)), HasSubstr("index -1 (element 0"));
  EXPECT_THAT(select(data({0, 2}, ScalarType::Float32, 1), 0, i64({0}, {1})), HasSubstr("it has no elements"));
  EXPECT_THAT(select(self, 0, fromDoubles({0}, {1}, ScalarType::Float32)),
              HasSubstr("argument 'index' has dtype float32, which this op does not accept (accepted: int32, int64)"));
  EXPECT_THAT(select(self, 0, i64({0, 1}, {1, 2})), HasSubstr("'index' must be 1-d or 0-d, but has shape [1, 2]"));
  EXPECT_THAT(select(self, 2, i64({0}, {1})), HasSubstr("dimension 2 is out of range"));
  EXPECT_THAT(select(data({}, ScalarType::Float32, 1), 0, i64({0, 0}, {2})), HasSubstr("exactly one index"));
  auto& dev = testing::TestDevice::install("testdev", 2);
  EXPECT_THAT(select(self, 0, fromDoubles({0}, {1}, ScalarType::Int64, dev.device())),
              HasSubstr("expected all tensors on one device"));
}

// --- gather

// self[p with p[d] = index[p]] for every position p of index.
std::vector<double> gatherReference(const Tensor& self, int64_t dim, const Tensor& index) {
  const Sizes self_shape = self.dim() == 0 ? Sizes{1} : shapeOf(self);
  const Sizes index_shape = index.dim() == 0 ? Sizes{1} : shapeOf(index);
  const int64_t d = dim < 0 ? dim + static_cast<int64_t>(self_shape.size()) : dim;
  std::vector<double> v = values(self), idx = values(index), out(idx.size());
  for (size_t i = 0; i < out.size(); ++i) {
    Sizes p = unravel(static_cast<int64_t>(i), index_shape);
    p[d] = static_cast<int64_t>(idx[i]);
    out[i] = v[ravel(p, self_shape)];
  }
  return out;
}

// An int64 index of `sizes` with values in [0, bound).
Tensor randomIndex(const Sizes& sizes, int64_t bound, uint32_t seed) {
  return randomTensor(sizes, ScalarType::Int64, seed, 0, static_cast<double>(bound) - 0.5001);
}

TEST(GatherTest, EveryDtypeAndDim) {
  for (ScalarType t : kAllTypes) {
    SCOPED_TRACE(scalarTypeName(t));
    Tensor self = data({3, 4, 5}, t, 1);
    for (int64_t dim : {0, 1, 2, -1}) {
      Tensor index = randomIndex({2, 3, 4}, self.size(dim), 7);  // smaller than self elsewhere
      expectExact(callT("gather", {self, dim, index}), gatherReference(self, dim, index), {2, 3, 4}, t);
    }
  }
}

TEST(GatherTest, NonContiguousZeroDimEmptyAndOut) {
  Tensor self = data({5, 4}, ScalarType::BFloat16, 1).t();         // [4, 5]
  Tensor index = randomIndex({6, 4}, 4, 2).slice(0, 0, 6, 2).t();  // [4, 3], strided
  expectExact(callT("gather", {self, int64_t{0}, index}), gatherReference(self, 0, index), {4, 3},
              ScalarType::BFloat16);
  Tensor expanded_index = i64({1, 0, 2}, {1, 3}).expand({int64_t{4}, int64_t{3}});
  expectExact(callT("gather", {self, int64_t{-1}, expanded_index}), gatherReference(self, -1, expanded_index), {4, 3},
              ScalarType::BFloat16);
  Tensor scalar = data({}, ScalarType::Float32, 3);
  expectExact(callT("gather", {scalar, int64_t{0}, i64({0}, {})}), values(scalar), {}, ScalarType::Float32);
  Tensor vec = data({5}, ScalarType::Float32, 4);
  expectExact(callT("gather", {vec, int64_t{0}, i64({3}, {})}), {values(vec)[3]}, {}, ScalarType::Float32);
  EXPECT_EQ(callT("gather", {self, int64_t{1}, i64({}, {0, 9})}).sizes(), IntArrayRef({0, 9}));

  Tensor out = emptyTensor({0}, ScalarType::BFloat16);
  Tensor r = callT("gather.out", {self, int64_t{0}, index, false, out});
  EXPECT_EQ(r.unsafeGetImpl(), out.unsafeGetImpl());
  expectExact(out, gatherReference(self, 0, index), {4, 3}, ScalarType::BFloat16);
  EXPECT_THAT(errorOf([&] {
                callT("gather.out", {self, int64_t{0}, index, false, emptyTensor({4, 3})});
              }),
              HasSubstr("has dtype float32 but the result has dtype bfloat16"));
}

TEST(GatherTest, BigTensorMatches) {
  Tensor self = data({400, 300}, ScalarType::Float32, 1);
  Tensor index = randomIndex({400, 300}, 300, 2).t().contiguous().t();  // column-major
  expectExact(callT("gather", {self, int64_t{1}, index}), gatherReference(self, 1, index), {400, 300},
              ScalarType::Float32);
}

TEST(GatherTest, ClearErrors) {
  Tensor self = data({3, 4}, ScalarType::Float32, 1);
  auto gather = [&](int64_t dim, const Tensor& index) { return errorOf([&] { callT("gather", {self, dim, index}); }); };
  std::string range = gather(1, i64({0, 1, 2, 3, 4, 0}, {2, 3}));
  EXPECT_THAT(range, HasSubstr("index 4 (element 4 of 'index') is out of range for dimension 1"));
  EXPECT_THAT(range, HasSubstr("valid indices are 0 to 3"));
  EXPECT_THAT(gather(0, i64({-1}, {1, 1})), HasSubstr("index -1"));
  EXPECT_THAT(gather(0, fromDoubles({0}, {1, 1}, ScalarType::Int32)),
              HasSubstr("argument 'index' has dtype int32, which this op does not accept (accepted: int64)"));
  EXPECT_THAT(gather(0, i64({0}, {1})), HasSubstr("must have as many dimensions as 'self' (2), but has shape [1]"));
  EXPECT_THAT(gather(0, i64({0, 0, 0, 0, 0}, {1, 5})),
              HasSubstr("'index' has size 5 in dimension 1 but 'self' only 4"));
  EXPECT_THAT(gather(-3, i64({0}, {1, 1})), HasSubstr("dimension -3 is out of range"));
  auto& dev = testing::TestDevice::install("testdev", 2);
  EXPECT_THAT(gather(0, fromDoubles({0}, {1, 1}, ScalarType::Int64, dev.device())),
              HasSubstr("expected all tensors on one device"));
}

// --- scatter_add

std::vector<double> scatterAddReference(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  const Sizes self_shape = self.dim() == 0 ? Sizes{1} : shapeOf(self);
  const Sizes index_shape = index.dim() == 0 ? Sizes{1} : shapeOf(index);
  const Sizes src_shape = src.dim() == 0 ? Sizes{1} : shapeOf(src);
  const int64_t d = dim < 0 ? dim + static_cast<int64_t>(self_shape.size()) : dim;
  std::vector<double> out = values(self), idx = values(index), s = values(src);
  for (size_t i = 0; i < idx.size(); ++i) {
    Sizes p = unravel(static_cast<int64_t>(i), index_shape);
    const double add = s[ravel(p, src_shape)];
    p[d] = static_cast<int64_t>(idx[i]);
    double& o = out[ravel(p, self_shape)];
    o = self.dtype() == ScalarType::Bool ? double(o != 0 || add != 0) : o + add;
  }
  return out;
}

TEST(ScatterAddTest, EveryDtypeAndDimWithRepeatedIndices) {
  for (ScalarType t : kAllTypes) {
    SCOPED_TRACE(scalarTypeName(t));
    Tensor self = intData({3, 4, 5}, t, 1);
    Tensor src = intData({4, 4, 6}, t, 2);  // larger than index: only index's part is read
    for (int64_t dim : {0, 1, 2, -2}) {
      Tensor index = randomIndex({3, 4, 5}, self.size(dim), 5);  // many repeats
      std::vector<double> expected = scatterAddReference(self, dim, index, src);
      Sizes shape = shapeOf(self);
      // Integer-valued sums: exact in every dtype (bool adds as "or").
      expectExact(callT("scatter_add", {self, dim, index, src}), expected, shape, t);
      Tensor inplace = self.clone();
      Tensor r = callT("scatter_add_", {inplace, dim, index, src});
      EXPECT_EQ(r.unsafeGetImpl(), inplace.unsafeGetImpl());
      expectExact(inplace, expected, shape, t);
    }
  }
}

TEST(ScatterAddTest, NonContiguousZeroDimEmptyAndOut) {
  Tensor self = data({5, 4}, ScalarType::Float32, 1).t();               // [4, 5]
  Tensor src = data({5, 6}, ScalarType::Float32, 2).slice(1, 0, 6, 2);  // [5, 3]
  Tensor index = randomIndex({3, 4}, 4, 3).t();                         // [4, 3]
  expectClose(callT("scatter_add", {self, int64_t{0}, index, src}), scatterAddReference(self, 0, index, src), {4, 5},
              ScalarType::Float32);
  // In place on a transposed view writes through to its base.
  Tensor base = data({5, 4}, ScalarType::Float32, 1);
  Tensor view = base.t();
  callT("scatter_add_", {view, int64_t{0}, index, src});
  expectClose(base.t(), scatterAddReference(self, 0, index, src), {4, 5}, ScalarType::Float32);

  Tensor scalar = data({}, ScalarType::Float64, 4);
  expectClose(callT("scatter_add", {scalar, int64_t{0}, i64({0}, {}), fromDoubles({2.5}, {}, ScalarType::Float64)}),
              {values(scalar)[0] + 2.5}, {}, ScalarType::Float64);
  // Empty index: out is self.
  expectExact(callT("scatter_add", {self, int64_t{1}, i64({}, {0, 0}), src}), values(self), {4, 5},
              ScalarType::Float32);

  Tensor out = emptyTensor({0}, ScalarType::Float32);
  Tensor r = callT("scatter_add.out", {self, int64_t{1}, index, src, out});
  EXPECT_EQ(r.unsafeGetImpl(), out.unsafeGetImpl());
  expectClose(out, scatterAddReference(self, 1, index, src), {4, 5}, ScalarType::Float32);
  Tensor f64_out = emptyTensor({4, 5}, ScalarType::Float64);
  EXPECT_THAT(errorOf([&] {
                callT("scatter_add.out", {self, int64_t{1}, index, src, f64_out});
              }),
              HasSubstr("has dtype float64 but the result has dtype float32"));
}

TEST(ScatterAddTest, BigTensorMatches) {
  Tensor self = data({300, 200}, ScalarType::Float64, 1);
  Tensor src = data({300, 200}, ScalarType::Float64, 2);
  for (int64_t dim : {0, 1}) {
    Tensor index = randomIndex({300, 200}, self.size(dim), 3);
    expectClose(callT("scatter_add", {self, dim, index, src}), scatterAddReference(self, dim, index, src), {300, 200},
                ScalarType::Float64);
  }
}

TEST(ScatterAddTest, ClearErrors) {
  Tensor self = data({3, 4}, ScalarType::Float32, 1);
  Tensor src = data({3, 4}, ScalarType::Float32, 2);
  auto scatter = [&](int64_t dim, const Tensor& index, const Tensor& s) {
    return errorOf([&] { callT("scatter_add", {self, dim, index, s}); });
  };
  std::string range = scatter(0, i64({0, 3}, {1, 2}), src);
  EXPECT_THAT(range, HasSubstr("index 3 (element 1 of 'index') is out of range for dimension 0"));
  EXPECT_THAT(range, HasSubstr("valid indices are 0 to 2"));
  // A bad index leaves self untouched in place.
  Tensor inplace = self.clone();
  EXPECT_THAT(errorOf([&] {
                callT("scatter_add_", {inplace, int64_t{0}, i64({0, -2}, {1, 2}), src});
              }),
              HasSubstr("index -2"));
  EXPECT_EQ(values(inplace), values(self));
  EXPECT_THAT(scatter(0, fromDoubles({0}, {1, 1}, ScalarType::Int32), src),
              HasSubstr("argument 'index' has dtype int32, which this op does not accept (accepted: int64)"));
  EXPECT_THAT(scatter(0, i64({0}, {1, 1}), data({3, 4}, ScalarType::Float64, 2)),
              HasSubstr("'src' has dtype float64 but 'self' has dtype float32"));
  EXPECT_THAT(scatter(0, i64({0}, {1}), src), HasSubstr("'index' must have as many dimensions as 'self'"));
  EXPECT_THAT(scatter(0, i64({0}, {1, 1}), data({3}, ScalarType::Float32, 2)),
              HasSubstr("'src' must have as many dimensions as 'self'"));
  EXPECT_THAT(scatter(0, i64({0, 0, 0, 0, 0}, {1, 5}), data({3, 5}, ScalarType::Float32, 2)),
              HasSubstr("'index' has size 5 in dimension 1 but 'self' only 4"));
  EXPECT_THAT(scatter(0, i64({0, 0, 0, 0}, {4, 1}), src),
              HasSubstr("'index' has size 4 in dimension 0 but 'src' only 3"));
  EXPECT_THAT(scatter(2, i64({0}, {1, 1}), src), HasSubstr("dimension 2 is out of range"));
}

// --- masked_fill

// mask ? value : self over the broadcast shape, in `dtype`.
std::vector<double> maskedFillReference(const Tensor& self, const Tensor& mask, double value, Sizes* out_shape) {
  const size_t n = std::max(self.dim(), mask.dim());
  Sizes shape(n, 1);
  auto aligned = [&](const Tensor& t) {
    Sizes s(n, 1);
    for (int64_t k = 0; k < t.dim(); ++k) s[n - t.dim() + k] = t.size(k);
    return s;
  };
  Sizes ss = aligned(self), ms = aligned(mask);
  for (size_t k = 0; k < n; ++k) shape[k] = std::max(ss[k], ms[k]) * (ss[k] && ms[k] ? 1 : 0);
  std::vector<double> sv = values(self), mv = values(mask), out(static_cast<size_t>(numelOf(shape)));
  for (size_t i = 0; i < out.size(); ++i) {
    Sizes p = unravel(static_cast<int64_t>(i), shape), sp = p, mp = p;
    for (size_t k = 0; k < n; ++k) {
      if (ss[k] == 1) sp[k] = 0;
      if (ms[k] == 1) mp[k] = 0;
    }
    out[i] = mv[ravel(mp, ms)] != 0 ? value : sv[ravel(sp, ss)];
  }
  *out_shape = shape;
  return out;
}

TEST(MaskedFillTest, EveryDtypeScalarAndTensorValue) {
  for (ScalarType t : kAllTypes) {
    SCOPED_TRACE(scalarTypeName(t));
    Tensor self = data({3, 4}, t, 1);
    Tensor mask = randomTensor({3, 4}, ScalarType::Bool, 2, -0.6, 1);  // about half true
    const double v = t == ScalarType::Bool ? 1 : 3;
    Sizes shape;
    std::vector<double> expected = maskedFillReference(self, mask, v, &shape);
    expectExact(callT("masked_fill.Scalar", {self, mask, Scalar(int64_t(v))}), expected, shape, t);
    expectExact(callT("masked_fill.Tensor", {self, mask, fromDoubles({v}, {}, ScalarType::Int64)}), expected, shape, t);
    Tensor inplace = self.clone();
    Tensor r = callT("masked_fill_.Scalar", {inplace, mask, Scalar(int64_t(v))});
    EXPECT_EQ(r.unsafeGetImpl(), inplace.unsafeGetImpl());
    expectExact(inplace, expected, shape, t);
    inplace = self.clone();
    callT("masked_fill_.Tensor", {inplace, mask, fromDoubles({v}, {}, t)});
    expectExact(inplace, expected, shape, t);
  }
}

TEST(MaskedFillTest, BroadcastNonContiguousAndEmpty) {
  Tensor self = data({4, 3}, ScalarType::Float16, 1).t();  // [3, 4]
  Tensor row_mask = fromDoubles({1, 0, 0, 1}, {4}, ScalarType::Bool);
  Sizes shape;
  expectExact(callT("masked_fill.Scalar", {self, row_mask, Scalar(-1.5)}),
              maskedFillReference(self, row_mask, -1.5, &shape), shape, ScalarType::Float16);
  // The functional form broadcasts self too (as PyTorch): [3, 1] with [2, 1, 4].
  Tensor column = data({3, 1}, ScalarType::Int32, 2);
  Tensor mask3 = randomTensor({2, 1, 4}, ScalarType::Bool, 3, -0.6, 1);
  Tensor r = callT("masked_fill.Scalar", {column, mask3, Scalar(int64_t{7})});
  expectExact(r, maskedFillReference(column, mask3, 7, &shape), {2, 3, 4}, ScalarType::Int32);
  // In place through a transposed view, with a strided mask.
  Tensor base = data({4, 3}, ScalarType::Float32, 4);
  Tensor mask = randomTensor({3, 8}, ScalarType::Bool, 5, -0.6, 1).slice(1, 0, 8, 2);  // [3, 4]
  std::vector<double> expected = maskedFillReference(base.t(), mask, 0.25, &shape);
  callT("masked_fill_.Scalar", {base.t(), mask, Scalar(0.25)});
  expectExact(base.t(), expected, shape, ScalarType::Float32);
  // A 0-d self, an empty self.
  Tensor scalar = data({}, ScalarType::Float64, 6);
  expectExact(callT("masked_fill.Scalar", {scalar, fromDoubles({1}, {}, ScalarType::Bool), Scalar(9.0)}), {9.0}, {},
              ScalarType::Float64);
  EXPECT_EQ(callT("masked_fill.Scalar",
                  {data({0, 3}, ScalarType::Float32, 1), fromDoubles({1, 0, 1}, {3}, ScalarType::Bool), Scalar(1.0)})
                .sizes(),
            IntArrayRef({0, 3}));
  // Values are converted to self's dtype: 2.7 into int64 is 2.
  Tensor ints = data({2, 2}, ScalarType::Int64, 7);
  Tensor all = fromDoubles({1, 1, 1, 1}, {2, 2}, ScalarType::Bool);
  expectExact(callT("masked_fill.Scalar", {ints, all, Scalar(2.7)}), {2, 2, 2, 2}, {2, 2}, ScalarType::Int64);
}

TEST(MaskedFillTest, BigTensorMatches) {
  Tensor self = data({500, 300}, ScalarType::Float32, 1);
  Tensor mask = randomTensor({300}, ScalarType::Bool, 2, -0.6, 1);
  Sizes shape;
  std::vector<double> expected = maskedFillReference(self, mask, -4, &shape);
  expectExact(callT("masked_fill.Scalar", {self, mask, Scalar(-4.0)}), expected, shape, ScalarType::Float32);
  Tensor inplace = self.clone();
  callT("masked_fill_.Scalar", {inplace, mask, Scalar(-4.0)});
  expectExact(inplace, expected, shape, ScalarType::Float32);
}

TEST(MaskedFillTest, OutSemantics) {
  Tensor self = data({2, 3}, ScalarType::Int32, 1);
  Tensor mask = fromDoubles({1, 0, 1}, {3}, ScalarType::Bool);
  Sizes shape;
  // Out of another (castable) dtype: the value is converted to self's dtype first.
  Tensor out = emptyTensor({0}, ScalarType::Float64);
  Tensor r = callT("masked_fill.Scalar_out", {self, mask, Scalar(2.5), out});
  EXPECT_EQ(r.unsafeGetImpl(), out.unsafeGetImpl());
  expectExact(out, maskedFillReference(self, mask, 2, &shape), {2, 3}, ScalarType::Float64);
  Tensor same = emptyTensor({3, 2}, ScalarType::Int32).t();
  callT("masked_fill.Tensor_out", {self, mask, fromDoubles({5}, {}, ScalarType::Int32), same});
  expectExact(same, maskedFillReference(self, mask, 5, &shape), {2, 3}, ScalarType::Int32);
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill.Scalar_out", {self, mask, Scalar(1), emptyTensor({3, 2})});
              }),
              HasSubstr("has shape [3, 2] but the result has shape [2, 3]"));
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill.Scalar_out",
                      {data({2, 3}, ScalarType::Float32, 1), mask, Scalar(1), emptyTensor({2, 3}, ScalarType::Int32)});
              }),
              HasSubstr("cannot be cast"));
}

TEST(MaskedFillTest, RunsOnADeviceThroughCpuFallback) {
  auto& dev = testing::TestDevice::install("testdev", 2);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  Tensor self = data({2, 3}, ScalarType::Float32, 1);
  Tensor mask = fromDoubles({0, 1, 1, 0, 0, 1}, {2, 3}, ScalarType::Bool);
  Sizes shape;
  std::vector<double> expected = maskedFillReference(self, mask, 8, &shape);
  Tensor on_dev = fromDoubles(values(self), {2, 3}, ScalarType::Float32, dev.device());
  Tensor dev_mask = fromDoubles(values(mask), {2, 3}, ScalarType::Bool, dev.device());
  // A 0-d cpu value may be mixed in, as a scalar.
  Tensor r = callT("masked_fill.Tensor", {on_dev, dev_mask, fromDoubles({8}, {}, ScalarType::Float32)});
  EXPECT_EQ(r.device(), dev.device());
  expectExact(r, expected, shape, ScalarType::Float32);
  callT("masked_fill_.Scalar", {on_dev, dev_mask, Scalar(8.0)});
  expectExact(on_dev, expected, shape, ScalarType::Float32);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
}

TEST(MaskedFillTest, ClearErrors) {
  Tensor self = data({2, 3}, ScalarType::Float32, 1);
  Tensor mask = fromDoubles({1, 0, 1}, {3}, ScalarType::Bool);
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill.Scalar", {self, fromDoubles({1, 0, 1}, {3}, ScalarType::UInt8), Scalar(1.0)});
              }),
              HasSubstr("argument 'mask' has dtype uint8, which this op does not accept (accepted: bool)"));
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill.Scalar", {self, fromDoubles({1, 0}, {2}, ScalarType::Bool), Scalar(1.0)});
              }),
              HasSubstr("cannot be broadcast"));
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill_.Scalar", {data({3}, ScalarType::Float32, 1),
                                              fromDoubles({1, 0, 1, 1, 0, 1}, {2, 3}, ScalarType::Bool), Scalar(1.0)});
              }),
              HasSubstr("the mask does not broadcast to self's shape [3]"));
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill.Tensor", {self, mask, fromDoubles({1, 2}, {2}, ScalarType::Float32)});
              }),
              HasSubstr("'value' must be a 0-d tensor, but has shape [2]"));
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill.Scalar", {data({2}, ScalarType::UInt8, 1),
                                             fromDoubles({1, 0}, {2}, ScalarType::Bool), Scalar(int64_t{300})});
              }),
              HasSubstr("value 300 cannot be converted to dtype uint8 without overflow"));
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill.Tensor", {data({2}, ScalarType::Int8, 1), fromDoubles({1, 0}, {2}, ScalarType::Bool),
                                             fromDoubles({-200}, {}, ScalarType::Int64)});
              }),
              HasSubstr("value -200 cannot be converted to dtype int8 without overflow"));
  EXPECT_THAT(errorOf([&] {
                callT("masked_fill.Scalar",
                      {data({2}, ScalarType::Float16, 1), fromDoubles({1, 0}, {2}, ScalarType::Bool), Scalar(1e6)});
              }),
              HasSubstr("cannot be converted to dtype float16"));
  auto& dev = testing::TestDevice::install("testdev", 2);
  EXPECT_THAT(
      errorOf([&] {
        callT("masked_fill.Scalar", {self, fromDoubles({1, 0, 1}, {3}, ScalarType::Bool, dev.device()), Scalar(1.0)});
      }),
      HasSubstr("expected all tensors on one device"));
}

// --- embedding

TEST(EmbeddingTest, RowsOfWeightInIndicesShape) {
  for (ScalarType t : {ScalarType::Float32, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float64}) {
    SCOPED_TRACE(scalarTypeName(t));
    Tensor weight = data({10, 4}, t, 1);
    std::vector<double> w = values(weight);
    for (ScalarType it : {ScalarType::Int64, ScalarType::Int32}) {
      Tensor indices = fromDoubles({3, 0, 9, 3, 3, 1}, {2, 3}, it);
      std::vector<double> expected;
      for (double i : values(indices))
        for (int64_t k = 0; k < 4; ++k) expected.push_back(w[static_cast<size_t>(i) * 4 + k]);
      expectExact(callT("embedding", {weight, indices}), expected, {2, 3, 4}, t);
      // padding_idx, scale_grad_by_freq and sparse change only the gradient.
      expectExact(callT("embedding", {weight, indices, int64_t{3}, true, true}), expected, {2, 3, 4}, t);
    }
    // 0-d indices give one row; a transposed weight and strided indices work.
    expectExact(callT("embedding", {weight, i64({2}, {})}), {w[8], w[9], w[10], w[11]}, {4}, t);
    Tensor wt = data({4, 10}, t, 2).t();
    Tensor strided = i64({5, 0, 7, 0}, {4}).slice(0, 0, 4, 2);
    std::vector<double> wv = values(wt), expected;
    for (int64_t row : {5, 7})
      for (int64_t k = 0; k < 4; ++k) expected.push_back(wv[row * 4 + k]);
    expectExact(callT("embedding", {wt, strided}), expected, {2, 4}, t);
    EXPECT_EQ(callT("embedding", {weight, i64({}, {0, 3})}).sizes(), IntArrayRef({0, 3, 4}));
  }
}

TEST(EmbeddingTest, ClearErrors) {
  Tensor weight = data({10, 4}, ScalarType::Float32, 1);
  EXPECT_THAT(errorOf([&] {
                callT("embedding", {data({10}, ScalarType::Float32, 1), i64({0}, {1})});
              }),
              HasSubstr("'weight' must be 2-d [num_embeddings, embedding_dim], but has shape [10]"));
  EXPECT_THAT(
      errorOf([&] {
        callT("embedding", {weight, fromDoubles({0}, {1}, ScalarType::Float32)});
      }),
      HasSubstr("argument 'indices' has dtype float32, which this op does not accept (accepted: int32, int64)"));
  EXPECT_THAT(errorOf([&] {
                callT("embedding", {weight, i64({1, 10}, {2})});
              }),
              HasSubstr("index 10 (element 1 of 'index') is out of range for dimension 0 of 'self', which has "
                        "size 10"));
  auto& dev = testing::TestDevice::install("testdev", 2);
  EXPECT_THAT(errorOf([&] {
                callT("embedding", {weight, fromDoubles({0}, {1}, ScalarType::Int64, dev.device())});
              }),
              HasSubstr("expected all tensors on one device"));
}

}  // namespace
}  // namespace backplane::ops_test
