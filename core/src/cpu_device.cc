#include "cpu_device.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backplane/core/error.h"

// AddressSanitizer: GCC defines __SANITIZE_ADDRESS__, clang has the feature test.
#if defined(__SANITIZE_ADDRESS__)
#define BP_CPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BP_CPU_ASAN 1
#endif
#endif
#if defined(BP_CPU_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace backplane {
namespace {

// Note [CPU caching allocator]
// Fresh memory costs the host a page fault and a page clear per 4 KiB the
// first time it is touched. glibc serves large requests with fresh mmap'd
// pages (above its mmap threshold) or trims the top of its heap on free, so
// a tensor of a few MiB made, used and freed at every layer of a network
// pays that again at every call (the LiDAR backbone's forward pass on 2
// cores: about 2,200 page faults per pass without the cache, 540 with it,
// and add.out 6.9 -> 4.2 ms of 12 calls).
// The CPU allocator therefore keeps freed large blocks and hands them to the
// next request of the same size class, as PyTorch's CUDA caching allocator
// (and the GPU plugin's, plugins/gpu/runtime.cu) do for device memory:
// - Requests of at least kCacheMin (64 KiB) bytes are rounded up to a size
//   class: four classes per power of two (at most 25% waste), and a cached
//   block serves only requests of its own class (no splitting or merging:
//   the bookkeeping is one free list per class, reuse is predictable).
//   Smaller requests go to malloc as before: the hot path of small tensors
//   is unchanged, and glibc reuses small chunks without faults anyway.
// - Thread safety: one mutex per size class guards its free list, so
//   threads allocating different sizes never meet, and the lock is held for
//   a push or a pop (tens of ns, against microseconds of faults for one
//   64 KiB block). The statistics are relaxed atomics.
// - Bounded: freed blocks are kept while the cached bytes stay within the
//   limit (setCpuCacheLimit(), BACKPLANE_CPU_CACHE_MB, default 256 MiB); a
//   block that does not fit is freed. The limit bounds what is held beyond
//   the live tensors: memory that malloc could otherwise have reused for
//   other sizes. A free list keeps its capacity, so
//   once warm, allocation and free allocate nothing themselves. If malloc
//   fails, the cache is emptied and the request retried once.
// - A block is handed out again only after its tensor's storage released it
//   (the DataPtr's deleter), so two live tensors never share one; its bytes
//   are whatever the previous tensor left, as malloc's are (empty() never
//   promised zeros), so results do not change.
// - AddressSanitizer: with the cache on, a use after free of a cached block
//   is reported (cached blocks are poisoned), but one after the block was
//   handed out again is not, as with any pool. So under ASan the default
//   limit is 0 (caching off: every free goes to ASan's allocator and its
//   quarantine); set BACKPLANE_CPU_CACHE_MB or setCpuCacheLimit() to run the
//   cache itself under ASan (its tests do).
// - emptyCpuCache() returns every cached block to malloc; the cache lives
//   as long as the process (the allocator is never destroyed, like the
//   device interface, so blocks freed by late static destructors are safe).
// Cache-line alignment for vector loads and oneDNN, above kSmallAllocation bytes.
constexpr size_t kCpuAlignment = 64;
constexpr size_t kSmallAllocation = 256;
constexpr size_t kCacheMin = size_t{64} << 10;
constexpr int kCacheMinLog2 = 16;
constexpr int kClassesPerPowerOfTwo = 4;
// Classes up to 2^63 bytes; requests that large fail in malloc anyway.
constexpr int kSizeClasses = (63 - kCacheMinLog2) * kClassesPerPowerOfTwo + 1;
constexpr int64_t kDefaultCacheLimit = int64_t{256} << 20;

#if defined(BP_CPU_ASAN)
constexpr bool kAddressSanitizer = true;
void poison(void* p, size_t n) { __asan_poison_memory_region(p, n); }
void unpoison(void* p, size_t n) { __asan_unpoison_memory_region(p, n); }
#else
constexpr bool kAddressSanitizer = false;
void poison(void*, size_t) {}
void unpoison(void*, size_t) {}
#endif

// The class of a request of n >= kCacheMin bytes: n rounded up to a multiple
// of 2^(floor(log2 n) - 2); -1 if the rounding overflows.
int sizeClassOf(size_t n) {
  const int e = 63 - __builtin_clzll(n);  // floor(log2 n) >= kCacheMinLog2
  if (e > 62) return -1;
  const size_t step = size_t{1} << (e - 2);
  const size_t steps = (n + step - 1) / step;  // 4 to 8; 8 is the next power's first class
  return steps == 8 ? (e + 1 - kCacheMinLog2) * kClassesPerPowerOfTwo
                    : (e - kCacheMinLog2) * kClassesPerPowerOfTwo + static_cast<int>(steps - 4);
}
size_t classBytes(int c) {
  const int e = kCacheMinLog2 + c / kClassesPerPowerOfTwo;
  return (size_t{1} << e) + static_cast<size_t>(c % kClassesPerPowerOfTwo) * (size_t{1} << (e - 2));
}

// BACKPLANE_CPU_CACHE_MB, or the default (0 under ASan).
int64_t readCacheLimit() {
  const int64_t fallback = kAddressSanitizer ? 0 : kDefaultCacheLimit;
  const char* env = std::getenv("BACKPLANE_CPU_CACHE_MB");
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  const long long mb = std::strtoll(env, &end, 10);
  if (end == env || *end != '\0' || mb < 0 || mb > (int64_t{1} << 40)) {
    std::fprintf(stderr, "backplane: BACKPLANE_CPU_CACHE_MB='%s' is not a number of MiB in [0, 2^40]; using %lld MiB\n",
                 env, static_cast<long long>(fallback >> 20));
    return fallback;
  }
  return static_cast<int64_t>(mb) << 20;
}

class CpuAllocator final : public Allocator {
 public:
  CpuAllocator() : limit_(readCacheLimit()) {
    for (int c = 0; c < kSizeClasses; ++c) {
      classes_[c].owner = this;
      classes_[c].bytes = classBytes(c);
    }
  }

