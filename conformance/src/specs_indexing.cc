// Conformance specs of the indexing family (dispatcher/ops/src/indexing.cc
// and scatter): scatter, index.Tensor, index_put, nonzero, masked_select,
// index_add, tril/triu, roll, repeat and isclose (Note [Conformance specs]).
// The references compute on the host, element by element, from the
// definitions PyTorch documents; the ops under test are composites over a
// device's own kernels, so these samples certify those kernels as advanced
// indexing uses them. Values are small integers wherever elements add up,
// so that every summation order gives the same result.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/scalar.h"
#include "sample_util.h"

namespace backplane::conformance {
namespace {

Tensor mask(Rng& rng, std::vector<int64_t> sizes) { return integerTensor(rng, std::move(sizes), ScalarType::Bool); }

int64_t wrap(int64_t i, int64_t size) { return i < 0 ? i + size : i; }

// --- scatter (src and value): out = self; out[p with p[dim] = index[p]] = src[p].

// index values along `d` that differ within every line along d (so the
// result does not depend on which write lands), each in [0, bound).
Tensor distinctIndex(Rng& rng, std::vector<int64_t> sizes, size_t d, int64_t bound) {
  std::vector<double> v(static_cast<size_t>(numelOf(sizes)));
  std::vector<int64_t> c;
  std::vector<std::vector<int64_t>> pools;  // one shuffled [0, bound) per line along d
  std::vector<int64_t> line_sizes = sizes;
  line_sizes[d] = 1;
  pools.resize(static_cast<size_t>(numelOf(line_sizes)));
  for (size_t i = 0; i < v.size(); ++i) {
    unravel(static_cast<int64_t>(i), sizes, c);
    const int64_t along = c[d];
    c[d] = 0;
    std::vector<int64_t>& pool = pools[static_cast<size_t>(ravel(c, line_sizes))];
    if (pool.empty()) {
      for (int64_t k = 0; k < bound; ++k) pool.push_back(k);
      for (size_t k = pool.size(); k > 1; --k)
        std::swap(pool[k - 1], pool[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(k) - 1))]);
    }
    v[i] = static_cast<double>(pool[static_cast<size_t>(along)]);
  }
  return indexTensor(v, std::move(sizes));
}

Expected scatterReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const Tensor& index = s.args[2].toTensor();
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  const size_t d = static_cast<size_t>(wrap(s.args[1].toInt(), nd));
  const bool value = s.args[3].isScalar();
  const std::vector<int64_t> self_sizes = atLeast1d(self), index_sizes = atLeast1d(index);
  std::vector<double> out = valuesOf(self);
  const std::vector<double> iv = valuesOf(index);
  const std::vector<double> srcv = value ? std::vector<double>() : valuesOf(s.args[3].toTensor());
  const std::vector<int64_t> src_sizes = value ? std::vector<int64_t>() : atLeast1d(s.args[3].toTensor());
  std::vector<int64_t> c;
  for (size_t i = 0; i < iv.size(); ++i) {
    unravel(static_cast<int64_t>(i), index_sizes, c);
    const double v = value ? s.args[3].toScalar().toDouble() : srcv[static_cast<size_t>(ravel(c, src_sizes))];
    c[d] = static_cast<int64_t>(iv[i]);
    out[static_cast<size_t>(ravel(c, self_sizes))] = roundTo(self.dtype(), v);
  }
  return expected(sizesOf(self), self.dtype(), std::move(out));
}

std::vector<Sample> scatterSamples(bool value) {
  Rng rng(seedFor(value ? "bp::scatter.value" : "bp::scatter.src"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, int64_t dim, Tensor index, Tensor src, ScalarType dt) {
    IValue last = value ? IValue(dt == ScalarType::Bool ? Scalar(true)
                                 : isFloatingType(dt)   ? Scalar(2.5)
                                                        : Scalar(int64_t{3}))
                        : IValue(std::move(src));
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(dim), IValue(std::move(index)), last}));
  };
  std::vector<ScalarType> types = kAllTypes;
  for (ScalarType dt : types) {
    const std::string sx = dtypeSuffix(dt);
    push("[4,3] dim 0, index [3,3]" + sx, integerTensor(rng, {4, 3}, dt), 0, distinctIndex(rng, {3, 3}, 0, 4),
         integerTensor(rng, {3, 3}, dt), dt);
    push("[3,5] dim 1, index [2,3] and src [3,4]" + sx, integerTensor(rng, {3, 5}, dt), 1,
         distinctIndex(rng, {2, 3}, 1, 5), integerTensor(rng, {3, 4}, dt), dt);
  }
  const ScalarType f = ScalarType::Float32;
  push("[2,3,4] dim -1", integerTensor(rng, {2, 3, 4}, f), -1, distinctIndex(rng, {2, 2, 3}, 2, 4),
       integerTensor(rng, {2, 3, 4}, f), f);
  push("0-d self, index and src", integerTensor(rng, {}, f), 0, indexTensor({0}, {}), integerTensor(rng, {}, f), f);
  push("empty index", integerTensor(rng, {3, 4}, f), 0, indexTensor({}, {0, 4}), integerTensor(rng, {2, 4}, f), f);
  push("transposed self and index", integerTensor(rng, {4, 3}, f).t(), 1, distinctIndex(rng, {4, 3}, 0, 4).t(),
       integerTensor(rng, {3, 4}, f), f);
  push("large [600,500] dim 0", integerTensor(rng, {600, 500}, f), 0, distinctIndex(rng, {600, 500}, 0, 600),
       integerTensor(rng, {600, 500}, f), f);
  auto bad = [&](std::string name, Tensor index, std::string reason) {
    push(name, integerTensor(rng, {3, 4}, f), 0, std::move(index), integerTensor(rng, {3, 4}, f), f);
    out.back() = raising(out.back().name, out.back().args, std::move(reason));
  };
  bad("index 3 along a dim of size 3", indexTensor({0, 3}, {1, 2}), "index out of range");
  bad("index -1", indexTensor({-1, 0}, {1, 2}), "negative index");
  bad("int32 index", indexTensor({0, 1}, {1, 2}, ScalarType::Int32), "index must be int64");
  bad("1-d index of a 2-d self", indexTensor({0}, {1}), "index has another rank than self");
  if (!value) {
    out.push_back(
        raising("float64 src into float32 self",
                {IValue(integerTensor(rng, {3, 4}, f)), IValue(int64_t{0}), IValue(indexTensor({0, 1}, {1, 2})),
                 IValue(integerTensor(rng, {1, 2}, ScalarType::Float64))},
                "src's dtype differs from self's"));
  }
  return out;
}

