// Fuzz target fuzz_library_registration (Note [Fuzzing] in docs/design.md):
// Library::def / impl / implWhenDefined / implComposite / meta / fallback
// with fuzzed schemas, dispatch keys and kernels, and calls of what was
// registered, boxed and typed.
//
// An input is a small program, one command a line (the seed corpus in
// corpus/library_registration/ has examples):
//   lib L                   the following commands use Library L (0: "fz0", 1: "fz1")
//   def N TEXT              lib.def(name N + TEXT from its first '(')
//   impl N K k              lib.impl(name N, key K (0..255), kernel k)
//   when N K k              lib.implWhenDefined(...)
//   composite N k           lib.implComposite(name N, kernel k)
//   meta N k                lib.meta(name N, kernel k)
//   fallback K k            lib.fallback(key K, kernel k)   (boxed kernels and fallthrough only)
//   call N BYTES            name N called boxed, its arguments made from BYTES to fit its schema
//   typed N s               name N as typed<signature s>(), called with default arguments
//   reset                   lib.reset()
// N is one character indexing kNames, k one indexing the kernels below.
// Names are drawn from a fixed table (the schema text after the name is
// what is fuzzed) because the dispatcher keeps every operator name it has
// seen for the life of the process (Note [Lock-free dispatch]): fuzzed
// names would grow it without bound.
//
// Properties checked (a violation aborts, which libFuzzer and the replay
// ctest report as a crash):
//   * registration returns a Status and never throws;
//   * a call throws nothing but backplane::Error, and a boxed call whose
//     arguments the schema check accepted never fails to unbox them;
//   * after every command the dispatcher's table equals what the
//     registrations imply (Dispatcher::checkInvariants), and once both
//     Libraries are destroyed every operator they defined is undefined again.
// Sanitizers (ASan, UBSan, LSan) catch the rest: a crash, UB or leak
// anywhere in registration, table updates or calls is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"

namespace bk = backplane;
using bk::DispatchKey;
using bk::DispatchKeySet;
using bk::IntArrayRef;
using bk::IValue;
using bk::Scalar;
using bk::ScalarType;
using bk::Stack;

