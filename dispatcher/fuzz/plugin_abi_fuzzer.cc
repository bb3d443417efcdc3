// Fuzz target fuzz_plugin_abi: the plugin ABI structs as the host receives
// them from a plugin. The input drives a fake plugin (abi_fuzz_plugin.cc, a
// real library loaded through plugins().load like any plugin) that sends a
// fuzzed BP_PluginInfo (struct_size, magic, ABI version, name) and runs a
// fuzzed init script: device tables and kernel tables with fuzzed
// struct_size, NULL slots, names, device counts, DLPack types, dtype masks,
// C++ signatures, schemas and op names, each registration's error returned
// or ignored, and an init that succeeds, fails or throws. What it checks:
// - A load either succeeds, or fails with an error that names the plugin
//   library (the status message), and then leaves nothing behind: the
//   dispatcher's state (every operator's registrations and table, the
//   kernels waiting for a definition, Dispatcher::checkInvariants) and the
//   active device types are exactly what they were before the load, and no
//   plugin of its name is loaded.
// - A plugin that loaded reports sane device counts, serves what it
//   registered (every operator it defined is called with CPU tensors, and
//   each return has the kind its schema says or the call fails with
//   backplane::Error), allocates on its devices or fails with an Error, and
//   unloads completely (same state as before, shutdown ran once, every
//   allocation it made is freed).
// - After any load attempt that reached init, a good plugin loads, works
//   and unloads (nothing the failed attempt did blocks it).
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "abi_fuzz_plugin.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"

namespace {

using namespace backplane;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_plugin_abi: %s\n", what.c_str());
  std::abort();
}
#define FUZZ_CHECK(cond, what) \
  do {                         \
    if (!(cond)) fail(what);   \
  } while (0)

using Counts = FuzzAbiPluginCounts;

// Schemas, op names and C++ signatures the fake plugin's string fields pick
// from (besides NULL and raw bytes): valid ones, so that registrations get
// past the first checks, and near misses.
const char* const kSchemas[] = {
    "fuzzabi::unary(Tensor x) -> Tensor",
    "fuzzabi::binary(Tensor a, Tensor b) -> Tensor",
    "fuzzabi::count(Tensor x) -> int",
    "fuzzabi::pair(Tensor x) -> (Tensor, Tensor)",
    "fuzzabi::maybe(Tensor? x, int n=1) -> Tensor?",
    "fuzzabi::flag(Tensor x, bool b, float f) -> bool",
    "fuzzabi::none(Tensor(a!) x) -> ()",
    "bp::neg(Tensor self) -> Tensor",
    "fuzzabi::unary(Tensor x) -> (",
    "fuzzabi::Unary(Tensor x) -> Tensor",
    "fuzzabi::list(Tensor[] xs) -> Tensor",
};
const char* const kOtherStrings[] = {
    "fuzzabi::unary",
    "fuzzabi::binary",
    "fuzzabi::count",
    "fuzzabi::pair",
    "fuzzabi::maybe",
    "fuzzabi::flag",
    "fuzzabi::none",
    "fuzzabi::later",
    "neg",
    "bp::neg",
    "fuzzabi::list",
    "abs",
    "fuzzdev",
    "fuzzdev2",
    "cpu",
    "cuda",
    "Bad-Name",
    "",
    "fuzzabi",
    "fuzzabi2",
    "a_very_long_plugin_or_device_name_that_is_over_thirty_one_characters_long",
    "(Tensor) -> Tensor",
    "(Tensor, Tensor) -> Tensor",
    "(Tensor) -> int64_t",
};

struct Setup {
  std::string path = BACKPLANE_ABI_FUZZ_PLUGIN_PATH;
  FuzzAbiPluginSetScriptFn set_script = nullptr;
  FuzzAbiPluginCountsFn counts = nullptr;
  std::vector<std::string> strings;
  std::vector<const char*> string_ptrs;
  std::set<std::string> baseline_ops;
  std::string baseline;

  Setup() {
    // Held open for the whole run, so the fake plugin's state and its
    // functions outlive each load and unload through the registry.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    FUZZ_CHECK(handle != nullptr, std::string("cannot dlopen the fake plugin: ") + dlerror());
    set_script = reinterpret_cast<FuzzAbiPluginSetScriptFn>(dlsym(handle, "fuzz_abi_plugin_set_script"));
    counts = reinterpret_cast<FuzzAbiPluginCountsFn>(dlsym(handle, "fuzz_abi_plugin_counts"));
    FUZZ_CHECK(set_script && counts, "the fake plugin lacks its fuzz entry points");
    for (const char* s : kSchemas) strings.emplace_back(s);
    for (const char* s : kOtherStrings) strings.emplace_back(s);
    // The exact C++ signatures of the valid schemas, as the host spells them.
    for (const char* s : kSchemas) {
      absl::StatusOr<FunctionSchema> schema = FunctionSchema::parse(s);
      if (schema.ok()) strings.push_back(cppSignatureForSchema(*schema));
    }
    for (const std::string& s : strings) string_ptrs.push_back(s.c_str());
    for (const OperatorHandle& op : Dispatcher::singleton().definedOperators())
      baseline_ops.insert(op.entry().qualifiedName());
    baseline = snapshot();
  }

