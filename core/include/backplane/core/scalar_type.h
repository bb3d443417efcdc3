// Element types of Backplane tensors: the ScalarType enum, the 16-bit
// floating-point storage types Half and BFloat16, and the compile-time and
// run-time traits that kernels and the dispatcher use to pick an
// implementation for a dtype. Promotion and casting follow PyTorch
// (c10/core/ScalarType.h) so that code ported from PyTorch behaves the same.
#ifndef BACKPLANE_CORE_SCALAR_TYPE_H_
#define BACKPLANE_CORE_SCALAR_TYPE_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "backplane/float16_conversions.h"

namespace backplane {

// The thirteen element types. The enumerator values are stable and dense
// (0..kNumScalarTypes-1) so that they can index lookup tables; they are also
// the plugin ABI's BP_ScalarType numbers, so a new dtype is appended (int16
// and the unsigned 16/32/64-bit types came in ABI 1.5, after float64).
enum class ScalarType : int8_t {
  Bool,
  UInt8,
  Int8,
  Int32,
  Int64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Int16,
  UInt16,
  UInt32,
  UInt64,
};

constexpr int kNumScalarTypes = 13;

namespace detail {
// Aborts with a message naming `where` and the bad enumerator value. Every
// switch over ScalarType ends here so that a corrupted or out-of-range value
// fails loudly instead of silently picking some type.
[[noreturn]] void invalidScalarType(const char* where, int value);
}  // namespace detail

// IEEE 754 binary16. Stored as raw bits so the type is trivially copyable and
// exactly 2 bytes, which tensor storage relies on. Arithmetic goes through
// the implicit conversion to float. The conversions are the SDK's
// (backplane/float16_conversions.h), shared with plugins and GPU kernels so
// that every layer gives the same bits; Note [16-bit float conversions]
// there states the rule.
struct Half {
  uint16_t bits;

  // Trivial (bits are indeterminate unless value-initialised, e.g. `Half{}`
  // or `Half()`, which gives +0.0) so that Half buffers can be allocated and
  // memcpy'd like any other POD element.
  Half() = default;

  // Rounds to nearest, ties to even. Overflow (|f| >= 65520) gives +/-inf and
  // values at or below half the smallest subnormal give +/-0. A NaN stays NaN
  // with its sign and top payload bits and the quiet bit set, matching what
  // the x86 F16C instruction vcvtps2ph produces.
  constexpr explicit Half(float f) : bits(bp::halfBitsFromFloatBits(std::bit_cast<uint32_t>(f))) {}

  // Exact: every binary16 value is representable as a float. A signalling
  // NaN comes back quiet (payload kept), again matching F16C, so vectorised
  // kernels using the hardware instruction agree bit for bit.
  constexpr operator float() const { return std::bit_cast<float>(bp::floatBitsFromHalfBits(bits)); }

  // Builds a Half from a raw bit pattern. Needed because `Half{0x3c00}` would
  // pick the float constructor and mean 15360.0.
  static constexpr Half fromBits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

// bfloat16: the top 16 bits of an IEEE binary32. Same layout guarantees as
// Half, and the SDK's conversions (Note [16-bit float conversions]).
struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;

  // Rounds to nearest, ties to even (so overflow near FLT_MAX gives inf). A
  // NaN stays NaN with its sign and top payload bits and the quiet bit set;
  // plain truncation could otherwise turn a NaN into inf.
  constexpr explicit BFloat16(float f) : bits(bp::bfloat16BitsFromFloatBits(std::bit_cast<uint32_t>(f))) {}

  // Exact: bfloat16 values are a subset of float (the bits are shifted, so a
  // signalling NaN stays signalling).
  constexpr operator float() const { return std::bit_cast<float>(bp::floatBitsFromBFloat16Bits(bits)); }

