// Creation kernels of the CPU plugin: fill_, arange.start_out, the Philox
// draws (_philox_uniform_, _philox_normal_, _philox_bernoulli_) and the
// same-device copy _copy_on_device_ (the host's composites build empty,
// zeros, full, arange, rand, randn, dropout, copy_ and to from these; the
// host has validated every argument when a kernel runs). Every kernel takes
// any strides; big tensors are split across threads in a way that does not
// change any value (each element is computed on its own).
#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backplane/philox.h"
#include "bp_common/registration.h"
#include "cpu_common.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

// Elements below which a kernel runs on the calling thread alone.
constexpr int64_t kParallelThreshold = 32768;

// K tensors walked together over one shape: the dimensions of `shape`
// with per-operand element strides, adjacent dimensions merged wherever
// every operand allows it (a contiguous tensor becomes one row).
template <size_t K>
struct Walk {
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, K> strides;
  int64_t numel = 1;

  // `strides[k]` are operand k's strides aligned to `shape` (0 = broadcast).
  Walk(bp::IntList sizes, const std::array<std::vector<int64_t>, K>& aligned) {
    for (size_t d = 0; d < sizes.size(); ++d) {
      numel *= sizes[d];
      if (sizes[d] == 1) continue;  // size-1 dims contribute nothing
      bool merge = !shape.empty();
      for (size_t k = 0; merge && k < K; ++k) merge = strides[k].back() == aligned[k][d] * sizes[d];
      if (merge) {
        shape.back() *= sizes[d];
        for (size_t k = 0; k < K; ++k) strides[k].back() = aligned[k][d];
      } else {
        shape.push_back(sizes[d]);
        for (size_t k = 0; k < K; ++k) strides[k].push_back(aligned[k][d]);
      }
    }
    if (shape.empty()) {  // 0-d or all ones: one row of one element
      shape.push_back(1);
      for (size_t k = 0; k < K; ++k) strides[k].push_back(0);
    }
  }
  int64_t rowLength() const { return shape.back(); }

  // f(offsets, first, n, inner_strides) for the elements [e0, e1) in
  // row-major order, one call per (piece of a) row: `first` is the
  // row-major index of the piece's first element.
  template <class F>
  void elementsBetween(int64_t e0, int64_t e1, F&& f) const {
    if (e0 >= e1) return;
    const size_t outer = shape.size() - 1;
    const int64_t n = rowLength();
    std::vector<int64_t> index(outer, 0);
    std::array<int64_t, K> off{}, inner{};
    int64_t rem = e0 / n;
    for (size_t d = outer; d-- > 0;) {
      index[d] = rem % shape[d];
      rem /= shape[d];
      for (size_t k = 0; k < K; ++k) off[k] += index[d] * strides[k][d];
    }
    for (size_t k = 0; k < K; ++k) inner[k] = strides[k][outer];
    int64_t column = e0 % n;
    while (e0 < e1) {
      const int64_t len = std::min(n - column, e1 - e0);
      std::array<int64_t, K> piece;
      for (size_t k = 0; k < K; ++k) piece[k] = off[k] + column * inner[k];
      f(piece, e0, len, inner);
      e0 += len;
      column = 0;
      for (size_t d = outer; d-- > 0;) {  // next row: increment the index with carry
        if (++index[d] < shape[d]) {
          for (size_t k = 0; k < K; ++k) off[k] += strides[k][d];
          break;
        }
        for (size_t k = 0; k < K; ++k) off[k] -= (shape[d] - 1) * strides[k][d];
        index[d] = 0;
      }
    }
  }

  // Every element, in contiguous ranges split across threads when the
  // tensor is big (one long row is split too).
  template <class F>
  void forEachRow(F&& f) const {
    if (numel < kParallelThreshold) {
      elementsBetween(0, numel, f);
      return;
    }
    ThreadScope threads;
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      elementsBetween(numel * t / nt, numel * (t + 1) / nt, f);
    }
  }
};

std::vector<int64_t> stridesOf(const bp::Tensor& t) { return toVector(t.strides()); }

// src's strides aligned to `shape` (src broadcasts to it): 0 where src has
// size 1 or no dimension.
std::vector<int64_t> broadcastStrides(const bp::Tensor& src, bp::IntList shape) {
  std::vector<int64_t> s(shape.size(), 0);
  const size_t lead = shape.size() - static_cast<size_t>(src.dim());
  for (int64_t i = 0; i < src.dim(); ++i) s[lead + static_cast<size_t>(i)] = src.size(i) == 1 ? 0 : src.stride(i);
  return s;
}

// Element conversions are bp_common::convert (PyTorch's casts).

// --- fill_

