// `backplane conformance`: certifies every backend op by op.
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
// initialised (CUDA counts its devices) is never inherited half-alive.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/conformance/command.h"
#include "backplane/conformance/suite.h"
#include "backplane/conformance/text_format.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/runtime/runtime.h"

extern char** environ;

namespace backplane::conformance {

namespace {
bool isBuiltinAccelerator(DeviceType t) { return t == DeviceType::CUDA || t == DeviceType::HIP; }
}  // namespace

// Every active device type (built-ins first), optionally only those that
// have an interface, plus cuda and hip in any case.
std::vector<Backend> activeBackends(bool with_interface_only) {
  DeviceTypeRegistry& reg = DeviceTypeRegistry::global();
  std::vector<Backend> out;
  for (const std::string& name : reg.activeNames()) {
    std::optional<DeviceType> t = reg.find(name);
    if (!t) continue;  // unregistered meanwhile
    DeviceInterface* iface = reg.interface(*t);
    if (with_interface_only && !iface && !isBuiltinAccelerator(*t)) continue;
    out.push_back(Backend{name, *t, iface});
  }
  return out;
}

std::string providerOf(const Backend& b) { return deviceTypeProvider(b.type); }

std::vector<PluginLoadFailure> loadPlugins(const PluginSources& sources) {
  std::vector<PluginLoadFailure> failed;
  for (const std::string& path : sources.explicit_paths) {
    absl::StatusOr<PluginStatus> s = plugins().load(path);  // every attempt is also listed in plugins()
    if (!s.ok())
      failed.push_back({path, std::string(s.status().message())});
    else if (!s->loaded)
      failed.push_back({path, s->error});
  }
  if (sources.defaults) (void)plugins().loadAll();
  return failed;
}

void warnAboutFailedPlugins(std::ostream& err) {
  for (const PluginStatus& p : plugins().plugins()) {
    if (!p.loaded) err << "backplane: warning: plugin " << p.path << " not loaded: " << p.error << '\n';
  }
}

namespace {

using Clock = std::chrono::steady_clock;

// ------------------------------------------------------------- the runs

struct BackendRun {
  std::string name;
  std::string provider;  // the plugin that registered the type
  int devices = 0;
  int device = 0;             // the device the op specs ran on
  bool device_checks = true;  // whether the run began with the device checks
  // "faulty:1": the run's name in lists, the JUnit suite and the Markdown
  // matrix; a skipped backend ran on no device ("hip").
  std::string label() const { return skipped.empty() ? name + ":" + std::to_string(device) : name; }
  std::string skipped;          // why the backend was not run (no devices)
  std::string error;            // why the run could not finish (a failure)
  std::vector<Result> results;  // every form of every item, in order
  double seconds = 0;
};

bool countsAsFailure(const Result& r, bool strict) {
  if (r.outcome == Outcome::Unsupported || r.outcome == Outcome::ExpectedFailure) return false;
  if (r.outcome != Outcome::Pass) return true;
  return strict && r.kernel && isFallback(*r.kernel);
}

// The kinds the summary counts, a column each (a fallthrough never serves
// a backend key).
constexpr KernelKind kReportedKinds[] = {KernelKind::Native, KernelKind::Composite, KernelKind::BackendFallback,
                                         KernelKind::CpuFallback, KernelKind::Missing};

// Every form in exactly one of pass, fail, fallback, error and crash, so
// that the columns add up to the verdict: `fallback` counts the forms that
// passed on a fallback kernel, failures under --strict (0 without it), and
// `pass` the forms that passed and count as passes. failures = fail +
// fallback + error + crash (+ 1 for an aborted run).
struct Counts {
  int forms = 0, pass = 0, fail = 0, fallback = 0, error = 0, crash = 0, failures = 0;
  int unsupported = 0, xfail = 0;     // ONNX node tests (Note [ONNX node tests]): neither is a failure
  std::map<KernelKind, int> kernels;  // forms served by each kind (device checks have none)
};

Counts countsOf(const BackendRun& b, bool strict) {
  Counts c;
  for (const Result& r : b.results) {
    ++c.forms;
    switch (r.outcome) {
      case Outcome::Pass: ++(countsAsFailure(r, strict) ? c.fallback : c.pass); break;
      case Outcome::Fail: ++c.fail; break;
      case Outcome::Error: ++c.error; break;
      case Outcome::Crash: ++c.crash; break;
      case Outcome::Unsupported: ++c.unsupported; break;
      case Outcome::ExpectedFailure: ++c.xfail; break;
    }
    if (countsAsFailure(r, strict)) ++c.failures;
    if (r.kernel) ++c.kernels[*r.kernel];
  }
  if (!b.error.empty()) ++c.failures;
  return c;
}

// "fail at sample 'x': message (max abs 1, max rel 0.5)"
std::string describeProblem(const Result& r, bool strict) {
  std::string s = outcomeName(r.outcome);
  if (r.outcome == Outcome::Pass && countsAsFailure(r, strict))
    s = std::string(kernelNameOf(r)) + " (counted as a failure: --strict)";
  if (!r.sample.empty()) s += " at sample '" + r.sample + "'";
  if (!r.message.empty()) s += ": " + r.message;
  if (r.outcome == Outcome::Fail && (r.max_abs_error > 0 || r.max_rel_error > 0)) {
    std::ostringstream os;
    os << " (max abs error " << r.max_abs_error << ", max rel error " << r.max_rel_error << ")";
    s += os.str();
  }
  return s;
}

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
  const std::vector<Item> items = selectItems(*type, task.ops, task.device_checks, task.onnx);
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

// Starts `self [sources] conformance-worker ...` with the result pipe on
// fd 3 and stdout/stderr on a second pipe.
Worker spawnWorker(const std::string& self, const PluginSources& sources, const WorkerTask& task) {
  int results[2], errs[2];
  if (::pipe2(results, O_CLOEXEC) != 0 || ::pipe2(errs, O_CLOEXEC) != 0) {
    BP_THROW(kInternal, "cannot create a pipe for the conformance worker: ", std::strerror(errno));
  }
  std::vector<std::string> argv_s{self};
  for (const std::string& p : sources.explicit_paths) argv_s.insert(argv_s.end(), {"--plugin", p});
  if (!sources.defaults) argv_s.push_back("--no-default-plugins");
  argv_s.insert(argv_s.end(),
                {"conformance-worker", "--backend", task.backend, "--device", std::to_string(task.device), "--first",
                 std::to_string(task.first), "--first-form", std::to_string(task.first_form), "--result-fd", "3"});
  if (!task.device_checks) argv_s.push_back("--no-device-checks");
  if (!task.ops.empty()) argv_s.insert(argv_s.end(), {"--ops", task.ops});
  if (!task.onnx.empty()) argv_s.insert(argv_s.end(), {"--onnx", task.onnx});
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, results[1], 3);
  posix_spawn_file_actions_adddup2(&actions, errs[1], 1);
  posix_spawn_file_actions_adddup2(&actions, errs[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // The report says which ops the CPU fallback served: its once-per-op
  // warnings would only bury a crashing worker's last words. A mode the
  // user set (BACKPLANE_FALLBACK=error) is kept.
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  static char silent[] = "BACKPLANE_FALLBACK=silent";
  if (std::getenv("BACKPLANE_FALLBACK") == nullptr) env.push_back(silent);
  env.push_back(nullptr);
  Worker w;
  const int rc = posix_spawn(&w.pid, self.c_str(), &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(results[1]);
  ::close(errs[1]);
  if (rc != 0) {
    ::close(results[0]);
    ::close(errs[0]);
    BP_THROW(kInternal, "cannot start the conformance worker ", self, ": ", std::strerror(rc));
  }
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

// The expected failures of a backend's ONNX node tests (Note [ONNX node
// tests]): DIR/<backend>.txt, one test a line, "<test> <reason>" (the
// reason is required; an "onnx::" before the test is allowed); a line
// starting with '#' is a comment. No file: nothing is expected to fail.
struct ExpectedFailure {
  std::string reason;
  bool seen = false;
};
absl::StatusOr<std::map<std::string, ExpectedFailure>> readExpectedFailures(const std::string& path) {
  std::map<std::string, ExpectedFailure> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  std::ifstream f(path);
  if (!f || !std::filesystem::is_regular_file(path, ec))
    return absl::InvalidArgumentError(strCat("cannot read the expected failures ", path));
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    std::istringstream fields(line);
    std::string test;
    if (!(fields >> test) || test[0] == '#') continue;  // a blank line or a comment line
    if (test.rfind("onnx::", 0) == 0) test = test.substr(6);
    std::string reason;
    std::getline(fields >> std::ws, reason);
    while (!reason.empty() && std::isspace(static_cast<unsigned char>(reason.back()))) reason.pop_back();
    if (reason.empty()) {
      return absl::InvalidArgumentError(
          strCat(path, ":", n, ": '", test, "' has no reason; write '<test> <why it fails>'"));
    }
    if (!out.emplace(test, ExpectedFailure{reason}).second)
      return absl::InvalidArgumentError(strCat(path, ":", n, ": '", test, "' is listed twice"));
  }
  return out;
}

// Marks the run's listed failures as expected and notes listed tests that
// passed; returns the list's entries that matched no test of a whole-corpus
// run (stale entries), for a warning.
std::vector<std::string> applyExpectedFailures(BackendRun& run, std::map<std::string, ExpectedFailure>& expected,
                                               const std::string& path) {
  for (Result& r : run.results) {
    if (r.form != kOnnxForm || r.op.rfind("onnx::", 0) != 0) continue;
    auto it = expected.find(r.op.substr(6));
    if (it == expected.end()) continue;
    it->second.seen = true;
    const std::string& reason = it->second.reason;
    if (r.outcome == Outcome::Fail || r.outcome == Outcome::Error || r.outcome == Outcome::Crash) {
      r.message = std::string(outcomeName(r.outcome)) + (r.message.empty() ? "" : ": " + r.message);
      r.outcome = Outcome::ExpectedFailure;
      r.note = "expected failure (" + path + "): " + reason + (r.note.empty() ? "" : "; " + r.note);
    } else if (r.outcome == Outcome::Pass) {
      r.note = std::string(kUnexpectedPassNote) + " in " + path + " (" + reason + "): remove it from the list" +
               (r.note.empty() ? "" : "; " + r.note);
    } else if (r.outcome == Outcome::Unsupported) {
      r.note = "unsupported, but " + std::string(kUnexpectedPassNote.substr(kUnexpectedPassNote.find("is listed"))) +
               " in " + path + " (" + reason + "): remove it from the list" + (r.note.empty() ? "" : "; " + r.note);
    }
  }
  std::vector<std::string> stale;
  for (const auto& [test, e] : expected)
    if (!e.seen) stale.push_back(test);
  return stale;
}

// Runs every item of one backend in workers; see Note [Conformance workers].
void runBackend(BackendRun& run, DeviceType type, const std::string& self, const PluginSources& sources,
                const ConformanceOptions& options, std::ostream& err) {
  const std::vector<Item> items = selectItems(type, options.ops, run.device_checks, options.onnx);
  Progress progress(err, options.progress);
  const auto timeout = std::chrono::duration<double>(options.timeout_s);
  WorkerTask task;
  task.backend = run.name;
  task.ops = options.ops;
  task.device = run.device;
  task.device_checks = run.device_checks;
  task.onnx = options.onnx;
  while (task.first < items.size()) {
    Worker w = spawnWorker(self, sources, task);
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
        progress.show(run.label(), *i, items.size(), items[*i].name);
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
      const int ms = static_cast<int>(std::ceil(std::chrono::duration<double, std::milli>(left).count()));
      const int n = ::poll(fds, 2, std::min(ms, 1000));
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
    if (timed_out) ::kill(w.pid, SIGKILL);
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
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

// ------------------------------------------------------------- reports

// "12.3 s"
std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// "CPU_FALLBACK" for "cpu_fallback": a column header.
std::string upperCase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Conformance certifies what is declared (Note [Declared dtypes]): each form
// whose native kernel serves some dtypes only, and what served the rest.
void printDeclaredDtypes(std::ostream& out, const std::vector<BackendRun>& runs) {
  bool header = false;
  for (const BackendRun& b : runs) {
    for (const Result& r : b.results) {
      if (!r.dtypes) continue;
      if (!header)
        out << "\nkernels that declare their dtypes (samples of other dtypes ran where the declaration sends them):\n";
      header = true;
      out << "  " << b.label() << "  " << r.op << " (" << r.form << "): " << kernelTextOf(r)
          << (r.note.empty() ? "" : "; note: " + r.note) << '\n';
    }
  }
}

bool anyOnnx(const std::vector<BackendRun>& runs) {
  for (const BackendRun& b : runs)
    for (const Result& r : b.results)
      if (r.form == kOnnxForm) return true;
  return false;
}

// The figures of a run of ONNX's node tests, one line per backend: found,
// mapped (loadable, and an entry in the op table), passed, failed (+ expected failures),
// unsupported, crashed, and the time.
struct OnnxFigures {
  int found = 0, unmapped = 0, passed = 0, failed = 0, xfail = 0, unsupported = 0, crashed = 0, unexpected = 0;
};

OnnxFigures onnxFiguresOf(const BackendRun& b) {
  OnnxFigures f;
  for (const Result& r : b.results) {
    if (r.form != kOnnxForm) continue;
    ++f.found;
    if (r.message.rfind(kNoMappingPrefix, 0) == 0 || r.message.rfind(kUnloadablePrefix, 0) == 0) ++f.unmapped;
    switch (r.outcome) {
      case Outcome::Pass: ++f.passed; break;
      case Outcome::Fail:
      case Outcome::Error: ++f.failed; break;
      case Outcome::Crash: ++f.crashed; break;
      case Outcome::Unsupported: ++f.unsupported; break;
      case Outcome::ExpectedFailure: ++f.xfail; break;
    }
    if (r.note.find(kUnexpectedPassNote) != std::string::npos) ++f.unexpected;
  }
  return f;
}

std::string onnxFiguresText(const BackendRun& b) {
  const OnnxFigures f = onnxFiguresOf(b);
  std::string s = strCat(f.found, " found, ", f.found - f.unmapped, " mapped, ", f.passed, " passed, ", f.failed,
                         " failed, ", f.xfail, " expected failures, ", f.unsupported, " unsupported, ", f.crashed,
                         " crashed, in ", secondsText(b.seconds));
  if (f.unexpected) s += strCat("; ", f.unexpected, " listed as expected failures passed or are unsupported (notes)");
  return s;
}

// For ONNX node tests the kernel columns stay empty: a node may call
// several ops, and which kernels served them is not recorded, so --strict
// changes nothing for them (Note [ONNX node tests]).
void printOnnxSummary(std::ostream& out, const std::vector<BackendRun>& runs) {
  out << "\nONNX node tests:\n";
  for (const BackendRun& b : runs)
    if (b.skipped.empty()) out << "  " << b.label() << ": " << onnxFiguresText(b) << '\n';
}

// The table counts what the verdict counts (Counts): under --strict a
// FALLBACK column holds the forms that passed on a fallback, so that FAIL,
// FALLBACK, ERROR and CRASH add up to the failures in the footer.
void printSummary(std::ostream& out, const std::vector<BackendRun>& runs, bool strict) {
  const bool onnx = anyOnnx(runs);
  std::vector<std::string> columns{"BACKEND", "PROVIDER", "DEVICES", "DEVICE", onnx ? "TESTS" : "FORMS",
                                   "PASS",    "FAIL"};
  if (strict) columns.push_back("FALLBACK");
  columns.insert(columns.end(), {"ERROR", "CRASH"});
  if (onnx) columns.insert(columns.end(), {"UNSUPPORTED", "XFAIL"});
  for (KernelKind kind : kReportedKinds) columns.push_back(upperCase(kernelKindName(kind)));
  columns.push_back("TIME");
  Table table(std::move(columns));
  for (const BackendRun& b : runs) {
    if (!b.skipped.empty() || (b.results.empty() && !b.error.empty())) {
      table.addRow(
          {b.name, b.provider, std::to_string(b.devices), b.skipped.empty() ? std::to_string(b.device) : "-", "-"});
      table.addNote(b.skipped.empty() ? "failed: " + b.error : "skipped: " + b.skipped);
      continue;
    }
    Counts c = countsOf(b, strict);
    std::vector<std::string> row{b.name,
                                 b.provider,
                                 std::to_string(b.devices),
                                 std::to_string(b.device),
                                 std::to_string(c.forms),
                                 std::to_string(c.pass),
                                 std::to_string(c.fail)};
    if (strict) row.push_back(std::to_string(c.fallback));
    row.insert(row.end(), {std::to_string(c.error), std::to_string(c.crash)});
    if (onnx) row.insert(row.end(), {std::to_string(c.unsupported), std::to_string(c.xfail)});
    for (KernelKind kind : kReportedKinds) row.push_back(std::to_string(c.kernels[kind]));
    row.push_back(secondsText(b.seconds));
    table.addRow(std::move(row));
    if (!b.error.empty()) table.addNote("run aborted: " + b.error);
  }
  table.print(out);
  if (onnx) printOnnxSummary(out, runs);
  if (strict) {
    out << "\nFALLBACK: forms that passed on a fallback kernel (cpu_fallback, backend_fallback), failures under "
           "--strict\n";
  }
  bool header = false;
  for (const BackendRun& b : runs) {
    for (const Result& r : b.results) {
      if (!countsAsFailure(r, strict)) continue;
      if (!header) out << "\nfailures:\n";
      header = true;
      out << "  " << b.label() << "  " << r.op << " (" << r.form << ", " << kernelTextOf(r)
          << "): " << describeProblem(r, strict) << '\n';
    }
  }
  printDeclaredDtypes(out, runs);
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// The dtypes a result's kernel declares as a JSON list, or null for every dtype.
std::string dtypesJson(const Result& r) {
  if (!r.dtypes) return "null";
  std::string list;
  for (int t = 0; t < kNumScalarTypes; ++t) {
    if (r.dtypes->contains(static_cast<ScalarType>(t)))
      list += (list.empty() ? "" : ", ") + jsonString(scalarTypeName(static_cast<ScalarType>(t)));
  }
  return "[" + list + "]";
}

void writeJson(std::ostream& out, const std::vector<BackendRun>& runs, bool strict, bool passed) {
  out << "{\n  \"passed\": " << (passed ? "true" : "false") << ",\n  \"strict\": " << (strict ? "true" : "false")
      << ",\n  \"backends\": [";
  for (size_t i = 0; i < runs.size(); ++i) {
    const BackendRun& b = runs[i];
    const Counts c = countsOf(b, strict);
    out << (i ? ",\n    " : "\n    ") << "{\"name\": " << jsonString(b.name)
        << ", \"provider\": " << jsonString(b.provider) << ", \"devices\": " << b.devices
        << ", \"device\": " << b.device << ", \"status\": "
        << jsonString(!b.skipped.empty() ? "skipped"
                      : !b.error.empty() ? "aborted"
                                         : "run")
        << ", \"reason\": " << jsonString(!b.skipped.empty() ? b.skipped : b.error)
        << ", \"seconds\": " << jsonNumber(b.seconds) << ", \"forms\": " << c.forms << ", \"pass\": " << c.pass
        << ", \"fail\": " << c.fail << ", \"fallback\": " << c.fallback << ", \"error\": " << c.error
        << ", \"crash\": " << c.crash << ", \"unsupported\": " << c.unsupported << ", \"xfail\": " << c.xfail
        << ", \"failures\": " << c.failures << "}";
  }
  out << "\n  ],\n  \"results\": [";
  bool first = true;
  for (const BackendRun& b : runs) {
    for (const Result& r : b.results) {
      out << (first ? "\n    " : ",\n    ") << "{\"backend\": " << jsonString(r.backend) << ", \"device\": " << b.device
          << ", \"op\": " << jsonString(r.op) << ", \"form\": " << jsonString(r.form)
          << ", \"kernel\": " << jsonString(kernelNameOf(r)) << ", \"dtypes\": " << dtypesJson(r)
          << ", \"declined\": " << (r.declined ? jsonString(kernelKindName(*r.declined)) : "null")
          << ", \"note\": " << jsonString(r.note) << ", \"outcome\": " << jsonString(outcomeName(r.outcome))
          << ", \"counts_as_failure\": " << (countsAsFailure(r, strict) ? "true" : "false")
          << ", \"samples\": " << r.samples << ", \"sample\": " << jsonString(r.sample)
          << ", \"message\": " << jsonString(r.message) << ", \"max_abs_error\": " << jsonNumber(r.max_abs_error)
          << ", \"max_rel_error\": " << jsonNumber(r.max_rel_error) << "}";
      first = false;
    }
  }
  out << "\n  ]\n}\n";
}

// Text as XML character data or an attribute value: markup characters
// escaped, characters XML 1.0 cannot hold dropped.
std::string xmlText(const std::string& s) {
  std::string out;
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (c < 0x20 && ch != '\n' && ch != '\t' && ch != '\r') break;
        out += ch;
    }
  }
  return out;
}

// A backend's JUnit totals: a fail (or a fallback under --strict) is a
// failure; an error, a crash or an aborted run is an error; a skipped
// backend is one skipped test.
struct JunitCounts {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  void add(const JunitCounts& o) { tests += o.tests, failures += o.failures, errors += o.errors, skipped += o.skipped; }
};

JunitCounts junitCountsOf(const BackendRun& b, bool strict) {
  JunitCounts j;
  if (!b.skipped.empty()) {
    j.tests = j.skipped = 1;
    return j;
  }
  const Counts c = countsOf(b, strict);
  const int aborted = b.error.empty() ? 0 : 1;
  j.tests = c.forms + aborted;
  j.errors = c.error + c.crash + aborted;
  j.failures = c.failures - j.errors;
  j.skipped = c.unsupported + c.xfail;  // ONNX node tests no standard op expresses, or listed as failing
  return j;
}

void writeJunitCounts(std::ostream& out, const JunitCounts& j, double seconds) {
  out << " tests=\"" << j.tests << "\" failures=\"" << j.failures << "\" errors=\"" << j.errors << "\" skipped=\""
      << j.skipped << "\" time=\"" << seconds << "\">\n";
}

void writeJunit(std::ostream& out, const std::vector<BackendRun>& runs, bool strict) {
  JunitCounts total;
  double seconds = 0;
  for (const BackendRun& b : runs) {
    total.add(junitCountsOf(b, strict));
    seconds += b.seconds;
  }
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"backplane conformance\"";
  writeJunitCounts(out, total, seconds);
  for (const BackendRun& b : runs) {
    const bool aborted = !b.error.empty();
    out << "  <testsuite name=\"" << xmlText(b.label()) << "\"";
    writeJunitCounts(out, junitCountsOf(b, strict), b.seconds);
    const std::string cls = "conformance." + xmlText(b.label());
    if (!b.skipped.empty()) {
      out << "    <testcase classname=\"" << cls << "\" name=\"backend\"><skipped message=\"" << xmlText(b.skipped)
          << "\"/></testcase>\n";
    }
    if (aborted) {
      out << "    <testcase classname=\"" << cls << "\" name=\"worker\"><error message=\"" << xmlText(b.error)
          << "\"/></testcase>\n";
    }
    for (const Result& r : b.results) {
      out << "    <testcase classname=\"" << cls << "\" name=\"" << xmlText(r.op + " [" + r.form + "]") << "\">";
      if (countsAsFailure(r, strict)) {
        const bool is_error = r.outcome == Outcome::Error || r.outcome == Outcome::Crash;
        out << "<" << (is_error ? "error" : "failure") << " type=\"" << outcomeName(r.outcome) << "\" message=\""
            << xmlText(describeProblem(r, strict)) << "\">kernel: " << xmlText(kernelTextOf(r)) << "</"
            << (is_error ? "error" : "failure") << ">";
      } else if (r.outcome == Outcome::Unsupported || r.outcome == Outcome::ExpectedFailure) {
        out << "<skipped message=\"" << xmlText(describeProblem(r, strict)) << "\"/>";
      }
      out << "<system-out>kernel: " << xmlText(kernelTextOf(r)) << ", samples: " << r.samples
          << (r.note.empty() ? "" : ", note: " + xmlText(r.note)) << "</system-out></testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
}

// A matrix cell: what served the form and how it did.
// A message inside a Markdown table cell: no '|' and no line breaks.
std::string markdownCellText(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string markdownCell(const Result& r, bool strict) {
  const std::string kernel = kernelTextOf(r);
  switch (r.outcome) {
    case Outcome::Pass:
      if (!r.kernel) return "✅ pass";  // a device check
      return (countsAsFailure(r, strict) ? "❌ " : "✅ ") + kernel;
    case Outcome::Fail: return "❌ fail (" + kernel + ")";
    case Outcome::Error: return "⚠️ error (" + kernel + ")";
    case Outcome::Crash: return "💥 crash";
    case Outcome::Unsupported: return "➖ unsupported: " + markdownCellText(r.message);
    case Outcome::ExpectedFailure: return "☑️ expected failure";
  }
  return "?";
}

std::string markdownEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += "<br>";
    else
      out += c;
  }
  return out;
}

void writeMarkdown(std::ostream& out, const std::vector<BackendRun>& runs, bool strict, bool passed) {
  out << "# Backplane conformance\n\n**" << (passed ? "PASSED" : "FAILED") << "**"
      << (strict ? " (strict: a fallback counts as a failure)" : "") << "\n\n";
  const bool onnx = anyOnnx(runs);
  out << "| backend | provider | devices | device | " << (onnx ? "tests" : "forms") << " | pass | fail |"
      << (strict ? " fallback |" : "") << " error | crash |" << (onnx ? " unsupported | xfail |" : "") << " time |\n"
      << "|---|---|---|---|---|---|---|" << (strict ? "---|" : "") << "---|---|" << (onnx ? "---|---|" : "")
      << "---|\n";
  for (const BackendRun& b : runs) {
    if (!b.skipped.empty()) {
      out << "| " << markdownEscape(b.name) << " | " << markdownEscape(b.provider) << " | " << b.devices
          << " | - | skipped: " << markdownEscape(b.skipped) << " | | |" << (strict ? " |" : "") << (onnx ? " | |" : "")
          << " | | |\n";
      continue;
    }
    const Counts c = countsOf(b, strict);
    out << "| " << markdownEscape(b.name) << " | " << markdownEscape(b.provider) << " | " << b.devices << " | "
        << b.device << " | " << c.forms << " | " << c.pass << " | " << c.fail << " | ";
    if (strict) out << c.fallback << " | ";
    out << c.error << " | " << c.crash << " | ";
    if (onnx) out << c.unsupported << " | " << c.xfail << " | ";
    out << secondsText(b.seconds) << " |\n";
  }
  if (onnx) {
    out << "\nONNX node tests:\n\n";
    for (const BackendRun& b : runs)
      if (b.skipped.empty()) out << "- **" << markdownEscape(b.label()) << "**: " << onnxFiguresText(b) << "\n";
  }
  if (strict) out << "\n_fallback_: forms that passed on a fallback kernel, failures under `--strict`.\n";
  // The op x backend matrix, rows in the order they ran.
  std::vector<const BackendRun*> ran;
  for (const BackendRun& b : runs)
    if (b.skipped.empty()) ran.push_back(&b);
  std::vector<std::pair<std::string, std::string>> rows;  // (op, form)
  std::set<std::pair<std::string, std::string>> seen;
  std::map<std::pair<std::string, std::string>, std::map<std::string, const Result*>> cells;
  for (const BackendRun* b : ran) {
    for (const Result& r : b->results) {
      const std::pair<std::string, std::string> key{r.op, r.form};
      if (seen.insert(key).second) rows.push_back(key);
      cells[key][b->label()] = &r;
    }
  }
  if (!rows.empty()) {
    out << "\n| op | form |";
    for (const BackendRun* b : ran) out << ' ' << markdownEscape(b->label()) << " |";
    out << "\n|---|---|";
    for (size_t i = 0; i < ran.size(); ++i) out << "---|";
    out << '\n';
    for (const auto& key : rows) {
      out << "| `" << markdownEscape(key.first) << "` | " << key.second << " |";
      for (const BackendRun* b : ran) {
        auto it = cells[key].find(b->label());
        out << ' ' << (it == cells[key].end() ? "·" : markdownCell(*it->second, strict)) << " |";
      }
      out << '\n';
    }
  }
  bool header = false;
  for (const BackendRun& b : runs) {
    if (!b.error.empty()) {
      if (!header) out << "\n## Failures\n\n";
      header = true;
      out << "- **" << markdownEscape(b.label()) << "**: run aborted: " << markdownEscape(b.error) << '\n';
    }
    for (const Result& r : b.results) {
      if (!countsAsFailure(r, strict)) continue;
      if (!header) out << "\n## Failures\n\n";
      header = true;
      out << "- **" << markdownEscape(b.label()) << "** `" << markdownEscape(r.op) << "` (" << r.form << ", "
          << kernelTextOf(r) << "): " << markdownEscape(describeProblem(r, strict)) << '\n';
    }
  }
}

// Writes a report file through `write`; false (and a message) on failure.
template <typename Fn>
bool writeReport(const std::string& path, std::ostream& err, Fn write) {
  std::ofstream f(path);
  if (f) write(f);
  f.close();
  if (!f) {
    err << "backplane: error: cannot write the report " << path << ": " << std::strerror(errno) << '\n';
    return false;
  }
  return true;
}

}  // namespace

int runConformance(std::ostream& out, std::ostream& err, const std::string& self, const PluginSources& sources,
                   const ConformanceOptions& options) {
  // The backends: those named, or every device type with an interface.
  std::vector<Backend> all = activeBackends(true);
  std::vector<Backend> chosen;
  if (options.backends.empty()) {
    for (const Backend& b : all)
      if (b.iface) chosen.push_back(b);
  } else {
    for (const std::string& name : options.backends) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Backend& b) { return b.name == name; });
      if (it == all.end() || !it->iface) {
        std::string known;
        for (const Backend& b : all)
          if (b.iface) known += (known.empty() ? "" : ", ") + b.name;
        err << "backplane: error: no loaded plugin provides backend '" << name << "' (loaded: " << known
            << "; load one with --plugin PATH)\n";
        return 2;
      }
      chosen.push_back(*it);
    }
  }
  // A bad --ops pattern is a usage error, before any worker starts.
  try {
    const size_t selected = selectItems(DeviceType::CPU, options.ops, true, options.onnx).size();
    if (!options.onnx.empty() && selected == 0) {
      const size_t all = selectItems(DeviceType::CPU, "", true, options.onnx).size();
      err << "backplane: error: "
          << (all == 0 ? "no ONNX node test (a folder with a model.onnx) found under " + options.onnx +
                             "; scripts/fetch_onnx_tests.sh prints the corpus's folder"
                       : "--ops '" + options.ops + "' matches none of the " + std::to_string(all) +
                             " ONNX node tests under " + options.onnx + " (they are named onnx::<test folder>, " +
                             "e.g. onnx::test_add_bcast)")
          << '\n';
      return 2;
    }
  } catch (const Error& e) {
    err << "backplane: error: " << e.what() << '\n';
    return 2;
  }
  // Each backend's expected failures, read before anything runs.
  std::map<std::string, std::map<std::string, ExpectedFailure>> expected_by_backend;
  if (!options.onnx_expected.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(options.onnx_expected, ec)) {
      err << "backplane: error: --onnx-expected " << options.onnx_expected
          << " is not a folder (it holds <backend>.txt, e.g. conformance/onnx/expected_failures)\n";
      return 2;
    }
    for (const Backend& b : chosen) {
      const std::string path = options.onnx_expected + "/" + b.name + ".txt";
      absl::StatusOr<std::map<std::string, ExpectedFailure>> list = readExpectedFailures(path);
      if (!list.ok()) {
        err << "backplane: error: " << list.status().message() << '\n';
        return 2;
      }
      expected_by_backend[b.name] = *std::move(list);
    }
  }