  DataPtr allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, device);
    if (nbytes >= kCacheMin) return allocateLarge(nbytes, device);
    void* p;
    if (nbytes <= kSmallAllocation) {
      // malloc's 16-byte alignment covers every element type, and glibc's
      // aligned allocation costs several times more (it splits and
      // consolidates chunks): small tensors are the ones whose whole op
      // time is overhead.
      p = std::malloc(nbytes);
    } else {
      p = std::aligned_alloc(kCpuAlignment, (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment);
    }
    if (!p) BP_THROW(kResourceExhausted, "cpu: out of memory allocating ", nbytes, " bytes");
    return DataPtr(
        p, p, [](void*, void* ptr) { std::free(ptr); }, device);
  }

  CpuCacheStats stats() const {
    CpuCacheStats s;
    s.allocated_bytes = allocated_.load(std::memory_order_relaxed);
    s.cached_bytes = cached_.load(std::memory_order_relaxed);
    s.allocations = allocations_.load(std::memory_order_relaxed);
    s.cache_hits = hits_.load(std::memory_order_relaxed);
    s.cache_misses = allocations_.load(std::memory_order_relaxed) - hits_.load(std::memory_order_relaxed);
    s.limit_bytes = limit_.load(std::memory_order_relaxed);
    return s;
  }

  // Frees cached blocks, largest classes first, until at most `keep` bytes stay cached.
  void trim(int64_t keep) {
    for (int c = kSizeClasses - 1; c >= 0 && cached_.load(std::memory_order_relaxed) > keep; --c) {
      SizeClass& sc = classes_[c];
      absl::MutexLock lock(&sc.mutex);
      while (!sc.free.empty() && cached_.load(std::memory_order_relaxed) > keep) {
        void* p = sc.free.back();
        sc.free.pop_back();
        cached_.fetch_sub(static_cast<int64_t>(sc.bytes), std::memory_order_relaxed);
        unpoison(p, sc.bytes);
        std::free(p);
      }
    }
  }

  void setLimit(int64_t bytes) {
    BP_CHECK(bytes >= 0, "setCpuCacheLimit: the limit must be >= 0 bytes (0 turns caching off), got ", bytes);
    limit_.store(bytes, std::memory_order_relaxed);
    trim(bytes);
  }

 private:
  struct SizeClass {
    CpuAllocator* owner = nullptr;
    size_t bytes = 0;
    absl::Mutex mutex;
    std::vector<void*> free ABSL_GUARDED_BY(mutex);  // the most recently freed last
  };

