#include "backplane/core/device_type_registry.h"

#include <cstring>
#include <exception>

#include "absl/strings/str_join.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "cpu_device.h"

namespace backplane {
namespace {

constexpr int kNeverUsed = 0, kActive = 1, kReleased = 2;

absl::Status validateName(std::string_view name) {
  bool ok = !name.empty() && name.size() < 32 && name[0] >= 'a' && name[0] <= 'z';
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok) {
    return absl::InvalidArgumentError(strCat(
        "invalid device type name '", name, "': use 1 to 31 lowercase letters, digits or '_', starting with a letter"));
  }
  return absl::OkStatus();
}

}  // namespace

DeviceTypeRegistry& DeviceTypeRegistry::global() {
  // Leaked on purpose: tensors destroyed during static destruction still need
  // their device interfaces.
  static DeviceTypeRegistry* registry = new DeviceTypeRegistry();
  return *registry;
}

DeviceTypeRegistry::DeviceTypeRegistry() {
  const char* builtin[kNumBuiltinDeviceTypes] = {"cpu", "cuda", "hip"};
  for (int i = 0; i < kNumBuiltinDeviceTypes; ++i) {
    std::strncpy(slots_[i].name, builtin[i], sizeof(slots_[i].name) - 1);
    slots_[i].state.store(kActive, std::memory_order_release);
  }
  slots_[0].iface.store(&cpuDeviceInterface(), std::memory_order_release);
}

absl::StatusOr<DeviceType> DeviceTypeRegistry::registerType(std::string_view name) {
  if (absl::Status s = validateName(name); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  int reuse = -1, fresh = -1;
  for (int i = 0; i < kMaxDeviceTypes; ++i) {
    int state = slots_[i].state.load(std::memory_order_relaxed);
    if (state == kNeverUsed) {
      if (fresh < 0) fresh = i;
    } else if (name == slots_[i].name) {
      if (state == kActive) {
        return absl::AlreadyExistsError(
            strCat("device type '", name, "' is already registered",
                   i < kNumBuiltinDeviceTypes ? " (it is built in)" : " by another plugin or library",
                   "; each device type has exactly one owner"));
      }
      reuse = i;
    }
  }
  int slot = reuse >= 0 ? reuse : fresh;
  if (slot < 0) {
    return absl::ResourceExhaustedError(strCat("cannot register device type '", name, "': all ", kMaxDynamicDeviceTypes,
                                               " dynamic device type slots are taken"));
  }
  if (reuse < 0) std::strncpy(slots_[slot].name, name.data(), name.size());
  slots_[slot].state.store(kActive, std::memory_order_release);
  return static_cast<DeviceType>(slot);
}

absl::Status DeviceTypeRegistry::unregisterType(DeviceType type) {
  int i = static_cast<int>(type);
  std::lock_guard<std::mutex> lock(mu_);
  if (i < kNumBuiltinDeviceTypes || i >= kMaxDeviceTypes ||
      slots_[i].state.load(std::memory_order_relaxed) != kActive) {
    return absl::InvalidArgumentError(strCat("device type ", i, " is not an active dynamic device type"));
  }
  if (slots_[i].iface.load(std::memory_order_relaxed) != nullptr) {
    return absl::FailedPreconditionError(
        strCat("device type '", slots_[i].name, "' still has an interface; remove it first"));
  }
  slots_[i].state.store(kReleased, std::memory_order_release);
  return absl::OkStatus();
}

std::optional<DeviceType> DeviceTypeRegistry::find(std::string_view name) const {
  for (int i = 0; i < kMaxDeviceTypes; ++i) {
    if (slots_[i].state.load(std::memory_order_acquire) == kActive && name == slots_[i].name)
      return static_cast<DeviceType>(i);
  }
  return std::nullopt;
}

std::string DeviceTypeRegistry::name(DeviceType type) const {
  int i = static_cast<int>(type);
  if (i < 0 || i >= kMaxDeviceTypes || slots_[i].state.load(std::memory_order_acquire) == kNeverUsed)
    return strCat("<unregistered:", i, ">");
  return slots_[i].name;
}

const char* DeviceTypeRegistry::nameCString(DeviceType type) const {
  int i = static_cast<int>(type);
  if (i < 0 || i >= kMaxDeviceTypes || slots_[i].state.load(std::memory_order_acquire) == kNeverUsed) return nullptr;
  return slots_[i].name;
}

bool DeviceTypeRegistry::isActive(DeviceType type) const {
  int i = static_cast<int>(type);
  return i >= 0 && i < kMaxDeviceTypes && slots_[i].state.load(std::memory_order_acquire) == kActive;
}

std::vector<std::string> DeviceTypeRegistry::activeNames() const {
  std::vector<std::string> names;
  for (int i = 0; i < kMaxDeviceTypes; ++i)
    if (slots_[i].state.load(std::memory_order_acquire) == kActive) names.emplace_back(slots_[i].name);
  return names;
}

std::vector<Device> DeviceTypeRegistry::presentDevices() const {
  std::vector<Device> out;
  for (int i = 0; i < kMaxDeviceTypes; ++i) {
    if (slots_[i].state.load(std::memory_order_acquire) != kActive) continue;
    DeviceInterface* iface = interface(static_cast<DeviceType>(i));
    if (!iface) continue;
    int count = 0;
    try {
      count = iface->deviceCount();
    } catch (const std::exception&) {
      continue;  // a device type that cannot count its devices has none to offer
    }
    for (int d = 0; d < count; ++d) out.emplace_back(static_cast<DeviceType>(i), static_cast<DeviceIndex>(d));
  }
  return out;
}

std::string DeviceTypeRegistry::presentDevicesText() const {
  std::string text;
  for (Device d : presentDevices()) text += (text.empty() ? "" : ", ") + d.str();
  return text;
}

absl::Status DeviceTypeRegistry::setInterface(DeviceType type, DeviceInterface* iface) {
  int i = static_cast<int>(type);
  std::lock_guard<std::mutex> lock(mu_);
  if (i < 0 || i >= kMaxDeviceTypes || slots_[i].state.load(std::memory_order_relaxed) != kActive)
    return absl::InvalidArgumentError(strCat("device type ", i, " is not registered"));
  if (i == 0) return absl::InvalidArgumentError("the cpu device interface is built in");
  if (iface && slots_[i].iface.load(std::memory_order_relaxed)) {
    return absl::AlreadyExistsError(strCat("device type '", slots_[i].name,
                                           "' already has a device interface; two plugins "
                                           "cannot both provide one device type"));
  }
  slots_[i].iface.store(iface, std::memory_order_release);
  return absl::OkStatus();
}

DeviceInterface& DeviceTypeRegistry::interfaceOrThrow(DeviceType type) const {
  DeviceInterface* iface = interface(type);
  if (!iface) [[unlikely]] {
    BP_THROW(kFailedPrecondition, "no device interface for device type '", name(type),
             "': load the plugin that provides it (see `backplane plugins`); devices present: ", presentDevicesText());
  }
  return *iface;
}

}  // namespace backplane

