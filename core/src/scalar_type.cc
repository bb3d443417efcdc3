#include "backplane/core/scalar_type.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "backplane/core/error.h"

namespace backplane {
namespace detail {

void invalidScalarType(const char* where, int value) {
  std::fprintf(stderr, "backplane: %s: invalid ScalarType value %d\n", where, value);
  std::abort();
}

}  // namespace detail

namespace {

constexpr std::array<std::string_view, kNumScalarTypes> kNames = {
    "bool",    "uint8",   "int8",  "int32",  "int64",  "float16", "bfloat16",
    "float32", "float64", "int16", "uint16", "uint32", "uint64",
};

struct Alias {
  std::string_view name;
  ScalarType type;
};

// PyTorch's torch.<name> spellings plus c10's legacy Byte/Char names.
constexpr std::array<Alias, 8> kAliases = {{
    {"float", ScalarType::Float32},
    {"double", ScalarType::Float64},
    {"half", ScalarType::Float16},
    {"int", ScalarType::Int32},
    {"long", ScalarType::Int64},
    {"short", ScalarType::Int16},
    {"byte", ScalarType::UInt8},
    {"char", ScalarType::Int8},
}};

constexpr bool isValid(ScalarType t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kNumScalarTypes; }

int checkedIndex(const char* where, ScalarType t) {
  if (!isValid(t)) detail::invalidScalarType(where, static_cast<int>(t));
  return static_cast<int>(t);
}

}  // namespace

std::string_view scalarTypeName(ScalarType t) {
  return isValid(t) ? kNames[static_cast<int>(t)] : std::string_view("<invalid>");
}

absl::StatusOr<ScalarType> parseScalarType(std::string_view name) {
  for (int i = 0; i < kNumScalarTypes; ++i) {
    if (kNames[i] == name) return static_cast<ScalarType>(i);
  }
  for (const Alias& a : kAliases) {
    if (a.name == name) return a.type;
  }
  std::string msg = "unknown scalar type '";
  msg.append(name);
  msg += "'; valid names: ";
  for (int i = 0; i < kNumScalarTypes; ++i) {
    if (i > 0) msg += ", ";
    msg.append(kNames[i]);
  }
  msg += "; aliases: ";
  for (size_t i = 0; i < kAliases.size(); ++i) {
    if (i > 0) msg += ", ";
    msg.append(kAliases[i].name);
    msg += " (";
    msg.append(kNames[static_cast<int>(kAliases[i].type)]);
    msg += ")";
  }
  return absl::InvalidArgumentError(msg);
}

bool canPromoteTypes(ScalarType a, ScalarType b) {
  checkedIndex("canPromoteTypes", a);
  checkedIndex("canPromoteTypes", b);
  if (a == b) return true;
  if (isBarebonesUnsignedType(a) || isBarebonesUnsignedType(b)) return isFloatingType(a) || isFloatingType(b);
  return true;
}

ScalarType promoteTypes(ScalarType a, ScalarType b) {
  const int ia = checkedIndex("promoteTypes", a), ib = checkedIndex("promoteTypes", b);
  if (a == b) return a;
  // c10::promoteTypes: a uint16/uint32/uint64 operand promotes only with a
  // floating dtype (the floating one wins); PyTorch refuses every other pair.
  if (isBarebonesUnsignedType(a) || isBarebonesUnsignedType(b)) {
    if (isFloatingType(a)) return a;
    if (isFloatingType(b)) return b;
    BP_THROW(kInvalidArgument, "type promotion of ", scalarTypeName(a), " with ", scalarTypeName(b),
             " is not supported: uint16, uint32 and uint64 promote only with themselves and with floating dtypes "
             "(as in PyTorch); convert one operand first, e.g. with .to(dtype)");
  }
  constexpr ScalarType b1 = ScalarType::Bool;
  constexpr ScalarType u1 = ScalarType::UInt8;
  constexpr ScalarType i1 = ScalarType::Int8;
  constexpr ScalarType i2 = ScalarType::Int16;
  constexpr ScalarType i4 = ScalarType::Int32;
  constexpr ScalarType i8 = ScalarType::Int64;
  constexpr ScalarType f2 = ScalarType::Float16;
  constexpr ScalarType bf = ScalarType::BFloat16;
  constexpr ScalarType f4 = ScalarType::Float32;
  constexpr ScalarType f8 = ScalarType::Float64;
  // Rows/columns in enum order, up to int16 (the barebones unsigned types
  // are handled above). c10/core/ScalarType.cpp's _promoteTypesLookup,
  // keeping only our types.
  constexpr int kN = static_cast<int>(ScalarType::Int16) + 1;
  static constexpr ScalarType kTable[kN][kN] = {
      /*         b1  u1  i1  i4  i8  f2  bf  f4  f8  i2 */
      /* b1 */ {b1, u1, i1, i4, i8, f2, bf, f4, f8, i2},
      /* u1 */ {u1, u1, i2, i4, i8, f2, bf, f4, f8, i2},
      /* i1 */ {i1, i2, i1, i4, i8, f2, bf, f4, f8, i2},
      /* i4 */ {i4, i4, i4, i4, i8, f2, bf, f4, f8, i4},
      /* i8 */ {i8, i8, i8, i8, i8, f2, bf, f4, f8, i8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f4, f4, f8, f2},
      /* bf */ {bf, bf, bf, bf, bf, f4, bf, f4, f8, bf},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f8, f4},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
      /* i2 */ {i2, i2, i2, i4, i8, f2, bf, f4, f8, i2},
  };
  return kTable[ia][ib];
}

bool canCast(ScalarType from, ScalarType to) {
  checkedIndex("canCast", from);
  checkedIndex("canCast", to);
  // Same two rules as c10::canCast (we have no complex types). Bool is its own
  // category, consistent with promotion: bool_tensor += 5 must be an error.
  if (isFloatingType(from) && isIntegralType(to, /*include_bool=*/false)) return false;
  if (from != ScalarType::Bool && to == ScalarType::Bool) return false;
  return true;
}

std::ostream& operator<<(std::ostream& os, ScalarType t) {
  if (isValid(t)) return os << scalarTypeName(t);
  return os << "ScalarType(" << static_cast<int>(t) << ")";
}

}  // namespace backplane
