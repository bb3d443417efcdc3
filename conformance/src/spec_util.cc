// Sample building and reference helpers shared by every family's specs
// (Note [Conformance specs]). Host-only code: no operator is called.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backplane/conformance/spec.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/ops/standard_ops.h"

namespace backplane::conformance {

Tolerance defaultTolerance(ScalarType t) {
  switch (t) {
    case ScalarType::Float16: return {1e-5, 1e-3};
    case ScalarType::BFloat16: return {1e-5, 1.6e-2};
    case ScalarType::Float32: return {1e-5, 1.3e-6};
    case ScalarType::Float64: return {1e-7, 1e-7};
    default: return {0, 0};
  }
}

const std::vector<ScalarType> kFloatTypes = {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16,
                                             ScalarType::BFloat16};
const std::vector<ScalarType> kNumericTypes = {ScalarType::Float32,  ScalarType::Float64, ScalarType::Float16,
                                               ScalarType::BFloat16, ScalarType::Int32,   ScalarType::Int64,
                                               ScalarType::Int8,     ScalarType::UInt8,   ScalarType::Int16};
const std::vector<ScalarType> kAllTypes = {
    ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Int32,
    ScalarType::Int64,   ScalarType::Int8,    ScalarType::UInt8,   ScalarType::Int16,    ScalarType::Bool};
const std::vector<ScalarType> kBarebonesUnsignedTypes = {ScalarType::UInt16, ScalarType::UInt32, ScalarType::UInt64};
const std::vector<ScalarType> kEveryType = [] {
  std::vector<ScalarType> v = kAllTypes;
  v.insert(v.end(), kBarebonesUnsignedTypes.begin(), kBarebonesUnsignedTypes.end());
  return v;
}();

Sample makeSample(std::string name, std::vector<IValue> args) {
  Sample s;
  s.name = std::move(name);
  s.args = std::move(args);
  return s;
}

Sample raising(std::string name, std::vector<IValue> args, std::string reason) {
  Sample s = makeSample(std::move(name), std::move(args));
  s.must_raise = true;
  s.raise_reason = std::move(reason);
  return s;
}

std::string dtypeSuffix(ScalarType t) { return " " + std::string(scalarTypeName(t)); }

IValue backendDevice() { return IValue(Device(DeviceType::CPU)); }

// splitmix64: a tiny generator with a fixed definition, so samples are the
// same on every platform and standard library.
uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform(double lo, double hi) {
  const double unit = static_cast<double>(next() >> 11) * 0x1.0p-53;  // [0, 1)
  return lo + (hi - lo) * unit;
}

int64_t Rng::integer(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % span);
}

uint64_t seedFor(const std::string& text) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

int64_t numelOf(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::vector<int64_t> sizesOf(const Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); }

Tensor optionalTensor(const IValue& v) { return v.isNone() ? Tensor() : v.toTensor(); }

double machineEpsilon(ScalarType t) {
  switch (t) {
    case ScalarType::Float64: return 0x1p-52;
    case ScalarType::Float32: return 0x1p-23;
    case ScalarType::Float16: return 0x1p-10;
    case ScalarType::BFloat16: return 0x1p-7;
    default: return 0;
  }
}

double roundTo(ScalarType t, double v) {
  switch (t) {
    case ScalarType::Bool: return v != 0 ? 1 : 0;
    case ScalarType::UInt8: return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(v)));
    case ScalarType::Int8: return static_cast<double>(static_cast<int8_t>(static_cast<int64_t>(v)));
    case ScalarType::Int32: return static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(v)));
    case ScalarType::Int64: return std::trunc(v);
    case ScalarType::Int16: return static_cast<double>(static_cast<int16_t>(static_cast<int64_t>(v)));
    case ScalarType::UInt16: return static_cast<double>(static_cast<uint16_t>(static_cast<int64_t>(v)));
    case ScalarType::UInt32: return static_cast<double>(static_cast<uint32_t>(static_cast<int64_t>(v)));
    case ScalarType::UInt64:
      return v >= 0x1p63 ? std::trunc(v) : static_cast<double>(static_cast<uint64_t>(static_cast<int64_t>(v)));
    case ScalarType::Float16: return static_cast<float>(Half(static_cast<float>(v)));
    case ScalarType::BFloat16: return static_cast<float>(BFloat16(static_cast<float>(v)));
    case ScalarType::Float32: return static_cast<float>(v);
    case ScalarType::Float64: return v;
  }
  return v;
}

Tensor hostTensor(const std::vector<double>& values, std::vector<int64_t> sizes, ScalarType dtype) {
  BP_CHECK(static_cast<int64_t>(values.size()) == numelOf(sizes), "hostTensor: ", values.size(), " values for ",
           numelOf(sizes), " elements");
  Tensor t = emptyTensor(sizes, dtype);
  visitScalarType(dtype, [&]<typename T>() {
    T* p = static_cast<T*>(t.data_ptr());
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
        p[i] = T(static_cast<float>(values[i]));
      else if constexpr (std::is_same_v<T, bool>)
        p[i] = values[i] != 0;
      else if constexpr (std::is_same_v<T, uint64_t>)
        p[i] = values[i] >= 0x1p63 ? static_cast<T>(values[i]) : static_cast<T>(static_cast<int64_t>(values[i]));
      else if constexpr (std::is_integral_v<T>)
        p[i] = static_cast<T>(static_cast<int64_t>(values[i]));  // wraps
      else
        p[i] = static_cast<T>(values[i]);
    }
  });
  return t;
}

