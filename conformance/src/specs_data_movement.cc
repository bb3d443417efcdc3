// Conformance specs of the data_movement family: cat, stack, copies and
// conversions, gather, index_select, scatter_add, masked_fill, where and
// embedding (Note [Conformance specs]).
//
// Not specced: copy_ between two devices, since the runner stages every
// argument of a sample on the one backend under test (copy_ and
// _copy_on_device_ are certified within a device; the device API checks
// certify the copies between devices).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/spec.h"
#include "backplane/core/scalar.h"
#include "sample_util.h"

namespace backplane::conformance {
namespace {

// A random int64 index tensor with values in [0, bound).
Tensor randomIndex(Rng& rng, std::vector<int64_t> sizes, int64_t bound) {
  return randomTensor(rng, std::move(sizes), ScalarType::Int64, Range{0, 1, 0, bound - 1});
}

Tensor randomMask(Rng& rng, std::vector<int64_t> sizes) {
  return randomTensor(rng, std::move(sizes), ScalarType::Bool);
}

int64_t wrapDim(int64_t dim, int64_t ndim) { return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim; }

// The product of sizes[begin, end).
int64_t span(const std::vector<int64_t>& sizes, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= sizes[d];
  return n;
}

// Integer argument i of a sample, or `fallback` (the schema's default)
// where the sample leaves it off.
int64_t intArg(const Sample& s, size_t i, int64_t fallback) {
  return i < s.args.size() && !s.args[i].isNone() ? s.args[i].toInt() : fallback;
}

// --- cat and stack

// The tensors concatenated along `dim`, each seen with the shape of
// `shapes` (stack inserts a 1 at dim), converted to dtype.
Expected concatenate(const std::vector<Tensor>& tensors, const std::vector<std::vector<int64_t>>& shapes, int64_t dim,
                     ScalarType dtype) {
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const std::vector<int64_t>& s : shapes) {
    if (s.size() == 1 && s[0] == 0) continue;  // cat's legacy rule: a [0] tensor is skipped
    sizes = s;
    total += s[static_cast<size_t>(dim)];
  }
  if (sizes.empty()) return expected({0}, dtype, {});
  const size_t d = static_cast<size_t>(dim);
  sizes[d] = total;
  const int64_t outer = span(sizes, 0, d), inner = span(sizes, d + 1, sizes.size());
  std::vector<double> out(static_cast<size_t>(numelOf(sizes)));
  int64_t offset = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (shapes[t].size() == 1 && shapes[t][0] == 0) continue;
    const std::vector<double> v = valuesOf(tensors[t]);
    const int64_t rows = shapes[t][d] * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < rows; ++j)
        out[static_cast<size_t>(o * total * inner + offset * inner + j)] = v[static_cast<size_t>(o * rows + j)];
    offset += shapes[t][d];
  }
  return expected(std::move(sizes), dtype, std::move(out));
}

ScalarType listDtype(const std::vector<Tensor>& tensors) {
  ScalarType t = tensors[0].dtype();
  for (const Tensor& x : tensors) t = promoteTypes(t, x.dtype());
  return t;
}

Sample listSample(std::string name, std::vector<Tensor> tensors, int64_t dim) {
  return makeSample(std::move(name), {IValue(std::move(tensors)), IValue(dim)});
}

std::vector<Sample> catSamples() {
  Rng rng(seedFor("bp::cat"));
  std::vector<Sample> out;
  for (ScalarType dt : kEveryType) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(listSample("[2,3] and [4,3] along dim 0" + sx,
                             {randomTensor(rng, {2, 3}, dt), randomTensor(rng, {4, 3}, dt)}, 0));
    out.push_back(
        listSample("[3,2], [3,4] and [3,1] along dim 1" + sx,
                   {randomTensor(rng, {3, 2}, dt), randomTensor(rng, {3, 4}, dt), randomTensor(rng, {3, 1}, dt)}, 1));
    out.push_back(listSample(
        "transposed and sliced (step 2) along dim -1" + sx,
        {randomTensor(rng, {4, 3}, dt).transpose(0, 1), randomTensor(rng, {3, 10}, dt).slice(1, 0, std::nullopt, 2)},
        -1));
  }
  const ScalarType f = ScalarType::Float32;
  out.push_back(
      listSample("[2,3,4] along dim 1", {randomTensor(rng, {2, 3, 4}, f), randomTensor(rng, {2, 1, 4}, f)}, 1));
  out.push_back(listSample("one tensor", {randomTensor(rng, {2, 3}, f)}, 0));
  out.push_back(listSample("one element each", {randomTensor(rng, {1}, f), randomTensor(rng, {1}, f)}, 0));
  out.push_back(listSample("empty [0,3] with [2,3]", {randomTensor(rng, {0, 3}, f), randomTensor(rng, {2, 3}, f)}, 0));
  out.push_back(listSample("all empty along dim 1", {randomTensor(rng, {0, 3}, f), randomTensor(rng, {0, 2}, f)}, 1));
  out.push_back(listSample("legacy empty [0] is skipped beside [2,3]",
                           {randomTensor(rng, {0}, f), randomTensor(rng, {2, 3}, f)}, 1));
  out.push_back(
      listSample("expanded input", {randomTensor(rng, {1, 3}, f).expand({2, 3}), randomTensor(rng, {2, 3}, f)}, 0));
  out.push_back(listSample("promotion int32, float32 and bool",
                           {randomTensor(rng, {2, 2}, ScalarType::Int32), randomTensor(rng, {1, 2}, f),
                            randomTensor(rng, {1, 2}, ScalarType::Bool)},
                           0));
  out.push_back(listSample("large [1100,600] and [1100,400] float32 along dim 1",
                           {randomTensor(rng, {1100, 600}, f), randomTensor(rng, {1100, 400}, f)}, 1));
  out.push_back(
      raising("empty list", {IValue(std::vector<Tensor>{}), IValue(int64_t{0})}, "no tensors to concatenate"));
  out.push_back(
      raising("a 0-d tensor",
              {IValue(std::vector<Tensor>{randomTensor(rng, {}, f), randomTensor(rng, {1}, f)}), IValue(int64_t{0})},
              "0-d tensors cannot be concatenated"));
  out.push_back(raising(
      "[2,3] and [2,4] along dim 0",
      {IValue(std::vector<Tensor>{randomTensor(rng, {2, 3}, f), randomTensor(rng, {2, 4}, f)}), IValue(int64_t{0})},
      "sizes differ outside the concatenated dimension"));
  out.push_back(raising(
      "[2,3] and [3] (ranks differ)",
      {IValue(std::vector<Tensor>{randomTensor(rng, {2, 3}, f), randomTensor(rng, {3}, f)}), IValue(int64_t{0})},
      "tensors of different ranks"));
  out.push_back(raising(
      "dim 2 of 2-d tensors",
      {IValue(std::vector<Tensor>{randomTensor(rng, {2, 3}, f), randomTensor(rng, {2, 3}, f)}), IValue(int64_t{2})},
      "dimension out of range"));
  return out;
}

