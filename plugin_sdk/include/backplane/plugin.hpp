// Backplane plugin SDK: a thin, header-only RAII C++ layer over the stable C
// ABI in plugin_api.h (as oneDNN's dnnl.hpp is over dnnl.h). Vendors write
// kernels and devices in C++; everything that crosses into the host goes
// through plugin_api.h, so a plugin built with any C++17 compiler and any
// standard library loads into any host of the same ABI major.
//
// Requirements: C++17 or later; includes only plugin_api.h,
// float16_conversions.h and standard headers; nothing here depends on the
// host's C++ headers.
//
// The smallest complete plugin is samples/minimal_plugin/minimal_plugin.cc
// (also shown in README.md, "The minimal plugin"): a bp::HostMemoryBackend
// device, one native `.out` kernel written with bp::forEach and registered
// for float32 only (bp::Dtypes), and every other operator and dtype through
// the host's CPU fallback. samples/vendor_plugin (toyaccel) is the model for
// a device whose memory the host cannot read.
//
// Note [Exceptions at the ABI boundary]
// C++ exceptions never cross into the host. Every function this header hands
// to the host (kernel adapters, device trampolines, the entry points) catches
// everything and returns a host-made BP_Error: bp::Error keeps its code,
// std::bad_alloc becomes BP_RESOURCE_EXHAUSTED, any other std::exception
// BP_INTERNAL with what(), anything else BP_UNKNOWN. Functions with no error
// return (deallocate, device_count, ...) log the exception instead. In the
// other direction, every host call that fails is turned into a bp::Error.
//
// Note [Per-plugin state]
// The host table, the plugin handle and the device descriptors live in
// `inline` variables / function statics in bp::detail, marked hidden
// (BP_SDK_HIDDEN), so each plugin .so has its own copy even if the vendor
// forgets -fvisibility=hidden and the host loads plugins RTLD_GLOBAL. Types
// keep default visibility: hiding them would make GCC warn about every
// vendor class that holds a bp::Tensor. Build plugins with
// -fvisibility=hidden anyway, so that only the extern "C" entry points that
// BACKPLANE_PLUGIN defines are exported.
#ifndef BACKPLANE_PLUGIN_HPP_
#define BACKPLANE_PLUGIN_HPP_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <new>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backplane/float16_conversions.h"
#include "backplane/plugin_api.h"

// Hidden visibility for the SDK's per-plugin state; see Note [Per-plugin state].
#if defined(__GNUC__)
#define BP_SDK_HIDDEN __attribute__((visibility("hidden")))
#else
#define BP_SDK_HIDDEN
#endif

namespace bp {

// ------------------------------------------------------------------ errors

// Readable name of an error code ("INVALID_ARGUMENT"), for messages.
constexpr const char* errorCodeName(BP_ErrorCode code) noexcept {
  switch (code) {
    case BP_OK: return "OK";
    case BP_CANCELLED: return "CANCELLED";
    case BP_UNKNOWN: return "UNKNOWN";
    case BP_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case BP_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case BP_NOT_FOUND: return "NOT_FOUND";
    case BP_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case BP_PERMISSION_DENIED: return "PERMISSION_DENIED";
    case BP_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case BP_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case BP_ABORTED: return "ABORTED";
    case BP_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case BP_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case BP_INTERNAL: return "INTERNAL";
    case BP_UNAVAILABLE: return "UNAVAILABLE";
    case BP_DATA_LOSS: return "DATA_LOSS";
    default: return "UNKNOWN_CODE";
  }
}

// The one exception type of the SDK: a status code and a message. Thrown by
// every bp function that fails and by bp::fail; kernels may throw it to pick
// the code the caller sees (Note [Exceptions at the ABI boundary]).
class Error : public std::exception {
 public:
  Error(BP_ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  BP_ErrorCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  BP_ErrorCode code_;
  std::string message_;
};

// Throws bp::Error(code, message).
[[noreturn]] inline void fail(BP_ErrorCode code, std::string message) { throw Error(code, std::move(message)); }

// Throws bp::Error(code, msg) unless `cond`. The message is built by the
// caller even when `cond` holds; in kernels prefer BP_PLUGIN_CHECK.
inline void check(bool cond, BP_ErrorCode code, std::string msg) {
  if (!cond) fail(code, std::move(msg));
}

namespace detail {
// Streams every argument into one string ("x must be > 0, got ", x).
template <class... A>
std::string concat(const A&... parts) {
  std::ostringstream os;
  (void)(os << ... << parts);
  return os.str();
}
}  // namespace detail

}  // namespace bp

// Throws bp::Error(BP_INVALID_ARGUMENT, <the message parts streamed
// together>) unless `cond`; the message is built only on failure.
//   BP_PLUGIN_CHECK(dim >= 0, "dim must be non-negative, got ", dim);
#define BP_PLUGIN_CHECK(cond, ...)                                                   \
  do {                                                                               \
    if (!(cond)) ::bp::fail(BP_INVALID_ARGUMENT, ::bp::detail::concat(__VA_ARGS__)); \
  } while (0)

// BP_PLUGIN_CHECK with a chosen error code.
#define BP_PLUGIN_CHECK_CODE(cond, code, ...)                           \
  do {                                                                  \
    if (!(cond)) ::bp::fail((code), ::bp::detail::concat(__VA_ARGS__)); \
  } while (0)

namespace bp {

// ---------------------------------------------------------- host and plugin

namespace detail {
// Set once by backplane_plugin_init (installHost) before the plugin's init
// function runs, then only read; see Note [Per-plugin state]. The host's
// table stays valid until the plugin's shutdown returns (Note [ABI rules] in
// plugin_api.h); g_host points at g_host_table, a copy cut to the fields
// this header knows, so that a Tensor released after shutdown (a static
// destroyed when the library closes) still finds tensor_release, and so
// that reading a slot is one load from this plugin's own data.
BP_SDK_HIDDEN inline BP_HostApi g_host_table = {};
BP_SDK_HIDDEN inline const BP_HostApi* g_host = nullptr;
BP_SDK_HIDDEN inline BP_Plugin* g_plugin = nullptr;
// Bit t is set when device type t's memory is host memory as far as this
// plugin knows: cpu (type 0) always, and every type this plugin registered
// with host_accessible set. Written during init only (registerDevice,
// registerDeviceType); read by Tensor::data_ptr<T>() (Note [Host and device
// addresses]). Device types of other plugins are not known here.
BP_SDK_HIDDEN inline uint64_t g_host_accessible_types = 1;

// Whether this plugin knows device type `type`'s memory to be host memory.
inline bool isHostAccessibleType(int32_t type) noexcept {
  return static_cast<uint32_t>(type) < 64 && ((g_host_accessible_types >> type) & 1) != 0;
}

// Copies `table` (up to the size this header knows; fields past a smaller
// struct_size stay NULL) and records `plugin`. Tests call it with a fake host.
inline void installHost(const BP_HostApi& table, BP_Plugin* plugin) noexcept {
  BP_HostApi copy;
  std::memset(&copy, 0, sizeof copy);
  size_t n = table.struct_size < BP_HostApi_STRUCT_SIZE ? table.struct_size : BP_HostApi_STRUCT_SIZE;
  std::memcpy(&copy, &table, n);
  g_host_table = copy;
  g_host = &g_host_table;
  g_plugin = plugin;
  g_host_accessible_types = 1;  // cpu; the plugin's own types are added as it registers them
}
}  // namespace detail

// The host's function table. Throws bp::Error(BP_FAILED_PRECONDITION) before
// backplane_plugin_init has run. Thread-safe afterwards (read-only).
namespace detail {
[[noreturn, gnu::cold, gnu::noinline]] inline void hostNotReady() {
  fail(BP_FAILED_PRECONDITION,
       "bp::host() was called before backplane_plugin_init: the host table is set by BACKPLANE_PLUGIN when the "
       "host initializes the plugin; do not call into the host from static initializers");
}
[[noreturn, gnu::cold, gnu::noinline]] inline void hostSlotMissing(const char* name) {
  fail(BP_UNIMPLEMENTED, std::string("the host does not implement BP_HostApi::") + name + " (NULL slot)");
}
}  // namespace detail

inline const BP_HostApi& host() {
  if (detail::g_host == nullptr) [[unlikely]] detail::hostNotReady();
  return *detail::g_host;
}

// The host's handle for this plugin (nullptr before init). Thread-safe.
inline BP_Plugin* pluginHandle() noexcept { return detail::g_plugin; }

namespace detail {
// `fn` if the host implements that slot; else throws BP_UNIMPLEMENTED.
template <class Fn>
Fn hostSlot(Fn fn, const char* name) {
  if (fn == nullptr) [[unlikely]] hostSlotMissing(name);
  return fn;
}

// A host error, made with error_new (which copies `message`). Never throws.
inline BP_Error* makeHostError(BP_ErrorCode code, const char* message) noexcept {
  if (code == BP_OK) code = BP_UNKNOWN;  // NULL means success; an error must not say OK
  if (g_host == nullptr || g_host->error_new == nullptr) return nullptr;  // unreachable after a successful init
  return g_host->error_new(code, message ? message : "");
}

// Converts the exception being handled into a host error; call only inside a
// catch block (Note [Exceptions at the ABI boundary]).
inline BP_Error* currentExceptionToError() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return makeHostError(e.code(), e.message().c_str());
  } catch (const std::bad_alloc& e) {
    return makeHostError(BP_RESOURCE_EXHAUSTED, e.what());
  } catch (const std::exception& e) {
    return makeHostError(BP_INTERNAL, e.what());
  } catch (...) {
    return makeHostError(BP_UNKNOWN, "unknown exception (not derived from std::exception)");
  }
}

// Logs through the host if it can; never throws.
inline void logNoThrow(BP_LogLevel level, const char* message) noexcept {
  if (g_host != nullptr && g_host->log != nullptr) g_host->log(g_plugin, level, message);
}

// Logs the exception being handled; call only inside a catch block.
inline void logCurrentException(const char* where) noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    try {
      logNoThrow(BP_LOG_ERROR, (std::string(where) + " threw: " + e.what()).c_str());
    } catch (...) {
      logNoThrow(BP_LOG_ERROR, where);
    }
  } catch (...) {
    logNoThrow(BP_LOG_ERROR, where);
  }
}
}  // namespace detail

// If `error` is non-NULL: takes its code and message, frees it with
// host().error_free, and throws them as bp::Error. Takes ownership of `error`.
inline void throwIfError(BP_Error* error) {
  if (error == nullptr) return;
  const BP_HostApi& h = host();
  struct Freer {
    const BP_HostApi& h;
    BP_Error* e;
    ~Freer() {
      if (h.error_free) h.error_free(e);
    }
  } freer{h, error};
  BP_ErrorCode code = h.error_code ? h.error_code(error) : BP_UNKNOWN;
  const char* msg = h.error_message ? h.error_message(error) : nullptr;
  std::string message = msg ? msg : "";
  throw Error(code == BP_OK ? BP_UNKNOWN : code, std::move(message));
}

// Logs through the host, prefixed with the plugin's name. Thread-safe if the
// host's log is; does nothing before init.
inline void logMessage(BP_LogLevel level, const std::string& message) noexcept {
  detail::logNoThrow(level, message.c_str());
}

#if BP_ABI_MINOR >= 1
// The name of device type number `type` ("cpu", "toy"), or nullptr if none is
// registered under it; the string lives as long as the process. ABI 1.1.
// Throws bp::Error(BP_UNIMPLEMENTED) if the host leaves the slot NULL.
inline const char* deviceTypeName(int32_t type) {
  return detail::hostSlot(host().device_type_name, "device_type_name")(type);
}
#endif

// ------------------------------------------------------------- value types

// Element types, numbered as BP_BOOL..BP_UINT64 (int16 and the unsigned
// 16/32/64-bit types are ABI 1.5: Note [Dtypes of older plugins]).
enum class ScalarType : int32_t {
  Bool = BP_BOOL,
  UInt8 = BP_UINT8,
  Int8 = BP_INT8,
  Int32 = BP_INT32,
  Int64 = BP_INT64,
  Float16 = BP_FLOAT16,
  BFloat16 = BP_BFLOAT16,
  Float32 = BP_FLOAT32,
  Float64 = BP_FLOAT64,
  Int16 = BP_INT16,
  UInt16 = BP_UINT16,
  UInt32 = BP_UINT32,
  UInt64 = BP_UINT64,
};

// Bytes per element; 0 for a number outside the enum.
constexpr size_t elementSize(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::Bool:
    case ScalarType::UInt8:
    case ScalarType::Int8: return 1;
    case ScalarType::Float16:
    case ScalarType::BFloat16:
    case ScalarType::Int16:
    case ScalarType::UInt16: return 2;
    case ScalarType::Int32:
    case ScalarType::Float32:
    case ScalarType::UInt32: return 4;
    case ScalarType::Int64:
    case ScalarType::Float64:
    case ScalarType::UInt64: return 8;
  }
  return 0;
}

