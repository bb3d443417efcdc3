// The CPU plugin's vectorised softmax kernels and their exp
// (plugins/cpu/softmax_rows.cc, Note [Softmax kernels]), compiled into this
// program directly: the exp's accuracy over float's whole range, its
// special values, and the row and column kernels' memory discipline. The
// results through the dispatcher are checked in
// dispatcher/ops/tests/reduction_test.cc (Softmax.*).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "softmax_rows.h"
#include "ulps.h"

namespace bp_cpu {
namespace {

using backplane::testing::ulpsApart;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Every 127th float of [-110, 89] (about 17 million; the whole range, every
// float, was checked the same way once: also at most 1 ulp), against
// float64's exp rounded to float32: within 1 ulp, including subnormal
// results and overflow to inf.
TEST(SoftmaxKernels, ExpWithinOneUlpOverTheWholeRange) {
  constexpr uint32_t kStep = 127;
  std::vector<float> x, y;
  int64_t worst = 0, checked = 0;
  float worst_at = 0;
  auto flush = [&] {
    y.resize(x.size());
    expFloats(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const auto want = static_cast<float>(std::exp(static_cast<double>(x[i])));
      const int64_t u = ulpsApart(y[i], want);
      if (u > worst) {
        worst = u;
        worst_at = x[i];
      }
    }
    checked += static_cast<int64_t>(x.size());
    x.clear();
  };
  for (uint32_t sign : {0u, 0x80000000u}) {
    const float limit = sign ? 110.0f : 89.0f;
    for (uint32_t b = 0; b < 0x7f800000u; b += kStep) {
      const float f = std::bit_cast<float>(b);
      if (f > limit) break;
      x.push_back(std::bit_cast<float>(b | sign));
      if (x.size() == (1u << 16)) flush();
    }
    flush();
  }
  EXPECT_GT(checked, 15'000'000);
  EXPECT_LE(worst, 1) << "at x = " << worst_at;
}

TEST(SoftmaxKernels, ExpSpecialValues) {
  const std::vector<float> x = {0.0f,  -0.0f, -kInf,  kInf,   std::numeric_limits<float>::quiet_NaN(), -103.9f, -200.0f,
                                88.7f, 89.0f, 1e-30f, -1e-30f};
  std::vector<float> y(x.size());
  expFloats(x.data(), y.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(y[0], 1.0f);  // exactly: a row's max contributes 1
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], kInf);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], static_cast<float>(std::exp(static_cast<double>(-103.9f))));  // the smallest subnormal
  EXPECT_GT(y[5], 0.0f);
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_LE(ulpsApart(y[7], static_cast<float>(std::exp(static_cast<double>(88.7f)))), 1);
  EXPECT_EQ(y[8], kInf);
  EXPECT_EQ(y[9], 1.0f);
  EXPECT_EQ(y[10], 1.0f);
}

// In place gives what out of place gives, and a row never writes past its
// n elements; the column kernel writes only its w columns of each step.
TEST(SoftmaxKernels, InPlaceAndWithinBounds) {
  for (bool log : {false, true}) {
    for (int64_t n : {1, 3, 16, 33, 64, 100}) {
      std::vector<float> x(static_cast<size_t>(n) + 8, 7.0f), y(x.size(), 7.0f);
      for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(j)] = std::sin(static_cast<float>(j)) * 4;
      softmaxRow(log, x.data(), y.data(), n);
      for (size_t j = static_cast<size_t>(n); j < y.size(); ++j) EXPECT_EQ(y[j], 7.0f);
      std::vector<float> z = x;
      softmaxRow(log, z.data(), z.data(), n);
      for (int64_t j = 0; j < n; ++j) EXPECT_EQ(z[static_cast<size_t>(j)], y[static_cast<size_t>(j)]) << n << " " << j;
    }
    for (int64_t w : {1, 5, 15, 16}) {
      const int64_t n = 9, stride = 20;
      std::vector<float> x(static_cast<size_t>(n * stride), 7.0f), y = x;
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = 0; c < w; ++c) x[static_cast<size_t>(j * stride + c)] = static_cast<float>((j * 3 + c) % 5);
      softmaxColumns(log, x.data(), stride, y.data(), stride, n, w);
      for (int64_t c = 0; c < w; ++c) {
        std::vector<float> col(static_cast<size_t>(n)), want(col.size());
        for (int64_t j = 0; j < n; ++j) col[static_cast<size_t>(j)] = x[static_cast<size_t>(j * stride + c)];
        softmaxRow(log, col.data(), want.data(), n);
        for (int64_t j = 0; j < n; ++j)
          EXPECT_LE(ulpsApart(y[static_cast<size_t>(j * stride + c)], want[static_cast<size_t>(j)]), 2) << w;
      }
      for (int64_t j = 0; j < n; ++j)
        for (int64_t c = w; c < stride; ++c) EXPECT_EQ(y[static_cast<size_t>(j * stride + c)], 7.0f) << w;
    }
  }
}

}  // namespace
}  // namespace bp_cpu