Expected catReference(const Sample& s) {
  const std::vector<TensorBase>& list = s.args[0].toTensorList();
  const std::vector<Tensor> tensors(list.begin(), list.end());
  std::vector<std::vector<int64_t>> shapes;
  int64_t ndim = 1;
  for (const Tensor& t : tensors) {
    shapes.push_back(sizesOf(t));
    if (!(t.dim() == 1 && t.numel() == 0)) ndim = t.dim();
  }
  return concatenate(tensors, shapes, wrapDim(intArg(s, 1, 0), ndim), listDtype(tensors));
}

std::vector<Sample> stackSamples() {
  Rng rng(seedFor("bp::stack"));
  std::vector<Sample> out;
  auto three = [&](std::vector<int64_t> sizes, ScalarType dt) {
    return std::vector<Tensor>{randomTensor(rng, sizes, dt), randomTensor(rng, sizes, dt),
                               randomTensor(rng, sizes, dt)};
  };
  for (ScalarType dt : kEveryType) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(listSample("three [2,3] at dim 0" + sx, three({2, 3}, dt), 0));
    out.push_back(listSample("three [2,3] at dim 1" + sx, three({2, 3}, dt), 1));
    out.push_back(listSample("three [2,3] at dim -1" + sx, three({2, 3}, dt), -1));
  }
  const ScalarType f = ScalarType::Float32;
  out.push_back(listSample("three 0-d", three({}, f), 0));
  out.push_back(listSample("one tensor", three({1}, f), 0));
  out.push_back(listSample("empty [0,3] at dim 1", three({0, 3}, f), 1));
  out.push_back(listSample(
      "transposed, sliced (step 3) and expanded",
      {randomTensor(rng, {3, 2}, f).transpose(0, 1), randomTensor(rng, {2, 9}, f).slice(1, 0, std::nullopt, 3),
       randomTensor(rng, {1, 3}, f).expand({2, 3})},
      1));
  out.push_back(listSample("promotion int64 and float64",
                           {randomTensor(rng, {2}, ScalarType::Int64), randomTensor(rng, {2}, ScalarType::Float64)},
                           0));
  out.push_back(listSample("large two [1100,500] float32 at dim 1",
                           {randomTensor(rng, {1100, 500}, f), randomTensor(rng, {1100, 500}, f)}, 1));
  out.push_back(raising("empty list", {IValue(std::vector<Tensor>{}), IValue(int64_t{0})}, "no tensors to stack"));
  out.push_back(raising(
      "[2,3] and [3,2]",
      {IValue(std::vector<Tensor>{randomTensor(rng, {2, 3}, f), randomTensor(rng, {3, 2}, f)}), IValue(int64_t{0})},
      "shapes differ"));
  out.push_back(raising("dim 3 of 2-d tensors", {IValue(three({2, 3}, f)), IValue(int64_t{3})},
                        "dimension out of range (the result has 3)"));
  return out;
}

Expected stackReference(const Sample& s) {
  const std::vector<TensorBase>& list = s.args[0].toTensorList();
  const std::vector<Tensor> tensors(list.begin(), list.end());
  const int64_t dim = wrapDim(intArg(s, 1, 0), tensors[0].dim() + 1);
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor& t : tensors) {
    std::vector<int64_t> shape = sizesOf(t);
    shape.insert(shape.begin() + dim, 1);
    shapes.push_back(std::move(shape));
  }
  return concatenate(tensors, shapes, dim, listDtype(tensors));
}

// --- copy_, _copy_on_device_ and the to overloads: values converted to a dtype.

// Values that every pair of dtypes converts the same way in C++ and
// PyTorch: no negative float into uint8, nothing out of the target's range.
Range conversionRange(ScalarType to) {
  return to == ScalarType::UInt8 || isBarebonesUnsignedType(to) ? Range{0, 100, 0, 100} : Range{-100, 100, -100, 100};
}

// src broadcast into self: self's shape and dtype, src's values.
Expected copyReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const Tensor& src = s.args[1].toTensor();
  const std::vector<int64_t> sizes = sizesOf(self), src_sizes = sizesOf(src);
  const std::vector<double> v = valuesOf(src);
  std::vector<double> out(static_cast<size_t>(numelOf(sizes)));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = v[static_cast<size_t>(broadcastIndex(src_sizes, sizes, static_cast<int64_t>(i)))];
  return expected(sizes, self.dtype(), std::move(out));
}

std::vector<Sample> copySamples(const std::string& op) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, Tensor src) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(std::move(src))}));
  };
  for (ScalarType dt : kEveryType) {
    push("same shape and dtype" + dtypeSuffix(dt), randomTensor(rng, {3, 4}, dt), randomTensor(rng, {3, 4}, dt));
    push("float32 into" + dtypeSuffix(dt), randomTensor(rng, {3, 4}, dt),
         randomTensor(rng, {3, 4}, ScalarType::Float32, conversionRange(dt)));
    push("into transposed self from int32 to" + dtypeSuffix(dt), randomTensor(rng, {4, 3}, dt).transpose(0, 1),
         randomTensor(rng, {3, 4}, ScalarType::Int32, conversionRange(dt)));
  }
  const ScalarType f = ScalarType::Float32;
  push("into sliced self (step 2)", randomTensor(rng, {3, 8}, f).slice(1, 1, std::nullopt, 2),
       randomTensor(rng, {3, 4}, f));
  push("broadcast src [4] into [3,4]", randomTensor(rng, {3, 4}, f), randomTensor(rng, {4}, f));
  push("broadcast src [3,1] into [2,3,4]", randomTensor(rng, {2, 3, 4}, f), randomTensor(rng, {3, 1}, f));
  push("0-d src into [2,3]", randomTensor(rng, {2, 3}, ScalarType::Int64), randomTensor(rng, {}, f));
  push("0-d into 0-d", randomTensor(rng, {}, ScalarType::Float64), randomTensor(rng, {}, ScalarType::BFloat16));
  push("expanded src", randomTensor(rng, {3, 4}, f), randomTensor(rng, {3, 1}, f).expand({3, 4}));
  push("transposed src into sliced self", randomTensor(rng, {4, 6}, f).slice(0, 0, std::nullopt, 2),
       randomTensor(rng, {6, 2}, ScalarType::Float64).transpose(0, 1));
  push("empty [0,3]", randomTensor(rng, {0, 3}, f), randomTensor(rng, {0, 3}, ScalarType::Int32));
  push("large [1100,1000] float32 from transposed float16", randomTensor(rng, {1100, 1000}, f),
       randomTensor(rng, {1000, 1100}, ScalarType::Float16).transpose(0, 1));
  out.push_back(raising("src [3] into self [3,4]",
                        {IValue(randomTensor(rng, {3, 4}, f)), IValue(randomTensor(rng, {3}, f))},
                        "src does not broadcast to self's shape"));
  out.push_back(raising("src [2,3,4] into self [3,4]",
                        {IValue(randomTensor(rng, {3, 4}, f)), IValue(randomTensor(rng, {2, 3, 4}, f))},
                        "src has more dimensions than self"));
  out.push_back(raising("into expanded self",
                        {IValue(randomTensor(rng, {1, 4}, f).expand({3, 4})), IValue(randomTensor(rng, {3, 4}, f))},
                        "self has overlapping elements"));
  return out;
}