// "bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16",
// "float32", "float64", "int16", "uint16", "uint32", "uint64"; "unknown"
// outside the enum.
constexpr const char* name(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::Bool: return "bool";
    case ScalarType::UInt8: return "uint8";
    case ScalarType::Int8: return "int8";
    case ScalarType::Int32: return "int32";
    case ScalarType::Int64: return "int64";
    case ScalarType::Float16: return "float16";
    case ScalarType::BFloat16: return "bfloat16";
    case ScalarType::Float32: return "float32";
    case ScalarType::Float64: return "float64";
    case ScalarType::Int16: return "int16";
    case ScalarType::UInt16: return "uint16";
    case ScalarType::UInt32: return "uint32";
    case ScalarType::UInt64: return "uint64";
  }
  return "unknown";
}

inline std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << name(t); }

// The dtype sets kernels' argument checks name most: every dtype with the
// full operator set (all but uint16/uint32/uint64), the numeric ones of
// those (all but bool) and the floating-point ones. uint16, uint32 and
// uint64 are PyTorch 2.x's "barebones" unsigned types, with creation,
// copies and comparisons only: a kernel that serves them names
// kBarebonesUnsignedScalarTypes as well.
inline constexpr std::initializer_list<ScalarType> kAllScalarTypes = {
    ScalarType::Bool,  ScalarType::UInt8,   ScalarType::Int8,     ScalarType::Int16,   ScalarType::Int32,
    ScalarType::Int64, ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};
inline constexpr std::initializer_list<ScalarType> kNumericScalarTypes = {
    ScalarType::UInt8,   ScalarType::Int8,     ScalarType::Int16,   ScalarType::Int32,  ScalarType::Int64,
    ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};
inline constexpr std::initializer_list<ScalarType> kBarebonesUnsignedScalarTypes = {
    ScalarType::UInt16, ScalarType::UInt32, ScalarType::UInt64};
inline constexpr std::initializer_list<ScalarType> kFloatingScalarTypes = {ScalarType::Float16, ScalarType::BFloat16,
                                                                          ScalarType::Float32, ScalarType::Float64};

// A device: a device type number (0 is cpu; others from registerDevice or
// findDeviceType) and an index within the type. Layout matches BP_Device.
struct Device {
  int32_t type;
  int32_t index;

  static constexpr Device cpu() noexcept { return Device{0, 0}; }
  static constexpr Device fromC(BP_Device d) noexcept { return Device{d.type, d.index}; }
  constexpr BP_Device toC() const noexcept { return BP_Device{type, index}; }
  friend constexpr bool operator==(Device a, Device b) noexcept { return a.type == b.type && a.index == b.index; }
  friend constexpr bool operator!=(Device a, Device b) noexcept { return !(a == b); }
};

inline std::ostream& operator<<(std::ostream& os, Device d) { return os << d.type << ':' << d.index; }

// IEEE binary16. Conversion from float rounds to nearest even; NaN stays
// NaN (quieted, sign and top payload bits kept); overflow gives infinity.
// The conversions are backplane/float16_conversions.h's, the same as the
// host's and the GPU kernels' (Note [16-bit float conversions]).
struct Half {
  uint16_t bits = 0;

  Half() = default;
  explicit Half(float f) noexcept : bits(halfBitsFromFloat(f)) {}
  static constexpr Half fromBits(uint16_t b) noexcept {
    Half h;
    h.bits = b;
    return h;
  }
  // Exact; a signalling NaN comes back quiet.
  operator float() const noexcept { return floatFromHalfBits(bits); }
};

// bfloat16 (the top half of a float32). Conversion from float rounds to
// nearest even; NaN stays NaN (quieted, sign and top payload bits kept).
// Conversion to float is exact (Note [16-bit float conversions]).
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  explicit BFloat16(float f) noexcept : bits(bfloat16BitsFromFloat(f)) {}
  static constexpr BFloat16 fromBits(uint16_t b) noexcept {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  operator float() const noexcept { return floatFromBFloat16Bits(bits); }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "Half and BFloat16 must be 16 bits");

// A borrowed view of a contiguous array: {pointer, size}. Never owns; the
// array must outlive the view. Constructible from a braced list (valid until
// the end of the full expression, i.e. for a call), a std::vector, a C array
// or (pointer, size).
template <class T>
class ArrayView {
 public:
  constexpr ArrayView() noexcept = default;
  constexpr ArrayView(const T* data, size_t size) noexcept : data_(data), size_(size) {}
  // Views the list's array, which lives until the end of the full
  // expression that wrote the braces: fine for an argument, dangling if
  // stored (as with C++26 std::span's initializer_list constructor).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  ArrayView(std::initializer_list<T> list) noexcept : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  ArrayView(const std::vector<T>& v) noexcept : data_(v.data()), size_(v.size()) {}
  template <size_t N>
  constexpr ArrayView(const T (&a)[N]) noexcept : data_(a), size_(N) {}
  template <size_t N>
  constexpr ArrayView(const std::array<T, N>& a) noexcept : data_(a.data()), size_(N) {}

  constexpr const T* data() const noexcept { return data_; }
  constexpr size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr const T* begin() const noexcept { return data_; }
  constexpr const T* end() const noexcept { return data_ + size_; }
  constexpr const T& operator[](size_t i) const noexcept { return data_[i]; }
  // Bounds-checked element; throws bp::Error(BP_OUT_OF_RANGE).
  const T& at(size_t i) const {
    if (i >= size_) fail(BP_OUT_OF_RANGE, detail::concat("index ", i, " out of range for a list of ", size_));
    return data_[i];
  }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }

  friend bool operator==(ArrayView a, ArrayView b) noexcept {
    if (a.size_ != b.size_) return false;
    for (size_t i = 0; i < a.size_; ++i) {
      if (!(a.data_[i] == b.data_[i])) return false;
    }
    return true;
  }
  friend bool operator!=(ArrayView a, ArrayView b) noexcept { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, ArrayView a) {
    os << '[';
    for (size_t i = 0; i < a.size_; ++i) os << (i ? ", " : "") << a.data_[i];
    return os << ']';
  }

 private:
  const T* data_ = nullptr;
  size_t size_ = 0;
};

// Sizes, strides, "int[]" arguments.
using IntList = ArrayView<int64_t>;
// "float[]" arguments.
using DoubleList = ArrayView<double>;

// A number that remembers whether it is a bool, an integer or a double, as
// "Scalar" arguments arrive (BP_VALUE_BOOL / INT / DOUBLE).
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Double };

  Scalar() noexcept : Scalar(int64_t{0}) {}
  Scalar(bool v) noexcept : kind_(Kind::Bool) { u_.b = v; }
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      if (v > static_cast<T>(std::numeric_limits<int64_t>::max())) {
        fail(BP_OUT_OF_RANGE, detail::concat("integer ", v, " does not fit a Scalar (int64)"));
      }
    }
    u_.i = static_cast<int64_t>(v);
  }
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) noexcept : kind_(Kind::Double) {
    u_.d = static_cast<double>(v);
  }
  Scalar(Half v) noexcept : Scalar(static_cast<float>(v)) {}
  Scalar(BFloat16 v) noexcept : Scalar(static_cast<float>(v)) {}

  Kind kind() const noexcept { return kind_; }
  bool isBool() const noexcept { return kind_ == Kind::Bool; }
  bool isIntegral() const noexcept { return kind_ == Kind::Int; }  // false for bool, as in PyTorch
  bool isFloatingPoint() const noexcept { return kind_ == Kind::Double; }

  double toDouble() const noexcept {
    switch (kind_) {
      case Kind::Bool: return u_.b ? 1.0 : 0.0;
      case Kind::Int: return static_cast<double>(u_.i);
      case Kind::Double: break;
    }
    return u_.d;
  }
  // A double is truncated toward zero; throws bp::Error(BP_OUT_OF_RANGE) for
  // NaN or a double outside int64.
  int64_t toInt() const {
    switch (kind_) {
      case Kind::Bool: return u_.b ? 1 : 0;
      case Kind::Int: return u_.i;
      case Kind::Double: break;
    }
    // -2^63 <= d < 2^63, written so that NaN fails.
    if (!(u_.d >= -9223372036854775808.0 && u_.d < 9223372036854775808.0)) {
      fail(BP_OUT_OF_RANGE, detail::concat("Scalar ", u_.d, " cannot be converted to int64 without overflow"));
    }
    return static_cast<int64_t>(u_.d);
  }
  bool toBool() const noexcept {
    switch (kind_) {
      case Kind::Bool: return u_.b;
      case Kind::Int: return u_.i != 0;
      case Kind::Double: break;
    }
    return u_.d != 0.0;
  }
  // The value as T: bool, any integer type (throws bp::Error(BP_OUT_OF_RANGE)
  // if it does not fit), float, double, Half or BFloat16.
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return toBool();
    } else if constexpr (std::is_integral_v<T>) {
      const int64_t v = toInt();
      bool fits;
      if constexpr (std::is_signed_v<T>) {
        fits = v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
               v <= static_cast<int64_t>(std::numeric_limits<T>::max());
      } else {
        fits = v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
      }
      if (!fits) fail(BP_OUT_OF_RANGE, detail::concat("Scalar ", v, " does not fit the requested integer type"));
      return static_cast<T>(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(toDouble());
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return T(static_cast<float>(toDouble()));
    } else {
      static_assert(std::is_same_v<T, bool>,
                    "bp::Scalar::to<T>: T must be bool, an integer type, float, double, bp::Half or bp::BFloat16");
    }
  }

 private:
  Kind kind_;
  union {
    bool b;
    int64_t i;
    double d;
  } u_;
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool: return os << (s.toBool() ? "true" : "false");
    case Scalar::Kind::Int: return os << s.toInt();
    case Scalar::Kind::Double: break;
  }
  return os << s.toDouble();
}

// A call's dispatch key set. A kernel that declares it as its FIRST
// parameter receives call->dispatch_keys (it is not part of the signature);
// pass it, minus the caller's own key and those above, to
// Operator::redispatch.
struct DispatchKeys {
  uint64_t bits;
};

namespace detail {
template <class T>
struct ScalarTypeOf {
  static constexpr bool kKnown = false;
};
#define BP_DETAIL_SCALAR_TYPE_OF(CPP, ST)                \
  template <>                                            \
  struct ScalarTypeOf<CPP> {                             \
    static constexpr bool kKnown = true;                 \
    static constexpr ScalarType kValue = ScalarType::ST; \
  };
BP_DETAIL_SCALAR_TYPE_OF(bool, Bool)
BP_DETAIL_SCALAR_TYPE_OF(uint8_t, UInt8)
BP_DETAIL_SCALAR_TYPE_OF(int8_t, Int8)
BP_DETAIL_SCALAR_TYPE_OF(int32_t, Int32)
BP_DETAIL_SCALAR_TYPE_OF(int64_t, Int64)
BP_DETAIL_SCALAR_TYPE_OF(Half, Float16)
BP_DETAIL_SCALAR_TYPE_OF(BFloat16, BFloat16)
BP_DETAIL_SCALAR_TYPE_OF(float, Float32)
BP_DETAIL_SCALAR_TYPE_OF(double, Float64)
BP_DETAIL_SCALAR_TYPE_OF(int16_t, Int16)
BP_DETAIL_SCALAR_TYPE_OF(uint16_t, UInt16)
BP_DETAIL_SCALAR_TYPE_OF(uint32_t, UInt32)
BP_DETAIL_SCALAR_TYPE_OF(uint64_t, UInt64)
#undef BP_DETAIL_SCALAR_TYPE_OF
}  // namespace detail

// The ScalarType of C++ element type T (bool, uint8_t, int8_t, int16_t,
// int32_t, int64_t, uint16_t, uint32_t, uint64_t, bp::Half, bp::BFloat16,
// float, double; const allowed).
template <class T>
constexpr ScalarType scalarTypeOf() noexcept {
  static_assert(detail::ScalarTypeOf<std::remove_cv_t<T>>::kKnown,
                "bp: element type must be one of bool, uint8_t, int8_t, int16_t, int32_t, int64_t, uint16_t, "
                "uint32_t, uint64_t, bp::Half, bp::BFloat16, float, double (optionally const)");
  return detail::ScalarTypeOf<std::remove_cv_t<T>>::kValue;
}

// ------------------------------------------------------------------ Tensor

// Owns one reference to a host tensor (BP_Tensor*), or none ("undefined").
// Copy retains, destruction releases, move transfers. Metadata comes from
// ONE host call (tensor_info) made on first use and cached in the object: a
// host tensor's metadata never changes.
// Thread-safety: distinct Tensor objects may be used concurrently (even for
// the same host tensor); one Tensor object may not be used from two threads
// at once, not even through const methods, because the cache fills lazily.
class Tensor;
namespace detail {
template <class D, bool kByReference>
struct ArgFetch;
}  // namespace detail

class Tensor {
 public:
  // An undefined tensor (get() == nullptr).
  Tensor() noexcept = default;

  // Shares `t` (retains it); the caller keeps its own reference. NULL gives
  // an undefined tensor.
  static Tensor borrow(BP_Tensor* t) {
    Tensor r;
    if (t != nullptr) r.t_ = retain(t);
    return r;
  }
  // Takes over a reference the caller owns (e.g. an op_call return); NULL
  // gives an undefined tensor.
  static Tensor adopt(BP_Tensor* t) noexcept {
    Tensor r;
    r.t_ = t;
    return r;
  }