namespace {

// The tensor type of the kernels (boxing.h's KernelTensor): the ops layer's
// Tensor is above this one, and the target links the dispatch layer alone.
class Tensor : public bk::TensorBase {
 public:
  Tensor() = default;
  Tensor(bk::TensorBase base) : TensorBase(std::move(base)) {}  // NOLINT: as backplane::Tensor
};

constexpr const char* kNamespaces[] = {"fz0", "fz1"};
// Unqualified names take the current Library's namespace.
constexpr const char* kNames[] = {"op",         "op.out",       "fz0::op",     "fz1::op",        "op2",
                                  "op2.Tensor", "fz0::op2.out", "fz1::op.out", "bp::add.Tensor", "nosuch"};
constexpr size_t kNumNames = sizeof(kNames) / sizeof(kNames[0]);

// BACKPLANE_FUZZ_VERBOSE=1 prints each command's outcome: for writing seeds.
const bool kVerbose = std::getenv("BACKPLANE_FUZZ_VERBOSE") != nullptr;
void note(std::string_view what, std::string_view outcome) {
  if (kVerbose)
    std::fprintf(stderr, "  %.*s: %.*s\n", static_cast<int>(what.size()), what.data(), static_cast<int>(outcome.size()),
                 outcome.data());
}

[[noreturn]] void fail(std::string_view what, std::string_view detail) {
  std::fprintf(stderr, "fuzz_library_registration: %.*s\n  detail: %.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// ---------------------------------------------------------------- values

// Bytes of a command, consumed front to back; 0 once exhausted.
class Bytes {
 public:
  explicit Bytes(std::string_view s) : s_(s) {}
  uint8_t next() { return pos_ < s_.size() ? static_cast<uint8_t>(s_[pos_++]) : 0; }
  bool empty() const { return pos_ >= s_.size(); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

int64_t someInt(Bytes& b) {
  switch (uint8_t c = b.next(); c % 6) {
    case 0: return INT64_MIN;
    case 1: return INT64_MAX;
    case 2: return -1;
    default: return static_cast<int8_t>(c);
  }
}

double someDouble(Bytes& b) {
  switch (uint8_t c = b.next(); c % 5) {
    case 0: return __builtin_nan("");
    case 1: return -__builtin_inf();
    case 2: return 1e308;
    default: return static_cast<int8_t>(c) / 4.0;
  }
}

bk::Device someDevice(Bytes& b) {
  switch (b.next() % 4) {
    case 0: return bk::Device(bk::DeviceType::CUDA, 0);
    case 1: return bk::Device(static_cast<bk::DeviceType>(bk::kNumBuiltinDeviceTypes), 0);  // unregistered
    default: return bk::Device(bk::DeviceType::CPU, 0);
  }
}

// An IValue that the schema check accepts for `t` (boxing.h's mapping,
// including the conversions it allows: int for float, int[] for float[],
// Tensor[] for Tensor?[], any number for Scalar). Tensors are undefined:
// the fuzzer has no device to put data on.
IValue validValue(const bk::SchemaType& t, Bytes& b) {
  const uint8_t c = b.next();
  if (t.is_optional && (c & 0x10)) return IValue();
  if (t.is_list) {
    const size_t n = b.next() % 4;
    switch (t.base) {
      case bk::BaseType::Tensor: {
        if (t.element_optional && (c & 0x20)) {
          std::vector<std::optional<bk::TensorBase>> v;
          for (size_t i = 0; i < n; ++i) v.push_back(b.next() & 1 ? std::optional<bk::TensorBase>() : bk::TensorBase());
          return IValue(std::move(v));
        }
        return IValue(std::vector<bk::TensorBase>(n));
      }
      case bk::BaseType::Float: {
        if (c & 0x20) {
          std::vector<int64_t> v;
          for (size_t i = 0; i < n; ++i) v.push_back(someInt(b));
          return IValue(std::move(v));
        }
        std::vector<double> v;
        for (size_t i = 0; i < n; ++i) v.push_back(someDouble(b));
        return IValue(std::move(v));
      }
      case bk::BaseType::Bool: {
        std::vector<bool> v;
        for (size_t i = 0; i < n; ++i) v.push_back(b.next() & 1);
        return IValue(std::move(v));
      }
      default: {  // int, Layout, MemoryFormat; other lists the check refuses anyway
        std::vector<int64_t> v;
        for (size_t i = 0; i < n; ++i) v.push_back(someInt(b));
        return IValue(std::move(v));
      }
    }
  }
  switch (t.base) {
    case bk::BaseType::Tensor: return IValue(bk::TensorBase());
    case bk::BaseType::Int:
    case bk::BaseType::Layout:
    case bk::BaseType::MemoryFormat: return IValue(someInt(b));
    case bk::BaseType::Float: return c & 0x20 ? IValue(someInt(b)) : IValue(someDouble(b));
    case bk::BaseType::Bool: return IValue(static_cast<bool>(b.next() & 1));
    case bk::BaseType::Str: {
      std::string s;
      for (size_t n = b.next() % 8; n > 0; --n) s += static_cast<char>(b.next());
      return IValue(std::move(s));
    }
    case bk::BaseType::Scalar:
      switch (c % 4) {
        case 0: return IValue(someInt(b));
        case 1: return IValue(someDouble(b));
        case 2: return IValue(static_cast<bool>(b.next() & 1));
        default: return IValue(Scalar(someDouble(b)));
      }
    case bk::BaseType::ScalarType: return IValue(static_cast<ScalarType>(b.next() % bk::kNumScalarTypes));
    case bk::BaseType::Device: return IValue(someDevice(b));
  }
  return IValue();
}

// A value of any kind, valid or not.
IValue anyValue(Bytes& b) {
  switch (b.next() % 10) {
    case 0: return IValue();
    case 1: return IValue(bk::TensorBase());
    case 2: return IValue(someInt(b));
    case 3: return IValue(someDouble(b));
    case 4: return IValue(std::string("x"));
    case 5: return IValue(ScalarType::Float32);
    case 6: return IValue(std::vector<int64_t>{1, 2});
    case 7: return IValue(std::vector<bool>{true});
    case 8: return IValue(std::vector<std::optional<bk::TensorBase>>{std::nullopt});
    default: return IValue(someDevice(b));
  }
}

// ---------------------------------------------------------------- kernels

// Boxed: pops the schema's arguments, pushes a valid value per return.
void boxedGood(bk::OperatorKernel*, const bk::OperatorHandle& op, DispatchKeySet, Stack* stack) {
  const bk::FunctionSchema& s = op.schema();
  stack->resize(stack->size() - std::min(stack->size(), s.arguments().size()));
  Bytes none("");
  for (const bk::Argument& r : s.returns()) stack->push_back(validValue(r.type, none));
}
// Boxed: leaves one value too many (the dispatcher must report it).
void boxedWrongCount(bk::OperatorKernel* k, const bk::OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  boxedGood(k, op, ks, stack);
  stack->push_back(IValue(int64_t{7}));
}
void boxedThrows(bk::OperatorKernel*, const bk::OperatorHandle& op, DispatchKeySet, Stack*) {
  BP_THROW(kFailedPrecondition, "fuzz kernel for ", op.operatorName().qualifiedName(), " refuses");
}
// Boxed wrapper: goes on to the keys below its own, as a Tracing or User
// kernel does.
void boxedRedispatch(bk::OperatorKernel*, const bk::OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  op.redispatchBoxed(ks & DispatchKeySet::below(ks.highestPriorityKey()), *stack);
}

// Typed kernels of fixed C++ signatures; the schema decides which fit.
Tensor k0(const Tensor& self) { return self; }
Tensor k1(const Tensor&, const Tensor& other, const Scalar&) { return other; }
void k2(int64_t) {}
int64_t k3(IntArrayRef size, double, bool) { return static_cast<int64_t>(size.size()); }
std::tuple<Tensor, Tensor> k4(const Tensor& self, std::optional<int64_t>) { return {self, self}; }
Tensor k5(bk::ArrayRef<Tensor> ts) { return ts.empty() ? Tensor() : ts[0]; }
Tensor k6(const std::optional<Tensor>& t, ScalarType, bk::Device) { return t ? *t : Tensor(); }
bool k7(std::string_view s, std::optional<std::string_view> t) { return t && *t == s; }
double k8(bk::ArrayRef<double> xs, const std::optional<Scalar>&) { return xs.empty() ? 0.0 : xs[0]; }
Tensor k9(bk::ArrayRef<std::optional<Tensor>> ts) { return ts.empty() || !ts[0] ? Tensor() : *ts[0]; }
Scalar ka(std::optional<ScalarType>, std::optional<bk::Device>, std::optional<double> d, std::optional<bool>,
          std::optional<IntArrayRef>) {
  return Scalar(d.value_or(0.0));
}
Tensor kb(DispatchKeySet, const Tensor& self) { return self; }
std::vector<Tensor> kc(const Tensor& self, int64_t) { return {self}; }
Tensor kd(const Tensor&, const Tensor& out) { return out; }       // (Tensor self, *, Tensor(a!) out) -> Tensor(a!)
bool ke(const Tensor&, const Tensor&) { return true; }            // a meta that computes the result itself
void kf(const Tensor&, const Tensor&) {}                          // a meta that only checks
int64_t kg(const std::string& s, std::optional<std::string> t) {  // user types std::string, optional<string>
  return static_cast<int64_t>(s.size() + (t ? t->size() : 0));
}

// The kernel that character `k` names, or nullopt for none. `boxed_only`
// (fallbacks) limits it to boxed kernels and the fallthrough.
std::optional<bk::KernelFunction> kernelFor(char k, bool boxed_only) {
  using KF = bk::KernelFunction;
  switch (k) {
    case 'B': return KF::makeFromBoxedFunction(&boxedGood);
    case 'W': return KF::makeFromBoxedFunction(&boxedWrongCount);
    case 'E': return KF::makeFromBoxedFunction(&boxedThrows);
    case 'R': return KF::makeFromBoxedFunction(&boxedRedispatch);
    case 'F': return KF::makeFallthrough();
    case 'S':  // boxed, but declaring the signature it was written for
      return KF::makeFromParts(nullptr, &boxedGood, nullptr, "(Tensor) -> Tensor");
    case 'N': return KF();  // an empty (invalid) kernel
    default: break;
  }
  if (boxed_only) return std::nullopt;
  switch (k) {
    case '0': return KF::make(BP_FN(k0));
    case '1': return KF::make(&k1);
    case '2': return KF::make(BP_FN(k2));
    case '3': return KF::make(BP_FN(k3));
    case '4': return KF::make(BP_FN(k4));
    case '5': return KF::make(BP_FN(k5));
    case '6': return KF::make(BP_FN(k6));
    case '7': return KF::make(BP_FN(k7));
    case '8': return KF::make(BP_FN(k8));
    case '9': return KF::make(BP_FN(k9));
    case 'a': return KF::make(BP_FN(ka));
    case 'b': return KF::make(BP_FN(kb));
    case 'c': return KF::make(BP_FN(kc));
    case 'd': return KF::make(BP_FN(kd));
    case 'e': return KF::make(BP_FN(ke));
    case 'f': return KF::make(BP_FN(kf));
    case 'g': return KF::make(BP_FN(kg));
    case 'h': {  // a lambda with state
      int calls = 0;
      return KF::make([calls](const Tensor& self) mutable -> Tensor {
        ++calls;
        return self;
      });
    }
    default: return std::nullopt;
  }
}

// typed<Sig>() of the signature character `s` names, called with default
// arguments. Returns false for no such signature.
bool callTyped(const bk::OperatorHandle& op, char s) {
  const Tensor t;
  switch (s) {
    case '0': (void)op.typed<Tensor(const Tensor&)>().call(t); return true;
    case '1': (void)op.typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>().call(t, t, Scalar(1)); return true;
    case '2': op.typed<void(int64_t)>().call(3); return true;
    case '3': {
      const std::vector<int64_t> size{2, 3};
      (void)op.typed<int64_t(IntArrayRef, double, bool)>().call(size, 0.5, true);
      return true;
    }
    case '4':
      (void)op.typed<std::tuple<Tensor, Tensor>(const Tensor&, std::optional<int64_t>)>().call(t, 1);
      return true;
    case '5': {
      const std::vector<Tensor> ts(2);
      (void)op.typed<Tensor(bk::ArrayRef<Tensor>)>().call(ts);
      return true;
    }
    case '6':
      (void)op.typed<Tensor(const std::optional<Tensor>&, ScalarType, bk::Device)>().call(
          std::nullopt, ScalarType::Float32, bk::Device(bk::DeviceType::CPU));
      return true;
    case '7': (void)op.typed<bool(std::string_view, std::optional<std::string_view>)>().call("a", "a"); return true;
    case '8': {
      const std::vector<double> xs{1.5};
      (void)op.typed<double(bk::ArrayRef<double>, const std::optional<Scalar>&)>().call(xs, Scalar(2));
      return true;
    }
    case '9': {
      const std::vector<std::optional<Tensor>> ts{std::nullopt, Tensor()};
      (void)op.typed<Tensor(bk::ArrayRef<std::optional<Tensor>>)>().call(ts);
      return true;
    }
    case 'c': (void)op.typed<std::vector<Tensor>(const Tensor&, int64_t)>().call(t, 2); return true;
    case 'd': (void)op.typed<Tensor(const Tensor&, const Tensor&)>().call(t, t); return true;
    case 'g':
      (void)op.typed<int64_t(std::string_view, std::optional<std::string_view>)>().call("ab", std::nullopt);
      return true;
    default: return false;
  }
}

// ---------------------------------------------------------------- commands

std::string_view word(std::string_view& rest) {
  size_t sp = rest.find(' ');
  std::string_view w = rest.substr(0, sp);
  rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
  return w;
}

const char* nameFor(std::string_view w) {
  if (w.empty()) return kNames[0];
  const uint8_t c = static_cast<uint8_t>(w[0]);
  return kNames[(c >= '0' && c <= '9' ? c - '0' : c) % kNumNames];
}

DispatchKey keyFor(std::string_view w) {
  unsigned v = 0;
  for (char c : w.substr(0, 3)) v = v * 10 + static_cast<unsigned>(c >= '0' && c <= '9' ? c - '0' : 0);
  return static_cast<DispatchKey>(v % 256);
}

// The qualified name `name` has in Library `lib`.
std::string qualified(const char* name, const bk::Library& lib) {
  std::string_view n = name;
  return n.find("::") == std::string_view::npos ? lib.ns() + "::" + std::string(n) : std::string(n);
}

template <typename F>
void registration(std::string_view what, F&& f) {
  try {
    absl::Status s = f();
    if (!s.ok() && s.message().empty()) fail("a registration failed without a message", what);
    note(what, s.ok() ? "registered" : std::string(s.message()));
  } catch (const std::exception& e) {
    fail("a registration threw instead of returning a Status", std::string(what) + ": " + e.what());
  }
}

template <typename F>
void call(std::string_view what, F&& f) {
  try {
    f();
    note(what, "returned");
  } catch (const bk::Error& e) {
    if (e.message().empty()) fail("an Error without a message", what);
    note(what, e.message());
  } catch (const std::exception& e) {
    fail("a call threw something other than backplane::Error", std::string(what) + ": " + e.what());
  } catch (...) {
    fail("a call threw something other than backplane::Error", what);
  }
}

void callBoxed(const bk::OperatorHandle& op, Bytes& b) {
  const bk::FunctionSchema& s = op.schema();
  Stack stack;
  bool checked = true;  // every value is one the schema check accepts
  for (const bk::Argument& a : s.arguments()) {
    if (b.empty() && a.default_value) break;  // leave the rest to their defaults
    const uint8_t mode = b.next();
    if (mode % 16 == 15) {
      stack.push_back(anyValue(b));
      checked = false;
    } else {
      stack.push_back(validValue(a.type, b));
    }
  }
  const size_t given = stack.size();
  try {
    op.callBoxed(stack);
    note(s.toString(), "returned");
    if (stack.size() != s.returns().size())
      fail("callBoxed left a stack that does not match the returns", s.toString());
  } catch (const bk::Error& e) {
    note(s.toString(), e.message());
    if (e.message().empty()) fail("an Error without a message", s.toString());
    // IValue's accessors throw "expected a value of type ...": a kernel
    // could not unbox arguments that callBoxed's own check let through.
    if (checked && e.message().rfind("expected a value of type ", 0) == 0) {
      fail("a boxed call the schema check accepted failed to unbox",
           s.toString() + " with " + std::to_string(given) + " arguments: " + e.message());
    }
  } catch (const std::exception& e) {
    fail("a boxed call threw something other than backplane::Error", s.toString() + ": " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> defined;  // qualified names this input defined
  {
    bk::Library libs[] = {bk::Library(kNamespaces[0], "fuzz library 0"), bk::Library(kNamespaces[1], "fuzz library 1")};
    bk::Library* lib = &libs[0];
    size_t start = 0;
    for (int commands = 0; start < input.size() && commands < 64; ++commands) {
      size_t nl = input.find('\n', start);
      std::string_view rest = input.substr(start, nl == std::string_view::npos ? nl : nl - start);
      start = nl == std::string_view::npos ? input.size() : nl + 1;
      const std::string_view cmd = word(rest);
      if (cmd == "lib") {
        lib = &libs[rest.empty() ? 0 : (static_cast<uint8_t>(rest[0]) & 1)];
      } else if (cmd == "def") {
        const char* name = nameFor(word(rest));
        const size_t paren = rest.find('(');
        const std::string text =
            std::string(name) + std::string(paren == std::string_view::npos ? rest : rest.substr(paren));
        registration(text, [&] {
          absl::Status s = lib->def(text);
          if (s.ok()) defined.push_back(qualified(name, *lib));
          return s;
        });
      } else if (cmd == "impl" || cmd == "when") {
        const char* name = nameFor(word(rest));
        const DispatchKey key = keyFor(word(rest));
        const std::string_view k = word(rest);
        std::optional<bk::KernelFunction> kernel = kernelFor(k.empty() ? 'B' : k[0], false);
        if (!kernel) continue;
        registration(name, [&] {
          return cmd == "impl" ? lib->impl(name, key, *std::move(kernel))
                               : lib->implWhenDefined(name, key, *std::move(kernel));
        });
      } else if (cmd == "composite" || cmd == "meta") {
        const char* name = nameFor(word(rest));
        const std::string_view k = word(rest);
        std::optional<bk::KernelFunction> kernel = kernelFor(k.empty() ? 'B' : k[0], false);
        if (!kernel) continue;
        registration(name, [&] {
          return cmd == "composite" ? lib->implComposite(name, *std::move(kernel))
                                    : lib->meta(name, *std::move(kernel));
        });
      } else if (cmd == "fallback") {
        const DispatchKey key = keyFor(word(rest));
        const std::string_view k = word(rest);
        std::optional<bk::KernelFunction> kernel = kernelFor(k.empty() ? 'B' : k[0], true);
        if (!kernel) continue;
        registration("fallback", [&] { return lib->fallback(key, *std::move(kernel)); });
      } else if (cmd == "call" || cmd == "typed") {
        const std::string name = qualified(nameFor(word(rest)), *lib);
        std::optional<bk::OperatorHandle> op = bk::Dispatcher::singleton().findOp(name);
        if (!op || !op->hasSchema()) {
          note(name, "not defined");
          continue;
        }
        // Standard ops get undefined tensors from here; their metas are
        // the ops layer's to check, not this target's.
        if (op->operatorName().ns == "bp") continue;
        if (cmd == "call") {
          Bytes b(rest);
          callBoxed(*op, b);
        } else {
          call(name, [&] { callTyped(*op, rest.empty() ? '0' : rest[0]); });
        }
      } else if (cmd == "reset") {
        lib->reset();
      }
      // After every command, not only at the end: a table that is wrong
      // for a while is wrong for the calls made meanwhile.
      if (absl::Status s = bk::Dispatcher::singleton().checkInvariants(); !s.ok())
        fail("the dispatcher's table is inconsistent", std::string(s.message()));
    }
  }  // both Libraries destroyed: everything they registered is undone

  for (const std::string& name : defined) {
    std::optional<bk::OperatorHandle> op = bk::Dispatcher::singleton().findOp(name);
    if (op && op->hasSchema()) fail("an operator stayed defined after its Library was destroyed", name);
  }
  if (absl::Status s = bk::Dispatcher::singleton().checkInvariants(); !s.ok())
    fail("the dispatcher's table is inconsistent after the Libraries were destroyed", std::string(s.message()));
  return 0;
}
