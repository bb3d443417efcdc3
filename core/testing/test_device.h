#pragma once
// TestDevice: an in-tree device type for tests whose memory the host cannot
// read. Allocations live in a private arena and are known to the host only by
// non-canonical addresses (0xDEAD...), so any host dereference crashes at
// once, and every copy is bounds-checked against its allocation. This keeps
// Note [The host never dereferences device memory] honest in tests.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backplane/core/device_interface.h"
#include "backplane/core/device_type_registry.h"

namespace backplane::testing {

class TestDevice final : public DeviceInterface, private Allocator {
 public:
  // Registers device type `name` with `device_count` devices and installs the
  // interface; calling it again with the same name returns the same device.
  static TestDevice& install(const std::string& name = "testdev", int device_count = 2);

  DeviceType type() const { return type_; }
  Device device(DeviceIndex index = 0) const { return Device(type_, index); }

  int deviceCount() const override { return device_count_; }
  bool isHostAccessible() const override { return false; }
  // What setDLPackDeviceType said last; 0 (none) until then.
  int32_t dlpackDeviceType() const override { return dlpack_device_type_.load(); }
  // Makes this device claim that its addresses are native pointers of DLPack
  // device type `type` (for DLPack tests; nothing outside Backplane can read
  // them, of course). Install a device under its own name for this.
  void setDLPackDeviceType(int32_t type) { dlpack_device_type_.store(type); }
  Allocator& allocator() override { return *this; }
  void copyHostToDevice(void* dst, Device dst_device, const void* src, size_t n) override;
  void copyDeviceToHost(void* dst, const void* src, Device src_device, size_t n) override;
  void copyDeviceToDevice(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t n) override;
  void memset(void* dst, Device device, uint8_t value, size_t n) override;
  void synchronize(Device) override {}

  // Statistics, for tests that assert what moved.
  size_t liveAllocations() const;
  uint64_t bytesToHost() const { return to_host_.load(); }
  uint64_t bytesFromHost() const { return from_host_.load(); }
  uint64_t bytesDeviceToDevice() const { return d2d_.load(); }
  void resetCounters();

 private:
  TestDevice(DeviceType type, int device_count);
  DataPtr allocate(size_t nbytes, Device device) override;
  static void release(void* ctx, void* ptr);
  // The host bytes behind [address, address + n) on `device`; throws Error
  // naming the address when it is not inside one live allocation.
  uint8_t* resolve(const void* address, size_t n, Device device, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Block {
    size_t size;
    DeviceIndex device;
    std::unique_ptr<uint8_t[]> bytes;
  };
  const DeviceType type_;
  const int device_count_;
  mutable absl::Mutex mu_;
  std::map<uintptr_t, Block> blocks_ ABSL_GUARDED_BY(mu_);  // by start address
  uintptr_t next_address_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> to_host_{0}, from_host_{0}, d2d_{0};
  std::atomic<int32_t> dlpack_device_type_{0};
};

}  // namespace backplane::testing