  // Copies and moves do not carry the metadata cache: it is refilled by one
  // host call when first needed, and a kernel returning a tensor never pays
  // for copying it.
  Tensor(const Tensor& o) : t_(o.t_ ? retain(o.t_) : nullptr) {}
  Tensor(Tensor&& o) noexcept : t_(o.t_), owned_(o.owned_) {
    o.t_ = nullptr;
    o.has_info_ = false;
    o.owned_ = true;
  }
  Tensor& operator=(const Tensor& o) {
    if (this != &o) *this = Tensor(o);
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      reset();
      t_ = o.t_;
      has_info_ = false;
      owned_ = o.owned_;
      o.t_ = nullptr;
      o.has_info_ = false;
      o.owned_ = true;
    }
    return *this;
  }
  ~Tensor() { reset(); }

  // Releases the reference (if any); the tensor becomes undefined.
  void reset() noexcept {
    if (t_ != nullptr && owned_) releaseReference();
    t_ = nullptr;
    has_info_ = false;
    owned_ = true;
  }
  // The host tensor, still owned by this object (borrowed by the caller).
  BP_Tensor* get() const noexcept { return t_; }
  // Gives up ownership: returns the reference (the caller now owns it, e.g.
  // to store into a kernel's returns) and leaves this tensor undefined.
  BP_Tensor* release() {
    BP_Tensor* t = t_;
    if (t != nullptr && !owned_) t = retain(t);  // a view of a kernel argument: make a real reference
    t_ = nullptr;
    has_info_ = false;
    owned_ = true;
    return t;
  }
  bool defined() const noexcept { return t_ != nullptr; }

  // All metadata; pointers inside are valid while this tensor lives. Throws
  // bp::Error(BP_FAILED_PRECONDITION) on an undefined tensor (so do the
  // accessors below).
  const BP_TensorInfo& info() const {
    if (!has_info_) [[unlikely]] fetchInfo();
    return info_;
  }
  int64_t dim() const { return info().dim; }
  // Size of dimension `d`; negative `d` counts from the end. Throws
  // bp::Error(BP_OUT_OF_RANGE) outside [-dim(), dim()).
  int64_t size(int64_t d) const { return info().sizes[wrapDim(d)]; }
  // Stride of dimension `d` in elements; `d` as for size().
  int64_t stride(int64_t d) const { return info().strides[wrapDim(d)]; }
  IntList sizes() const { return IntList(info().sizes, static_cast<size_t>(info().dim)); }
  IntList strides() const { return IntList(info().strides, static_cast<size_t>(info().dim)); }
  int64_t numel() const { return info().numel; }
  ScalarType dtype() const { return static_cast<ScalarType>(info().dtype); }
  size_t element_size() const { return elementSize(dtype()); }
  Device device() const { return Device::fromC(info().device); }
  int64_t storage_offset() const { return info().storage_offset; }
  bool is_contiguous() const { return info().is_contiguous != 0; }
  // Note [Host and device addresses]
  // A tensor's first element has one address, but whether the host may
  // dereference it depends on the device, so the SDK spells the two uses
  // differently:
  // - data_ptr<T>() is for code that reads and writes the elements on the
  //   host. It refuses (BP_FAILED_PRECONDITION) unless the tensor is on the
  //   cpu or on a device type this plugin registered with host-accessible
  //   memory (DeviceBackend::hostAccessible, BP_DeviceTypeDesc
  //   .host_accessible): a pointer it returns is safe to dereference.
  // - device_ptr<T>() is the address on the tensor's device, unchecked: to
  //   hand to a driver or a device kernel, or for a plugin to translate
  //   into its own memory (samples/vendor_plugin). Dereferencing it on the
  //   host is wrong unless the memory is host memory.
  // - data_ptr() and device_ptr() without T are that raw address as void*,
  //   unchecked (data_ptr() is kept under its old name for the GPU plugins,
  //   which pass it to their drivers).
  // The check is a compare (cpu first) and a bit test on cached metadata:
  // about 0.2 ns a call. A device type of
  // another plugin (e.g. "cuda" seen from a plugin adding kernels to it) is
  // not known to be host memory: use device_ptr<T>() there.

  // The address of the first element (storage + offset) on the tensor's
  // device; see Note [Host and device addresses]. Unchecked.
  void* data_ptr() const { return info().data; }
  void* device_ptr() const { return info().data; }
  // The first element as a host pointer T* (T may be const), for the host to
  // dereference. Throws bp::Error(BP_INVALID_ARGUMENT) if T's ScalarType is
  // not dtype(), and bp::Error(BP_FAILED_PRECONDITION) if the tensor's
  // memory is not known to be host memory (Note [Host and device
  // addresses]).
  template <class T>
  T* data_ptr() const {
    T* p = typedAddress<T>("data_ptr");
    const int32_t type = info().device.type;
    if (type != 0 && !detail::isHostAccessibleType(type)) [[unlikely]]  // cpu first: the common case
      notHostMemory(scalarTypeOf<T>());
    return p;
  }
  // The first element's device address as T* (T may be const), not to be
  // dereferenced on the host unless the memory is host memory. Throws
  // bp::Error(BP_INVALID_ARGUMENT) if T's ScalarType is not dtype().
  template <class T>
  T* device_ptr() const {
    return typedAddress<T>("device_ptr");
  }

  // A new contiguous tensor on `device`, allocated by that device's
  // allocator; contents uninitialized.
  static Tensor empty(IntList sizes, ScalarType dtype, Device device) {
    BP_Tensor* out = nullptr;
    throwIfError(detail::hostSlot(host().tensor_empty, "tensor_empty")(
        sizes.data(), sizes.size(), nullptr, static_cast<BP_ScalarType>(dtype), device.toC(), &out));
    return adoptResult(out, "tensor_empty");
  }
  // As empty(), with explicit strides (in elements).
  static Tensor empty_strided(IntList sizes, IntList strides, ScalarType dtype, Device device) {
    checkSameRank(sizes, strides, "empty_strided");
    BP_Tensor* out = nullptr;
    throwIfError(detail::hostSlot(host().tensor_empty, "tensor_empty")(
        sizes.data(), sizes.size(), strides.data(), static_cast<BP_ScalarType>(dtype), device.toC(), &out));
    return adoptResult(out, "tensor_empty");
  }
  // A view sharing this tensor's storage (offset and strides in elements).
  Tensor as_strided(IntList sizes, IntList strides, int64_t storage_offset) const {
    if (t_ == nullptr) fail(BP_FAILED_PRECONDITION, "as_strided() called on an undefined bp::Tensor");
    checkSameRank(sizes, strides, "as_strided");
    BP_Tensor* out = nullptr;
    throwIfError(detail::hostSlot(host().tensor_view, "tensor_view")(t_, sizes.data(), strides.data(), sizes.size(),
                                                                     storage_offset, &out));
    return adoptResult(out, "tensor_view");
  }

 private:
  // A non-owning view of a kernel argument the host keeps alive for the
  // call: no retain, no release. Only the kernel adapter makes these, for
  // `const bp::Tensor&` parameters (Note [Borrowed kernel arguments]).
  static Tensor unowned(BP_Tensor* t) noexcept {
    Tensor r;
    r.t_ = t;
    r.owned_ = false;
    return r;
  }
  template <class D, bool kByReference>
  friend struct detail::ArgFetch;

  template <class T>
  T* typedAddress(const char* accessor) const {
    constexpr ScalarType want = scalarTypeOf<T>();
    if (dtype() != want) [[unlikely]]
      wrongDtype(accessor, want);
    return static_cast<T*>(info().data);
  }
  [[noreturn, gnu::cold, gnu::noinline]] void wrongDtype(const char* accessor, ScalarType want) const {
    fail(BP_INVALID_ARGUMENT,
         detail::concat(accessor, "<", name(want), ">() called on a tensor of dtype ", name(dtype())));
  }
  [[noreturn, gnu::cold, gnu::noinline]] void notHostMemory(ScalarType want) const {
    const Device d = device();
    const char* type_name = nullptr;
#if BP_ABI_MINOR >= 1
    if (detail::g_host != nullptr && detail::g_host->device_type_name != nullptr)
      type_name = detail::g_host->device_type_name(d.type);
#endif
    fail(BP_FAILED_PRECONDITION,
         detail::concat("data_ptr<", name(want), ">() called on a tensor on ",
                        type_name ? std::string(type_name) : "device type " + std::to_string(d.type), ":", d.index,
                        ", whose memory this plugin does not know to be host memory; a host pointer to it would not "
                        "be safe to dereference. Use device_ptr<",
                        name(want),
                        ">() for the device address (to pass to the device or translate), or register the device "
                        "type with hostAccessible() true if the host may read it"));
  }

  // Out of line, so that the common case of reset() and info() stays small
  // enough to inline into every kernel.
  [[gnu::noinline]] void releaseReference() noexcept {
    // Read g_host directly: destructors must not throw, and a Tensor made
    // before init (impossible for a defined one) has nothing to release.
    if (detail::g_host != nullptr && detail::g_host->tensor_release != nullptr) detail::g_host->tensor_release(t_);
  }
  [[gnu::noinline]] void fetchInfo() const {
    if (t_ == nullptr) fail(BP_FAILED_PRECONDITION, "metadata of an undefined bp::Tensor was requested");
    // Filled in place: copying a freshly written local struct would stall on
    // store forwarding, and this runs for every argument of a kernel. The
    // host writes struct_size (what it filled, at most our buffer), then
    // the fields it knows; a field an older host lacks reads as zero.
    info_.struct_size = BP_TensorInfo_STRUCT_SIZE;  // the fields we know (Note [ABI rules])
    detail::hostSlot(host().tensor_info, "tensor_info")(t_, &info_);
    const size_t filled = info_.struct_size;
    if (filled < BP_TensorInfo_STRUCT_SIZE) [[unlikely]] {
      if (filled < sizeof(size_t)) fail(BP_INTERNAL, "the host's tensor_info wrote an invalid struct_size");
      std::memset(reinterpret_cast<char*>(&info_) + filled, 0, sizeof(BP_TensorInfo) - filled);
    }
    has_info_ = true;
  }

  static BP_Tensor* retain(BP_Tensor* t) {
    BP_Tensor* r = detail::hostSlot(host().tensor_retain, "tensor_retain")(t);
    if (r == nullptr) fail(BP_INTERNAL, "the host's tensor_retain returned NULL");
    return r;
  }
  static Tensor adoptResult(BP_Tensor* out, const char* what) {
    if (out == nullptr) fail(BP_INTERNAL, std::string("the host's ") + what + " succeeded but returned no tensor");
    return adopt(out);
  }
  static void checkSameRank(IntList sizes, IntList strides, const char* what) {
    if (sizes.size() != strides.size()) {
      fail(BP_INVALID_ARGUMENT, detail::concat(what, ": ", sizes.size(), " sizes but ", strides.size(), " strides"));
    }
  }
  size_t wrapDim(int64_t d) const {
    const int64_t n = info().dim;
    const int64_t w = d < 0 ? d + n : d;
    if (w < 0 || w >= n) {
      fail(BP_OUT_OF_RANGE, detail::concat("dimension ", d, " is out of range for a tensor with ", n,
                                           " dimensions (expected ", -n, " to ", n - 1, ")"));
    }
    return static_cast<size_t>(w);
  }

  BP_Tensor* t_ = nullptr;
  mutable BP_TensorInfo info_;  // valid only while has_info_; left uninitialised (hot path)
  mutable bool has_info_ = false;
  bool owned_ = true;  // false only for views of kernel arguments (unowned())
};

// ---------------------------------------------------- packing call arguments

