#pragma once
// `backplane conformance` (Note [Conformance workers] in src/command.cc):
// the backends a run can certify, the worker processes that run them, and
// the reports. The `backplane` command (cli/) is a thin front end to it.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "backplane/core/device.h"
#include "backplane/core/device_interface.h"

namespace backplane::conformance {

struct PluginSources {
  std::vector<std::string> explicit_paths;  // --plugin, in order
  bool defaults = true;                     // false with --no-default-plugins
};

// Loads the explicit plugins, then (unless disabled) plugins().loadAll().
// Failures are recorded in plugins().plugins(); nothing is printed.
void loadPlugins(const PluginSources& sources);
// One stderr line per failed load attempt (for commands other than `plugins`,
// which reports them itself).
void warnAboutFailedPlugins(std::ostream& err);

// One device type as the tool shows it.
struct Backend {
  std::string name;
  DeviceType type;
  DeviceInterface* iface;  // nullptr: no plugin installed one
};
// Every active device type (built-ins first), optionally only those that
// have an interface, plus cuda and hip in any case.
std::vector<Backend> activeBackends(bool with_interface_only);
// Who provides `b` (deviceTypeProvider in backplane/runtime.h): "built-in"
// (cpu), the plugin's name, "in-process" or "no plugin".
std::string providerOf(const Backend& b);

// `backplane conformance`: certifies backends op by op (conformance.cc).
struct ConformanceOptions {
  std::vector<std::string> backends;  // --backend; empty: every backend with an interface
  std::string ops;                    // --ops REGEX; empty: all
  bool strict = false;                // --strict: a fallback counts as a failure
  std::optional<std::string> json, junit, markdown;  // report files
  double timeout_s = 300;             // --timeout: per op, in the worker
  bool progress = false;              // an op counter on stderr (a terminal)
};
// `self` is this executable, started once per backend (and again after a
// crash) as `conformance-worker`.
int runConformance(std::ostream& out, std::ostream& err, const std::string& self, const PluginSources& sources,
                   const ConformanceOptions& options);

// `backplane conformance-worker` (internal): runs the items of one backend
// from `first` on, writing the wire protocol to file descriptor `fd`.
int runConformanceWorker(const std::string& backend, const std::string& ops, size_t first, int fd);

}  // namespace backplane::conformance
