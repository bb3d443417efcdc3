#include "backplane/core/storage.h"

#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"

namespace backplane {

Storage Storage::allocate(size_t nbytes, Device device) {
  DeviceInterface& iface = DeviceTypeRegistry::global().interfaceOrThrow(device.type);
  Device resolved = device.resolved();
  int count = iface.deviceCount();
  if (resolved.index >= count) [[unlikely]] {
    std::string why = iface.unavailableReason();
    BP_THROW(kInvalidArgument, "cannot allocate on ", resolved.str(), ": ",
             count == 0 ? "no " : "only ", count == 0 ? "" : std::to_string(count) + " ",
             deviceTypeName(device.type), " device", count == 1 ? " is" : "s are", " present",
             count > 0 ? strCat(" (", deviceTypeName(device.type), ":0..",
                                      deviceTypeName(device.type), ":", count - 1, ")")
                       : std::string(),
             why.empty() ? "" : "; ", why);
  }
  DataPtr data = iface.allocator().allocate(nbytes, resolved);
  return Storage(IntrusivePtr<StorageImpl>::make(std::move(data), nbytes));
}

}  // namespace backplane
