#include "backplane/dispatch/dispatcher.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sstream>
#include <tuple>

#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/boxed_arguments.h"
#include "backplane/dispatch/builtin_kernels.h"
#include "backplane/dispatch/schema_signature.h"

namespace backplane {

const char* kernelKindName(KernelKind k) {
  switch (k) {
    case KernelKind::Missing: return "missing";
    case KernelKind::Native: return "native";
    case KernelKind::Composite: return "composite";
    case KernelKind::BackendFallback: return "backend_fallback";
    case KernelKind::CpuFallback: return "cpu_fallback";
    case KernelKind::Fallthrough: return "fallthrough";
  }
  return "?";
}

std::optional<KernelKind> kernelKindFromName(std::string_view name) {
  for (KernelKind k : kAllKernelKinds)
    if (name == kernelKindName(k)) return k;
  return std::nullopt;
}

OperatorEntry::OperatorEntry(OperatorName name) : name_(std::move(name)), qualified_name_(name_.qualifiedName()) {}

// ------------------------------------------------------------ handles

void RegistrationHandle::reset() {
  if (id_ != 0) Dispatcher::singleton().deregister(std::exchange(id_, 0));
}

const FunctionSchema& OperatorHandle::schema() const {
  const FunctionSchema* s = entry_->schema();
  if (!s) [[unlikely]] {
    BP_THROW(kFailedPrecondition, "operator ", entry_->name().qualifiedName(),
             " is not defined (its definition was removed or never registered); load the library "
             "or plugin that defines it");
  }
  return *s;
}

namespace {

// Layout and MemoryFormat travel as ints, with PyTorch's numbering.
int64_t enumDefault(const std::string& name) {
  if (name == "strided" || name == "contiguous_format") return 0;
  if (name == "preserve_format") return 1;
  if (name == "channels_last") return 2;
  BP_THROW(kInvalidArgument, "unknown layout or memory format default '", name,
           "'; known: strided, contiguous_format, preserve_format, channels_last");
}

IValue defaultToIValue(const DefaultValue& d, const SchemaType& type) {
  return std::visit(
      [&](const auto& v) -> IValue {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return IValue();
        else if constexpr (std::is_same_v<T, bool>) {
          return type.base == BaseType::Scalar ? IValue(Scalar(v)) : IValue(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (type.base == BaseType::Float) return IValue(static_cast<double>(v));
          if (type.base == BaseType::Scalar) return IValue(Scalar(v));
          return IValue(v);
        } else if constexpr (std::is_same_v<T, double>) {
          return type.base == BaseType::Scalar ? IValue(Scalar(v)) : IValue(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (type.base == BaseType::Device) return IValue(Device::fromString(v));
          if (type.base == BaseType::ScalarType) return IValue(valueOrThrow(parseScalarType(v)));
          if (type.base == BaseType::Layout || type.base == BaseType::MemoryFormat) return IValue(enumDefault(v));
          return IValue(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          if (type.base == BaseType::Float) return IValue(std::vector<double>(v.begin(), v.end()));
          return IValue(v);
        } else {
          return IValue(v);
        }
      },
      d);
}

bool ivalueMatches(const IValue& v, const SchemaType& t) {
  if (v.isNone()) return t.is_optional;
  if (t.is_list) {
    switch (t.base) {
      case BaseType::Tensor: return v.isTensorList() || (t.element_optional && v.isOptionalTensorList());
      case BaseType::Int:
      case BaseType::Layout:
      case BaseType::MemoryFormat: return v.isIntList();
      case BaseType::Float: return v.isDoubleList() || v.isIntList();
      case BaseType::Bool: return v.isBoolList();
      default: return false;
    }
  }
  switch (t.base) {
    case BaseType::Tensor: return v.isTensor();
    case BaseType::Int:
    case BaseType::Layout:
    case BaseType::MemoryFormat: return v.isInt();
    case BaseType::Float: return v.isDouble() || v.isInt();
    case BaseType::Bool: return v.isBool();
    case BaseType::Str: return v.isString();
    case BaseType::Scalar: return v.isNumber();
    case BaseType::ScalarType: return v.isScalarType();
    case BaseType::Device: return v.isDevice();
  }
  return false;
}

// Note [Boxed argument conversions]
// The schema check (ivalueMatches) accepts an int[] for a float[] and a
// Tensor[] for a Tensor?[]: what a caller building a boxed call from lists
// of numbers or of tensors naturally holds. A kernel unboxes the schema's
// own type (boxing.h: toDoubleList, toOptionalTensorList), so callBoxed
// converts such a value once, after the check; a value that is already of
// the schema's type costs one tag comparison. (A single int for a float and
// any number for a Scalar need nothing: toDouble and toScalar take them.)
// fuzz_library_registration found the gap: typed kernels failed to unbox
// arguments that the check had let through.
void convertToSchemaType(IValue& v, const SchemaType& t) {
  if (!t.is_list) return;
  if (t.base == BaseType::Float && v.isIntList()) {
    const std::vector<int64_t>& ints = v.toIntList();
    v = IValue(std::vector<double>(ints.begin(), ints.end()));
  } else if (t.base == BaseType::Tensor && t.element_optional && v.isTensorList()) {
    std::vector<TensorBase>& tensors = v.toTensorList();
    v = IValue(std::vector<std::optional<TensorBase>>(std::make_move_iterator(tensors.begin()),
                                                      std::make_move_iterator(tensors.end())));
  }
}

}  // namespace

IValue defaultArgumentValue(const Argument& arg) {
  BP_CHECK(arg.default_value.has_value(), "argument '", arg.name, "' has no default value");
  return defaultToIValue(*arg.default_value, arg.type);
}

void completeBoxedArguments(const FunctionSchema& s, Stack& stack) {
  const auto& args = s.arguments();
  BP_CHECK(stack.size() <= args.size(), s.name().qualifiedName(), " takes ", args.size(),
           " arguments but the boxed call passed ", stack.size(), "; schema: ", s.toString());
  for (size_t i = stack.size(); i < args.size(); ++i) {
    BP_CHECK(args[i].default_value.has_value(), s.name().qualifiedName(), ": missing argument '", args[i].name,
             "' (position ", i, ", type ", args[i].type.str(), ") has no default; the boxed call passed only ",
             stack.size(), " of ", args.size(), " arguments");
    stack.push_back(defaultToIValue(*args[i].default_value, args[i].type));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    BP_CHECK(ivalueMatches(stack[i], args[i].type), s.name().qualifiedName(), ": argument '", args[i].name,
             "' (position ", i, ") must be ", args[i].type.str(), " but got ", stack[i].tagName(), " (", stack[i].str(),
             ")");
    convertToSchemaType(stack[i], args[i].type);  // Note [Boxed argument conversions]
  }
}

void OperatorHandle::callBoxed(Stack& stack) const {
  const FunctionSchema& s = schema();
  const auto& args = s.arguments();
  completeBoxedArguments(s, stack);
  DispatchKeySet ks = detail::computeDispatchKeySet(stack, args.size());
  if (const uint64_t written = entry_->writtenArguments()) detail::bumpWrittenVersions(written, stack, args.size());
  if (const KernelRecord* meta = entry_->meta()) {
    Stack copy(stack.begin(), stack.end());  // the meta kernel consumes its arguments
    meta->kernel.callBoxed(*this, ks, &copy);
    if (meta->completes && copy.size() == 1 && copy.front().toBool()) {
      // The meta computed the result into `out`, the last argument, which
      // is the op's one return (Note [Meta kernels]).
      IValue out = std::move(stack.back());
      stack.clear();
      stack.push_back(std::move(out));
      return;
    }
  }
  entry_->lookupBoxed(ks, stack).kernel.callBoxed(*this, ks, &stack);
  if (stack.size() != s.returns().size()) [[unlikely]] {
    detail::throwBadReturnCount(*this, s.returns().size(), stack.size());
  }
}

void OperatorHandle::redispatchBoxed(DispatchKeySet ks, Stack& stack) const {
  entry_->lookupBoxed(ks, stack).kernel.callBoxed(*this, ks, &stack);
}

void OperatorHandle::redispatchBoxedSameArguments(DispatchKeySet ks, Stack& stack) const {
  entry_->lookupBoxed(ks, stack, /*check_accepted=*/false).kernel.callBoxed(*this, ks, &stack);
}

void OperatorHandle::serveDeclinedBoxed(DispatchKeySet ks, const OperatorKernel* functor, const std::string& reason,
                                        Stack& stack) const {
  const KernelRecord& from = detail::declinedRecord(*entry_, ks, functor);
  const KernelRecord& to = entry_->servingRecord(*from.declined.load(std::memory_order_acquire), stack);
  detail::DeclineScope scope(*entry_, from, to, reason);
  to.kernel.callBoxed(*this, ks, &stack);
}

namespace detail {

DeclineNote& threadDeclineNote() {
  thread_local DeclineNote note;
  return note;
}

DeclineScope::DeclineScope(const OperatorEntry& op, const KernelRecord& from, const KernelRecord& to,
                           const std::string& reason)
    : op_(op), kind_(to.kind) {
  op.recordDecline(from.key);
  DeclineNote& note = threadDeclineNote();
  outer_reason_ = note.reason;
  note.op = &op;
  note.served_by = to.kind;
  note.reason = &reason;
  ++note.count;
}

DeclineScope::~DeclineScope() {
  // Nested declines (inside the call) overwrote the note; after the call it
  // says this one, for whoever reads it then (the profiler).
  DeclineNote& note = threadDeclineNote();
  note.op = &op_;
  note.served_by = kind_;
  note.reason = outer_reason_;
}

const KernelRecord& declinedRecord(const OperatorEntry& op, DispatchKeySet ks, const OperatorKernel* functor) {
  const KernelRecord* r = op.recordOf(ks, functor);
  if (r == nullptr || r->declined.load(std::memory_order_acquire) == nullptr) [[unlikely]] {
    throwError(absl::StatusCode::kUnavailable,
               strCat(op.qualifiedName(), ": its ", dispatchKeyName(ks.highestBackendKey()),
                      " kernel declined the call while the operator's kernels were being registered or removed (a "
                      "plugin loading or unloading); call again"));
  }
  return *r;
}

}  // namespace detail

std::optional<DtypeSet> OperatorHandle::declaredDtypes(DispatchKey k) const {
  const KernelRecord& r = entry_->slot(k);
  if (r.kind != KernelKind::Native || r.dtypes == 0) return std::nullopt;
  return valueOrThrow(DtypeSet::fromMask(r.dtypes));
}

std::optional<KernelKind> OperatorHandle::declinedKind(DispatchKey k) const {
  const KernelRecord& r = entry_->slot(k);
  if (r.dtypes == 0) return std::nullopt;
  const KernelRecord* declined = r.declined.load(std::memory_order_acquire);
  return declined ? std::optional<KernelKind>(declined->kind) : std::nullopt;
}

const KernelRecord& OperatorEntry::servingRecord(const KernelRecord& slot, const Stack& stack) const {
  const FunctionSchema* s = schema();
  const size_t n = s ? std::min(s->arguments().size(), stack.size()) : stack.size();
  const KernelRecord* r = &slot;
  const uint64_t exempt = dtypeFixedArguments();
  while (r->dtypes != 0 && detail::firstRefusedDtype(r->dtypes, stack, n, exempt).has_value())
    r = r->declined.load(std::memory_order_acquire);
  return *r;
}

std::string OperatorHandle::dumpState() const {
  std::ostringstream os;
  const FunctionSchema* s = entry_->schema();
  os << "operator " << entry_->name().qualifiedName()
     << "\n  schema: " << (s ? s->toString() : std::string("<undefined>")) << "\n";
  for (int k = 0; k < kNumDispatchKeys; ++k) {
    const KernelRecord& r = entry_->slot(static_cast<DispatchKey>(k));
    if (r.kind == KernelKind::Missing || r.kind == KernelKind::Fallthrough) continue;
    os << "  " << dispatchKeyName(static_cast<DispatchKey>(k)) << ": " << kernelKindName(r.kind);
    if (!r.debug.empty()) os << " [" << r.debug << "]";
    if (r.dtypes != 0) {
      // Note [Declared dtypes]: which dtypes it serves, and who serves the rest.
      const KernelRecord* declined = r.declined.load(std::memory_order_acquire);
      os << " dtypes (" << valueOrThrow(DtypeSet::fromMask(r.dtypes)).str()
         << "), others: " << (declined ? kernelKindName(declined->kind) : "?");
      if (declined && !declined->debug.empty()) os << " [" << declined->debug << "]";
    }
    os << "\n";
  }
  for (const Dispatcher::InactiveKernel& k : Dispatcher::singleton().inactiveKernels()) {
    if (k.op != entry_->qualifiedName()) continue;
    os << "  " << dispatchKeyName(k.key) << ": inactive";
    if (!k.registrant.empty()) os << " [" << k.registrant << "]";
    os << ": " << k.reason << "\n";
  }
  return os.str();
}

namespace detail {

std::optional<ScalarType> firstRefusedDtype(uint64_t mask, const Stack& stack, size_t num_args, uint64_t exempt) {
  std::optional<ScalarType> refused;
  auto check = [&](const TensorBase& t) {
    if (!refused && !tensorDtypeIn(mask, t)) refused = t.dtype();
  };
  const size_t first = stack.size() - std::min(num_args, stack.size());
  for (size_t i = first; i < stack.size() && !refused; ++i) {
    if (i - first < 64 && ((exempt >> (i - first)) & 1) != 0) continue;
    const IValue& v = stack[i];
    switch (v.tag()) {
      case IValue::Tag::Tensor: check(v.toTensor()); break;
      case IValue::Tag::TensorList:
        for (const TensorBase& t : v.toTensorList()) check(t);
        break;
      case IValue::Tag::OptionalTensorList:
        for (const auto& t : v.toOptionalTensorList())
          if (t) check(*t);
        break;
      default: break;
    }
  }
  return refused;
}

}  // namespace detail

void OperatorEntry::checkAcceptedDtypes(const Stack& stack) const {
  const uint64_t mask = acceptedDtypes();
  if (mask == 0) return;
  const FunctionSchema* s = schema();
  const size_t n = std::min(s ? s->arguments().size() : stack.size(), stack.size());
  // Every call passes here: the common case (nothing refused) allocates
  // nothing; only a refusal looks for the argument to name.
  if (!detail::firstRefusedDtype(mask, stack, n).has_value()) [[likely]]
    return;
  for (size_t i = 0; i < n; ++i) {
    const Stack one{stack[stack.size() - n + i]};
    const std::optional<ScalarType> refused = detail::firstRefusedDtype(mask, one, 1);
    if (!refused) continue;
    const std::string arg = s ? s->arguments()[i].name : strCat("#", i);
    const char* note = accepted_note_.load(std::memory_order_relaxed);
    BP_THROW(kInvalidArgument, qualifiedName(), ": argument '", arg, "' has dtype ", scalarTypeName(*refused),
             ", which this op does not accept (accepted: ", valueOrThrow(DtypeSet::fromMask(mask)).str(), "); ", note,
             *note ? " " : "", "Convert it to an accepted dtype first (e.g. with .to())");
  }
}

namespace detail {

void bumpWrittenVersions(uint64_t written, const Stack& stack, size_t num_args) {
  const size_t base = stack.size() - num_args;
  for (size_t i = 0; i < num_args && i < 64; ++i) {
    if (!((written >> i) & 1)) continue;
    const IValue& v = stack[base + i];
    if (v.isTensor())
      bumpVersion(v.toTensor());
    else if (v.isTensorList())
      for (const TensorBase& t : v.toTensorList()) bumpVersion(t);
  }
}

DispatchKeySet computeDispatchKeySet(const Stack& stack, size_t num_args) {
  uint64_t bits = 0;
  for (size_t i = stack.size() - std::min(num_args, stack.size()); i < stack.size(); ++i) {
    const IValue& v = stack[i];
    switch (v.tag()) {
      case IValue::Tag::Tensor: addTensorKeys(bits, v.toTensor()); break;
      case IValue::Tag::TensorList:
        for (const TensorBase& t : v.toTensorList()) addTensorKeys(bits, t);
        break;
      case IValue::Tag::OptionalTensorList:
        for (const auto& t : v.toOptionalTensorList())
          if (t) addTensorKeys(bits, *t);
        break;
      case IValue::Tag::Device: ArgTraits<Device>::addKeys(bits, v.toDevice()); break;
      default: break;
    }
  }
  return finishKeySet(bits);
}

std::string typedSignatureMismatch(const OperatorEntry& entry, const std::string& sig) {
  const FunctionSchema* s = entry.schema();
  if (!s) {
    return strCat("typed<>() on ", entry.name().qualifiedName(),
                  ", which is not defined; load the library or plugin that defines it");
  }
  std::string expected = cppSignatureForSchema(*s);
  if (expected == sig) return {};
  return strCat("typed<>() on ", s->name().qualifiedName(), " with C++ signature ", sig, ", but the schema ",
                s->toString(), " has the C++ signature ", expected,
                " (see Note [Canonical C++ signatures] in boxing.h)");
}

void throwMetaCompletedWithoutOut(const OperatorEntry& entry) {
  BP_THROW(kInternal, "the meta kernel of ", entry.qualifiedName(), " computed the result itself, but this ",
           "typed call's C++ signature does not return its last argument; call it with the schema's signature");
}

void throwBadReturnCount(const OperatorHandle& op, size_t expected, size_t got) {
  BP_THROW(kInternal, "a kernel of ", op.operatorName().qualifiedName(), " left ", got,
           " values on the stack but the schema has ", expected,
           " returns; a boxed kernel must pop its arguments and push exactly its returns");
}

void throwBadArgumentCount(const OperatorHandle& op, size_t expected, size_t got) {
  BP_THROW(kInternal, "a kernel of ", op.operatorName().qualifiedName(), " needs ", expected,
           " arguments but the stack holds only ", got);
}

void rethrowInComposite(const OperatorKernel* context, DispatchKeySet ks) {
  const auto& c = static_cast<const CompositeContext&>(*context);
  try {
    throw;
  } catch (const Error& e) {
    if (e.message().find(c.ns_prefix) != std::string::npos) throw;
    throw Error(e.code(), strCat(c.op, " on ", dispatchKeyName(ks.highestBackendKey()), ": ", e.message()));
  } catch (...) {
    const absl::Status s = statusFromCurrentException();
    throw Error(s.code(), strCat(c.op, " on ", dispatchKeyName(ks.highestBackendKey()), ": ", s.message()));
  }
}

}  // namespace detail

void KernelFunction::fallthroughKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  // Reached only in the instant a slot turns into a fallthrough while its
  // bit is still dispatchable (Note [Lock-free dispatch]): skip the key.
  op.redispatchBoxedSameArguments(ks & DispatchKeySet::below(ks.highestPriorityKey()), *stack);
}

KernelFunction KernelFunction::makeFallthrough() {
  KernelFunction k;
  k.boxed_ = &fallthroughKernel;
  return k;
}

// ---------------------------------------------------------- Dispatcher

namespace detail {
absl::Mutex& registrationMutex() {
  static absl::Mutex* mu = new absl::Mutex();  // never destroyed: see operator_entry.h
  return *mu;
}
}  // namespace detail

Dispatcher& Dispatcher::singleton() {
  static Dispatcher* d = new Dispatcher();  // never destroyed: see header
  return *d;
}

Dispatcher::Dispatcher() {
  {
    absl::MutexLock lock(&detail::registrationMutex());
    missing_ = newRecord(KernelFunction::makeFromBoxedFunction(&missingKernel), KernelKind::Missing,
                         DispatchKey::Undefined, "");
    fallthrough_ = newRecord(KernelFunction::makeFallthrough(), KernelKind::Fallthrough, DispatchKey::Undefined, "");
    cpu_fallback_ = newRecord(KernelFunction::makeFromBoxedFunction(&cpuFallbackKernel), KernelKind::CpuFallback,
                              DispatchKey::Undefined, "built-in CPU fallback");
  }

  if (const char* mode = std::getenv("BACKPLANE_FALLBACK")) {
    std::string_view m = mode;
    if (m == "error")
      fallback_mode_ = FallbackMode::Error;
    else if (m == "silent")
      fallback_mode_ = FallbackMode::Silent;
    else if (m == "warn" || m.empty())
      fallback_mode_ = FallbackMode::Warn;
    else
      logLine(strCat("backplane: warning: BACKPLANE_FALLBACK='", m, "' is not one of warn, silent, error; using warn"));
  }
  // The tracing kernel is always registered; it only runs while its key is
  // included (setTracing), so it costs nothing otherwise. The profiler
  // registers its own (runtime/src/profiler.cc), and the standard operators
  // register themselves (Note [Registering the standard operators] in
  // ops/src/standard_ops.cc): both are layers above this one.
  tracing_fallback_ = valueOrThrow(registerFallback(
      DispatchKey::Tracing, KernelFunction::makeFromBoxedFunction(&tracingKernel), "built-in tracing"));
  if (const char* trace = std::getenv("BACKPLANE_TRACE"); trace && std::strcmp(trace, "0") != 0 && *trace)
    setTracing(true);
}

void Dispatcher::setGlobalKey(DispatchKey key, bool on) {
  uint64_t bit = DispatchKeySet(key).raw();
  if (on)
    detail::g_global_included_keys.fetch_or(bit);
  else
    detail::g_global_included_keys.fetch_and(~bit);
}

bool Dispatcher::hasGlobalKey(DispatchKey key) {
  return DispatchKeySet::fromRaw(detail::g_global_included_keys.load()).has(key);
}

void Dispatcher::setTracing(bool on) { setGlobalKey(DispatchKey::Tracing, on); }
bool Dispatcher::tracing() const { return hasGlobalKey(DispatchKey::Tracing); }
void Dispatcher::setProfiling(bool on) { setGlobalKey(DispatchKey::Profiling, on); }
bool Dispatcher::profiling() const { return hasGlobalKey(DispatchKey::Profiling); }

const KernelRecord* Dispatcher::newRecord(KernelFunction kernel, KernelKind kind, DispatchKey key, std::string debug,
                                          DtypeSet dtypes, bool completes, bool cpu_scalars) {
  records_.push_back(std::unique_ptr<KernelRecord>(
      new KernelRecord{std::move(kernel), kind, key, std::move(debug), next_id_, dtypes.mask()}));
  records_.back()->completes = completes;
  records_.back()->cpu_scalars = cpu_scalars;
  return records_.back().get();
}

OperatorEntry& Dispatcher::entryFor(const OperatorName& name) {
  auto& slot = ops_[name.qualifiedName()];
  if (!slot) {
    slot = std::make_unique<OperatorEntry>(name);
    updateTable(*slot);
  }
  return *slot;
}

const KernelRecord* Dispatcher::computeSlot(const OperatorEntry& op, DispatchKey key, bool skip_impls) const {
  const int k = static_cast<int>(key);
  if (op.schema_.load(std::memory_order_relaxed) == nullptr || key == DispatchKey::Undefined) return missing_;
  if (!skip_impls) {
    if (const KernelRecord* impl = newestFittingImpl(op, key)) return impl;
  }
  if (isBackendKey(key)) {
    if (!op.composites_.empty()) return op.composites_.back();
    if (!fallbacks_[k].empty()) return fallbacks_[k].back();
    const KernelRecord* cpu = newestFittingImpl(op, DispatchKey::CPU);
    if (key != DispatchKey::CPU && cpu && cpu->kind == KernelKind::Native) return cpu_fallback_;
    return missing_;
  }
  if (!fallbacks_[k].empty()) return fallbacks_[k].back();
  return fallthrough_;
}

const KernelRecord* Dispatcher::newestFittingImpl(const OperatorEntry& op, DispatchKey key) {
  const auto& stack = op.impls_[static_cast<int>(key)];
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    auto unfit = std::find_if(op.unfit_.begin(), op.unfit_.end(), [&](const auto& u) { return u.first == *it; });
    if (unfit == op.unfit_.end()) return *it;
  }
  return nullptr;
}

// Note [Declared dtypes]: one set covers every tensor argument but those
// the op's definer marks as dtype-fixed (OperatorEntry::
// setDtypeFixedArguments; the standard ops: Note [Dtype-fixed arguments] in
// dispatcher/ops/src/standard_ops.cc), which a declared set skips.
const KernelRecord* Dispatcher::computeDeclined(const OperatorEntry& op, DispatchKey key,
                                                const KernelRecord* impl) const {
  // Every impl at a backend key may decline a call, by its declared dtypes
  // or at run time (Note [Declined calls]).
  if (!isBackendKey(key)) return nullptr;
  const auto& stack = op.impls_[static_cast<int>(key)];
  auto it = std::find(stack.rbegin(), stack.rend(), impl);
  for (++it; it != stack.rend(); ++it) {
    const bool unfit = std::any_of(op.unfit_.begin(), op.unfit_.end(), [&](const auto& u) { return u.first == *it; });
    if (!unfit) return *it;
  }
  // A fallthrough registered as this backend key's fallback means "nothing
  // here"; as the target of a declined call it would redispatch to the same
  // key's slot, this kernel, again. Nothing else serves the call.
  const KernelRecord* next = computeSlot(op, key, /*skip_impls=*/true);
  return next->kind == KernelKind::Fallthrough ? missing_ : next;
}

void Dispatcher::updateTable(OperatorEntry& op) {
  uint64_t dispatchable = 0;
  for (int k = 0; k < kNumDispatchKeys; ++k) {
    // Note [Declared dtypes], Note [Declined calls]: `declined` is set
    // before the record can be seen in a slot (the slot's release store
    // publishes it).
    for (const KernelRecord* impl : op.impls_[k])
      impl->declined.store(computeDeclined(op, static_cast<DispatchKey>(k), impl), std::memory_order_release);
    const KernelRecord* r = computeSlot(op, static_cast<DispatchKey>(k));
    op.table_[k].store(r, std::memory_order_release);
    if (r->kind != KernelKind::Fallthrough) dispatchable |= uint64_t{1} << k;
  }
  op.dispatchable_.store(dispatchable, std::memory_order_release);
}

RegistrationHandle Dispatcher::addRegistration(Registration r) {
  uint64_t id = next_id_++;
  registrations_.emplace(id, r);
  return RegistrationHandle(id);
}

namespace {
// OperatorEntry::writtenArguments() of an op with this schema.
uint64_t writtenArgumentMask(const FunctionSchema& schema) {
  uint64_t mask = 0;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size() && i < 64; ++i)
    if (args[i].alias && args[i].alias->is_write) mask |= uint64_t{1} << i;
  return mask;
}
}  // namespace

absl::StatusOr<RegistrationHandle> Dispatcher::registerDef(std::string_view schema_text, std::string debug) {
  absl::StatusOr<FunctionSchema> parsed = FunctionSchema::parse(schema_text);
  if (!parsed.ok()) return parsed.status();
  std::vector<std::string> warnings;  // logged after the lock is released
  absl::StatusOr<RegistrationHandle> handle = [&]() -> absl::StatusOr<RegistrationHandle> {
    absl::MutexLock lock(&detail::registrationMutex());
    OperatorEntry& op = entryFor(parsed->name());
    if (op.schema_.load(std::memory_order_relaxed) != nullptr) {
      return absl::AlreadyExistsError(strCat(
          "operator ", parsed->name().qualifiedName(), " is already defined", op.def_debug_.empty() ? "" : " by ",
          op.def_debug_, "; an operator is defined once: give a new variant its own overload name (ns::op.name)"));
    }
    // Kernels registered under an earlier definition must still fit this
    // one; kernels registered for a later definition that do not fit stay
    // inactive (Note [Kernels for operators defined later]).
    std::string expected = cppSignatureForSchema(*parsed);
    std::vector<std::pair<const KernelRecord*, std::string>> unfit;
    for (int k = 0; k < kNumDispatchKeys; ++k) {
      for (const KernelRecord* r : op.impls_[k]) {
        if (r->kernel.cppSignature().empty() || r->kernel.cppSignature() == expected) continue;
        if (std::find(op.when_defined_.begin(), op.when_defined_.end(), r) == op.when_defined_.end()) {
          return absl::InvalidArgumentError(strCat("cannot define ", parsed->toString(),
                                                   ": a kernel registered for it (", r->debug, ") has C++ signature ",
                                                   r->kernel.cppSignature(), " but this schema needs ", expected));
        }
        unfit.emplace_back(
            r, strCat("the ", dispatchKeyName(r->key), " kernel for ", parsed->name().qualifiedName(),
                      r->debug.empty() ? "" : " from ", r->debug, " has C++ signature ", r->kernel.cppSignature(),
                      ", but the schema ", parsed->toString(), debug.empty() ? "" : " (defined by ", debug,
                      debug.empty() ? "" : ")", " needs ", expected, "; the kernel stays inactive: rebuild ",
                      r->debug.empty() ? "its registrant" : r->debug, " against this definition"));
      }
    }
    schemas_.push_back(std::make_unique<FunctionSchema>(*std::move(parsed)));
    op.schema_.store(schemas_.back().get(), std::memory_order_release);
    op.written_args_.store(writtenArgumentMask(*schemas_.back()), std::memory_order_relaxed);
    op.def_debug_ = std::move(debug);
    for (const auto& [r, why] : unfit) warnings.push_back(strCat("backplane: warning: ", why));
    op.unfit_ = std::move(unfit);
    updateTable(op);
    return addRegistration({RegistrationKind::Def, &op, DispatchKey::Undefined, nullptr, schemas_.back().get()});
  }();
  for (const std::string& w : warnings) logLine(w);
  return handle;
}

namespace {
// Levenshtein distance, for "did you mean" hints.
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}
}  // namespace