namespace detail {
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <class T>
inline constexpr bool kAlwaysFalse = false;

// Arrays that BP_Values point into while a call packs std::vector<Tensor>.
struct CallStorage {
  std::vector<std::vector<BP_Tensor*>> tensor_lists;
};

template <class T>
inline constexpr bool kNeedsStorage = std::is_same_v<std::decay_t<T>, std::vector<Tensor>> ||
                                      std::is_same_v<std::decay_t<T>, std::vector<std::optional<Tensor>>>;

inline BP_Value noneValue() noexcept {
  BP_Value v;
  std::memset(&v, 0, sizeof v);  // BP_VALUE_NONE, reserved 0
  return v;
}

// One call argument as a BP_Value that borrows from `v` (and `storage`).
template <class T>
BP_Value packValue(const T& v, CallStorage& storage) {
  using D = std::decay_t<T>;
  BP_Value out = noneValue();
  if constexpr (std::is_same_v<D, Tensor>) {
    if (v.defined()) {  // an undefined Tensor is passed as None
      out.tag = BP_VALUE_TENSOR;
      out.u.tensor = v.get();
    }
  } else if constexpr (std::is_same_v<D, std::nullopt_t> || std::is_same_v<D, std::nullptr_t>) {
    // None
  } else if constexpr (IsOptional<D>::value) {
    if (v.has_value()) out = packValue(*v, storage);
  } else if constexpr (std::is_same_v<D, bool>) {
    out.tag = BP_VALUE_BOOL;
    out.u.b = v ? 1 : 0;
  } else if constexpr (std::is_integral_v<D>) {
    if constexpr (std::is_unsigned_v<D> && sizeof(D) >= sizeof(int64_t)) {
      if (v > static_cast<D>(std::numeric_limits<int64_t>::max())) {
        fail(BP_OUT_OF_RANGE, concat("integer argument ", v, " does not fit int64"));
      }
    }
    out.tag = BP_VALUE_INT;
    out.u.i = static_cast<int64_t>(v);
  } else if constexpr (std::is_floating_point_v<D> || std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    out.tag = BP_VALUE_DOUBLE;
    out.u.d = static_cast<double>(v);
  } else if constexpr (std::is_same_v<D, Scalar>) {
    switch (v.kind()) {
      case Scalar::Kind::Bool:
        out.tag = BP_VALUE_BOOL;
        out.u.b = v.toBool() ? 1 : 0;
        break;
      case Scalar::Kind::Int:
        out.tag = BP_VALUE_INT;
        out.u.i = v.toInt();
        break;
      case Scalar::Kind::Double:
        out.tag = BP_VALUE_DOUBLE;
        out.u.d = v.toDouble();
        break;
    }
  } else if constexpr (std::is_same_v<D, IntList> || std::is_same_v<D, std::vector<int64_t>>) {
    IntList l(v);
    out.tag = BP_VALUE_INT_LIST;
    out.u.int_list.data = l.data();
    out.u.int_list.size = l.size();
  } else if constexpr (std::is_same_v<D, DoubleList> || std::is_same_v<D, std::vector<double>>) {
    DoubleList l(v);
    out.tag = BP_VALUE_DOUBLE_LIST;
    out.u.double_list.data = l.data();
    out.u.double_list.size = l.size();
  } else if constexpr (std::is_same_v<D, ScalarType>) {
    out.tag = BP_VALUE_SCALAR_TYPE;
    out.u.scalar_type = static_cast<BP_ScalarType>(v);
  } else if constexpr (std::is_same_v<D, Device> || std::is_same_v<D, BP_Device>) {
    out.tag = BP_VALUE_DEVICE;
    out.u.device.type = v.type;
    out.u.device.index = v.index;
  } else if constexpr (std::is_same_v<D, std::vector<Tensor>> ||
                       std::is_same_v<D, std::vector<std::optional<Tensor>>>) {
    constexpr bool kOptional = std::is_same_v<D, std::vector<std::optional<Tensor>>>;
    std::vector<BP_Tensor*> ptrs;
    ptrs.reserve(v.size());
    for (const auto& t : v) {
      BP_Tensor* p;
      if constexpr (kOptional)
        p = (t.has_value() && t->defined()) ? t->get() : nullptr;
      else
        p = t.get();
      if (!kOptional && p == nullptr) fail(BP_INVALID_ARGUMENT, "an undefined bp::Tensor in a Tensor[] argument");
      ptrs.push_back(p);
    }
    storage.tensor_lists.push_back(std::move(ptrs));  // reserved: no reallocation, pointers stay valid
    out.tag = kOptional ? BP_VALUE_OPTIONAL_TENSOR_LIST : BP_VALUE_TENSOR_LIST;
    out.u.tensor_list.data = storage.tensor_lists.back().data();
    out.u.tensor_list.size = storage.tensor_lists.back().size();
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    if constexpr (std::is_pointer_v<T>) {
      if (v == nullptr) fail(BP_INVALID_ARGUMENT, "a NULL const char* passed as a str argument");
    }
    std::string_view s(v);
    out.tag = BP_VALUE_STRING;
    out.u.str.data = s.data();
    out.u.str.size = s.size();
  } else {
    static_assert(kAlwaysFalse<T>,
                  "bp::Operator::call: unsupported argument type. Supported: bp::Tensor, std::optional<...>, "
                  "std::nullopt, integers, bool, float/double, bp::Scalar, bp::IntList, std::vector<int64_t>, "
                  "bp::DoubleList, std::vector<double>, bp::ScalarType, bp::Device, std::vector<bp::Tensor>, "
                  "std::vector<std::optional<bp::Tensor>>, and strings (std::string_view, std::string, const char*)");
  }
  return out;
}
}  // namespace detail

// ----------------------------------------------------- kernel value traits

namespace detail {
inline const char* tagName(BP_ValueTag tag) noexcept {
  switch (tag) {
    case BP_VALUE_NONE: return "none";
    case BP_VALUE_TENSOR: return "tensor";
    case BP_VALUE_INT: return "int";
    case BP_VALUE_DOUBLE: return "float";
    case BP_VALUE_BOOL: return "bool";
    case BP_VALUE_STRING: return "str";
    case BP_VALUE_SCALAR_TYPE: return "ScalarType";
    case BP_VALUE_DEVICE: return "Device";
    case BP_VALUE_INT_LIST: return "int[]";
    case BP_VALUE_DOUBLE_LIST: return "float[]";
    case BP_VALUE_BOOL_LIST: return "bool[]";
    case BP_VALUE_TENSOR_LIST: return "Tensor[]";
    case BP_VALUE_OPTIONAL_TENSOR_LIST: return "Tensor?[]";
    default: return "unknown value tag";
  }
}

inline const char* opName(const BP_Operator* op) noexcept {
  const char* n = nullptr;
  if (op != nullptr && g_host != nullptr && g_host->op_name != nullptr) n = g_host->op_name(op);
  return n != nullptr ? n : "<unknown operator>";
}

// Throws BP_INVALID_ARGUMENT "argument <index> of <op>: expected <type>, got
// <tag>"; `index` is 0-based, as in call->args.
[[noreturn]] inline void argumentMismatch(const BP_KernelCall* call, size_t index, const std::string& expected,
                                          BP_ValueTag got) {
  fail(BP_INVALID_ARGUMENT,
       concat("argument ", index, " of ", opName(call->op), ": expected ", expected, ", got ", tagName(got)));
}

// ArgTraits<T>: how a kernel parameter of (decayed) type T is read from a
// BP_Value. name() is its spelling in the host's signature notation;
// accepts() says which tags it takes; get() reads one (after accepts()).
template <class T>
struct ArgTraits {
  static_assert(!std::is_same_v<T, DispatchKeys>, "bp: bp::DispatchKeys may only be a kernel's FIRST parameter");
  static_assert(std::is_same_v<T, DispatchKeys> || kAlwaysFalse<T>,
                "bp: unsupported kernel parameter type. Supported (by value or const&): bp::Tensor, "
                "std::optional<bp::Tensor>, std::vector<bp::Tensor>, std::vector<std::optional<bp::Tensor>>, "
                "int64_t (not int), std::optional<int64_t>, bp::IntList, std::optional<bp::IntList>, double (not "
                "float), std::optional<double>, bp::DoubleList, bool, std::optional<bool>, std::string_view (not "
                "std::string), std::optional<std::string_view>, bp::Scalar, std::optional<bp::Scalar>, "
                "bp::ScalarType, std::optional<bp::ScalarType>, bp::Device, std::optional<bp::Device>; and "
                "bp::DispatchKeys as the first parameter only");
};

template <>
struct ArgTraits<Tensor> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "Tensor"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_TENSOR; }
  static Tensor get(const BP_Value& v) { return Tensor::borrow(v.u.tensor); }
};
template <>
struct ArgTraits<std::vector<Tensor>> {
  static constexpr bool kOptionalOk = false;
  static std::string name() { return "Tensor[]"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_TENSOR_LIST; }
  static std::vector<Tensor> get(const BP_Value& v) {
    std::vector<Tensor> r;
    r.reserve(v.u.tensor_list.size);
    for (size_t i = 0; i < v.u.tensor_list.size; ++i) r.push_back(Tensor::borrow(v.u.tensor_list.data[i]));
    return r;
  }
};
template <>
struct ArgTraits<std::vector<std::optional<Tensor>>> {
  static constexpr bool kOptionalOk = false;
  static std::string name() { return "Tensor?[]"; }
  static bool accepts(BP_ValueTag t) noexcept {
    return t == BP_VALUE_OPTIONAL_TENSOR_LIST || t == BP_VALUE_TENSOR_LIST;
  }
  static std::vector<std::optional<Tensor>> get(const BP_Value& v) {
    std::vector<std::optional<Tensor>> r;
    r.reserve(v.u.tensor_list.size);
    for (size_t i = 0; i < v.u.tensor_list.size; ++i) {
      BP_Tensor* t = v.u.tensor_list.data[i];
      if (t == nullptr)
        r.emplace_back(std::nullopt);
      else
        r.emplace_back(Tensor::borrow(t));
    }
    return r;
  }
};
template <>
struct ArgTraits<int64_t> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "int"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_INT; }
  static int64_t get(const BP_Value& v) noexcept { return v.u.i; }
};
template <>
struct ArgTraits<IntList> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "int[]"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_INT_LIST; }
  static IntList get(const BP_Value& v) noexcept { return IntList(v.u.int_list.data, v.u.int_list.size); }
};
template <>
struct ArgTraits<double> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "float"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_DOUBLE || t == BP_VALUE_INT; }
  static double get(const BP_Value& v) noexcept { return v.tag == BP_VALUE_INT ? static_cast<double>(v.u.i) : v.u.d; }
};
template <>
struct ArgTraits<DoubleList> {
  static constexpr bool kOptionalOk = false;
  static std::string name() { return "float[]"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_DOUBLE_LIST; }
  static DoubleList get(const BP_Value& v) noexcept { return DoubleList(v.u.double_list.data, v.u.double_list.size); }
};
template <>
struct ArgTraits<bool> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "bool"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_BOOL; }
  static bool get(const BP_Value& v) noexcept { return v.u.b != 0; }
};
template <>
struct ArgTraits<std::string_view> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "str"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_STRING; }
  static std::string_view get(const BP_Value& v) noexcept {
    return v.u.str.size == 0 ? std::string_view() : std::string_view(v.u.str.data, v.u.str.size);
  }
};
template <>
struct ArgTraits<Scalar> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "Scalar"; }
  static bool accepts(BP_ValueTag t) noexcept {
    return t == BP_VALUE_INT || t == BP_VALUE_DOUBLE || t == BP_VALUE_BOOL;
  }
  static Scalar get(const BP_Value& v) noexcept {
    if (v.tag == BP_VALUE_INT) return Scalar(v.u.i);
    if (v.tag == BP_VALUE_DOUBLE) return Scalar(v.u.d);
    return Scalar(v.u.b != 0);
  }
};
template <>
struct ArgTraits<ScalarType> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "ScalarType"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_SCALAR_TYPE; }
  static ScalarType get(const BP_Value& v) noexcept { return static_cast<ScalarType>(v.u.scalar_type); }
};
template <>
struct ArgTraits<Device> {
  static constexpr bool kOptionalOk = true;
  static std::string name() { return "Device"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_DEVICE; }
  static Device get(const BP_Value& v) noexcept { return Device::fromC(v.u.device); }
};
template <class T>
struct ArgTraits<std::optional<T>> {
  static_assert(ArgTraits<T>::kOptionalOk,
                "bp: std::optional of this parameter type has no schema spelling (no \"Tensor[]?\", \"float[]?\")");
  static constexpr bool kOptionalOk = false;
  static std::string name() { return ArgTraits<T>::name() + "?"; }
  static bool accepts(BP_ValueTag t) noexcept { return t == BP_VALUE_NONE || ArgTraits<T>::accepts(t); }
  static std::optional<T> get(const BP_Value& v) {
    if (v.tag == BP_VALUE_NONE) return std::nullopt;
    return ArgTraits<T>::get(v);
  }
};

// ReturnTraits<R>: how a kernel's return value is stored into
// call->returns (store) and how an op_call's returns are read back (load).
template <class R>
struct ReturnTraits {
  static_assert(kAlwaysFalse<R>,
                "bp: unsupported kernel return type. Supported: bp::Tensor, std::tuple<bp::Tensor, ...>, void, "
                "int64_t, double, bool, bp::Scalar");
};

inline void storeTensor(Tensor& t, BP_Value& out) noexcept {
  out.tag = BP_VALUE_TENSOR;
  out.reserved = 0;
  out.u.tensor = t.release();  // a new reference, adopted by the host
}
[[noreturn]] inline void undefinedReturn(const BP_KernelCall* call, size_t index) {
  fail(BP_INTERNAL, concat("the kernel for ", opName(call->op), " returned an undefined bp::Tensor as return ", index));
}
[[noreturn]] inline void wrongReturn(const char* op, size_t index, const char* expected, BP_ValueTag got) {
  fail(BP_INTERNAL, concat(op, " return ", index, ": expected ", expected, ", got ", tagName(got)));
}

template <>
struct ReturnTraits<void> {
  static constexpr size_t kCount = 0;
  static std::string name() { return "()"; }
};
template <>
struct ReturnTraits<Tensor> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "Tensor"; }
  static void store(Tensor r, const BP_KernelCall* call) {
    if (!r.defined()) undefinedReturn(call, 0);
    storeTensor(r, call->returns[0]);
  }
  static Tensor load(std::array<Tensor, 1>& owned, const BP_Value* rets, const char* op) {
    if (rets[0].tag != BP_VALUE_TENSOR || !owned[0].defined()) wrongReturn(op, 0, "Tensor", rets[0].tag);
    return std::move(owned[0]);
  }
};
template <class... T>
struct ReturnTraits<std::tuple<T...>> {
  static_assert(sizeof...(T) > 0 && (std::is_same_v<T, Tensor> && ...),
                "bp: a tuple return must hold bp::Tensor only: std::tuple<bp::Tensor, bp::Tensor, ...>");
  static constexpr size_t kCount = sizeof...(T);
  static std::string name() {
    std::string s = "(";
    for (size_t i = 0; i < kCount; ++i) s += i ? ", Tensor" : "Tensor";
    return s + ")";
  }
  static void store(std::tuple<T...> r, const BP_KernelCall* call) {
    storeAll(r, call, std::index_sequence_for<T...>());
  }
  static std::tuple<T...> load(std::array<Tensor, kCount>& owned, const BP_Value* rets, const char* op) {
    for (size_t i = 0; i < kCount; ++i) {
      if (rets[i].tag != BP_VALUE_TENSOR || !owned[i].defined()) wrongReturn(op, i, "Tensor", rets[i].tag);
    }
    return loadAll(owned, std::index_sequence_for<T...>());
  }

