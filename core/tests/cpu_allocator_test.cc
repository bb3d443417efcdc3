// The CPU allocator's cache of large blocks (Note [CPU caching allocator]):
// what a user relies on: a freed block is reused for a request of its size
// class, a live block is never handed out twice, the limit bounds what is
// kept, emptying returns everything, small requests bypass it, and the
// statistics count all of it. Every test sets the limit itself (the default
// is 0 under AddressSanitizer) and starts from an empty cache.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backplane/core/allocator.h"
#include "backplane/core/error.h"

namespace backplane {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
const Device kCpu{DeviceType::CPU, 0};

class CpuCache : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_limit_ = cpuCacheStats().limit_bytes;
    setCpuCacheLimit(int64_t{1} << 30);
    emptyCpuCache();
  }
  void TearDown() override { setCpuCacheLimit(saved_limit_); }
  static DataPtr allocate(size_t n) { return cpuAllocator().allocate(n, kCpu); }

 private:
  int64_t saved_limit_ = 0;
};

TEST_F(CpuCache, AFreedBlockServesTheNextRequestOfItsSizeClass) {
  const CpuCacheStats before = cpuCacheStats();
  void* first;
  {
    DataPtr a = allocate(kMiB);
    first = a.get();
    EXPECT_EQ(cpuCacheStats().allocated_bytes - before.allocated_bytes, static_cast<int64_t>(kMiB));
  }
  EXPECT_EQ(cpuCacheStats().cached_bytes, static_cast<int64_t>(kMiB));
  DataPtr b = allocate(kMiB - 1000);  // rounds up to the same 1 MiB class
  EXPECT_EQ(b.get(), first);
  const CpuCacheStats after = cpuCacheStats();
  EXPECT_EQ(after.cached_bytes, 0);
  EXPECT_EQ(after.allocations - before.allocations, 2);
  EXPECT_EQ(after.cache_hits - before.cache_hits, 1);
  EXPECT_EQ(after.cache_misses - before.cache_misses, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % 64, 0u);
}

TEST_F(CpuCache, RequestsAreRoundedToFourClassesPerPowerOfTwo) {
  const int64_t base = cpuCacheStats().allocated_bytes;
  {
    DataPtr a = allocate((size_t{64} << 10) + 1);  // just above 64 KiB: the 80 KiB class
    EXPECT_EQ(cpuCacheStats().allocated_bytes - base, int64_t{80} << 10);
    DataPtr b = allocate(3 * kMiB + 1);  // the 3.5 MiB class
    EXPECT_EQ(cpuCacheStats().allocated_bytes - base, (int64_t{80} << 10) + (int64_t{7} << 19));
  }
  DataPtr c = allocate(2 * kMiB);  // a different class: not served by the cached 3.5 MiB block
  EXPECT_EQ(cpuCacheStats().cached_bytes, (int64_t{80} << 10) + (int64_t{7} << 19));
}

TEST_F(CpuCache, SmallRequestsBypassTheCache) {
  const CpuCacheStats before = cpuCacheStats();
  { DataPtr a = allocate((size_t{64} << 10) - 1); }
  const CpuCacheStats after = cpuCacheStats();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_EQ(after.cached_bytes, 0);
}

TEST_F(CpuCache, LiveBlocksAreNeverSharedEvenWhenTheCacheHoldsTheirClass) {
  std::vector<DataPtr> live;
  { DataPtr freed = allocate(kMiB); }  // one cached block of the class
  std::set<void*> seen;
  for (int i = 0; i < 4; ++i) {
    live.push_back(allocate(kMiB));
    std::memset(live.back().get(), i + 1, kMiB);
    EXPECT_TRUE(seen.insert(live.back().get()).second) << "block " << i << " was handed out twice";
  }
  for (int i = 0; i < 4; ++i) {
    const auto* p = static_cast<const unsigned char*>(live[i].get());
    EXPECT_EQ(p[0], i + 1);
    EXPECT_EQ(p[kMiB - 1], i + 1);
  }
}

