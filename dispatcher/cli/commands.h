#pragma once
// The `backplane` tool's commands. Each writes its report to `out` and
// returns the process exit code.

#include <ostream>
#include <string>
#include <vector>

namespace backplane::cli {

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

enum class OpsFormat { Text, Markdown, Json };

int runPlugins(std::ostream& out, const PluginSources& sources);
int runDevices(std::ostream& out);
int runOps(std::ostream& out, OpsFormat format);

}  // namespace backplane::cli
