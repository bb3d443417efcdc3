#pragma once
// Element types of the first-party kernels, written once for every plugin
// and for host and device code: the type arithmetic runs in (OpMath), the
// storage <-> compute conversions, PyTorch's element casts, a Scalar as an
// element, and the host-side dtype dispatch that picks a kernel
// instantiation.
//
// Each plugin has its own storage types for float16 and bfloat16 (the CPU
// plugin the SDK's bp::Half / bp::BFloat16, the GPU plugins bp_gpu::Half /
// bp_gpu::BFloat16): 16 bits in a member `bits`. A plugin names them to
// the visitors through a Storage struct and marks them with
// Float16FormatOf, so every plugin rounds through the SDK's conversions
// (Note [16-bit float conversions]) and agrees bit for bit.
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "backplane/float16_conversions.h"
#include "backplane/plugin.hpp"

namespace bp_common {

using bp::ScalarType;

// --- 16-bit float storage types

enum class Float16Format { kNone, kHalf, kBFloat16 };

// Which 16-bit format storage type T holds; a plugin specializes it for its
// own types (the SDK's are here).
template <class T>
struct Float16FormatOf {
  static constexpr Float16Format value = Float16Format::kNone;
};
template <>
struct Float16FormatOf<bp::Half> {
  static constexpr Float16Format value = Float16Format::kHalf;
};
template <>
struct Float16FormatOf<bp::BFloat16> {
  static constexpr Float16Format value = Float16Format::kBFloat16;
};

template <class T>
inline constexpr bool kIsReduced = Float16FormatOf<T>::value != Float16Format::kNone;
template <class T>
inline constexpr bool kIsFloating = kIsReduced<T> || std::is_floating_point_v<T>;

template <class T>
BP_HOST_DEVICE inline float reducedToFloat(T v) {
  if constexpr (Float16FormatOf<T>::value == Float16Format::kHalf)
    return bp::floatFromHalfBits(v.bits);
  else
    return bp::floatFromBFloat16Bits(v.bits);
}
template <class T>
BP_HOST_DEVICE inline T reducedFromFloat(float f) {
  T r{};
  if constexpr (Float16FormatOf<T>::value == Float16Format::kHalf)
    r.bits = bp::halfBitsFromFloat(f);
  else
    r.bits = bp::bfloat16BitsFromFloat(f);
  return r;
}

// --- compute types and conversions

// The type arithmetic runs in for storage type T: float for the 16-bit
// floats, T itself otherwise (double for double, integers and bool).
template <class T, bool kReduced = kIsReduced<T>>
struct OpMath {
  using type = T;
};
template <class T>
struct OpMath<T, true> {
  using type = float;
};
template <class T>
using opmath_t = typename OpMath<T>::type;

// Storage -> compute.
template <class T>
BP_HOST_DEVICE inline opmath_t<T> load(T v) {
  if constexpr (kIsReduced<T>)
    return reducedToFloat(v);
  else
    return v;
}

// A computed value stored as T: rounded to nearest even for the 16-bit
// floats, != 0 for bool.
template <class T, class V>
BP_HOST_DEVICE inline T store(V v) {
  if constexpr (kIsReduced<T>)
    return reducedFromFloat<T>(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>)
    return v != V(0);
  else
    return static_cast<T>(v);
}

// A floating value as integral type O, as PyTorch's casts: through int64
// (so -1.0 to uint8 wraps to 255); a uint64 takes values from 2^63 to 2^64
// directly, which int64 cannot hold. NaN, infinities and values beyond
// int64 have no integral value: they give int64's lowest truncated to O,
// what x86's conversion gives, the same on every device and with no
// undefined behaviour.
template <class O, class X>
BP_HOST_DEVICE inline O floatToIntegral(X x) {
  if constexpr (std::is_same_v<O, uint64_t>) {
    if (x >= X(9223372036854775808.0) && x < X(18446744073709551616.0)) return static_cast<O>(x);
  }
  if (!(x >= X(-9223372036854775808.0) && x < X(9223372036854775808.0))) return static_cast<O>(INT64_MIN);
  return static_cast<O>(static_cast<int64_t>(x));
}

// One element converted as PyTorch's casts: through float for the 16-bit
// floats, != 0 to bool, floating to integral by floatToIntegral.
template <class O, class I>
BP_HOST_DEVICE inline O convert(I v) {
  if constexpr (std::is_same_v<O, I>) {
    return v;
  } else {
    const auto x = load(v);
    using X = std::remove_const_t<decltype(x)>;
    if constexpr (std::is_same_v<O, bool>)
      return x != X(0);
    else if constexpr (kIsReduced<O>)
      return reducedFromFloat<O>(static_cast<float>(x));
    else if constexpr (std::is_integral_v<O> && std::is_floating_point_v<X>)
      return floatToIntegral<O>(x);
    else
      return static_cast<O>(x);
  }
}

// --- host side

// A Scalar as storage type T, as PyTorch converts one that the host has
// range-checked (Note [Writing a Scalar into a tensor] in the dispatcher's
// meta.h): integers wrap modulo 2^bits (-1 into uint8 is 255; a comparison
// operand out of the tensor's range wraps too, as PyTorch's); a double
// becomes an integer through int64 (truncated; bp::Scalar::toInt throws
// for one beyond int64 instead of undefined behaviour); an integer becomes
// a floating value directly, not through double, and the 16-bit floats
// round from float; bool is value != 0.
template <class T>
T scalarTo(const bp::Scalar& s) {
  if constexpr (std::is_same_v<T, bool>)
    return s.toBool();
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(s.toInt());
  else if (s.isFloatingPoint())
    return store<T>(static_cast<opmath_t<T>>(s.toDouble()));
  else
    return store<T>(static_cast<opmath_t<T>>(s.toInt()));
}

// Element `v` as a Scalar, exactly: the 16-bit floats through float; a
// Scalar's integers are int64, so a uint64 from 2^63 on goes as a double
// (exact for the floating dtypes; an integral destination refuses it by
// range).
template <class T>
bp::Scalar scalarOfElement(T v) {
  if constexpr (kIsReduced<T>)
    return bp::Scalar(static_cast<double>(reducedToFloat(v)));
  else if constexpr (std::is_same_v<T, uint64_t>)
    return v > static_cast<uint64_t>(INT64_MAX) ? bp::Scalar(static_cast<double>(v)) : bp::Scalar(v);
  else
    return bp::Scalar(v);
}

// The error for a kernel of `device` ("cpu", "gpu") asked for a barebones
// unsigned dtype it does not serve.
[[noreturn]] inline void failBarebonesUnsigned(const char* device, ScalarType t) {
  bp::fail(BP_INVALID_ARGUMENT,
           std::string("this ") + device + " kernel does not support dtype " + bp::name(t) +
               ": uint16, uint32 and uint64 have creation, copies, data movement and comparisons only (as in "
               "PyTorch 2.x); convert to another dtype first with .to(dtype)");
}

// Calls f(T{}) with the storage type of dtype `t` (bool, uint8_t, int8_t,
// int16_t, int32_t, int64_t, Storage::Half, Storage::BFloat16, float,
// double). Storage names the plugin's 16-bit types and, as kDevice, the
// device for messages. uint16, uint32 and uint64 (PyTorch 2.x's barebones
// unsigned types) are refused here, so that only the kernels that serve
// them (copies, fills, data movement, comparisons: visitAnyDtype) are
// instantiated for them; the metas refuse them for every other op first
// (Note [Dtype rules live in metas]).
template <class Storage, class F>
decltype(auto) visitDtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::Bool: return f(bool{});
    case ScalarType::UInt8: return f(uint8_t{});
    case ScalarType::Int8: return f(int8_t{});
    case ScalarType::Int16: return f(int16_t{});
    case ScalarType::Int32: return f(int32_t{});
    case ScalarType::Int64: return f(int64_t{});
    case ScalarType::Float16: return f(typename Storage::Half{});
    case ScalarType::BFloat16: return f(typename Storage::BFloat16{});
    case ScalarType::Float32: return f(float{});
    case ScalarType::Float64: return f(double{});
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64: failBarebonesUnsigned(Storage::kDevice, t);
  }
  bp::fail(BP_INVALID_ARGUMENT, "unknown dtype " + std::to_string(static_cast<int>(t)));
}