void addCopy(std::vector<OpSpec>& specs, const std::string& op) {
  OpSpec spec;
  spec.op = op;
  spec.family = "data_movement";
  spec.samples = [op] { return copySamples(op); };
  spec.reference = [](const Sample& s) { return std::vector<Expected>{copyReference(s)}; };
  // The op is itself in place: run again as the in-place form, it is also
  // certified to write into self and return it.
  spec.inplace = op;
  specs.push_back(std::move(spec));
}

// to.dtype, to.dtype_layout and to.device: every pair of dtypes,
// non-contiguous inputs, and the no-copy and copy=True cases. to.device's
// device, and to.dtype_layout's when given, is the backend's own (the host
// device the runner replaces): the result stays on the backend.
// to.dtype_layout's dtype is optional.
enum class ToForm { Dtype, DtypeLayout, Device };

std::vector<Sample> toSamples(const std::string& op, ToForm form) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto args = [&](Tensor self, IValue dtype, bool copy, IValue device) {
    std::vector<IValue> a = {IValue(std::move(self))};
    if (form == ToForm::Device) a.push_back(std::move(device));
    a.push_back(std::move(dtype));
    if (form == ToForm::DtypeLayout) a.push_back(std::move(device));
    a.insert(a.end(), {IValue(false), IValue(copy)});
    return a;
  };
  auto push = [&](std::string name, Tensor self, IValue dtype, bool copy = false) {
    out.push_back(makeSample(std::move(name), args(std::move(self), std::move(dtype), copy,
                                                   form == ToForm::Device ? backendDevice() : IValue())));
  };
  for (ScalarType from : kEveryType) {
    for (ScalarType to : kEveryType) {
      push(std::string(scalarTypeName(from)) + " to" + dtypeSuffix(to),
           randomTensor(rng, {2, 3}, from, conversionRange(to)), IValue(to));
    }
  }
  const ScalarType f = ScalarType::Float32;
  push("transposed float64 to float32", randomTensor(rng, {4, 3}, ScalarType::Float64).t(), IValue(f));
  push("expanded int32 to float16", randomTensor(rng, {1, 3}, ScalarType::Int32).expand({4, 3}),
       IValue(ScalarType::Float16));
  push("0-d float32 to int64", randomTensor(rng, {}, f), IValue(ScalarType::Int64));
  push("empty [0,4] to float64", randomTensor(rng, {0, 4}, f), IValue(ScalarType::Float64));
  push("same dtype, copy=True", randomTensor(rng, {2, 3}, f), IValue(f), true);
  push("sliced (step 2), same dtype, copy=True", randomTensor(rng, {3, 8}, f).slice(1, 0, std::nullopt, 2), IValue(f),
       true);
  push("large [1100,1000] float32 to bfloat16", randomTensor(rng, {1100, 1000}, f), IValue(ScalarType::BFloat16));
  if (form == ToForm::DtypeLayout) {
    push("dtype omitted", randomTensor(rng, {2, 3}, ScalarType::Int8), IValue());
    out.push_back(makeSample(
        "device given, int32 to float64",
        args(randomTensor(rng, {2, 3}, ScalarType::Int32), IValue(ScalarType::Float64), false, backendDevice())));
  }
  out.push_back(raising("undefined self", args(Tensor(), IValue(f), false, backendDevice()), "self is undefined"));
  return out;
}

// self's values in `dtype`.
Expected converted(const Tensor& self, ScalarType dtype) { return expected(sizesOf(self), dtype, valuesOf(self)); }

void addTo(std::vector<OpSpec>& specs, const std::string& op, ToForm form) {
  OpSpec spec;
  spec.op = op;
  spec.family = "data_movement";
  spec.samples = [op, form] { return toSamples(op, form); };
  spec.reference = [form](const Sample& s) {
    const Tensor& self = s.args[0].toTensor();
    const IValue& dtype = s.args[form == ToForm::Device ? 2 : 1];
    return std::vector<Expected>{converted(self, dtype.isNone() ? self.dtype() : dtype.toScalarType())};
  };
  specs.push_back(std::move(spec));
}

// to.other: other (staged on the same device as self) gives the dtype.
std::vector<Sample> toOtherSamples() {
  Rng rng(seedFor("bp::to.other"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, ScalarType to, std::vector<IValue> extra = {}) {
    std::vector<IValue> args = {IValue(std::move(self)), IValue(randomTensor(rng, {2}, to))};
    args.insert(args.end(), extra.begin(), extra.end());
    out.push_back(makeSample(std::move(name), std::move(args)));
  };
  for (ScalarType to : kEveryType) {
    push("float32 to" + dtypeSuffix(to), randomTensor(rng, {3, 4}, ScalarType::Float32, conversionRange(to)), to);
    push("int64 to" + dtypeSuffix(to), randomTensor(rng, {3, 4}, ScalarType::Int64, conversionRange(to)), to);
  }
  push("transposed float16 to float64", randomTensor(rng, {4, 3}, ScalarType::Float16).t(), ScalarType::Float64);
  push("0-d int32 to bfloat16", randomTensor(rng, {}, ScalarType::Int32), ScalarType::BFloat16);
  push("empty to int8", randomTensor(rng, {0}, ScalarType::Float32), ScalarType::Int8);
  push("same dtype, copy=True", randomTensor(rng, {2, 3}, ScalarType::Float64), ScalarType::Float64,
       {IValue(false), IValue(true)});
  out.push_back(raising("undefined other", {IValue(randomTensor(rng, {2}, ScalarType::Float32)), IValue(Tensor())},
                        "other is undefined"));
  return out;
}

// --- gather, index_select, scatter_add

// gather: out[p] = self[p with p[dim] = index[p]].
Expected gatherReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const Tensor& index = s.args[2].toTensor();
  const size_t d = static_cast<size_t>(wrapDim(s.args[1].toInt(), self.dim()));
  const std::vector<int64_t> self_sizes = atLeast1d(self), index_sizes = atLeast1d(index);
  const std::vector<double> sv = valuesOf(self), iv = valuesOf(index);
  std::vector<double> out(iv.size());
  std::vector<int64_t> c;
  for (size_t i = 0; i < iv.size(); ++i) {
    unravel(static_cast<int64_t>(i), index_sizes, c);
    c[d] = static_cast<int64_t>(iv[i]);
    out[i] = sv[static_cast<size_t>(ravel(c, self_sizes))];
  }
  return expected(sizesOf(index), self.dtype(), std::move(out));
}