// --- index.Tensor and index_put: PyTorch's advanced indexing, on the host.

// The sample's index list resolved: per dim of self, the index values (as
// int64, after masks become coordinates) and their shape, or none.
struct ResolvedIndex {
  std::vector<std::optional<std::vector<int64_t>>> values;
  std::vector<std::vector<int64_t>> shapes;
};

ResolvedIndex resolve(const Tensor& self, const IValue& list) {
  ResolvedIndex r;
  for (const std::optional<TensorBase>& entry : list.toOptionalTensorList()) {
    if (!entry || !entry->defined()) {
      r.values.emplace_back();
      r.shapes.emplace_back();
      continue;
    }
    const Tensor t(*entry);
    const std::vector<double> v = valuesOf(t);
    if (t.dtype() == ScalarType::Bool || t.dtype() == ScalarType::UInt8) {
      std::vector<std::vector<int64_t>> coords(static_cast<size_t>(t.dim()));
      std::vector<int64_t> c;
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] == 0) continue;
        unravel(static_cast<int64_t>(i), sizesOf(t), c);
        for (size_t k = 0; k < c.size(); ++k) coords[k].push_back(c[k]);
      }
      for (auto& col : coords) {
        const int64_t n = static_cast<int64_t>(col.size());
        r.values.emplace_back(std::move(col));
        r.shapes.push_back({n});
      }
      continue;
    }
    const size_t d = r.values.size();
    std::vector<int64_t> iv;
    for (double x : v) iv.push_back(wrap(static_cast<int64_t>(x), self.size(static_cast<int64_t>(d))));
    r.values.emplace_back(std::move(iv));
    r.shapes.push_back(sizesOf(t));
  }
  r.values.resize(static_cast<size_t>(self.dim()));
  r.shapes.resize(static_cast<size_t>(self.dim()));
  return r;
}

// For each element of the result (in PyTorch's layout), the row-major
// position of self it reads; and the result's shape.
std::vector<int64_t> indexedPositions(const Tensor& self, const IValue& list, std::vector<int64_t>& result_sizes) {
  const ResolvedIndex r = resolve(self, list);
  std::vector<int64_t> indexed, rest;
  std::vector<int64_t> b;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (r.values[static_cast<size_t>(d)]) {
      b = indexed.empty() ? r.shapes[static_cast<size_t>(d)] : broadcastShape(b, r.shapes[static_cast<size_t>(d)]);
      indexed.push_back(d);
    } else {
      rest.push_back(d);
    }
  }
  bool adjacent = true;
  for (size_t j = 1; j < indexed.size(); ++j) adjacent &= indexed[j] == indexed[j - 1] + 1;
  const int64_t before = adjacent ? indexed.front() : 0;
  // result dims: rest[0..before), B, rest[before..)
  result_sizes.clear();
  for (int64_t k = 0; k < before; ++k) result_sizes.push_back(self.size(rest[static_cast<size_t>(k)]));
  result_sizes.insert(result_sizes.end(), b.begin(), b.end());
  for (size_t k = static_cast<size_t>(before); k < rest.size(); ++k) result_sizes.push_back(self.size(rest[k]));
  const std::vector<int64_t> self_sizes = sizesOf(self);
  std::vector<int64_t> positions(static_cast<size_t>(numelOf(result_sizes)));
  std::vector<int64_t> c, coords(self_sizes.size());
  for (size_t i = 0; i < positions.size(); ++i) {
    unravel(static_cast<int64_t>(i), result_sizes, c);
    const std::vector<int64_t> bc(c.begin() + before, c.begin() + before + static_cast<int64_t>(b.size()));
    const int64_t b_linear = ravel(bc, b);
    for (int64_t d : indexed) {
      const size_t du = static_cast<size_t>(d);
      coords[du] = (*r.values[du])[static_cast<size_t>(broadcastIndex(r.shapes[du], b, b_linear))];
    }
    size_t at = 0;
    for (size_t k = 0; k < rest.size(); ++k) {
      at = k < static_cast<size_t>(before) ? k : k + b.size();
      coords[static_cast<size_t>(rest[k])] = c[at];
    }
    positions[i] = ravel(coords, self_sizes);
  }
  return positions;
}

