// The GPU plugins' conv2d, max_pool2d, avg_pool2d and batch_norm on the
// simulator against the CPU plugin (oneDNN and loops), at the shapes that
// choose between their paths: conv2d's im2col products (in chunks of images:
// the simulator's chunks are small, Note [conv2d on the GPU]), its 1x1 path
// that reads the input itself and its direct kernel for many small groups;
// pooling windows past the input, dilated, over NaN and -inf; batch_norm in
// training (the running statistics updated in their own dtype) and in
// evaluation. The conformance specs check every dtype on gpusim too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

class GpusimConvPoolTest : public gpu_test::GpusimSuite {
 protected:
  // Small integers in [lo, lo + period) in a long-period pattern, as `dtype`.
  static Tensor pattern(const std::vector<int64_t>& shape, ScalarType dtype, int64_t period, int64_t lo,
                        uint32_t seed = 2654435761u) {
    int64_t numel = 1;
    for (int64_t v : shape) numel *= v;
    std::vector<double> v(static_cast<size_t>(numel));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<double>(static_cast<int64_t>((i * seed + 12345u) % static_cast<uint64_t>(period)) + lo);
    return Tensor(tensorFromVector<double>(v, shape, cpu())).to(dtype);
  }
  static Stack call(const char* op, Stack stack) {
    Dispatcher::singleton().findOpOrThrow(op).callBoxed(stack);
    return stack;
  }
  // The same call on the CPU and, with every tensor moved, on gpusim.
  static std::pair<Stack, Stack> both(const char* op, const Stack& args) {
    Stack on_sim;
    for (const IValue& v : args) on_sim.push_back(v.isTensor() ? IValue(Tensor(v.toTensor()).to(sim())) : v);
    return {call(op, args), call(op, on_sim)};
  }
  // A 4-D (or 3-D) tensor stored channels-last: same values, other strides.
  static Tensor channelsLast(const Tensor& x) {
    return x.dim() == 4 ? x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2})
                        : x.permute({1, 2, 0}).contiguous().permute({2, 0, 1});
  }
};

TEST_F(GpusimConvPoolTest, Conv2dMatchesTheCpuOnEveryPath) {
  expectNative("bp::conv2d");
  struct Case {
    std::vector<int64_t> input, weight;
    bool bias;
    std::vector<int64_t> stride, padding, dilation;
    int64_t groups;
    const char* path;
  };
  const std::vector<Case> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1, "im2col"},
      {{3, 4, 9, 8}, {5, 4, 3, 2}, false, {2, 1}, {2, 1}, {2, 3}, 1, "im2col, strided and dilated"},
      {{2, 6, 5, 5}, {4, 6, 1, 1}, true, {1, 1}, {0, 0}, {1, 1}, 1, "1x1: the input is the columns"},
      {{2, 6, 5, 5}, {4, 3, 1, 1}, false, {1, 1}, {0, 0}, {1, 1}, 2, "1x1, two groups"},
      {{1, 16, 6, 6}, {4, 8, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 2, "a product per group"},
      {{2, 4, 6, 7}, {8, 1, 3, 3}, true, {1, 2}, {1, 1}, {1, 1}, 4, "depthwise: the direct kernel"},
      {{3, 8, 8}, {2, 3, 3, 3}, true, {2, 2}, {0, 1}, {1, 1}, 1, "unbatched"},
      {{2, 0, 4, 4}, {3, 0, 2, 2}, true, {1, 1}, {0, 0}, {1, 1}, 1, "no input channels: the bias"},
      {{40, 3, 12, 12}, {2, 3, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1, "many images: several chunks"},
  };
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::Int32,
                        ScalarType::Int8, ScalarType::UInt8}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message() << dt << ": " << c.path);
      // int8 and uint8 products overflow the dtype: both wrap.
      const bool narrow = dt == ScalarType::Int8 || dt == ScalarType::UInt8;
      const Tensor x = pattern(c.input, dt, narrow ? 100 : 9, narrow ? 0 : -4);
      const Tensor w = pattern(c.weight, dt, narrow ? 90 : 7, narrow ? 0 : -3, 40503u);
      const IValue b = c.bias ? IValue(pattern({c.weight[0]}, dt, 5, narrow ? 0 : -2)) : IValue();
      for (const Tensor& in : {x, channelsLast(x)}) {
        auto [want, got] = both("bp::conv2d", {in, w, b, c.stride, c.padding, c.dilation, c.groups});
        const bool exact = !isFloatingType(dt);
        const double tol = dt == ScalarType::Float16 ? 2e-3 : dt == ScalarType::Float32 ? 1e-5 : 1e-12;
        ASSERT_EQ(got.at(0).toTensor().sizes(), want.at(0).toTensor().sizes());
        ASSERT_EQ(got.at(0).toTensor().dtype(), dt);
        expectClose(got.at(0).toTensor(), want.at(0).toTensor(), exact ? 0 : tol, exact ? 0 : tol);
      }
    }
  }
}