  // Builds a BFloat16 from a raw bit pattern (see Half::fromBits for why).
  static constexpr BFloat16 fromBits(uint16_t b) {
    BFloat16 v;
    v.bits = b;
    return v;
  }
};

static_assert(sizeof(Half) == 2 && std::is_trivially_copyable_v<Half> &&
              std::is_trivially_default_constructible_v<Half>);
static_assert(sizeof(BFloat16) == 2 && std::is_trivially_copyable_v<BFloat16> &&
              std::is_trivially_default_constructible_v<BFloat16>);

// Bytes per element, for sizing storage and computing strides in bytes.
constexpr size_t elementSize(ScalarType t) {
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
  detail::invalidScalarType("elementSize", static_cast<int>(t));
}

// True for Float16, BFloat16, Float32, Float64 (PyTorch's isFloatingType).
constexpr bool isFloatingType(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 || t == ScalarType::Float64;
}

// True for UInt8, Int8, Int16, Int32, Int64, UInt16, UInt32, UInt64, and
// also Bool when include_bool. There is deliberately no default for
// include_bool (as in PyTorch) because callers disagree on whether bool
// counts.
constexpr bool isIntegralType(ScalarType t, bool include_bool) {
  return t == ScalarType::UInt8 || t == ScalarType::Int8 || t == ScalarType::Int16 || t == ScalarType::Int32 ||
         t == ScalarType::Int64 || t == ScalarType::UInt16 || t == ScalarType::UInt32 || t == ScalarType::UInt64 ||
         (include_bool && t == ScalarType::Bool);
}

// True for UInt16, UInt32, UInt64: PyTorch 2.x's "barebones" unsigned types,
// which promote only with themselves and with the floating types, and which
// have creation, copies and comparisons but little arithmetic (docs/operators.md,
// "Dtypes"). uint8 is not one of them: it is a full member.
constexpr bool isBarebonesUnsignedType(ScalarType t) {
  return t == ScalarType::UInt16 || t == ScalarType::UInt32 || t == ScalarType::UInt64;
}

// Canonical lower-case name ("bool", "uint8", ..., "uint64"), as used in
// error messages and accepted by parseScalarType. "<invalid>" for values
// outside the enum, so that it is safe to call while reporting errors.
std::string_view scalarTypeName(ScalarType t);

// Parses a canonical name or one of the PyTorch / c10 aliases: "float"
// (float32), "double" (float64), "half" (float16), "int" (int32), "long"
// (int64), "short" (int16), "byte" (uint8), "char" (int8). Case-sensitive, no surrounding
// whitespace. Returns InvalidArgument naming every accepted spelling
// otherwise, so a user with a typo sees the options.
absl::StatusOr<ScalarType> parseScalarType(std::string_view name);

// Result dtype of a binary op on tensors of types a and b; symmetric.
// Identical to c10::promoteTypes restricted to our types (uint8 with int8
// gives int16). As in PyTorch 2.x, a barebones unsigned type (uint16,
// uint32, uint64) promotes only with itself and with a floating type (which
// wins); any other pair involving one throws kInvalidArgument naming both
// dtypes (PyTorch punts on these: uint64 cannot promote into int64 without
// overflow). canPromoteTypes tells which pairs promote.
ScalarType promoteTypes(ScalarType a, ScalarType b);
bool canPromoteTypes(ScalarType a, ScalarType b);

// Whether an in-place op may write a result of type `from` into a tensor of
// type `to` (c10::canCast): floating -> integral and non-bool -> bool are
// refused because they silently lose the value's category; everything else,
// including narrowing within a category, is allowed.
bool canCast(ScalarType from, ScalarType to);

// Prints scalarTypeName(t) (or "ScalarType(<n>)" for an invalid value).
std::ostream& operator<<(std::ostream& os, ScalarType t);

// Maps a C++ element type to its ScalarType. Only the thirteen element types are
// specialised, so using any other type (e.g. char, long long) fails to compile.
template <typename T>
struct CppTypeToScalarType;

// Maps a ScalarType to its C++ element type via ::type; inverse of
// CppTypeToScalarType.
template <ScalarType S>
struct ScalarTypeToCppType;

// X-macro over (C++ type, ScalarType enumerator) pairs, in enum order, so
// that code needing one entry per dtype cannot forget one.
#define BACKPLANE_FORALL_SCALAR_TYPES(_) \
  _(bool, Bool)                          \
  _(uint8_t, UInt8)                      \
  _(int8_t, Int8)                        \
  _(int32_t, Int32)                      \
  _(int64_t, Int64)                      \
  _(Half, Float16)                       \
  _(BFloat16, BFloat16)                  \
  _(float, Float32)                      \
  _(double, Float64)                     \
  _(int16_t, Int16)                      \
  _(uint16_t, UInt16)                    \
  _(uint32_t, UInt32)                    \
  _(uint64_t, UInt64)

#define BACKPLANE_DEFINE_SCALAR_TYPE_MAPPING(cpp_type, name) \
  template <>                                                \
  struct CppTypeToScalarType<cpp_type> {                     \
    static constexpr ScalarType value = ScalarType::name;    \
  };                                                         \
  template <>                                                \
  struct ScalarTypeToCppType<ScalarType::name> {             \
    using type = cpp_type;                                   \
  };
BACKPLANE_FORALL_SCALAR_TYPES(BACKPLANE_DEFINE_SCALAR_TYPE_MAPPING)
#undef BACKPLANE_DEFINE_SCALAR_TYPE_MAPPING

template <ScalarType S>
using ScalarTypeToCppType_t = typename ScalarTypeToCppType<S>::type;

// Runs `f.template operator()<T>()` with T the C++ type of `t` and returns
// its result (references preserved). This is how a kernel written once as a
// template gets instantiated for every dtype; an invalid `t` aborts.
template <typename F>
decltype(auto) visitScalarType(ScalarType t, F&& f) {
  switch (t) {
#define BACKPLANE_VISIT_CASE(cpp_type, name) \
  case ScalarType::name: return std::forward<F>(f).template operator()<cpp_type>();
    BACKPLANE_FORALL_SCALAR_TYPES(BACKPLANE_VISIT_CASE)
#undef BACKPLANE_VISIT_CASE
  }
  detail::invalidScalarType("visitScalarType", static_cast<int>(t));
}

}  // namespace backplane

#endif  // BACKPLANE_CORE_SCALAR_TYPE_H_
