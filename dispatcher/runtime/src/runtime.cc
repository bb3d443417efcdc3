// Runtime: plugins, devices and device strings (Note [Choosing a device]).
#include "backplane/runtime/runtime.h"

#include <cstdlib>
#include <exception>
#include <optional>

#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"

namespace backplane {
namespace {

// One known device type and what it offers now.
struct TypeState {
  std::string name;
  DeviceType type;
  DeviceInterface* iface;
  int count = 0;
  std::string reason;  // why count is 0
};

// Every registered type plus cuda and hip (built in, so always registered),
// with their device counts.
std::vector<TypeState> typeStates() {
  DeviceTypeRegistry& reg = DeviceTypeRegistry::global();
  std::vector<TypeState> out;
  for (const std::string& name : reg.activeNames()) {
    std::optional<DeviceType> t = reg.find(name);
    if (!t) continue;  // unregistered meanwhile
    TypeState s{name, *t, reg.interface(*t), 0, {}};
    if (!s.iface) {
      s.reason =
          "no plugin provides " + name + " (load one with RuntimeOptions::plugin_paths or BACKPLANE_PLUGIN_PATH)";
    } else {
      try {
        s.count = std::max(0, s.iface->deviceCount());
        if (s.count == 0) s.reason = s.iface->unavailableReason();
        if (s.count == 0 && s.reason.empty()) s.reason = "no devices found";
      } catch (const std::exception& e) {
        s.reason = std::string("cannot count devices: ") + e.what();
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

// The types in `order` ("*" expanded to the types not named, in
// registration order); unknown names are skipped.
std::vector<TypeState> ordered(std::vector<TypeState> states, const std::vector<std::string>& order) {
  std::vector<TypeState> out;
  auto named = [&](const std::string& n) {
    for (const std::string& o : order)
      if (o == n) return true;
    return false;
  };
  for (const std::string& o : order) {
    for (const TypeState& s : states) {
      if (o == "*" ? !named(s.name) : s.name == o) out.push_back(s);
    }
  }
  return out;
}

std::string presentList() {
  std::string text = DeviceTypeRegistry::global().presentDevicesText();
  return text.empty() ? "none" : text;
}

}  // namespace

std::string deviceTypeProvider(DeviceType t) {
  if (t == DeviceType::CPU) return "built-in";
  for (const PluginStatus& p : plugins().plugins()) {
    if (!p.loaded) continue;
    for (const PluginDeviceStatus& d : p.devices)
      if (d.type == t) return p.name;
  }
  return DeviceTypeRegistry::global().interface(t) ? "in-process" : "no plugin";
}

Runtime::Runtime(RuntimeOptions options) : options_(std::move(options)) {
  for (const std::string& o : options_.auto_order) {
    bool name = !o.empty() && o.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
    BP_CHECK(o == "*" || name, "RuntimeOptions::auto_order: '", o,
             "' is neither a device type name (like \"cuda\") nor \"*\" (every type not named)");
  }
  for (const std::string& path : options_.plugin_paths) (void)backplane::plugins().load(path);  // listed in plugins()
  if (options_.load_default_plugins) (void)backplane::plugins().loadAll();
}

std::vector<PluginStatus> Runtime::plugins() const { return backplane::plugins().plugins(); }

std::vector<DeviceInfo> Runtime::devices() const {
  std::vector<DeviceInfo> out;
  for (const TypeState& s : ordered(typeStates(), options_.auto_order)) {
    for (int i = 0; i < s.count; ++i) {
      DeviceInfo info{Device(s.type, static_cast<DeviceIndex>(i)), deviceTypeProvider(s.type), {}, {}};
      try {
        info.properties = s.iface->properties(info.device);
      } catch (const std::exception&) {
        info.properties.name = s.name;  // the device exists; only its description failed
      }
      info.capabilities = s.iface->capabilities();
      out.push_back(std::move(info));
    }
  }
  return out;
}

std::vector<UnavailableDeviceType> Runtime::unavailable() const {
  std::vector<UnavailableDeviceType> out;
  for (const TypeState& s : typeStates()) {
    if (s.count == 0) out.push_back({s.name, deviceTypeProvider(s.type), s.reason});
  }
  return out;
}

absl::StatusOr<Device> Runtime::resolve(std::string_view spec) const {
  if (spec == "auto") {
    const char* env = std::getenv("BACKPLANE_DEVICE");
    if (env && *env && std::string_view(env) != "auto") return resolveExplicit(env, "BACKPLANE_DEVICE");
    return resolveAuto();
  }
  return resolveExplicit(spec, "device");
}

Device Runtime::device(std::string_view spec) const {
  absl::StatusOr<Device> d = resolve(spec);
  if (!d.ok()) detail::throwError(d.status().code(), std::string(d.status().message()));
  return *d;
}

absl::StatusOr<Device> Runtime::resolveAuto() const {
  for (const TypeState& s : ordered(typeStates(), options_.auto_order)) {
    if (s.count > 0) return Device(s.type, 0);
  }
  // Only an auto_order without "cpu" and "*" gets here.
  std::string tried;
  for (const std::string& o : options_.auto_order) tried += (tried.empty() ? "" : ", ") + o;
  return absl::NotFoundError(strCat("device 'auto': none of the device types tried (", tried,
                                    ") has a device; devices present: ", presentList()));
}

absl::StatusOr<Device> Runtime::resolveExplicit(std::string_view spec, std::string_view origin) const {
  absl::StatusOr<Device> parsed = Device::parse(spec);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(strCat(origin, " '", spec, "': ", parsed.status().message(),
                                             "; devices present: ", presentList(), ", or use 'auto'"));
  }
  Device d = parsed->resolved();
  for (const TypeState& s : typeStates()) {
    if (s.type != d.type) continue;
    if (d.index < s.count) return d;
    if (s.count == 0) {
      return absl::NotFoundError(strCat(origin, " '", spec, "' is not available: ", s.name, " has no devices (",
                                        s.reason, "); devices present: ", presentList(), ", or use 'auto'"));
    }
    return absl::NotFoundError(strCat(origin, " '", spec, "' does not exist: ", s.name, " has ", s.count,
                                      s.count == 1 ? " device" : " devices", " (", s.name, ":0..", s.name, ":",
                                      s.count - 1, "); devices present: ", presentList()));
  }
  return absl::NotFoundError(strCat(origin, " '", spec, "': device type ", deviceTypeName(d.type),
                                    " is no longer registered; devices present: ", presentList()));
}

DeviceCapabilities Runtime::capabilities(Device device) const {
  const DeviceInterface* iface = DeviceTypeRegistry::global().interface(device.type);
  if (iface == nullptr) {
    detail::throwError(absl::StatusCode::kNotFound,
                       strCat("capabilities of ", device.str(), ": device type ", deviceTypeName(device.type),
                              " is not registered; devices present: ", presentList()));
  }
  return iface->capabilities();
}

std::string Runtime::describe() const {
  std::string out = "devices:";
  for (const DeviceInfo& d : devices()) {
    out += strCat("\n  ", d.device.str(), "  ", d.properties.name, " (", d.provider, "); ", d.capabilities.str());
  }
  for (const UnavailableDeviceType& u : unavailable()) {
    out += strCat("\n  ", u.name, ": unavailable: ", u.reason);
  }
  for (const PluginStatus& p : plugins()) {
    if (!p.loaded) out += strCat("\n  plugin ", p.path, " failed to load: ", p.error);
  }
  return out;
}

}  // namespace backplane
