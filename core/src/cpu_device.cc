#include "cpu_device.h"

#include <cstdlib>
#include <cstring>

#include "backplane/core/error.h"

namespace backplane {
namespace {

constexpr size_t kCpuAlignment = 64;

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, device);
    size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    if (rounded < nbytes) BP_THROW(kResourceExhausted, "cpu allocation of ", nbytes, " bytes overflows");
    void* p = std::aligned_alloc(kCpuAlignment, rounded);
    if (!p) BP_THROW(kResourceExhausted, "cpu: out of memory allocating ", nbytes, " bytes");
    return DataPtr(p, p, [](void*, void* ptr) { std::free(ptr); }, device);
  }
};

class CpuDeviceInterface final : public DeviceInterface {
 public:
  int deviceCount() const override { return 1; }
  bool isHostAccessible() const override { return true; }
  Allocator& allocator() override { return allocator_; }
  void copyHostToDevice(void* dst, Device, const void* src, size_t n) override { copy(dst, src, n); }
  void copyDeviceToHost(void* dst, const void* src, Device, size_t n) override { copy(dst, src, n); }
  void copyDeviceToDevice(void* dst, Device, const void* src, Device, size_t n) override {
    copy(dst, src, n);
  }
  void memset(void* dst, Device, uint8_t value, size_t n) override {
    if (n) std::memset(dst, value, n);
  }
  void synchronize(Device) override {}

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

}  // namespace backplane
