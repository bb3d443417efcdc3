// The process's Runtime, made when the module is imported: it loads the
// plugins on BACKPLANE_PLUGIN_PATH and in the default plugin directory (the
// package's own, Note [The Python package's layout]), as an app's Runtime
// does. Devices, plugins and the `auto` rules are the app API's.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>

#include "backplane/core/device_type_registry.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/runtime/runtime.h"
#include "bindings.h"

namespace backplane::python {
namespace {

Runtime& runtime() {
  // Made at import (bindRuntime), never destroyed: plugins stay loaded for
  // the life of the process, and tensors may outlive the module.
  static Runtime* r = new Runtime();
  return *r;
}

std::string pluginRepr(const PluginStatus& p) {
  std::string s = "backplane.PluginInfo(name='" + p.name + "', version='" + p.version +
                  "', loaded=" + (p.loaded ? "True" : "False");
  if (!p.loaded) s += ", error='" + p.error + "'";
  return s + ", path='" + p.path + "')";
}

}  // namespace

void bindRuntime(nb::module_& m) {
  (void)runtime();

  nb::class_<DeviceProperties>(m, "DeviceProperties", "What a device reports of itself; 0 or '' where it does not.")
      .def_ro("name", &DeviceProperties::name)
      .def_ro("total_memory", &DeviceProperties::total_memory)
      .def_ro("compute_major", &DeviceProperties::compute_major)
      .def_ro("compute_minor", &DeviceProperties::compute_minor)
      .def_ro("multiprocessor_count", &DeviceProperties::multiprocessor_count)
      .def("__repr__", [](const DeviceProperties& p) {
        return "backplane.DeviceProperties(name='" + p.name + "', total_memory=" + std::to_string(p.total_memory) + ")";
      });
  nb::class_<DeviceCapabilities>(m, "DeviceCapabilities",
                                 "What a device type can do: streams (and a current stream), events (waited on by a "
                                 "stream, queried without blocking), host-readable memory, DLPack without a copy.")
      .def_ro("streams", &DeviceCapabilities::streams)
      .def_ro("current_stream", &DeviceCapabilities::current_stream)
      .def_ro("events", &DeviceCapabilities::events)
      .def_ro("event_wait", &DeviceCapabilities::event_wait)
      .def_ro("event_wait_device", &DeviceCapabilities::event_wait_device)
      .def_ro("event_query", &DeviceCapabilities::event_query)
      .def_ro("event_timing", &DeviceCapabilities::event_timing)
      .def_ro("graphs", &DeviceCapabilities::graphs)
      .def_ro("host_accessible", &DeviceCapabilities::host_accessible)
      .def_ro("dlpack", &DeviceCapabilities::dlpack)
      .def("__repr__", [](const DeviceCapabilities& c) { return "backplane.DeviceCapabilities(" + c.str() + ")"; });
  nb::class_<DeviceInfo>(m, "DeviceInfo", "A device present now, with the plugin that provides it.")
      .def_ro("device", &DeviceInfo::device)
      .def_ro("provider", &DeviceInfo::provider)
      .def_ro("properties", &DeviceInfo::properties)
      .def_ro("capabilities", &DeviceInfo::capabilities)
      .def("__repr__", [](const DeviceInfo& d) {
        return "backplane.DeviceInfo(device='" + d.device.str() + "', provider='" + d.provider + "', name='" +
               d.properties.name + "')";
      });
  nb::class_<UnavailableDeviceType>(m, "UnavailableDeviceType",
                                    "A device type with no device here, and why (no driver, no GPU, no plugin).")
      .def_ro("name", &UnavailableDeviceType::name)
      .def_ro("provider", &UnavailableDeviceType::provider)
      .def_ro("reason", &UnavailableDeviceType::reason)
      .def("__repr__", [](const UnavailableDeviceType& u) {
        return "backplane.UnavailableDeviceType(name='" + u.name + "', provider='" + u.provider + "', reason='" +
               u.reason + "')";
      });
  nb::class_<PluginDeviceStatus>(m, "PluginDeviceType", "A device type a plugin registered.")
      .def_ro("name", &PluginDeviceStatus::type_name)
      .def_ro("device_count", &PluginDeviceStatus::device_count)
      .def_ro("unavailable_reason", &PluginDeviceStatus::unavailable_reason);
  nb::class_<PluginStatus>(m, "PluginInfo", "A plugin this process loaded or tried to load.")
      .def_ro("path", &PluginStatus::path)
      .def_ro("name", &PluginStatus::name)
      .def_ro("version", &PluginStatus::version)
      .def_ro("loaded", &PluginStatus::loaded)
      .def_ro("error", &PluginStatus::error, "Why it did not load ('' if it did).")
      .def_ro("device_types", &PluginStatus::devices)
      .def_ro("kernels", &PluginStatus::kernels)
      .def_ro("typed_kernels", &PluginStatus::typed_kernels,
              "Of `kernels`, those the host calls through their typed entry (a plugin built for ABI 1.14 or newer).")
      .def_prop_ro("abi", [](const PluginStatus& p) { return nb::make_tuple(p.abi_major, p.abi_minor); })
      .def("__repr__", &pluginRepr);

  m.def(
      "devices", []() { return runtime().devices(); },
      "The devices present now, in `auto` order (cuda, hip, other plugins' types, cpu).");
  m.def(
      "synchronize",
      [](nb::handle device) {
        std::vector<Device> targets;
        if (device.is_none()) {
          for (const DeviceInfo& d : runtime().devices()) targets.push_back(d.device);
        } else {
          targets.push_back(deviceArg(device, "synchronize()"));
        }
        nb::gil_scoped_release unlocked;
        for (const Device& d : targets) DeviceTypeRegistry::global().interfaceOrThrow(d.type).synchronize(d);
      },
      nb::arg("device").none() = nb::none(), nb::sig("def synchronize(device: str | Device | None = None) -> None"),
      "Waits until the work queued on `device` (every device present when None) has finished, as "
      "torch.cuda.synchronize does; kernels run asynchronously on devices with streams.");
  m.def(
      "unavailable", []() { return runtime().unavailable(); },
      "The device types with no device here, each with the reason.");
  m.def(
      "plugins", []() { return runtime().plugins(); }, "Every plugin loaded or tried, with its status.");
  m.def(
      "device", [](const std::string& spec) { return runtime().device(spec); }, nb::arg("spec") = "auto",
      "The device `spec` names: 'cuda:0', 'cpu', or 'auto' (BACKPLANE_DEVICE if set, else the first present "
      "of cuda, hip, other plugins' types, cpu). Raises NotFoundError, naming what is present, when there is no "
      "such device.");
  m.def(
      "load_plugin",
      [](const std::string& path) {
        // A C string ends at the first NUL: "a\0b" would load "a" (the
        // loader refuses such a path too; a Python caller gets ValueError,
        // as open() gives).
        if (path.find('\0') != std::string::npos)
          throw nb::value_error("load_plugin: the path contains a NUL character ('\\0'), which no file name holds");
        PluginStatus s = valueOrThrow(plugins().load(path));
        nb::module_::import_("backplane._ops").attr("ops").attr("_forget")();
        return s;
      },
      nb::arg("path"),
      "Loads the plugin at `path` (its devices and operators become usable). Raises backplane.Error saying why "
      "when it cannot be loaded (ValueError for a path with a NUL character); the process keeps running either "
      "way, unless the plugin's own code ends it, which is reported on stderr with exit status 3.");
  m.def(
      "capabilities", [](const std::string& spec) { return runtime().capabilities(runtime().device(spec)); },
      nb::arg("device") = "auto",
      "What the device `device` names can do (streams, events, ...): check before using the stream API.");
  m.def(
      "describe", []() { return runtime().describe(); }, "What `backplane devices` prints.");
}

}  // namespace backplane::python
