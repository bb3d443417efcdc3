#include "backplane/dispatcher/dispatch_key.h"

#include <gtest/gtest.h>

#include "test_device.h"

namespace backplane {
namespace {

TEST(DispatchKeyTest, BackendKeysFollowDeviceTypes) {
  EXPECT_EQ(backendKey(DeviceType::CPU), DispatchKey::CPU);
  EXPECT_EQ(backendKey(DeviceType::CUDA), DispatchKey::CUDA);
  EXPECT_EQ(backendKey(DeviceType::HIP), DispatchKey::HIP);
  auto& dev = testing::TestDevice::install();
  DispatchKey k = backendKey(dev.type());
  EXPECT_TRUE(isBackendKey(k));
  EXPECT_GE(k, DispatchKey::FirstDynamicBackend);
  EXPECT_EQ(deviceTypeOf(k), dev.type());
  EXPECT_EQ(dispatchKeyName(k), "testdev");
  EXPECT_EQ(parseDispatchKey("testdev"), k);
  EXPECT_EQ(parseDispatchKey("CPU"), DispatchKey::CPU);
  EXPECT_EQ(parseDispatchKey("cpu"), DispatchKey::CPU);
  EXPECT_EQ(parseDispatchKey("Tracing"), DispatchKey::Tracing);
  EXPECT_EQ(parseDispatchKey("Profiling"), DispatchKey::Profiling);
  EXPECT_EQ(parseDispatchKey("nope"), std::nullopt);
}

TEST(DispatchKeyTest, AtLeastEightDynamicBackendsBelowFunctionalityKeys) {
  int dynamic = static_cast<int>(DispatchKey::LastBackend) - static_cast<int>(DispatchKey::FirstDynamicBackend) + 1;
  EXPECT_GE(dynamic, 8);
  EXPECT_LT(DispatchKey::LastBackend, DispatchKey::Tracing);
  EXPECT_TRUE(isFunctionalityKey(DispatchKey::Tracing));
  EXPECT_FALSE(isBackendKey(DispatchKey::Tracing));
  EXPECT_TRUE(DispatchKeySet::allBackends().has(DispatchKey::LastBackend));
  EXPECT_FALSE(DispatchKeySet::allBackends().has(DispatchKey::Tracing));
  EXPECT_FALSE(DispatchKeySet::allBackends().has(DispatchKey::Undefined));
}

TEST(DispatchKeyTest, ProfilingWrapsEveryOtherFunctionalityKey) {
  EXPECT_TRUE(isFunctionalityKey(DispatchKey::Profiling));
  EXPECT_FALSE(isBackendKey(DispatchKey::Profiling));
  for (DispatchKey k : {DispatchKey::Tracing, DispatchKey::User0, DispatchKey::User3})
    EXPECT_LT(k, DispatchKey::Profiling);
  EXPECT_EQ(dispatchKeyName(DispatchKey::Profiling), "Profiling");
  DispatchKeySet ks = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::User3).add(DispatchKey::Profiling);
  EXPECT_EQ(ks.highestPriorityKey(), DispatchKey::Profiling);
}

TEST(DispatchKeyTest, HighestKeyWins) {
  DispatchKeySet ks = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::CUDA).add(DispatchKey::Tracing);
  EXPECT_EQ(ks.highestPriorityKey(), DispatchKey::Tracing);
  EXPECT_EQ(ks.highestBackendKey(), DispatchKey::CUDA);
  DispatchKeySet below = ks & DispatchKeySet::below(DispatchKey::Tracing);
  EXPECT_EQ(below.highestPriorityKey(), DispatchKey::CUDA);
  EXPECT_EQ(ks.remove(DispatchKey::CUDA).remove(DispatchKey::Tracing).highestPriorityKey(), DispatchKey::CPU);
  EXPECT_EQ(DispatchKeySet().highestPriorityKey(), DispatchKey::Undefined);
  EXPECT_EQ(ks.str(), "{CPU|CUDA|Tracing}");
}

TEST(DispatchKeyTest, ThreadLocalGuardsNestAndRestore) {
  EXPECT_TRUE(localDispatchKeySet().included.empty());
  {
    IncludeDispatchKeyGuard a(DispatchKey::User0);
    {
      IncludeDispatchKeyGuard b(DispatchKey::User1);
      ExcludeDispatchKeyGuard c(DispatchKey::User0);
      EXPECT_TRUE(localDispatchKeySet().included.has(DispatchKey::User0));
      EXPECT_TRUE(localDispatchKeySet().included.has(DispatchKey::User1));
      EXPECT_TRUE(localDispatchKeySet().excluded.has(DispatchKey::User0));
    }
    EXPECT_TRUE(localDispatchKeySet().included.has(DispatchKey::User0));
    EXPECT_FALSE(localDispatchKeySet().included.has(DispatchKey::User1));
    EXPECT_TRUE(localDispatchKeySet().excluded.empty());
  }
  EXPECT_TRUE(localDispatchKeySet().included.empty());
}

}  // namespace
}  // namespace backplane
