#pragma once
// Memory owned by a device: DataPtr and Allocator.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "backplane/core/device.h"

namespace backplane {

// Owns one allocation. `ptr` is a device address: for devices the host cannot
// read (DeviceInterface::isHostAccessible() == false) it is opaque to the host
// and must only be passed back to that device's functions. The deleter is
// called with (ctx, ptr) exactly once, when the DataPtr is destroyed.
class DataPtr {
 public:
  using Deleter = void (*)(void* ctx, void* ptr);

  DataPtr() = default;
  DataPtr(void* ptr, void* ctx, Deleter deleter, Device device)
      : ptr_(ptr), ctx_(ctx), deleter_(deleter), device_(device) {}
  DataPtr(DataPtr&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)),
        ctx_(std::exchange(o.ctx_, nullptr)),
        deleter_(std::exchange(o.deleter_, nullptr)),
        device_(o.device_) {}
  DataPtr& operator=(DataPtr&& o) noexcept {
    DataPtr(std::move(o)).swap(*this);
    return *this;
  }
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() {
    if (deleter_) deleter_(ctx_, ptr_);
  }

  void* get() const { return ptr_; }
  void* context() const { return ctx_; }
  Device device() const { return device_; }
  void swap(DataPtr& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(ctx_, o.ctx_);
    std::swap(deleter_, o.deleter_);
    std::swap(device_, o.device_);
  }

 private:
  void* ptr_ = nullptr;
  void* ctx_ = nullptr;
  Deleter deleter_ = nullptr;
  Device device_;
};

// Hands out memory on one device type. Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Allocates `nbytes` (0 is allowed and may return a null ptr) on `device`.
  // Throws Error (kResourceExhausted) when the memory is not available.
  virtual DataPtr allocate(size_t nbytes, Device device) = 0;
};

// The host allocator: 64-byte aligned, so vector loads never split a line.
// Blocks of 64 KiB and more are cached for reuse when freed (Note [CPU
// caching allocator] in core/src/cpu_device.cc).
Allocator& cpuAllocator();

// The CPU allocator's cache of large blocks (>= 64 KiB), in bytes and
// counts since the process started; sizes are the rounded class sizes.
struct CpuCacheStats {
  int64_t allocated_bytes;  // in live blocks of the cached sizes
  int64_t cached_bytes;     // freed blocks kept for reuse
  int64_t allocations;      // requests of the cached sizes
  int64_t cache_hits;       // of them, served from the cache
  int64_t cache_misses;     // of them, served by malloc
  int64_t limit_bytes;      // the most the cache keeps (0: caching off)
};
CpuCacheStats cpuCacheStats();
// Frees every cached block (back to malloc, which may return it to the OS).
void emptyCpuCache();
// Sets the most bytes the cache keeps and frees cached blocks above it; 0
// turns caching off. The default is BACKPLANE_CPU_CACHE_MB (MiB) when set,
// else 256 MiB, or 0 in an AddressSanitizer build. Throws for a negative limit.
void setCpuCacheLimit(int64_t bytes);

}  // namespace backplane