Expected indexReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  std::vector<int64_t> sizes;
  const std::vector<int64_t> positions = indexedPositions(self, s.args[1], sizes);
  const std::vector<double> sv = valuesOf(self);
  std::vector<double> out;
  for (int64_t p : positions) out.push_back(sv[static_cast<size_t>(p)]);
  return expected(sizes, self.dtype(), std::move(out));
}

Expected indexPutReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const Tensor& values = s.args[2].toTensor();
  const bool accumulate = s.args.size() > 3 && s.args[3].toBool();
  std::vector<int64_t> sizes;
  const std::vector<int64_t> positions = indexedPositions(self, s.args[1], sizes);
  std::vector<double> out = valuesOf(self);
  const std::vector<double> vv = valuesOf(values);
  for (size_t i = 0; i < positions.size(); ++i) {
    const double v = vv[static_cast<size_t>(broadcastIndex(sizesOf(values), sizes, static_cast<int64_t>(i)))];
    double& o = out[static_cast<size_t>(positions[i])];
    o = roundTo(self.dtype(), accumulate ? o + v : v);
  }
  return expected(sizesOf(self), self.dtype(), std::move(out));
}

IValue indices(std::vector<std::optional<Tensor>> list) {
  std::vector<std::optional<TensorBase>> l;
  for (auto& t : list) l.push_back(t ? std::optional<TensorBase>(*t) : std::nullopt);
  return IValue(std::move(l));
}

std::vector<Sample> indexSamples() {
  Rng rng(seedFor("bp::index.Tensor"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, std::vector<std::optional<Tensor>> list) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), indices(std::move(list))}));
  };
  for (ScalarType dt : kAllTypes) {
    push("[5,4] rows [3] (repeats)" + dtypeSuffix(dt), integerTensor(rng, {5, 4}, dt), {indexTensor({4, 0, 4}, {3})});
    push("[5,4] by a [5,4] mask" + dtypeSuffix(dt), integerTensor(rng, {5, 4}, dt), {mask(rng, {5, 4})});
  }
  const ScalarType f = ScalarType::Float32;
  push("[4,5,6] columns of dim 1 and 2, broadcast [2,1] with [3]", integerTensor(rng, {4, 5, 6}, f),
       {std::nullopt, indexTensor({0, 4}, {2, 1}), indexTensor({5, 0, 2}, {3})});
  push("[4,5,6] dims 0 and 2 (not adjacent: B first)", integerTensor(rng, {4, 5, 6}, f),
       {indexTensor({1, 3, 0}, {3}), std::nullopt, indexTensor({2, 2, 5}, {3})});
  push("negative indices", integerTensor(rng, {4, 5}, f), {indexTensor({-1, -4, 2}, {3})});
  push("int32 index, 2-d", integerTensor(rng, {4, 5}, f), {indexTensor({0, 3, 1, 2}, {2, 2}, ScalarType::Int32)});
  push("mask of dim 1 after None", integerTensor(rng, {3, 4, 2}, f), {std::nullopt, mask(rng, {4})});
  push("uint8 mask", integerTensor(rng, {3, 4}, f), {integerTensor(rng, {3, 4}, ScalarType::UInt8)});
  push("all-false mask", integerTensor(rng, {3, 4}, f),
       {indexTensor(std::vector<double>(12, 0), {3, 4}, ScalarType::Bool)});
  push("empty index", integerTensor(rng, {3, 4}, f), {indexTensor({}, {0})});
  push("transposed self", integerTensor(rng, {4, 3}, f).t(), {indexTensor({2, 0}, {2})});
  push("large [2000,64] rows", integerTensor(rng, {2000, 64}, f), {distinctIndex(rng, {1500}, 0, 2000)});
  auto bad = [&](std::string name, std::vector<std::optional<Tensor>> list, std::string reason) {
    out.push_back(
        raising(std::move(name), {IValue(integerTensor(rng, {3, 4}, f)), indices(std::move(list))}, std::move(reason)));
  };
  bad("index 3 along a dim of size 3", {indexTensor({0, 3}, {2})}, "index out of range");
  bad("index -4 along a dim of size 3", {indexTensor({-4}, {1})}, "index out of range");
  bad("float32 index", {hostTensor({0}, {1}, f)}, "index must be an integer or bool tensor");
  bad("mask [3,3] over [3,4]", {indexTensor(std::vector<double>(9, 1), {3, 3}, ScalarType::Bool)},
      "mask shape differs from the indexed dims");
  bad("three indices into 2 dims", {indexTensor({0}, {1}), indexTensor({0}, {1}), indexTensor({0}, {1})},
      "too many indices");
  bad("indices [2] and [3] do not broadcast", {indexTensor({0, 1}, {2}), indexTensor({0, 1, 2}, {3})},
      "index shapes do not broadcast");
  return out;
}

