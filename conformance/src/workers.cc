// The processes that run `backplane conformance`'s items: the worker
// (runConformanceWorker) and its parent (runBackend).
//
// Note [Conformance workers]
// Each backend (and device: --device, --all-devices) runs in a child
// process, this executable started again as `conformance-worker` with the
// same plugin sources, so a kernel that crashes or hangs costs one form of
// one op, not the run. The worker writes lines to a pipe:
//   begin\t<i>                     before item i (a device check or an op spec)
//   sample\t<i>\t<f>\t<n>\t<name>    before sample n of form f of item i runs
//                                  (encodeSampleStart: f indexes formsOf(spec))
//   result\t...                    one encoded Result per form, as soon as the
//                                  form ends (encodeResult, suite.h)
//   end\t<i>                       after item i
//   done                           at the end
// Everything is written with write(2) before the work it announces, so the
// parent has it even when the worker dies in the next instruction. The
// parent waits at most the time limit for each item. When the worker dies
// or runs past it, the parent keeps the forms that ended and reports the
// sample announced last (its op, form and name) as a crash, with the
// signal or exit code and the worker's last stderr lines; a new worker
// resumes at the form after it. Dying with no sample announced (a device
// check, or between forms) blames the item (form "device" or "all") and
// resumes at the next item, so every restart makes progress. Workers are
// started with exec, not fork alone, so a device runtime the parent
// initialised (CUDA counts its devices) is never inherited half-alive; they
// die with the parent (Note [Workers die with their parent]).
#include "workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/conformance/suite.h"
#include "backplane/conformance/text_format.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"

extern char** environ;

namespace backplane::conformance {

namespace {

using Clock = std::chrono::steady_clock;

// ----------------------------------------------------------- the worker

bool writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int runConformanceWorker(const WorkerTask& task, int fd) {
  std::optional<DeviceType> type = DeviceTypeRegistry::global().find(task.backend);
  if (!type) {
    std::cerr << "backplane conformance-worker: no device type '" << task.backend << "' after loading the plugins\n";
    return 1;
  }
  const std::vector<Item> items = selectItems(*type, task.ops, task.device_checks, task.onnx, task.native);
  const Device device(*type, static_cast<DeviceIndex>(task.device));
  bool written = true;  // a pipe the parent closed: stop after the item
  for (size_t i = task.first; i < items.size() && written; ++i) {
    written &= writeAll(fd, "begin\t" + std::to_string(i) + "\n");
    SpecObserver observer;
    observer.before_sample = [&](size_t form, int number, const Sample& sample) {
      written &= writeAll(fd, encodeSampleStart({i, form, number, sample.name}) + "\n");
    };
    observer.form_done = [&](size_t, const Result& r) { written &= writeAll(fd, encodeResult(r) + "\n"); };
    try {
      const std::vector<Result> results = runItem(items[i], device, i == task.first ? task.first_form : 0, observer);
      if (!items[i].spec) {  // a device check has no forms: its one Result
        for (const Result& r : results) written &= writeAll(fd, encodeResult(r) + "\n");
      }
    } catch (const std::exception& e) {  // runSpec reports per form; this is a last resort
      Result r;
      r.op = items[i].name;
      r.form = items[i].spec ? "all" : !items[i].onnx_test.empty() ? kOnnxForm : "device";
      r.backend = task.backend;
      r.outcome = Outcome::Error;
      r.message = e.what();
      written &= writeAll(fd, encodeResult(r) + "\n");
    }
    written &= writeAll(fd, "end\t" + std::to_string(i) + "\n");
  }
  return written && writeAll(fd, "done\n") ? 0 : 1;
}

namespace {

// ----------------------------------------------------------- the parent

// A pipe's read end, read line by line.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  int fd() const { return fd_; }
  bool eof() const { return eof_; }
  // Reads what is available; complete lines go to `lines`.
  void pump(std::vector<std::string>& lines) {
    char buf[65536];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      eof_ = true;
      return;
    }
    pending_.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    while ((nl = pending_.find('\n', start)) != std::string::npos) {
      lines.push_back(pending_.substr(start, nl - start));
      start = nl + 1;
    }
    pending_.erase(0, start);
  }

