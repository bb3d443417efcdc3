// The GPU plugins' device API (runtime.cu), through the host as
// applications use it, on the simulator plugin: the caching allocator and
// its statistics, copies in every direction, device properties and errors.
// The simulator runs the same runtime.cu as the CUDA and HIP plugins.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class GpusimRuntimeTest : public gpu_test::GpusimSuite {
 protected:
  void SetUp() override {
    dev_ = sim();
    emptyCache();
  }

  static int64_t stat(std::string_view name) {
    static auto op =
        Dispatcher::singleton().findOpOrThrow("gpusim::memory_stat").typed<int64_t(std::string_view, int64_t)>();
    return op.call(name, 0);
  }
  static void emptyCache() {
    static auto op = Dispatcher::singleton().findOpOrThrow("gpusim::empty_cache").typed<void(int64_t)>();
    op.call(0);
  }

  Device dev_{DeviceType::CPU};
};

TEST_F(GpusimRuntimeTest, DeviceIsListedWithProperties) {
  bool found = false;
  for (const DeviceInfo& d : runtime()->devices()) {
    if (d.device.str() != "gpusim:0") continue;
    found = true;
    EXPECT_EQ(d.provider, "gpusim");
    EXPECT_EQ(d.properties.name, "Backplane GPU simulator");
    EXPECT_EQ(d.properties.total_memory, uint64_t{1} << 30);
    EXPECT_EQ(d.properties.multiprocessor_count, 4);
  }
  EXPECT_TRUE(found);
}

TEST_F(GpusimRuntimeTest, FreedBlocksAreReusedBySizeClass) {
  const int64_t hits = stat("cache_hits"), misses = stat("cache_misses"), allocations = stat("allocations");
  {
    Tensor a = empty({1000}, {.dtype = ScalarType::Float32, .device = dev_});  // 4000 bytes: class 4096
    EXPECT_EQ(stat("allocated_bytes"), 4096);
    EXPECT_EQ(stat("reserved_bytes"), 4096);
  }
  EXPECT_EQ(stat("allocated_bytes"), 0);
  EXPECT_EQ(stat("reserved_bytes"), 4096);  // cached, not returned to the driver
  {
    Tensor b = empty({1020}, {.dtype = ScalarType::Float32, .device = dev_});  // 4080 bytes: the same class
    EXPECT_EQ(stat("cache_hits"), hits + 1);
    EXPECT_EQ(stat("cache_misses"), misses + 1);
    Tensor c = empty({1100}, {.dtype = ScalarType::Float32, .device = dev_});  // 4400 bytes: class 4608, a miss
    EXPECT_EQ(stat("cache_misses"), misses + 2);
    EXPECT_EQ(stat("allocated_bytes"), 4096 + 4608);
    EXPECT_EQ(stat("peak_allocated_bytes"), 4096 + 4608);
  }
  EXPECT_EQ(stat("allocations"), allocations + 3);
  // Large requests: four classes per power of two.
  { Tensor d = empty({(3 << 20) + 1}, {.dtype = ScalarType::UInt8, .device = dev_}); }
  EXPECT_EQ(stat("reserved_bytes"), 4096 + 4608 + (7 << 19));  // 3 MiB + 1 rounds up to 3.5 MiB
  emptyCache();
  EXPECT_EQ(stat("reserved_bytes"), 0);
  EXPECT_EQ(stat("allocated_bytes"), 0);
}

// Many blocks of several classes freed in random order and taken again:
// every live tensor keeps its own block (its values survive the others'
// frees and reuse), requests of the freed sizes are all served from the
// cache, and the statistics come back to zero.
TEST_F(GpusimRuntimeTest, ManyBlocksFreedInAnyOrderAreReusedAndNeverShared) {
  struct Live {
    Tensor t;
    int64_t n;
    float value;
  };
  std::mt19937 rng(7);
  const int64_t allocations = stat("allocations");
  std::vector<Live> live;
  float next_value = 0;
  auto allocate = [&](int64_t n) {
    live.push_back({full({n}, next_value, {.dtype = ScalarType::Float32, .device = dev_}), n, next_value});
    next_value += 1;
  };
  for (int i = 0; i < 300; ++i) allocate(100 + (i % 5) * 300);  // five size classes
  const int64_t misses = stat("cache_misses");
  for (int round = 0; round < 3; ++round) {
    std::shuffle(live.begin(), live.end(), rng);
    std::vector<int64_t> freed_sizes;
    for (size_t i = 100; i < live.size(); ++i) freed_sizes.push_back(live[i].n);
    live.resize(100);  // frees two thirds, in random order
    for (int64_t n : freed_sizes) allocate(n);
    for (const Live& l : live) {
      const std::vector<float> v = l.t.cpu().toVector<float>();
      ASSERT_EQ(std::count(v.begin(), v.end(), l.value), l.n) << "round " << round;
    }
  }
  EXPECT_EQ(stat("cache_misses"), misses);
  live.clear();
  EXPECT_EQ(stat("allocated_bytes"), 0);
  EXPECT_EQ(stat("allocations") - allocations, 300 + 3 * 200);
}