  // What a load that failed, or a load and unload, must leave unchanged:
  // every defined operator's schema and the kind (and declared dtypes) of
  // its kernel at each dispatch key, the kernels waiting for a definition
  // and the active device types. (Dispatcher::dumpState says the same with
  // names, but a released device type keeps its name there.)
  static std::string snapshot() {
    Dispatcher& d = Dispatcher::singleton();
    absl::Status invariants = d.checkInvariants();
    FUZZ_CHECK(invariants.ok(), "dispatcher invariants broken: " + std::string(invariants.message()));
    std::string s;
    for (const OperatorHandle& op : d.definedOperators()) {
      s += op.schema().toString() + ":";
      for (int k = 0; k < kNumDispatchKeys; ++k) {
        const auto key = static_cast<DispatchKey>(k);
        const KernelKind kind = op.kernelKind(key);
        if (kind == KernelKind::Missing) continue;
        s += " " + std::to_string(k) + "=" + std::to_string(static_cast<int>(kind));
        if (std::optional<DtypeSet> dtypes = op.declaredDtypes(key)) s += "/" + std::to_string(dtypes->mask());
      }
      s += "\n";
    }
    for (const Dispatcher::InactiveKernel& k : d.inactiveKernels())
      s += "inactive " + k.op + " " + std::to_string(static_cast<int>(k.key)) + " " + k.registrant + "\n";
    s += "device types:";
    for (const std::string& n : DeviceTypeRegistry::global().activeNames()) s += " " + n;
    return s;
  }
};

void checkUnchanged(const Setup& setup, const char* after) {
  const std::string now = Setup::snapshot();
  if (now == setup.baseline) return;
  std::fprintf(stderr, "---- before ----\n%s\n---- after ----\n%s\n", setup.baseline.c_str(), now.c_str());
  fail(std::string("state changed after ") + after);
}

bool notLoaded(const std::string& name) {
  absl::Status s = plugins().unload(name);
  return s.code() == absl::StatusCode::kNotFound;
}

// An argument for `a` when the target can make one.
std::optional<IValue> argumentFor(const Argument& a, const Tensor& x) {
  if (a.type.is_list) return std::nullopt;
  switch (a.type.base) {
    case BaseType::Tensor: return IValue(x);
    case BaseType::Int: return IValue(int64_t{1});
    case BaseType::Float: return IValue(1.5);
    case BaseType::Bool: return IValue(true);
    default: return std::nullopt;
  }
}

bool returnHasSchemaKind(const Argument& r, const IValue& v) {
  if (v.isNone()) return r.type.is_optional;
  if (r.type.is_list) return true;  // not checked here
  switch (r.type.base) {
    case BaseType::Tensor: return v.isTensor() && v.toTensor().defined();
    case BaseType::Int: return v.isInt();
    case BaseType::Float: return v.isDouble();
    case BaseType::Bool: return v.isBool();
    default: return true;
  }
}

// Calls `op` boxed with `x` for each tensor argument, and unboxed where its
// signature is (Tensor) -> Tensor (a kernel's typed entry, if it has one:
// Note [Typed kernel entries]).
void callWith(const OperatorHandle& op, const Tensor& x) {
  const FunctionSchema& schema = op.schema();
  if (cppSignatureForSchema(schema) == "(Tensor) -> Tensor") {
    try {
      const Tensor y = op.typed<Tensor(const Tensor&)>().call(x);
      FUZZ_CHECK(y.defined(), op.entry().qualifiedName() + " returned an undefined tensor to a typed call");
    } catch (const Error&) {
      // a kernel that fails, or returns nothing: a clear error is right
    }
  }
  Stack stack;
  for (const Argument& a : schema.arguments()) {
    std::optional<IValue> v = argumentFor(a, x);
    if (!v) return;
    stack.push_back(std::move(*v));
  }
  try {
    op.callBoxed(stack);
  } catch (const Error&) {
    return;  // a kernel that fails, or returns nothing: a clear error is right
  }
  const std::string name = op.entry().qualifiedName();
  FUZZ_CHECK(stack.size() == schema.returns().size(), name + " returned " + std::to_string(stack.size()) +
                                                          " values; its schema has " +
                                                          std::to_string(schema.returns().size()));
  for (size_t j = 0; j < stack.size(); ++j) {
    FUZZ_CHECK(returnHasSchemaKind(schema.returns()[j], stack[j]), name + " returned a " + stack[j].tagName() +
                                                                       " for return " + std::to_string(j) +
                                                                       " of type " + schema.returns()[j].type.str());
  }
}

