#pragma once
// Naming the plugin that ends the process while it loads (Note [Plugin
// load breadcrumb]).

#include <string>

namespace backplane::plugin_detail {

// Note [Plugin load breadcrumb]
// A plugin's static constructors (in dlopen()), its query and its init run
// inside the host process; if one of them ends the process, nothing the
// loader returns is ever seen. Before this, `backplane --plugin p.so
// conformance` whose plugin called exit(0) in init exited 0 with no report,
// so a CI job went green, and a crash did not say which plugin was loading.
// So while load() runs plugin code it keeps a breadcrumb, the plugin's
// name and path, and:
// - exit() (from any thread) during a load runs an atexit handler, which
//   libbackplane.so registers on its first load: it writes
//   "backplane: error: plugin 'NAME' (PATH) ended the process (exit) while
//   loading", flushes stdio and ends the process with _exit status
//   kPluginEndedProcessStatus (3), whatever status was asked for, so the
//   exit never reads as success. The plugin's own atexit handlers and
//   static destructors registered after the host's handler have run by
//   then; the others, and the process's remaining ones, do not.
// - SIGSEGV, SIGBUS, SIGABRT, SIGILL and SIGFPE get handlers for the
//   duration of the load only (the previous ones are put back after it).
//   The handler writes the breadcrumb with write() (async-signal-safe),
//   puts the previous handler back and lets the signal take its course: a
//   fault returns to the faulting instruction, which faults again into the
//   previous handler with the true siginfo; a sent signal (kill, raise,
//   abort) is raised again. So sanitizers, Python's faulthandler and core
//   dumps still see the signal.
// Not covered: _exit(), quick_exit() and SIGKILL, which run nothing in the
// process; a plugin that ends the process later, in a kernel, is the
// conformance runner's to isolate (its workers).

// The exit status of a process that a plugin ended by exit() while loading.
constexpr int kPluginEndedProcessStatus = 3;

// Holds the breadcrumb for one load: from construction (before dlopen) to
// destruction. Loads are serialised (the registry's load_mu), so there is at
// most one at a time.
class LoadBreadcrumb {
 public:
  explicit LoadBreadcrumb(const std::string& path);
  ~LoadBreadcrumb();
  LoadBreadcrumb(const LoadBreadcrumb&) = delete;
  LoadBreadcrumb& operator=(const LoadBreadcrumb&) = delete;

  // Once the plugin's query has named it.
  void setName(const std::string& name);

 private:
  std::string path_;
};

}  // namespace backplane::plugin_detail
