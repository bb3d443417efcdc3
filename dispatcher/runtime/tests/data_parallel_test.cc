// Data parallelism in one process (backplane/runtime/data_parallel.h): how a
// batch is split, scattered and gathered across devices, replicas run at
// once, a replica's failure named, and gradients through scatter and
// gather (on the CPU and a test device whose ops fall back to it).
#include <atomic>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backplane/autograd/autograd.h"
#include "backplane/core/error.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/data_parallel.h"
#include "backplane/runtime/runtime.h"
#include "backplane/testing/errors.h"
#include "test_device.h"

namespace backplane {
namespace {

using testing::expectError;

TEST(DataParallel, SplitSizesGiveTheRemainderToTheFirstDevices) {
  EXPECT_EQ(parallel::splitSizes(5, 3), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(parallel::splitSizes(6, 3), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(parallel::splitSizes(1, 1), (std::vector<int64_t>{1}));
  expectError([] { parallel::splitSizes(2, 3); }, absl::StatusCode::kInvalidArgument,
              {"a batch of 2 cannot be split over 3 devices"});
  expectError([] { parallel::splitSizes(2, 0); }, absl::StatusCode::kInvalidArgument, {"no devices"});
}

TEST(DataParallel, ScatterThenGatherGivesTheBatchBack) {
  static const Runtime runtime;
  const Device cpu(DeviceType::CPU);
  const Device test = testing::TestDevice::install().device(0);
  const Tensor batch = arange(0, 30).reshape({5, 6});
  const std::vector<Device> devices = {cpu, test, testing::TestDevice::install().device(1)};
  const std::vector<Tensor> parts = parallel::scatter(batch, devices);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].sizes(), IntArrayRef({2, 6}));
  EXPECT_EQ(parts[1].device(), test);
  EXPECT_EQ(parts[2].sizes(), IntArrayRef({1, 6}));
  EXPECT_EQ(parts[2].toVector<int64_t>(), (std::vector<int64_t>{24, 25, 26, 27, 28, 29}));
  const Tensor back = parallel::gather(parts, cpu);
  EXPECT_EQ(back.toVector<int64_t>(), batch.toVector<int64_t>());
  // Along another dim.
  const std::vector<Tensor> cols = parallel::scatter(batch, {cpu, cpu}, /*dim=*/-1);
  EXPECT_EQ(cols[1].sizes(), IntArrayRef({5, 3}));
  EXPECT_EQ(parallel::gather(cols, cpu, 1).toVector<int64_t>(), batch.toVector<int64_t>());
  expectError([&] { parallel::scatter(full({}, 1.0), devices); }, absl::StatusCode::kInvalidArgument, {"0-d"});
}

TEST(DataParallel, ReplicasRunAtOnceAndAFailureNamesItsReplica) {
  // Every replica waits until all have started: only threads running at
  // once get past it.
  std::atomic<int> started{0};
  parallel::parallelApply(3, [&](size_t) {
    ++started;
    while (started.load() < 3) std::this_thread::yield();
  });
  EXPECT_EQ(started.load(), 3);
  std::atomic<int> finished{0};
  expectError(
      [&] {
        parallel::parallelApply(3, [&](size_t i) {
          ++finished;
          if (i == 2) throw Error(absl::StatusCode::kInvalidArgument, "shape mismatch in layer 3");
        });
      },
      absl::StatusCode::kInvalidArgument, {"replica 2: shape mismatch in layer 3"});
  EXPECT_EQ(finished.load(), 3);  // every replica ran to its end first
  // Every replica runs in the caller's grad mode.
  std::vector<int> enabled(3, -1);
  {
    autograd::NoGradGuard no_grad;
    parallel::parallelApply(3, [&](size_t i) { enabled[i] = autograd::isGradEnabled() ? 1 : 0; });
  }
  EXPECT_EQ(enabled, (std::vector<int>{0, 0, 0}));
}

TEST(DataParallel, GradientsFlowBackThroughGatherReplicasAndScatter) {
  static const Runtime runtime;
  const Device cpu(DeviceType::CPU);
  const std::vector<Device> devices = {cpu, testing::TestDevice::install().device(1)};
  Tensor w = full({3}, 2.0).requires_grad_();
  const Tensor x = arange(0, 12, 1, {.dtype = ScalarType::Float32}).reshape({4, 3});
  // Replicate w, scatter x, y_i = x_i * w_i, gather, sum: dL/dw = sum of x's rows.
  const std::vector<Tensor> xs = parallel::scatter(x, devices);
  std::vector<Tensor> ys(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) ys[i] = mul(xs[i], w.to(devices[i]));
  sum(parallel::gather(ys, cpu)).backward();
  EXPECT_EQ(w.grad().toVector<float>(), (std::vector<float>{18, 22, 26}));
  EXPECT_EQ(w.grad().device(), cpu);
}

}  // namespace
}  // namespace backplane