std::vector<Sample> indexPutSamples() {
  Rng rng(seedFor("bp::index_put"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, std::vector<std::optional<Tensor>> list, Tensor values,
                  bool accumulate) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), indices(std::move(list)),
                                               IValue(std::move(values)), IValue(accumulate)}));
  };
  for (ScalarType dt : kAllTypes) {
    push("[5,4] rows [3] = [3,4]" + dtypeSuffix(dt), integerTensor(rng, {5, 4}, dt), {indexTensor({4, 0, 2}, {3})},
         integerTensor(rng, {3, 4}, dt), false);
    push("[5,4] by a mask = a 0-d value" + dtypeSuffix(dt), integerTensor(rng, {5, 4}, dt), {mask(rng, {5, 4})},
         integerTensor(rng, {}, dt), false);
    if (dt != ScalarType::Bool) {
      push("[5,4] rows [6] (repeats) += [6,4]" + dtypeSuffix(dt), integerTensor(rng, {5, 4}, dt),
           {indexTensor({1, 3, 1, 0, 3, 1}, {6})}, integerTensor(rng, {6, 4}, dt), true);
    }
  }
  const ScalarType f = ScalarType::Float32;
  push("[4,5,6] dims 0 and 2 (not adjacent), values [5] broadcast", integerTensor(rng, {4, 5, 6}, f),
       {indexTensor({1, 3, 0}, {3}), std::nullopt, indexTensor({2, 4, 5}, {3})}, integerTensor(rng, {5}, f), false);
  push("[4,5,6] dims 1 and 2 (adjacent), accumulate", integerTensor(rng, {4, 5, 6}, f),
       {std::nullopt, indexTensor({0, 4, 0}, {3}), indexTensor({1, 2, 1}, {3})}, integerTensor(rng, {4, 3}, f), true);
  push("transposed self, negative indices", integerTensor(rng, {4, 3}, f).t(), {indexTensor({-1, 0}, {2})},
       integerTensor(rng, {2, 4}, f), false);
  push("empty index", integerTensor(rng, {3, 4}, f), {indexTensor({}, {0})}, integerTensor(rng, {0, 4}, f), false);
  auto bad = [&](std::string name, std::vector<std::optional<Tensor>> list, Tensor values, std::string reason) {
    out.push_back(raising(
        std::move(name),
        {IValue(integerTensor(rng, {3, 4}, f)), indices(std::move(list)), IValue(std::move(values)), IValue(false)},
        std::move(reason)));
  };
  bad("index 3 along a dim of size 3", {indexTensor({3}, {1})}, integerTensor(rng, {}, f), "index out of range");
  bad("values [3] for rows [2] of width 4", {indexTensor({0, 1}, {2})}, integerTensor(rng, {3}, f),
      "values do not broadcast to the indexed shape");
  bad("float64 values into float32", {indexTensor({0}, {1})}, integerTensor(rng, {4}, ScalarType::Float64),
      "values' dtype differs from self's");
  return out;
}

// --- nonzero, masked_select

Expected nonzeroReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const std::vector<double> v = valuesOf(self);
  std::vector<double> out;
  std::vector<int64_t> c;
  int64_t count = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0) continue;
    ++count;
    unravel(static_cast<int64_t>(i), sizesOf(self), c);
    for (int64_t x : c) out.push_back(static_cast<double>(x));
  }
  return expected({count, self.dim()}, ScalarType::Int64, std::move(out));
}

std::vector<Sample> nonzeroSamples() {
  Rng rng(seedFor("bp::nonzero"));
  std::vector<Sample> out;
  for (ScalarType dt : kAllTypes)
    out.push_back(makeSample("[4,5]" + dtypeSuffix(dt), {IValue(integerTensor(rng, {4, 5}, dt))}));
  const ScalarType f = ScalarType::Float32;
  out.push_back(
      makeSample("[2,3,4] with NaN", {IValue(hostTensor(std::vector<double>(24, std::nan("")), {2, 3, 4}, f))}));
  out.push_back(makeSample("0-d nonzero", {IValue(hostTensor({3}, {}, f))}));
  out.push_back(makeSample("0-d zero", {IValue(hostTensor({0}, {}, f))}));
  out.push_back(makeSample("empty [0,3]", {IValue(hostTensor({}, {0, 3}, f))}));
  out.push_back(makeSample("all zero [3,3]", {IValue(hostTensor(std::vector<double>(9, 0), {3, 3}, f))}));
  out.push_back(makeSample("transposed [5,4]", {IValue(integerTensor(rng, {4, 5}, f).t())}));
  out.push_back(makeSample("large [300,200] mask", {IValue(mask(rng, {300, 200}))}));
  return out;
}

Expected maskedSelectReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const Tensor& m = s.args[1].toTensor();
  const std::vector<int64_t> sizes = broadcastShape(sizesOf(self), sizesOf(m));
  const std::vector<double> sv = valuesOf(self), mv = valuesOf(m);
  std::vector<double> out;
  for (int64_t i = 0; i < numelOf(sizes); ++i) {
    if (mv[static_cast<size_t>(broadcastIndex(sizesOf(m), sizes, i))] != 0)
      out.push_back(sv[static_cast<size_t>(broadcastIndex(sizesOf(self), sizes, i))]);
  }
  const int64_t n = static_cast<int64_t>(out.size());
  return expected({n}, self.dtype(), std::move(out));
}

std::vector<Sample> maskedSelectSamples() {
  Rng rng(seedFor("bp::masked_select"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, Tensor m) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(std::move(m))}));
  };
  for (ScalarType dt : kAllTypes)
    push("[4,5] by [4,5]" + dtypeSuffix(dt), integerTensor(rng, {4, 5}, dt), mask(rng, {4, 5}));
  const ScalarType f = ScalarType::Float32;
  push("[4,5] by [5] (mask broadcast)", integerTensor(rng, {4, 5}, f), mask(rng, {5}));
  push("[4,1] by [4,5] (self broadcast)", integerTensor(rng, {4, 1}, f), mask(rng, {4, 5}));
  push("0-d self", integerTensor(rng, {}, f), mask(rng, {3}));
  push("empty", integerTensor(rng, {0, 5}, f), mask(rng, {0, 5}));
  out.push_back(raising("float32 mask", {IValue(integerTensor(rng, {3}, f)), IValue(integerTensor(rng, {3}, f))},
                        "mask must be bool"));
  out.push_back(
      raising("[3] by [4]", {IValue(integerTensor(rng, {3}, f)), IValue(mask(rng, {4}))}, "shapes do not broadcast"));
  return out;
}

