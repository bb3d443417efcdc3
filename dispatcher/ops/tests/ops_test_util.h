#pragma once
// Shared by the standard-operator tests (dispatcher/ops/tests/*_test.cc):
// the CPU plugin loaded as applications load it, boxed calls by name,
// deterministic inputs, and comparison against a double-precision
// reference with a tolerance per dtype.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/ivalue.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/errors.h"
#include "backplane/testing/plugin_environment.h"

namespace backplane::ops_test {

// Loads the CPU plugin once per test program.
inline const ::testing::Environment* const kCpuPluginEnv =
    &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH}).leaveFallbackMode();

inline OperatorHandle op(const std::string& name) { return Dispatcher::singleton().findOpOrThrow("bp::" + name); }

// Calls standard op `name` ("add.Tensor") boxed with `args`; returns its
// single return value.
inline IValue call(const std::string& name, std::vector<IValue> args) {
  Stack stack(std::move(args));
  op(name).callBoxed(stack);
  EXPECT_EQ(stack.size(), 1u) << name;
  return stack.empty() ? IValue() : std::move(stack[0]);
}
inline Tensor callT(const std::string& name, std::vector<IValue> args) {
  return call(name, std::move(args)).toTensor();
}

using testing::errorOf;

// A tensor of `dtype` on `device` holding `v` (converted with static_cast).
inline Tensor fromDoubles(const std::vector<double>& v, IntArrayRef sizes, ScalarType dtype,
                          Device device = Device(DeviceType::CPU)) {
  return visitScalarType(dtype, [&]<typename T>() {
    std::vector<T> tv;
    tv.reserve(v.size());
    for (double x : v) {
      if constexpr (std::is_same_v<T, bool>)
        tv.push_back(x != 0);
      else
        tv.push_back(static_cast<T>(x));
    }
    return tensorFromVector<T>(tv, sizes, device);
  });
}

// Deterministic values in [lo, hi) as a tensor of `dtype` (integers are
// rounded), on `device`.
inline Tensor randomTensor(IntArrayRef sizes, ScalarType dtype, uint32_t seed, double lo = -2, double hi = 2,
                           Device device = Device(DeviceType::CPU)) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = isFloatingType(dtype) ? dist(gen) : std::round(dist(gen));
  return fromDoubles(v, sizes, dtype, device);
}

// The elements of t in row-major order as doubles (any dtype, any device).
inline std::vector<double> values(const Tensor& t) { return t.toVector<double>(); }

// Tolerance for comparing a result of `dtype` with a double reference.
inline double tolerance(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float16: return 1e-2;
    case ScalarType::BFloat16: return 2e-2;
    case ScalarType::Float32: return 1e-5;
    case ScalarType::Float64: return 1e-12;
    default: return 0;
  }
}

// Expects `actual` to have `sizes` and `dtype` and elements within
// tolerance(dtype) (relative, with an absolute floor of the same size) of
// `expected`.
inline void expectClose(const Tensor& actual, const std::vector<double>& expected, IntArrayRef sizes, ScalarType dtype,
                        double tol = -1) {
  ASSERT_TRUE(actual.defined());
  EXPECT_EQ(actual.sizes(), sizes);
  EXPECT_EQ(actual.dtype(), dtype);
  if (tol < 0) tol = tolerance(dtype);
  std::vector<double> got = values(actual);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
      continue;
    }
    if (std::isinf(expected[i])) {
      EXPECT_EQ(got[i], expected[i]) << "element " << i;
      continue;
    }
    EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::fabs(expected[i]))) << "element " << i;
  }
}

}  // namespace backplane::ops_test
