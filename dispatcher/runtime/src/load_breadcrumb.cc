// Note [Plugin load breadcrumb] (load_breadcrumb.h).
#include "load_breadcrumb.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace backplane::plugin_detail {

namespace {

// "plugin 'NAME' (PATH)" or, before the query named it, "plugin 'PATH'".
// Two buffers: a new label is written into the one not published, then
// published, so a signal handler never reads a label being written. Never
// destroyed: a signal may come during exit.
std::string* const g_labels = new std::string[2];
int g_next_label = 0;
std::atomic<const char*> g_label{nullptr};
pthread_t g_loading_thread;

struct FatalSignal {
  int number;
  const char* name;
  struct sigaction previous;
};
FatalSignal g_signals[] = {{SIGSEGV, "SIGSEGV", {}},
                           {SIGBUS, "SIGBUS", {}},
                           {SIGABRT, "SIGABRT", {}},
                           {SIGILL, "SIGILL", {}},
                           {SIGFPE, "SIGFPE", {}}};

void writeAll(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void publish(const std::string& label) {
  std::string& slot = g_labels[g_next_label];
  g_next_label ^= 1;
  slot = label;
  g_label.store(slot.c_str(), std::memory_order_release);
}

// Async-signal-safe: write(), sigaction() and raise() only.
void onFatalSignal(int number, siginfo_t* info, void*) {
  const int saved_errno = errno;
  for (FatalSignal& s : g_signals) {
    if (s.number != number) continue;
    if (const char* label = g_label.load(std::memory_order_acquire)) {
      writeAll("backplane: error: ");
      writeAll(label);
      writeAll(" ended the process (");
      writeAll(s.name);
      writeAll(") while loading\n");
    }
    ::sigaction(number, &s.previous, nullptr);
    // A fault (si_code > 0) repeats when the handler returns, now into the
    // previous handler; a sent signal must be sent again.
    if (info == nullptr || info->si_code <= 0) ::raise(number);
  }
  errno = saved_errno;
}

void onExit() {
  const char* label = g_label.load(std::memory_order_acquire);
  if (!label) return;
  if (pthread_equal(pthread_self(), g_loading_thread)) {
    std::fprintf(stderr, "backplane: error: %s ended the process (exit) while loading; exit status %d\n", label,
                 kPluginEndedProcessStatus);
  } else {
    std::fprintf(stderr,
                 "backplane: error: the process exited (from another thread) while %s was loading; exit status %d\n",
                 label, kPluginEndedProcessStatus);
  }
  std::fflush(nullptr);
  ::_exit(kPluginEndedProcessStatus);
}

}  // namespace

LoadBreadcrumb::LoadBreadcrumb(const std::string& path) : path_(path) {
  // atexit(), not glibc's on_exit(): a handler registered through atexit()
  // by a shared library is removed if that library is unloaded.
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(&onExit); });
  g_loading_thread = pthread_self();
  publish("plugin '" + path + "'");
  struct sigaction action {};
  action.sa_sigaction = &onFatalSignal;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  for (FatalSignal& s : g_signals) ::sigaction(s.number, &action, &s.previous);
}

void LoadBreadcrumb::setName(const std::string& name) { publish("plugin '" + name + "' (" + path_ + ")"); }

LoadBreadcrumb::~LoadBreadcrumb() {
  // Only where the handler is still ours: a plugin that installed its own
  // (a runtime that handles its faults) keeps it.
  for (FatalSignal& s : g_signals) {
    struct sigaction current {};
    if (::sigaction(s.number, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
        current.sa_sigaction == &onFatalSignal)
      ::sigaction(s.number, &s.previous, nullptr);
  }
  g_label.store(nullptr, std::memory_order_release);
}

}  // namespace backplane::plugin_detail