 private:
  template <size_t... I>
  static void storeAll(std::tuple<T...>& r, const BP_KernelCall* call, std::index_sequence<I...>) {
    // Check every tensor before handing any over, so an error leaves no
    // partial returns behind.
    ((std::get<I>(r).defined() ? void() : undefinedReturn(call, I)), ...);
    (storeTensor(std::get<I>(r), call->returns[I]), ...);
  }
  template <size_t... I>
  static std::tuple<T...> loadAll(std::array<Tensor, kCount>& owned, std::index_sequence<I...>) {
    return std::tuple<T...>(std::move(owned[I])...);
  }
};
template <>
struct ReturnTraits<int64_t> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "int"; }
  static void store(int64_t r, const BP_KernelCall* call) noexcept {
    call->returns[0].tag = BP_VALUE_INT;
    call->returns[0].u.i = r;
  }
  static int64_t load(std::array<Tensor, 1>&, const BP_Value* rets, const char* op) {
    if (rets[0].tag != BP_VALUE_INT) wrongReturn(op, 0, "int", rets[0].tag);
    return rets[0].u.i;
  }
};
template <>
struct ReturnTraits<double> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "float"; }
  static void store(double r, const BP_KernelCall* call) noexcept {
    call->returns[0].tag = BP_VALUE_DOUBLE;
    call->returns[0].u.d = r;
  }
  static double load(std::array<Tensor, 1>&, const BP_Value* rets, const char* op) {
    if (rets[0].tag == BP_VALUE_INT) return static_cast<double>(rets[0].u.i);
    if (rets[0].tag != BP_VALUE_DOUBLE) wrongReturn(op, 0, "float", rets[0].tag);
    return rets[0].u.d;
  }
};
template <>
struct ReturnTraits<bool> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "bool"; }
  static void store(bool r, const BP_KernelCall* call) noexcept {
    call->returns[0].tag = BP_VALUE_BOOL;
    call->returns[0].u.b = r ? 1 : 0;
  }
  static bool load(std::array<Tensor, 1>&, const BP_Value* rets, const char* op) {
    if (rets[0].tag != BP_VALUE_BOOL) wrongReturn(op, 0, "bool", rets[0].tag);
    return rets[0].u.b != 0;
  }
};
template <>
struct ReturnTraits<Scalar> {
  static constexpr size_t kCount = 1;
  static std::string name() { return "Scalar"; }
  static void store(const Scalar& r, const BP_KernelCall* call) {
    CallStorage unused;
    call->returns[0] = packValue(r, unused);
  }
  static Scalar load(std::array<Tensor, 1>&, const BP_Value* rets, const char* op) {
    if (!ArgTraits<Scalar>::accepts(rets[0].tag)) wrongReturn(op, 0, "Scalar", rets[0].tag);
    return ArgTraits<Scalar>::get(rets[0]);
  }
};

template <class... P>
struct FirstIsDispatchKeys : std::false_type {};
template <class P0, class... P>
struct FirstIsDispatchKeys<P0, P...> : std::is_same<std::remove_cv_t<std::remove_reference_t<P0>>, DispatchKeys> {};

template <class P>
using Decay = std::remove_cv_t<std::remove_reference_t<P>>;

template <class P>
struct IsValueOrConstRef
    : std::bool_constant<!std::is_lvalue_reference_v<P> || std::is_const_v<std::remove_reference_t<P>>> {};

// Compile-time facts about a kernel R(P...): arity and signature string.
template <class R, class... P>
struct KernelTraits {
  static_assert(std::conjunction_v<IsValueOrConstRef<P>...>,
                "bp: kernel parameters must be taken by value or by const reference");
  static constexpr bool kTakesKeys = FirstIsDispatchKeys<P...>::value;
  static constexpr size_t kNumArgs = sizeof...(P) - (kTakesKeys ? 1 : 0);
  static constexpr size_t kNumReturns = ReturnTraits<R>::kCount;

  // "(Tensor, Scalar) -> Tensor" (Note [Canonical C++ signatures] on the host).
  static std::string signature() {
    std::string s = "(";
    appendParams(s, std::index_sequence_for<P...>());
    return s + ") -> " + ReturnTraits<R>::name();
  }

 private:
  template <size_t... I>
  static void appendParams(std::string& s, std::index_sequence<I...>) {
    bool first = true;
    (appendParam<I, Decay<P>>(s, first), ...);
    (void)first;
  }
  template <size_t I, class D>
  static void appendParam(std::string& s, bool& first) {
    if constexpr (!(kTakesKeys && I == 0)) {
      if (!first) s += ", ";
      s += ArgTraits<D>::name();
      first = false;
    }
  }
};

// Validates a call's shape against the kernel's arity.
inline void checkCall(const BP_KernelCall* call, size_t num_args, size_t num_returns) {
  if (call == nullptr) fail(BP_INTERNAL, "a kernel was called with a NULL BP_KernelCall");
  if (call->struct_size < BP_KernelCall_STRUCT_SIZE) {
    fail(BP_INTERNAL, concat("BP_KernelCall.struct_size is ", call->struct_size, ", expected at least ",
                             size_t{BP_KernelCall_STRUCT_SIZE}));
  }
  if (call->num_args != num_args || call->num_returns != num_returns) {
    fail(BP_INTERNAL, concat("the kernel for ", opName(call->op), " takes ", num_args, " arguments and returns ",
                             num_returns, " values, but was called with ", call->num_args, " arguments and room for ",
                             call->num_returns, " returns; the kernel's C++ signature does not match the schema"));
  }
  if ((num_args != 0 && call->args == nullptr) || (num_returns != 0 && call->returns == nullptr)) {
    fail(BP_INTERNAL, concat("the kernel for ", opName(call->op), " was called with NULL args or returns"));
  }
}

// Parameter I of a kernel: the call's keys, or argument I (- 1 with keys).
// Note [Borrowed kernel arguments]
// The host keeps every argument alive for the duration of a kernel call, so
// a `const bp::Tensor&` parameter is handed a non-owning view: no retain and
// no release, which keeps crossing the ABI as cheap as a native call. A
// by-value parameter (which the kernel may keep) gets its own reference.
template <class D, bool kByReference>
struct ArgFetch {
  static D get(const BP_Value& v) { return ArgTraits<D>::get(v); }
};
template <>
struct ArgFetch<Tensor, true> {
  static Tensor get(const BP_Value& v) { return Tensor::unowned(v.u.tensor); }
};

template <bool kTakesKeys, size_t I, class D, bool kByReference>
D convertArg(const BP_KernelCall* call) {
  if constexpr (kTakesKeys && I == 0) {
    return DispatchKeys{call->dispatch_keys};
  } else {
    constexpr size_t index = I - (kTakesKeys ? 1 : 0);
    const BP_Value& v = call->args[index];
    if (!ArgTraits<D>::accepts(v.tag)) argumentMismatch(call, index, ArgTraits<D>::name(), v.tag);
    return ArgFetch<D, kByReference>::get(v);
  }
}

// Inlined into each adapter, so that a kernel bound at compile time
// (bp::kernel<&f>()) is a direct call, or inlined, inside the one function
// the host calls.
template <class R, class... P, class F, size_t... I>
#if defined(__GNUC__)
[[gnu::always_inline]] inline
#endif
BP_Error* runKernel(F&& fn, const BP_KernelCall* call, std::index_sequence<I...>) noexcept {
  using Traits = KernelTraits<R, P...>;
  try {
    checkCall(call, Traits::kNumArgs, Traits::kNumReturns);
    // Braced initialization converts the arguments left to right, so the
    // first bad argument is the one reported.
    std::tuple<Decay<P>...> args{
        convertArg<Traits::kTakesKeys, I, Decay<P>,
                   std::is_lvalue_reference_v<P> && std::is_const_v<std::remove_reference_t<P>>>(call)...};
    (void)args;
    if constexpr (std::is_void_v<R>) {
      fn(std::get<I>(std::move(args))...);
    } else {
      ReturnTraits<R>::store(fn(std::get<I>(std::move(args))...), call);
    }
    return nullptr;
  } catch (...) {
    return currentExceptionToError();
  }
}

// The BP_KernelFn for kernel type R(P...): `ctx` is the kernel's function
// pointer (reinterpret_cast to void*). Checks the call's arity, converts each
// argument (a wrong tag is BP_INVALID_ARGUMENT naming the argument and the
// op), calls the kernel, stores its returns (new tensor references for the
// host) and turns exceptions into errors. Reentrant; no shared state.
template <class R, class... P>
BP_Error* kernelAdapter(void* ctx, const BP_KernelCall* call) noexcept {
  auto fn = reinterpret_cast<R (*)(P...)>(ctx);
  return runKernel<R, P...>(fn, call, std::index_sequence_for<P...>());
}

template <class F>
struct FunctionTraits {
  static_assert(kAlwaysFalse<F>, "bp::kernel<F>: F must be a pointer to a function, e.g. bp::kernel<&myKernel>()");
};
template <class R, class... P>
struct FunctionTraits<R (*)(P...)> {
  using Traits = KernelTraits<R, P...>;
  template <auto F>
  static BP_Error* adapter(void*, const BP_KernelCall* call) noexcept {
    return runKernel<R, P...>(F, call, std::index_sequence_for<P...>());
  }
};
template <class R, class... P>
struct FunctionTraits<R (*)(P...) noexcept> : FunctionTraits<R (*)(P...)> {};
}  // namespace detail

// A kernel ready to register: the BP_KernelFn, its ctx and its C++
// signature in the host's notation. Made by bp::kernel().
struct Kernel {
  BP_KernelFn fn;
  void* ctx;
  std::string cpp_signature;
};

// The signature string of kernel type R(P...), e.g. "(Tensor, Scalar) -> Tensor".
template <class R, class... P>
std::string kernelSignature(R (*)(P...)) {
  return detail::KernelTraits<R, P...>::signature();
}

// A typed kernel called through detail::kernelAdapter with ctx = `fn`.
template <class R, class... P>
Kernel kernel(R (*fn)(P...)) {
  return Kernel{&detail::kernelAdapter<R, P...>, reinterpret_cast<void*>(fn),
                detail::KernelTraits<R, P...>::signature()};
}

// The same kernel with the function bound at compile time (no indirect
// call, ctx unused): m.impl("ns::op", dev, bp::kernel<&myKernel>()).
template <auto F>
Kernel kernel() {
  using FT = detail::FunctionTraits<decltype(F)>;
  return Kernel{&FT::template adapter<F>, nullptr, FT::Traits::signature()};
}

// ---------------------------------------------------------------- Operator

// An operator known to the host, called through the dispatcher. Immutable
// and thread-safe; the handle is valid for the life of the process.
class Operator {
 public:
  Operator() noexcept = default;
  explicit Operator(const BP_Operator* op) noexcept : op_(op) {}

  // The operator "ns::name.overload" ("name.overload" in the standard
  // namespace). Throws bp::Error (BP_NOT_FOUND) if the host has none.
  static Operator find(const char* qualified_name) {
    const BP_Operator* op = nullptr;
    throwIfError(detail::hostSlot(host().op_find, "op_find")(qualified_name, &op));
    if (op == nullptr) fail(BP_NOT_FOUND, concatName("operator not found: ", qualified_name));
    return Operator(op);
  }

  const BP_Operator* get() const noexcept { return op_; }
  // "ns::name.overload"; lives as long as the process.
  const char* name() const { return detail::hostSlot(host().op_name, "op_name")(checked()); }

  // Raw call: `args` borrowed; on success tensor returns are new references
  // the caller owns (Tensor::adopt them). On error the host has released and
  // cleared the returns; this throws bp::Error.
  void callBoxed(const BP_Value* args, size_t num_args, BP_Value* returns, size_t num_returns) const {
    throwIfError(detail::hostSlot(host().op_call, "op_call")(checked(), args, num_args, returns, num_returns));
  }
  // As callBoxed, for the kernel of the highest key in `keys` (how a kernel
  // reaches the kernels below its own key).
  void redispatchBoxed(DispatchKeys keys, const BP_Value* args, size_t num_args, BP_Value* returns,
                       size_t num_returns) const {
    throwIfError(detail::hostSlot(host().op_redispatch, "op_redispatch")(checked(), keys.bits, args, num_args, returns,
                                                                         num_returns));
  }