// visitDtype and also uint16_t, uint32_t, uint64_t.
template <class Storage, class F>
decltype(auto) visitAnyDtype(ScalarType t, F&& f) {
  switch (t) {
    case ScalarType::UInt16: return f(uint16_t{});
    case ScalarType::UInt32: return f(uint32_t{});
    case ScalarType::UInt64: return f(uint64_t{});
    default: return visitDtype<Storage>(t, std::forward<F>(f));
  }
}

// Defines, in the current namespace, struct Storage naming a plugin's
// 16-bit storage types and its device for messages, and visitDtype(t, f)
// and visitAnyDtype(t, f) over it, so a plugin's kernels call the visitors
// without naming their storage types.
#define BP_COMMON_DTYPE_VISITORS(Storage, HalfType, BFloat16Type, kDeviceName) \
  struct Storage {                                                             \
    using Half = HalfType;                                                     \
    using BFloat16 = BFloat16Type;                                             \
    static constexpr const char* kDevice = kDeviceName;                        \
  };                                                                           \
  BP_COMMON_DTYPE_VISITORS_OF(Storage)
#define BP_COMMON_DTYPE_VISITORS_OF(Storage)                          \
  template <class F>                                                  \
  decltype(auto) visitDtype(bp::ScalarType t, F&& f) {                \
    return bp_common::visitDtype<Storage>(t, static_cast<F&&>(f));    \
  }                                                                   \
  template <class F>                                                  \
  decltype(auto) visitAnyDtype(bp::ScalarType t, F&& f) {             \
    return bp_common::visitAnyDtype<Storage>(t, static_cast<F&&>(f)); \
  }