// --- index_add: out = self; out[.., index[i], ..] += alpha * source[.., i, ..] along dim.

Expected indexAddReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const Tensor& index = s.args[2].toTensor();
  const Tensor& source = s.args[3].toTensor();
  const double alpha = s.args.size() > 4 ? s.args[4].toScalar().toDouble() : 1.0;
  const size_t d = static_cast<size_t>(wrap(s.args[1].toInt(), std::max<int64_t>(self.dim(), 1)));
  const std::vector<int64_t> self_sizes = atLeast1d(self), src_sizes = atLeast1d(source);
  std::vector<double> out = valuesOf(self);
  const std::vector<double> iv = valuesOf(index), sv = valuesOf(source);
  std::vector<int64_t> c;
  for (size_t i = 0; i < sv.size(); ++i) {
    unravel(static_cast<int64_t>(i), src_sizes, c);
    c[d] = static_cast<int64_t>(iv[static_cast<size_t>(c[d])]);
    double& o = out[static_cast<size_t>(ravel(c, self_sizes))];
    o = roundTo(self.dtype(), o + alpha * sv[i]);
  }
  return expected(sizesOf(self), self.dtype(), std::move(out));
}

std::vector<Sample> indexAddSamples() {
  Rng rng(seedFor("bp::index_add"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, int64_t dim, Tensor index, Tensor source, Scalar alpha) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(dim), IValue(std::move(index)),
                                               IValue(std::move(source)), IValue(alpha)}));
  };
  for (ScalarType dt : kNumericTypes) {
    const Scalar two = isFloatingType(dt) ? Scalar(2.0) : Scalar(int64_t{2});
    push("[5,3] dim 0, index [4] (repeats)" + dtypeSuffix(dt), integerTensor(rng, {5, 3}, dt), 0,
         indexTensor({4, 1, 4, 0}, {4}), integerTensor(rng, {4, 3}, dt), Scalar(int64_t{1}));
    push("[3,5] dim 1, alpha 2" + dtypeSuffix(dt), integerTensor(rng, {3, 5}, dt), 1, indexTensor({0, 2, 2}, {3}),
         integerTensor(rng, {3, 3}, dt), two);
  }
  const ScalarType f = ScalarType::Float32;
  push("int32 index", integerTensor(rng, {4, 2}, f), 0, indexTensor({3, 3}, {2}, ScalarType::Int32),
       integerTensor(rng, {2, 2}, f), Scalar(int64_t{1}));
  push("0-d index", integerTensor(rng, {4, 2}, f), 0, indexTensor({1}, {}), integerTensor(rng, {1, 2}, f),
       Scalar(int64_t{1}));
  out.push_back(raising("source [2,3] into [4,2]",
                        {IValue(integerTensor(rng, {4, 2}, f)), IValue(int64_t{0}), IValue(indexTensor({0, 1}, {2})),
                         IValue(integerTensor(rng, {2, 3}, f)), IValue(Scalar(int64_t{1}))},
                        "source's other dims differ from self's"));
  out.push_back(raising("index 4 along a dim of size 4",
                        {IValue(integerTensor(rng, {4, 2}, f)), IValue(int64_t{0}), IValue(indexTensor({4}, {1})),
                         IValue(integerTensor(rng, {1, 2}, f)), IValue(Scalar(int64_t{1}))},
                        "index out of range"));
  return out;
}

// --- tril, triu

Expected triangleReference(const Sample& s, bool lower) {
  const Tensor& self = s.args[0].toTensor();
  const int64_t diagonal = s.args.size() > 1 ? s.args[1].toInt() : 0;
  std::vector<double> v = valuesOf(self);
  const int64_t rows = self.size(-2), cols = self.size(-1);
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t r = (static_cast<int64_t>(i) / cols) % rows, c = static_cast<int64_t>(i) % cols;
    if (lower ? c - r > diagonal : c - r < diagonal) v[i] = 0;
  }
  return expected(sizesOf(self), self.dtype(), std::move(v));
}

std::vector<Sample> triangleSamples(const std::string& op) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, int64_t diagonal) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(diagonal)}));
  };
  for (ScalarType dt : kAllTypes) push("[4,5]" + dtypeSuffix(dt), integerTensor(rng, {4, 5}, dt), 0);
  const ScalarType f = ScalarType::Float32;
  push("[2,3,3] diagonal 1", integerTensor(rng, {2, 3, 3}, f), 1);
  push("[5,3] diagonal -2", integerTensor(rng, {5, 3}, f), -2);
  push("[3,4] diagonal 9", integerTensor(rng, {3, 4}, f), 9);
  push("transposed [4,3]", integerTensor(rng, {3, 4}, f).t(), 0);
  push("empty [0,3]", integerTensor(rng, {0, 3}, f), 0);
  out.push_back(
      raising("1-d self", {IValue(integerTensor(rng, {4}, f)), IValue(int64_t{0})}, "needs at least 2 dimensions"));
  return out;
}

// --- roll, repeat

