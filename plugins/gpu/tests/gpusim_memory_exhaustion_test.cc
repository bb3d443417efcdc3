// Device memory exhaustion on the simulator plugin (1 GiB of device
// memory), through the host as applications meet it: the caching
// allocator of runtime.cu (the CUDA and HIP plugins' own) fails a request
// the driver cannot serve with kResourceExhausted naming the device and the
// sizes, empties its cache and retries once first when anything is cached,
// and after any of it its statistics are those of the live tensors, later
// allocations work, and freeing everything gives the whole device back
// (Note [Streams and the caching allocator] in runtime.cu).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/stream.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kDeviceBytes = int64_t{1} << 30;  // kSimDeviceMemory

// The allocator's statistics (gpusim::memory_stat), all of them.
struct Stats {
  int64_t allocated, reserved, peak, allocations, hits, misses, retries, ooms;
};

class GpusimMemoryExhaustionTest : public gpu_test::GpusimSuite {
 protected:
  void SetUp() override {
    dev_ = sim();
    static auto empty_cache = Dispatcher::singleton().findOpOrThrow("gpusim::empty_cache").typed<void(int64_t)>();
    empty_cache.call(0);
    Dispatcher::singleton().findOpOrThrow("gpusim::reset_peak_memory_stats").typed<void(int64_t)>().call(0);
    base_ = stats();
    // Every test owns the whole device: nothing else is allocated or cached.
    ASSERT_EQ(base_.allocated, 0);
    ASSERT_EQ(base_.reserved, 0);
  }
  // Freeing everything gives the whole device back: the statistics are at
  // the baseline and the driver serves the device's full size again.
  void TearDown() override {
    const Stats s = stats();
    EXPECT_EQ(s.allocated, base_.allocated);
    EXPECT_EQ(s.allocations, s.hits + s.misses);
    emptyCache();
    EXPECT_EQ(stats().reserved, 0);
    Tensor all = bytes(kDeviceBytes);
    EXPECT_EQ(stats().allocated, kDeviceBytes);
  }

  static Stats stats() {
    static auto op =
        Dispatcher::singleton().findOpOrThrow("gpusim::memory_stat").typed<int64_t(std::string_view, int64_t)>();
    const auto get = [](std::string_view name) { return op.call(name, 0); };
    return Stats{get("allocated_bytes"),    get("reserved_bytes"),      get("peak_allocated_bytes"),
                 get("allocations"),        get("cache_hits"),          get("cache_misses"),
                 get("allocation_retries"), get("out_of_memory_errors")};
  }
  static void emptyCache() {
    static auto op = Dispatcher::singleton().findOpOrThrow("gpusim::empty_cache").typed<void(int64_t)>();
    op.call(0);
  }
  // An uninitialised uint8 tensor of `n` bytes: no kernel touches it.
  Tensor bytes(int64_t n) const { return empty({n}, {.dtype = ScalarType::UInt8, .device = dev_}); }
  // The message of the out-of-memory error allocating `n` bytes throws;
  // fails the test if it allocates or throws anything else.
  std::string outOfMemory(int64_t n) const {
    try {
      Tensor t = bytes(n);
      ADD_FAILURE() << n << " bytes were allocated";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), absl::StatusCode::kResourceExhausted) << e.what();
      return e.message();
    }
    return {};
  }
  static std::vector<uint8_t> values(const Tensor& t) { return t.cpu().contiguous().toVector<uint8_t>(); }

  Device dev_{DeviceType::CPU};
  Stats base_{};
};

// Live tensors fill the device; the next request fails without a retry
// (nothing is cached) and changes nothing; the device goes on working.
TEST_F(GpusimMemoryExhaustionTest, FillingTheDeviceFailsCleanly) {
  Tensor small = full({4}, 5.0, {.dtype = ScalarType::UInt8, .device = dev_});  // a 512-byte block
  std::vector<Tensor> big;
  const int64_t n = 300 * kMiB;  // a 320 MiB block
  for (int i = 0; i < 3; ++i) big.push_back(bytes(n));
  const int64_t live = 3 * 320 * kMiB + 512;
  const std::string message = outOfMemory(n);
  EXPECT_THAT(message, AllOf(HasSubstr("out of memory on gpusim:0: tried to allocate 314572800 bytes (a block of "
                                       "335544320); the device has 1073741824 bytes, "),
                             HasSubstr(std::to_string(kDeviceBytes - live) + " free; "),
                             HasSubstr(std::to_string(live) + " bytes are allocated by live tensors of this process, "
                                                              "0 cached; free tensors or use smaller ones")));
  Stats s = stats();
  EXPECT_EQ(s.allocated, live);
  EXPECT_EQ(s.reserved, live);
  EXPECT_EQ(s.peak, live);
  EXPECT_EQ(s.allocations, base_.allocations + 4);
  EXPECT_EQ(s.misses, base_.misses + 4);
  EXPECT_EQ(s.hits, base_.hits);
  EXPECT_EQ(s.retries, base_.retries);  // nothing cached: nothing to retry with
  EXPECT_EQ(s.ooms, base_.ooms + 1);
  // The same again: the failure left nothing behind.
  EXPECT_THAT(outOfMemory(n), HasSubstr("tried to allocate 314572800 bytes"));
  EXPECT_EQ(stats().ooms, base_.ooms + 2);
  EXPECT_EQ(stats().allocated, live);
  // Later allocations work, kernels run, live data is intact.
  Tensor sum = small + full({4}, 2.0, {.dtype = ScalarType::UInt8, .device = dev_});
  EXPECT_THAT(values(sum), Each(7));
  EXPECT_THAT(values(small), Each(5));
  big.pop_back();  // cached: the next request of its class is a hit
  Tensor again = bytes(n);
  EXPECT_EQ(stats().hits, base_.hits + 1);
}