// Calls f(I{}) with the C++ type of an index tensor of dtype `t` (int32_t
// or int64_t), after refuse() for any dtype but those two (it throws).
template <class Refuse, class F>
decltype(auto) visitIndexDtype(ScalarType t, Refuse&& refuse, F&& f) {
  if (t == ScalarType::Int32) return f(int32_t{});
  if (t != ScalarType::Int64) refuse();
  return f(int64_t{});
}

// Scalar `value` as an element of `dtype` (scalarTo), its bits in the low
// bytes: a padding or fill value for kernels that move raw elements.
template <class Storage>
uint64_t elementBits(ScalarType dtype, const bp::Scalar& value) {
  uint64_t bits = 0;
  visitDtype<Storage>(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = scalarTo<T>(value);  // the host checked it (Note [Writing a Scalar into a tensor])
    std::memcpy(&bits, &v, sizeof(T));
  });
  return bits;
}

// The SDK's storage types, for host code that only converts values.
struct SdkStorage {
  using Half = bp::Half;
  using BFloat16 = bp::BFloat16;
  static constexpr const char* kDevice = "host";
};

// Every dtype, for the kernels that serve the barebones unsigned ones too.
inline constexpr std::initializer_list<ScalarType> kAnyDtype = {
    ScalarType::Bool,   ScalarType::UInt8,   ScalarType::Int8,     ScalarType::Int16,   ScalarType::Int32,
    ScalarType::Int64,  ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64,
    ScalarType::UInt16, ScalarType::UInt32,  ScalarType::UInt64};

// Calls f(E{}) with the unsigned integer type of `size` bytes: kernels that
// only move elements are instantiated per element size, not per dtype.
template <class F>
decltype(auto) visitItemSize(size_t size, F&& f) {
  switch (size) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

inline bool isFloating(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 || t == ScalarType::Float64;
}

// Throws unless Scalar `v`, a value read from tensor data the host has not
// range-checked (masked_fill's 0-d value), converts to `dtype` without
// overflow.
inline void checkScalarFits(const char* op, const bp::Scalar& v, ScalarType dtype) {
  visitAnyDtype<SdkStorage>(dtype, [&](auto tag) {
    using S = decltype(tag);
    try {
      (void)v.to<S>();
    } catch (const bp::Error&) {
      bp::fail(BP_INVALID_ARGUMENT, bp::detail::concat(op, ": value ", v, " cannot be converted to dtype ",
                                                       bp::name(dtype), " without overflow"));
    }
  });
}

}  // namespace bp_common
