// Elementwise kernels of the CPU plugin (structured: each computes into the
// `out` the host has sized with the op's shape rule).
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu_common.h"
#include "kernels.h"

namespace {

using namespace bp_cpu;

bool supported(ScalarType t) {
  return t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::Int32 || t == ScalarType::Int64;
}

void checkInput(const char* op, const bp::Tensor& t, const char* arg) {
  BP_PLUGIN_CHECK(t.device().type == kCpu, std::string(op) + ": argument '" + arg + "' is on device type " +
                                               std::to_string(t.device().type) + ", expected cpu");
  BP_PLUGIN_CHECK(supported(t.dtype()), std::string(op) + " on cpu: argument '" + arg + "' has dtype " +
                                            bp::name(t.dtype()) + "; supported: float32, float64, int32, int64");
}

std::vector<int64_t> toVector(bp::IntList l) { return std::vector<int64_t>(l.begin(), l.end()); }

// t's strides aligned to `shape` (right-aligned; 0 where t is broadcast).
std::vector<int64_t> alignedStrides(const bp::Tensor& t, const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 0);
  size_t off = shape.size() - static_cast<size_t>(t.dim());
  for (int64_t i = 0; i < t.dim(); ++i)
    s[off + static_cast<size_t>(i)] = t.size(i) == 1 ? 0 : t.stride(i);
  return s;
}

// Calls inner(offsets[K], n, inner_strides[K]) over the outer dimensions of
// `shape` for K operands with the given element strides.
template <size_t K, typename Inner>
void forEachRow(const std::vector<int64_t>& shape, const std::array<std::vector<int64_t>, K>& strides, Inner&& inner) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0) return;
  const size_t nd = shape.size();
  if (nd == 0) {
    std::array<int64_t, K> offs{}, st{};
    inner(offs, int64_t{1}, st);
    return;
  }
  std::array<int64_t, K> inner_strides;
  for (size_t k = 0; k < K; ++k) inner_strides[k] = strides[k][nd - 1];
  std::vector<int64_t> index(nd, 0);
  for (int64_t done = 0; done < numel; done += shape[nd - 1]) {
    std::array<int64_t, K> offs{};
    for (size_t d = 0; d + 1 < nd; ++d)
      for (size_t k = 0; k < K; ++k) offs[k] += index[d] * strides[k][d];
    inner(offs, shape[nd - 1], inner_strides);
    for (size_t d = nd - 1; d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

template <typename F>
decltype(auto) visit(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Float32: return f(float{});
    case ScalarType::Float64: return f(double{});
    case ScalarType::Int32: return f(int32_t{});
    default: return f(int64_t{});
  }
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

// A copy of t converted to `dtype` (t itself if it already has it).
bp::Tensor converted(const bp::Tensor& t, ScalarType dtype) {
  if (t.dtype() == dtype) return t;
  std::vector<int64_t> shape = toVector(t.sizes());
  bp::Tensor out = bp::Tensor::empty(shape, dtype, kCpuDevice);
  std::array<std::vector<int64_t>, 2> strides{contiguousStrides(shape), toVector(t.strides())};
  visit(dtype, [&](auto o) {
    using O = decltype(o);
    visit(t.dtype(), [&](auto i) {
      using I = decltype(i);
      O* dst = out.data_ptr<O>();
      const I* src = t.data_ptr<const I>();
      forEachRow<2>(shape, strides, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        for (int64_t j = 0; j < n; ++j) dst[off[0] + j * st[0]] = static_cast<O>(src[off[1] + j * st[1]]);
      });
    });
  });
  return out;
}

// out = f(a, b) with broadcasting, computed in out's dtype. The host's shape
// rule has checked out's shape, dtype and device (Note [Meta kernels]).
template <typename F>
bp::Tensor binary(const char* op, const bp::Tensor& a0, const bp::Tensor& b0, const bp::Tensor& out, F&& f) {
  checkInput(op, a0, "self");
  checkInput(op, b0, "other");
  checkInput(op, out, "out");
  const ScalarType dtype = out.dtype();
  bp::Tensor a = converted(a0, dtype), b = converted(b0, dtype);
  std::vector<int64_t> shape = toVector(out.sizes());
  std::array<std::vector<int64_t>, 3> strides{toVector(out.strides()), alignedStrides(a, shape), alignedStrides(b, shape)};
  visit(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_ptr<T>();
    const T* x = a.data_ptr<const T>();
    const T* y = b.data_ptr<const T>();
    forEachRow<3>(shape, strides, [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
      T* op_ = o + off[0];
      const T* xp = x + off[1];
      const T* yp = y + off[2];
      if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
        for (int64_t j = 0; j < n; ++j) op_[j] = f(xp[j], yp[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) op_[j * st[0]] = f(xp[j * st[1]], yp[j * st[2]]);
      }
    });
  });
  return out;
}

template <typename F>
bp::Tensor unary(const char* op, const bp::Tensor& a0, const bp::Tensor& out, F&& f) {
  checkInput(op, a0, "self");
  checkInput(op, out, "out");
  bp::Tensor a = converted(a0, out.dtype());
  std::vector<int64_t> shape = toVector(out.sizes());
  std::array<std::vector<int64_t>, 2> strides{toVector(out.strides()), toVector(a.strides())};
  visit(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data_ptr<T>();
    const T* x = a.data_ptr<const T>();
    forEachRow<2>(shape, strides, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
      for (int64_t j = 0; j < n; ++j) o[off[0] + j * st[0]] = f(x[off[1] + j * st[1]]);
    });
  });
  return out;
}

bp::Tensor add_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out) {
  return visit(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T a = alpha.to<T>();
    return binary("bp::add.out", self, other, out, [a](T x, T y) { return static_cast<T>(x + a * y); });
  });
}

bp::Tensor sub_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out) {
  return visit(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T a = alpha.to<T>();
    return binary("bp::sub.out", self, other, out, [a](T x, T y) { return static_cast<T>(x - a * y); });
  });
}

bp::Tensor mul_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return visit(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return binary("bp::mul.out", self, other, out, [](T x, T y) { return static_cast<T>(x * y); });
  });
}

bp::Tensor div_out(const bp::Tensor& self, const bp::Tensor& other, const bp::Tensor& out) {
  return visit(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return binary("bp::div.out", self, other, out, [](T x, T y) { return static_cast<T>(x / y); });
  });
}

bp::Tensor neg_out(const bp::Tensor& self, const bp::Tensor& out) {
  return visit(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return unary("bp::neg.out", self, out, [](T x) { return static_cast<T>(-x); });
  });
}

bp::Tensor relu_out(const bp::Tensor& self, const bp::Tensor& out) {
  return visit(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return unary("bp::relu.out", self, out, [](T x) { return x < T(0) ? T(0) : x; });  // keeps NaN, as PyTorch
  });
}

}  // namespace

namespace bp_cpu {

void registerElementwiseKernels(bp::Library& m) {
  m.impl("add.out", kCpu, &add_out);
  m.impl("sub.out", kCpu, &sub_out);
  m.impl("mul.out", kCpu, &mul_out);
  m.impl("div.out", kCpu, &div_out);
  m.impl("neg.out", kCpu, &neg_out);
  m.impl("relu.out", kCpu, &relu_out);
}

}  // namespace bp_cpu
