// `backplane conformance`: certifies every backend op by op.
//
// Note [Conformance workers]
// Each backend runs in a child process, this executable started again as
// `conformance-worker` with the same plugin sources, so a kernel that
// crashes or hangs costs one op, not the run. The worker writes lines to a
// pipe: "begin\t<i>" before item i (a device check or an op spec with all
// its forms), one encoded Result per form (suite.h), "end\t<i>" after it and
// "done" at the end. The parent waits at most the time limit for each item.
// When the worker dies or runs past it, the item is reported as a crash
// (with the signal or exit code and the worker's last stderr lines) and a
// new worker resumes at the next item. Workers are started with exec, not
// fork alone, so a device runtime the parent initialised (CUDA counts its
// devices) is never inherited half-alive.
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
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/conformance/suite.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/dispatcher/plugin_registry.h"
#include "backplane/conformance/command.h"
#include "backplane/conformance/text_format.h"
#include "backplane/runtime.h"

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

void loadPlugins(const PluginSources& sources) {
  for (const std::string& path : sources.explicit_paths) (void)plugins().load(path);  // failures are listed
  if (sources.defaults) (void)plugins().loadAll();
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
  std::string provider;          // the plugin that registered the type
  int devices = 0;
  std::string skipped;           // why the backend was not run (no devices)
  std::string error;             // why the run could not finish (a failure)
  std::vector<Result> results;   // every form of every item, in order
  double seconds = 0;
};

bool countsAsFailure(const Result& r, bool strict) {
  if (r.outcome != Outcome::Pass) return true;
  return strict && r.kernel && isFallback(*r.kernel);
}

// The kinds the summary counts, a column each (a fallthrough never serves
// a backend key).
constexpr KernelKind kReportedKinds[] = {KernelKind::Native, KernelKind::Composite, KernelKind::BackendFallback,
                                         KernelKind::CpuFallback, KernelKind::Missing};

struct Counts {
  int forms = 0, pass = 0, fail = 0, error = 0, crash = 0, failures = 0;
  std::map<KernelKind, int> kernels;  // forms served by each kind (device checks have none)
};