namespace backplane {

DeviceCapabilities DeviceInterface::capabilities() const {
  DeviceCapabilities c;
  c.streams = c.current_stream = hasStreams();
  c.events = c.event_wait = c.event_query = hasEvents();
  c.host_accessible = isHostAccessible();
  c.dlpack = dlpackDeviceType() != 0;
  return c;
}

void DeviceInterface::waitEventOnDevice(Device event_device, EventHandle event, Device stream_device,
                                        StreamHandle stream) {
  if (event_device == stream_device) return waitEvent(stream_device, event, stream);
  BP_THROW(kUnimplemented, "waitEventOnDevice: device type '", deviceTypeName(stream_device.type),
           "' cannot order a stream of ", stream_device.str(), " on an event of ", event_device.str(),
           " (no event_wait_device capability); synchronize the event on the host first (Event::synchronize)");
}

std::string DeviceCapabilities::str() const {
  std::string out;
  auto add = [&](bool has, const char* name) {
    if (has) out += strCat(out.empty() ? "" : ", ", name);
  };
  add(streams, "streams");
  add(current_stream, "current_stream");
  add(events, "events");
  add(event_wait, "event_wait");
  add(event_query, "event_query");
  add(event_wait_device, "event_wait_device");
  add(event_timing, "event_timing");
  add(graphs, "graphs");
  add(host_accessible, "host_accessible");
  add(dlpack, "dlpack");
  return out.empty() ? "none" : out;
}

}  // namespace backplane
