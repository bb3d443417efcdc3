#pragma once
// Runtime: what an application creates first. It loads the device plugins,
// says which devices exist, and turns a device string from the command line
// ("cuda:0", "cpu", "auto") into a Device:
//
//   backplane::Runtime rt;                              // loads plugins
//   backplane::Device dev = rt.device(flags.device);   // "auto" by default
//   Tensor x = backplane::randn({8, 128, 768}, {.device = dev});
//
// Applications link only the host library (`backplane`); device libraries
// (CUDA, HIP, a vendor's) are reached through plugins loaded at run time.
//
// Note [Choosing a device]
// "auto" picks device 0 of the first device type in the order (default:
// cuda, hip, then every other type with devices - a vendor's - in the order
// they were registered, then cpu) that has at least one device now. The
// environment variable BACKPLANE_DEVICE, when set to anything but "auto",
// replaces the choice of "auto" (so a user can steer an app that passes
// "auto" without changing its flags); an explicit device string is never
// overridden. A device that does not exist is an error naming the devices
// that do, never a silent switch to another device.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backplane/core/device.h"
#include "backplane/core/device_interface.h"
#include "backplane/runtime/plugin_registry.h"

namespace backplane {

struct RuntimeOptions {
  // Plugins to load first (paths to .so files), in order.
  std::vector<std::string> plugin_paths = {};
  // Then everything on BACKPLANE_PLUGIN_PATH and in the default plugin
  // directories (Note [Plugin loading]).
  bool load_default_plugins = true;
  // The order "auto" tries device types in; "*" stands for every type not
  // named, in registration order. Names of types that are not registered are
  // skipped (a CUDA build without the CUDA plugin still starts).
  std::vector<std::string> auto_order = {"cuda", "hip", "*", "cpu"};
};

// One device that exists now.
struct DeviceInfo {
  Device device;                    // "cuda:0"
  std::string provider;             // the plugin's name, "built-in" (cpu) or "in-process"
  DeviceProperties properties;      // name, memory, ...; fields the device does not report are 0/empty
  DeviceCapabilities capabilities;  // streams, events, ... (the same for every device of a type)
};

// A device type that is known (registered, or cuda/hip) but offers no device now.
struct UnavailableDeviceType {
  std::string name;      // "cuda"
  std::string provider;  // as in DeviceInfo; "no plugin" when none provides it
  std::string reason;    // "no CUDA driver found", "no plugin provides cuda (...)"
};

// Who provides device type `t`: "built-in" (cpu), the name of the loaded
// plugin that registered it, "in-process" (an interface the program itself
// installed) or "no plugin".
std::string deviceTypeProvider(DeviceType t);

class Runtime {
 public:
  // Loads plugins as `options` say. Plugins are process-wide: a second
  // Runtime sees the same ones (libraries already loaded are not loaded
  // again). A plugin that fails to load is listed in plugins() with its
  // reason; the runtime keeps going.
  explicit Runtime(RuntimeOptions options = {});

  // Every plugin load attempt, in order (backplane::plugins().plugins()).
  std::vector<PluginStatus> plugins() const;
  // Every device present now, in auto_order's type order.
  std::vector<DeviceInfo> devices() const;
  // Known device types with no device, and why.
  std::vector<UnavailableDeviceType> unavailable() const;

  // The device a string names: "auto", "cpu", "cuda", "cuda:1", or a vendor
  // type name with an optional index. Errors (InvalidArgument or NotFound)
  // say what was wrong and list the devices that exist.
  absl::StatusOr<Device> resolve(std::string_view spec) const;
  // resolve(), throwing Error.
  Device device(std::string_view spec) const;

  // What `device`'s type can do (streams, events, event queries, host
  // access, DLPack): what an app checks before it uses a stream API. Throws
  // Error (kNotFound) for a device type that is not registered.
  DeviceCapabilities capabilities(Device device) const;

  // A few lines for a program's log: the devices with their capabilities,
  // the unavailable types and why, and plugins that failed to load.
  std::string describe() const;

 private:
  absl::StatusOr<Device> resolveAuto() const;
  absl::StatusOr<Device> resolveExplicit(std::string_view spec, std::string_view origin) const;
  RuntimeOptions options_;
};

}  // namespace backplane
