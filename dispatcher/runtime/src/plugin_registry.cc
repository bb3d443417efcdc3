// Loading and unloading plugins (Note [Plugin loading]) and the registration
// half of the host table.
#include "backplane/runtime/plugin_registry.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/builtin_kernels.h"
#include "backplane/dispatch/schema_signature.h"
#include "backplane/ops/derived_forms.h"
#include "load_breadcrumb.h"
#include "loaded_plugin.h"
#include "plugin_file_check.h"

namespace backplane {

PluginRegistry& plugins() {
  static PluginRegistry* registry = new PluginRegistry();  // never destroyed: see header
  return *registry;
}

using plugin_detail::LoadedPlugin;
using plugin_detail::PluginDeviceInterface;

namespace plugin_detail {
void fillHostApiCommon(BP_HostApi& api);
}

// Note [Plugin registry state]
// load_mu_ serialises load and unload (a plugin's init runs under it, and
// calls back into the registration functions below, which take only mu_).
// Records of plugins are never freed: kernels retired from the dispatch
// table may still point at them (Note [Lock-free dispatch]).
struct PluginRegistry::Impl {
  absl::Mutex load_mu ABSL_ACQUIRED_BEFORE(mu);
  mutable absl::Mutex mu;
  std::vector<LoadedPlugin*> all ABSL_GUARDED_BY(mu);  // attempts too
  std::map<std::pair<OperatorEntry*, DispatchKey>, LoadedPlugin*> impl_owner ABSL_GUARDED_BY(mu);
  std::map<int, LoadedPlugin*> device_type_owner ABSL_GUARDED_BY(mu);
  std::vector<bool> slot_used ABSL_GUARDED_BY(mu) = std::vector<bool>(plugin_detail::kMaxPluginSlots, false);
  std::vector<PluginSourceProblem> skipped_sources ABSL_GUARDED_BY(mu);  // by loadAll(), each once

