#pragma once
// DispatchKey and DispatchKeySet.
//
// Note [Dispatch keys]
// A DispatchKey is a bit position in a 64-bit DispatchKeySet; a call's key
// set is the OR of its arguments' keys plus the thread-local included keys,
// minus the thread-local excluded keys, and the highest set bit picks the
// kernel. Backend keys sit at the bottom, one per device type
// (backendKey(t) == 1 + t, see Note [Device types]), so that a key set is
// computed from a tensor with one shift. Functionality keys (Autograd,
// Tracing, the User keys, Profiling) sit above every backend: a kernel
// registered there wraps the op for all backends and redispatches below its
// own key. Profiling is the highest, so that the time it measures includes
// every other wrapper.
//
// Note [Where the Autograd key sits]
// Autograd is the lowest functionality key, right above the backends, as in
// PyTorch. Tracing and the User keys sit above it, so a trace shows the call
// the user made (with its Autograd bit) once, not the redispatch under it;
// Profiling, highest, times an op's forward with the recording of its
// grad_fn, and a training step's profile lists the backward ops the engine
// calls as ops of their own (each one a call that does not record). Only a
// tensor that requires grad carries the key (TensorImpl::requiresGrad, read
// by addTensorKeys), so a call on other tensors never reaches the Autograd
// kernel; no_grad excludes the key for its thread.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "backplane/core/device.h"

namespace backplane {

enum class DispatchKey : uint8_t {
  Undefined = 0,
  // Backend keys: 1 + DeviceType.
  CPU = 1,
  CUDA = 2,
  HIP = 3,
  FirstDynamicBackend = 1 + kNumBuiltinDeviceTypes,
  LastBackend = kMaxDeviceTypes,  // == backendKey(last dynamic device type)
  // Functionality keys, lowest priority first.
  Autograd = 40,  // dispatcher/autograd: records grad_fn (Note [Where the Autograd key sits])
  Tracing = 41,
  User0 = 42,
  User1 = 43,
  User2 = 44,
  User3 = 45,
  Profiling = 46,  // backplane::Profiler (profiler.h); highest: it times the wrappers below it
};
inline constexpr int kNumDispatchKeys = 64;  // table slots; one per bit

constexpr DispatchKey backendKey(DeviceType t) { return static_cast<DispatchKey>(1 + static_cast<int>(t)); }
constexpr bool isBackendKey(DispatchKey k) { return k >= DispatchKey::CPU && k <= DispatchKey::LastBackend; }
constexpr DeviceType deviceTypeOf(DispatchKey backend) {
  return static_cast<DeviceType>(static_cast<int>(backend) - 1);
}
constexpr bool isFunctionalityKey(DispatchKey k) { return k >= DispatchKey::Autograd && k <= DispatchKey::Profiling; }

// The layout of Note [Dispatch keys], checked by the compiler.
static_assert(backendKey(DeviceType::CPU) == DispatchKey::CPU && backendKey(DeviceType::CUDA) == DispatchKey::CUDA &&
                  backendKey(DeviceType::HIP) == DispatchKey::HIP,
              "the backend key of device type t is 1 + t");
static_assert(backendKey(static_cast<DeviceType>(kNumBuiltinDeviceTypes)) == DispatchKey::FirstDynamicBackend,
              "dynamic backends start right after the built-in ones");
static_assert(backendKey(static_cast<DeviceType>(kMaxDeviceTypes - 1)) == DispatchKey::LastBackend,
              "every device type has a backend key, the last one included");
static_assert(deviceTypeOf(backendKey(static_cast<DeviceType>(kMaxDeviceTypes - 1))) ==
                  static_cast<DeviceType>(kMaxDeviceTypes - 1),
              "deviceTypeOf inverts backendKey");
static_assert(static_cast<int>(DispatchKey::LastBackend) - static_cast<int>(DispatchKey::FirstDynamicBackend) + 1 >= 8,
              "room for at least eight dynamic backends");
static_assert(DispatchKey::LastBackend < DispatchKey::Autograd && DispatchKey::Autograd < DispatchKey::Tracing,
              "functionality keys sit above every backend, so that they wrap all of them");
static_assert(DispatchKey::Tracing < DispatchKey::User0 && DispatchKey::User0 < DispatchKey::User1 &&
                  DispatchKey::User1 < DispatchKey::User2 && DispatchKey::User2 < DispatchKey::User3 &&
                  DispatchKey::User3 < DispatchKey::Profiling,
              "functionality keys in priority order; Profiling is the highest and times every other wrapper");
static_assert(!isBackendKey(DispatchKey::Undefined) && !isFunctionalityKey(DispatchKey::Undefined) &&
                  !isBackendKey(DispatchKey::Autograd) && !isFunctionalityKey(DispatchKey::LastBackend),
              "backend and functionality keys are disjoint");

// "CPU", "CUDA", "HIP", the device type name for dynamic backends
// ("testdev"), "Autograd", "Tracing", "User0".."User3", "Profiling".
std::string dispatchKeyName(DispatchKey k);
// Inverse of dispatchKeyName; also accepts device type names ("cpu").
std::optional<DispatchKey> parseDispatchKey(std::string_view name);
std::ostream& operator<<(std::ostream& os, DispatchKey k);

class DispatchKeySet {
 public:
  constexpr DispatchKeySet() = default;
  constexpr explicit DispatchKeySet(DispatchKey k) : bits_(uint64_t{1} << static_cast<int>(k)) {}
  static constexpr DispatchKeySet fromRaw(uint64_t bits) {
    DispatchKeySet s;
    s.bits_ = bits;
    return s;
  }
  // Every key strictly below `k`: what a kernel at `k` redispatches to.
  static constexpr DispatchKeySet below(DispatchKey k) { return fromRaw((uint64_t{1} << static_cast<int>(k)) - 1); }
  static constexpr DispatchKeySet allBackends() {
    return fromRaw(((uint64_t{1} << (static_cast<int>(DispatchKey::LastBackend) + 1)) - 1) & ~uint64_t{1});
  }

