#pragma once
// Shared by the operator benchmarks.
#include <benchmark/benchmark.h>

#include <string>

#include "backplane/dispatcher/plugin_registry.h"

namespace backplane::bench {

// Loads the CPU plugin (BACKPLANE_CPU_PLUGIN_PATH) once per process; on
// failure marks the benchmark skipped with the reason and returns false.
inline bool cpuPluginLoaded(benchmark::State& state) {
  static const std::string error = [] {
    absl::StatusOr<PluginStatus> s = plugins().load(BACKPLANE_CPU_PLUGIN_PATH);
    if (!s.ok()) return std::string(s.status().message());
    return s->loaded ? std::string() : s->error;
  }();
  if (!error.empty()) state.SkipWithError(error.c_str());
  return error.empty();
}

}  // namespace backplane::bench
