// `backplane plugins`, `backplane devices` and `backplane ops`.
#include "commands.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backplane/conformance/text_format.h"
#include "backplane/core/device_interface.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/runtime/runtime.h"

namespace backplane::cli {

using conformance::capText;
using conformance::jsonString;
using conformance::Table;
using conformance::visibleText;

namespace {

std::string joined(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string noPluginReason(const std::string& type_name) {
  return "no plugin provides " + type_name + " (load one with --plugin PATH or BACKPLANE_PLUGIN_PATH)";
}

// --------------------------------------------------------------- plugins

std::string deviceSummary(const PluginStatus& p) {
  std::vector<std::string> parts;
  for (const PluginDeviceStatus& d : p.devices) parts.push_back(d.type_name + ": " + std::to_string(d.device_count));
  return parts.empty() ? "-" : joined(parts, ", ");
}

// BACKPLANE_PLUGIN_PATH entries loadAll() skipped (Note [Plugin path
// entries]): they were warnings on stderr, which a CI log may bury.
void describeSkippedSources(std::ostream& out) {
  std::vector<PluginSourceProblem> skipped = plugins().skippedSources();
  if (skipped.empty()) return;
  out << "\nBACKPLANE_PLUGIN_PATH entries skipped:\n";
  for (const PluginSourceProblem& s : skipped) out << "  " << s.entry << ": " << s.reason << '\n';
}

void describeSources(std::ostream& out, const PluginSources& sources) {
  out << "plugin sources, in order:\n";
  for (const std::string& p : sources.explicit_paths) out << "  --plugin " << p << '\n';
  if (!sources.defaults) {
    out << "  (BACKPLANE_PLUGIN_PATH and the default directories skipped: --no-default-plugins)\n";
    return;
  }
  const char* env = std::getenv("BACKPLANE_PLUGIN_PATH");
  out << "  BACKPLANE_PLUGIN_PATH=" << (env && *env ? env : "(unset)") << '\n';
  for (const std::string& d : PluginRegistry::defaultDirectories()) out << "  " << d << '\n';
}

// ------------------------------------------------------------------- ops

struct OpRow {
  std::string name;
  std::string schema;
  // An op with no tensor argument (a plugin's management op, such as
  // cuda::synchronize(int device)) dispatches to the CPU key whatever the
  // device: it runs on the host for every backend (Note [Host ops]).
  bool host = false;
  std::vector<KernelKind> cells;  // one per backend
  // Per backend: the dtypes its native kernel declares (Note [Declared
  // dtypes]; nullopt: every dtype), and what serves the others.
  std::vector<std::optional<DtypeSet>> declared;
  std::vector<KernelKind> declined;
};

// Note [Host ops]
// Dispatch picks a backend from the tensors an op is called with. An op
// that takes none (a plugin's management op: cuda::synchronize(int device),
// cuda::memory_stat(str name, int device)) always dispatches to the CPU key,
// where its plugin registers it, and names its device by argument: for it
// the matrix's per-backend kernel kinds say nothing (its cuda column would
// read cpu_fallback, though no tensor is ever copied). `backplane ops` shows
// such an op, when it has its CPU kernel, as `host` in every column.
bool takesNoTensor(const FunctionSchema& schema) {
  for (const Argument& a : schema.arguments())
    if (a.type.base == BaseType::Tensor) return false;
  return true;
}

// The kind as the matrix names it: kernelKindName, or "host" (Note [Host ops]).
std::string kindText(const OpRow& row, KernelKind kind) { return row.host ? "host" : kernelKindName(kind); }

// "native", or for a kernel that declares dtypes
// "native (float16, float32), cpu_fallback (others)".
std::string cellText(const OpRow& row, size_t i) {
  if (row.host || !row.declared[i]) return kindText(row, row.cells[i]);
  return std::string(kernelKindName(row.cells[i])) + " (" + row.declared[i]->str() + "), " +
         kernelKindName(row.declined[i]) + " (others)";
}

std::vector<OpRow> collectOps(const std::vector<Backend>& backends) {
  std::vector<OpRow> rows;
  for (const OperatorHandle& op : Dispatcher::singleton().definedOperators()) {
    OpRow row;
    row.name = op.entry().qualifiedName();
    try {
      row.schema = op.schema().toString();
      row.host = takesNoTensor(op.schema()) && op.kernelKind(DispatchKey::CPU) == KernelKind::Native;
    } catch (const std::exception&) {
      continue;  // undefined since definedOperators() returned it
    }
    for (const Backend& b : backends) {
      const DispatchKey key = backendKey(b.type);
      row.cells.push_back(op.kernelKind(key));
      row.declared.push_back(op.declaredDtypes(key));
      row.declined.push_back(op.declinedKind(key).value_or(KernelKind::Missing));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

constexpr const char* kLegendText =
    "native: a kernel registered for that backend; composite: a backend-agnostic kernel built from other ops;\n"
    "backend_fallback: a boxed fallback the backend registered; cpu_fallback: the CPU kernel (inputs copied to\n"
    "the host, results copied back); missing: calls on that backend fail. \"native (float32), cpu_fallback\n"
    "(others)\": the native kernel serves the dtypes it declares, the CPU fallback (or whatever is named) the rest.\n"
    "host: the op takes no tensor, so it runs on the host for every device (a plugin's management op, such as\n"
    "cuda::synchronize(int device), which names its device by argument).\n";

void printOpsText(std::ostream& out, const std::vector<Backend>& backends, const std::vector<OpRow>& rows) {
  std::vector<std::string> header{"OPERATOR"};
  std::vector<std::string> without_plugin;
  for (const Backend& b : backends) {
    header.push_back(b.name);
    if (!b.iface) without_plugin.push_back(b.name);
  }
  if (rows.empty()) {
    out << "no operators defined (backends: ";
    std::vector<std::string> names(header.begin() + 1, header.end());
    out << joined(names, ", ") << ")\n";
    return;
  }
  Table table(header);
  for (const OpRow& r : rows) {
    std::vector<std::string> cells{r.name};
    for (size_t i = 0; i < r.cells.size(); ++i) cells.push_back(cellText(r, i));
    table.addRow(std::move(cells));
  }
  table.print(out);
  out << '\n'
      << rows.size() << (rows.size() == 1 ? " operator" : " operators") << " x " << backends.size() << " backends";
  if (!without_plugin.empty()) out << " (no plugin loaded for " << joined(without_plugin, ", ") << ")";
  out << "\n" << kLegendText;
}

void printOpsMarkdown(std::ostream& out, const std::vector<Backend>& backends, const std::vector<OpRow>& rows) {
  out << "| operator |";
  for (const Backend& b : backends) out << ' ' << b.name << " |";
  out << "\n| --- |";
  for (size_t i = 0; i < backends.size(); ++i) out << " :---: |";
  out << '\n';
  for (const OpRow& r : rows) {
    out << "| `" << r.name << "` |";
    for (size_t i = 0; i < r.cells.size(); ++i) out << ' ' << cellText(r, i) << " |";
    out << '\n';
  }
  out << '\n';
  if (rows.empty()) out << "_No operators defined._\n\n";
  out << "Legend: **native** a kernel registered for that backend; **composite** a backend-agnostic kernel "
         "built from other ops; **backend_fallback** a boxed fallback the backend registered; **cpu_fallback** the "
         "CPU kernel (inputs copied to the host, results copied back); **missing** calls on that backend fail; "
         "**native (float32), cpu_fallback (others)** the native kernel serves the dtypes it declares, the CPU "
         "fallback (or whatever is named) the rest; **host** the op takes no tensor, so it runs on the host for "
         "every device (a plugin's management op, such as `cuda::synchronize(int device)`).\n";
  std::vector<std::string> without_plugin;
  for (const Backend& b : backends)
    if (!b.iface) without_plugin.push_back(b.name);
  if (!without_plugin.empty()) out << "\nNo plugin loaded for: " << joined(without_plugin, ", ") << ".\n";
}

void printOpsJson(std::ostream& out, const std::vector<Backend>& backends, const std::vector<OpRow>& rows) {
  out << "{\n  \"backends\": [";
  for (size_t i = 0; i < backends.size(); ++i) out << (i ? ", " : "") << jsonString(backends[i].name);
  out << "],\n  \"ops\": [";
  for (size_t r = 0; r < rows.size(); ++r) {
    const OpRow& row = rows[r];
    out << (r ? ",\n" : "\n") << "    {\"name\": " << jsonString(row.name) << ", \"schema\": " << jsonString(row.schema)
        << ", \"kernels\": {";
    for (size_t i = 0; i < backends.size(); ++i)
      out << (i ? ", " : "") << jsonString(backends[i].name) << ": " << jsonString(kindText(row, row.cells[i]));
    // Note [Declared dtypes]: the backends whose native kernel serves some
    // dtypes only, with those dtypes, and what serves the others.
    std::string dtypes, declined;
    for (size_t i = 0; i < backends.size(); ++i) {
      if (row.host || !row.declared[i]) continue;
      std::string list;
      for (int t = 0; t < kNumScalarTypes; ++t) {
        if (row.declared[i]->contains(static_cast<ScalarType>(t)))
          list += (list.empty() ? "" : ", ") + jsonString(std::string(scalarTypeName(static_cast<ScalarType>(t))));
      }
      dtypes += (dtypes.empty() ? "" : ", ") + jsonString(backends[i].name) + ": [" + list + "]";
      declined += (declined.empty() ? "" : ", ") + jsonString(backends[i].name) + ": " +
                  jsonString(kernelKindName(row.declined[i]));
    }
    out << "}, \"dtypes\": {" << dtypes << "}, \"declined\": {" << declined << "}}";
  }
  out << (rows.empty() ? "]\n" : "\n  ]\n") << "}\n";
}

// Kernels that serve no call because of their operator's definition
// (Note [Kernels for operators defined later]): the matrix cannot show them,
// since an operator that is not defined has no row and a kernel that does
// not fit the schema fills no cell.
void printInactiveKernels(std::ostream& out, bool markdown) {
  std::vector<Dispatcher::InactiveKernel> inactive = Dispatcher::singleton().inactiveKernels();
  if (inactive.empty()) return;
  out << (markdown ? "\nInactive kernels (registered, but serving no call):\n\n"
                   : "\ninactive kernels (registered, but serving no call):\n");
  for (const Dispatcher::InactiveKernel& k : inactive) {
    if (markdown)
      out << "- `" << k.op << "` " << dispatchKeyName(k.key);
    else
      out << "  " << k.op << ' ' << dispatchKeyName(k.key);
    if (!k.registrant.empty()) out << " [" << k.registrant << ']';
    out << ": " << k.reason << '\n';
  }
}

}  // namespace

int runPlugins(std::ostream& out, const PluginSources& sources) {
  std::vector<PluginStatus> all = plugins().plugins();
  if (all.empty()) {
    out << "no plugins found\n";
    describeSources(out, sources);
    describeSkippedSources(out);
    return 0;
  }
  // A failed attempt's error goes on its own line below the row, as text
  // a terminal shows as it is (Note [Report text]).
  // TYPED: of KERNELS, those called through their typed entry (Note [Typed
  // kernel entries]), so that a vendor sees whether typed_fn took.
  Table table({"NAME", "VERSION", "ABI", "DEVICES", "KERNELS", "TYPED", "STATUS", "PATH"});
  size_t failed = 0;
  for (const PluginStatus& p : all) {
    std::string abi =
        p.abi_major || p.abi_minor ? std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor) : "-";
    table.addRow({p.name.empty() ? "-" : p.name, p.version.empty() ? "-" : p.version, abi, deviceSummary(p),
                  p.loaded ? std::to_string(p.kernels) : "-", p.loaded ? std::to_string(p.typed_kernels) : "-",
                  p.loaded ? "loaded" : "FAILED", visibleText(p.path)});
    if (!p.loaded) {
      ++failed;
      table.addNote("error: " + visibleText(capText(p.error)));
    }
  }
  table.print(out);
  out << '\n'
      << all.size() << (all.size() == 1 ? " plugin" : " plugins") << ": " << all.size() - failed << " loaded, "
      << failed << " failed to load\n";
  describeSkippedSources(out);
  return 0;
}

// "79.6 GiB", "512.0 MiB", "4096 bytes".
std::string byteSize(uint64_t n) {
  char buf[32];
  if (n >= (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(n) / (1 << 30));
  else if (n >= (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
  return buf;
}

// "NVIDIA H100 80GB HBM3, 79.6 GiB, compute 9.0, 132 compute units",
// leaving out fields the device does not report; or why it could not say.
// multiprocessor_count is named for no vendor: CUDA's SMs, AMD's compute
// units, another accelerator's cores are all "compute units" (the host's
// are "threads").
std::string describeDevice(DeviceInterface& iface, Device d) {
  try {
    DeviceProperties p = iface.properties(d);
    std::vector<std::string> parts;
    if (!p.name.empty()) parts.push_back(p.name);
    if (p.total_memory) parts.push_back(byteSize(p.total_memory));
    if (p.compute_major || p.compute_minor)
      parts.push_back("compute " + std::to_string(p.compute_major) + "." + std::to_string(p.compute_minor));
    if (p.multiprocessor_count > 0)
      parts.push_back(std::to_string(p.multiprocessor_count) + (d.isCpu() ? " threads" : " compute units"));
    return joined(parts, ", ");
  } catch (const std::exception& e) {
    return std::string("cannot read properties: ") + e.what();
  }
}

int runDevices(std::ostream& out) {
  Table table({"DEVICE TYPE", "PROVIDER", "DEVICES", "STATUS"});
  for (const Backend& b : activeBackends(false)) {
    const std::string provider = providerOf(b);
    int count = 0;
    std::string status;
    if (!b.iface) {
      status = noPluginReason(b.name);
    } else {
      try {
        count = b.iface->deviceCount();
        if (count <= 0) {
          count = 0;
          status = b.iface->unavailableReason();
          if (status.empty()) status = "no devices found";
        } else {
          status = "available";
        }
      } catch (const std::exception& e) {
        count = 0;
        status = std::string("cannot count devices: ") + e.what();
      }
    }
    if (b.iface) {
      status += "; capabilities: " + b.iface->capabilities().str();  // Runtime::capabilities' words
    }
    table.addRow({b.name, provider, std::to_string(count), status});
    // Properties under STATUS, the one column whose width pads nothing.
    for (int i = 0; i < count; ++i) {
      table.addRow({"  " + b.name + ":" + std::to_string(i), "", "",
                    describeDevice(*b.iface, Device(b.type, static_cast<DeviceIndex>(i)))});
    }
  }
  table.print(out);
  return 0;
}

int runOps(std::ostream& out, OpsFormat format) {
  std::vector<Backend> backends = activeBackends(true);
  std::vector<OpRow> rows = collectOps(backends);
  switch (format) {
    case OpsFormat::Text:
      printOpsText(out, backends, rows);
      printInactiveKernels(out, /*markdown=*/false);
      break;
    case OpsFormat::Markdown:
      printOpsMarkdown(out, backends, rows);
      printInactiveKernels(out, /*markdown=*/true);
      break;
    case OpsFormat::Json: printOpsJson(out, backends, rows); break;
  }
  return 0;
}

}  // namespace backplane::cli