Tensor randomTensor(Rng& rng, std::vector<int64_t> sizes, ScalarType dtype, Range range) {
  std::vector<double> values(static_cast<size_t>(numelOf(sizes)));
  for (double& v : values) {
    if (dtype == ScalarType::Bool)
      v = static_cast<double>(rng.next() & 1);
    else if (isFloatingType(dtype))
      v = rng.uniform(range.lo, range.hi);
    else {
      int64_t lo = range.ilo, hi = range.ihi;
      if (dtype == ScalarType::UInt8 || isBarebonesUnsignedType(dtype))
        lo = std::max<int64_t>(lo, 0), hi = std::max<int64_t>(hi, lo);
      v = static_cast<double>(rng.integer(lo, hi));
    }
  }
  return hostTensor(values, std::move(sizes), dtype);
}

std::vector<double> valuesOf(const Tensor& t) { return t.toVector<double>(); }

std::vector<int64_t> broadcastShape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}

int64_t broadcastIndex(const std::vector<int64_t>& sizes, const std::vector<int64_t>& out_sizes, int64_t linear) {
  // Walk the output's dims from the last; the input's dims align at the end.
  int64_t index = 0, in_stride = 1;
  const size_t shift = out_sizes.size() - sizes.size();
  for (size_t d = out_sizes.size(); d-- > 0;) {
    const int64_t coord = linear % out_sizes[d];
    linear /= out_sizes[d];
    if (d < shift) continue;
    const int64_t s = sizes[d - shift];
    if (s != 1) index += coord * in_stride;
    in_stride *= s;
  }
  return index;
}

ScalarType promoteArgs(const Tensor& a, const Tensor& b) {
  // PyTorch's result_type for two tensors: a 0-d tensor only takes part
  // when it is of a higher category (bool < integral < floating).
  auto category = [](ScalarType t) { return t == ScalarType::Bool ? 0 : isFloatingType(t) ? 2 : 1; };
  const bool a0 = a.dim() == 0, b0 = b.dim() == 0;
  if (a0 == b0) return promoteTypes(a.dtype(), b.dtype());
  const Tensor& dimful = a0 ? b : a;
  const Tensor& zero = a0 ? a : b;
  if (category(zero.dtype()) > category(dimful.dtype())) return promoteTypes(dimful.dtype(), zero.dtype());
  return dimful.dtype();
}

const std::vector<OpSpec>& allSpecs() {
  static const std::vector<OpSpec>* specs = [] {
    auto* s = new std::vector<OpSpec>();
    addElementwiseSpecs(*s);
    addElementwiseMoreSpecs(*s);
    addReductionSpecs(*s);
    addCreationSpecs(*s);
    addDataMovementSpecs(*s);
    addLinalgSpecs(*s);
    addNnSpecs(*s);
    addRandomSpecs(*s);
    addSortScanPadSpecs(*s);
    addIndexingSpecs(*s);
    addOptimSpecs(*s);
    addBackwardSpecs(*s);
    addCollectiveSpecs(*s);
    // The functional form derived from an in-place-only op (Note [Derived
    // out= forms]) runs that op's samples but the ones that must raise for
    // self's own memory (an expanded self: a dimension of stride 0), which
    // the new tensor it writes does not share.
    for (size_t i = 0, n = s->size(); i < n; ++i) {
      const StandardOp* f = derivedFunctionalOf((*s)[i].op);
      if (f == nullptr) continue;
      OpSpec spec = (*s)[i];
      spec.op = strCat(kStandardNamespace, "::", f->schema.substr(0, f->schema.find('(')));
      spec.inplace.clear();
      spec.out.clear();
      spec.samples = [samples = std::move(spec.samples)] {
        std::vector<Sample> kept = samples();
        std::erase_if(kept, [](const Sample& x) {
          if (!x.must_raise || x.args.empty() || !x.args[0].isTensor()) return false;
          const TensorBase& self = x.args[0].toTensor();
          for (int64_t d = 0; d < self.dim(); ++d)
            if (self.size(d) > 1 && self.stride(d) == 0) return true;
          return false;
        });
        return kept;
      };
      s->push_back(std::move(spec));
    }
    // An op's derived out= form (Note [Derived out= forms]) runs the op's
    // samples too.
    for (OpSpec& spec : *s) {
      if (!spec.out.empty()) continue;
      if (const StandardOp* out = derivedOutFormOf(spec.op))
        spec.out = strCat(kStandardNamespace, "::", out->schema.substr(0, out->schema.find('(')));
    }
    return s;
  }();
  return *specs;
}

}  // namespace backplane::conformance