  // Each backend's devices, counted before anything runs so that a --device
  // out of range stops the run at once.
  std::vector<BackendRun> counted;
  for (const Backend& b : chosen) {
    BackendRun run;
    run.name = b.name;
    run.provider = providerOf(b);
    run.device = options.device;
    try {
      run.devices = std::max(0, b.iface->deviceCount());
    } catch (const std::exception& e) {
      run.error = std::string("cannot count devices: ") + e.what();
    }
    if (run.error.empty() && run.devices == 0) {
      std::string reason = b.iface->unavailableReason();
      reason = "no devices" + (reason.empty() ? std::string() : " (" + reason + ")");
      // Named on the command line, a backend without devices is a failure;
      // found by itself, it is reported and skipped.
      if (options.backends.empty())
        run.skipped = reason;
      else
        run.error = reason;
    }
    if (run.error.empty() && run.skipped.empty() && !options.all_devices && options.device >= run.devices) {
      err << "backplane: error: --device " << options.device << " is out of range for backend '" << b.name
          << "', which has " << run.devices << (run.devices == 1 ? " device" : " devices") << " (" << b.name << ":0"
          << (run.devices > 1 ? " to " + b.name + ":" + std::to_string(run.devices - 1) : std::string())
          << "); pick a smaller --device, name other backends with --backend, or use --all-devices\n";
      return 2;
    }
    counted.push_back(std::move(run));
  }