  DataPtr allocateLarge(size_t nbytes, Device device) {
    const int c = sizeClassOf(nbytes);
    if (c < 0) BP_THROW(kResourceExhausted, "cpu allocation of ", nbytes, " bytes overflows");
    SizeClass& sc = classes_[c];
    allocations_.fetch_add(1, std::memory_order_relaxed);
    void* p = nullptr;
    {
      absl::MutexLock lock(&sc.mutex);
      if (!sc.free.empty()) {
        p = sc.free.back();
        sc.free.pop_back();
      }
    }
    if (p) {
      cached_.fetch_sub(static_cast<int64_t>(sc.bytes), std::memory_order_relaxed);
      hits_.fetch_add(1, std::memory_order_relaxed);
      unpoison(p, sc.bytes);
    } else {
      p = std::aligned_alloc(kCpuAlignment, sc.bytes);
      if (!p && cached_.load(std::memory_order_relaxed) > 0) {
        trim(0);
        p = std::aligned_alloc(kCpuAlignment, sc.bytes);
      }
      if (!p)
        BP_THROW(kResourceExhausted, "cpu: out of memory allocating ", nbytes, " bytes (", sc.bytes,
                 " with the allocator's rounding); ", stats().cached_bytes, " bytes cached");
    }
    allocated_.fetch_add(static_cast<int64_t>(sc.bytes), std::memory_order_relaxed);
    return DataPtr(p, &sc, &CpuAllocator::release, device);
  }

  static void release(void* ctx, void* p) {
    SizeClass& sc = *static_cast<SizeClass*>(ctx);
    CpuAllocator& a = *sc.owner;
    const int64_t bytes = static_cast<int64_t>(sc.bytes);
    a.allocated_.fetch_sub(bytes, std::memory_order_relaxed);
    // Reserve room in the cache first, so concurrent frees never overshoot the limit.
    if (a.cached_.fetch_add(bytes, std::memory_order_relaxed) + bytes <= a.limit_.load(std::memory_order_relaxed)) {
      poison(p, sc.bytes);
      absl::MutexLock lock(&sc.mutex);
      sc.free.push_back(p);
      return;
    }
    a.cached_.fetch_sub(bytes, std::memory_order_relaxed);
    std::free(p);
  }

  std::atomic<int64_t> limit_;
  std::atomic<int64_t> allocated_{0}, cached_{0}, allocations_{0}, hits_{0};
  std::array<SizeClass, kSizeClasses> classes_;
};

// The "model name" line of /proc/cpuinfo, or "cpu" where there is none
// (non-x86 kernels often leave it out).
std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t begin = line.find_first_not_of(" \t", colon + 1);
    if (begin == std::string::npos) continue;
    return line.substr(begin, line.find_last_not_of(" \t") + 1 - begin);
  }
  return "cpu";
}

DeviceProperties cpuProperties() {
  DeviceProperties p;
  p.name = cpuModelName();
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) p.total_memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  p.multiprocessor_count = static_cast<int>(std::thread::hardware_concurrency());
  return p;
}

class CpuDeviceInterface final : public DeviceInterface {
 public:
  int deviceCount() const override { return 1; }
  bool isHostAccessible() const override { return true; }
  Allocator& allocator() override { return allocator_; }
  void copyHostToDevice(void* dst, Device, const void* src, size_t n) override { copy(dst, src, n); }
  void copyDeviceToHost(void* dst, const void* src, Device, size_t n) override { copy(dst, src, n); }
  void copyDeviceToDevice(void* dst, Device, const void* src, Device, size_t n) override { copy(dst, src, n); }
  void memset(void* dst, Device, uint8_t value, size_t n) override {
    if (n) std::memset(dst, value, n);
  }
  void synchronize(Device) override {}
  DeviceProperties properties(Device) const override {
    static const DeviceProperties* props = new DeviceProperties(cpuProperties());  // leaked, like the interface
    return *props;
  }

 private:
  static void copy(void* dst, const void* src, size_t n) {
    if (n) std::memmove(dst, src, n);
  }
  CpuAllocator allocator_;
};

}  // namespace

DeviceInterface& cpuDeviceInterface() {
  static CpuDeviceInterface* iface = new CpuDeviceInterface();  // leaked: see registry
  return *iface;
}

Allocator& cpuAllocator() { return cpuDeviceInterface().allocator(); }

namespace {
CpuAllocator& cachingCpuAllocator() { return static_cast<CpuAllocator&>(cpuAllocator()); }
}  // namespace

CpuCacheStats cpuCacheStats() { return cachingCpuAllocator().stats(); }
void emptyCpuCache() { cachingCpuAllocator().trim(0); }
void setCpuCacheLimit(int64_t bytes) { cachingCpuAllocator().setLimit(bytes); }

}  // namespace backplane