Counts countsOf(const BackendRun& b, bool strict) {
  Counts c;
  for (const Result& r : b.results) {
    ++c.forms;
    switch (r.outcome) {
      case Outcome::Pass: ++c.pass; break;
      case Outcome::Fail: ++c.fail; break;
      case Outcome::Error: ++c.error; break;
      case Outcome::Crash: ++c.crash; break;
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

int runConformanceWorker(const std::string& backend, const std::string& ops, size_t first, int fd) {
  std::optional<DeviceType> type = DeviceTypeRegistry::global().find(backend);
  if (!type) {
    std::cerr << "backplane conformance-worker: no device type '" << backend << "' after loading the plugins\n";
    return 1;
  }
  const std::vector<Item> items = selectItems(*type, ops);
  for (size_t i = first; i < items.size(); ++i) {
    if (!writeAll(fd, "begin\t" + std::to_string(i) + "\n")) return 1;
    std::vector<Result> results;
    try {
      results = runItem(items[i], *type);
    } catch (const std::exception& e) {  // runSpec reports per form; this is a last resort
      Result r;
      r.op = items[i].name;
      r.form = "all";
      r.backend = backend;
      r.outcome = Outcome::Error;
      r.message = e.what();
      results = {r};
    }
    std::string lines;
    for (const Result& r : results) lines += encodeResult(r) + "\n";
    lines += "end\t" + std::to_string(i) + "\n";
    if (!writeAll(fd, lines)) return 1;
  }
  return writeAll(fd, "done\n") ? 0 : 1;
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
Worker spawnWorker(const std::string& self, const PluginSources& sources, const std::string& backend,
                   const std::string& ops, size_t first) {
  int results[2], errs[2];
  if (::pipe2(results, O_CLOEXEC) != 0 || ::pipe2(errs, O_CLOEXEC) != 0) {
    BP_THROW(kInternal, "cannot create a pipe for the conformance worker: ", std::strerror(errno));
  }
  std::vector<std::string> argv_s{self};
  for (const std::string& p : sources.explicit_paths) argv_s.insert(argv_s.end(), {"--plugin", p});
  if (!sources.defaults) argv_s.push_back("--no-default-plugins");
  argv_s.insert(argv_s.end(), {"conformance-worker", "--backend", backend, "--first", std::to_string(first),
                               "--result-fd", "3"});
  if (!ops.empty()) argv_s.insert(argv_s.end(), {"--ops", ops});
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

Result crashResult(const Item& item, const std::string& backend, std::string message) {
  Result r;
  r.op = item.name;
  r.form = item.spec ? "all" : "device";
  r.backend = backend;
  if (item.spec) r.kernel = kernelKindOn(item.spec->op, *DeviceTypeRegistry::global().find(backend));
  if (item.spec) setDeclaredDtypes(r, *DeviceTypeRegistry::global().find(backend));
  r.outcome = Outcome::Crash;
  r.message = std::move(message);
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

// Runs every item of one backend in workers; see Note [Conformance workers].
void runBackend(BackendRun& run, DeviceType type, const std::string& self, const PluginSources& sources,
                const ConformanceOptions& options, std::ostream& err) {
  const std::vector<Item> items = selectItems(type, options.ops);
  Progress progress(err, options.progress);
  const auto timeout = std::chrono::duration<double>(options.timeout_s);
  size_t next = 0;
  while (next < items.size()) {
    Worker w = spawnWorker(self, sources, run.name, options.ops, next);
    LineReader results(w.results_fd), errors(w.stderr_fd);
    Tail tail;
    constexpr size_t kNone = SIZE_MAX;
    size_t current = kNone;  // the item begun and not ended
    std::vector<Result> pending;
    bool done = false, timed_out = false;
    Clock::time_point started = Clock::now();
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
      for (const std::string& line : lines) {
        if (std::optional<size_t> i = indexAfter(line, "begin\t"); i && *i < items.size()) {
          current = *i;
          started = Clock::now();
          progress.show(run.name, *i, items.size(), items[*i].name);
        } else if (std::optional<size_t> e = indexAfter(line, "end\t"); e && current == *e) {
          for (Result& r : pending) run.results.push_back(std::move(r));
          pending.clear();
          next = *e + 1;
          current = kNone;
        } else if (line == "done") {
          done = true;
        } else if (std::optional<Result> r = decodeResult(line)) {
          pending.push_back(std::move(*r));
        } else {
          tail.add("(unreadable worker line) " + line);
        }
      }
    }
    if (timed_out) ::kill(w.pid, SIGKILL);
    int status = 0;
    while (::waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    // Whatever the worker wrote to stderr before it died.
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
                  " before running item " + std::to_string(next + 1) + " of " + std::to_string(items.size()) + output;
      break;
    }
    std::string why = timed_out ? std::string("ran past the time limit of ") + limit +
                                      " s (--timeout); the worker was killed"
                                : describeStatus(status) + " while running this op";
    why += output;
    run.results.push_back(crashResult(items[current], run.name, why));
    next = current + 1;
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
      out << "  " << b.name << "  " << r.op << " (" << r.form << "): " << kernelTextOf(r)
          << (r.note.empty() ? "" : "; note: " + r.note) << '\n';
    }
  }
}

void printSummary(std::ostream& out, const std::vector<BackendRun>& runs, bool strict) {
  std::vector<std::string> columns{"BACKEND", "PROVIDER", "DEVICES", "FORMS", "PASS", "FAIL", "ERROR", "CRASH"};
  for (KernelKind kind : kReportedKinds) columns.push_back(upperCase(kernelKindName(kind)));
  columns.push_back("TIME");
  Table table(std::move(columns));
  for (const BackendRun& b : runs) {
    if (!b.skipped.empty() || (b.results.empty() && !b.error.empty())) {
      table.addRow({b.name, b.provider, std::to_string(b.devices), "-"});
      table.addNote(b.skipped.empty() ? "failed: " + b.error : "skipped: " + b.skipped);
      continue;
    }
    Counts c = countsOf(b, strict);
    std::vector<std::string> row{b.name,
                                 b.provider,
                                 std::to_string(b.devices),
                                 std::to_string(c.forms),
                                 std::to_string(c.pass),
                                 std::to_string(c.fail),
                                 std::to_string(c.error),
                                 std::to_string(c.crash)};
    for (KernelKind kind : kReportedKinds) row.push_back(std::to_string(c.kernels[kind]));
    row.push_back(secondsText(b.seconds));
    table.addRow(std::move(row));
    if (!b.error.empty()) table.addNote("run aborted: " + b.error);
  }
  table.print(out);
  bool header = false;
  for (const BackendRun& b : runs) {
    for (const Result& r : b.results) {
      if (!countsAsFailure(r, strict)) continue;
      if (!header) out << "\nfailures:\n";
      header = true;
      out << "  " << b.name << "  " << r.op << " (" << r.form << ", " << kernelTextOf(r)
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
        << ", \"provider\": " << jsonString(b.provider) << ", \"devices\": " << b.devices << ", \"status\": "
        << jsonString(!b.skipped.empty() ? "skipped"
                      : !b.error.empty() ? "aborted"
                                         : "run")
        << ", \"reason\": " << jsonString(!b.skipped.empty() ? b.skipped : b.error)
        << ", \"seconds\": " << jsonNumber(b.seconds) << ", \"forms\": " << c.forms << ", \"pass\": " << c.pass
        << ", \"fail\": " << c.fail << ", \"error\": " << c.error << ", \"crash\": " << c.crash
        << ", \"failures\": " << c.failures << "}";
  }
  out << "\n  ],\n  \"results\": [";
  bool first = true;
  for (const BackendRun& b : runs) {
    for (const Result& r : b.results) {
      out << (first ? "\n    " : ",\n    ") << "{\"backend\": " << jsonString(r.backend)
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
  void add(const JunitCounts& o) {
    tests += o.tests, failures += o.failures, errors += o.errors, skipped += o.skipped;
  }
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
    out << "  <testsuite name=\"" << xmlText(b.name) << "\"";
    writeJunitCounts(out, junitCountsOf(b, strict), b.seconds);
    const std::string cls = "conformance." + xmlText(b.name);
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
      }
      out << "<system-out>kernel: " << xmlText(kernelTextOf(r)) << ", samples: " << r.samples
          << (r.note.empty() ? "" : ", note: " + xmlText(r.note)) << "</system-out></testcase>\n";
    }
    out << "  </testsuite>\n";
  }
  out << "</testsuites>\n";
}

// A matrix cell: what served the form and how it did.
std::string markdownCell(const Result& r, bool strict) {
  const std::string kernel = kernelTextOf(r);
  switch (r.outcome) {
    case Outcome::Pass:
      if (!r.kernel) return "✅ pass";  // a device check
      return (countsAsFailure(r, strict) ? "❌ " : "✅ ") + kernel;
    case Outcome::Fail: return "❌ fail (" + kernel + ")";
    case Outcome::Error: return "⚠️ error (" + kernel + ")";
    case Outcome::Crash: return "💥 crash";
  }
  return "?";
}

std::string markdownEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += "<br>";
    else out += c;
  }
  return out;
}

void writeMarkdown(std::ostream& out, const std::vector<BackendRun>& runs, bool strict, bool passed) {
  out << "# Backplane conformance\n\n**" << (passed ? "PASSED" : "FAILED") << "**"
      << (strict ? " (strict: a fallback counts as a failure)" : "") << "\n\n";
  out << "| backend | provider | devices | forms | pass | fail | error | crash | time |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
  for (const BackendRun& b : runs) {
    if (!b.skipped.empty()) {
      out << "| " << markdownEscape(b.name) << " | " << markdownEscape(b.provider) << " | " << b.devices
          << " | skipped: " << markdownEscape(b.skipped) << " | | | | | |\n";
      continue;
    }
    const Counts c = countsOf(b, strict);
    out << "| " << markdownEscape(b.name) << " | " << markdownEscape(b.provider) << " | " << b.devices << " | "
        << c.forms << " | " << c.pass << " | " << c.fail << " | " << c.error << " | " << c.crash << " | "
        << secondsText(b.seconds) << " |\n";
  }
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
      cells[key][b->name] = &r;
    }
  }
  if (!rows.empty()) {
    out << "\n| op | form |";
    for (const BackendRun* b : ran) out << ' ' << markdownEscape(b->name) << " |";
    out << "\n|---|---|";
    for (size_t i = 0; i < ran.size(); ++i) out << "---|";
    out << '\n';
    for (const auto& key : rows) {
      out << "| `" << markdownEscape(key.first) << "` | " << key.second << " |";
      for (const BackendRun* b : ran) {
        auto it = cells[key].find(b->name);
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
      out << "- **" << markdownEscape(b.name) << "**: run aborted: " << markdownEscape(b.error) << '\n';
    }
    for (const Result& r : b.results) {
      if (!countsAsFailure(r, strict)) continue;
      if (!header) out << "\n## Failures\n\n";
      header = true;
      out << "- **" << markdownEscape(b.name) << "** `" << markdownEscape(r.op) << "` (" << r.form << ", "
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
    (void)selectItems(DeviceType::CPU, options.ops);
  } catch (const Error& e) {
    err << "backplane: error: " << e.what() << '\n';
    return 2;
  }

  std::vector<BackendRun> runs;
  for (const Backend& b : chosen) {
    BackendRun run;
    run.name = b.name;
    run.provider = providerOf(b);
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
      if (options.backends.empty()) run.skipped = reason;
      else run.error = reason;
    }
    if (run.skipped.empty() && run.error.empty()) {
      if (!options.progress) err << "conformance: running " << b.name << " (" << run.provider << ")\n";
      const Clock::time_point t0 = Clock::now();
      runBackend(run, b.type, self, sources, options, err);
      run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    runs.push_back(std::move(run));
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
    written &= writeReport(*options.markdown, err,
                           [&](std::ostream& f) { writeMarkdown(f, runs, options.strict, passed); });
  }
  return passed && written ? 0 : 1;
}

}  // namespace backplane::conformance
