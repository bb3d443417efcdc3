#include "cpu_device.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "backplane/core/error.h"

namespace backplane {
namespace {

// Cache-line alignment for vector loads and oneDNN, above kSmallAllocation bytes.
constexpr size_t kCpuAlignment = 64;
constexpr size_t kSmallAllocation = 256;

class CpuAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes, Device device) override {
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, device);
    void* p;
    if (nbytes <= kSmallAllocation) {
      // malloc's 16-byte alignment covers every element type, and glibc's
      // aligned allocation costs several times more (it splits and
      // consolidates chunks): small tensors are the ones whose whole op
      // time is overhead.
      p = std::malloc(nbytes);
    } else {
      size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
      if (rounded < nbytes) BP_THROW(kResourceExhausted, "cpu allocation of ", nbytes, " bytes overflows");
      p = std::aligned_alloc(kCpuAlignment, rounded);
    }
    if (!p) BP_THROW(kResourceExhausted, "cpu: out of memory allocating ", nbytes, " bytes");
    return DataPtr(p, p, [](void*, void* ptr) { std::free(ptr); }, device);
  }
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
  void copyDeviceToDevice(void* dst, Device, const void* src, Device, size_t n) override {
    copy(dst, src, n);
  }
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

}  // namespace backplane
