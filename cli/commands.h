#pragma once
// The `backplane` tool's commands. Each writes its report to `out` and
// returns the process exit code.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "backplane/conformance/command.h"
#include "backplane/core/device.h"
#include "backplane/core/device_interface.h"

namespace backplane::cli {

using conformance::activeBackends;
using conformance::Backend;
using conformance::ConformanceOptions;
using conformance::loadPlugins;
using conformance::PluginLoadFailure;
using conformance::PluginSources;
using conformance::providerOf;
using conformance::runConformance;
using conformance::runConformanceWorker;
using conformance::warnAboutFailedPlugins;
using conformance::WorkerTask;

enum class OpsFormat { Text, Markdown, Json };

int runPlugins(std::ostream& out, const PluginSources& sources);
int runDevices(std::ostream& out);
int runOps(std::ostream& out, OpsFormat format);

}  // namespace backplane::cli
