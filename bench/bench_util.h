#pragma once
// Shared by the operator benchmarks.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"

namespace backplane::bench {

// Loads the plugin at `path` once per process; on failure marks the
// benchmark skipped with the reason and returns false. Benchmarks are set up
// on one thread, so the map of outcomes needs no lock.
inline bool pluginLoaded(benchmark::State& state, const std::string& path) {
  static std::map<std::string, std::string> errors;  // path -> why it failed to load ("" if it loaded)
  auto [it, inserted] = errors.try_emplace(path);
  if (inserted) {
    absl::StatusOr<PluginStatus> s = plugins().load(path);
    it->second = !s.ok() ? std::string(s.status().message()) : s->loaded ? std::string() : s->error;
  }
  if (!it->second.empty()) state.SkipWithError(it->second.c_str());
  return it->second.empty();
}

// Loads the CPU plugin (BACKPLANE_CPU_PLUGIN_PATH); see pluginLoaded.
inline bool cpuPluginLoaded(benchmark::State& state) { return pluginLoaded(state, BACKPLANE_CPU_PLUGIN_PATH); }

// n floats drawn uniformly from [lo, hi), the same for the same seed.
inline std::vector<float> uniformFloats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

}  // namespace backplane::bench
