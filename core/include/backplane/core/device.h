#pragma once
// Devices and device types.
//
// Note [Device types]
// A DeviceType is a small integer. 0..2 are built in (cpu, cuda, hip); the
// rest are handed out by the DeviceTypeRegistry to names registered while the
// process runs (a vendor plugin's "toyaccel", the in-tree test device). The
// dispatcher maps device type t to backend dispatch key slot 1 + t (slot 0 is
// DispatchKey::Undefined; backendKey() in dispatch_key.h, whose layout is
// static_assert'ed there), so the number of device types is bounded by
// kMaxDeviceTypes. A name keeps its number for
// the life of the process, even across unregister/register (a plugin
// unloaded and loaded again gets the same type back).

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace backplane {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1, HIP = 2 };
inline constexpr int kNumBuiltinDeviceTypes = 3;
inline constexpr int kMaxDynamicDeviceTypes = 16;
inline constexpr int kMaxDeviceTypes = kNumBuiltinDeviceTypes + kMaxDynamicDeviceTypes;

// Device index within a type. -1 means "the default device of this type" and
// only appears in user-facing Device values before they are resolved.
using DeviceIndex = int16_t;

struct Device {
  DeviceType type = DeviceType::CPU;
  DeviceIndex index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, DeviceIndex i = -1)  // NOLINT: `Device(DeviceType::CPU)` reads well
      : type(t), index(t == DeviceType::CPU && i < 0 ? 0 : i) {}

  // Parses "cpu", "cuda", "cuda:1", "hip:0", or a registered vendor type name
  // with an optional index. Errors list the known device types.
  static absl::StatusOr<Device> parse(std::string_view text);
  // Like parse, but throws Error; convenient for literals in code.
  static Device fromString(std::string_view text);

  bool isCpu() const { return type == DeviceType::CPU; }
  // The concrete device: index -1 becomes 0.
  constexpr Device resolved() const { return Device(type, index < 0 ? 0 : index); }
  // "cpu", "cuda:1", "cuda" (index -1).
  std::string str() const;
  friend constexpr bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

std::ostream& operator<<(std::ostream& os, Device d);
std::ostream& operator<<(std::ostream& os, DeviceType t);

// The name of a device type ("cpu", "cuda", "toyaccel"); "<unregistered:N>"
// for a number no one registered.
std::string deviceTypeName(DeviceType t);

}  // namespace backplane
