#pragma once
// `backplane conformance` (Note [Conformance workers] in src/workers.cc):
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

// A plugin named with --plugin that did not load: the path as given and why.
struct PluginLoadFailure {
  std::string path;
  std::string reason;
};
// Loads the explicit plugins, then (unless disabled) plugins().loadAll().
// Every failure is recorded in plugins().plugins() and nothing is printed;
// the explicit paths that failed are returned, since a command must not go
// on without a plugin it was told to load.
std::vector<PluginLoadFailure> loadPlugins(const PluginSources& sources);
// One stderr line per failed load attempt (for commands other than `plugins`,
// which reports them itself): a plugin found in a default source that does
// not load is a warning, not a failure.
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
// Who provides `b` (deviceTypeProvider in backplane/runtime/runtime.h): "built-in"
// (cpu), the plugin's name, "in-process" or "no plugin".
std::string providerOf(const Backend& b);

// The longest --timeout: 30 days, far past any op, and far inside what the
// workers' clocks and poll(2)'s milliseconds hold.
inline constexpr double kMaxTimeoutSeconds = 30 * 24 * 3600;

// `backplane conformance`: certifies backends op by op (command.cc).
struct ConformanceOptions {
  std::vector<std::string> backends;                 // --backend; empty: every backend with an interface
  std::string ops;                                   // --ops REGEX; empty: all
  bool native = false;                               // --native: only specs with a native kernel (selectItems)
  bool strict = false;                               // --strict: a fallback counts as a failure
  std::optional<std::string> json, junit, markdown;  // report files
  double timeout_s = 300;                            // --timeout: per op, in (0, kMaxTimeoutSeconds]
  bool full_errors = false;                          // --full-errors: no message cut (Note [Report text])
  bool progress = false;                             // an op counter on stderr (a terminal)
  // The device the op specs run on: --device N (default 0), or every device
  // of each backend with --all-devices (one run per device; the device API
  // checks, which cover every device, run with the first).
  int device = 0;
  bool all_devices = false;
  // --onnx DIR: run ONNX's node tests found under DIR instead of the specs
  // (Note [ONNX node tests]); --onnx-expected DIR: the expected failures,
  // one file per backend (DIR/<backend>.txt).
  std::string onnx;
  std::string onnx_expected;
};
// `self` is this executable, started once per backend (and again after a
// crash) as `conformance-worker`.
int runConformance(std::ostream& out, std::ostream& err, const std::string& self, const PluginSources& sources,
                   const ConformanceOptions& options);

// What a conformance worker runs (internal, Note [Conformance workers]).
struct WorkerTask {
  std::string backend;
  std::string ops;            // --ops
  bool native = false;        // --native
  int device = 0;             // the op specs' device index
  bool device_checks = true;  // whether the items start with the device checks
  size_t first = 0;           // the item to start at
  size_t first_form = 0;      // that item's first form to run (formsOf order)
  std::string onnx;           // --onnx: the items are these node tests
};
// `backplane conformance-worker` (internal): runs `task`, writing the wire
// protocol to file descriptor `fd`.
int runConformanceWorker(const WorkerTask& task, int fd);

}  // namespace backplane::conformance