  LoadedPlugin* findLoaded(std::string_view name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (LoadedPlugin* p : all)
      if (p->status.loaded && p->status.name == name) return p;
    return nullptr;
  }
  PluginStatus snapshot(const LoadedPlugin& p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void rollback(LoadedPlugin& p) ABSL_LOCKS_EXCLUDED(mu);
  // A failed attempt at a file the loader never opened (a folder refused by
  // Note [Plugin trust]), listed in plugins() as load() lists its failures.
  PluginStatus recordFailure(const std::string& path, const std::string& error) ABSL_LOCKS_EXCLUDED(mu) {
    auto* p = new LoadedPlugin();  // kept for the life of the process, as every attempt
    p->status.path = path;
    p->status.error = error;
    absl::MutexLock lock(&mu);
    all.push_back(p);
    return snapshot(*p);
  }
  // A BACKPLANE_PLUGIN_PATH entry loadAll() skipped: listed once, warned about once.
  void skipSource(const std::string& entry, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu) {
    {
      absl::MutexLock lock(&mu);
      for (const PluginSourceProblem& s : skipped_sources)
        if (s.entry == entry) return;
      skipped_sources.push_back({entry, reason});
    }
    plugin_detail::warnOnce(
        strCat("BACKPLANE_PLUGIN_PATH:", entry),
        strCat("backplane: warning: BACKPLANE_PLUGIN_PATH entry '", entry, "' ", reason, "; it is skipped"));
  }
};

struct PluginRegistryAccess {
  static PluginRegistry::Impl& impl(PluginRegistry& r) { return *r.impl_; }
};

namespace {

constexpr const char* kStandardNamespace = "bp";

// What is wrong with a plugin's name, or "" (names become device type
// owners, profiler rows and command-line words: lowercase letters, digits
// and '_', starting with a letter, at most 63 characters). The length comes
// first, so a long but otherwise valid name is not told it has bad letters;
// the name itself is not repeated (it may be megabytes).
std::string pluginNameProblem(const char* name) {
  if (name == nullptr) return "its BP_PluginInfo.name is NULL; give the plugin a name";
  std::string_view n = name;
  if (n.size() > 63) return strCat("its name is too long (", n.size(), " characters; at most 63)");
  bool valid = !n.empty() && n[0] >= 'a' && n[0] <= 'z';
  for (char c : n) valid &= (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  if (!valid) return "its name must be lowercase letters, digits and '_', starting with a letter";
  return "";
}

// Note [Plugin trust]: under BACKPLANE_PLUGIN_TRUST=strict, the error that
// refuses `canonical` (a plugin file, or a folder the loader scans) when
// others can change it; otherwise "", after a warning on stderr (once per
// path at fault) when they can.
std::string trustRefusal(const std::string& canonical, plugin_detail::TrustTarget target,
                         const plugin_detail::PluginFileFacts* facts) {
  using plugin_detail::TrustTarget;
  std::optional<plugin_detail::TrustProblem> problem = plugin_detail::trustProblem(canonical, target, facts);
  if (!problem) return "";
  const bool folder = target == TrustTarget::ScannedFolder;
  const std::string subject = strCat(folder ? "plugin folder '" : "plugin '", canonical, "'");
  const std::string what = problem->path == canonical ? strCat(subject, " ", problem->what)
                                                      : strCat(subject, ": '", problem->path, "' ", problem->what);
  const std::string consequence = folder ? ", so others can add or replace plugins this process loads"
                                         : ", so others can replace the code this process runs";
  if (plugin_detail::trustMode() == plugin_detail::TrustMode::Strict) {
    return strCat("cannot load ", what, consequence, " (refused: BACKPLANE_PLUGIN_TRUST=strict); ", problem->fix,
                  ", or unset BACKPLANE_PLUGIN_TRUST to load it with a warning");
  }
  plugin_detail::warnOnce(strCat("trust:", problem->path),
                          strCat("backplane: warning: ", what, consequence, "; ", problem->fix,
                                 " (BACKPLANE_PLUGIN_TRUST=strict refuses such plugins)"));
  return "";
}

LoadedPlugin& pluginOf(BP_Plugin* p) { return *reinterpret_cast<LoadedPlugin*>(p); }

absl::Status requireInitializing(LoadedPlugin& p, const char* what) {
  if (!p.initializing) {
    return absl::FailedPreconditionError(
        strCat("plugin '", p.status.name, "': ", what, " is only allowed during backplane_plugin_init"));
  }
  return absl::OkStatus();
}

BP_Error* toError(const absl::Status& s) {
  if (s.ok()) return nullptr;
  return plugin_detail::makeError(static_cast<BP_ErrorCode>(s.code()), std::string(s.message()));
}

PluginRegistry::Impl& registryImpl();

void hostLog(BP_Plugin* plugin, BP_LogLevel level, const char* message) {
  const char* names[] = {"debug", "info", "warning", "error"};
  const char* lvl = level >= 0 && level <= 3 ? names[level] : "info";
  if (level == BP_LOG_DEBUG && !std::getenv("BACKPLANE_DEBUG")) return;
  std::string who = plugin ? pluginOf(plugin).status.name : std::string("?");
  logLine(strCat("backplane [", who, "] ", lvl, ": ", message ? message : ""));
}

BP_Error* hostRegisterDeviceType(BP_Plugin* plugin, const BP_DeviceTypeDesc* raw, int32_t* out) try {
  LoadedPlugin& p = pluginOf(plugin);
  if (absl::Status s = requireInitializing(p, "register_device_type"); !s.ok()) return toError(s);
  absl::StatusOr<BP_DeviceTypeDesc> desc = plugin_detail::readStruct(raw, "BP_DeviceTypeDesc");
  if (!desc.ok()) return toError(desc.status());
  std::string missing;
  auto require = [&](bool present, const char* field) {
    if (!present) missing += strCat(missing.empty() ? "" : ", ", field);
  };
  require(desc->name != nullptr, "name");
  require(desc->device_count != nullptr, "device_count");
  require(desc->allocate != nullptr, "allocate");
  require(desc->deallocate != nullptr, "deallocate");
  require(desc->copy_host_to_device != nullptr, "copy_host_to_device");
  require(desc->copy_device_to_host != nullptr, "copy_device_to_host");
  if (!missing.empty()) {
    return toError(absl::InvalidArgumentError(
        strCat("plugin '", p.status.name, "': BP_DeviceTypeDesc", desc->name ? strCat(" '", desc->name, "'") : "",
               " lacks required field(s) ", missing,
               " (name, device_count, allocate, deallocate, copy_host_to_device and "
               "copy_device_to_host are required)")));
  }
  if (desc->dlpack_device_type < 0) {
    return toError(absl::InvalidArgumentError(strCat(
        "plugin '", p.status.name, "': BP_DeviceTypeDesc '", desc->name, "' has dlpack_device_type ",
        desc->dlpack_device_type, ", which is no DLDeviceType; set 0 when its addresses are not a DLPack device's")));
  }
  if ((desc->event_create_timed == nullptr) != (desc->event_elapsed_ms == nullptr)) {
    return toError(
        absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': BP_DeviceTypeDesc '", desc->name, "' sets ",
                                          desc->event_create_timed ? "event_create_timed without event_elapsed_ms"
                                                                   : "event_elapsed_ms without event_create_timed",
                                          "; event timing (ABI 1.12) needs both, or neither")));
  }
  {  // Note [Graphs]: all four, or none.
    const std::pair<const char*, bool> graph_slots[] = {{"graph_capture_begin", desc->graph_capture_begin != nullptr},
                                                        {"graph_capture_end", desc->graph_capture_end != nullptr},
                                                        {"graph_replay", desc->graph_replay != nullptr},
                                                        {"graph_destroy", desc->graph_destroy != nullptr}};
    std::string set, missing;
    for (const auto& [slot, present] : graph_slots) {
      std::string& list = present ? set : missing;
      list += strCat(list.empty() ? "" : ", ", slot);
    }
    if (!set.empty() && !missing.empty()) {
      return toError(absl::InvalidArgumentError(
          strCat("plugin '", p.status.name, "': BP_DeviceTypeDesc '", desc->name, "' sets ", set, " but not ", missing,
                 "; graphs (ABI 1.13) need all four of graph_capture_begin, graph_capture_end, graph_replay "
                 "and graph_destroy, or none")));
    }
  }
  auto& reg = DeviceTypeRegistry::global();
  auto& impl = registryImpl();
  std::string name = desc->name;
  DeviceType type;
  bool dynamic = false;
  std::optional<DeviceType> existing = reg.find(name);
  if (existing && static_cast<int>(*existing) < kNumBuiltinDeviceTypes && *existing != DeviceType::CPU) {
    type = *existing;  // cuda and hip are built-in names waiting for their plugin
  } else {
    absl::StatusOr<DeviceType> t = reg.registerType(name);
    if (!t.ok()) {
      absl::MutexLock lock(&impl.mu);
      std::string owner;
      if (existing) {
        if (auto it = impl.device_type_owner.find(static_cast<int>(*existing)); it != impl.device_type_owner.end())
          owner = strCat(" by plugin '", it->second->status.name, "' (", it->second->status.path, ")");
      }
      return toError(absl::AlreadyExistsError(
          strCat("plugin '", p.status.name, "' cannot register device type '", name,
                 "': ", owner.empty() ? t.status().message() : "it is already registered" + owner)));
    }
    type = *t;
    dynamic = true;
  }
  auto* dev = new PluginDeviceInterface(&p, *desc, type);  // never freed: see Note [Plugin registry state]
  if (absl::Status s = reg.setInterface(type, dev); !s.ok()) {
    if (dynamic) (void)reg.unregisterType(type);
    absl::MutexLock lock(&impl.mu);
    std::string owner;
    if (auto it = impl.device_type_owner.find(static_cast<int>(type)); it != impl.device_type_owner.end())
      owner = strCat(" (claimed by plugin '", it->second->status.name, "')");
    return toError(absl::AlreadyExistsError(
        strCat("plugin '", p.status.name, "' cannot register device type '", name, "': ", s.message(), owner)));
  }
  {
    absl::MutexLock lock(&impl.mu);
    impl.device_type_owner[static_cast<int>(type)] = &p;
    p.devices.push_back(dev);
  }
  if (out) *out = static_cast<int32_t>(type);
  return nullptr;
} catch (...) {
  return plugin_detail::errorFromCurrentException();
}

std::string qualifyOp(const char* op) {
  std::string_view name = op ? op : "";
  if (name.find("::") != std::string_view::npos) return std::string(name);
  return strCat(kStandardNamespace, "::", name);
}

BP_Error* hostDef(BP_Plugin* plugin, const char* schema) try {
  LoadedPlugin& p = pluginOf(plugin);
  if (absl::Status s = requireInitializing(p, "def"); !s.ok()) return toError(s);
  BP_CHECK(schema != nullptr, "def: schema is NULL");
  auto handle = Dispatcher::singleton().registerDef(schema, strCat("plugin ", p.status.name));
  if (!handle.ok()) return toError(handle.status());
  p.handles.push_back(*std::move(handle));
  if (absl::StatusOr<FunctionSchema> parsed = FunctionSchema::parse(schema); parsed.ok())
    p.defined_ops.push_back(parsed->name().qualifiedName());
  return nullptr;
} catch (...) {
  return plugin_detail::errorFromCurrentException();
}

// The operator `op` names, if this plugin defined it (Note [A plugin's own
// operators]: meta and spec are for a plugin's own operators only).
absl::StatusOr<OperatorHandle> ownOperator(LoadedPlugin& p, const char* what, const char* op) {
  if (op == nullptr) return absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': ", what, ": op is NULL"));
  const std::string qualified = qualifyOp(op);
  if (std::find(p.defined_ops.begin(), p.defined_ops.end(), qualified) == p.defined_ops.end()) {
    std::optional<OperatorHandle> h = Dispatcher::singleton().findOp(qualified);
    return absl::InvalidArgumentError(strCat(
        "plugin '", p.status.name, "': ", what, "(", qualified, "): ",
        h && h->hasSchema()
            ? "the operator is not this plugin's (its rule and samples belong to whoever defines it)"
            : strCat("the plugin has not defined it; def() it first.", Dispatcher::singleton().didYouMean(qualified))));
  }
  return Dispatcher::singleton().findOpOrThrow(qualified);
}

// An error unless `given` (a kernel's declared cpp_signature, or NULL) is
// `expected`, the C++ signature `what` of `op` needs.
absl::Status checkSignature(const LoadedPlugin& p, const std::string& what, const OperatorHandle& op, const char* given,
                            const std::string& expected) {
  if (given == nullptr || expected == given) return absl::OkStatus();
  return absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': ", what, " of ",
                                           op.operatorName().qualifiedName(), " has C++ signature ", given,
                                           ", but the schema ", op.schema().toString(), " needs ", expected));
}

