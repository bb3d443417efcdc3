#pragma once
// The plugin-loading environment of test programs that call through
// plugins as applications do: each plugin is loaded once per test program,
// before the first test, and a plugin that fails to load fails the program
// with its reason.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"

namespace backplane::testing {

struct PluginEnvironmentOptions {
  // The plugin files to load, in this order.
  std::vector<std::string> plugins;
  // Runs before the first plugin loads (environment variables a plugin reads
  // at load time, test devices it must find).
  std::function<void()> before_load;
  // Runs after the last plugin loaded.
  std::function<void()> after_load;
  // Fallbacks to the CPU print nothing (they are expected in these tests).
  bool silent_fallback = true;
};

class PluginEnvironment : public ::testing::Environment {
 public:
  explicit PluginEnvironment(PluginEnvironmentOptions options) : options_(std::move(options)) {}

  void SetUp() override {
    if (options_.before_load) options_.before_load();
    for (const std::string& path : options_.plugins) {
      absl::StatusOr<PluginStatus> status = plugins().load(path);
      ASSERT_TRUE(status.ok()) << path << ": " << status.status();
      ASSERT_TRUE(status->loaded) << path << ": " << status->error;
    }
    if (options_.silent_fallback) Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
    if (options_.after_load) options_.after_load();
  }

 private:
  PluginEnvironmentOptions options_;
};

// Registers a PluginEnvironment with gtest (which owns it); use it to
// initialise a namespace-scope constant, so that it runs before main:
//   const auto* const kPlugins = addPluginEnvironment({.plugins = {BACKPLANE_CPU_PLUGIN_PATH}});
inline ::testing::Environment* addPluginEnvironment(PluginEnvironmentOptions options) {
  return ::testing::AddGlobalTestEnvironment(new PluginEnvironment(std::move(options)));
}

}  // namespace backplane::testing
