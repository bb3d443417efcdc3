// `backplane conformance`: certifies every backend op by op.
// It picks the backends and counts their devices, runs each in worker
// processes (workers.cc, Note [Conformance workers]), marks the expected
// failures of ONNX node tests (expected_failures.cc) and writes the reports
// (reports.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "backend_run.h"
#include "backplane/conformance/command.h"
#include "backplane/conformance/name_pattern.h"
#include "backplane/conformance/suite.h"
#include "backplane/conformance/text_format.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/runtime/runtime.h"
#include "expected_failures.h"
#include "reports.h"
#include "workers.h"

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
    if (!p.loaded)
      err << "backplane: warning: plugin " << visibleText(p.path) << " not loaded: " << visibleText(p.error) << '\n';
  }
}

namespace {

using Clock = std::chrono::steady_clock;

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

// Each report path must be writable and name its own file, checked before
// anything runs: a run of an hour must not end with "cannot write the
// report", nor two reports overwrite each other. Nothing is created or
// truncated here. False (and a message) when a path is refused.
bool checkReportPaths(const ConformanceOptions& options, std::ostream& err) {
  namespace fs = std::filesystem;
  struct Report {
    const char* option;
    std::string path;
    fs::path resolved;  // absolute, symlinks of its existing part followed, "." and ".." gone
    bool exists;
  };
  std::vector<Report> seen;
  const std::pair<const char*, const std::optional<std::string>*> given[] = {
      {"--json", &options.json}, {"--junit", &options.junit}, {"--markdown", &options.markdown}};
  for (const auto& [option, path] : given) {
    if (!*path) continue;
    const std::string shown = std::string(option) + " " + visibleText(**path);
    std::error_code ec;
    fs::path resolved = fs::absolute(**path, ec);
    if (!ec) {
      fs::path canonical = fs::weakly_canonical(resolved, ec);
      resolved = ec ? resolved.lexically_normal() : canonical;
    }
    const fs::file_status st = fs::status(resolved, ec);
    const bool exists = fs::exists(st);
    const std::string folder = resolved.parent_path().string();
    std::string why;
    if (fs::is_directory(st)) {
      why = "it is a folder; name a file in it";
    } else if (!exists && !fs::is_directory(resolved.parent_path(), ec)) {
      why = "its folder " + visibleText(folder) + " does not exist; create it first";
    } else if (::access(exists ? resolved.c_str() : folder.c_str(), exists ? W_OK : W_OK | X_OK) != 0) {
      why = std::string(exists ? "" : "its folder " + visibleText(folder) + ": ") + std::strerror(errno);
    }
    if (!why.empty()) {
      err << "backplane: error: cannot write the report " << shown << ": " << why << '\n';
      return false;
    }
    for (const Report& r : seen) {
      if (r.resolved == resolved || (exists && r.exists && fs::equivalent(r.resolved, resolved, ec))) {
        err << "backplane: error: " << shown << " names the same file as " << r.option << " " << visibleText(r.path)
            << ": give each report its own file\n";
        return false;
      }
    }
    seen.push_back({option, **path, resolved, exists});
  }
  return true;
}

}  // namespace

int runConformance(std::ostream& out, std::ostream& err, const std::string& self, const PluginSources& sources,
                   const ConformanceOptions& options) {
  if (!checkReportPaths(options, err)) return 2;
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
    // What the pattern selects on any of the chosen backends (their device
    // checks differ: device.streams exists only where there are streams).
    auto most = [&](const std::string& ops) {
      size_t n = 0;
      for (const Backend& b : chosen) n = std::max(n, selectItems(b.type, ops, true, options.onnx).size());
      return n;
    };
    const size_t selected = most(options.ops);
    if (options.onnx.empty() && selected == 0) {
      // A selection of nothing would pass: a typo must not make a CI job green.
      const size_t all = most("");
      err << "backplane: error: --ops " << quotedPattern(options.ops) << " matches none of the " << all
          << " op specs and device checks (ops are named as 'backplane ops' lists them, e.g. bp::add.Tensor, "
             "checks device.<name>); run 'backplane ops' to list the op names\n";
      return 2;
    }
    if (!options.onnx.empty() && selected == 0) {
      const size_t all = most("");
      err << "backplane: error: "
          << (all == 0 ? "no ONNX node test (a folder with a model.onnx) found under " + options.onnx +
                             "; scripts/fetch_onnx_tests.sh prints the corpus's folder"
                       : "--ops " + quotedPattern(options.ops) + " matches none of the " + std::to_string(all) +
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
      if (options.native && d == first) {
        // What --native chose, so that a plugin with no native kernel (or
        // one registered for another device type) is seen at once.
        const size_t specs = selectItems(chosen[i].type, options.ops, false, "", true).size();
        err << "conformance: --native: " << specs << (specs == 1 ? " op spec has" : " op specs have")
            << " a native kernel on " << run.name
            << (specs == 0 ? "; only the device checks run (the plugin's kernels are registered for another device "
                             "type, or it serves everything through fallbacks)"
                           : "")
            << '\n';
      }
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

  if (!options.full_errors) capMessages(runs);  // Note [Report text]
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
