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

// Note [Fault injection on the test device]
// A test can make the device fail the Nth call at one of its fault points,
// each counted on its own: allocations (an Error kResourceExhausted, as a
// device out of memory), and host-to-device, device-to-host,
// device-to-device copies and memsets (an Error kInternal, as a failed
// transfer). The message names the device, the fault point and the call's
// number, and says that the test injected it. armFault(point, n, count)
// makes calls n .. n+count-1 (1-based, counted from the arm) fail;
// armFault(point, 0) only counts, which is how a test finds how many calls
// an op makes at each point before failing each one in turn. A failed call
// does nothing: an allocation allocates nothing, a copy writes nothing.
// With nothing armed, each call costs one relaxed atomic load; counting is
// atomic, so tests may arm while other threads use the device.
enum class FaultPoint : int {
  kAllocate,
  kCopyHostToDevice,
  kCopyDeviceToHost,
  kCopyDeviceToDevice,
  kMemset,
};
inline constexpr int kNumFaultPoints = 5;
// "allocation", "host-to-device copy", "device-to-host copy",
// "device-to-device copy", "memset".
const char* faultPointName(FaultPoint point);

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
  void copyDeviceToDevice(void* dst, Device dst_device, const void* src, Device src_device, size_t n) override;
  void memset(void* dst, Device device, uint8_t value, size_t n) override;
  void synchronize(Device) override {}

  // Statistics, for tests that assert what moved.
  size_t liveAllocations() const;
  uint64_t bytesToHost() const { return to_host_.load(); }
  uint64_t bytesFromHost() const { return from_host_.load(); }
  uint64_t bytesDeviceToDevice() const { return d2d_.load(); }
  void resetCounters();

  // Note [Fault injection on the test device]: calls `nth` .. `nth + count - 1`
  // at `point`, counted from now, throw; nth == 0 only counts.
  void armFault(FaultPoint point, uint64_t nth, uint64_t count = 1);
  // Disarms every fault point and stops counting.
  void disarmFaults();
  // The calls at `point` since it was last armed (0 when it is not armed).
  uint64_t faultPointCalls(FaultPoint point) const;

 private:
  TestDevice(DeviceType type, int device_count);
  DataPtr allocate(size_t nbytes, Device device) override;
  static void release(void* ctx, void* ptr);
  // Counts a call at `point` when any point is armed; throws the injected
  // fault when this call is one the plan fails.
  void countFaultPoint(FaultPoint point, Device device, size_t n) {
    if (faults_armed_.load(std::memory_order_relaxed)) [[unlikely]]
      countArmedFaultPoint(point, device, n);
  }
  void countArmedFaultPoint(FaultPoint point, Device device, size_t n);
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
  struct FaultPlan {
    std::atomic<bool> armed{false};
    std::atomic<uint64_t> calls{0}, first{0}, count{0};
  };
  std::atomic<bool> faults_armed_{false};
  FaultPlan faults_[kNumFaultPoints];
};

}  // namespace backplane::testing