std::vector<Sample> gatherSamples() {
  Rng rng(seedFor("bp::gather"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, int64_t dim, Tensor index, std::vector<IValue> extra = {}) {
    std::vector<IValue> args = {IValue(std::move(self)), IValue(dim), IValue(std::move(index))};
    args.insert(args.end(), extra.begin(), extra.end());
    out.push_back(makeSample(std::move(name), std::move(args)));
  };
  for (ScalarType dt : kEveryType) {
    const std::string sx = dtypeSuffix(dt);
    push("[3,4] dim 0, index [2,4]" + sx, randomTensor(rng, {3, 4}, dt), 0, randomIndex(rng, {2, 4}, 3));
    push("[3,5] dim 1, index [2,3]" + sx, randomTensor(rng, {3, 5}, dt), 1, randomIndex(rng, {2, 3}, 5));
    push("[3,4] dim -1, index [3,7] (longer than self)" + sx, randomTensor(rng, {3, 4}, dt), -1,
         randomIndex(rng, {3, 7}, 4));
  }
  const ScalarType f = ScalarType::Float32;
  push("[2,3,4] dim 1", randomTensor(rng, {2, 3, 4}, f), 1, randomIndex(rng, {2, 5, 3}, 3));
  push("0-d self and index", randomTensor(rng, {}, f), 0, indexTensor({0}, {}));
  push("one element", randomTensor(rng, {1}, f), 0, indexTensor({0}, {1}));
  push("empty index [0,4]", randomTensor(rng, {3, 4}, f), 0, randomIndex(rng, {0, 4}, 3));
  push("transposed self, sliced index (step 2)", randomTensor(rng, {4, 3}, f).t(), 1,
       randomIndex(rng, {3, 8}, 4).slice(1, 0, std::nullopt, 2));
  push("expanded index", randomTensor(rng, {3, 4}, f), 0, randomIndex(rng, {1, 4}, 3).expand({5, 4}));
  push("sparse_grad=True", randomTensor(rng, {3, 4}, f), 1, randomIndex(rng, {3, 2}, 4), {IValue(true)});
  push("large [1100,1000] float32 dim 1", randomTensor(rng, {1100, 1000}, f), 1, randomIndex(rng, {1100, 1000}, 1000));
  auto bad = [&](std::string name, Tensor index, int64_t dim, std::string reason) {
    out.push_back(raising(std::move(name),
                          {IValue(randomTensor(rng, {3, 4}, f)), IValue(dim), IValue(std::move(index))},
                          std::move(reason)));
  };
  bad("index 3 along a dim of size 3", indexTensor({0, 1, 3, 2}, {1, 4}), 0, "index out of range");
  bad("index -1", indexTensor({0, -1}, {1, 2}), 1, "negative index");
  bad("int32 index", hostTensor({0, 1}, {1, 2}, ScalarType::Int32), 1, "index must be int64");
  bad("1-d index of a 2-d self", indexTensor({0, 1}, {2}), 1, "index has another rank than self");
  bad("index [4,1] wider than self [3,4] outside dim", indexTensor({0, 1, 2, 3}, {4, 1}), 1,
      "index larger than self outside the gathered dimension");
  bad("dim 2 of a 2-d self", indexTensor({0}, {1, 1}), 2, "dimension out of range");
  return out;
}

// index_select: self's slices along dim in the order of index.
Expected indexSelectReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const std::vector<double> iv = valuesOf(s.args[2].toTensor());
  const size_t d = static_cast<size_t>(wrapDim(s.args[1].toInt(), self.dim()));
  std::vector<int64_t> sizes = atLeast1d(self);
  const int64_t outer = span(sizes, 0, d), n = sizes[d], inner = span(sizes, d + 1, sizes.size());
  const std::vector<double> sv = valuesOf(self);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(outer) * iv.size() * static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o)
    for (double k : iv)
      for (int64_t j = 0; j < inner; ++j)
        out.push_back(sv[static_cast<size_t>((o * n + static_cast<int64_t>(k)) * inner + j)]);
  if (self.dim() == 0) return expected({}, self.dtype(), std::move(out));
  sizes[d] = static_cast<int64_t>(iv.size());
  return expected(std::move(sizes), self.dtype(), std::move(out));
}

std::vector<Sample> indexSelectSamples() {
  Rng rng(seedFor("bp::index_select"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, int64_t dim, Tensor index) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(dim), IValue(std::move(index))}));
  };
  for (ScalarType dt : kEveryType) {
    const std::string sx = dtypeSuffix(dt);
    push("[4,3] dim 0, repeated indices" + sx, randomTensor(rng, {4, 3}, dt), 0, indexTensor({3, 0, 3, 1, 2}, {5}));
    push("[2,5,3] dim 1" + sx, randomTensor(rng, {2, 5, 3}, dt), 1, randomIndex(rng, {4}, 5));
    push("[4,3] dim -1" + sx, randomTensor(rng, {4, 3}, dt), -1, randomIndex(rng, {2}, 3));
  }
  const ScalarType f = ScalarType::Float32;
  push("0-d index", randomTensor(rng, {4, 3}, f), 0, indexTensor({2}, {}));
  push("0-d self", randomTensor(rng, {}, f), 0, indexTensor({0}, {1}));
  push("empty index", randomTensor(rng, {4, 3}, f), 1, randomIndex(rng, {0}, 3));
  push("empty self [0,3] along dim 1", randomTensor(rng, {0, 3}, f), 1, randomIndex(rng, {2}, 3));
  push("transposed self, sliced index (step 2)", randomTensor(rng, {3, 5}, f).t(), 0,
       randomIndex(rng, {8}, 5).slice(0, 0, std::nullopt, 2));
  push("int32 index", randomTensor(rng, {4, 3}, f), 0, hostTensor({1, 3}, {2}, ScalarType::Int32));
  push("large [1100,1000] float32 dim 0", randomTensor(rng, {1100, 1000}, f), 0, randomIndex(rng, {1100}, 1100));
  auto bad = [&](std::string name, Tensor self, int64_t dim, Tensor index, std::string reason) {
    out.push_back(
        raising(std::move(name), {IValue(std::move(self)), IValue(dim), IValue(std::move(index))}, std::move(reason)));
  };
  bad("index 4 along a dim of size 4", randomTensor(rng, {4, 3}, f), 0, indexTensor({1, 4}, {2}), "index out of range");
  bad("index -1", randomTensor(rng, {4, 3}, f), 0, indexTensor({-1}, {1}), "negative index");
  bad("2-d index", randomTensor(rng, {4, 3}, f), 0, indexTensor({0, 1}, {1, 2}), "index must be 0-d or 1-d");
  bad("float32 index", randomTensor(rng, {4, 3}, f), 0, hostTensor({0}, {1}, f), "index must be an integer tensor");
  bad("dim 2 of a 2-d self", randomTensor(rng, {4, 3}, f), 2, indexTensor({0}, {1}), "dimension out of range");
  bad("two indices into a 0-d self", randomTensor(rng, {}, f), 0, indexTensor({0, 0}, {2}),
      "a 0-d self takes one index");
  return out;
}