// Note [Did you mean]: every lookup or registration of an undefined
// operator (findOpOrThrow, registerImpl, registerComposite, registerMeta,
// and a plugin's m.impl through them) names the closest defined operators
// of the same namespace: every overload of the same name, and others within
// an edit distance (name plus overload) of a third of the name's length;
// the three closest, e.g. "sum.dim_IntList_out" -> "bp::sum.IntList_out".
std::string Dispatcher::closestDefinedNames(const OperatorName& wanted) {
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(2, (wanted.name.size() + wanted.overload.size()) / 3);
  for (const auto& [qualified, entry] : ops_) {
    const OperatorName& n = entry->name();
    if (n.ns != wanted.ns || !entry->schema()) continue;
    const size_t d = editDistance(n.name, wanted.name) + editDistance(n.overload, wanted.overload);
    if (n.name == wanted.name || d <= limit) scored.emplace_back(d, qualified);
  }
  std::sort(scored.begin(), scored.end());
  std::string out;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) out += strCat(i ? ", " : "", scored[i].second);
  return out;
}

std::string Dispatcher::didYouMean(std::string_view qualified_name) {
  absl::StatusOr<OperatorName> name = OperatorName::parse(qualified_name);
  if (!name.ok()) return "";
  absl::MutexLock lock(&detail::registrationMutex());
  const std::string similar = closestDefinedNames(*name);
  return similar.empty() ? "" : strCat(" Did you mean ", similar, "?");
}

