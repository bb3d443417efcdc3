#pragma once
// Small CPU kernels shared by the dispatcher and runtime tests. They work on float32
// tensors of any layout through the core's host copies.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/testing/errors.h"  // IWYU pragma: export

namespace backplane::testing {

inline Tensor floats(std::vector<float> v, IntArrayRef sizes, Device d = Device(DeviceType::CPU)) {
  return tensorFromVector<float>(v, sizes, d);
}
inline Tensor floats(std::vector<float> v, Device d = Device(DeviceType::CPU)) {
  int64_t n = static_cast<int64_t>(v.size());
  return tensorFromVector<float>(v, {n}, d);
}

// out = f(a[i], b[i]) elementwise over same-shaped float32 CPU tensors.
inline Tensor zipCpu(const Tensor& a, const Tensor& b, const std::function<float(float, float)>& f) {
  BP_CHECK(a.device().isCpu() && b.device().isCpu(), "zipCpu runs on the CPU only, got ", a.str(), " and ", b.str());
  BP_CHECK(a.sizes() == b.sizes(), "zipCpu: shapes differ");
  std::vector<float> x = a.toVector<float>(), y = b.toVector<float>(), z(x.size());
  for (size_t i = 0; i < x.size(); ++i) z[i] = f(x[i], y[i]);
  return tensorFromVector<float>(z, a.sizes());
}
inline Tensor addCpu(const Tensor& a, const Tensor& b) {
  return zipCpu(a, b, [](float x, float y) { return x + y; });
}
// Writes src's values into dst (float32, CPU, any layout).
inline void assignCpu(const Tensor& dst, const Tensor& src) { copyElements(dst, src); }

}  // namespace backplane::testing