// scatter_add: self, plus src[p] added at p with p[dim] = index[p].
Expected scatterAddReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const Tensor& index = s.args[2].toTensor();
  const Tensor& src = s.args[3].toTensor();
  const size_t d = static_cast<size_t>(wrapDim(s.args[1].toInt(), self.dim()));
  const std::vector<int64_t> self_sizes = atLeast1d(self), index_sizes = atLeast1d(index), src_sizes = atLeast1d(src);
  std::vector<double> out = valuesOf(self);
  const std::vector<double> iv = valuesOf(index), srcv = valuesOf(src);
  std::vector<int64_t> c;
  for (size_t i = 0; i < iv.size(); ++i) {
    unravel(static_cast<int64_t>(i), index_sizes, c);
    const double add = srcv[static_cast<size_t>(ravel(c, src_sizes))];
    c[d] = static_cast<int64_t>(iv[i]);
    out[static_cast<size_t>(ravel(c, self_sizes))] += add;
  }
  return expected(sizesOf(self), self.dtype(), std::move(out));
}

// The order of additions into one element is unspecified (PyTorch's too),
// so every value is a small integer: the sums are exact in every dtype and
// the reference holds whatever order a kernel adds in.
std::vector<Sample> scatterAddSamples() {
  Rng rng(seedFor("bp::scatter_add"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, int64_t dim, Tensor index, Tensor src) {
    out.push_back(makeSample(std::move(name),
                             {IValue(std::move(self)), IValue(dim), IValue(std::move(index)), IValue(std::move(src))}));
  };
  for (ScalarType dt : kNumericTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("[3,4] dim 0, index [5,4] (repeats)" + sx, integerTensor(rng, {3, 4}, dt), 0, randomIndex(rng, {5, 4}, 3),
         integerTensor(rng, {5, 4}, dt));
    push("[3,5] dim 1, index [2,3] and src [3,4]" + sx, integerTensor(rng, {3, 5}, dt), 1, randomIndex(rng, {2, 3}, 5),
         integerTensor(rng, {3, 4}, dt));
    push("[3,4] dim -1, every index 0" + sx, integerTensor(rng, {3, 4}, dt), -1,
         indexTensor(std::vector<double>(9, 0), {3, 3}), integerTensor(rng, {3, 3}, dt));
  }
  const ScalarType f = ScalarType::Float32;
  push("[2,3,4] dim 2", integerTensor(rng, {2, 3, 4}, f), 2, randomIndex(rng, {2, 2, 6}, 4),
       integerTensor(rng, {2, 3, 6}, f));
  push("0-d self, index and src", integerTensor(rng, {}, f), 0, indexTensor({0}, {}), integerTensor(rng, {}, f));
  push("empty index", integerTensor(rng, {3, 4}, f), 0, randomIndex(rng, {0, 4}, 3), integerTensor(rng, {2, 4}, f));
  push("empty self [0,4] and index", integerTensor(rng, {0, 4}, f), 1, randomIndex(rng, {0, 4}, 4),
       integerTensor(rng, {0, 4}, f));
  push("transposed self, sliced src (step 2), transposed index", integerTensor(rng, {4, 3}, f).t(), 1,
       randomIndex(rng, {4, 3}, 4).t(), integerTensor(rng, {3, 10}, f).slice(1, 0, std::nullopt, 2));
  push("expanded src", integerTensor(rng, {3, 4}, f), 0, randomIndex(rng, {3, 4}, 3),
       integerTensor(rng, {1, 4}, f).expand({3, 4}));
  push("large [1100,1000] float32 dim 0", integerTensor(rng, {1100, 1000}, f), 0, randomIndex(rng, {1100, 1000}, 1100),
       integerTensor(rng, {1100, 1000}, f));
  auto bad = [&](std::string name, Tensor index, Tensor src, std::string reason) {
    out.push_back(raising(
        std::move(name),
        {IValue(integerTensor(rng, {3, 4}, f)), IValue(int64_t{0}), IValue(std::move(index)), IValue(std::move(src))},
        std::move(reason)));
  };
  bad("index 3 along a dim of size 3", indexTensor({0, 3}, {1, 2}), integerTensor(rng, {1, 2}, f),
      "index out of range");
  bad("index -1", indexTensor({-1, 0}, {1, 2}), integerTensor(rng, {1, 2}, f), "negative index");
  bad("int32 index", hostTensor({0, 1}, {1, 2}, ScalarType::Int32), integerTensor(rng, {1, 2}, f),
      "index must be int64");
  bad("float64 src into float32 self", indexTensor({0, 1}, {1, 2}), integerTensor(rng, {1, 2}, ScalarType::Float64),
      "src's dtype differs from self's");
  bad("index [2,3] larger than src [1,3]", randomIndex(rng, {2, 3}, 3), integerTensor(rng, {1, 3}, f),
      "index larger than src");
  bad("1-d index of a 2-d self", indexTensor({0}, {1}), integerTensor(rng, {1}, f), "index has another rank than self");
  out.push_back(raising("dim 2 of a 2-d self",
                        {IValue(integerTensor(rng, {3, 4}, f)), IValue(int64_t{2}), IValue(indexTensor({0}, {1, 1})),
                         IValue(integerTensor(rng, {1, 1}, f))},
                        "dimension out of range"));
  return out;
}

// --- masked_fill and where

// The fill value: a Scalar (masked_fill.Scalar) or a 0-d tensor's.
double fillValue(const IValue& v) { return v.isScalar() ? v.toScalar().toDouble() : valuesOf(v.toTensor())[0]; }

Expected maskedFillReference(const Sample& s) {
  const Tensor& self = s.args[0].toTensor();
  const Tensor& mask = s.args[1].toTensor();
  const double value = fillValue(s.args[2]);
  const std::vector<int64_t> sizes = broadcastShape(sizesOf(self), sizesOf(mask));
  const std::vector<double> sv = valuesOf(self), mv = valuesOf(mask);
  std::vector<double> out(static_cast<size_t>(numelOf(sizes)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const bool fill = mv[static_cast<size_t>(broadcastIndex(sizesOf(mask), sizes, i))] != 0;
    out[static_cast<size_t>(i)] = fill ? value : sv[static_cast<size_t>(broadcastIndex(sizesOf(self), sizes, i))];
  }
  return expected(sizes, self.dtype(), std::move(out));
}

// `value(v, dtype)` makes the value argument: a Scalar of dtype's kind
// (floating, integral or bool), or a 0-d tensor of dtype (the Tensor
// overload).
using ValueMaker = std::function<IValue(double v, ScalarType dtype)>;

std::vector<Sample> maskedFillSamples(const std::string& op, const ValueMaker& value) {
  Rng rng(seedFor(op));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor self, Tensor mask, IValue v) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(self)), IValue(std::move(mask)), std::move(v)}));
  };
  for (ScalarType dt : kAllTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("[3,4] mask [3,4]" + sx, randomTensor(rng, {3, 4}, dt), randomMask(rng, {3, 4}), value(3, dt));
    push("mask [4] broadcast" + sx, randomTensor(rng, {3, 4}, dt), randomMask(rng, {4}), value(1, dt));
    push("transposed self, mask [3,1]" + sx, randomTensor(rng, {4, 3}, dt).t(), randomMask(rng, {3, 1}), value(0, dt));
  }
  const ScalarType f = ScalarType::Float32;
  push("self [4] broadcast to mask [3,4]", randomTensor(rng, {4}, f), randomMask(rng, {3, 4}), value(-1.5, f));
  push("0-d self and mask", randomTensor(rng, {}, f), hostTensor({1}, {}, ScalarType::Bool), value(2, f));
  push("empty [0,3]", randomTensor(rng, {0, 3}, f), randomMask(rng, {3}), value(2, f));
  push("sliced self (step 2), expanded mask", randomTensor(rng, {3, 8}, f).slice(1, 0, std::nullopt, 2),
       randomMask(rng, {1, 4}).expand({3, 4}), value(7, f));
  push("value 2.75 into int32 (truncated)", randomTensor(rng, {3, 4}, ScalarType::Int32), randomMask(rng, {3, 4}),
       value(2.75, ScalarType::Float64));
  push("int value into float64", randomTensor(rng, {3, 4}, ScalarType::Float64), randomMask(rng, {3, 4}),
       value(5, ScalarType::Int64));
  push("NaN into float16", randomTensor(rng, {3, 4}, ScalarType::Float16), randomMask(rng, {3, 4}),
       value(std::nan(""), ScalarType::Float16));
  push("-inf into bfloat16", randomTensor(rng, {3, 4}, ScalarType::BFloat16), randomMask(rng, {3, 4}),
       value(-std::numeric_limits<double>::infinity(), ScalarType::Float32));
  push("large [1100,1000] float32, mask [1000]", randomTensor(rng, {1100, 1000}, f), randomMask(rng, {1000}),
       value(0.5, f));
  out.push_back(
      raising("uint8 mask",
              {IValue(randomTensor(rng, {3, 4}, f)), IValue(randomTensor(rng, {3, 4}, ScalarType::UInt8)), value(1, f)},
              "mask must be bool"));
  out.push_back(raising("self [3,4] and mask [3]",
                        {IValue(randomTensor(rng, {3, 4}, f)), IValue(randomMask(rng, {3})), value(1, f)},
                        "shapes do not broadcast"));
  out.push_back(raising(
      "300 into int8",
      {IValue(randomTensor(rng, {3}, ScalarType::Int8)), IValue(randomMask(rng, {3})), value(300, ScalarType::Int64)},
      "the value overflows self's dtype"));
  return out;
}

