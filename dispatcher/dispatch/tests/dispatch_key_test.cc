#include "backplane/dispatch/dispatch_key.h"

#include <gtest/gtest.h>

#include "test_device.h"

namespace backplane {
namespace {

TEST(DispatchKeyTest, DynamicDeviceTypesGetBackendKeys) {
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

// The key layout itself (backend keys, their room, the functionality keys
// above them) is static_assert'ed in dispatch_key.h.

TEST(DispatchKeyTest, ProfilingWrapsEveryOtherFunctionalityKey) {
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
