#include "backplane/dispatch/ivalue.h"

#include <memory>
#include <sstream>
#include <vector>

#include "backplane/core/error.h"

// LeakSanitizer: GCC defines __SANITIZE_ADDRESS__, clang has the feature test.
#if defined(__SANITIZE_ADDRESS__)
#define BP_SCRATCH_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define BP_SCRATCH_LSAN 1
#endif
#endif
#if defined(BP_SCRATCH_LSAN)
#include <sanitizer/lsan_interface.h>
#endif

namespace backplane {

const char* IValue::tagName(Tag t) {
  switch (t) {
    case Tag::None: return "None";
    case Tag::Tensor: return "Tensor";
    case Tag::Int: return "int";
    case Tag::Double: return "float";
    case Tag::Bool: return "bool";
    case Tag::String: return "str";
    case Tag::Scalar: return "Scalar";
    case Tag::ScalarType: return "ScalarType";
    case Tag::Device: return "Device";
    case Tag::IntList: return "int[]";
    case Tag::DoubleList: return "float[]";
    case Tag::BoolList: return "bool[]";
    case Tag::TensorList: return "Tensor[]";
    case Tag::OptionalTensorList: return "Tensor?[]";
  }
  return "?";
}

void IValue::throwWrongTag(Tag want) const {
  BP_THROW(kInvalidArgument, "expected a value of type ", tagName(want), " but got ", tagName(), " (", str(), ")");
}

double IValue::toDouble() const {
  if (isInt()) return static_cast<double>(std::get<int64_t>(v_));
  return get<double>(Tag::Double);
}

Scalar IValue::toScalar() const {
  switch (tag()) {
    case Tag::Int: return Scalar(std::get<int64_t>(v_));
    case Tag::Double: return Scalar(std::get<double>(v_));
    case Tag::Bool: return Scalar(std::get<bool>(v_));
    case Tag::Scalar: return std::get<Scalar>(v_);
    default: throwWrongTag(Tag::Scalar);
  }
}

namespace {
// A long list is elided as core's lists are (Note [Long lists in messages]):
// a boxed call's error quotes the argument it refuses.
template <typename T>
void printList(std::ostream& os, const std::vector<T>& v) {
  const size_t n = v.size();
  const bool elide = n > kListPrintedWhole;
  os << '[';
  for (size_t i = 0; i < n; ++i) {
    if (elide && i == kListPrintedEdge) {
      os << ", ...";
      i = n - kListPrintedEdge;
    }
    if (i) os << ", ";
    if constexpr (std::is_same_v<T, std::optional<TensorBase>>) {
      if (v[i])
        os << *v[i];
      else
        os << "None";
    } else if constexpr (std::is_same_v<T, bool>) {
      os << (v[i] ? "True" : "False");
    } else {
      os << v[i];
    }
  }
  os << ']';
  if (elide) os << " (" << n << " entries)";
}
}  // namespace

std::string IValue::str() const {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          os << "None";
        else if constexpr (std::is_same_v<T, bool>)
          os << (v ? "True" : "False");
        else if constexpr (std::is_same_v<T, std::string>)
          os << '"' << v << '"';
        else if constexpr (requires {
                             v.size();
                             v.begin();
                           })
          printList(os, v);
        else
          os << v;
      },
      v_);
  return os.str();
}

// Note [Scratch stacks] (kernel_function.h).
namespace detail {
namespace {
constexpr size_t kKeptPerThread = 16;  // deeper nesting than this is rare
// Set when the thread's pool is destroyed at thread exit: a call made by a
// later thread-exit destructor then boxes into a stack of its own.
thread_local bool t_scratch_gone = false;
// The pool lives in thread-local storage, which our sanitizer runs do not let
// the leak checker scan (use_tls=0, scripts/lsan.supp says why), and libFuzzer
// checks for leaks between inputs, while the pool still holds its stacks. So
// under a sanitizer the pool registers itself as a root region: what it holds
// is reachable, and a stack that never comes back to it is still a leak.
struct ScratchPool {
  std::vector<std::unique_ptr<Stack>> free;
  ScratchPool() {
#if defined(BP_SCRATCH_LSAN)
    __lsan_register_root_region(this, sizeof(*this));
#endif
    free.reserve(kKeptPerThread);
  }
  ~ScratchPool() {
    t_scratch_gone = true;
    free.clear();
#if defined(BP_SCRATCH_LSAN)
    __lsan_unregister_root_region(this, sizeof(*this));
#endif
  }
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;
};
thread_local ScratchPool t_scratch;
}  // namespace

Stack* acquireScratchStack() {
  if (!t_scratch_gone) {
    ScratchPool& pool = t_scratch;
    if (!pool.free.empty()) {
      Stack* s = pool.free.back().release();
      pool.free.pop_back();
      return s;
    }
  }
  auto s = std::make_unique<Stack>();
  s->reserve(8);
  return s.release();
}

void releaseScratchStack(Stack* stack) noexcept {
  stack->clear();
  if (!t_scratch_gone) {
    ScratchPool& pool = t_scratch;
    if (pool.free.size() < kKeptPerThread) {  // within the reserved capacity: no allocation
      pool.free.emplace_back(stack);
      return;
    }
  }
  delete stack;
}
}  // namespace detail

}  // namespace backplane