// BP_KernelDesc.typed_fn (ABI 1.14; Note [Typed kernel entries]): only a
// kernel the dispatch table calls unboxed may have one, and only with the
// cpp_signature its C type follows from. `what` names the registration.
absl::Status checkTypedEntry(const LoadedPlugin& p, const std::string& what, const BP_KernelDesc& desc, bool allowed) {
  if (p.status.abi_minor < 14 || desc.typed_fn == nullptr) return absl::OkStatus();
  if (!allowed) {
    return absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': ", what,
                                             " is always called through BP_KernelDesc.fn, so its typed_fn must be "
                                             "NULL (typed entries are for impl kernels and composites)"));
  }
  if (desc.cpp_signature == nullptr) {
    return absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': ", what,
                                             " gives BP_KernelDesc.typed_fn without cpp_signature; the typed entry's "
                                             "C type follows from the signature, so give both (or neither)"));
  }
  return absl::OkStatus();
}

// BP_HostApi.meta (ABI 1.9; Note [A plugin's own operators]).
BP_Error* hostMeta(BP_Plugin* plugin, const char* op, const BP_KernelDesc* raw) try {
  LoadedPlugin& p = pluginOf(plugin);
  if (absl::Status s = requireInitializing(p, "meta"); !s.ok()) return toError(s);
  absl::StatusOr<OperatorHandle> h = ownOperator(p, "meta", op);
  if (!h.ok()) return toError(h.status());
  absl::StatusOr<BP_KernelDesc> desc = plugin_detail::readStruct(raw, "BP_KernelDesc");
  if (!desc.ok()) return toError(desc.status());
  const std::string name = h->operatorName().qualifiedName();
  if (!desc->fn)
    return toError(absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': meta(", name, "): fn is NULL")));
  if (desc->dtypes != 0) {
    return toError(absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': meta(", name,
                                                     "): a rule sees every call, so BP_KernelDesc.dtypes must be 0")));
  }
  if (absl::Status s = checkTypedEntry(p, strCat("meta(", name, ")"), *desc, /*allowed=*/false); !s.ok())
    return toError(s);
  std::string params = cppSignatureForSchema(h->schema());
  const std::string expected = strCat(params.substr(0, params.rfind(" -> ")), " -> ()");
  if (absl::Status s = checkSignature(p, "the meta", *h, desc->cpp_signature, expected); !s.ok()) return toError(s);
  if (std::find(p.meta_ops.begin(), p.meta_ops.end(), name) != p.meta_ops.end()) {
    return toError(absl::AlreadyExistsError(strCat("plugin '", p.status.name, "': meta(", name,
                                                   ") again: an operator has one rule; check every case in it")));
  }
  auto handle = Dispatcher::singleton().registerMeta(name, plugin_detail::makePluginMeta(&p, *desc, *h),
                                                     strCat("plugin ", p.status.name));
  if (!handle.ok()) return toError(handle.status());
  p.handles.push_back(*std::move(handle));
  p.meta_ops.push_back(name);
  return nullptr;
} catch (...) {
  return plugin_detail::errorFromCurrentException();
}

// BP_HostApi.derive_forms (ABI 1.9; Note [Derived forms]).
BP_Error* hostDeriveForms(BP_Plugin* plugin, const char* op, uint32_t forms) try {
  LoadedPlugin& p = pluginOf(plugin);
  if (absl::Status s = requireInitializing(p, "derive_forms"); !s.ok()) return toError(s);
  absl::StatusOr<OperatorHandle> h = ownOperator(p, "derive_forms", op);
  if (!h.ok()) return toError(h.status());
  const std::string name = h->operatorName().qualifiedName();
  if (forms == 0 || (forms & ~(BP_FORM_OUT | BP_FORM_INPLACE)) != 0) {
    return toError(absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': derive_forms(", name, ", ", forms,
                                                     "): forms must be BP_FORM_OUT, BP_FORM_INPLACE or both")));
  }
  if (p.derived.count(name)) {
    return toError(absl::AlreadyExistsError(
        strCat("plugin '", p.status.name, "': derive_forms(", name, ") again: ask for every form in one call")));
  }
  absl::StatusOr<DerivedForms> derived =
      deriveForms(*h, (forms & BP_FORM_OUT) != 0, (forms & BP_FORM_INPLACE) != 0, strCat("plugin ", p.status.name));
  if (!derived.ok()) {
    return toError(
        absl::Status(derived.status().code(), strCat("plugin '", p.status.name, "': ", derived.status().message())));
  }
  for (RegistrationHandle& r : derived->handles) p.handles.push_back(std::move(r));
  for (const std::string* f : {&derived->out, &derived->inplace})
    if (!f->empty()) p.defined_ops.push_back(*f);
  absl::MutexLock lock(&registryImpl().mu);
  p.derived[name] = DerivedFormNames{derived->out, derived->inplace};
  return nullptr;
} catch (...) {
  return plugin_detail::errorFromCurrentException();
}

