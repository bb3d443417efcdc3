// Plugin kernels that misbehave at run time (test plugin tp_misbehave): one
// that throws (through the SDK's adapter, and past the raw ABI), one that
// returns an error, and ones that call back into the dispatcher from inside
// the kernel. Every failure must surface as an Error naming the op and the
// device, leak nothing (device memory through the CPU fallback on the test
// device; LSan checks the host side), and leave the next call working.
// Re-entrant calls work: the dispatcher's call path takes no lock (only
// registration does), so a kernel may call any op, its own plugin's
// included, at any depth, from any thread.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/plugin_environment.h"
#include "test_device.h"

namespace backplane {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const auto* const kEnv = &testing::addPluginEnvironment(
                              {BACKPLANE_CPU_PLUGIN_PATH, std::string(BACKPLANE_TEST_PLUGIN_DIR) + "/tp_misbehave.so"})
                              .afterLoad([] { testing::TestDevice::install("misdev", 1); });

Tensor call(const char* op, const Tensor& self) {
  return Dispatcher::singleton().findOpOrThrow(op).typed<Tensor(const Tensor&)>().call(self);
}
Tensor floats(std::vector<float> v, Device d = Device(DeviceType::CPU)) {
  const int64_t n = static_cast<int64_t>(v.size());
  return tensorFromVector<float>(v, {n}, d);
}
Device misdev() { return testing::TestDevice::install("misdev", 1).device(0); }

// The error `op` raises on `self`, after which the device still runs
// tpm::twice correctly and holds no more memory than before.
Error errorOf(const char* op, const Tensor& self) {
  testing::TestDevice& dev = testing::TestDevice::install("misdev", 1);
  const size_t live = dev.liveAllocations();
  const std::vector<float> before = self.cpu().toVector<float>();
  Error error(absl::StatusCode::kOk, "");
  try {
    (void)call(op, self);
    ADD_FAILURE() << op << " did not fail";
  } catch (const Error& e) {
    error = e;
  }
  EXPECT_EQ(dev.liveAllocations(), live) << "device memory leaked";
  EXPECT_EQ(self.cpu().toVector<float>(), before) << "the input changed";
  EXPECT_THAT(call("tpm::twice", self).cpu().toVector<float>(), ElementsAre(2, 4)) << "the next call fails";
  return error;
}

TEST(MisbehavingKernel, ThrowingThroughTheSdkIsAnErrorNamingOpAndDevice) {
  for (Device d : {Device(DeviceType::CPU), misdev()}) {
    SCOPED_TRACE(d.str());
    Error e = errorOf("tpm::throws", floats({1, 2}, d));
    EXPECT_EQ(e.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(e.message(), HasSubstr("kernel of plugin 'tp_misbehave' for tpm::throws on CPU failed"));
    EXPECT_THAT(e.message(), HasSubstr("the toy driver exploded"));
  }
}

TEST(MisbehavingKernel, ThrowingPastTheAbiIsCaughtByTheHost) {
  for (Device d : {Device(DeviceType::CPU), misdev()}) {
    SCOPED_TRACE(d.str());
    Error e = errorOf("tpm::throws_raw", floats({1, 2}, d));
    EXPECT_EQ(e.code(), absl::StatusCode::kInternal);
    EXPECT_THAT(e.message(), HasSubstr("kernel of plugin 'tp_misbehave' for tpm::throws_raw on CPU threw an "
                                       "exception (plugins must return errors, not throw)"));
    EXPECT_THAT(e.message(), HasSubstr("the toy driver exploded"));
  }
}

TEST(MisbehavingKernel, AnErrorKeepsItsCodeAndNamesOpAndDevice) {
  for (Device d : {Device(DeviceType::CPU), misdev()}) {
    SCOPED_TRACE(d.str());
    Error e = errorOf("tpm::fails", floats({1, 2}, d));
    EXPECT_EQ(e.code(), absl::StatusCode::kDataLoss);
    const std::string kernel_error =
        "kernel of plugin 'tp_misbehave' for tpm::fails on CPU failed: tpm::fails: the toy device lost the data";
    // Through the CPU fallback, the caller's op and device follow.
    EXPECT_EQ(e.message(), d.isCpu() ? kernel_error
                                     : strCat(kernel_error, " (raised while running tpm::fails for ", d.str(),
                                              " through the CPU fallback: its inputs were copied to the host and the "
                                              "CPU kernel ran)"));
  }
}

// Note [Masked returns]: a kernel may leave undefined a tensor return its
// op's output_mask does not ask for, and the caller gets an undefined
// tensor there; any other undefined return is an error naming the kernel
// and the return, and the returns it did set are released.
TEST(MisbehavingKernel, AnUndefinedReturnIsAllowedOnlyWhereTheOutputMaskSaysSo) {
  using Sig = std::tuple<Tensor, Tensor>(const Tensor&, std::array<bool, 2>);
  const auto masked = Dispatcher::singleton().findOpOrThrow("tpm::masked").typed<Sig>();
  for (Device d : {Device(DeviceType::CPU), misdev()}) {
    SCOPED_TRACE(d.str());
    const Tensor x = floats({1, 2}, d);
    for (const std::array<bool, 2> mask : {std::array<bool, 2>{true, false}, std::array<bool, 2>{false, true},
                                           std::array<bool, 2>{true, true}, std::array<bool, 2>{false, false}}) {
      auto [a, b] = masked.call(x, mask);
      ASSERT_EQ(a.defined(), mask[0]);
      ASSERT_EQ(b.defined(), mask[1]);
      if (mask[0]) {
        EXPECT_THAT(a.cpu().toVector<float>(), ElementsAre(2, 4));
      }
      if (mask[1]) {
        EXPECT_THAT(b.cpu().toVector<float>(), ElementsAre(2, 4));
      }
    }
    testing::TestDevice& dev = testing::TestDevice::install("misdev", 1);
    const size_t live = dev.liveAllocations();
    using Half = std::tuple<Tensor, Tensor>(const Tensor&);
    try {
      (void)Dispatcher::singleton().findOpOrThrow("tpm::half_undefined").typed<Half>().call(x);
      ADD_FAILURE() << "tpm::half_undefined did not fail";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), absl::StatusCode::kInternal);
      EXPECT_THAT(e.message(), HasSubstr("tpm::half_undefined"));
      EXPECT_THAT(e.message(), HasSubstr("did not set return 1"));
      EXPECT_THAT(e.message(), HasSubstr("may be left undefined only where the op's output_mask is false"));
    }
    EXPECT_EQ(dev.liveAllocations(), live) << "the return the kernel did set leaked";
  }
}

