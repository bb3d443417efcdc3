// backplane: inspect the plugins, devices and operators a Backplane host sees.
//
//   backplane [--plugin PATH]... [--no-default-plugins] plugins|devices|ops [--format text|markdown|json]
//   backplane [--plugin PATH]... [--no-default-plugins] ops --schemas [REGEX] [--format text|markdown|json]
//   backplane [--plugin PATH]... [--no-default-plugins] conformance [--backend NAME]... [--ops REGEX]
//             [--native] [--device N | --all-devices] [--strict] [--timeout SECONDS] [--json FILE]
//             [--junit FILE] [--markdown FILE] [--full-errors]
//
// Options may come before or after the command. Exit codes: 0 success (a
// plugin found in a default source that fails to load is a warning, not
// fatal; for conformance, every op passed), 1 an unexpected error, a
// conformance failure or a plugin named with --plugin that did not load
// (every command: a run must not pass without the plugin it was told to
// test), 2 a usage error.
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/conformance/text_format.h"
#include "backplane/plugin_api.h"
#include "backplane/runtime/plugin_registry.h"
#include "commands.h"
#include "schemas.h"

#ifndef BACKPLANE_VERSION_STRING
#define BACKPLANE_VERSION_STRING "unknown"
#endif

namespace backplane::cli {
namespace {

constexpr const char* kSynopsis =
    "usage: backplane [--plugin PATH]... [--no-default-plugins] <plugins|devices|ops> [--format text|markdown|json]\n"
    "       backplane [--plugin PATH]... [--no-default-plugins] ops --schemas [REGEX] [--format ...]\n"
    "       backplane [--plugin PATH]... [--no-default-plugins] conformance [--backend NAME]... [--ops REGEX]\n"
    "                 [--native] [--device N | --all-devices] [--strict] [--timeout SECONDS] [--json FILE]\n"
    "                 [--junit FILE] [--markdown FILE] [--full-errors] [--onnx DIR [--onnx-expected DIR]]";

void printHelp(std::ostream& out) {
  out << kSynopsis << "\n"
      << "       backplane --help | --version\n"
         "\n"
         "Shows what a Backplane host sees: the plugins it loads, the devices they provide, and which\n"
         "kernel serves each operator on each backend.\n"
         "\n"
         "commands:\n"
         "  plugins             every plugin load attempt: name, version, ABI, device types, path, status\n"
         "  devices             every device type, the plugin providing it, and its devices\n"
         "  ops                 the operator x backend matrix: native, composite, backend_fallback,\n"
         "                      cpu_fallback or missing\n"
         "  ops --schemas [REGEX] for each op whose name REGEX (RE2) matches (every op without one): its schema,\n"
         "                      the dtypes each argument accepts, the C++ kernel a plugin writes for it,\n"
         "                      and how it differentiates (its derivative formulas, docs/autograd.md)\n"
         "  conformance         certify backends: device API checks, then every op spec against its\n"
         "                      double-precision reference; each backend runs in a child process, so\n"
         "                      a crash or a hang costs one form of one op (reported with its sample);\n"
         "                      exit 0 only if nothing failed\n"
         "\n"
         "options:\n"
         "  --plugin PATH         load the plugin library at PATH before the default sources (repeatable);\n"
         "                        if it does not load, the command fails (exit 1) after saying why\n"
         "  --no-default-plugins  skip BACKPLANE_PLUGIN_PATH and the default plugin directories\n"
         "  --format FORMAT       for ops: text (default), markdown (a GitHub table) or json\n"
         "\n"
         "conformance options:\n"
         "  --backend NAME        certify only this backend (repeatable; default: every backend with devices)\n"
         "  --ops REGEX           only the ops (and device.* checks) whose names REGEX (RE2 syntax) matches\n"
         "                        anywhere; a REGEX that matches nothing is an error\n"
         "  --native              only the op specs with a native kernel on the backend (its plugin's own\n"
         "                        kernels; every form of such an op runs), plus the device checks: what the\n"
         "                        plugin serves itself, with no regex; with --strict, a certification of it\n"
         "  --device N            run the op specs on device N of each backend (default 0)\n"
         "  --all-devices         run the op specs on every device of each backend, one run per device\n"
         "  --strict              count an op served by a fallback (cpu_fallback, backend_fallback) as a failure\n"
         "                        (the summary's FALLBACK column)\n"
         "  --timeout SECONDS     time limit per op before it is reported as a crash (default 300,\n"
         "                        at most 2592000: 30 days)\n"
         "  --json FILE           write every result as JSON (each report its own FILE, checked before the run;\n"
         "                        --json=FILE for a name that starts with '--')\n"
         "  --junit FILE          write JUnit XML for CI systems\n"
         "  --onnx DIR            run ONNX's node tests found under DIR (model.onnx + test_data_set_N/) instead\n"
         "                        of the op specs, each through the ONNX -> standard op mapping; a node no\n"
         "                        standard op expresses is 'unsupported', with the reason (not a failure);\n"
         "                        --ops then matches the tests' names, onnx::<test folder>\n"
         "  --onnx-expected DIR   the node tests expected to fail: DIR/<backend>.txt, '<test> <reason>' a line;\n"
         "                        a listed failure counts as 'xfail', a listed test that passes gets a note\n"
         "  --markdown FILE       write the op x backend matrix as Markdown\n"
         "  --full-errors         keep every message whole (by default one past 4 KiB is cut, saying how much)\n"
         "\n"
         "other options:\n"
         "  -h, --help            show this help\n"
         "  --version             show the version and the plugin ABI this host speaks\n"
         "\n"
         "Default plugin sources: BACKPLANE_PLUGIN_PATH (colon-separated files or directories), then\n";
  for (const std::string& d : PluginRegistry::defaultDirectories()) out << "  " << d << '\n';
}

int usageError(const std::string& what) {
  std::cerr << "backplane: error: " << what << "\n" << kSynopsis << "\n(run 'backplane --help' for details)\n";
  return 2;
}

struct Args {
  PluginSources sources;
  bool help = false;
  bool version = false;
  std::string command;
  std::optional<std::string> format;
  std::optional<std::string> schemas;  // ops --schemas [REGEX]: the regex, "" for every op
  ConformanceOptions conformance;
  std::vector<std::string> conformance_flags;  // the conformance options given, for usage errors
  // conformance-worker (internal, Note [Conformance workers]).
  std::optional<std::string> first, first_form, result_fd;
  bool no_device_checks = false;
  bool device_given = false;  // --device
};

// A whole decimal number in [0, INT_MAX], or nothing.
std::optional<int> parseIndex(const std::string& s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// Returns an error message, or nothing when the command line parsed.
std::optional<std::string> parseArgs(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    // "--name=value" or "--name value" for options that take a value.
    // A separate value that looks like an option ("--json --strict") is
    // refused: taking it would write a file named "--strict" and drop the
    // option. "--json=--strict" still names such a file.
    std::optional<std::string> refused;
    auto value = [&](std::string_view name) -> std::optional<std::string> {
      if (a.size() > name.size() && a.substr(0, name.size()) == name && a[name.size()] == '=')
        return std::string(a.substr(name.size() + 1));
      if (a == name && i + 1 < argc) {
        const std::string_view next = argv[i + 1];
        if (next.size() > 2 && next.substr(0, 2) == "--") {
          refused = "option " + std::string(name) + " needs a value, not the option '" + std::string(next) +
                    "' (for a value that starts with '--', write " + std::string(name) + "=" + std::string(next) + ")";
          return std::nullopt;
        }
        return std::string(argv[++i]);
      }
      return std::nullopt;
    };
    auto takes = [&](std::string_view name) {
      return a == name || (a.size() > name.size() && a.substr(0, name.size()) == name && a[name.size()] == '=');
    };
    if (a == "-h" || a == "--help") {
      args.help = true;
    } else if (a == "--version") {
      args.version = true;
    } else if (a == "--no-default-plugins") {
      args.sources.defaults = false;
    } else if (takes("--plugin")) {
      std::optional<std::string> v = value("--plugin");
      if (refused) return *refused;
      if (!v || v->empty()) return "option --plugin needs a value: the path of a plugin library";
      args.sources.explicit_paths.push_back(*v);
    } else if (takes("--format")) {
      std::optional<std::string> v = value("--format");
      if (refused) return *refused;
      if (!v) return "option --format needs a value: text, markdown or json";
      args.format = *v;
    } else if (takes("--schemas")) {
      // The regex is optional: "--schemas=R", or "--schemas R" after the
      // command (an argument before it is the command).
      if (a.size() > 9)
        args.schemas = std::string(a.substr(10));
      else if (!args.command.empty() && i + 1 < argc && argv[i + 1][0] != '-')
        args.schemas = argv[++i];
      else
        args.schemas = "";
    } else if (a == "--native") {
      args.conformance.native = true;
      args.conformance_flags.emplace_back(a);
    } else if (a == "--strict") {
      args.conformance.strict = true;
      args.conformance_flags.emplace_back(a);
    } else if (a == "--full-errors") {
      args.conformance.full_errors = true;
      args.conformance_flags.emplace_back(a);
    } else if (a == "--all-devices") {
      args.conformance.all_devices = true;
      args.conformance_flags.emplace_back(a);
    } else if (a == "--no-device-checks") {
      args.no_device_checks = true;
      args.conformance_flags.emplace_back(a);
    } else if (takes("--device")) {
      std::optional<std::string> v = value("--device");
      if (refused) return *refused;
      if (!v || v->empty()) return "option --device needs a value: a device index (0, 1, ...)";
      std::optional<int> d = parseIndex(*v);
      if (!d) return "option --device needs a device index (0, 1, ...), not '" + *v + "'";
      args.conformance.device = *d;
      args.device_given = true;
      args.conformance_flags.emplace_back("--device");
    } else if (takes("--backend") || takes("--ops") || takes("--timeout") || takes("--json") || takes("--junit") ||
               takes("--markdown") || takes("--first") || takes("--first-form") || takes("--result-fd") ||
               takes("--onnx") || takes("--onnx-expected")) {
      const std::string name(a.substr(0, a.find('=')));
      std::optional<std::string> v = value(name);
      if (refused) return *refused;
      if (!v || v->empty()) return "option " + name + " needs a value";
      args.conformance_flags.push_back(name);
      if (name == "--backend")
        args.conformance.backends.push_back(*v);
      else if (name == "--ops")
        args.conformance.ops = *v;
      else if (name == "--json")
        args.conformance.json = *v;
      else if (name == "--junit")
        args.conformance.junit = *v;
      else if (name == "--markdown")
        args.conformance.markdown = *v;
      else if (name == "--onnx")
        args.conformance.onnx = *v;
      else if (name == "--onnx-expected")
        args.conformance.onnx_expected = *v;
      else if (name == "--first")
        args.first = *v;
      else if (name == "--first-form")
        args.first_form = *v;
      else if (name == "--result-fd")
        args.result_fd = *v;
      else {
        char* end = nullptr;
        const double t = std::strtod(v->c_str(), &end);
        if (*end != '\0' || !(t > 0 && t <= conformance::kMaxTimeoutSeconds)) {
          return "option --timeout needs a positive number of seconds, at most " +
                 std::to_string(static_cast<long>(conformance::kMaxTimeoutSeconds)) + " (30 days), not '" + *v + "'";
        }
        args.conformance.timeout_s = t;
      }
    } else if (a.size() > 1 && a[0] == '-') {
      return "unknown option '" + std::string(a) + "'";
    } else if (args.command.empty()) {
      args.command = a;
    } else {
      return "unexpected argument '" + std::string(a) + "' after command '" + args.command + "'";
    }
  }
  return std::nullopt;
}

int run(int argc, char** argv) {
  Args args;
  if (std::optional<std::string> err = parseArgs(argc, argv, args)) return usageError(*err);
  if (args.help || args.command == "help") {
    printHelp(std::cout);
    return 0;
  }
  if (args.version) {
    std::cout << "backplane " << BACKPLANE_VERSION_STRING << " (plugin ABI " << BP_ABI_MAJOR << "." << BP_ABI_MINOR
              << ")\n";
    return 0;
  }
  if (args.command.empty()) return usageError("no command given");
  if (args.command != "plugins" && args.command != "devices" && args.command != "ops" &&
      args.command != "conformance" && args.command != "conformance-worker")
    return usageError("unknown command '" + args.command + "' (commands: plugins, devices, ops, conformance)");
  if (args.command != "conformance" && args.command != "conformance-worker" && !args.conformance_flags.empty())
    return usageError("option " + args.conformance_flags.front() + " applies only to the 'conformance' command");
  if (args.conformance.native && !args.conformance.onnx.empty())
    return usageError(
        "option --native selects op specs by their kernels; ONNX node tests (--onnx) are chosen with --ops");
  if (!args.conformance.onnx_expected.empty() && args.conformance.onnx.empty())
    return usageError("option --onnx-expected lists failures of ONNX node tests: give --onnx DIR too");
  if (args.command == "conformance" && (args.first || args.first_form || args.result_fd || args.no_device_checks))
    return usageError(
        "options --first, --first-form, --result-fd and --no-device-checks are internal to "
        "conformance-worker");
  if (args.device_given && args.conformance.all_devices)
    return usageError("options --device and --all-devices exclude each other (--all-devices runs every device)");

  if (args.schemas && args.command != "ops") return usageError("option --schemas applies only to the 'ops' command");

  OpsFormat format = OpsFormat::Text;
  if (args.format) {
    if (args.command != "ops") return usageError("option --format applies only to the 'ops' command");
    if (*args.format == "text") {
      format = OpsFormat::Text;
    } else if (*args.format == "markdown" || *args.format == "md") {
      format = OpsFormat::Markdown;
    } else if (*args.format == "json") {
      format = OpsFormat::Json;
    } else {
      return usageError("unknown format '" + *args.format + "' for --format (use text, markdown or json)");
    }
  }

  // A plugin named with --plugin must load: a run without it would certify
  // or list something else than what was asked (and pass).
  const std::vector<PluginLoadFailure> failed = loadPlugins(args.sources);
  auto reportFailedPlugins = [&] {
    for (const PluginLoadFailure& f : failed) {
      std::cerr << "backplane: error: the plugin named with --plugin " << conformance::visibleText(f.path)
                << " did not load: " << conformance::visibleText(conformance::capText(f.reason)) << '\n';
    }
    if (!failed.empty() && args.command != "plugins")
      std::cerr << "backplane: error: stopping: fix the plugin or its path, or leave out --plugin\n";
  };
  int rc;
  if (args.command == "conformance-worker") {
    std::optional<int> first = args.first ? parseIndex(*args.first) : std::nullopt;
    std::optional<int> first_form = parseIndex(args.first_form.value_or("0"));
    std::optional<int> fd = args.result_fd ? parseIndex(*args.result_fd) : std::nullopt;
    if (args.conformance.backends.size() != 1 || !first || !first_form || !fd)
      return usageError("conformance-worker needs --backend, --first and --result-fd");
    if (!failed.empty()) {
      reportFailedPlugins();
      return 1;
    }
    WorkerTask task;
    task.backend = args.conformance.backends[0];
    task.ops = args.conformance.ops;
    task.native = args.conformance.native;
    task.onnx = args.conformance.onnx;
    task.device = args.conformance.device;
    task.device_checks = !args.no_device_checks;
    task.first = static_cast<size_t>(*first);
    task.first_form = static_cast<size_t>(*first_form);
    return runConformanceWorker(task, *fd);
  }
  if (args.command == "plugins") {
    rc = runPlugins(std::cout, args.sources);
    std::cout.flush();
    if (!failed.empty()) {
      reportFailedPlugins();
      rc = 1;
    }
  } else if (!failed.empty()) {
    reportFailedPlugins();
    return 1;
  } else if (args.command == "conformance") {
    warnAboutFailedPlugins(std::cerr);
    args.conformance.progress = ::isatty(STDERR_FILENO) == 1;
    rc = runConformance(std::cout, std::cerr, "/proc/self/exe", args.sources, args.conformance);
  } else {
    warnAboutFailedPlugins(std::cerr);
    rc = args.command == "devices" ? runDevices(std::cout)
         : args.schemas            ? runOpsSchemas(std::cout, std::cerr, format, *args.schemas)
                                   : runOps(std::cout, format);
  }
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "backplane: error: cannot write the output\n";
    return 1;
  }
  return rc;
}

}  // namespace
}  // namespace backplane::cli

int main(int argc, char** argv) {
  try {
    return backplane::cli::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "backplane: error: " << e.what() << '\n';
    return 1;
  }
}