// The request fits only once the cache is returned to the driver: the
// retry succeeds, the cached bytes are gone from reserved_bytes, and the
// live tensor's data is untouched.
TEST_F(GpusimMemoryExhaustionTest, EmptyingTheCacheMakesRoomAndTheRetrySucceeds) {
  Tensor kept = bytes(384 * kMiB);
  kept.slice(0, 0, 1000).fill_(7);
  kept.slice(0, 384 * kMiB - 1000, 384 * kMiB).fill_(9);
  { std::vector<Tensor> freed{bytes(256 * kMiB), bytes(256 * kMiB)}; }  // cached, not returned
  const Stats before = stats();
  ASSERT_EQ(before.allocated, 384 * kMiB);
  ASSERT_EQ(before.reserved, 896 * kMiB);
  Tensor big = bytes(512 * kMiB);  // 128 MiB free, another class: only the retry can serve it
  const Stats s = stats();
  EXPECT_EQ(s.allocated, 896 * kMiB);
  EXPECT_EQ(s.reserved, 896 * kMiB);  // both cached blocks went back to the driver
  EXPECT_EQ(s.peak, 896 * kMiB);
  EXPECT_EQ(s.retries, before.retries + 1);
  EXPECT_EQ(s.ooms, before.ooms);
  EXPECT_EQ(s.misses, before.misses + 1);
  EXPECT_EQ(s.hits, before.hits);
  EXPECT_EQ(s.allocations, before.allocations + 1);
  EXPECT_THAT(values(kept.slice(0, 0, 1000)), Each(7));
  EXPECT_THAT(values(kept.slice(0, 384 * kMiB - 1000, 384 * kMiB)), Each(9));
}

// Even the whole device minus the live tensors is too little: the cache is
// emptied, the retry fails, and the error says so; reserved_bytes is then
// exactly the live tensors.
TEST_F(GpusimMemoryExhaustionTest, TheRetryFailsToo) {
  Tensor kept = bytes(512 * kMiB);
  { Tensor cached = bytes(256 * kMiB); }
  ASSERT_EQ(stats().reserved, 768 * kMiB);
  EXPECT_THAT(outOfMemory(768 * kMiB),
              AllOf(HasSubstr("out of memory on gpusim:0: tried to allocate 805306368 bytes (a block of 805306368)"),
                    HasSubstr("the device has 1073741824 bytes, 536870912 free; 536870912 bytes are allocated by "
                              "live tensors of this process, 0 cached (the cache was emptied and the request "
                              "retried)")));
  Stats s = stats();
  EXPECT_EQ(s.allocated, 512 * kMiB);
  EXPECT_EQ(s.reserved, 512 * kMiB);
  EXPECT_EQ(s.peak, 768 * kMiB);
  EXPECT_EQ(s.retries, base_.retries + 1);
  EXPECT_EQ(s.ooms, base_.ooms + 1);
  EXPECT_EQ(s.allocations, base_.allocations + 2);
  // What fits is served.
  Tensor half = bytes(512 * kMiB);
  EXPECT_EQ(stats().allocated, kDeviceBytes);
  EXPECT_EQ(stats().misses, base_.misses + 3);
}

// More than any device has: refused before the driver is asked.
TEST_F(GpusimMemoryExhaustionTest, ImpossibleRequestsAreCounted) {
  EXPECT_THAT(outOfMemory(int64_t{1} << 62 | 1), HasSubstr("out of memory on gpusim:0"));
  EXPECT_THAT(outOfMemory(kDeviceBytes + 1), HasSubstr("the device has 1073741824 bytes, 1073741824 free"));
  const Stats s = stats();
  EXPECT_EQ(s.ooms, base_.ooms + 2);
  EXPECT_EQ(s.retries, base_.retries);
  EXPECT_EQ(s.allocations, base_.allocations);
  EXPECT_EQ(s.reserved, 0);
}

// Blocks cached on an app stream whose work has not run yet (the simulator
// defers it: Note [Deferred streams in the simulator]): emptying the cache
// for the retry runs that work before the memory goes back to the driver,
// the stream's live tensors keep their data, and the stream works
// afterwards. (The freed block is small enough for ASan's quarantine, so
// an ASan build reports a kernel that writes it after the free.)
TEST_F(GpusimMemoryExhaustionTest, CachedBlocksOfAnAppStreamAreReturnedAfterItsWork) {
  Tensor kept = bytes(640 * kMiB);  // the default stream
  Stream side = Stream::create(dev_);
  Tensor small;
  {
    StreamGuard on(side);
    small = zeros({512}, {.dtype = ScalarType::UInt8, .device = dev_});
    small.fill_(3);  // queued on `side`
    Tensor big = bytes(192 * kMiB);
    big.slice(0, 0, 1000).fill_(1);  // queued on `side`, into the block freed next
  }
  Stats s = stats();
  ASSERT_EQ(s.reserved - s.allocated, 192 * kMiB);  // cached on `side`
  Tensor other = bytes(256 * kMiB);                 // the default stream; fits only once `big`'s block is returned
  s = stats();
  EXPECT_EQ(s.retries, base_.retries + 1);
  EXPECT_EQ(s.reserved, s.allocated);
  EXPECT_EQ(s.allocated, 896 * kMiB + 512);
  {
    StreamGuard on(side);
    EXPECT_THAT(values(small), Each(3));
    Tensor more = small + full({512}, 1.0, {.dtype = ScalarType::UInt8, .device = dev_});
    EXPECT_THAT(values(more), Each(4));
  }
  side.synchronize();
}

}  // namespace
}  // namespace backplane
