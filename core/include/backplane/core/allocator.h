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
Allocator& cpuAllocator();

}  // namespace backplane