// BP_HostApi.spec (ABI 1.9; Note [A plugin's own operators], Note [Sample
// notation]).
BP_Error* hostSpec(BP_Plugin* plugin, const char* op, const BP_SpecDesc* raw) try {
  LoadedPlugin& p = pluginOf(plugin);
  if (absl::Status s = requireInitializing(p, "spec"); !s.ok()) return toError(s);
  absl::StatusOr<OperatorHandle> h = ownOperator(p, "spec", op);
  if (!h.ok()) return toError(h.status());
  absl::StatusOr<BP_SpecDesc> desc = plugin_detail::readStruct(raw, "BP_SpecDesc");
  if (!desc.ok()) return toError(desc.status());
  const std::string name = h->operatorName().qualifiedName();
  auto fail = [&](const std::string& what) {
    return toError(absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': spec(", name, "): ", what)));
  };
  if (!desc->samples) return fail("samples is NULL");
  if (!(desc->atol >= 0) || !(desc->rtol >= 0)) return fail("atol and rtol must be 0 or more");
  for (const auto& s : p.specs)
    if (s->op == name) return fail("a second spec: give every sample in one");
  absl::StatusOr<std::vector<SampleDecl>> samples = parseSampleNotation(h->schema(), desc->samples);
  if (!samples.ok()) return fail(std::string(samples.status().message()));
  auto spec = std::make_shared<DeclaredSpec>();
  spec->op = name;
  spec->plugin = p.status.name;
  spec->samples = *std::move(samples);
  spec->atol = desc->atol;
  spec->rtol = desc->rtol;
  if (desc->reference) {
    absl::StatusOr<BP_KernelDesc> ref = plugin_detail::readStruct(desc->reference, "BP_KernelDesc");
    if (!ref.ok()) return toError(ref.status());
    if (!ref->fn) return fail("reference->fn is NULL");
    if (absl::Status s = checkTypedEntry(p, strCat("the conformance reference of ", name), *ref, /*allowed=*/false);
        !s.ok())
      return toError(s);
    if (absl::Status s =
            checkSignature(p, "the conformance reference", *h, ref->cpp_signature, cppSignatureForSchema(h->schema()));
        !s.ok())
      return toError(s);
    spec->reference = plugin_detail::makePluginReference(&p, *ref, *h);
  }
  absl::MutexLock lock(&registryImpl().mu);
  p.specs.push_back(std::move(spec));
  return nullptr;
} catch (...) {
  return plugin_detail::errorFromCurrentException();
}

// BP_HostApi.derivative (ABI 1.6; Note [Declared derivatives]).
BP_Error* hostDerivative(BP_Plugin* plugin, const char* op, int32_t device_type, const char* declaration) try {
  LoadedPlugin& p = pluginOf(plugin);
  if (absl::Status s = requireInitializing(p, "derivative"); !s.ok()) return toError(s);
  BP_CHECK(op != nullptr && declaration != nullptr, "derivative: op or declaration is NULL");
  std::optional<DeviceType> device;
  if (device_type != BP_ANY_DEVICE_TYPE) {
    BP_CHECK(device_type >= 0 && DeviceTypeRegistry::global().nameCString(static_cast<DeviceType>(device_type)),
             "plugin '", p.status.name, "': derivative(", op, "): device type ", device_type,
             " is not registered; pass BP_ANY_DEVICE_TYPE or a type the plugin registered");
    device = static_cast<DeviceType>(device_type);
  }
  absl::StatusOr<DerivativeRegistration> r =
      declareDerivative(qualifyOp(op), device, declaration, strCat("plugin ", p.status.name));
  if (!r.ok())
    return toError(absl::Status(r.status().code(), strCat("plugin '", p.status.name, "': ", r.status().message())));
  p.derivatives.push_back(*std::move(r));
  return nullptr;
} catch (...) {
  return plugin_detail::errorFromCurrentException();
}

enum class KernelSlot { Impl, ImplWhenDefined, Fallback };  // the host function registering it

// impl with BP_ANY_DEVICE_TYPE (ABI 1.9): the composite of an operator the
// plugin defines (Note [A plugin's own operators]).
BP_Error* registerComposite(LoadedPlugin& p, const char* op_name, const BP_KernelDesc& desc) {
  absl::StatusOr<OperatorHandle> h = ownOperator(p, "impl(BP_ANY_DEVICE_TYPE)", op_name);
  if (!h.ok()) return toError(h.status());
  const std::string name = h->operatorName().qualifiedName();
  if (desc.dtypes != 0) {
    return toError(absl::InvalidArgumentError(
        strCat("plugin '", p.status.name, "': the composite of ", name,
               " serves every dtype (it calls other operators), but its BP_KernelDesc.dtypes is ", desc.dtypes,
               "; set it to 0")));
  }
  if (absl::Status s = checkSignature(p, "the composite", *h, desc.cpp_signature, cppSignatureForSchema(h->schema()));
      !s.ok())
    return toError(s);
  bool typed = false;
  auto handle = Dispatcher::singleton().registerComposite(
      name, plugin_detail::makePluginComposite(&p, desc, *h, &typed), strCat("plugin ", p.status.name));
  if (!handle.ok()) return toError(handle.status());
  p.handles.push_back(*std::move(handle));
  ++p.status.kernels;
  p.status.typed_kernels += typed;
  return nullptr;
}

BP_Error* registerKernel(BP_Plugin* plugin, const char* op_name, int32_t device_type, const BP_KernelDesc* raw,
                         KernelSlot slot) try {
  LoadedPlugin& p = pluginOf(plugin);
  const bool is_fallback = slot == KernelSlot::Fallback;
  const char* const slot_name = is_fallback ? "fallback" : slot == KernelSlot::Impl ? "impl" : "impl_when_defined";
  if (absl::Status s = requireInitializing(p, slot_name); !s.ok()) return toError(s);
  absl::StatusOr<BP_KernelDesc> desc = plugin_detail::readStruct(raw, "BP_KernelDesc");
  if (!desc.ok()) return toError(desc.status());
  if (!desc->fn)
    return toError(absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': BP_KernelDesc.fn is NULL")));
  // BP_KernelDesc.dtypes (ABI 1.5; reads as 0, every dtype, from an older
  // plugin's smaller struct): Note [Declared dtypes] in operator_entry.h.
  absl::StatusOr<DtypeSet> dtypes = DtypeSet::fromMask(desc->dtypes);
  // Note [Dtypes of older plugins]: a 1.0-1.4 plugin's kernels serve the
  // dtypes of its ABI only (its desc->dtypes reads as 0 here).
  const bool legacy_dtypes = plugin_detail::predatesAbi15Dtypes(p);
  if (dtypes.ok() && legacy_dtypes && !is_fallback) dtypes = plugin_detail::kAbi14Dtypes;
  if (!dtypes.ok()) {
    return toError(
        absl::InvalidArgumentError(strCat("plugin '", p.status.name, "': ", slot_name, "(", op_name ? op_name : "",
                                          "): BP_KernelDesc.dtypes: ", dtypes.status().message())));
  }
  if (is_fallback && desc->dtypes != 0) {
    return toError(absl::InvalidArgumentError(strCat(
        "plugin '", p.status.name, "': a fallback serves every operator and dtype, but its BP_KernelDesc.dtypes is ",
        desc->dtypes, "; set it to 0, and declare dtypes on the kernels registered with impl")));
  }
  // BP_KernelDesc.flags (ABI 1.13; Note [CPU scalars as kernel arguments]).
  const uint64_t flags = p.status.abi_minor >= 13 ? desc->flags : 0;
  if ((flags & ~BP_KERNEL_CPU_SCALARS) != 0) {
    return toError(absl::InvalidArgumentError(
        strCat("plugin '", p.status.name, "': ", slot_name, "(", op_name ? op_name : "",
               "): unknown BP_KernelDesc.flags bits ", flags & ~BP_KERNEL_CPU_SCALARS,
               " (BP_KERNEL_CPU_SCALARS is the only flag); a plugin built for a newer ABI than this host's?")));
  }
  if (flags != 0 && (is_fallback || device_type == BP_ANY_DEVICE_TYPE)) {
    return toError(absl::InvalidArgumentError(
        strCat("plugin '", p.status.name, "': ", is_fallback ? "a fallback" : "a composite", " for ",
               op_name ? op_name : "every operator",
               " takes no BP_KernelDesc.flags (BP_KERNEL_CPU_SCALARS is for a device's own kernels); set them to 0")));
  }
  const bool cpu_scalars = (flags & BP_KERNEL_CPU_SCALARS) != 0;
  if (absl::Status s = checkTypedEntry(
          p, is_fallback ? std::string("a fallback") : strCat(slot_name, "(", op_name ? op_name : "", ")"), *desc,
          /*allowed=*/!is_fallback);
      !s.ok())
    return toError(s);
  if (device_type == BP_ANY_DEVICE_TYPE && slot == KernelSlot::Impl && p.status.abi_minor >= 9)
    return registerComposite(p, op_name, *desc);
  if (device_type < 0 || device_type >= kMaxDeviceTypes ||
      !DeviceTypeRegistry::global().isActive(static_cast<DeviceType>(device_type))) {
    return toError(absl::InvalidArgumentError(
        strCat("plugin '", p.status.name, "': device type ", device_type, " is not registered")));
  }
  const DispatchKey key = backendKey(static_cast<DeviceType>(device_type));
  Dispatcher& d = Dispatcher::singleton();
  if (is_fallback) {
    // A boxed fallback: the op is known only at call time.
    auto handle =
        d.registerFallback(key, plugin_detail::makePluginFallback(&p, *desc), strCat("plugin ", p.status.name));
    if (!handle.ok()) return toError(handle.status());
    p.handles.push_back(*std::move(handle));
    ++p.status.kernels;
    return nullptr;
  }
  std::string qualified = qualifyOp(op_name);
  std::optional<OperatorHandle> op;
  if (slot == KernelSlot::ImplWhenDefined) {
    // The kernel holds its operator's handle, so the entry must exist
    // before the definition does (Note [Kernels for operators defined later]).
    absl::StatusOr<OperatorHandle> found = d.findOrAddOp(qualified);
    if (!found.ok()) {
      return toError(absl::InvalidArgumentError(
          strCat("plugin '", p.status.name, "': impl_when_defined: ", found.status().message())));
    }
    op = *found;
  } else {
    op = d.findOp(qualified);
  }
  if (!op || (!op->hasSchema() && slot == KernelSlot::Impl)) {
    return toError(absl::NotFoundError(strCat(
        "plugin '", p.status.name, "' registers a ", dispatchKeyName(key), " kernel for ", qualified,
        ", which is not defined: def() it first, or load the plugin that defines it.", d.didYouMean(qualified))));
  }
  // Not defined yet (impl_when_defined): the dispatcher checks the declared
  // signature when the schema arrives.
  const bool defined = op->hasSchema();
  std::string expected = defined ? cppSignatureForSchema(op->schema()) : std::string();
  if (defined && desc->cpp_signature && expected != desc->cpp_signature) {
    return toError(absl::InvalidArgumentError(strCat(
        "plugin '", p.status.name, "': the ", dispatchKeyName(key), " kernel for ", qualified, " has C++ signature ",
        desc->cpp_signature, ", but the schema ", op->schema().toString(), " needs ", expected)));
  }
  auto& impl = registryImpl();
  {
    absl::MutexLock lock(&impl.mu);
    auto it = impl.impl_owner.find({&op->entry(), key});
    if (it != impl.impl_owner.end() && it->second != &p) {
      return toError(
          absl::AlreadyExistsError(strCat("plugin '", p.status.name, "' cannot register a ", dispatchKeyName(key),
                                          " kernel for ", qualified, ": plugin '", it->second->status.name, "' (",
                                          it->second->status.path, ") already implements it; unload one of them")));
    }
  }
  bool typed = false;
  KernelFunction kernel = slot == KernelSlot::Impl ? plugin_detail::makePluginKernel(&p, *desc, *op, &typed)
                                                   : plugin_detail::makePluginKernelWhenDefined(&p, *desc, *op, &typed);
  std::string debug = strCat("plugin ", p.status.name);
  if (legacy_dtypes) {
    debug += strCat(", built against plugin ABI ", p.status.abi_major, ".", p.status.abi_minor,
                    ", which has no int16, uint16, uint32 or uint64 (ABI 1.5 added them)");
  }
  auto handle =
      slot == KernelSlot::Impl
          ? d.registerImpl(qualified, key, std::move(kernel), std::move(debug), *dtypes, cpu_scalars)
          : d.registerImplWhenDefined(qualified, key, std::move(kernel), std::move(debug), *dtypes, cpu_scalars);
  if (!handle.ok()) return toError(handle.status());
  p.handles.push_back(*std::move(handle));
  ++p.status.kernels;
  p.status.typed_kernels += typed;
  absl::MutexLock lock(&impl.mu);
  impl.impl_owner[{&op->entry(), key}] = &p;
  p.owned_impls.push_back({&op->entry(), key});
  return nullptr;
} catch (...) {
  return plugin_detail::errorFromCurrentException();
}

BP_Error* hostImpl(BP_Plugin* plugin, const char* op, int32_t device_type, const BP_KernelDesc* kernel) {
  return registerKernel(plugin, op, device_type, kernel, KernelSlot::Impl);
}
BP_Error* hostImplWhenDefined(BP_Plugin* plugin, const char* op, int32_t device_type, const BP_KernelDesc* kernel) {
  return registerKernel(plugin, op, device_type, kernel, KernelSlot::ImplWhenDefined);
}
BP_Error* hostFallback(BP_Plugin* plugin, int32_t device_type, const BP_KernelDesc* kernel) {
  return registerKernel(plugin, nullptr, device_type, kernel, KernelSlot::Fallback);
}

BP_Error* hostDeviceTypeFind(const char* name, int32_t* out) {
  std::optional<DeviceType> t = DeviceTypeRegistry::global().find(name ? name : "");
  if (!t) {
    return plugin_detail::makeError(BP_NOT_FOUND, strCat("no device type named '", name ? name : "", "'"));
  }
  if (out) *out = static_cast<int32_t>(*t);
  return nullptr;
}

const char* hostDeviceTypeName(int32_t type) {
  return DeviceTypeRegistry::global().nameCString(static_cast<DeviceType>(type));
}

PluginRegistry::Impl& registryImpl() { return PluginRegistryAccess::impl(plugins()); }

}  // namespace

DerivedFormNames derivedFormsOf(std::string_view functional) {
  PluginRegistry::Impl& impl = registryImpl();
  absl::MutexLock lock(&impl.mu);
  for (const LoadedPlugin* p : impl.all) {
    if (!p->status.loaded) continue;
    if (auto it = p->derived.find(std::string(functional)); it != p->derived.end()) return it->second;
  }
  return {};
}

std::vector<std::shared_ptr<const DeclaredSpec>> declaredSpecs() {
  std::vector<std::shared_ptr<const DeclaredSpec>> out;
  PluginRegistry::Impl& impl = registryImpl();
  absl::MutexLock lock(&impl.mu);
  for (const LoadedPlugin* p : impl.all)
    if (p->status.loaded) out.insert(out.end(), p->specs.begin(), p->specs.end());
  return out;
}

namespace plugin_detail {
const BP_HostApi& hostApi() {
  static const BP_HostApi api = [] {
    BP_HostApi a{};
    a.struct_size = BP_HostApi_STRUCT_SIZE;
    a.abi_major = BP_ABI_MAJOR;
    a.abi_minor = BP_HEADER_ABI_MINOR;
    fillHostApiCommon(a);
    a.log = &hostLog;
    a.register_device_type = &hostRegisterDeviceType;
    a.def = &hostDef;
    a.impl = &hostImpl;
    a.fallback = &hostFallback;
    a.device_type_find = &hostDeviceTypeFind;
    a.device_type_name = &hostDeviceTypeName;
    a.impl_when_defined = &hostImplWhenDefined;
    a.derivative = &hostDerivative;
    a.meta = &hostMeta;
    a.spec = &hostSpec;
    a.derive_forms = &hostDeriveForms;
    return a;
  }();
  return api;
}
}  // namespace plugin_detail

// --------------------------------------------------------------- registry

PluginRegistry::PluginRegistry() : impl_(std::make_unique<Impl>()) {}
PluginRegistry::~PluginRegistry() = default;

// Needs mu held: copies the record; device counts are asked for afterwards
// by finishSnapshot(), outside the lock (they call into the plugin).
PluginStatus PluginRegistry::Impl::snapshot(const LoadedPlugin& p) const {
  PluginStatus s = p.status;
  s.live_allocations = p.live_allocations.load();
  s.devices.clear();
  if (p.status.loaded) {
    for (PluginDeviceInterface* d : p.devices) s.devices.push_back(PluginDeviceStatus{d->name(), d->type(), 0, {}});
  }
  return s;
}

namespace {
void finishSnapshot(PluginStatus& s) {
  for (PluginDeviceStatus& d : s.devices) {
    DeviceInterface* iface = DeviceTypeRegistry::global().interface(d.type);
    if (!iface) continue;
    d.device_count = iface->deviceCount();
    if (d.device_count == 0) d.unavailable_reason = iface->unavailableReason();
  }
}
}  // namespace

void PluginRegistry::Impl::rollback(LoadedPlugin& p) {
  p.derivatives.clear();
  p.handles.clear();  // newest last; order does not matter for distinct registrations
  p.defined_ops.clear();
  p.meta_ops.clear();
  auto& reg = DeviceTypeRegistry::global();
  absl::MutexLock lock(&mu);
  p.specs.clear();
  p.derived.clear();
  for (auto& key : p.owned_impls) impl_owner.erase(key);
  p.owned_impls.clear();
  for (PluginDeviceInterface* d : p.devices) {
    (void)reg.setInterface(d->type(), nullptr);
    if (static_cast<int>(d->type()) >= kNumBuiltinDeviceTypes) (void)reg.unregisterType(d->type());
    device_type_owner.erase(static_cast<int>(d->type()));
  }
  p.devices.clear();
  if (p.slot >= 0) slot_used[static_cast<size_t>(p.slot)] = false;
}

absl::StatusOr<PluginStatus> PluginRegistry::load(const std::string& path) {
  absl::MutexLock load_lock(&impl_->load_mu);
  namespace fs = std::filesystem;
  auto* p = new LoadedPlugin();  // kept for the life of the process
  p->status.path = path;
  auto fail = [&](absl::Status s) -> absl::Status {
    p->status.error = std::string(s.message());
    p->status.loaded = false;
    absl::MutexLock lock(&impl_->mu);
    impl_->all.push_back(p);
    return s;
  };

  // The path reaches open() and dlopen() as a C string: an embedded NUL
  // would silently name another file (Python strings may hold one).
  if (path.find('\0') != std::string::npos) {
    std::string shown = path;
    std::replace(shown.begin(), shown.end(), '\0', '?');
    p->status.path = shown;
    return fail(absl::InvalidArgumentError(
        strCat("cannot load plugin '", shown, "': the path contains a NUL character (shown as '?')")));
  }

  std::error_code ec;
  fs::path canonical = fs::canonical(path, ec);
  if (ec) return fail(absl::NotFoundError(strCat("cannot load plugin '", path, "': ", ec.message())));
  p->status.path = canonical.string();
  std::optional<PluginStatus> already;
  {
    absl::MutexLock lock(&impl_->mu);
    for (LoadedPlugin* q : impl_->all)
      if (q->status.loaded && fs::equivalent(q->status.path, canonical, ec)) already = impl_->snapshot(*q);
  }
  if (already) {  // the same library through another path loads once
    delete p;
    finishSnapshot(*already);
    return *already;
  }

  // Note [Plugin file checks]: nothing of the file runs before these pass.
  absl::StatusOr<plugin_detail::PluginFileFacts> facts = plugin_detail::checkPluginFile(canonical.string());
  if (!facts.ok()) return fail(facts.status());
  if (std::string refusal = trustRefusal(canonical.string(), plugin_detail::TrustTarget::PluginFile, &*facts);
      !refusal.empty())
    return fail(absl::FailedPreconditionError(refusal));

  // Note [Plugin load breadcrumb]: from the plugin's constructors to the end
  // of its init.
  plugin_detail::LoadBreadcrumb breadcrumb(canonical.string());
  boost::dll::fs::error_code dll_ec;
  dlerror();
  p->library.load(canonical, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, dll_ec);
  if (dll_ec) {
    const char* why = dlerror();
    return fail(absl::InvalidArgumentError(
        strCat("cannot load plugin '", canonical.string(), "': ", why ? why : dll_ec.message(),
               " (a shared library built with backplane_add_plugin() is expected)")));
  }
  if (!p->library.has(BP_PLUGIN_QUERY_SYMBOL) || !p->library.has(BP_PLUGIN_INIT_SYMBOL)) {
    std::string missing = p->library.has(BP_PLUGIN_QUERY_SYMBOL) ? BP_PLUGIN_INIT_SYMBOL : BP_PLUGIN_QUERY_SYMBOL;
    p->library.unload();
    return fail(absl::InvalidArgumentError(
        strCat("'", canonical.string(), "' is not a Backplane plugin: it does not export ", missing,
               " (define the entry points with BACKPLANE_PLUGIN(...) from backplane/plugin.hpp)")));
  }
  auto query = p->library.get<const BP_PluginInfo*()>(BP_PLUGIN_QUERY_SYMBOL);
  const BP_PluginInfo* raw_info = nullptr;
  try {
    raw_info = query();
  } catch (...) {
    p->library.unload();
    return fail(absl::InvalidArgumentError(strCat(
        "plugin '", canonical.string(), "': backplane_plugin_query threw: ", statusFromCurrentException().message())));
  }
  absl::StatusOr<BP_PluginInfo> info = plugin_detail::readStruct(raw_info, "the plugin's BP_PluginInfo");
  if (!info.ok()) {
    p->library.unload();
    return fail(absl::InvalidArgumentError(strCat("plugin '", canonical.string(), "': ", info.status().message())));
  }
  if (info->magic != BP_PLUGIN_MAGIC) {
    p->library.unload();
    return fail(
        absl::InvalidArgumentError(strCat("plugin '", canonical.string(), "': bad magic 0x", std::hex, info->magic,
                                          std::dec, " in BP_PluginInfo (not a Backplane plugin, or a corrupt one)")));
  }
  p->status.abi_major = info->abi_major;
  p->status.abi_minor = info->abi_minor;
  if (info->abi_major != BP_ABI_MAJOR) {
    p->library.unload();
    return fail(absl::FailedPreconditionError(
        strCat("plugin '", canonical.string(), "' was built for plugin ABI ", info->abi_major, ".", info->abi_minor,
               " but this host speaks ABI ", BP_ABI_MAJOR, ".", BP_HEADER_ABI_MINOR, ": ",
               info->abi_major < BP_ABI_MAJOR
                   ? "the plugin is too old; rebuild it against this host's plugin SDK"
                   : "the plugin is newer than this host; upgrade the host or rebuild the plugin")));
  }
  if (info->abi_minor > BP_HEADER_ABI_MINOR) {
    p->library.unload();
    return fail(absl::FailedPreconditionError(
        strCat("plugin '", canonical.string(), "' needs plugin ABI ", info->abi_major, ".", info->abi_minor,
               " but this host provides ", BP_ABI_MAJOR, ".", BP_HEADER_ABI_MINOR,
               ": upgrade the host, or rebuild the plugin against the host's SDK")));
  }
  // Only now is the layout of the rest of BP_PluginInfo known.
  const std::string name_problem = pluginNameProblem(info->name);
  p->status.name = name_problem.empty() ? info->name : "";
  p->status.version = info->version ? info->version : "";
  if (!name_problem.empty()) {
    p->library.unload();
    return fail(absl::InvalidArgumentError(strCat("plugin '", canonical.string(), "': ", name_problem)));
  }
  breadcrumb.setName(p->status.name);
  {
    absl::MutexLock lock(&impl_->mu);
    if (LoadedPlugin* other = impl_->findLoaded(p->status.name)) {
      p->status.error = strCat("a plugin named '", p->status.name, "' is already loaded from ", other->status.path);
      impl_->all.push_back(p);
      p->library.unload();
      return absl::AlreadyExistsError(p->status.error);
    }
    auto free_slot = std::find(impl_->slot_used.begin(), impl_->slot_used.end(), false);
    if (free_slot == impl_->slot_used.end()) {
      p->status.error = strCat("too many plugins loaded at once (", plugin_detail::kMaxPluginSlots, ")");
      impl_->all.push_back(p);
      p->library.unload();
      return absl::ResourceExhaustedError(p->status.error);
    }
    *free_slot = true;
    p->slot = static_cast<int>(free_slot - impl_->slot_used.begin());
  }

  if (p->library.has(BP_PLUGIN_SHUTDOWN_SYMBOL))
    p->shutdown = p->library.get<void(BP_Plugin*)>(BP_PLUGIN_SHUTDOWN_SYMBOL);
  auto init = p->library.get<BP_Error*(const BP_HostApi*, BP_Plugin*)>(BP_PLUGIN_INIT_SYMBOL);
  p->initializing = true;
  BP_Error* err = nullptr;
  absl::Status thrown;
  try {
    err = init(&plugin_detail::hostApi(), reinterpret_cast<BP_Plugin*>(p));
  } catch (...) {
    thrown = statusFromCurrentException();
  }
  p->initializing = false;
  if (err || !thrown.ok()) {
    std::string why;
    if (err) {
      why = strCat("init failed: ", plugin_detail::hostApi().error_message(err));
      plugin_detail::hostApi().error_free(err);
    } else {
      why = strCat("init threw an exception (plugins must return errors, not throw): ", thrown.message());
    }
    impl_->rollback(*p);
    p->library.unload();
    return fail(
        absl::FailedPreconditionError(strCat("plugin '", p->status.name, "' (", canonical.string(), "): ", why)));
  }
  p->status.loaded = true;
  p->status.error.clear();
  PluginStatus status;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->all.push_back(p);
    status = impl_->snapshot(*p);
  }
  finishSnapshot(status);
  return status;
}