Expected rollReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const std::vector<int64_t> shifts = s.args[1].toIntList(), dims = s.args[2].toIntList();
  const std::vector<double> v = valuesOf(self);
  std::vector<double> out(v.size());
  std::vector<int64_t> sizes = sizesOf(self), c;
  const bool flat = dims.empty();
  if (flat) sizes = {static_cast<int64_t>(v.size())};
  for (size_t i = 0; i < v.size(); ++i) {
    unravel(static_cast<int64_t>(i), sizes, c);
    for (size_t j = 0; j < shifts.size(); ++j) {
      const size_t d = flat ? 0 : static_cast<size_t>(wrap(dims[j], self.dim()));
      const int64_t n = sizes[d];
      c[d] = ((c[d] + shifts[j]) % n + n) % n;
    }
    out[static_cast<size_t>(ravel(c, sizes))] = v[i];
  }
  return expected(sizesOf(self), self.dtype(), std::move(out));
}

std::vector<Sample> rollSamples() {
  Rng rng(seedFor("bp::roll"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, std::vector<int64_t> shifts, std::vector<int64_t> dims) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(shifts), IValue(dims)}));
  };
  for (ScalarType dt : kAllTypes)
    push("[4,5] by 2 along 1" + dtypeSuffix(dt), integerTensor(rng, {4, 5}, dt), {2}, {1});
  const ScalarType f = ScalarType::Float32;
  push("flattened by -3", integerTensor(rng, {3, 4}, f), {-3}, {});
  push("two dims, shifts past the size", integerTensor(rng, {3, 4, 2}, f), {7, -5}, {0, -1});
  push("transposed", integerTensor(rng, {4, 3}, f).t(), {1}, {0});
  out.push_back(
      raising("two shifts, one dim",
              {IValue(integerTensor(rng, {3}, f)), IValue(std::vector<int64_t>{1, 2}), IValue(std::vector<int64_t>{0})},
              "shifts and dims differ in length"));
  return out;
}

Expected repeatReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const std::vector<int64_t> repeats = s.args[1].toIntList();
  std::vector<int64_t> in = sizesOf(self);
  in.insert(in.begin(), repeats.size() - in.size(), 1);
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < repeats.size(); ++k) sizes.push_back(in[k] * repeats[k]);
  const std::vector<double> v = valuesOf(self);
  std::vector<double> out(static_cast<size_t>(numelOf(sizes)));
  std::vector<int64_t> c;
  for (size_t i = 0; i < out.size(); ++i) {
    unravel(static_cast<int64_t>(i), sizes, c);
    for (size_t k = 0; k < c.size(); ++k) c[k] %= in[k];
    out[i] = v[static_cast<size_t>(ravel(c, in))];
  }
  return expected(sizes, self.dtype(), std::move(out));
}

std::vector<Sample> repeatSamples() {
  Rng rng(seedFor("bp::repeat"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, std::vector<int64_t> repeats) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(repeats)}));
  };
  for (ScalarType dt : kAllTypes) push("[2,3] by [2,3]" + dtypeSuffix(dt), integerTensor(rng, {2, 3}, dt), {2, 3});
  const ScalarType f = ScalarType::Float32;
  push("[3] by [2,1,2] (new leading dims)", integerTensor(rng, {3}, f), {2, 1, 2});
  push("0-d by [4]", integerTensor(rng, {}, f), {4});
  push("a zero repeat", integerTensor(rng, {2, 3}, f), {0, 2});
  push("transposed", integerTensor(rng, {3, 2}, f).t(), {1, 2});
  out.push_back(raising("fewer repeats than dims",
                        {IValue(integerTensor(rng, {2, 3}, f)), IValue(std::vector<int64_t>{2})},
                        "repeats shorter than self's dims"));
  out.push_back(raising("a negative repeat", {IValue(integerTensor(rng, {2}, f)), IValue(std::vector<int64_t>{-1})},
                        "negative repeat"));
  return out;
}

// --- repeat_interleave: self_int, self_Tensor (a count per element) and
// Tensor (the positions alone).

// The counts of a sample: one per element along the dim, from an int or a tensor.
std::vector<int64_t> countsOf(const IValue& repeats, int64_t length) {
  if (repeats.isInt()) return std::vector<int64_t>(static_cast<size_t>(length), repeats.toInt());
  std::vector<int64_t> c;
  for (double v : valuesOf(repeats.toTensor())) c.push_back(static_cast<int64_t>(v));
  if (c.size() == 1) c.assign(static_cast<size_t>(length), c[0]);
  return c;
}

Expected repeatInterleaveReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const bool flat = s.args.size() < 3 || s.args[2].isNone();
  std::vector<int64_t> sizes = flat ? std::vector<int64_t>{self.numel()} : atLeast1d(self);
  const size_t d = flat ? 0 : static_cast<size_t>(wrap(s.args[2].toInt(), static_cast<int64_t>(sizes.size())));
  const std::vector<int64_t> counts = countsOf(s.args[1], sizes[d]);
  std::vector<int64_t> source;  // output position along d -> input position
  for (size_t i = 0; i < counts.size(); ++i) source.insert(source.end(), static_cast<size_t>(counts[i]), i);
  std::vector<int64_t> out_sizes = sizes;
  out_sizes[d] = static_cast<int64_t>(source.size());
  const std::vector<double> v = valuesOf(self);
  std::vector<double> out(static_cast<size_t>(numelOf(out_sizes)));
  std::vector<int64_t> c;
  for (size_t i = 0; i < out.size(); ++i) {
    unravel(static_cast<int64_t>(i), out_sizes, c);
    c[d] = source[static_cast<size_t>(c[d])];
    out[i] = v[static_cast<size_t>(ravel(c, sizes))];
  }
  return expected(out_sizes, self.dtype(), std::move(out));
}

