#pragma once
// The process-wide DeviceTypeRegistry: built-in device types plus types
// registered by name at run time, each with its DeviceInterface.
// See Note [Device types].

#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backplane/core/device.h"
#include "backplane/core/device_interface.h"

namespace backplane {

class DeviceTypeRegistry {
 public:
  // The singleton. One of the two pieces of global state in Backplane (the
  // other is the Dispatcher); it lives until the process exits.
  static DeviceTypeRegistry& global();

  // Claims a new device type for `name` (lowercase letters, digits and '_',
  // starting with a letter, at most 31 characters). A name registered earlier
  // and since unregistered gets its old number back. Fails if the name is
  // active or built in, or all dynamic slots are taken.
  absl::StatusOr<DeviceType> registerType(std::string_view name);
  // Releases a dynamic type; its interface must already be cleared.
  absl::Status unregisterType(DeviceType type);

  // Looks up an active type by name.
  std::optional<DeviceType> find(std::string_view name) const;
  // The type's name; also for inactive dynamic types. Never blocks.
  std::string name(DeviceType type) const;
  bool isActive(DeviceType type) const;
  // The name as a C string that lives as long as the process, or nullptr
  // for a number never registered (for the plugin ABI).
  const char* nameCString(DeviceType type) const;
  // Active type names, built-ins first.
  std::vector<std::string> activeNames() const;

  // Every device present now: each device of each type with an interface,
  // built-ins first ("cpu" is always there). Asks each type for its count.
  std::vector<Device> presentDevices() const;
  // The same as text for error messages: "cpu, cuda:0, cuda:1".
  std::string presentDevicesText() const;

  // Installs (or with nullptr removes) the interface of an active type. The
  // caller keeps ownership and must keep it alive while installed and while
  // any tensor on that type lives. Fails if one is already installed.
  absl::Status setInterface(DeviceType type, DeviceInterface* iface);
  // The installed interface or nullptr. Lock-free; safe during registration.
  DeviceInterface* interface(DeviceType type) const {
    int i = static_cast<int>(type);
    if (i < 0 || i >= kMaxDeviceTypes) return nullptr;
    return slots_[i].iface.load(std::memory_order_acquire);
  }
  // Like interface(), but throws an Error naming the type when none is set.
  DeviceInterface& interfaceOrThrow(DeviceType type) const;

 private:
  DeviceTypeRegistry();
  struct Slot {
    // `name` is written once, under mu_, before `state` becomes non-zero
    // (release), and never changes afterwards: readers that observe a
    // non-zero state (acquire) may read it without the lock.
    char name[32] = {};
    std::atomic<int> state{0};  // 0 = never used, 1 = active, 2 = released
    std::atomic<DeviceInterface*> iface{nullptr};
  };
  mutable std::mutex mu_;
  std::array<Slot, kMaxDeviceTypes> slots_;
};

}  // namespace backplane