 private:
  int fd_;
  bool eof_ = false;
  std::string pending_;
};

// The last lines a worker wrote to stdout or stderr, for crash reports.
class Tail {
 public:
  void add(std::string line) {
    if (line.size() > kLineLimit) line = line.substr(0, kLineLimit) + "...";
    lines_.push_back(std::move(line));
    if (lines_.size() > kLines) lines_.erase(lines_.begin());
  }
  std::string text() const {
    std::string out;
    for (const std::string& l : lines_) out += (out.empty() ? "" : "\n") + l;
    return out;
  }

 private:
  static constexpr size_t kLines = 6, kLineLimit = 400;
  std::vector<std::string> lines_;
};

std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "the worker was killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : "");
  }
  if (WIFEXITED(status)) return "the worker exited with status " + std::to_string(WEXITSTATUS(status));
  return "the worker stopped";
}

// The item index of a "begin\t<i>" or "end\t<i>" line.
std::optional<size_t> indexAfter(const std::string& line, std::string_view prefix) {
  if (line.size() <= prefix.size() || line.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t i = 0;
  const char* end = line.data() + line.size();
  auto [p, ec] = std::from_chars(line.data() + prefix.size(), end, i);
  if (ec != std::errc() || p != end) return std::nullopt;
  return i;
}

struct Worker {
  pid_t pid = -1;
  int results_fd = -1, stderr_fd = -1;
};

// Note [Workers die with their parent]
// A worker may sit in a hung kernel for as long as --timeout allows; when
// the tool goes away first (CI's SIGTERM at its job limit, ^C, a crash,
// Python's KeyboardInterrupt killing it), the worker must not run on,
// reparented to init, holding a device. So:
// - each worker is forked into a process group of its own
//   (setpgid(0, 0); the parent calls setpgid too, closing the race), so
//   the parent can kill it with whatever it started, and a terminal's ^C
//   reaches the parent only, which decides;
// - the child asks for SIGKILL when its parent dies (PR_SET_PDEATHSIG,
//   kept across exec) and then checks that the parent it was forked from
//   is still there, in case the parent died before the request: this
//   covers a parent killed by SIGKILL or a crash, which run no handler.
//   (The signal follows the *thread* that forked: runBackend forks from
//   the thread that runs the whole conformance run.);
// - while a worker runs, SIGTERM, SIGINT and SIGHUP kill its group and then
//   end the parent as the signal would have (the handler resets itself and
//   re-raises); a signal the parent ignored (nohup) stays ignored;
// - every other way out of runBackend (an exception included) kills and
//   reaps the worker's group (WorkerGroup below).
// The handler reaches the running worker through the one global below
// (an atomic, which a signal handler may read).
std::atomic<pid_t> running_worker_group{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "a signal handler reads running_worker_group");

constexpr int kForwardedSignals[] = {SIGTERM, SIGINT, SIGHUP};

void killWorkersAndRaise(int sig) {
  const pid_t group = running_worker_group.load();
  if (group > 0) ::kill(-group, SIGKILL);
  // SA_RESETHAND restored the default action; the signal, blocked while
  // this handler runs, is delivered again on return.
  ::raise(sig);
}

// Installs killWorkersAndRaise for kForwardedSignals while it lives
// (except where the signal was ignored), restoring the previous actions.
class ForwardSignals {
 public:
  ForwardSignals() {
    for (size_t i = 0; i < std::size(kForwardedSignals); ++i) {
      struct sigaction sa {};
      sa.sa_handler = killWorkersAndRaise;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESETHAND | SA_RESTART;
      ::sigaction(kForwardedSignals[i], nullptr, &previous_[i]);
      if (previous_[i].sa_handler != SIG_IGN) ::sigaction(kForwardedSignals[i], &sa, nullptr);
    }
  }
  ~ForwardSignals() {
    for (size_t i = 0; i < std::size(kForwardedSignals); ++i) ::sigaction(kForwardedSignals[i], &previous_[i], nullptr);
  }
  ForwardSignals(const ForwardSignals&) = delete;
  ForwardSignals& operator=(const ForwardSignals&) = delete;

 private:
  struct sigaction previous_[std::size(kForwardedSignals)]{};
};

// The running worker's process group: published for the signal handler,
// and killed and reaped if it is still running when this goes away.
class WorkerGroup {
 public:
  explicit WorkerGroup(pid_t pid) : pid_(pid) { running_worker_group.store(pid); }
  ~WorkerGroup() {
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
    running_worker_group.store(0);
  }
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;
  // Waits for the worker to end, kills what it left in its group (the
  // unreaped leader keeps the group's id from being reused meanwhile), then
  // reaps it; returns its wait status.
  int wait() {
    siginfo_t info{};
    while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    ::kill(-pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_;
  bool reaped_ = false;
};

// Starts `self [sources] conformance-worker ...` with the result pipe on
// fd 3 and stdout/stderr on a second pipe, in a process group of its own
// that dies with this process (Note [Workers die with their parent]).
Worker spawnWorker(const std::string& self, const PluginSources& sources, const WorkerTask& task) {
  int results[2], errs[2], exec_error[2];
  if (::pipe2(results, O_CLOEXEC) != 0 || ::pipe2(errs, O_CLOEXEC) != 0 || ::pipe2(exec_error, O_CLOEXEC) != 0) {
    BP_THROW(kInternal, "cannot create a pipe for the conformance worker: ", std::strerror(errno));
  }
  std::vector<std::string> argv_s{self};
  for (const std::string& p : sources.explicit_paths) argv_s.insert(argv_s.end(), {"--plugin", p});
  if (!sources.defaults) argv_s.push_back("--no-default-plugins");
  argv_s.insert(argv_s.end(),
                {"conformance-worker", "--backend", task.backend, "--device", std::to_string(task.device), "--first",
                 std::to_string(task.first), "--first-form", std::to_string(task.first_form), "--result-fd", "3"});
  if (!task.device_checks) argv_s.push_back("--no-device-checks");
  if (!task.ops.empty()) argv_s.push_back("--ops=" + task.ops);
  if (task.native) argv_s.push_back("--native");
  if (!task.onnx.empty()) argv_s.push_back("--onnx=" + task.onnx);
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The report says which ops the CPU fallback served: its once-per-op
  // warnings would only bury a crashing worker's last words. A mode the
  // user set (BACKPLANE_FALLBACK=error) is kept.
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  static char silent[] = "BACKPLANE_FALLBACK=silent";
  if (std::getenv("BACKPLANE_FALLBACK") == nullptr) env.push_back(silent);
  env.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: async-signal-safe calls only (the parent may have threads).
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent is already gone
    // Each descriptor is moved above the three standard ones and fd 3 first,
    // so that no dup2 below overwrites a source not yet copied.
    const int r = ::fcntl(results[1], F_DUPFD, 10), e = ::fcntl(errs[1], F_DUPFD, 10);
    const int null = ::open("/dev/null", O_RDONLY);
    if (r < 0 || e < 0 || null < 0 || ::dup2(r, 3) < 0 || ::dup2(e, 1) < 0 || ::dup2(e, 2) < 0 || ::dup2(null, 0) < 0) {
      const int err = errno;
      (void)!::write(exec_error[1], &err, sizeof err);
      ::_exit(127);
    }
    ::close(r);
    ::close(e);
    ::close(null);
    ::execve(self.c_str(), argv.data(), env.data());
    const int err = errno;
    (void)!::write(exec_error[1], &err, sizeof err);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(results[1]);
  ::close(errs[1]);
  ::close(exec_error[1]);
  int child_errno = 0;
  if (pid > 0) {
    ::setpgid(pid, pid);  // also here: the group exists before anyone signals it
    // EOF (exec closed the pipe) or the errno the child could not exec with.
    ssize_t n;
    while ((n = ::read(exec_error[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
    }
    if (n != static_cast<ssize_t>(sizeof child_errno)) child_errno = 0;
  }
  ::close(exec_error[0]);
  if (pid < 0 || child_errno != 0) {
    if (pid > 0) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
    ::close(results[0]);
    ::close(errs[0]);
    BP_THROW(kInternal, "cannot start the conformance worker ", self, ": ",
             std::strerror(pid < 0 ? fork_errno : child_errno));
  }
  Worker w;
  w.pid = pid;
  w.results_fd = results[0];
  w.stderr_fd = errs[0];
  return w;
}

// The Result of a form (or, with `form` out of range or no spec, of the
// whole item) that the worker did not finish.
Result crashResult(const Item& item, size_t form, const std::string& backend, std::string message) {
  Result r;
  r.backend = backend;
  r.outcome = Outcome::Crash;
  r.message = std::move(message);
  const std::optional<DeviceType> type = DeviceTypeRegistry::global().find(backend);
  if (!item.spec) {
    r.op = item.name;
    r.form = item.onnx_test.empty() ? "device" : kOnnxForm;
    return r;
  }
  const std::vector<Form> forms = formsOf(*item.spec);
  if (form < forms.size()) {
    r.op = forms[form].op;
    r.form = forms[form].name;
  } else {
    r.op = item.name;
    r.form = "all";
  }
  if (type) {
    r.kernel = kernelKindOn(r.op, *type);
    setDeclaredDtypes(r, *type);
  }
  return r;
}

class Progress {
 public:
  Progress(std::ostream& err, bool on) : err_(err), on_(on) {}
  void show(const std::string& backend, size_t i, size_t n, const std::string& name) {
    if (!on_) return;
    err_ << "\r\033[K[" << backend << ' ' << i + 1 << '/' << n << "] " << name << std::flush;
  }
  void clear() {
    if (on_) err_ << "\r\033[K" << std::flush;
  }

 private:
  std::ostream& err_;
  bool on_;
};

}  // namespace

void runBackend(BackendRun& run, DeviceType type, const std::string& self, const PluginSources& sources,
                const ConformanceOptions& options, std::ostream& err) {
  const std::vector<Item> items = selectItems(type, options.ops, run.device_checks, options.onnx, options.native);
  Progress progress(err, options.progress);
  const auto timeout = std::chrono::duration<double>(options.timeout_s);
  WorkerTask task;
  task.backend = run.name;
  task.ops = options.ops;
  task.native = options.native;
  task.device = run.device;
  task.device_checks = run.device_checks;
  task.onnx = options.onnx;
  const ForwardSignals forward;  // Note [Workers die with their parent]
  while (task.first < items.size()) {
    Worker w = spawnWorker(self, sources, task);
    WorkerGroup group(w.pid);
    LineReader results(w.results_fd), errors(w.stderr_fd);
    Tail tail;
    constexpr size_t kNone = SIZE_MAX;
    size_t current = kNone;              // the item begun and not ended
    size_t forms_done = 0;               // forms of `current` whose Result came (counting skipped ones)
    std::optional<SampleStart> running;  // the sample announced last, until its form's Result
    std::vector<Result> pending;
    bool done = false, timed_out = false;
    Clock::time_point started = Clock::now();
    auto handle = [&](const std::string& line) {
      if (std::optional<size_t> i = indexAfter(line, "begin\t"); i && *i < items.size()) {
        current = *i;
        forms_done = *i == task.first ? task.first_form : 0;
        running.reset();
        started = Clock::now();
        progress.show(run.label(), *i, items.size(), visibleText(items[*i].name));
      } else if (std::optional<size_t> e = indexAfter(line, "end\t"); e && current == *e) {
        for (Result& r : pending) run.results.push_back(std::move(r));
        pending.clear();
        task.first = *e + 1;
        task.first_form = 0;
        current = kNone;
        running.reset();
      } else if (line == "done") {
        done = true;
      } else if (std::optional<SampleStart> s = decodeSampleStart(line); s && s->item == current) {
        forms_done = s->form;
        running = std::move(s);
      } else if (std::optional<Result> r = decodeResult(line)) {
        pending.push_back(std::move(*r));
        ++forms_done;
        running.reset();
      } else {
        tail.add("(unreadable worker line) " + line);
      }
    };
    while (!results.eof()) {
      const auto left = timeout - (Clock::now() - started);
      if (left <= std::chrono::duration<double>::zero()) {
        timed_out = true;
        break;
      }
      // A closed stderr pipe leaves the set (poll skips negative fds; it
      // would report POLLHUP forever).
      pollfd fds[2] = {{results.fd(), POLLIN, 0}, {errors.eof() ? -1 : errors.fd(), POLLIN, 0}};
      // At most a second per poll; the double is clamped before the cast.
      const int ms =
          static_cast<int>(std::ceil(std::min(std::chrono::duration<double, std::milli>(left).count(), 1000.0)));
      const int n = ::poll(fds, 2, ms);
      if (n < 0 && errno != EINTR) BP_THROW(kInternal, "poll failed: ", std::strerror(errno));
      if (n <= 0) continue;
      std::vector<std::string> lines;
      if (fds[1].revents) {
        errors.pump(lines);
        for (const std::string& l : lines) tail.add(l);
        lines.clear();
      }
      if (!fds[0].revents) continue;
      results.pump(lines);
      for (const std::string& line : lines) handle(line);
    }
    if (timed_out) ::kill(-w.pid, SIGKILL);
    const int status = group.wait();
    // Whatever the worker wrote before it died: the lines announcing what it
    // ran last and its last words on stderr.
    for (std::vector<std::string> lines; !results.eof(); lines.clear()) {
      results.pump(lines);
      for (const std::string& l : lines) handle(l);
    }
    for (std::vector<std::string> lines; !errors.eof(); lines.clear()) {
      errors.pump(lines);
      for (const std::string& l : lines) tail.add(l);
    }
    ::close(w.results_fd);
    ::close(w.stderr_fd);
    const std::string last = tail.text();
    const std::string output = last.empty() ? "" : "; its last output:\n" + last;
    if (done) {
      // Every item ran; a worker that then fails (a plugin crashing as it
      // is unloaded) still fails the run.
      if (status != 0) run.error = describeStatus(status) + " after its last item" + output;
      break;
    }
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", options.timeout_s);
    if (current == kNone) {
      // Stopped before its first item or between two: no op to blame.
      run.error = (timed_out ? std::string("the worker was killed after the time limit of ") + limit + " s"
                             : describeStatus(status)) +
                  " before running item " + std::to_string(task.first + 1) + " of " + std::to_string(items.size()) +
                  output;
      break;
    }
    // The forms that ended count; the one running is the crash.
    for (Result& r : pending) run.results.push_back(std::move(r));
    const Item& item = items[current];
    const size_t form_count = item.spec ? formsOf(*item.spec).size() : 0;
    // With no sample announced since the last form ended, the next form (if
    // any is left) was being set up.
    const size_t form = running ? running->form : forms_done;
    const bool one_form = item.spec && form < form_count;
    const char* what = running                   ? "this sample"
                       : one_form                ? "this form (before its first sample)"
                       : item.spec               ? "this op"
                       : !item.onnx_test.empty() ? "this ONNX node test"
                                                 : "this device check";
    std::string why = timed_out ? std::string("ran past the time limit of ") + limit + " s (--timeout) while running " +
                                      what + "; the worker was killed"
                                : describeStatus(status) + " while running " + what;
    Result crash = crashResult(item, one_form ? form : SIZE_MAX, run.name, why + output);
    if (running) {
      crash.samples = running->number;
      crash.sample = running->sample;
    }
    run.results.push_back(std::move(crash));
    // Resume after the crashed form, or after the item.
    if (one_form && form + 1 < form_count) {
      task.first = current;
      task.first_form = form + 1;
    } else {
      task.first = current + 1;
      task.first_form = 0;
    }
  }
  progress.clear();
}

}  // namespace backplane::conformance