std::vector<Sample> repeatInterleaveSamples(bool tensor_counts) {
  Rng rng(seedFor(tensor_counts ? "bp::repeat_interleave.self_Tensor" : "bp::repeat_interleave.self_int"));
  std::vector<Sample> out;
  auto counts = [&](std::vector<double> c) {
    const int64_t n = static_cast<int64_t>(c.size());
    return tensor_counts ? IValue(indexTensor(c, {n})) : IValue(static_cast<int64_t>(c[0]));
  };
  auto push = [&](std::string name, Tensor self, IValue repeats, IValue dim) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), std::move(repeats), std::move(dim)}));
  };
  for (ScalarType dt : kAllTypes)
    push("[2,3] along 1" + dtypeSuffix(dt), integerTensor(rng, {2, 3}, dt), counts({2, 0, 3}), IValue(int64_t{1}));
  const ScalarType f = ScalarType::Float32;
  push("flattened", integerTensor(rng, {2, 2}, f), counts({1, 3, 0, 2}), IValue());
  push("along 0 of a transposed [3,2]", integerTensor(rng, {2, 3}, f).t(), counts({2, 1, 1}), IValue(int64_t{0}));
  push("0-d", integerTensor(rng, {}, f), counts({3}), IValue(int64_t{0}));
  out.push_back(raising("a negative count",
                        {IValue(integerTensor(rng, {3}, f)), counts({-1, 1, 1}), IValue(int64_t{0})},
                        "negative repeats"));
  if (tensor_counts) {
    out.push_back(raising("two counts for three elements",
                          {IValue(integerTensor(rng, {3}, f)), counts({1, 2}), IValue(int64_t{0})},
                          "one count per element"));
  }
  return out;
}

Expected repeatCountsReference(const Sample& s) {
  std::vector<double> out;
  const std::vector<double> c = valuesOf(s.args[0].toTensor());
  for (size_t i = 0; i < c.size(); ++i) out.insert(out.end(), static_cast<size_t>(c[i]), static_cast<double>(i));
  const int64_t n = static_cast<int64_t>(out.size());
  return expected({n}, ScalarType::Int64, std::move(out));
}

std::vector<Sample> repeatCountsSamples() {
  std::vector<Sample> out;
  out.push_back(makeSample("[2,0,3,1]", {IValue(indexTensor({2, 0, 3, 1}, {4}))}));
  out.push_back(makeSample("int32 [1,1]", {IValue(indexTensor({1, 1}, {2}, ScalarType::Int32))}));
  out.push_back(makeSample("trailing zeros", {IValue(indexTensor({1, 0, 0}, {3}))}));
  out.push_back(makeSample("empty", {IValue(indexTensor({}, {0}))}));
  out.push_back(raising("2-d counts", {IValue(indexTensor({1, 2}, {1, 2}))}, "counts must be 1-d"));
  return out;
}

// --- _unique2: sorted distinct values, inverse positions, counts.

std::vector<Expected> uniqueReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const bool inverse = s.args[2].toBool(), counts = s.args[3].toBool();
  const std::vector<double> v = valuesOf(self);
  std::vector<double> distinct = v;
  // NaN sorts last and each NaN is its own value, as in a stable sort with NaN the largest.
  std::stable_sort(distinct.begin(), distinct.end(),
                   [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : (!std::isnan(a) && a < b); });
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());  // NaN != NaN: kept
  auto position = [&](double x) {
    for (size_t k = 0; k < distinct.size(); ++k)
      if (distinct[k] == x) return static_cast<double>(k);
    return -1.0;
  };
  std::vector<double> inv, cnt(distinct.size(), 0);
  for (double x : v) {
    const double k = position(x);
    inv.push_back(k);
    if (k >= 0) cnt[static_cast<size_t>(k)] += 1;
  }
  const int64_t n = static_cast<int64_t>(distinct.size());
  return {expected({n}, self.dtype(), distinct),
          inverse ? expected(sizesOf(self), ScalarType::Int64, inv) : expected({0}, ScalarType::Int64, {}),
          counts ? expected({n}, ScalarType::Int64, cnt) : expected({0}, ScalarType::Int64, {})};
}

