#include "backplane/core/storage.h"

#include <cstdlib>
#include <new>

#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"

namespace backplane {

namespace {
constexpr size_t kInlineAlignment = 16;
}  // namespace

size_t StorageImpl::inlineOffset() {
  return (sizeof(StorageImpl) + kInlineAlignment - 1) / kInlineAlignment * kInlineAlignment;
}

void* StorageImpl::operator new(size_t size) {
  void* p = std::malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* StorageImpl::operator new(size_t size, TrailingBytes extra) {
  // size is sizeof(StorageImpl); the bytes start at inlineOffset().
  void* p = std::malloc(inlineOffset() + extra.n);
  (void)size;
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void StorageImpl::operator delete(void* p) noexcept { std::free(p); }
void StorageImpl::operator delete(void* p, TrailingBytes) noexcept { std::free(p); }

StorageImpl::StorageImpl(InlineTag, size_t nbytes)
    : data_(reinterpret_cast<char*>(this) + inlineOffset(), nullptr, nullptr, Device(DeviceType::CPU, 0)),
      nbytes_(nbytes) {}

IntrusivePtr<StorageImpl> StorageImpl::makeSmallCpu(size_t nbytes) {
  BP_CHECK(nbytes > 0 && nbytes <= kInlineStorageBytes, "makeSmallCpu: ", nbytes, " bytes is not in 1..",
           kInlineStorageBytes);
  return IntrusivePtr<StorageImpl>::adoptFresh(new (TrailingBytes{nbytes}) StorageImpl(InlineTag{}, nbytes));
}

Storage Storage::allocate(size_t nbytes, Device device) {
  // Note [Small CPU storages]. The cpu device type is built in and always
  // has exactly one device (cpu or cpu:0).
  if (device.type == DeviceType::CPU && device.index <= 0 && nbytes - 1 < StorageImpl::kInlineStorageBytes) {
    return Storage(StorageImpl::makeSmallCpu(nbytes));
  }
  DeviceInterface& iface = DeviceTypeRegistry::global().interfaceOrThrow(device.type);
  Device resolved = device.resolved();
  int count = iface.deviceCount();
  if (resolved.index >= count) [[unlikely]] {
    std::string why = iface.unavailableReason();
    BP_THROW(kInvalidArgument, "cannot allocate on ", resolved.str(), ": ", count == 0 ? "no " : "only ",
             count == 0 ? "" : std::to_string(count) + " ", deviceTypeName(device.type), " device",
             count == 1 ? " is" : "s are", " present",
             count > 0
                 ? strCat(" (", deviceTypeName(device.type), ":0..", deviceTypeName(device.type), ":", count - 1, ")")
                 : std::string(),
             why.empty() ? "" : "; ", why, "; devices present: ", DeviceTypeRegistry::global().presentDevicesText());
  }
  DataPtr data = iface.allocator().allocate(nbytes, resolved);
  return Storage(IntrusivePtr<StorageImpl>::make(std::move(data), nbytes));
}

}  // namespace backplane