// `overload_samples`, if set, adds the samples only that overload has.
void addMaskedFill(std::vector<OpSpec>& specs, const std::string& overload, ValueMaker value,
                   std::function<std::vector<Sample>()> overload_samples = {}) {
  OpSpec spec;
  spec.op = "bp::masked_fill." + overload;
  spec.family = "data_movement";
  spec.samples = [op = spec.op, value, overload_samples] {
    std::vector<Sample> out = maskedFillSamples(op, value);
    if (overload_samples)
      for (Sample& s : overload_samples()) out.push_back(std::move(s));
    return out;
  };
  spec.reference = [](const Sample& s) { return std::vector<Expected>{maskedFillReference(s)}; };
  spec.inplace = "bp::masked_fill_." + overload;
  spec.out = "bp::masked_fill." + overload + "_out";
  specs.push_back(std::move(spec));
}

// where: condition ? self : other, the three broadcast, in self and other's
// common dtype.
Expected whereReference(const Sample& s) {
  const Tensor& cond = s.args[0].toTensor();
  const Tensor& a = s.args[1].toTensor();
  const Tensor& b = s.args[2].toTensor();
  const std::vector<int64_t> sizes = broadcastShape(broadcastShape(sizesOf(cond), sizesOf(a)), sizesOf(b));
  const std::vector<double> cv = valuesOf(cond), av = valuesOf(a), bv = valuesOf(b);
  std::vector<double> out(static_cast<size_t>(numelOf(sizes)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const bool c = cv[static_cast<size_t>(broadcastIndex(sizesOf(cond), sizes, i))] != 0;
    out[static_cast<size_t>(i)] = c ? av[static_cast<size_t>(broadcastIndex(sizesOf(a), sizes, i))]
                                    : bv[static_cast<size_t>(broadcastIndex(sizesOf(b), sizes, i))];
  }
  return expected(sizes, promoteArgs(a, b), std::move(out));
}

std::vector<Sample> whereSamples() {
  Rng rng(seedFor("bp::where.self"));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor cond, Tensor a, Tensor b) {
    out.push_back(makeSample(std::move(name), {IValue(std::move(cond)), IValue(std::move(a)), IValue(std::move(b))}));
  };
  for (ScalarType dt : kAllTypes) {
    const std::string sx = dtypeSuffix(dt);
    push("same shape" + sx, randomMask(rng, {3, 4}), randomTensor(rng, {3, 4}, dt), randomTensor(rng, {3, 4}, dt));
    push("broadcast [3,1], [4] and [2,1,4]" + sx, randomMask(rng, {3, 1}), randomTensor(rng, {4}, dt),
         randomTensor(rng, {2, 1, 4}, dt));
    push("transposed condition, sliced self" + sx, randomMask(rng, {4, 3}).t(),
         randomTensor(rng, {3, 8}, dt).slice(1, 0, std::nullopt, 2), randomTensor(rng, {3, 4}, dt));
  }
  const ScalarType f = ScalarType::Float32;
  push("0-d everything", hostTensor({0}, {}, ScalarType::Bool), randomTensor(rng, {}, f), randomTensor(rng, {}, f));
  push("0-d self and other", randomMask(rng, {2, 3}), randomTensor(rng, {}, f), randomTensor(rng, {}, f));
  push("empty [0,3]", randomMask(rng, {0, 3}), randomTensor(rng, {3}, f), randomTensor(rng, {0, 3}, f));
  push("expanded other", randomMask(rng, {3, 4}), randomTensor(rng, {3, 4}, f),
       randomTensor(rng, {3, 1}, f).expand({3, 4}));
  push("promotion int32 and float32", randomMask(rng, {2, 3}), randomTensor(rng, {2, 3}, ScalarType::Int32),
       randomTensor(rng, {2, 3}, f));
  push("promotion int64 and 0-d float64", randomMask(rng, {4}), randomTensor(rng, {4}, ScalarType::Int64),
       randomTensor(rng, {}, ScalarType::Float64));
  push("promotion float16 and 0-d float64 (keeps float16)", randomMask(rng, {4}),
       randomTensor(rng, {4}, ScalarType::Float16), randomTensor(rng, {}, ScalarType::Float64));
  push("large [1100,1000] float32, condition [1000]", randomMask(rng, {1000}), randomTensor(rng, {1100, 1000}, f),
       randomTensor(rng, {1100, 1000}, f));
  out.push_back(
      raising("float32 condition",
              {IValue(randomTensor(rng, {3}, f)), IValue(randomTensor(rng, {3}, f)), IValue(randomTensor(rng, {3}, f))},
              "condition must be bool"));
  out.push_back(raising(
      "shapes [2,3], [4] and [2,3]",
      {IValue(randomMask(rng, {2, 3})), IValue(randomTensor(rng, {4}, f)), IValue(randomTensor(rng, {2, 3}, f))},
      "shapes do not broadcast"));
  return out;
}