namespace {
// An object of libbackplane.so whose address dladdr() maps to the library's
// file (Note [Default plugin directory]).
const char kLibraryAnchor = 0;
}  // namespace

// Note [Default plugin directory]
// The default plugin directory is <directory of libbackplane.so>/backplane/plugins,
// found at run time: dladdr() on an object of this library names the file
// the dynamic loader opened. No path is compiled in, so an install moved to
// another prefix finds its own plugins, and never the builder's. The build
// tree has the install's layout (build/lib/libbackplane.so and the in-tree
// plugins in build/lib/backplane/plugins), so the same rule finds the build
// tree's plugins when the library runs from the build tree, and the
// library never needs to know which of the two it is in. An application
// that copies libbackplane.so elsewhere copies the plugins with it, or
// names them in BACKPLANE_PLUGIN_PATH.
// The directory is resolved when the library is loaded, before the
// application can change its working directory: dli_fname is relative when
// the loader found the library through a relative LD_LIBRARY_PATH entry.
namespace {
std::string resolveDefaultDirectory() {
  namespace fs = std::filesystem;
  Dl_info info{};
  if (dladdr(&kLibraryAnchor, &info) == 0 || info.dli_fname == nullptr || *info.dli_fname == '\0') return {};
  std::error_code ec;
  fs::path library = fs::canonical(info.dli_fname, ec);  // resolves the soname links and "bin/../lib"
  if (ec) library = fs::absolute(info.dli_fname, ec).lexically_normal();
  if (ec) return {};
  return (library.parent_path() / "backplane" / "plugins").string();
}
const std::string& defaultDirectory() {
  static const std::string dir = resolveDefaultDirectory();
  return dir;
}
// Resolves it at load time (a call during another library's static
// initialisation resolves it then, through the function-local static).
[[maybe_unused]] const std::string& g_resolve_at_load = defaultDirectory();
}  // namespace

