#pragma once
// Loading device plugins (shared libraries written against plugin_sdk/) at
// run time, and unloading them.
//
// Note [Plugin loading]
// Sources, in order: explicit load() calls, then loadAll() reads
// BACKPLANE_PLUGIN_PATH (colon-separated files or directories) and the
// default plugin directory, <directory of libbackplane.so>/backplane/plugins
// (Note [Default plugin directory] in plugin_registry.cc).
// A library reached through two paths loads once. Before any of a file's
// code runs, the file is checked (a regular file, an ELF shared library of
// this host that exports the entry points: Note [Plugin file checks]), and
// so is who else can change it (Note [Plugin trust]; a warning, or a refusal
// with BACKPLANE_PLUGIN_TRUST=strict). Libraries are opened with local
// symbol binding; a plugin exports only its entry points. A plugin that
// fails any check is skipped with its reason and every registration it made
// is undone; the host keeps running. A plugin that ends the process while it
// loads is named on stderr, and an exit() then ends with status 3 (Note
// [Plugin load breadcrumb]). See plugin_api.h for the ABI rules.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backplane/core/device.h"
#include "backplane/dispatch/dispatcher.h"

namespace backplane {

struct PluginDeviceStatus {
  std::string type_name;  // "toyaccel"
  DeviceType type;
  int device_count = 0;
  std::string unavailable_reason;  // why device_count is 0, if it is
};

// A BACKPLANE_PLUGIN_PATH entry loadAll() could not use (Note [Plugin path
// entries] in plugin_registry.cc).
struct PluginSourceProblem {
  std::string entry;   // as written in BACKPLANE_PLUGIN_PATH
  std::string reason;  // "does not exist", "is a symbolic link loop (...)", ...
};

struct PluginStatus {
  std::string path;  // canonical path of the library
  std::string name;  // from the plugin's query (empty if unreadable)
  std::string version;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  bool loaded = false;
  std::string error;  // why it did not load (when !loaded)
  std::vector<PluginDeviceStatus> devices;
  size_t kernels = 0;  // kernels and fallbacks it registered
  // Of those, the ones the host calls through their typed entry (Note
  // [Typed kernel entries] in plugin_api.h): kernels of a plugin built for
  // ABI 1.14 or newer that give typed_fn, where the op's signature has a
  // typed call in this host.
  size_t typed_kernels = 0;
  int64_t live_allocations = 0;
};

class PluginRegistry {
 public:
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Loads the plugin at `path` and runs its init. Loading a library that is
  // already loaded (by any path) returns its status. On failure the returned
  // error says why, and plugins() lists the attempt.
  absl::StatusOr<PluginStatus> load(const std::string& path);
  // Loads everything on BACKPLANE_PLUGIN_PATH and in the default directories
  // (skipping libraries already loaded). Failures do not stop the others;
  // every attempt is in the result.
  std::vector<PluginStatus> loadAll();
  // Unregisters everything the plugin registered and closes the library.
  // Refuses (FailedPrecondition, saying what) while tensors it allocated are
  // alive or a call into it does not finish within a few seconds.
  absl::Status unload(std::string_view name);

  // Loaded plugins and failed attempts, in load order.
  std::vector<PluginStatus> plugins() const;
  // The BACKPLANE_PLUGIN_PATH entries loadAll() skipped (missing, relative,
  // a symbolic link loop, an unreadable folder), each once, with the reason;
  // each was also a warning on stderr.
  std::vector<PluginSourceProblem> skippedSources() const;
  // Where loadAll() looks after BACKPLANE_PLUGIN_PATH: the backplane/plugins
  // folder next to libbackplane.so, wherever the library was loaded from
  // (empty if the loader cannot say where that is).
  static std::vector<std::string> defaultDirectories();

  struct Impl;

 private:
  friend struct PluginRegistryAccess;
  std::unique_ptr<Impl> impl_;
};

// The process's plugins: created on first use and never destroyed, like the
// Dispatcher singleton whose table they register into.
PluginRegistry& plugins();

// Calls `op` with the arguments on `stack` the way a C++ application's typed
// call does (op.typed<Sig>().call with the schema's signature), replaces
// them with its returns, and returns true (the stack's arguments are
// completed and checked as callBoxed does first); or returns false, the stack
// untouched, where the host calls no plugin kernel of that signature
// unboxed (a typed call then reaches a plugin kernel boxed, as callBoxed
// does). callBoxed reaches a plugin kernel through its boxed entry, a typed
// call through its typed one where the plugin gives one (Note [Typed kernel
// entries] in plugin_api.h): conformance calls both, so that it certifies
// what applications call. Throws what the call throws; the stack's contents
// are then unspecified (its tensors may have been moved into the call).
bool callAsTyped(const OperatorHandle& op, Stack& stack);

}  // namespace backplane
