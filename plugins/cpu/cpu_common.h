#pragma once
// Helpers shared by the CPU plugin's kernel families: argument checks with
// clear errors, dtype dispatch (float16 and bfloat16 compute in float32),
// and the thread setting.

#include <omp.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backplane/plugin.hpp"

namespace bp_cpu {

using bp::ScalarType;

inline constexpr int32_t kCpu = 0;
inline constexpr bp::Device kCpuDevice{kCpu, 0};

// --- Threads (Note [CPU threads])
// One setting governs every kernel, oneDNN included: BACKPLANE_NUM_THREADS
// (default: all cores). oneDNN uses OpenMP here, so the setting is OpenMP's
// thread count; ThreadScope applies it on the calling thread (OpenMP's
// setting is per thread) before a kernel runs parallel code.
int numThreads();
void initThreads();
class ThreadScope {
 public:
  ThreadScope() {
    const int n = numThreads();
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
  }
};

// --- Checks

// "float32, float64" from a list, for messages.
std::string dtypeList(std::initializer_list<ScalarType> types);

// Throws unless t is on the CPU.
void checkCpu(const char* op, const bp::Tensor& t, const char* arg);

// Throws "<op> on cpu does not support dtype X for argument 'a'; supported:
// ..." unless t's dtype is in `supported`.
void checkDtype(const char* op, const bp::Tensor& t, const char* arg, std::initializer_list<ScalarType> supported);

// Contiguous (row-major) strides of `sizes`.
std::vector<int64_t> contiguousStrides(bp::IntList sizes);
inline std::vector<int64_t> toVector(bp::IntList l) { return std::vector<int64_t>(l.begin(), l.end()); }

// --- dtype dispatch

// The type arithmetic runs in for storage type T: float for Half and
// BFloat16 (and float), double for double, T itself for integers and bool.
template <class T>
struct OpMath {
  using type = T;
};
template <>
struct OpMath<bp::Half> {
  using type = float;
};
template <>
struct OpMath<bp::BFloat16> {
  using type = float;
};
template <class T>
using opmath_t = typename OpMath<T>::type;

// Storage <-> compute conversions that work for every storage type.
template <class T>
inline opmath_t<T> load(T v) {
  if constexpr (std::is_same_v<T, bp::Half> || std::is_same_v<T, bp::BFloat16>) return static_cast<float>(v);
  else return v;
}
template <class T, class V>
inline T store(V v) {
  if constexpr (std::is_same_v<T, bp::Half> || std::is_same_v<T, bp::BFloat16>) return T(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != V(0);
  else return static_cast<T>(v);
}

// A Scalar as storage type T, as PyTorch converts one that the host has
// range-checked (Note [Writing a Scalar into a tensor] in the dispatcher's
// meta.h): integers wrap modulo 2^bits (-1 into uint8 is 255; a comparison
// operand out of the tensor's range wraps too, as PyTorch's); a double
// becomes an integer through int64 (truncated; bp::Scalar::toInt throws
// for one beyond int64 instead of undefined behaviour); an integer becomes
// a floating value directly, not through double, and float16/bfloat16
// round from float; bool is value != 0.
template <class T>
inline T scalarTo(const bp::Scalar& s) {
  if constexpr (std::is_same_v<T, bool>)
    return s.toBool();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(s.toInt());
  else if (s.isFloatingPoint())
    return store<T>(static_cast<opmath_t<T>>(s.toDouble()));
  else
    return store<T>(static_cast<opmath_t<T>>(s.toInt()));
}

// Calls f(T{}) with the storage type of `t` (bool, uint8_t, int8_t,
// int16_t, int32_t, int64_t, bp::Half, bp::BFloat16, float, double). uint16,
// uint32 and uint64 (PyTorch 2.x's barebones unsigned types) are refused
// here: only the kernels that serve them (copies, fills, data movement,
// comparisons) use visitAnyDtype, so no other kernel is instantiated for
// them. The metas refuse them first (Note [Dtype rules live in metas]).
[[noreturn]] void failBarebonesUnsigned(ScalarType t);
template <class F>
decltype(auto) visitDtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Bool: return f(bool{});
    case ScalarType::UInt8: return f(uint8_t{});
    case ScalarType::Int8: return f(int8_t{});
    case ScalarType::Int16: return f(int16_t{});
    case ScalarType::Int32: return f(int32_t{});
    case ScalarType::Int64: return f(int64_t{});
    case ScalarType::Float16: return f(bp::Half{});
    case ScalarType::BFloat16: return f(bp::BFloat16{});
    case ScalarType::Float32: return f(float{});
    case ScalarType::Float64: return f(double{});
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64: failBarebonesUnsigned(t);
  }
  bp::fail(BP_INVALID_ARGUMENT, "unknown dtype " + std::to_string(static_cast<int>(t)));
}

// visitDtype and also uint16_t, uint32_t, uint64_t.
template <class F>
decltype(auto) visitAnyDtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::UInt16: return f(uint16_t{});
    case ScalarType::UInt32: return f(uint32_t{});
    case ScalarType::UInt64: return f(uint64_t{});
    default: return visitDtype(t, std::forward<F>(f));
  }
}

// Every dtype the CPU kernels that serve the barebones unsigned types accept.
inline constexpr std::initializer_list<ScalarType> kAnyDtype = {
    ScalarType::Bool,   ScalarType::UInt8,   ScalarType::Int8,     ScalarType::Int16,   ScalarType::Int32,
    ScalarType::Int64,  ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64,
    ScalarType::UInt16, ScalarType::UInt32,  ScalarType::UInt64};

// A floating value as integral type O, as PyTorch's casts: through int64
// (so -1.0 to uint8 wraps to 255); a uint64 takes values from 2^63 to 2^64
// directly, which int64 cannot hold.
template <class O, class X>
inline O floatToIntegral(X x) {
  if constexpr (std::is_same_v<O, uint64_t>) {
    if (x >= X(9223372036854775808.0) && x < X(18446744073709551616.0)) return static_cast<O>(x);
  }
  // NaN, infinities and values beyond int64 have no integral value: they
  // give int64's lowest truncated to O, what x86's conversion gives,
  // instead of undefined behaviour.
  if (!(x >= X(-9223372036854775808.0) && x < X(9223372036854775808.0)))
    return static_cast<O>(std::numeric_limits<int64_t>::min());
  return static_cast<O>(static_cast<int64_t>(x));
}

// One element converted as PyTorch's casts: through float for float16 and
// bfloat16, != 0 to bool, floating to integral by floatToIntegral.
template <class O, class I>
inline O castElement(I v) {
  if constexpr (std::is_same_v<O, I>) {
    return v;
  } else {
    const auto x = load(v);
    using X = std::remove_const_t<decltype(x)>;
    if constexpr (std::is_same_v<O, bool>)
      return x != X(0);
    else if constexpr (std::is_same_v<O, bp::Half> || std::is_same_v<O, bp::BFloat16>)
      return O(static_cast<float>(x));
    else if constexpr (std::is_integral_v<O> && std::is_floating_point_v<X>)
      return floatToIntegral<O>(x);
    else
      return static_cast<O>(x);
  }
}

}  // namespace bp_cpu
