// bp::ScalarType (the element types, numbered as the ABI's BP_ScalarType),
// elementSize, name, and the dtype sets argument checks use. Part of
// <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_SCALAR_TYPE_HPP_
#define BACKPLANE_PLUGIN_SCALAR_TYPE_HPP_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin_api.h"

namespace bp {

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

// The SDK's typed refusal of a dtype: the default case of a kernel that
// switches on its arguments' dtype,
//   default: bp::unsupportedDtype(self.scalar_type(), "toy relu.out");
// From ABI 1.7 it declines the call (bp::decline): the call goes where it
// would have gone without the kernel, usually the CPU fallback, so a dtype a
// newer host hands the kernel is served there instead of failing (Note [The
// ABI a plugin's source targets]). For a plugin built for an older minor it
// fails with BP_INVALID_ARGUMENT. `what` names the kernel in the reason.
[[noreturn]] inline void unsupportedDtype(ScalarType t, const char* what) {
#if BP_ABI_MINOR >= 7
  constexpr BP_ErrorCode code = BP_DECLINED;
#else
  constexpr BP_ErrorCode code = BP_INVALID_ARGUMENT;
#endif
  fail(code, detail::concat(what ? what : "this kernel", " has no code for dtype ", name(t)));
}

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

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_SCALAR_TYPE_HPP_