absl::StatusOr<OperatorEntry*> Dispatcher::definedEntry(std::string_view op_name, std::string_view action) {
  absl::StatusOr<OperatorName> name = OperatorName::parse(op_name);
  if (!name.ok()) return name.status();
  auto it = ops_.find(name->qualifiedName());
  if (it == ops_.end() || it->second->schema_.load(std::memory_order_relaxed) == nullptr) {
    const std::string similar = closestDefinedNames(*name);
    return absl::NotFoundError(
        strCat("cannot ", action, " ", name->qualifiedName(),
               ": the operator is not defined. Define it "
               "first (Library::def with its schema) or load the library or plugin that defines it",
               similar.empty() ? "" : ". Did you mean ", similar, similar.empty() ? "" : "?"));
  }
  return it->second.get();
}

namespace {
// A kernel that declares a C++ signature (every unboxed one) must have the
// schema's canonical one (Note [Canonical C++ signatures]); boxed kernels
// that declare none take any stack.
absl::Status checkKernelSignature(const KernelFunction& kernel, const FunctionSchema& schema,
                                  const std::string& which) {
  if (kernel.cppSignature().empty()) return absl::OkStatus();
  std::string expected = cppSignatureForSchema(schema);
  if (kernel.cppSignature() == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(strCat(
      "the ", which, " kernel for ", schema.name().qualifiedName(), " has C++ signature ", kernel.cppSignature(),
      ", but the schema ", schema.toString(), " needs ", expected, "; fix the kernel's parameter or return types"));
}

absl::Status checkImplKey(std::string_view op_name, DispatchKey key, const KernelFunction& kernel, DtypeSet dtypes,
                          bool cpu_scalars) {
  if (!isBackendKey(key) && !isFunctionalityKey(key)) {
    return absl::InvalidArgumentError(strCat("cannot register a kernel for ", op_name, " at key ", dispatchKeyName(key),
                                             ": not a backend or functionality key"));
  }
  if (!kernel.isValid()) return absl::InvalidArgumentError(strCat("cannot register an empty kernel for ", op_name));
  // Note [Declared dtypes]: only a native kernel of a backend serves some dtypes.
  if (!dtypes.isAll() && (!isBackendKey(key) || kernel.isFallthrough())) {
    return absl::InvalidArgumentError(
        strCat("cannot register the ", dispatchKeyName(key), " kernel for ", op_name, " with declared dtypes (",
               dtypes.str(), "): only a native kernel at a backend key may declare the dtypes it serves",
               kernel.isFallthrough() ? " (this one is a fallthrough)" : " (this is a functionality key)",
               "; register it for every dtype"));
  }
  // Note [CPU scalars as kernel arguments]: only a device's own kernel.
  if (cpu_scalars && (!isBackendKey(key) || key == DispatchKey::CPU || kernel.isFallthrough())) {
    return absl::InvalidArgumentError(strCat("cannot register the ", dispatchKeyName(key), " kernel for ", op_name,
                                             " as taking CPU scalars: only a native kernel at a device's backend key ",
                                             "may (a CPU kernel's tensors are all on the cpu)"));
  }
  return absl::OkStatus();
}
}  // namespace

RegistrationHandle Dispatcher::addImpl(OperatorEntry& op, DispatchKey key, KernelFunction kernel, std::string debug,
                                       DtypeSet dtypes, bool cpu_scalars, bool when_defined) {
  KernelKind kind = kernel.isFallthrough() ? KernelKind::Fallthrough : KernelKind::Native;
  const KernelRecord* r = newRecord(std::move(kernel), kind, key, std::move(debug), dtypes, false, cpu_scalars);
  op.impls_[static_cast<int>(key)].push_back(r);
  if (when_defined) op.when_defined_.push_back(r);
  updateTable(op);
  return addRegistration({RegistrationKind::Impl, &op, key, r, nullptr});
}

absl::StatusOr<RegistrationHandle> Dispatcher::registerImpl(std::string_view op_name, DispatchKey key,
                                                            KernelFunction kernel, std::string debug, DtypeSet dtypes,
                                                            bool cpu_scalars) {
  if (absl::Status s = checkImplKey(op_name, key, kernel, dtypes, cpu_scalars); !s.ok()) return s;
  absl::MutexLock lock(&detail::registrationMutex());
  absl::StatusOr<OperatorEntry*> op = definedEntry(op_name, strCat("register a ", dispatchKeyName(key), " kernel for"));
  if (!op.ok()) return op.status();
  const FunctionSchema& schema = *(*op)->schema_.load(std::memory_order_relaxed);
  if (absl::Status sig = checkKernelSignature(kernel, schema, dispatchKeyName(key)); !sig.ok()) return sig;
  return addImpl(**op, key, std::move(kernel), std::move(debug), dtypes, cpu_scalars, /*when_defined=*/false);
}

absl::StatusOr<RegistrationHandle> Dispatcher::registerImplWhenDefined(std::string_view op_name, DispatchKey key,
                                                                       KernelFunction kernel, std::string debug,
                                                                       DtypeSet dtypes, bool cpu_scalars) {
  if (absl::Status s = checkImplKey(op_name, key, kernel, dtypes, cpu_scalars); !s.ok()) return s;
  absl::StatusOr<OperatorName> name = OperatorName::parse(op_name);
  if (!name.ok()) return name.status();
  absl::MutexLock lock(&detail::registrationMutex());
  OperatorEntry& op = entryFor(*name);
  // Defined already: exactly registerImpl, signature check included.
  if (const FunctionSchema* schema = op.schema_.load(std::memory_order_relaxed)) {
    if (absl::Status sig = checkKernelSignature(kernel, *schema, dispatchKeyName(key)); !sig.ok()) return sig;
  }
  return addImpl(op, key, std::move(kernel), std::move(debug), dtypes, cpu_scalars, /*when_defined=*/true);
}

absl::StatusOr<RegistrationHandle> Dispatcher::registerComposite(std::string_view op_name, KernelFunction kernel,
                                                                 std::string debug) {
  if (!kernel.isValid() || kernel.isFallthrough())
    return absl::InvalidArgumentError(strCat("a composite kernel for ", op_name, " must be a real kernel"));
  absl::MutexLock lock(&detail::registrationMutex());
  absl::StatusOr<OperatorEntry*> op = definedEntry(op_name, "register a composite kernel for");
  if (!op.ok()) return op.status();
  const FunctionSchema& schema = *(*op)->schema_.load(std::memory_order_relaxed);
  if (absl::Status sig = checkKernelSignature(kernel, schema, "composite"); !sig.ok()) return sig;
  kernel.setCompositeContext((*op)->qualifiedName(), strCat((*op)->name().ns, "::"));
  const KernelRecord* r = newRecord(std::move(kernel), KernelKind::Composite, DispatchKey::Undefined, std::move(debug));
  (*op)->composites_.push_back(r);
  updateTable(**op);
  return addRegistration({RegistrationKind::Composite, *op, DispatchKey::Undefined, r, nullptr});
}

namespace {
// `(..., Tensor(a!) out) -> Tensor(a!)`: one return, the last argument, an
// out= tensor (Note [Meta kernels]).
bool returnsLastArgument(const FunctionSchema& s) {
  if (s.returns().size() != 1 || s.arguments().empty()) return false;
  const Argument& last = s.arguments().back();
  const Argument& ret = s.returns().front();
  return last.isOut() && last.type == ret.type && ret.alias && last.alias && ret.alias->set == last.alias->set;
}
}  // namespace

absl::StatusOr<RegistrationHandle> Dispatcher::registerMeta(std::string_view op_name, KernelFunction kernel,
                                                            std::string debug) {
  if (!kernel.isValid() || kernel.isFallthrough())
    return absl::InvalidArgumentError(strCat("a meta kernel for ", op_name, " must be a real kernel"));
  absl::MutexLock lock(&detail::registrationMutex());
  absl::StatusOr<OperatorEntry*> op = definedEntry(op_name, "register a meta kernel for");
  if (!op.ok()) return op.status();
  const FunctionSchema& schema = *(*op)->schema_.load(std::memory_order_relaxed);
  bool completes = false;
  if (kernel.hasUnboxed()) {
    // Same parameters as the schema, no return; or bool for an op that
    // returns its out= argument (Note [Meta kernels]).
    std::string params = cppSignatureForSchema(schema);
    params = params.substr(0, params.rfind(" -> "));
    const std::string expected = strCat(params, " -> ()");
    completes = kernel.cppSignature() == strCat(params, " -> bool");
    if (completes && !returnsLastArgument(schema)) {
      return absl::InvalidArgumentError(
          strCat("the meta kernel for ", schema.name().qualifiedName(), " returns bool (it may compute the result ",
                 "itself), which only an out= op whose one return is its last argument allows, and the schema ",
                 schema.toString(), " is not one; return void"));
    }
    if (!completes && kernel.cppSignature() != expected) {
      return absl::InvalidArgumentError(strCat("the meta kernel for ", schema.name().qualifiedName(),
                                               " has C++ signature ", kernel.cppSignature(), ", but the schema ",
                                               schema.toString(), " needs ", expected));
    }
  }
  const KernelRecord* r = newRecord(std::move(kernel), KernelKind::Native, DispatchKey::Undefined, std::move(debug),
                                    DtypeSet::all(), completes);
  (*op)->metas_.push_back(r);
  (*op)->meta_.store(r, std::memory_order_release);
  return addRegistration({RegistrationKind::Meta, *op, DispatchKey::Undefined, r, nullptr});
}

absl::StatusOr<RegistrationHandle> Dispatcher::registerFallback(DispatchKey key, KernelFunction kernel,
                                                                std::string debug) {
  if (!isBackendKey(key) && !isFunctionalityKey(key)) {
    return absl::InvalidArgumentError(
        strCat("cannot register a fallback at key ", dispatchKeyName(key), ": not a backend or functionality key"));
  }
  if (!kernel.isValid()) return absl::InvalidArgumentError("cannot register an empty fallback kernel");
  absl::MutexLock lock(&detail::registrationMutex());
  KernelKind kind = kernel.isFallthrough() ? KernelKind::Fallthrough : KernelKind::BackendFallback;
  const KernelRecord* r = newRecord(std::move(kernel), kind, key, std::move(debug));
  fallbacks_[static_cast<int>(key)].push_back(r);
  for (auto& [name, op] : ops_) updateTable(*op);
  return addRegistration({RegistrationKind::Fallback, nullptr, key, r, nullptr});
}

void Dispatcher::deregister(uint64_t id) {
  absl::MutexLock lock(&detail::registrationMutex());
  auto it = registrations_.find(id);
  if (it == registrations_.end()) return;
  Registration r = it->second;
  registrations_.erase(it);
  auto erase = [](std::vector<const KernelRecord*>& v, const KernelRecord* rec) {
    auto it = std::find(v.begin(), v.end(), rec);
    BP_INTERNAL_ASSERT(it != v.end(), "registration ", rec->id, " (", rec->debug,
                       ") is missing from the stack it was added to");
    v.erase(it);
  };
  switch (r.kind) {
    case RegistrationKind::Def:
      if (r.op->schema_.load(std::memory_order_relaxed) == r.schema) {
        r.op->schema_.store(nullptr, std::memory_order_release);
        r.op->written_args_.store(0, std::memory_order_relaxed);
        r.op->def_debug_.clear();
        r.op->unfit_.clear();  // all wait for the next def (Note [Kernels for operators defined later])
      }
      updateTable(*r.op);
      break;
    case RegistrationKind::Impl:
      erase(r.op->impls_[static_cast<int>(r.key)], r.record);
      std::erase(r.op->when_defined_, r.record);
      std::erase_if(r.op->unfit_, [&](const auto& unfit) { return unfit.first == r.record; });
      updateTable(*r.op);
      break;
    case RegistrationKind::Composite:
      erase(r.op->composites_, r.record);
      updateTable(*r.op);
      break;
    case RegistrationKind::Meta:
      erase(r.op->metas_, r.record);
      r.op->meta_.store(r.op->metas_.empty() ? nullptr : r.op->metas_.back(), std::memory_order_release);
      break;
    case RegistrationKind::Fallback:
      erase(fallbacks_[static_cast<int>(r.key)], r.record);
      for (auto& [name, op] : ops_) updateTable(*op);
      break;
  }
}

std::optional<OperatorHandle> Dispatcher::findOp(std::string_view qualified_name) {
  absl::StatusOr<OperatorName> name = OperatorName::parse(qualified_name);
  if (!name.ok()) return std::nullopt;
  absl::MutexLock lock(&detail::registrationMutex());
  auto it = ops_.find(name->qualifiedName());
  if (it == ops_.end()) return std::nullopt;
  return OperatorHandle(it->second.get());
}

OperatorHandle Dispatcher::findOpOrThrow(std::string_view qualified_name) {
  absl::MutexLock lock(&detail::registrationMutex());
  absl::StatusOr<OperatorEntry*> op = definedEntry(qualified_name, "find");
  throwIfError(op.status());
  return OperatorHandle(*op);
}

std::vector<OperatorHandle> Dispatcher::definedOperators() {
  std::vector<OperatorHandle> out;
  {
    absl::MutexLock lock(&detail::registrationMutex());
    for (auto& [name, op] : ops_)
      if (op->schema()) out.push_back(OperatorHandle(op.get()));
  }
  std::sort(out.begin(), out.end(), [](const OperatorHandle& a, const OperatorHandle& b) {
    return a.operatorName().qualifiedName() < b.operatorName().qualifiedName();
  });
  return out;
}

absl::StatusOr<OperatorHandle> Dispatcher::findOrAddOp(std::string_view qualified_name) {
  absl::StatusOr<OperatorName> name = OperatorName::parse(qualified_name);
  if (!name.ok()) return name.status();
  absl::MutexLock lock(&detail::registrationMutex());
  return OperatorHandle(&entryFor(*name));
}

std::vector<Dispatcher::InactiveKernel> Dispatcher::inactiveKernels() {
  std::vector<InactiveKernel> out;
  {
    absl::MutexLock lock(&detail::registrationMutex());
    for (auto& [name, op] : ops_) {
      const bool defined = op->schema_.load(std::memory_order_relaxed) != nullptr;
      for (const auto& [r, why] : op->unfit_) out.push_back({name, r->key, r->debug, why});
      if (defined) continue;
      for (int k = 0; k < kNumDispatchKeys; ++k) {
        for (const KernelRecord* r : op->impls_[k]) {
          out.push_back({name, r->key, r->debug,
                         strCat(name, " is not defined; the ", dispatchKeyName(r->key),
                                " kernel serves calls once a library or plugin defines it")});
        }
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const InactiveKernel& a, const InactiveKernel& b) {
    return std::tie(a.op, a.key) < std::tie(b.op, b.key);
  });
  return out;
}

absl::Status Dispatcher::checkInvariants() {
  absl::MutexLock lock(&detail::registrationMutex());
  for (auto& [name, op] : ops_) {
    // Note [Kernels for operators defined later]: when_defined_ is part of
    // the impl stacks, unfit_ part of when_defined_ and empty while undefined.
    for (const KernelRecord* r : op->when_defined_) {
      const auto& stack = op->impls_[static_cast<int>(r->key)];
      if (std::find(stack.begin(), stack.end(), r) == stack.end())
        return absl::InternalError(strCat(name, ": a when-defined kernel (", r->debug, ") is not on its impl stack"));
    }
    for (const auto& [r, why] : op->unfit_) {
      if (std::find(op->when_defined_.begin(), op->when_defined_.end(), r) == op->when_defined_.end())
        return absl::InternalError(strCat(name, ": an unfit kernel (", r->debug, ") is not a when-defined one"));
    }
    if (!op->unfit_.empty() && op->schema_.load(std::memory_order_relaxed) == nullptr)
      return absl::InternalError(strCat(name, " has no schema but kernels marked unfit for one"));
    uint64_t dispatchable = 0;
    for (int k = 0; k < kNumDispatchKeys; ++k) {
      const KernelRecord* want = computeSlot(*op, static_cast<DispatchKey>(k));
      if (op->table_[k].load() != want) {
        return absl::InternalError(strCat(
            "dispatch table of ", name, " at key ", dispatchKeyName(static_cast<DispatchKey>(k)), " is stale: holds a ",
            kernelKindName(op->table_[k].load()->kind), " kernel, registrations imply ", kernelKindName(want->kind)));
      }
      if (want->kind != KernelKind::Fallthrough) dispatchable |= uint64_t{1} << k;
      for (const KernelRecord* impl : op->impls_[k]) {
        if (impl->declined.load() != computeDeclined(*op, static_cast<DispatchKey>(k), impl)) {
          return absl::InternalError(strCat(name, ": the ", dispatchKeyName(static_cast<DispatchKey>(k)), " kernel (",
                                            impl->debug, ") sends the calls it declines to a stale record"));
        }
      }
    }
    if (op->dispatchable_.load() != dispatchable)
      return absl::InternalError(strCat("dispatchable-key mask of ", name, " is stale"));
  }
  return absl::OkStatus();
}

std::string Dispatcher::dumpState() {
  std::string out;
  for (const OperatorHandle& op : definedOperators()) out += op.dumpState();
  std::string waiting;
  for (const InactiveKernel& k : inactiveKernels()) {
    std::optional<OperatorHandle> op = findOp(k.op);
    if (op && op->hasSchema()) continue;  // listed with its operator above
    waiting += strCat("  ", k.op, " ", dispatchKeyName(k.key), " [", k.registrant, "]\n");
  }
  if (!waiting.empty()) out += "kernels waiting for their operator's definition:\n" + waiting;
  return out;
}

}  // namespace backplane
