#pragma once
// DeviceInterface: what the host needs from a device type to hold tensors on
// it: an allocator and functions that move bytes. Registered per device type
// in the DeviceTypeRegistry.
//
// Note [The host never dereferences device memory]
// Addresses of a device whose isHostAccessible() is false are opaque to the
// host: the host may add byte offsets to them (as integers) and hand them
// back to this interface, nothing more. Every byte moves through the copy
// functions below. The in-tree test device returns non-canonical addresses so
// that any host dereference crashes at once.

#include <cstddef>
#include <cstdint>
#include <string>

#include "backplane/core/allocator.h"
#include "backplane/core/device.h"

namespace backplane {

class DeviceInterface {
 public:
  virtual ~DeviceInterface() = default;

  // Devices of this type present now (0 when the driver or hardware is
  // missing; unavailableReason() then says why).
  virtual int deviceCount() const = 0;
  virtual std::string unavailableReason() const { return {}; }
  // True when the host may read and write this device's memory directly.
  virtual bool isHostAccessible() const { return false; }
  virtual Allocator& allocator() = 0;

  // Byte copies. `dst`/`src` device addresses may carry an offset into an
  // allocation. Copies are complete when the call returns (a device with
  // streams synchronises its current stream as needed). Errors throw Error.
  virtual void copyHostToDevice(void* dst, Device dst_device, const void* src, size_t nbytes) = 0;
  virtual void copyDeviceToHost(void* dst, const void* src, Device src_device, size_t nbytes) = 0;
  virtual void copyDeviceToDevice(void* dst, Device dst_device, const void* src, Device src_device,
                                  size_t nbytes) = 0;
  virtual void memset(void* dst, Device device, uint8_t value, size_t nbytes) = 0;
  virtual void synchronize(Device device) = 0;
};

// Copies `nbytes` between any two devices (either may be the host), picking
// the right interface function; between two different non-host device types
// the bytes go through a host buffer.
void copyBytesBetweenDevices(void* dst, Device dst_device, const void* src, Device src_device,
                             size_t nbytes);

}  // namespace backplane
