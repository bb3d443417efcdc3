// backplane: inspect the plugins, devices and operators a Backplane host sees.
//
//   backplane [--plugin PATH]... [--no-default-plugins] plugins|devices|ops [--format text|markdown|json]
//
// Options may come before or after the command. Exit codes: 0 success (a
// plugin that fails to load is reported, not fatal), 1 an unexpected error,
// 2 a usage error.
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/dispatcher/plugin_registry.h"
#include "backplane/plugin_api.h"
#include "commands.h"

#ifndef BACKPLANE_VERSION_STRING
#define BACKPLANE_VERSION_STRING "unknown"
#endif

namespace backplane::cli {
namespace {

constexpr const char* kSynopsis =
    "usage: backplane [--plugin PATH]... [--no-default-plugins] <plugins|devices|ops> [--format text|markdown|json]";

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
         "  ops                 the operator x backend matrix: native, composite, fallback or missing\n"
         "\n"
         "options:\n"
         "  --plugin PATH         load the plugin library at PATH before the default sources (repeatable)\n"
         "  --no-default-plugins  skip BACKPLANE_PLUGIN_PATH and the default plugin directories\n"
         "  --format FORMAT       for ops: text (default), markdown (a GitHub table) or json\n"
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
};

// Returns an error message, or nothing when the command line parsed.
std::optional<std::string> parseArgs(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    // "--name=value" or "--name value" for options that take a value.
    auto value = [&](std::string_view name) -> std::optional<std::string> {
      if (a.size() > name.size() && a.substr(0, name.size()) == name && a[name.size()] == '=')
        return std::string(a.substr(name.size() + 1));
      if (a == name && i + 1 < argc) return std::string(argv[++i]);
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
      if (!v || v->empty()) return "option --plugin needs a value: the path of a plugin library";
      args.sources.explicit_paths.push_back(*v);
    } else if (takes("--format")) {
      std::optional<std::string> v = value("--format");
      if (!v) return "option --format needs a value: text, markdown or json";
      args.format = *v;
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
  if (args.command != "plugins" && args.command != "devices" && args.command != "ops")
    return usageError("unknown command '" + args.command + "' (commands: plugins, devices, ops)");

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

  loadPlugins(args.sources);
  int rc;
  if (args.command == "plugins") {
    rc = runPlugins(std::cout, args.sources);
  } else {
    warnAboutFailedPlugins(std::cerr);
    rc = args.command == "devices" ? runDevices(std::cout) : runOps(std::cout, format);
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