  // Typed call: packs `args` (Tensor, std::optional<Tensor>/std::nullopt ->
  // None, integers, double, bool, Scalar, IntList, std::vector<int64_t>,
  // ScalarType, Device, strings, std::vector<Tensor>) into BP_Values and
  // returns R: Tensor (default), std::tuple<Tensor...>, void, int64_t,
  // double, bool or Scalar. Throws bp::Error if the call fails or returns
  // something else.
  template <class R = Tensor, class... Args>
  R call(Args&&... args) const {
    return invoke<R>(nullptr, args...);
  }
  template <class... Args>
  Tensor callTensor(Args&&... args) const {
    return invoke<Tensor>(nullptr, args...);
  }
  template <class R = Tensor, class... Args>
  R redispatch(DispatchKeys keys, Args&&... args) const {
    return invoke<R>(&keys, args...);
  }
  template <class... Args>
  Tensor redispatchTensor(DispatchKeys keys, Args&&... args) const {
    return invoke<Tensor>(&keys, args...);
  }

 private:
  const BP_Operator* checked() const {
    if (op_ == nullptr) fail(BP_FAILED_PRECONDITION, "call through an empty bp::Operator");
    return op_;
  }
  static std::string concatName(const char* what, const char* n) { return std::string(what) + (n ? n : "(null)"); }

  template <class R, class... Args>
  R invoke(const DispatchKeys* keys, const Args&... args) const {
    constexpr size_t kRet = detail::ReturnTraits<R>::kCount;
    detail::CallStorage storage;
    constexpr size_t kLists = (size_t{0} + ... + (detail::kNeedsStorage<Args> ? 1 : 0));
    if constexpr (kLists > 0) storage.tensor_lists.reserve(kLists);
    std::array<BP_Value, sizeof...(Args)> values{detail::packValue(args, storage)...};
    std::array<BP_Value, kRet> rets;
    for (BP_Value& r : rets) r = detail::noneValue();
    if (keys != nullptr)
      redispatchBoxed(*keys, values.data(), values.size(), rets.data(), kRet);
    else
      callBoxed(values.data(), values.size(), rets.data(), kRet);
    // Own every returned tensor first, so none leaks if the kinds are wrong.
    std::array<Tensor, kRet> owned;
    for (size_t i = 0; i < kRet; ++i) {
      if (rets[i].tag == BP_VALUE_TENSOR) owned[i] = Tensor::adopt(rets[i].u.tensor);
    }
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      return detail::ReturnTraits<R>::load(owned, rets.data(), detail::opName(op_));
    }
  }

  const BP_Operator* op_ = nullptr;
};

// ------------------------------------------------------- elementwise loops

// Note [Strided loops]
// Most kernels of a device whose memory the kernel can address directly
// (host memory, or device memory the plugin translates) are one function
// applied to every element. bp::forEach runs it over any layout the host
// hands a kernel: strided and transposed views, storage offsets (the data
// pointer is the first element), expanded inputs (stride 0), 0-d tensors
// (one element) and empty ones (no call, no memory touched), with inputs
// broadcast to the output's shape as PyTorch broadcasts (sizes aligned at
// the end; a size-1 or missing dimension repeats). An `.out` kernel's
// output may itself be strided, and in place it is exactly an input (same
// address, sizes and strides): every element is read before it is written,
// at the same step, so that is fine; the host refuses partial overlaps and
// expanded outputs before a kernel runs. Dimensions that are contiguous
// for every operand are merged first, so a contiguous call is one flat
// loop. No heap allocation up to 12 dimensions.

// Elements a loop reads or writes: the first element's address in memory
// the kernel can dereference, and the sizes and strides (in elements) of
// the view. Borrowed: sizes and strides must outlive the loop (a Tensor's
// own lists live as long as the Tensor).
template <class T>
struct StridedSpan {
  T* data = nullptr;
  IntList sizes;
  IntList strides;
};

// A tensor's elements for the host to read and write: its data_ptr<T>()
// (which checks the dtype and that the memory is host memory, Note [Host
// and device addresses]), sizes and strides.
template <class T>
StridedSpan<T> hostSpan(const Tensor& t) {
  return StridedSpan<T>{t.numel() == 0 ? nullptr : t.data_ptr<T>(), t.sizes(), t.strides()};
}
// A tensor's elements at `data`, the kernel's own pointer to its first
// element (e.g. device memory the plugin translated from
// t.device_ptr<T>()); checks that T is the tensor's dtype.
template <class T>
StridedSpan<T> spanAt(const Tensor& t, T* data) {
  (void)t.device_ptr<T>();  // the dtype check
  return StridedSpan<T>{data, t.sizes(), t.strides()};
}

namespace detail {
constexpr size_t kInlineLoopDims = 12;

[[noreturn, gnu::cold, gnu::noinline]] inline void loopShapeMismatch(size_t operand, IntList sizes, IntList shape) {
  fail(BP_INVALID_ARGUMENT, concat("bp::forEach: operand ", operand, " of shape ", sizes,
                                   " cannot be broadcast to the loop's shape ", shape));
}

// Calls body(ptrs) for every index of `shape` in row-major order, ptrs[k]
// being operand k's element there. `base` are the operands' first
// elements, `elem` their element sizes; each operand's sizes/strides are
// broadcast to `shape`.
template <size_t K, class Body>
void stridedLoop(IntList shape, const std::array<char*, K>& base, const std::array<size_t, K>& elem,
                 const std::array<IntList, K>& sizes, const std::array<IntList, K>& strides, Body&& body) {
  const size_t nd = shape.size();
  for (size_t k = 0; k < K; ++k) {
    const size_t od = sizes[k].size();
    if (od > nd || strides[k].size() != od) loopShapeMismatch(k, sizes[k], shape);
    for (size_t d = 0; d < od; ++d) {
      const int64_t os = sizes[k][d];
      if (os != shape[nd - od + d] && os != 1) loopShapeMismatch(k, sizes[k], shape);
    }
  }
  for (size_t d = 0; d < nd; ++d) {
    if (shape[d] == 0) return;  // no elements: no call, no address formed
  }
  // Kept dimensions, innermost first: their sizes, an odometer, and each
  // operand's step in bytes (0 where it is broadcast).
  int64_t inline_buf[kInlineLoopDims * (K + 2)];
  std::vector<int64_t> heap;
  int64_t* buf = inline_buf;
  if (nd > kInlineLoopDims) {
    heap.resize(nd * (K + 2));
    buf = heap.data();
  }
  int64_t* dims = buf;           // [nd]
  int64_t* counter = buf + nd;   // [nd]
  int64_t* step = buf + 2 * nd;  // [nd][K]
  size_t n = 0;
  for (size_t r = nd; r-- > 0;) {  // from the last (innermost) dimension
    const int64_t size = shape[r];
    if (size == 1) continue;
    int64_t s[K];
    for (size_t k = 0; k < K; ++k) {
      const size_t lead = nd - sizes[k].size();
      s[k] = r < lead || sizes[k][r - lead] == 1 ? 0 : strides[k][r - lead] * static_cast<int64_t>(elem[k]);
    }
    // Merge into the kept inner dimension when every operand continues it
    // (inner step * inner size == this step).
    bool merge = n > 0;
    for (size_t k = 0; k < K && merge; ++k) merge = step[(n - 1) * K + k] * dims[n - 1] == s[k];
    if (merge) {
      dims[n - 1] *= size;
      continue;
    }
    dims[n] = size;
    counter[n] = 0;
    for (size_t k = 0; k < K; ++k) step[n * K + k] = s[k];
    ++n;
  }
  std::array<char*, K> p = base;
  if (n == 0) {  // one element
    body(p);
    return;
  }
  const int64_t inner = dims[0];
  for (;;) {
    std::array<char*, K> q = p;
    for (int64_t i = 0; i < inner; ++i) {
      body(q);
      for (size_t k = 0; k < K; ++k) q[k] += step[k];
    }
    // Step the outer dimensions like an odometer.
    size_t d = 1;
    for (; d < n; ++d) {
      for (size_t k = 0; k < K; ++k) p[k] += step[d * K + k];
      if (++counter[d] < dims[d]) break;
      for (size_t k = 0; k < K; ++k) p[k] -= step[d * K + k] * dims[d];
      counter[d] = 0;
    }
    if (d == n) return;
  }
}

template <class T>
char* bytePointer(T* p) noexcept {
  return const_cast<char*>(reinterpret_cast<const char*>(p));
}

template <class... T, class Fn, size_t... I>
void invokeOnElements(Fn& fn, const std::array<char*, sizeof...(T)>& p, std::index_sequence<I...>) {
  fn(*reinterpret_cast<T*>(p[I])...);
}
}  // namespace detail

// Calls fn(e0, e1, ...) with references to the elements of each span at
// every index of `shape`, in row-major order, each span broadcast to
// `shape` (Note [Strided loops]). Throws bp::Error(BP_INVALID_ARGUMENT)
// when a span's sizes do not broadcast to `shape`. A span broadcast along
// a dimension is visited once per index of it, so a reduction can sum
// into one: forEachElement(self.sizes(), [](double& acc, const float& x) {
// acc += x; }, accSpan, selfSpan) with accSpan's reduced strides 0.
template <class Fn, class... T>
void forEachElement(IntList shape, Fn&& fn, const StridedSpan<T>&... spans) {
  constexpr size_t K = sizeof...(T);
  static_assert(K > 0, "bp::forEachElement: pass at least one span");
  detail::stridedLoop<K>(
      shape, {detail::bytePointer(spans.data)...}, {sizeof(T)...}, {spans.sizes...}, {spans.strides...},
      [&](const std::array<char*, K>& p) { detail::invokeOnElements<T...>(fn, p, std::index_sequence_for<T...>()); });
}

// out[i] = fn(a[i], ...) for every element of `out`, the inputs broadcast to
// out's shape: the whole body of an elementwise `.out` kernel. T is the
// element type of every tensor (checked); fn takes the inputs' elements by
// value and returns the output element. The tensors' memory must be host
// memory (data_ptr<T>(), Note [Host and device addresses]); for memory the
// plugin translates, pass StridedSpans (spanAt) instead.
//   bp::forEach<float>(out, self, [](float x) { return x < 0 ? 0.0f : x; });
template <class T, class Fn>
void forEach(const Tensor& out, const Tensor& a, Fn&& fn) {
  forEach(hostSpan<T>(out), hostSpan<const T>(a), fn);
}
template <class T, class Fn>
void forEach(const Tensor& out, const Tensor& a, const Tensor& b, Fn&& fn) {
  forEach(hostSpan<T>(out), hostSpan<const T>(a), hostSpan<const T>(b), fn);
}
template <class T, class Fn>
void forEach(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, Fn&& fn) {
  forEach(hostSpan<T>(out), hostSpan<const T>(a), hostSpan<const T>(b), hostSpan<const T>(c), fn);
}
// The same over spans, which may have different element types.
template <class O, class A, class Fn>
void forEach(const StridedSpan<O>& out, const StridedSpan<A>& a, Fn&& fn) {
  forEachElement(
      out.sizes, [&](O& o, A& x) { o = fn(x); }, out, a);
}
template <class O, class A, class B, class Fn>
void forEach(const StridedSpan<O>& out, const StridedSpan<A>& a, const StridedSpan<B>& b, Fn&& fn) {
  forEachElement(
      out.sizes, [&](O& o, A& x, B& y) { o = fn(x, y); }, out, a, b);
}
template <class O, class A, class B, class C, class Fn>
void forEach(const StridedSpan<O>& out, const StridedSpan<A>& a, const StridedSpan<B>& b, const StridedSpan<C>& c,
             Fn&& fn) {
  forEachElement(
      out.sizes, [&](O& o, A& x, B& y, C& z) { o = fn(x, y, z); }, out, a, b, c);
}

// ----------------------------------------------------------------- devices

