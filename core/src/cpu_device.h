#pragma once
#include "backplane/core/device_interface.h"

namespace backplane {
// The host's own device: memory from cpuAllocator(), copies are memcpy.
DeviceInterface& cpuDeviceInterface();
}  // namespace backplane