TEST_F(CpuCache, TheLimitBoundsWhatIsKeptAndLoweringItFreesTheRest) {
  setCpuCacheLimit(2 * kMiB);
  { DataPtr a = allocate(kMiB), b = allocate(kMiB), c = allocate(kMiB); }
  EXPECT_EQ(cpuCacheStats().cached_bytes, static_cast<int64_t>(2 * kMiB));  // the third block went back to malloc
  EXPECT_EQ(cpuCacheStats().limit_bytes, static_cast<int64_t>(2 * kMiB));
  setCpuCacheLimit(kMiB);
  EXPECT_EQ(cpuCacheStats().cached_bytes, static_cast<int64_t>(kMiB));
  setCpuCacheLimit(0);  // off: nothing is kept
  EXPECT_EQ(cpuCacheStats().cached_bytes, 0);
  { DataPtr d = allocate(kMiB); }
  EXPECT_EQ(cpuCacheStats().cached_bytes, 0);
  EXPECT_THROW(setCpuCacheLimit(-1), Error);
}

TEST_F(CpuCache, EmptyingReturnsEveryCachedBlock) {
  { DataPtr a = allocate(kMiB), b = allocate(5 * kMiB), c = allocate(100 << 10); }
  EXPECT_GT(cpuCacheStats().cached_bytes, 0);
  emptyCpuCache();
  EXPECT_EQ(cpuCacheStats().cached_bytes, 0);
  const CpuCacheStats before = cpuCacheStats();
  DataPtr d = allocate(kMiB);
  EXPECT_EQ(cpuCacheStats().cache_misses - before.cache_misses, 1);
}

// Threads allocating, filling and freeing blocks of a few classes at once:
// every block keeps its owner's bytes while it lives, and the books balance.
TEST_F(CpuCache, ThreadsNeverShareALiveBlock) {
  const int64_t base = cpuCacheStats().allocated_bytes;
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &bad] {
      std::mt19937 rng(t);
      std::vector<DataPtr> mine;
      for (int i = 0; i < 300; ++i) {
        const size_t n = (size_t{64} << 10) * (1 + rng() % 6);
        mine.push_back(cpuAllocator().allocate(n, kCpu));
        std::memset(mine.back().get(), t + 1, n);
        if (mine.size() > 3) {
          const auto* p = static_cast<const unsigned char*>(mine.front().get());
          bad[t] += p[0] != t + 1 || p[(64 << 10) - 1] != t + 1;
          mine.erase(mine.begin());
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
  EXPECT_EQ(cpuCacheStats().allocated_bytes, base);
  EXPECT_GT(cpuCacheStats().cache_hits, 0);
}

// The limit's environment variable is read once, so it is checked in child
// processes: this test, run only by CacheLimitComesFromTheEnvironment.
TEST(CpuCacheEnvironment, DISABLED_Child) {
  std::printf("CPU_CACHE_LIMIT=%lld\n", static_cast<long long>(cpuCacheStats().limit_bytes));
}

// The child's limit and what it printed to stderr.
std::pair<long long, std::string> childLimit(const std::string& setting) {
  const std::string cmd = "BACKPLANE_CPU_CACHE_MB=" + setting + " /proc/" + std::to_string(getpid()) +
                          "/exe --gtest_also_run_disabled_tests --gtest_filter=CpuCacheEnvironment.DISABLED_Child 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, ""};
  long long limit = -1;
  std::string all;
  char line[512];
  while (std::fgets(line, sizeof line, p) != nullptr) {
    all += line;
    std::sscanf(line, "CPU_CACHE_LIMIT=%lld", &limit);
  }
  pclose(p);
  return {limit, all};
}

TEST(CpuCacheEnvironment, CacheLimitComesFromTheEnvironment) {
  EXPECT_EQ(childLimit("3").first, 3ll << 20);
  EXPECT_EQ(childLimit("0").first, 0);
  const auto [limit, output] = childLimit("lots");
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(limit, 0);
#else
  EXPECT_EQ(limit, 256ll << 20);
#endif
  EXPECT_NE(output.find("BACKPLANE_CPU_CACHE_MB='lots' is not a number of MiB"), std::string::npos) << output;
}

}  // namespace
}  // namespace backplane