// --- embedding: rows of weight picked by indices, shape indices + [dim].

std::vector<Sample> embeddingSamples() {
  Rng rng(seedFor("bp::embedding"));
  std::vector<Sample> out;
  const std::vector<ScalarType> dtypes = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                          ScalarType::BFloat16, ScalarType::Int64};
  for (ScalarType dt : dtypes) {
    const std::string sx = dtypeSuffix(dt);
    out.push_back(makeSample("[10,4] with [3] indices" + sx,
                             {IValue(randomTensor(rng, {10, 4}, dt)), IValue(randomIndex(rng, {3}, 10))}));
    out.push_back(makeSample("[10,4] with [2,3] indices" + sx,
                             {IValue(randomTensor(rng, {10, 4}, dt)), IValue(randomIndex(rng, {2, 3}, 10))}));
  }
  const ScalarType f = ScalarType::Float32;
  out.push_back(makeSample("0-d index", {IValue(randomTensor(rng, {5, 3}, f)), IValue(indexTensor({4}, {}))}));
  out.push_back(makeSample("empty indices", {IValue(randomTensor(rng, {5, 3}, f)), IValue(randomIndex(rng, {0}, 5))}));
  out.push_back(makeSample("one row", {IValue(randomTensor(rng, {1, 3}, f)), IValue(indexTensor({0, 0}, {2}))}));
  out.push_back(makeSample(
      "transposed weight, sliced indices (step 2)",
      {IValue(randomTensor(rng, {3, 6}, f).t()), IValue(randomIndex(rng, {2, 6}, 6).slice(1, 0, std::nullopt, 2))}));
  out.push_back(makeSample(
      "int32 indices", {IValue(randomTensor(rng, {6, 2}, f)), IValue(hostTensor({5, 0, 2}, {3}, ScalarType::Int32))}));
  // padding_idx, scale_grad_by_freq and sparse change only the gradient.
  out.push_back(makeSample("padding_idx=1, scale_grad_by_freq, sparse",
                           {IValue(randomTensor(rng, {6, 2}, f)), IValue(indexTensor({1, 0, 1, 5}, {4})),
                            IValue(int64_t{1}), IValue(true), IValue(true)}));
  out.push_back(makeSample("large [1100,1000] float32, [1100] indices",
                           {IValue(randomTensor(rng, {1100, 1000}, f)), IValue(randomIndex(rng, {1100}, 1100))}));
  out.push_back(raising("index 10 of 10 rows",
                        {IValue(randomTensor(rng, {10, 4}, f)), IValue(indexTensor({2, 10}, {2}))},
                        "index out of range"));
  out.push_back(
      raising("index -1", {IValue(randomTensor(rng, {10, 4}, f)), IValue(indexTensor({-1}, {1}))}, "negative index"));
  out.push_back(
      raising("1-d weight", {IValue(randomTensor(rng, {10}, f)), IValue(indexTensor({2}, {1}))}, "weight must be 2-d"));
  out.push_back(raising("float32 indices", {IValue(randomTensor(rng, {10, 4}, f)), IValue(hostTensor({2}, {1}, f))},
                        "indices must be an integer tensor"));
  return out;
}

Expected embeddingReference(const Sample& s) {
  const Tensor& weight = s.args[0].toTensor();
  const Tensor& indices = s.args[1].toTensor();
  const int64_t dim = weight.size(1);
  const std::vector<double> wv = valuesOf(weight);
  std::vector<double> out;
  for (double i : valuesOf(indices))
    for (int64_t j = 0; j < dim; ++j) out.push_back(wv[static_cast<size_t>(static_cast<int64_t>(i) * dim + j)]);
  std::vector<int64_t> sizes = sizesOf(indices);
  sizes.push_back(dim);
  return expected(std::move(sizes), weight.dtype(), std::move(out));
}

// where with a number for self, other or both (where.ScalarOther,
// where.ScalarSelf, where.Scalar): the number promotes as a Python number
// (it never widens a tensor of its own kind; two numbers give int64, or
// float32 if either is a float, or bool) and is converted to the result.
ScalarType numberType(const Scalar& n) {
  return n.isBool() ? ScalarType::Bool : n.isIntegral() ? ScalarType::Int64 : ScalarType::Float32;
}
int category(ScalarType t) { return t == ScalarType::Bool ? 0 : isFloatingType(t) ? 2 : 1; }

