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

class PluginEnvironment : public ::testing::Environment {
 public:
  // Loads `plugins` (files), in this order.
  explicit PluginEnvironment(std::vector<std::string> plugins) : plugins_(std::move(plugins)) {}

  // Runs `f` before the first plugin loads (environment variables a plugin
  // reads at load time, test devices it must find).
  PluginEnvironment& beforeLoad(std::function<void()> f) {
    before_load_ = std::move(f);
    return *this;
  }
  // Runs `f` after the last plugin loaded.
  PluginEnvironment& afterLoad(std::function<void()> f) {
    after_load_ = std::move(f);
    return *this;
  }
  // Leaves the fallback mode as the process has it (BACKPLANE_FALLBACK); by
  // default fallbacks to the CPU print nothing, since the tests expect them.
  PluginEnvironment& leaveFallbackMode() {
    silent_fallback_ = false;
    return *this;
  }

  void SetUp() override {
    if (before_load_) before_load_();
    for (const std::string& path : plugins_) {
      absl::StatusOr<PluginStatus> status = plugins().load(path);
      ASSERT_TRUE(status.ok()) << path << ": " << status.status();
      ASSERT_TRUE(status->loaded) << path << ": " << status->error;
    }
    if (silent_fallback_) Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
    if (after_load_) after_load_();
  }

 private:
  std::vector<std::string> plugins_;
  std::function<void()> before_load_;
  std::function<void()> after_load_;
  bool silent_fallback_ = true;
};

// Registers a PluginEnvironment with gtest (which owns it) and returns it;
// initialise a namespace-scope constant with it, so that it is registered
// before main runs the tests:
//   const auto* const kPlugins = &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH});
inline PluginEnvironment& addPluginEnvironment(std::vector<std::string> plugins) {
  auto* environment = new PluginEnvironment(std::move(plugins));
  ::testing::AddGlobalTestEnvironment(environment);
  return *environment;
}

}  // namespace backplane::testing