// Implement this to add a device type in C++; register it with
// Library::registerDevice. The host calls these from any thread, so an
// implementation must be thread-safe. Exceptions become host errors (or are
// logged where the C slot has no error return). The object must outlive the
// plugin (a static is simplest).
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // Number of devices of this type present now (0 if none).
  virtual int deviceCount() = 0;
  // Why deviceCount() is 0 ("no driver"); nullptr when devices exist. The
  // string must live as long as the plugin.
  virtual const char* unavailableReason() { return nullptr; }
  // True if the host may dereference this device's memory. Read once, at
  // registration.
  virtual bool hostAccessible() { return false; }
  // The DLPack DLDeviceType whose consumers can use this device's addresses
  // as they are (kDLCUDA = 2 for CUDA memory, kDLROCM = 10 for HIP), so that
  // tensors move to and from PyTorch, CuPy or NumPy without a copy; 0 when
  // the addresses mean nothing outside this plugin. Read once, at
  // registration. ABI 1.2.
  virtual int32_t dlpackDeviceType() { return 0; }
  // `nbytes` bytes on `device`; never called for 0 bytes (the SDK answers
  // NULL). Return nullptr or throw when out of memory.
  virtual void* allocate(int device, size_t nbytes) = 0;
  // Frees what allocate returned; never called with nullptr.
  virtual void deallocate(int device, void* p) = 0;
  // Copies and fills; never called with n == 0.
  virtual void copyHostToDevice(int device, void* dst, const void* src, size_t n) = 0;
  virtual void copyDeviceToHost(int device, void* dst, const void* src, size_t n) = 0;
  virtual void copyDeviceToDevice(int dst_device, void* dst, int src_device, const void* src, size_t n) = 0;
  virtual void memset(int device, void* dst, uint8_t value, size_t n) = 0;
  // Waits for all work queued on `device`. Default: nothing to wait for.
  virtual void synchronize(int device) { (void)device; }
  // Streams and events (optional). Read once at registration: when
  // hasStreams() is true, registerDevice fills the stream slots and the host
  // calls the stream functions below; likewise hasEvents() for the event
  // functions. The handles are the plugin's own (check what the host passes
  // back). A null BP_Stream* is the device's default stream. The current
  // stream is per host thread and device: every kernel and copy this
  // backend queues for a thread goes to that thread's current stream.
  virtual bool hasStreams() { return false; }
  virtual BP_Stream* createStream(int device) { return noStreams<BP_Stream*>(device, "createStream"); }
  // Destroys a stream from createStream; its queued work still completes.
  virtual void destroyStream(int device, BP_Stream* stream) {
    (void)stream;
    noStreams<void>(device, "destroyStream");
  }
  // Returns when the work queued on `stream` has finished.
  virtual void synchronizeStream(int device, BP_Stream* stream) {
    (void)stream;
    noStreams<void>(device, "synchronizeStream");
  }
  // The calling thread's current stream of `device` (nullptr: the default).
  virtual BP_Stream* currentStream(int device) { return noStreams<BP_Stream*>(device, "currentStream"); }
  virtual void setCurrentStream(int device, BP_Stream* stream) {
    (void)stream;
    noStreams<void>(device, "setCurrentStream");
  }
  virtual bool hasEvents() { return false; }
  virtual BP_Event* createEvent(int device) { return noStreams<BP_Event*>(device, "createEvent"); }
  virtual void destroyEvent(int device, BP_Event* event) {
    (void)event;
    noStreams<void>(device, "destroyEvent");
  }
  // Marks the point in `stream` that `event` completes at.
  virtual void recordEvent(int device, BP_Event* event, BP_Stream* stream) {
    (void)event, (void)stream;
    noStreams<void>(device, "recordEvent");
  }
  // Makes later work on `stream` wait for `event`; must not block the host.
  virtual void waitEvent(int device, BP_Event* event, BP_Stream* stream) {
    (void)event, (void)stream;
    noStreams<void>(device, "waitEvent");
  }
  // Returns when `event` has completed.
  virtual void synchronizeEvent(int device, BP_Event* event) {
    (void)event;
    noStreams<void>(device, "synchronizeEvent");
  }
  // Whether `event` has completed, without blocking. ABI 1.3.
  virtual bool queryEvent(int device, BP_Event* event) {
    (void)event;
    return noStreams<bool>(device, "queryEvent");
  }

  // Fills `out` (zeroed, struct_size set; write only the fields). Default:
  // name = the device type's name.
  virtual void properties(int device, BP_DeviceProperties& out) {
    (void)device;
    const size_t n = type_name_.size() < sizeof(out.name) - 1 ? type_name_.size() : sizeof(out.name) - 1;
    std::memcpy(out.name, type_name_.data(), n);
    out.name[n] = '\0';
  }

  // The name and number this backend was registered under ("" / -1 before).
  const std::string& typeName() const noexcept { return type_name_; }
  int32_t deviceType() const noexcept { return device_type_; }

 private:
  friend class Library;
  template <class R>
  R noStreams(int device, const char* what) {
    fail(BP_UNIMPLEMENTED, detail::concat(what, ": ", type_name_, ":", device, " has no streams or events"));
  }
  std::string type_name_;
  int32_t device_type_ = -1;
};

// A DeviceBackend whose memory is host memory (hostAccessible() is true):
// allocate is aligned operator new (64 bytes; nullptr when out of memory),
// the copies are memmove and memset is memset. A subclass overrides
// deviceCount() and whatever else it needs (properties, synchronize). Its
// kernels may read tensors with data_ptr<T>() and bp::forEach. For a real
// device whose memory the host cannot read, derive from DeviceBackend.
class HostMemoryBackend : public DeviceBackend {
 public:
  static constexpr size_t kAlignment = 64;

  bool hostAccessible() override { return true; }
  void* allocate(int, size_t nbytes) override {
    return ::operator new (nbytes, std::align_val_t{kAlignment}, std::nothrow);
  }
  void deallocate(int, void* p) override { ::operator delete (p, std::align_val_t{kAlignment}); }
  void copyHostToDevice(int, void* dst, const void* src, size_t n) override { std::memmove(dst, src, n); }
  void copyDeviceToHost(int, void* dst, const void* src, size_t n) override { std::memmove(dst, src, n); }
  void copyDeviceToDevice(int, void* dst, int, const void* src, size_t n) override { std::memmove(dst, src, n); }
  void memset(int, void* dst, uint8_t value, size_t n) override { std::memset(dst, value, n); }
};

namespace detail {
// C trampolines from BP_DeviceTypeDesc into a DeviceBackend (ctx).
struct DeviceTrampolines {
  static DeviceBackend& b(void* ctx) noexcept { return *static_cast<DeviceBackend*>(ctx); }

  static int32_t deviceCount(void* ctx) noexcept {
    try {
      const int n = b(ctx).deviceCount();
      return n < 0 ? 0 : static_cast<int32_t>(n);
    } catch (...) {
      logCurrentException("DeviceBackend::deviceCount");
      return 0;
    }
  }
  static const char* unavailableReason(void* ctx) noexcept {
    try {
      return b(ctx).unavailableReason();
    } catch (...) {
      logCurrentException("DeviceBackend::unavailableReason");
      return "DeviceBackend::unavailableReason threw an exception";
    }
  }
  static BP_Error* getProperties(void* ctx, int32_t device, BP_DeviceProperties* out) noexcept {
    try {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "get_properties: NULL out");
      BP_DeviceProperties p;
      std::memset(&p, 0, sizeof p);
      constexpr size_t kSize = BP_DeviceProperties_STRUCT_SIZE;
      p.struct_size = kSize;
      b(ctx).properties(device, p);
      p.name[sizeof(p.name) - 1] = '\0';
      // Write no more than the caller's buffer (its struct_size; a caller
      // that left it 0 gets the 1.0 layout), never past the fields this
      // header knows (not our tail padding), and keep its struct_size.
      const size_t cap = out->struct_size == 0 || out->struct_size > kSize ? kSize : out->struct_size;
      const size_t keep = out->struct_size == 0 ? kSize : out->struct_size;
      std::memcpy(out, &p, cap);
      out->struct_size = keep;
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* allocate(void* ctx, int32_t device, size_t nbytes, void** out) noexcept {
    try {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "allocate: NULL out");
      *out = nullptr;
      if (nbytes == 0) return nullptr;
      void* p = b(ctx).allocate(device, nbytes);
      if (p == nullptr) {
        fail(BP_RESOURCE_EXHAUSTED,
             concat("out of memory on ", b(ctx).typeName(), ":", device, " allocating ", nbytes, " bytes"));
      }
      *out = p;
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static void deallocate(void* ctx, int32_t device, void* p) noexcept {
    if (p == nullptr) return;
    try {
      b(ctx).deallocate(device, p);
    } catch (...) {
      logCurrentException("DeviceBackend::deallocate");
    }
  }
  static BP_Error* copyHostToDevice(void* ctx, int32_t device, void* dst, const void* src, size_t n) noexcept {
    if (n == 0) return nullptr;
    try {
      b(ctx).copyHostToDevice(device, dst, src, n);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* copyDeviceToHost(void* ctx, int32_t device, void* dst, const void* src, size_t n) noexcept {
    if (n == 0) return nullptr;
    try {
      b(ctx).copyDeviceToHost(device, dst, src, n);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* copyDeviceToDevice(void* ctx, int32_t dst_device, void* dst, int32_t src_device, const void* src,
                                      size_t n) noexcept {
    if (n == 0) return nullptr;
    try {
      b(ctx).copyDeviceToDevice(dst_device, dst, src_device, src, n);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* memset(void* ctx, int32_t device, void* dst, uint8_t value, size_t n) noexcept {
    if (n == 0) return nullptr;
    try {
      b(ctx).memset(device, dst, value, n);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* synchronize(void* ctx, int32_t device) noexcept {
    try {
      b(ctx).synchronize(device);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  // Runs `f`, turning exceptions into a host error.
  template <class F>
  static BP_Error* guarded(F&& f) noexcept {
    try {
      f();
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* streamCreate(void* ctx, int32_t device, BP_Stream** out) noexcept {
    return guarded([&] {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "stream_create: NULL out");
      *out = nullptr;
      *out = b(ctx).createStream(device);
    });
  }
  static void streamDestroy(void* ctx, int32_t device, BP_Stream* stream) noexcept {
    try {
      b(ctx).destroyStream(device, stream);
    } catch (...) {
      logCurrentException("DeviceBackend::destroyStream");
    }
  }
  static BP_Error* streamSynchronize(void* ctx, int32_t device, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).synchronizeStream(device, stream); });
  }
  static BP_Error* getCurrentStream(void* ctx, int32_t device, BP_Stream** out) noexcept {
    return guarded([&] {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "get_current_stream: NULL out");
      *out = nullptr;
      *out = b(ctx).currentStream(device);
    });
  }
  static BP_Error* setCurrentStream(void* ctx, int32_t device, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).setCurrentStream(device, stream); });
  }
  static BP_Error* eventCreate(void* ctx, int32_t device, BP_Event** out) noexcept {
    return guarded([&] {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "event_create: NULL out");
      *out = nullptr;
      *out = b(ctx).createEvent(device);
    });
  }
  static void eventDestroy(void* ctx, int32_t device, BP_Event* event) noexcept {
    try {
      b(ctx).destroyEvent(device, event);
    } catch (...) {
      logCurrentException("DeviceBackend::destroyEvent");
    }
  }
  static BP_Error* eventRecord(void* ctx, int32_t device, BP_Event* event, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).recordEvent(device, event, stream); });
  }
  static BP_Error* eventWait(void* ctx, int32_t device, BP_Event* event, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).waitEvent(device, event, stream); });
  }
  static BP_Error* eventSynchronize(void* ctx, int32_t device, BP_Event* event) noexcept {
    return guarded([&] { b(ctx).synchronizeEvent(device, event); });
  }
  static BP_Error* eventQuery(void* ctx, int32_t device, BP_Event* event, uint8_t* out_complete) noexcept {
    return guarded([&] {
      if (out_complete == nullptr) fail(BP_INVALID_ARGUMENT, "event_query: NULL out_complete");
      *out_complete = b(ctx).queryEvent(device, event) ? 1 : 0;
    });
  }
};

}  // namespace detail

// ----------------------------------------------------------------- Library

// The dtypes a kernel serves (BP_KernelDesc.dtypes, ABI 1.5):
//   m.impl("relu.out", toy, &relu_out, {bp::ScalarType::Float32});
// The host sends a call to the kernel only if every tensor argument's dtype
// is in the set (inputs and outputs, each element of a tensor list, optional
// tensors that are present); every other call goes where it would without
// the kernel, usually the CPU fallback. So a kernel handles only the dtypes
// it declares. Default-constructed: every dtype.
class Dtypes {
 public:
  constexpr Dtypes() noexcept = default;
  constexpr Dtypes(std::initializer_list<ScalarType> types) noexcept {
    for (ScalarType t : types) {
      const int32_t i = static_cast<int32_t>(t);
      // A number outside the enum sets bit 63, which the host refuses by name.
      mask_ |= (i >= 0 && i < 63) ? uint64_t{1} << i : uint64_t{1} << 63;
    }
  }
  static constexpr Dtypes all() noexcept { return Dtypes(); }
  constexpr bool isAll() const noexcept { return mask_ == 0; }
  constexpr bool contains(ScalarType t) const noexcept {
    const int32_t i = static_cast<int32_t>(t);
    return mask_ == 0 || (i >= 0 && i < 64 && ((mask_ >> i) & 1) != 0);
  }
  // BP_KernelDesc.dtypes: bit i = BP_ScalarType i; 0 = every dtype.
  constexpr uint64_t mask() const noexcept { return mask_; }
  friend constexpr bool operator==(Dtypes a, Dtypes b) noexcept { return a.mask_ == b.mask_; }

 private:
  uint64_t mask_ = 0;
};

// What the plugin's init function registers through (`m`). Made by
// BACKPLANE_PLUGIN; valid only during init, on the init thread (the host
// accepts registrations only then). Every method throws bp::Error if the
// host refuses; the error propagates out of init and fails the load.
class Library {
 public:
  explicit Library(BP_Plugin* plugin) noexcept : plugin_(plugin) {}

  BP_Plugin* plugin() const noexcept { return plugin_; }

  // Registers a device type from a raw descriptor; returns its device type
  // number. The host copies the descriptor and its name during the call;
  // its function pointers and ctx must stay valid until the plugin is
  // unloaded (Note [ABI rules] in plugin_api.h).
  int32_t registerDeviceType(const BP_DeviceTypeDesc& desc) {
    int32_t type = -1;
    throwIfError(detail::hostSlot(host().register_device_type, "register_device_type")(plugin_, &desc, &type));
    if (desc.host_accessible && type >= 0 && type < 64) detail::g_host_accessible_types |= uint64_t{1} << type;
    return type;
  }