std::vector<std::string> PluginRegistry::defaultDirectories() {
  const std::string& dir = defaultDirectory();
  if (dir.empty()) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      std::fprintf(stderr,
                   "backplane: warning: cannot tell where libbackplane.so was loaded from (dladdr failed), so there "
                   "is no default plugin directory; name plugins in BACKPLANE_PLUGIN_PATH\n");
    });
    return {};
  }
  return {dir};
}

// Note [Plugin path entries]
// BACKPLANE_PLUGIN_PATH entries that cannot be used are skipped, each with a
// warning on stderr once and a line in skippedSources() (`backplane
// plugins` shows them): a typo in a CI script's path must not go unnoticed.
// A relative entry is skipped too: it would name another folder in every
// working directory, and running code found relative to wherever a program
// was started is how a hostile folder gets its plugin loaded. Empty entries
// ("a::b", or a trailing ':' from "$DIR:$BACKPLANE_PLUGIN_PATH") mean
// nothing and are skipped quietly. A default directory that does not exist
// is normal (a build without plugins) and quiet as well.
std::vector<PluginStatus> PluginRegistry::loadAll() {
  namespace fs = std::filesystem;
  struct Source {
    std::string path;
    bool from_environment;
  };
  std::vector<Source> sources;
  if (const char* env = std::getenv("BACKPLANE_PLUGIN_PATH")) {
    std::string_view rest = env;
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string_view part = rest.substr(0, colon);
      if (!part.empty() && part[0] != '/') {
        impl_->skipSource(std::string(part),
                          "is a relative path (it would name another folder in every working directory); write it "
                          "as an absolute path");
      } else if (!part.empty()) {
        sources.push_back({std::string(part), true});
      }
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  for (const std::string& d : defaultDirectories()) sources.push_back({d, false});

  std::vector<PluginStatus> result;
  auto loadInto = [&](const std::string& f) {
    absl::StatusOr<PluginStatus> s = load(f);
    if (s.ok()) {
      result.push_back(*s);
    } else {
      std::vector<PluginStatus> all = plugins();
      result.push_back(all.back());
    }
  };
  for (const Source& source : sources) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(source.path, ec);
    if (ec) {
      if (!source.from_environment) continue;
      if (ec == std::errc::no_such_file_or_directory)
        impl_->skipSource(source.path, "does not exist");
      else if (ec == std::errc::too_many_symbolic_link_levels)
        impl_->skipSource(source.path, "is a symbolic link loop (too many levels of symbolic links)");
      else
        impl_->skipSource(source.path, strCat("cannot be resolved: ", ec.message()));
      continue;
    }
    if (!fs::is_directory(canonical, ec)) {
      loadInto(source.path);  // a file, or something load() says is no plugin
      continue;
    }
    // Note [Plugin trust]: anyone who can create a file in a scanned folder
    // adds a plugin, sticky bit or not.
    const std::string refusal =
        trustRefusal(canonical.string(), plugin_detail::TrustTarget::ScannedFolder, /*facts=*/nullptr);
    std::vector<std::string> files;
    fs::directory_iterator it(canonical, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".so") files.push_back(it->path().string());
    if (ec && source.from_environment) {
      impl_->skipSource(source.path, strCat("is a folder that cannot be read: ", ec.message()));
    } else if (ec) {
      plugin_detail::warnOnce(strCat("default:", source.path), strCat("backplane: warning: the default plugin folder '",
                                                                      source.path, "' cannot be read: ", ec.message()));
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      if (refusal.empty())
        loadInto(f);
      else
        result.push_back(impl_->recordFailure(f, refusal));
    }
  }
  return result;
}