// Windows with strides smaller than, equal to and larger than the kernel,
// padding, dilation (max), ceil_mode windows past the input, an unbatched
// input, a channels-last one; NaN and -inf in the input (a NaN window is
// NaN, an all -inf one -inf).
TEST_F(GpusimConvPoolTest, PoolingMatchesTheCpu) {
  expectNative("bp::max_pool2d");
  expectNative("bp::avg_pool2d");
  const double inf = std::numeric_limits<double>::infinity();
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
    for (const gpu_test::PoolCase& c : gpu_test::kPoolCases) {
      SCOPED_TRACE(::testing::Message() << dt << " input " << ::testing::PrintToString(c.input) << " kernel "
                                        << ::testing::PrintToString(c.kernel));
      Tensor x = pattern(c.input, ScalarType::Float64, 11, -5);
      std::vector<double> v = x.toVector<double>();
      v[3] = std::nan("");
      v[v.size() - 1] = v[v.size() - 2] = -inf;
      x = Tensor(tensorFromVector<double>(v, c.input, cpu())).to(dt);
      const double tol = dt == ScalarType::Float32 || dt == ScalarType::Float64 ? 1e-6 : 1e-2;
      for (const Tensor& in : {x, channelsLast(x)}) {
        auto [want, got] = both("bp::max_pool2d", {in, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode});
        expectClose(got.at(0).toTensor(), want.at(0).toTensor(), 0, 0);  // a maximum is exact
        if (c.dilation != std::vector<int64_t>{1, 1}) continue;          // avg_pool2d has none
        for (bool include_pad : {true, false}) {
          for (const IValue& divisor : {IValue(), IValue(int64_t{5})}) {
            auto [aw, ag] =
                both("bp::avg_pool2d", {in, c.kernel, c.stride, c.padding, c.ceil_mode, include_pad, divisor});
            expectClose(ag.at(0).toTensor(), aw.at(0).toTensor(), tol, tol);
          }
        }
      }
    }
  }
  // int64 averages wrap and truncate, as PyTorch's; divisor -1 negates.
  const Tensor big = Tensor(
      tensorFromVector<int64_t>({std::numeric_limits<int64_t>::max(), 7, -9, 4, -13, 5, 6, 1}, {1, 2, 4}, cpu()));
  for (const IValue& divisor : {IValue(), IValue(int64_t{-1}), IValue(int64_t{3})}) {
    auto [want, got] = both("bp::avg_pool2d", {big, std::vector<int64_t>{1, 2}, std::vector<int64_t>{1, 1},
                                               std::vector<int64_t>{0, 1}, true, false, divisor});
    EXPECT_EQ(Tensor(got.at(0).toTensor()).cpu().toVector<int64_t>(), want.at(0).toTensor().toVector<int64_t>());
  }
}

// Training normalizes with the batch's statistics and updates the running
// ones (in their own dtype: float64 statistics of a float32 input, a
// non-contiguous running_var); evaluation uses the running ones. Channels
// shorter and longer than a block; 2-D, 3-D and 4-D inputs; weight and
// bias of another dtype than the input's, or none.
TEST_F(GpusimConvPoolTest, BatchNormMatchesTheCpuAndUpdatesTheRunningStatistics) {
  expectNative("bp::batch_norm");
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::BFloat16}) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{3, 4, 5, 2}, std::vector<int64_t>{6, 3}, std::vector<int64_t>{4, 2, 700}}) {
      const int64_t ch = shape[1];
      // A large common offset: a one-pass variance would lose the spread.
      const Tensor x = pattern(shape, ScalarType::Float64, 13, -6).add(1000.0).to(dt);
      const Tensor w = pattern({ch}, ScalarType::Float32, 3, 1), b = pattern({ch}, ScalarType::BFloat16, 5, -2);
      for (bool training : {true, false}) {
        for (bool with_params : {true, false}) {
          SCOPED_TRACE(::testing::Message()
                       << dt << " " << ::testing::PrintToString(shape) << (training ? " training" : " evaluation")
                       << (with_params ? " with weight and bias" : ""));
          // running_var: every other element of a float64 tensor.
          const Tensor rm = pattern({ch}, ScalarType::Float64, 4, 998);
          const Tensor rv_storage = pattern({2 * ch}, ScalarType::Float64, 3, 1);
          const Tensor rm_sim = rm.to(sim()), rv_storage_sim = rv_storage.to(sim());
          const Tensor rv = rv_storage.slice(0, 0, 2 * ch, 2), rv_sim = rv_storage_sim.slice(0, 0, 2 * ch, 2);
          const IValue wv = with_params ? IValue(w) : IValue(), bv = with_params ? IValue(b) : IValue();
          const IValue ws = with_params ? IValue(w.to(sim())) : IValue(),
                       bs = with_params ? IValue(b.to(sim())) : IValue();
          const Stack want = call("bp::batch_norm", {x, wv, bv, rm, rv, training, 0.25, 1e-5, true});
          const Stack got = call("bp::batch_norm", {x.to(sim()), ws, bs, rm_sim, rv_sim, training, 0.25, 1e-5, true});
          const double tol = dt == ScalarType::BFloat16 ? 2e-2 : dt == ScalarType::Float32 ? 2e-4 : 1e-10;
          expectClose(got.at(0).toTensor(), want.at(0).toTensor(), tol, tol);
          expectClose(rm_sim, rm, 1e-9, dt == ScalarType::Float64 ? 1e-12 : 1e-6);
          expectClose(rv_storage_sim, rv_storage, 1e-9, dt == ScalarType::Float64 ? 1e-12 : 1e-3);
        }
      }
    }
  }
}

}  // namespace
}  // namespace backplane