  // Registers `backend` (not owned; must outlive the plugin) as device type
  // `name` (lowercase [a-z][a-z0-9_]*, at most 31 characters; copied);
  // returns its device type number. Streams and events when the backend
  // says it has them (DeviceBackend::hasStreams, hasEvents).
  int32_t registerDevice(const char* name, DeviceBackend* backend) {
    if (name == nullptr || backend == nullptr) fail(BP_INVALID_ARGUMENT, "registerDevice: NULL name or backend");
    using T = detail::DeviceTrampolines;
    BP_DeviceTypeDesc d;  // copied by the host (Note [ABI rules]); `backend` is the ctx it keeps
    std::memset(&d, 0, sizeof d);
    d.struct_size = BP_DeviceTypeDesc_STRUCT_SIZE;
    d.name = name;
    d.ctx = backend;
    d.host_accessible = backend->hostAccessible() ? 1 : 0;
    d.dlpack_device_type = backend->dlpackDeviceType();
    d.device_count = &T::deviceCount;
    d.unavailable_reason = &T::unavailableReason;
    d.get_properties = &T::getProperties;
    d.allocate = &T::allocate;
    d.deallocate = &T::deallocate;
    d.copy_host_to_device = &T::copyHostToDevice;
    d.copy_device_to_host = &T::copyDeviceToHost;
    d.copy_device_to_device = &T::copyDeviceToDevice;
    d.memset = &T::memset;
    d.synchronize = &T::synchronize;
    if (backend->hasStreams()) {
      d.stream_create = &T::streamCreate;
      d.stream_destroy = &T::streamDestroy;
      d.stream_synchronize = &T::streamSynchronize;
      d.get_current_stream = &T::getCurrentStream;
      d.set_current_stream = &T::setCurrentStream;
    }
    if (backend->hasEvents()) {
      d.event_create = &T::eventCreate;
      d.event_destroy = &T::eventDestroy;
      d.event_record = &T::eventRecord;
      d.event_wait = &T::eventWait;
      d.event_synchronize = &T::eventSynchronize;
      d.event_query = &T::eventQuery;
    }
    backend->type_name_ = name;
    const int32_t type = registerDeviceType(d);
    backend->device_type_ = type;
    return type;
  }

  // Declares an operator: "ns::name.overload(Tensor self, ...) -> Tensor".
  void def(const char* schema) { throwIfError(detail::hostSlot(host().def, "def")(plugin_, schema)); }

  // Registers a typed kernel `R f(P...)` for `op` on `device_type` (0 is
  // cpu), with its generated cpp_signature so the host checks it against
  // the schema. Captureless lambdas: pass +[](...) {...}. `dtypes`: the
  // dtypes it serves (bp::Dtypes); by default every one.
  template <class R, class... P>
  void impl(const char* op, int32_t device_type, R (*kernel_fn)(P...), Dtypes dtypes = Dtypes::all()) {
    impl(op, device_type, bp::kernel(kernel_fn), dtypes);
  }
  // Registers a kernel made by bp::kernel() / bp::kernel<&f>().
  void impl(const char* op, int32_t device_type, const Kernel& k, Dtypes dtypes = Dtypes::all()) {
    impl(op, device_type, k.fn, k.ctx, k.cpp_signature.c_str(), dtypes);
  }
  // Registers a raw boxed kernel; `ctx` must outlive the registration.
  void impl(const char* op, int32_t device_type, BP_KernelFn fn, void* ctx, const char* cpp_signature = nullptr,
            Dtypes dtypes = Dtypes::all()) {
    BP_KernelDesc d{BP_KernelDesc_STRUCT_SIZE, fn, ctx, cpp_signature, dtypes.mask()};
    throwIfError(detail::hostSlot(host().impl, "impl")(plugin_, op, device_type, &d));
  }
#if BP_ABI_MINOR >= 4
  // impl() for an operator that another plugin defines, possibly one that
  // loads after this one (BP_HostApi.impl_when_defined, ABI 1.4): a device
  // plugin implementing another plugin's operators, e.g.
  //   m.implWhenDefined("spconv::indice_conv", cuda, &indiceConvCuda);
  // If `op` is defined this is impl(). If not, the kernel waits and serves
  // calls once a def of `op` arrives whose schema its cpp_signature fits;
  // one that does not fit stays inactive and the host logs why (the def
  // still succeeds). Use impl() for operators defined before this plugin's
  // kernels: it reports a misspelled name at once, this does not.
  template <class R, class... P>
  void implWhenDefined(const char* op, int32_t device_type, R (*kernel_fn)(P...), Dtypes dtypes = Dtypes::all()) {
    implWhenDefined(op, device_type, bp::kernel(kernel_fn), dtypes);
  }
  // The same with a kernel made by bp::kernel() / bp::kernel<&f>().
  void implWhenDefined(const char* op, int32_t device_type, const Kernel& k, Dtypes dtypes = Dtypes::all()) {
    implWhenDefined(op, device_type, k.fn, k.ctx, k.cpp_signature.c_str(), dtypes);
  }
  // The same with a raw boxed kernel; `ctx` must outlive the registration.
  // Without cpp_signature, a kernel registered before its operator's
  // definition is called boxed and never checked against the schema.
  void implWhenDefined(const char* op, int32_t device_type, BP_KernelFn fn, void* ctx,
                       const char* cpp_signature = nullptr, Dtypes dtypes = Dtypes::all()) {
    const BP_HostApi& h = host();
    if (h.impl_when_defined == nullptr) {
      fail(BP_UNIMPLEMENTED,
           detail::concat("implWhenDefined(\"", op ? op : "", "\"): the host provides plugin ABI ", h.abi_major, ".",
                          h.abi_minor,
                          ", which has no impl_when_defined (added in ABI 1.4); upgrade the host, or "
                          "register the kernel with impl() and load the plugin that defines the operator first"));
    }
    BP_KernelDesc d{BP_KernelDesc_STRUCT_SIZE, fn, ctx, cpp_signature, dtypes.mask()};
    throwIfError(h.impl_when_defined(plugin_, op, device_type, &d));
  }
#endif
  // Registers a boxed kernel for every operator on `device_type` that has no
  // kernel there.
  void fallback(int32_t device_type, BP_KernelFn fn, void* ctx) {
    BP_KernelDesc d{BP_KernelDesc_STRUCT_SIZE, fn, ctx, nullptr, 0};
    throwIfError(detail::hostSlot(host().fallback, "fallback")(plugin_, device_type, &d));
  }

  // The number of device type `name` ("cpu", "cuda"); throws if unknown.
  int32_t findDeviceType(const char* name) const {
    int32_t type = -1;
    throwIfError(detail::hostSlot(host().device_type_find, "device_type_find")(name, &type));
    return type;
  }

  // Logs through the host, prefixed with the plugin's name.
  void log(BP_LogLevel level, const std::string& message) const {
    detail::hostSlot(host().log, "log")(plugin_, level, message.c_str());
  }

 private:
  BP_Plugin* plugin_;
};

// ------------------------------------------------------------ entry points

namespace detail {
// Note [Plugin init checks]
// backplane_plugin_init validates the host table before trusting it:
// 1. A table that cannot make an error (NULL, struct_size too small to hold
//    error_new, or error_new NULL) cannot be told "no": the ABI offers no way
//    to fail without error_new. Init then writes one line to stderr, stores
//    nothing, registers nothing and returns NULL; the plugin is inert
//    (bp::host() keeps throwing).
// 2. Otherwise it rejects, with BP_FAILED_PRECONDITION made by the host's
//    error_new, a host whose abi_major differs from BP_ABI_MAJOR, whose
//    abi_minor is older than BP_ABI_MINOR, whose struct_size is over
//    BP_MAX_STRUCT_SIZE or smaller than the BP_HostApi this header knows, or
//    that lacks a slot the SDK needs unconditionally (error_free,
//    error_code, error_message, tensor_info, tensor_retain,
//    tensor_release). This assumes {struct_size, abi_major, abi_minor,
//    error_new} keep their places in every ABI major.
// 3. It then copies the table, records the plugin, and runs INIT_FN with a
//    Library, converting exceptions to errors. The table stays installed if
//    init fails, so Tensors the plugin still holds can be released.
inline BP_Error* checkHost(const BP_HostApi* h, const char* plugin_name) noexcept {
  const char* pname = plugin_name ? plugin_name : "?";
  char msg[512];
  msg[0] = '\0';
  // (+1 on both sides: "< 0" would draw -Wtype-limits while BP_ABI_MINOR is 0)
  if (h->abi_major != BP_ABI_MAJOR || uint64_t{h->abi_minor} + 1 < uint64_t{BP_ABI_MINOR} + 1) {
    std::snprintf(msg, sizeof msg,
                  "plugin '%s' was built against Backplane plugin ABI %d.%d, but the host provides ABI %u.%u; rebuild "
                  "the plugin against the host's plugin_api.h",
                  pname, BP_ABI_MAJOR, BP_ABI_MINOR, h->abi_major, h->abi_minor);
  } else if (h->struct_size < BP_HostApi_STRUCT_SIZE || h->struct_size > BP_MAX_STRUCT_SIZE) {
    std::snprintf(msg, sizeof msg,
                  "plugin '%s': the host's BP_HostApi.struct_size is %zu, but ABI %d.%d needs %zu to %u bytes", pname,
                  h->struct_size, BP_ABI_MAJOR, BP_ABI_MINOR, size_t{BP_HostApi_STRUCT_SIZE}, BP_MAX_STRUCT_SIZE);
  } else {
    const char* missing = !h->error_free       ? "error_free"
                          : !h->error_code     ? "error_code"
                          : !h->error_message  ? "error_message"
                          : !h->tensor_info    ? "tensor_info"
                          : !h->tensor_retain  ? "tensor_retain"
                          : !h->tensor_release ? "tensor_release"
                                               : nullptr;
    if (missing == nullptr) return nullptr;
    std::snprintf(msg, sizeof msg, "plugin '%s': the host's BP_HostApi has no %s (NULL slot)", pname, missing);
  }
  BP_Error* e = h->error_new(BP_FAILED_PRECONDITION, msg);
  if (e == nullptr) std::fprintf(stderr, "backplane: %s\n", msg);
  return e;
}

template <class InitFn>
BP_Error* runPluginInit(const BP_HostApi* h, BP_Plugin* plugin, const char* plugin_name, InitFn&& init) noexcept {
  static_assert(std::is_invocable_v<InitFn&, Library&>,
                "BACKPLANE_PLUGIN: INIT_FN must be callable as void INIT_FN(bp::Library& m)");
  constexpr size_t kErrorNewEnd = BP_STRUCT_SIZE(BP_HostApi, error_new);
  if (h == nullptr || h->struct_size < kErrorNewEnd || h->error_new == nullptr) {
    std::fprintf(stderr,
                 "backplane: plugin '%s' was given an unusable host table (NULL, too small, or no error_new); it "
                 "registers nothing\n",
                 plugin_name ? plugin_name : "?");
    return nullptr;  // Note [Plugin init checks], case 1
  }
  if (BP_Error* e = checkHost(h, plugin_name)) return e;
  installHost(*h, plugin);
  try {
    Library m(plugin);
    init(m);
    return nullptr;
  } catch (...) {
    return currentExceptionToError();
  }
}

template <class ShutdownFn>
void runPluginShutdown(BP_Plugin* plugin, ShutdownFn&& fn) noexcept {
  try {
    if constexpr (std::is_invocable_v<ShutdownFn&, BP_Plugin*>) {
      fn(plugin);
    } else {
      static_assert(std::is_invocable_v<ShutdownFn&>,
                    "BACKPLANE_PLUGIN_SHUTDOWN: FN must be callable as void FN() or void FN(BP_Plugin*)");
      (void)plugin;
      fn();
    }
  } catch (...) {
    logCurrentException("plugin shutdown");
  }
}
}  // namespace detail

}  // namespace bp

// Defines the plugin's exported entry points. NAME and VERSION are string
// literals ("toy", "1.0.0"); INIT_FN is `void INIT_FN(bp::Library& m)`.
// Use once per plugin, at global scope; no semicolon is needed after it.
// See Note [Plugin init checks].
#define BACKPLANE_PLUGIN(NAME, VERSION, INIT_FN)                                                    \
  extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) {                          \
    static const BP_PluginInfo info = {                                                             \
        BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, NAME, VERSION};     \
    return &info;                                                                                   \
  }                                                                                                 \
  extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) { \
    return ::bp::detail::runPluginInit(host, plugin, NAME, INIT_FN);                                \
  }                                                                                                 \
  static_assert(std::is_same_v<decltype(&backplane_plugin_query), BP_PluginQueryFn> &&              \
                    std::is_same_v<decltype(&backplane_plugin_init), BP_PluginInitFn>,              \
                "BACKPLANE_PLUGIN: entry points do not match plugin_api.h");

// Defines the optional backplane_plugin_shutdown export; FN is `void FN()`
// or `void FN(BP_Plugin*)`. Exceptions are logged, not propagated.
#define BACKPLANE_PLUGIN_SHUTDOWN(FN)                                                      \
  extern "C" BP_EXPORT void backplane_plugin_shutdown(BP_Plugin* plugin) {                 \
    ::bp::detail::runPluginShutdown(plugin, FN);                                           \
  }                                                                                        \
  static_assert(std::is_same_v<decltype(&backplane_plugin_shutdown), BP_PluginShutdownFn>, \
                "BACKPLANE_PLUGIN_SHUTDOWN: entry point does not match plugin_api.h");

#endif  // BACKPLANE_PLUGIN_HPP_