Expected whereNumbersReference(const Sample& s, int number_at) {
  const Tensor& cond = s.args[0].toTensor();
  std::vector<int64_t> sizes = sizesOf(cond);
  ScalarType dt;
  Tensor tensor;
  if (number_at == 3) {  // both numbers
    const ScalarType a = numberType(s.args[1].toScalar()), b = numberType(s.args[2].toScalar());
    dt = category(a) >= category(b) ? a : b;
  } else {
    tensor = s.args[number_at == 1 ? 2 : 1].toTensor();
    const ScalarType n = numberType(s.args[static_cast<size_t>(number_at)].toScalar());
    dt = category(n) > category(tensor.dtype()) ? n : tensor.dtype();
    sizes = broadcastShape(sizes, sizesOf(tensor));
  }
  const std::vector<double> cv = valuesOf(cond);
  const std::vector<double> tv = tensor.defined() ? valuesOf(tensor) : std::vector<double>();
  auto value = [&](size_t arg, int64_t i) {
    if (s.args[arg].isScalar()) return roundTo(dt, s.args[arg].toScalar().toDouble());
    return roundTo(dt, tv[static_cast<size_t>(broadcastIndex(sizesOf(tensor), sizes, i))]);
  };
  std::vector<double> out(static_cast<size_t>(numelOf(sizes)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const bool c = cv[static_cast<size_t>(broadcastIndex(sizesOf(cond), sizes, i))] != 0;
    out[static_cast<size_t>(i)] = c ? value(1, i) : value(2, i);
  }
  return expected(sizes, dt, std::move(out));
}

// number_at: 1 (self is the number), 2 (other is) or 3 (both are).
std::vector<Sample> whereNumbersSamples(int number_at) {
  Rng rng(seedFor("bp::where numbers " + std::to_string(number_at)));
  std::vector<Sample> out;
  auto push = [&](std::string name, Tensor cond, IValue value, Scalar number) {
    std::vector<IValue> args{IValue(std::move(cond))};
    if (number_at == 1) {
      args.insert(args.end(), {IValue(number), std::move(value)});
    } else {
      args.insert(args.end(), {std::move(value), IValue(number)});
    }
    out.push_back(makeSample(std::move(name), std::move(args)));
  };
  const std::vector<Scalar> numbers = {Scalar(0.5), Scalar(int64_t{-3}), Scalar(true)};
  if (number_at == 3) {
    for (const Scalar& a : numbers)
      for (const Scalar& b : numbers)
        push("numbers " + std::string(scalarTypeName(numberType(a))) + " and " +
                 std::string(scalarTypeName(numberType(b))),
             randomMask(rng, {3, 4}), IValue(a), b);
    push("0-d condition", hostTensor({1}, {}, ScalarType::Bool), IValue(Scalar(2.5)), Scalar(int64_t{1}));
    push("empty condition [0,2]", randomMask(rng, {0, 2}), IValue(Scalar(2.5)), Scalar(1.5));
  } else {
    for (ScalarType dt : kAllTypes) {
      for (const Scalar& n : numbers) {
        push("[3,4] and " + std::string(scalarTypeName(numberType(n))) + " number" + dtypeSuffix(dt),
             randomMask(rng, {3, 4}), randomTensor(rng, {3, 4}, dt), n);
      }
    }
    const ScalarType f = ScalarType::Float32;
    push("broadcast condition [3,1] with [4]", randomMask(rng, {3, 1}), randomTensor(rng, {4}, f), Scalar(2.5));
    push("0-d float16 tensor, float number (keeps float16)", randomMask(rng, {2, 2}),
         randomTensor(rng, {}, ScalarType::Float16), Scalar(2.5));
    push("transposed tensor", randomMask(rng, {3, 4}), randomTensor(rng, {4, 3}, f).t(), Scalar(int64_t{7}));
    push("empty [0,3]", randomMask(rng, {0, 3}), randomTensor(rng, {3}, f), Scalar(1.0));
    out.push_back(raising("shapes [2,3] and [4]",
                          number_at == 1 ? std::vector<IValue>{IValue(randomMask(rng, {2, 3})), IValue(Scalar(1.0)),
                                                               IValue(randomTensor(rng, {4}, f))}
                                         : std::vector<IValue>{IValue(randomMask(rng, {2, 3})),
                                                               IValue(randomTensor(rng, {4}, f)), IValue(Scalar(1.0))},
                          "shapes do not broadcast"));
  }
  const ScalarType f = ScalarType::Float32;
  std::vector<IValue> bad{IValue(randomTensor(rng, {3}, f))};
  if (number_at == 1) bad.insert(bad.end(), {IValue(Scalar(1.0)), IValue(randomTensor(rng, {3}, f))});
  if (number_at == 2) bad.insert(bad.end(), {IValue(randomTensor(rng, {3}, f)), IValue(Scalar(1.0))});
  if (number_at == 3) bad.insert(bad.end(), {IValue(Scalar(1.0)), IValue(Scalar(0.0))});
  out.push_back(raising("float32 condition", std::move(bad), "condition must be bool"));
  return out;
}

// A spec from its samples and a reference that returns one result.
void addSpec(std::vector<OpSpec>& specs, std::string op, std::function<std::vector<Sample>()> samples,
             std::function<Expected(const Sample&)> reference, std::string inplace = "", std::string out = "") {
  addOneResultSpec(specs, "data_movement", std::move(op), std::move(samples), std::move(reference), std::move(inplace),
                   std::move(out));
}

}  // namespace

void addDataMovementSpecs(std::vector<OpSpec>& specs) {
  addSpec(specs, "bp::cat", catSamples, catReference, "", "bp::cat.out");
  addSpec(specs, "bp::stack", stackSamples, stackReference, "", "bp::stack.out");
  addCopy(specs, "bp::copy_");
  addCopy(specs, "bp::_copy_on_device_");
  addTo(specs, "bp::to.dtype", ToForm::Dtype);
  addTo(specs, "bp::to.dtype_layout", ToForm::DtypeLayout);
  addTo(specs, "bp::to.device", ToForm::Device);
  addSpec(specs, "bp::to.other", toOtherSamples,
          [](const Sample& s) { return converted(s.args[0].toTensor(), s.args[1].toTensor().dtype()); });
  addSpec(specs, "bp::gather", gatherSamples, gatherReference, "", "bp::gather.out");
  addSpec(specs, "bp::index_select", indexSelectSamples, indexSelectReference, "", "bp::index_select.out");
  addSpec(specs, "bp::scatter_add", scatterAddSamples, scatterAddReference, "bp::scatter_add_", "bp::scatter_add.out");
  addMaskedFill(specs, "Scalar", [](double v, ScalarType dt) {
    if (dt == ScalarType::Bool) return IValue(Scalar(v != 0));
    return IValue(isFloatingType(dt) ? Scalar(v) : Scalar(static_cast<int64_t>(v)));
  });
  addMaskedFill(
      specs, "Tensor", [](double v, ScalarType dt) { return IValue(hostTensor({v}, {}, dt)); },
      [] {
        return std::vector<Sample>{raising(
            "value of shape [1]",
            {IValue(hostTensor({1, 2}, {2}, ScalarType::Float32)), IValue(hostTensor({1, 0}, {2}, ScalarType::Bool)),
             IValue(hostTensor({3}, {1}, ScalarType::Float32))},
            "value must be a 0-d tensor")};
      });
  addSpec(specs, "bp::where.self", whereSamples, whereReference, "", "bp::where.self_out");
  addSpec(
      specs, "bp::where.ScalarSelf", [] { return whereNumbersSamples(1); },
      [](const Sample& s) { return whereNumbersReference(s, 1); });
  addSpec(
      specs, "bp::where.ScalarOther", [] { return whereNumbersSamples(2); },
      [](const Sample& s) { return whereNumbersReference(s, 2); });
  addSpec(
      specs, "bp::where.Scalar", [] { return whereNumbersSamples(3); },
      [](const Sample& s) { return whereNumbersReference(s, 3); });
  addSpec(specs, "bp::embedding", embeddingSamples, embeddingReference);
}

}  // namespace backplane::conformance