  constexpr uint64_t raw() const { return bits_; }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool has(DispatchKey k) const { return (bits_ >> static_cast<int>(k)) & 1; }
  constexpr DispatchKeySet add(DispatchKey k) const { return *this | DispatchKeySet(k); }
  constexpr DispatchKeySet remove(DispatchKey k) const { return fromRaw(bits_ & ~DispatchKeySet(k).bits_); }
  // The highest key, or Undefined for an empty set.
  constexpr DispatchKey highestPriorityKey() const {
    return bits_ ? static_cast<DispatchKey>(63 - __builtin_clzll(bits_)) : DispatchKey::Undefined;
  }
  // The highest backend key in the set, or Undefined.
  constexpr DispatchKey highestBackendKey() const { return (*this & allBackends()).highestPriorityKey(); }

  friend constexpr DispatchKeySet operator|(DispatchKeySet a, DispatchKeySet b) { return fromRaw(a.bits_ | b.bits_); }
  friend constexpr DispatchKeySet operator&(DispatchKeySet a, DispatchKeySet b) { return fromRaw(a.bits_ & b.bits_); }
  friend constexpr DispatchKeySet operator-(DispatchKeySet a, DispatchKeySet b) { return fromRaw(a.bits_ & ~b.bits_); }
  friend constexpr bool operator==(DispatchKeySet a, DispatchKeySet b) = default;

  // "{CPU|Tracing}"
  std::string str() const;

 private:
  uint64_t bits_ = 0;
};
std::ostream& operator<<(std::ostream& os, DispatchKeySet ks);

static_assert(static_cast<int>(DispatchKey::Profiling) < kNumDispatchKeys && kNumDispatchKeys == 64,
              "every key is one bit of a 64-bit DispatchKeySet");
static_assert(DispatchKeySet::allBackends().has(DispatchKey::CPU) &&
                  DispatchKeySet::allBackends().has(DispatchKey::LastBackend) &&
                  !DispatchKeySet::allBackends().has(DispatchKey::Undefined) &&
                  !DispatchKeySet::allBackends().has(DispatchKey::Tracing),
              "allBackends() is exactly CPU..LastBackend");

// Note [Thread-local dispatch keys]
// Each thread carries keys to add to (included) and remove from (excluded)
// every call's key set; guards below change them for a scope. A kernel that
// must not see its own key again excludes it, and a test can force a key on.
struct LocalDispatchKeySet {
  DispatchKeySet included;
  DispatchKeySet excluded;
};

namespace detail {
inline thread_local LocalDispatchKeySet tls_local_dispatch_key_set;
}  // namespace detail

inline LocalDispatchKeySet localDispatchKeySet() { return detail::tls_local_dispatch_key_set; }

// Adds `keys` to this thread's included set for the guard's lifetime.
class IncludeDispatchKeyGuard {
 public:
  explicit IncludeDispatchKeyGuard(DispatchKeySet keys) : saved_(detail::tls_local_dispatch_key_set.included) {
    detail::tls_local_dispatch_key_set.included = saved_ | keys;
  }
  explicit IncludeDispatchKeyGuard(DispatchKey k) : IncludeDispatchKeyGuard(DispatchKeySet(k)) {}
  ~IncludeDispatchKeyGuard() { detail::tls_local_dispatch_key_set.included = saved_; }
  IncludeDispatchKeyGuard(const IncludeDispatchKeyGuard&) = delete;
  IncludeDispatchKeyGuard& operator=(const IncludeDispatchKeyGuard&) = delete;

 private:
  DispatchKeySet saved_;
};

// Adds `keys` to this thread's excluded set for the guard's lifetime.
class ExcludeDispatchKeyGuard {
 public:
  explicit ExcludeDispatchKeyGuard(DispatchKeySet keys) : saved_(detail::tls_local_dispatch_key_set.excluded) {
    detail::tls_local_dispatch_key_set.excluded = saved_ | keys;
  }
  explicit ExcludeDispatchKeyGuard(DispatchKey k) : ExcludeDispatchKeyGuard(DispatchKeySet(k)) {}
  ~ExcludeDispatchKeyGuard() { detail::tls_local_dispatch_key_set.excluded = saved_; }
  ExcludeDispatchKeyGuard(const ExcludeDispatchKeyGuard&) = delete;
  ExcludeDispatchKeyGuard& operator=(const ExcludeDispatchKeyGuard&) = delete;

 private:
  DispatchKeySet saved_;
};

}  // namespace backplane