bp::Tensor fill_(const bp::Tensor& self, const bp::Scalar& value) {
  const char* op = "bp::fill_.Scalar";
  checkCpu(op, self, "self");
  checkDtype(op, self, "self", kAnyDtype);
  visitAnyDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = scalarTo<T>(value);  // range-checked by the host
    T* base = self.data_ptr<T>();
    Walk<1> walk(self.sizes(), {stridesOf(self)});
    walk.forEachRow([&](const std::array<int64_t, 1>& off, int64_t, int64_t n, const std::array<int64_t, 1>& st) {
      T* p = base + off[0];
      if (st[0] == 1)
        std::fill(p, p + n, v);
      else
        for (int64_t j = 0; j < n; ++j) p[j * st[0]] = v;
    });
  });
  return self;
}

// --- arange: out[i] = start + i * step, in int64 for integral dtypes and
// double otherwise (PyTorch's accumulate types on the CPU).

bp::Tensor arange_out(const bp::Scalar& start, const bp::Scalar& end, const bp::Scalar& step, const bp::Tensor& out) {
  const char* op = "bp::arange.start_out";
  (void)end;  // the host sized `out` from it
  checkCpu(op, out, "out");
  checkDtype(op, out, "out",
             {ScalarType::UInt8, ScalarType::Int8, ScalarType::Int16, ScalarType::Int32, ScalarType::Int64,
              ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64});
  visitDtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
    if constexpr (!std::is_same_v<T, bool>) {
      const Acc s = std::is_integral_v<T> ? static_cast<Acc>(start.toInt()) : static_cast<Acc>(start.toDouble());
      const Acc d = std::is_integral_v<T> ? static_cast<Acc>(step.toInt()) : static_cast<Acc>(step.toDouble());
      T* base = out.data_ptr<T>();
      Walk<1> walk(out.sizes(), {stridesOf(out)});
      walk.forEachRow(
          [&](const std::array<int64_t, 1>& off, int64_t first, int64_t n, const std::array<int64_t, 1>& st) {
            for (int64_t j = 0; j < n; ++j) base[off[0] + j * st[0]] = store<T>(s + static_cast<Acc>(first + j) * d);
          });
    }
  });
  return out;
}

// --- Philox draws (Note [The Philox stream] in backplane/philox.h)

// Fills `self` (row-major order, any strides) from the Philox stream:
// element i from block offset + i / K, lane i % K. gen(block, values)
// computes a block's K values. Each contiguous range of elements (a row,
// or a thread's share of one) regenerates the block it starts in, so the
// split never changes a value.
template <class T, int K, class Gen>
void philoxFill(const bp::Tensor& self, uint64_t seed, uint64_t offset, Gen&& gen) {
  T* base = self.data_ptr<T>();
  Walk<1> walk(self.sizes(), {stridesOf(self)});
  walk.forEachRow([&](const std::array<int64_t, 1>& off, int64_t first, int64_t n, const std::array<int64_t, 1>& st) {
    T* p = base + off[0];
    T values[K];
    int64_t j = 0;
    while (j < n) {
      const int64_t i = first + j;
      gen(bp::philox::streamBlock(seed, offset + static_cast<uint64_t>(i / K)), values);
      for (int64_t lane = i % K; lane < K && j < n; ++lane, ++j) p[j * st[0]] = values[lane];
    }
  });
}

constexpr int kNarrow = static_cast<int>(bp::philox::elementsPerBlock(bp::philox::DrawKind::Narrow));
constexpr int kWide = static_cast<int>(bp::philox::elementsPerBlock(bp::philox::DrawKind::Wide));

// A value in [from, to) stored as T: rounding into T may reach `to`,
// which is then replaced by `from` so that the range stays half-open.
template <class T, class M>
T inRange(M u, M from, M to) {
  const T v = store<T>(from + u * (to - from));
  return load(v) >= to && from < to ? store<T>(from) : v;
}

bp::Tensor philox_uniform_(const bp::Tensor& self, double from, double to, int64_t seed, int64_t offset) {
  const char* op = "bp::_philox_uniform_";
  checkCpu(op, self, "self");
  checkDtype(op, self, "self", kFloatDtypes);
  const auto s = static_cast<uint64_t>(seed), o = static_cast<uint64_t>(offset);
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      philoxFill<T, kWide>(self, s, o, [&](const bp::philox::Words& b, T* v) {
        for (int lane = 0; lane < kWide; ++lane) v[lane] = inRange<T>(bp::philox::wideUniform(b, lane), from, to);
      });
    } else if constexpr (std::is_floating_point_v<T> || bp_common::kIsReduced<T>) {
      const float f = static_cast<float>(from), t = static_cast<float>(to);
      philoxFill<T, kNarrow>(self, s, o, [&](const bp::philox::Words& b, T* v) {
        for (int lane = 0; lane < kNarrow; ++lane) v[lane] = inRange<T>(bp::philox::narrowUniform(b, lane), f, t);
      });
    }
  });
  return self;
}