std::vector<PluginSourceProblem> PluginRegistry::skippedSources() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->skipped_sources;
}

absl::Status PluginRegistry::unload(std::string_view name) {
  absl::MutexLock load_lock(&impl_->load_mu);
  LoadedPlugin* p;
  {
    absl::MutexLock lock(&impl_->mu);
    p = impl_->findLoaded(name);
    if (!p) {
      std::string loaded;
      for (LoadedPlugin* q : impl_->all)
        if (q->status.loaded) loaded += (loaded.empty() ? "" : ", ") + q->status.name;
      return absl::NotFoundError(
          strCat("no plugin named '", name, "' is loaded (loaded: ", loaded.empty() ? "none" : loaded, ")"));
    }
  }
  auto alive_tensors = [&]() -> absl::Status {
    int64_t live = p->live_allocations.load(std::memory_order_acquire);
    if (live == 0) return absl::OkStatus();
    std::string types;
    for (PluginDeviceInterface* d : p->devices) types += (types.empty() ? "" : ", ") + d->name();
    return absl::FailedPreconditionError(strCat("cannot unload plugin '", name, "': ", live,
                                                " allocation(s) it made on ", types,
                                                " are still alive; destroy those tensors first"));
  };
  if (absl::Status s = alive_tensors(); !s.ok()) return s;

  // Stop new calls from entering, then wait for running ones to leave. Calls
  // that find the gate closed wait for the outcome (Note [Refused unloads]).
  p->gate.unloading.store(true, std::memory_order_seq_cst);
  p->gate.alive.store(false, std::memory_order_seq_cst);
  auto reopen = [&] {
    p->gate.alive.store(true, std::memory_order_seq_cst);
    p->gate.unloading.store(false, std::memory_order_seq_cst);
  };
  auto& tracker = plugin_detail::CallTracker::instance();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (tracker.anyInside(p->slot)) {
    if (std::chrono::steady_clock::now() > deadline) {
      reopen();
      return absl::FailedPreconditionError(
          strCat("cannot unload plugin '", name, "': a call into it has been running for more than 5 s"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  if (absl::Status s = alive_tensors(); !s.ok()) {
    reopen();
    return s;
  }
  {
    // From here on, status readers see the plugin as gone, never as loaded
    // with its registrations half removed.
    absl::MutexLock lock(&impl_->mu);
    p->status.loaded = false;
    p->status.error = "unloaded";
  }
  // Calls waiting for the outcome now refuse (alive stays cleared).
  p->gate.unloading.store(false, std::memory_order_seq_cst);
  impl_->rollback(*p);
  if (p->shutdown) {
    try {
      p->shutdown(reinterpret_cast<BP_Plugin*>(p));
    } catch (...) {
      logLine(strCat("backplane: warning: plugin '", name, "' shutdown threw; ignored"));
    }
  }
  p->library.unload();
  return absl::OkStatus();
}

std::vector<PluginStatus> PluginRegistry::plugins() const {
  std::vector<PluginStatus> out;
  {
    absl::MutexLock lock(&impl_->mu);
    for (LoadedPlugin* p : impl_->all) out.push_back(impl_->snapshot(*p));
  }
  for (PluginStatus& s : out) finishSnapshot(s);
  return out;
}

}  // namespace backplane