std::vector<Sample> uniqueSamples() {
  Rng rng(seedFor("bp::_unique2"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, bool inverse, bool counts) {
    out.push_back(
        makeSample(std::move(name), {IValue(std::move(self)), IValue(true), IValue(inverse), IValue(counts)}));
  };
  for (ScalarType dt : kAllTypes)
    push("[4,5] with inverse and counts" + dtypeSuffix(dt), integerTensor(rng, {4, 5}, dt), true, true);
  const ScalarType f = ScalarType::Float32;
  push("values only", integerTensor(rng, {7}, f), false, false);
  push("inverse only, transposed", integerTensor(rng, {3, 4}, f).t(), true, false);
  push("counts only, 0-d", integerTensor(rng, {}, f), false, true);
  push("-0 and 0, inf", hostTensor({0, -0.0, kInf, -kInf, 1, 0}, {6}, f), true, true);
  push("empty", integerTensor(rng, {0, 3}, f), true, true);
  push("large [300,200]", integerTensor(rng, {300, 200}, f), true, true);
  return out;
}

// --- isclose

Expected iscloseReference(const Sample& s) {
  const Tensor& a = s.args[0].toTensor();
  const Tensor& b = s.args[1].toTensor();
  const double rtol = s.args[2].toDouble(), atol = s.args[3].toDouble();
  const bool equal_nan = s.args[4].toBool();
  const std::vector<int64_t> sizes = broadcastShape(sizesOf(a), sizesOf(b));
  const std::vector<double> av = valuesOf(a), bv = valuesOf(b);
  std::vector<double> out;
  for (int64_t i = 0; i < numelOf(sizes); ++i) {
    const double x = av[static_cast<size_t>(broadcastIndex(sizesOf(a), sizes, i))];
    const double y = bv[static_cast<size_t>(broadcastIndex(sizesOf(b), sizes, i))];
    bool close = x == y || (equal_nan && std::isnan(x) && std::isnan(y));
    const double error = std::abs(x - y);
    // The tolerance as the op computes it, in the inputs' precision.
    const ScalarType t = isFloatingType(a.dtype()) ? a.dtype() : ScalarType::Float32;
    close = close || (std::isfinite(error) && roundTo(t, error) <= roundTo(t, atol + rtol * std::abs(y)));
    out.push_back(close ? 1 : 0);
  }
  return expected(sizes, ScalarType::Bool, std::move(out));
}

std::vector<Sample> iscloseSamples() {
  Rng rng(seedFor("bp::isclose"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor a, Tensor b, double rtol, double atol, bool equal_nan) {
    out.push_back(makeSample(
        std::move(name), {IValue(std::move(a)), IValue(std::move(b)), IValue(rtol), IValue(atol), IValue(equal_nan)}));
  };
  const double nan = std::nan("");
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64}) {
    push("exact, near, far, inf, nan" + dtypeSuffix(dt), hostTensor({1, 1, 1, kInf, nan, -kInf}, {6}, dt),
         hostTensor({1, 1.0 + 1e-3, 2, kInf, nan, kInf}, {6}, dt), 1e-2, 0, false);
    push("equal_nan" + dtypeSuffix(dt), hostTensor({nan, 0, 1e-9}, {3}, dt), hostTensor({nan, 1e-9, 0}, {3}, dt), 0,
         1e-8, true);
  }
  push("int64 within atol", hostTensor({1, 5, 10}, {3}, ScalarType::Int64),
       hostTensor({2, 5, 12}, {3}, ScalarType::Int64), 0, 1.5, false);
  push("broadcast [3,1] with [4]", randomTensor(rng, {3, 1}, ScalarType::Float32),
       randomTensor(rng, {4}, ScalarType::Float32), 0.5, 0.1, false);
  out.push_back(raising("float32 with float64",
                        {IValue(hostTensor({1}, {1}, ScalarType::Float32)),
                         IValue(hostTensor({1}, {1}, ScalarType::Float64)), IValue(1e-5), IValue(1e-8), IValue(false)},
                        "dtypes differ"));
  out.push_back(raising("negative rtol",
                        {IValue(hostTensor({1}, {1}, ScalarType::Float32)),
                         IValue(hostTensor({1}, {1}, ScalarType::Float32)), IValue(-1.0), IValue(1e-8), IValue(false)},
                        "negative tolerance"));
  return out;
}

void add(std::vector<OpSpec>& specs, std::string op, std::function<std::vector<Sample>()> samples,
         std::function<Expected(const Sample&)> reference, std::string inplace = "", std::string out = "") {
  addOneResultSpec(specs, "indexing", std::move(op), std::move(samples), std::move(reference), std::move(inplace),
                   std::move(out));
}

}  // namespace

void addIndexingSpecs(std::vector<OpSpec>& specs) {
  add(
      specs, "bp::scatter.src", [] { return scatterSamples(false); }, scatterReference, "bp::scatter_.src",
      "bp::scatter.src_out");
  add(
      specs, "bp::scatter.value", [] { return scatterSamples(true); }, scatterReference, "bp::scatter_.value");
  add(specs, "bp::index.Tensor", indexSamples, indexReference);
  add(specs, "bp::index_put", indexPutSamples, indexPutReference, "bp::index_put_");
  add(specs, "bp::nonzero", nonzeroSamples, nonzeroReference, "", "bp::nonzero.out");
  add(specs, "bp::masked_select", maskedSelectSamples, maskedSelectReference, "", "bp::masked_select.out");
  add(specs, "bp::index_add", indexAddSamples, indexAddReference, "bp::index_add_", "bp::index_add.out");
  add(
      specs, "bp::tril", [] { return triangleSamples("bp::tril"); },
      [](const Sample& s) { return triangleReference(s, true); }, "bp::tril_", "bp::tril.out");
  add(
      specs, "bp::triu", [] { return triangleSamples("bp::triu"); },
      [](const Sample& s) { return triangleReference(s, false); }, "bp::triu_", "bp::triu.out");
  add(specs, "bp::roll", rollSamples, rollReference, "", "bp::roll.out");
  add(specs, "bp::repeat", repeatSamples, repeatReference, "", "bp::repeat.out");
  add(
      specs, "bp::repeat_interleave.self_int", [] { return repeatInterleaveSamples(false); },
      repeatInterleaveReference);
  add(
      specs, "bp::repeat_interleave.self_Tensor", [] { return repeatInterleaveSamples(true); },
      repeatInterleaveReference);
  add(specs, "bp::repeat_interleave.Tensor", repeatCountsSamples, repeatCountsReference);
  add(specs, "bp::isclose", iscloseSamples, iscloseReference);
  OpSpec unique;
  unique.op = "bp::_unique2";
  unique.family = "indexing";
  unique.samples = uniqueSamples;
  unique.reference = uniqueReference;
  specs.push_back(std::move(unique));
}

}  // namespace backplane::conformance