bp::Tensor philox_normal_(const bp::Tensor& self, double mean, double std, int64_t seed, int64_t offset) {
  const char* op = "bp::_philox_normal_";
  checkCpu(op, self, "self");
  checkDtype(op, self, "self", kFloatDtypes);
  const auto s = static_cast<uint64_t>(seed), o = static_cast<uint64_t>(offset);
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      philoxFill<T, kWide>(self, s, o, [&](const bp::philox::Words& b, T* v) {
        double z[kWide];
        bp::philox::wideNormals(b, z);
        for (int lane = 0; lane < kWide; ++lane) v[lane] = mean + std * z[lane];
      });
    } else if constexpr (std::is_floating_point_v<T> || bp_common::kIsReduced<T>) {
      const float m = static_cast<float>(mean), sd = static_cast<float>(std);
      philoxFill<T, kNarrow>(self, s, o, [&](const bp::philox::Words& b, T* v) {
        float z[kNarrow];
        bp::philox::narrowNormals(b, z);
        for (int lane = 0; lane < kNarrow; ++lane) v[lane] = store<T>(m + sd * z[lane]);
      });
    }
  });
  return self;
}

bp::Tensor philox_bernoulli_(const bp::Tensor& self, double p, int64_t seed, int64_t offset) {
  const char* op = "bp::_philox_bernoulli_";
  checkCpu(op, self, "self");
  checkDtype(op, self, "self", kAllDtypes);
  const auto s = static_cast<uint64_t>(seed), o = static_cast<uint64_t>(offset);
  visitDtype(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T one = store<T>(1), zero = store<T>(0);
    philoxFill<T, kNarrow>(self, s, o, [&](const bp::philox::Words& b, T* v) {
      for (int lane = 0; lane < kNarrow; ++lane) v[lane] = bp::philox::uniformWord(b.w[lane]) < p ? one : zero;
    });
  });
  return self;
}

// --- _copy_on_device_: self = src (broadcast), converting dtypes.

template <class O, class I>
void copyLoop(const bp::Tensor& self, const bp::Tensor& src) {
  O* dst = self.data_ptr<O>();
  const I* from = src.data_ptr<const I>();
  Walk<2> walk(self.sizes(), {stridesOf(self), broadcastStrides(src, self.sizes())});
  walk.forEachRow([&](const std::array<int64_t, 2>& off, int64_t, int64_t n, const std::array<int64_t, 2>& st) {
    O* d = dst + off[0];
    const I* s = from + off[1];
    if (st[0] == 1 && st[1] == 1) {
      for (int64_t j = 0; j < n; ++j) d[j] = convert<O>(s[j]);
    } else if (st[0] == 1 && st[1] == 0) {
      std::fill(d, d + n, convert<O>(*s));
    } else {
      for (int64_t j = 0; j < n; ++j) d[j * st[0]] = convert<O>(s[j * st[1]]);
    }
  });
}

bp::Tensor copy_on_device_(const bp::Tensor& self, const bp::Tensor& src) {
  const char* op = "bp::_copy_on_device_";
  checkCpu(op, self, "self");
  checkCpu(op, src, "src");
  if (self.numel() == 0) return self;
  // The common case, a plain copy of one buffer into another: memcpy in
  // chunks, one per thread for big tensors.
  if (self.dtype() == src.dtype() && self.is_contiguous() && src.is_contiguous() && self.numel() == src.numel()) {
    auto* d = static_cast<char*>(self.data_ptr());
    const auto* s = static_cast<const char*>(src.data_ptr());
    const int64_t bytes = self.numel() * static_cast<int64_t>(self.element_size());
    if (d == s) return self;  // two views of the same elements
    if (self.numel() < kParallelThreshold) {
      std::memcpy(d, s, static_cast<size_t>(bytes));
      return self;
    }
    ThreadScope threads;
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t b0 = bytes * t / nt, b1 = bytes * (t + 1) / nt;
      std::memcpy(d + b0, s + b0, static_cast<size_t>(b1 - b0));
    }
    return self;
  }
  visitAnyDtype(self.dtype(), [&](auto out_tag) {
    using O = decltype(out_tag);
    visitAnyDtype(src.dtype(), [&](auto in_tag) { copyLoop<O, decltype(in_tag)>(self, src); });
  });
  return self;
}

}  // namespace

namespace bp_cpu {

void registerCreationKernels(bp::Library& m) { BP_REGISTER_CREATION_KERNELS(m, kCpu); }

}  // namespace bp_cpu