void exercise(const Setup& setup, const PluginStatus& status) {
  const Tensor x = emptyTensor({3}, ScalarType::Float32, Device(DeviceType::CPU));
  detail::fillFromHost(x, std::vector<float>{1, 2, 3}.data(), 3 * sizeof(float));
  std::vector<Tensor> on_devices;
  for (const PluginDeviceStatus& d : status.devices) {
    FUZZ_CHECK(d.device_count >= 0 && d.device_count <= 256, "a device count outside [0, 256] was reported");
    if (d.device_count == 0) continue;
    DeviceInterface& iface = DeviceTypeRegistry::global().interfaceOrThrow(d.type);
    try {
      const DeviceProperties p = iface.properties(Device(d.type, 0));
      FUZZ_CHECK(p.name.size() <= 128, "a device name longer than BP_DeviceProperties.name");
      Tensor t = emptyTensor({4}, ScalarType::Float32, Device(d.type, 0));
      FUZZ_CHECK(t.data_ptr() != nullptr, "a device tensor of 16 bytes has no memory");
      detail::fillFromHost(t, std::vector<float>{1, 2, 3, 4}.data(), 4 * sizeof(float));
      FUZZ_CHECK(t.toVector<float>() == (std::vector<float>{1, 2, 3, 4}), "a device round trip changed the elements");
      on_devices.push_back(t);
    } catch (const Error&) {
    }
  }
  Dispatcher& dispatcher = Dispatcher::singleton();
  for (const OperatorHandle& op : dispatcher.definedOperators()) {
    const std::string name = op.entry().qualifiedName();
    if (setup.baseline_ops.count(name) == 0 || name == "bp::neg" || name == "bp::abs") {
      callWith(op, x);
      for (const Tensor& t : on_devices) callWith(op, t);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Setup& setup = *new Setup();
  const Counts before = setup.counts();
  setup.set_script(data, size, setup.string_ptrs.data(), setup.string_ptrs.size(), /*good=*/0);
  absl::StatusOr<PluginStatus> loaded = plugins().load(setup.path);
  static const bool verbose = std::getenv("FUZZ_VERBOSE") != nullptr;  // says what each input did
  if (verbose) {
    std::fprintf(stderr, "  load: %s\n",
                 loaded.ok() ? ("ok, " + std::to_string(loaded->kernels) + " kernel(s), " +
                                std::to_string(loaded->devices.size()) + " device type(s)")
                                   .c_str()
                             : std::string(loaded.status().message()).c_str());
  }
  if (loaded.ok()) {
    FUZZ_CHECK(loaded->loaded && !loaded->name.empty(), "a load succeeded but the plugin is not loaded");
    exercise(setup, *loaded);
    absl::Status unloaded = plugins().unload(loaded->name);
    FUZZ_CHECK(unloaded.ok(), "a plugin that loaded does not unload: " + std::string(unloaded.message()));
    FUZZ_CHECK(setup.counts().shutdown_calls == before.shutdown_calls + 1, "shutdown did not run once on unload");
    checkUnchanged(setup, "a load and an unload");
  } else {
    const std::string message(loaded.status().message());
    FUZZ_CHECK(message.find("abi_fuzz_plugin") != std::string::npos || message.find("fuzz") != std::string::npos,
               "a load error names neither the library nor the plugin: " + message);
    checkUnchanged(setup, "a failed load");
    FUZZ_CHECK(notLoaded("fuzzabi"), "a plugin whose load failed is listed as loaded");
  }
  FUZZ_CHECK(setup.counts().live_allocations == 0, "the plugin's allocations were not all freed");

  if (setup.counts().init_calls != before.init_calls) {
    // A good plugin loads after whatever this attempt did.
    const Counts good_before = setup.counts();
    setup.set_script(nullptr, 0, nullptr, 0, /*good=*/1);
    absl::StatusOr<PluginStatus> good = plugins().load(setup.path);
    FUZZ_CHECK(good.ok(), "the good plugin does not load after a fuzzed one: " + std::string(good.status().message()));
    const Tensor x = emptyTensor({2}, ScalarType::Float32, Device(DeviceType::CPU));
    const Tensor y = Dispatcher::singleton().findOpOrThrow("fuzzgood::id").typed<Tensor(const Tensor&)>().call(x);
    FUZZ_CHECK(y.is_alias_of(x), "the good plugin's kernel did not run");
    FUZZ_CHECK(plugins().unload("fuzzgood").ok(), "the good plugin does not unload");
    FUZZ_CHECK(setup.counts().shutdown_calls == good_before.shutdown_calls + 1,
               "the good plugin's shutdown did not run");
    checkUnchanged(setup, "the good plugin's load and unload");
  }
  return 0;
}
