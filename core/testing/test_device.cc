#include "test_device.h"

#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "backplane/core/error.h"

namespace backplane::testing {
namespace {
// Non-canonical on x86-64 and AArch64: dereferencing faults.
constexpr uintptr_t kArenaBase = 0xDEAD000000000000ull;
constexpr uintptr_t kGuardBytes = 4096;
}  // namespace

const char* faultPointName(FaultPoint point) {
  switch (point) {
    case FaultPoint::kAllocate: return "allocation";
    case FaultPoint::kCopyHostToDevice: return "host-to-device copy";
    case FaultPoint::kCopyDeviceToHost: return "device-to-host copy";
    case FaultPoint::kCopyDeviceToDevice: return "device-to-device copy";
    case FaultPoint::kMemset: return "memset";
  }
  return "unknown fault point";
}

void TestDevice::armFault(FaultPoint point, uint64_t nth, uint64_t count) {
  FaultPlan& f = faults_[static_cast<int>(point)];
  f.armed.store(false);
  f.calls.store(0);
  f.first.store(nth);
  f.count.store(nth == 0 ? 0 : count);
  f.armed.store(true);
  faults_armed_.store(true);
}

void TestDevice::disarmFaults() {
  faults_armed_.store(false);
  for (FaultPlan& f : faults_) {
    f.armed.store(false);
    f.calls.store(0);
    f.first.store(0);
    f.count.store(0);
  }
}

uint64_t TestDevice::faultPointCalls(FaultPoint point) const { return faults_[static_cast<int>(point)].calls.load(); }

void TestDevice::countArmedFaultPoint(FaultPoint point, Device device, size_t n) {
  FaultPlan& f = faults_[static_cast<int>(point)];
  if (!f.armed.load()) return;
  const uint64_t call = f.calls.fetch_add(1) + 1;
  const uint64_t first = f.first.load(), count = f.count.load();
  if (first == 0 || call < first || call - first >= count) return;
  ::backplane::detail::throwError(
      point == FaultPoint::kAllocate ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal,
      strCat("test device: ", faultPointName(point), " #", call, " of ", n, " bytes on ", device.str(),
             " failed: fault injected by the test (TestDevice::armFault)"));
}

TestDevice::TestDevice(DeviceType type, int device_count)
    : type_(type), device_count_(device_count), next_address_(kArenaBase + (static_cast<uintptr_t>(type) << 40)) {}

TestDevice& TestDevice::install(const std::string& name, int device_count) {
  static std::mutex mu;
  static std::unordered_map<std::string, TestDevice*>* devices =
      new std::unordered_map<std::string, TestDevice*>();  // leaked: tensors may outlive main
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = devices->find(name); it != devices->end()) return *it->second;
  DeviceType type = valueOrThrow(DeviceTypeRegistry::global().registerType(name));
  auto* dev = new TestDevice(type, device_count);
  throwIfError(DeviceTypeRegistry::global().setInterface(type, dev));
  (*devices)[name] = dev;
  return *dev;
}

DataPtr TestDevice::allocate(size_t nbytes, Device device) {
  BP_CHECK(device.type == type_ && device.index >= 0 && device.index < device_count_,
           "test device: cannot allocate on ", device.str());
  if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, device);
  countFaultPoint(FaultPoint::kAllocate, device, nbytes);
  // Like a real device, an allocation that cannot be served is an Error
  // (kResourceExhausted), not std::bad_alloc.
  std::unique_ptr<uint8_t[]> bytes(new (std::nothrow) uint8_t[nbytes]());
  if (!bytes) BP_THROW(kResourceExhausted, "test device: cannot allocate ", nbytes, " bytes on ", device.str());
  absl::MutexLock lock(&mu_);
  uintptr_t address = next_address_;
  next_address_ += (nbytes + kGuardBytes + 255) / 256 * 256;
  blocks_.emplace(address, Block{nbytes, device.index, std::move(bytes)});
  return DataPtr(reinterpret_cast<void*>(address), this, &TestDevice::release, device);
}

void TestDevice::release(void* ctx, void* ptr) {
  auto* self = static_cast<TestDevice*>(ctx);
  absl::MutexLock lock(&self->mu_);
  self->blocks_.erase(reinterpret_cast<uintptr_t>(ptr));
}

uint8_t* TestDevice::resolve(const void* address, size_t n, Device device, const char* what) {
  uintptr_t a = reinterpret_cast<uintptr_t>(address);
  auto it = blocks_.upper_bound(a);
  if (it == blocks_.begin()) {
    BP_THROW(kInternal, "test device: ", what, " of ", n, " bytes at ", reinterpret_cast<const void*>(a),
             " is not inside any live allocation");
  }
  --it;
  const Block& b = it->second;
  if (a - it->first + n > b.size) {
    BP_THROW(kInternal, "test device: ", what, " of ", n, " bytes at offset ", a - it->first,
             " runs past the end of a ", b.size, "-byte allocation");
  }
  if (b.device != device.index) {
    BP_THROW(kInternal, "test device: ", what, " names ", device.str(), " but the memory is on ",
             this->device(b.device).str());
  }
  return b.bytes.get() + (a - it->first);
}

void TestDevice::copyHostToDevice(void* dst, Device dst_device, const void* src, size_t n) {
  if (n == 0) return;
  countFaultPoint(FaultPoint::kCopyHostToDevice, dst_device, n);
  absl::MutexLock lock(&mu_);
  std::memcpy(resolve(dst, n, dst_device, "host-to-device copy"), src, n);
  from_host_ += n;
}

void TestDevice::copyDeviceToHost(void* dst, const void* src, Device src_device, size_t n) {
  if (n == 0) return;
  countFaultPoint(FaultPoint::kCopyDeviceToHost, src_device, n);
  absl::MutexLock lock(&mu_);
  std::memcpy(dst, resolve(src, n, src_device, "device-to-host copy"), n);
  to_host_ += n;
}

void TestDevice::copyDeviceToDevice(void* dst, Device dst_device, const void* src, Device src_device, size_t n) {
  if (n == 0) return;
  countFaultPoint(FaultPoint::kCopyDeviceToDevice, dst_device, n);
  absl::MutexLock lock(&mu_);
  uint8_t* d = resolve(dst, n, dst_device, "device-to-device copy (destination)");
  const uint8_t* s = resolve(src, n, src_device, "device-to-device copy (source)");
  std::memmove(d, s, n);
  d2d_ += n;
}

void TestDevice::memset(void* dst, Device device, uint8_t value, size_t n) {
  if (n == 0) return;
  countFaultPoint(FaultPoint::kMemset, device, n);
  absl::MutexLock lock(&mu_);
  std::memset(resolve(dst, n, device, "memset"), value, n);
}

size_t TestDevice::liveAllocations() const {
  absl::MutexLock lock(&mu_);
  return blocks_.size();
}

void TestDevice::resetCounters() {
  to_host_ = 0;
  from_host_ = 0;
  d2d_ = 0;
}

}  // namespace backplane::testing