TEST_F(GpusimRuntimeTest, ResetPeakMemoryStats) {
  { Tensor big = empty({1 << 20}, {.dtype = ScalarType::Float32, .device = dev_}); }
  EXPECT_GE(stat("peak_allocated_bytes"), 4 << 20);
  Dispatcher::singleton().findOpOrThrow("gpusim::reset_peak_memory_stats").typed<void(int64_t)>().call(0);
  EXPECT_EQ(stat("peak_allocated_bytes"), 0);
  EXPECT_THAT([] { stat("bytes"); }, ::testing::ThrowsMessage<Error>(HasSubstr("unknown statistic 'bytes'")));
}

TEST_F(GpusimRuntimeTest, HugeRequestFailsCleanly) {
  try {
    Tensor t = empty({int64_t{1} << 60}, {.dtype = ScalarType::UInt8, .device = dev_});
    FAIL() << "a 2^60-byte tensor was allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kResourceExhausted) << e.what();
    EXPECT_THAT(e.message(), HasSubstr("out of memory on gpusim:0"));
  }
  // More than the device has, but representable: the driver says no.
  try {
    Tensor t = empty({int64_t{3} << 29}, {.dtype = ScalarType::UInt8, .device = dev_});  // 1.5 GiB of 1 GiB
    FAIL() << "1.5 GiB was allocated on a 1 GiB device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kResourceExhausted) << e.what();
    EXPECT_THAT(e.message(), AllOf(HasSubstr("tried to allocate 1610612736 bytes"), HasSubstr("1073741824 bytes")));
  }
  Tensor ok = ones({4}, {.device = dev_});  // the device still works
  EXPECT_EQ(ok.cpu().toVector<float>(), (std::vector<float>{1, 1, 1, 1}));
}

TEST_F(GpusimRuntimeTest, OutOfMemoryEmptiesTheCacheAndRetries) {
  // 640 MiB cached, then 768 MiB (another class): only fits once the cache
  // is returned to the driver.
  { Tensor a = empty({int64_t{640} << 20}, {.dtype = ScalarType::UInt8, .device = dev_}); }
  EXPECT_EQ(stat("reserved_bytes"), int64_t{640} << 20);
  Tensor b = empty({int64_t{768} << 20}, {.dtype = ScalarType::UInt8, .device = dev_});
  EXPECT_EQ(stat("reserved_bytes"), int64_t{768} << 20);
  EXPECT_EQ(stat("allocated_bytes"), int64_t{768} << 20);
}

TEST_F(GpusimRuntimeTest, CopiesBothWaysIncludingNonContiguous) {
  std::vector<float> values(6 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 3;
  Tensor host = tensorFromVector<float>(values, {6, 5});
  Tensor dev = host.to(dev_);
  EXPECT_EQ(dev.device().str(), "gpusim:0");
  EXPECT_EQ(dev.cpu().toVector<float>(), values);
  // Transposed on either side.
  Tensor t_dev = host.t().to(dev_);
  EXPECT_EQ(t_dev.cpu().toVector<float>(), host.t().contiguous().toVector<float>());
  EXPECT_EQ(dev.t().cpu().toVector<float>(), host.t().contiguous().toVector<float>());
  // Device to device (a copy on the device) and a strided slice of it.
  Tensor copy = dev.clone();
  EXPECT_EQ(copy.cpu().toVector<float>(), values);
  EXPECT_EQ(dev.slice(1, 1, 5, 2).cpu().toVector<float>(), host.slice(1, 1, 5, 2).contiguous().toVector<float>());
}

TEST_F(GpusimRuntimeTest, LargeHostCopiesStreamThroughTheStagingRing) {
  // 11 MiB: more than the whole pinned ring (4 x 2 MiB), so slots are reused.
  const int64_t n = int64_t{11} << 18;
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i % 9973);
  Tensor dev = Tensor(tensorFromVector<float>(values, {n})).to(dev_);
  EXPECT_EQ(dev.cpu().toVector<float>(), values);
}

TEST_F(GpusimRuntimeTest, MissingDeviceIsNamed) {
  EXPECT_THAT([] { (void)ones({2}, {.device = Device::fromString("gpusim:3")}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("gpusim:3")));
}

}  // namespace
}  // namespace backplane