TEST(MisbehavingKernel, AKernelMayCallOpsThroughTheDispatcher) {
  for (Device d : {Device(DeviceType::CPU), misdev()}) {
    SCOPED_TRACE(d.str());
    EXPECT_THAT(call("tpm::reenter", floats({1, 2}, d)).cpu().toVector<float>(), ElementsAre(4, 8));
    EXPECT_THAT(call("tpm::reenter_standard", floats({1, 2}, d)).cpu().toVector<float>(), ElementsAre(2, 4));
    auto deep = Dispatcher::singleton().findOpOrThrow("tpm::reenter_deep").typed<Tensor(const Tensor&, int64_t)>();
    EXPECT_THAT(deep.call(floats({1, 2}, d), 64).cpu().toVector<float>(), ElementsAre(2, 4));
  }
}

TEST(MisbehavingKernel, AnErrorFromAReentrantCallNamesBothOps) {
  Error e = errorOf("tpm::reenter_fails", floats({1, 2}));
  EXPECT_EQ(e.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(e.message(),
            "kernel of plugin 'tp_misbehave' for tpm::reenter_fails on CPU failed: kernel of plugin 'tp_misbehave' "
            "for tpm::fails on CPU failed: tpm::fails: the toy device lost the data");
}

TEST(MisbehavingKernel, ReentrantCallsFromManyThreadsDoNotDeadlock) {
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (size_t t = 0; t < ok.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const Tensor r = call(i % 2 ? "tpm::reenter" : "tpm::reenter_standard", floats({1, 2}));
        const std::vector<float> v = r.toVector<float>();
        ok[t] += v == std::vector<float>(i % 2 ? std::vector<float>{4, 8} : std::vector<float>{2, 4});
        try {
          (void)call("tpm::reenter_fails", floats({1, 2}));
        } catch (const Error& e) {
          ok[t] += e.code() == absl::StatusCode::kDataLoss ? 0 : -1000;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(ok, ::testing::Each(200));
}

}  // namespace
}  // namespace backplane
