#pragma once
// The conformance workers' parent side (Note [Conformance workers] in
// workers.cc); the worker side is runConformanceWorker (command.h).

#include <ostream>
#include <string>

#include "backend_run.h"
#include "backplane/conformance/command.h"

namespace backplane::conformance {

// Runs every item of one backend in workers; see Note [Conformance workers].
void runBackend(BackendRun& run, DeviceType type, const std::string& self, const PluginSources& sources,
                const ConformanceOptions& options, std::ostream& err);

}  // namespace backplane::conformance