  // One run per device the op specs run on; the device checks, which cover
  // every device of the type, go with the first.
  std::vector<BackendRun> runs;
  for (size_t i = 0; i < chosen.size(); ++i) {
    BackendRun& base = counted[i];
    if (!base.skipped.empty() || !base.error.empty()) {
      runs.push_back(std::move(base));
      continue;
    }
    const int first = options.all_devices ? 0 : options.device;
    const int last = options.all_devices ? base.devices - 1 : options.device;
    for (int d = first; d <= last; ++d) {
      BackendRun run = base;
      run.device = d;
      run.device_checks = d == first;
      if (!options.progress) err << "conformance: running " << run.label() << " (" << run.provider << ")\n";
      const Clock::time_point t0 = Clock::now();
      runBackend(run, chosen[i].type, self, sources, options, err);
      run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!options.onnx.empty() && !options.onnx_expected.empty()) {
        const std::string path = options.onnx_expected + "/" + run.name + ".txt";
        std::map<std::string, ExpectedFailure> expected = expected_by_backend[run.name];  // a copy per run
        std::vector<std::string> stale = applyExpectedFailures(run, expected, path);
        if (options.ops.empty() && !stale.empty()) {
          err << "conformance: warning: " << stale.size() << " entries of " << path << " name no node test found under "
              << options.onnx << " (first: " << stale.front() << ")\n";
        }
      }
      runs.push_back(std::move(run));
    }
  }

  int failures = 0;
  for (const BackendRun& b : runs) failures += countsOf(b, options.strict).failures;
  const bool passed = failures == 0;
  printSummary(out, runs, options.strict);
  out << "\nconformance: " << (passed ? "PASSED" : "FAILED") << " (" << failures
      << (failures == 1 ? " failure" : " failures") << (options.strict ? ", strict" : "") << ")\n";

  bool written = true;
  if (options.json) {
    written &= writeReport(*options.json, err, [&](std::ostream& f) { writeJson(f, runs, options.strict, passed); });
  }
  if (options.junit) {
    written &= writeReport(*options.junit, err, [&](std::ostream& f) { writeJunit(f, runs, options.strict); });
  }
  if (options.markdown) {
    written &=
        writeReport(*options.markdown, err, [&](std::ostream& f) { writeMarkdown(f, runs, options.strict, passed); });
  }
  return passed && written ? 0 : 1;
}

}  // namespace backplane::conformance
