#include "backplane/core/scalar_type.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "float16_test_cases.h"  // plugin_sdk/tests
#include "gtest/gtest.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define BACKPLANE_TEST_HAVE_F16C 1
#endif

namespace backplane {
namespace {

constexpr ScalarType kAll[] = {
    ScalarType::Bool,    ScalarType::UInt8,    ScalarType::Int8,    ScalarType::Int32,   ScalarType::Int64,
    ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64, ScalarType::Int16,
    ScalarType::UInt16,  ScalarType::UInt32,   ScalarType::UInt64,
};
static_assert(std::size(kAll) == kNumScalarTypes);

const ScalarType kInvalid = static_cast<ScalarType>(42);

float floatFromBits(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t bitsOfFloat(float f) { return std::bit_cast<uint32_t>(f); }
uint16_t halfBits(float f) { return Half(f).bits; }
uint16_t bf16Bits(float f) { return BFloat16(f).bits; }
bool halfIsNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool bf16IsNan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

// ---------------------------------------------------------------------------
// Enum metadata

TEST(ScalarTypeTest, ElementSizes) {
  const size_t expected[] = {1, 1, 1, 4, 8, 2, 2, 4, 8, 2, 2, 4, 8};
  for (int i = 0; i < kNumScalarTypes; ++i) {
    EXPECT_EQ(elementSize(kAll[i]), expected[i]) << kAll[i];
  }
  static_assert(elementSize(ScalarType::BFloat16) == 2);  // usable in constexpr
}

TEST(ScalarTypeTest, ElementSizeMatchesCppType) {
  for (ScalarType t : kAll) {
    size_t size = visitScalarType(t, []<typename T>() { return sizeof(T); });
    EXPECT_EQ(size, elementSize(t)) << t;
  }
}

TEST(ScalarTypeTest, NamesAndStreaming) {
  const char* expected[] = {"bool",    "uint8",   "int8",  "int32",  "int64",  "float16", "bfloat16",
                            "float32", "float64", "int16", "uint16", "uint32", "uint64"};
  for (int i = 0; i < kNumScalarTypes; ++i) {
    EXPECT_EQ(scalarTypeName(kAll[i]), expected[i]);
    std::ostringstream os;
    os << kAll[i];
    EXPECT_EQ(os.str(), expected[i]);
  }
}

TEST(ScalarTypeTest, InvalidValueIsReportedNotCrashing) {
  EXPECT_EQ(scalarTypeName(kInvalid), "<invalid>");
  EXPECT_EQ(scalarTypeName(static_cast<ScalarType>(-1)), "<invalid>");
  std::ostringstream os;
  os << kInvalid;
  EXPECT_EQ(os.str(), "ScalarType(42)");
}

TEST(ScalarTypeTest, ParseCanonicalNamesRoundTrip) {
  for (ScalarType t : kAll) {
    absl::StatusOr<ScalarType> parsed = parseScalarType(scalarTypeName(t));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, t);
  }
}

TEST(ScalarTypeTest, ParsePyTorchAliases) {
  const std::pair<const char*, ScalarType> cases[] = {
      {"float", ScalarType::Float32}, {"double", ScalarType::Float64}, {"half", ScalarType::Float16},
      {"int", ScalarType::Int32},     {"long", ScalarType::Int64},     {"byte", ScalarType::UInt8},
      {"char", ScalarType::Int8},     {"short", ScalarType::Int16},
  };
  for (const auto& [name, type] : cases) {
    absl::StatusOr<ScalarType> parsed = parseScalarType(name);
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    EXPECT_EQ(*parsed, type) << name;
  }
}

TEST(ScalarTypeTest, ParseRejectsUnknownNamesWithHelpfulMessage) {
  for (const char* bad : {"", "Float32", "FLOAT", "int128", "ushort", " float32", "float32 ", "float3", "complex64",
                          "torch.float32", "uint"}) {
    absl::StatusOr<ScalarType> parsed = parseScalarType(bad);
    ASSERT_FALSE(parsed.ok()) << "accepted '" << bad << "'";
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(parsed.status().message());
    EXPECT_NE(msg.find("'" + std::string(bad) + "'"), std::string::npos) << msg;
    for (ScalarType t : kAll) {
      EXPECT_NE(msg.find(std::string(scalarTypeName(t))), std::string::npos)
          << "message does not list " << t << ": " << msg;
    }
    for (const char* alias : {"float", "double", "half", "int", "long", "short", "byte", "char"}) {
      EXPECT_NE(msg.find(alias), std::string::npos) << msg;
    }
  }
}

TEST(ScalarTypeTest, Categories) {
  //                           b1     u1     i1     i4     i8     f2     bf     f4     f8     i2     u2    u4    u8
  const bool floating[] = {false, false, false, false, false, true, true, true, true, false, false, false, false};
  const bool integral[] = {false, true, true, true, true, false, false, false, false, true, true, true, true};
  const bool barebones[] = {false, false, false, false, false, false, false, false, false, false, true, true, true};
  for (int i = 0; i < kNumScalarTypes; ++i) {
    ScalarType t = kAll[i];
    EXPECT_EQ(isFloatingType(t), floating[i]) << t;
    EXPECT_EQ(isIntegralType(t, /*include_bool=*/false), integral[i]) << t;
    EXPECT_EQ(isIntegralType(t, /*include_bool=*/true), integral[i] || t == ScalarType::Bool) << t;
    EXPECT_EQ(isBarebonesUnsignedType(t), barebones[i]) << t;
  }
  static_assert(isFloatingType(ScalarType::Float16) && !isIntegralType(ScalarType::Bool, false));
}

// ---------------------------------------------------------------------------
// Promotion and casting

TEST(PromoteTypesTest, MatchesPyTorchTable) {
  constexpr ScalarType b1 = ScalarType::Bool, u1 = ScalarType::UInt8, i1 = ScalarType::Int8, i2 = ScalarType::Int16,
                       i4 = ScalarType::Int32, i8 = ScalarType::Int64, f2 = ScalarType::Float16,
                       bf = ScalarType::BFloat16, f4 = ScalarType::Float32, f8 = ScalarType::Float64,
                       u2 = ScalarType::UInt16, u4 = ScalarType::UInt32, u8 = ScalarType::UInt64;
  // kInvalid marks a pair PyTorch 2.x refuses (c10::promoteTypes: "Promotion
  // for uint16, uint32, uint64 types is not supported").
  constexpr ScalarType xx = kInvalid;
  // PyTorch's _promoteTypesLookup (with its barebones-unsigned rule), in our
  // enum order.
  const ScalarType expected[kNumScalarTypes][kNumScalarTypes] = {
      /*         b1  u1  i1  i4  i8  f2  bf  f4  f8  i2  u2  u4  u8 */
      /* b1 */ {b1, u1, i1, i4, i8, f2, bf, f4, f8, i2, xx, xx, xx},
      /* u1 */ {u1, u1, i2, i4, i8, f2, bf, f4, f8, i2, xx, xx, xx},
      /* i1 */ {i1, i2, i1, i4, i8, f2, bf, f4, f8, i2, xx, xx, xx},
      /* i4 */ {i4, i4, i4, i4, i8, f2, bf, f4, f8, i4, xx, xx, xx},
      /* i8 */ {i8, i8, i8, i8, i8, f2, bf, f4, f8, i8, xx, xx, xx},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f4, f4, f8, f2, f2, f2, f2},
      /* bf */ {bf, bf, bf, bf, bf, f4, bf, f4, f8, bf, bf, bf, bf},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f8, f4, f4, f4, f4},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
      /* i2 */ {i2, i2, i2, i4, i8, f2, bf, f4, f8, i2, xx, xx, xx},
      /* u2 */ {xx, xx, xx, xx, xx, f2, bf, f4, f8, xx, u2, xx, xx},
      /* u4 */ {xx, xx, xx, xx, xx, f2, bf, f4, f8, xx, xx, u4, xx},
      /* u8 */ {xx, xx, xx, xx, xx, f2, bf, f4, f8, xx, xx, xx, u8},
  };
  for (int i = 0; i < kNumScalarTypes; ++i) {
    for (int j = 0; j < kNumScalarTypes; ++j) {
      const ScalarType a = kAll[i], b = kAll[j];
      if (expected[i][j] == kInvalid) {
        EXPECT_FALSE(canPromoteTypes(a, b)) << a << " + " << b;
        try {
          promoteTypes(a, b);
          ADD_FAILURE() << a << " + " << b << " promoted, but PyTorch refuses it";
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
          const std::string m = e.what();
          EXPECT_NE(m.find(strCat("type promotion of ", a, " with ", b, " is not supported")), std::string::npos) << m;
          EXPECT_NE(m.find("uint16, uint32 and uint64 promote only with themselves and with floating dtypes"),
                    std::string::npos)
              << m;
        }
      } else {
        EXPECT_TRUE(canPromoteTypes(a, b)) << a << " + " << b;
        EXPECT_EQ(promoteTypes(a, b), expected[i][j]) << a << " + " << b;
      }
    }
  }
}

TEST(PromoteTypesTest, NamedCases) {
  EXPECT_EQ(promoteTypes(ScalarType::UInt8, ScalarType::Int8), ScalarType::Int16);
  EXPECT_EQ(promoteTypes(ScalarType::UInt8, ScalarType::Int16), ScalarType::Int16);
  EXPECT_EQ(promoteTypes(ScalarType::Int16, ScalarType::Int32), ScalarType::Int32);
  EXPECT_EQ(promoteTypes(ScalarType::Int16, ScalarType::Float16), ScalarType::Float16);
  EXPECT_EQ(promoteTypes(ScalarType::UInt32, ScalarType::Float16), ScalarType::Float16);
  EXPECT_EQ(promoteTypes(ScalarType::BFloat16, ScalarType::UInt64), ScalarType::BFloat16);
  EXPECT_EQ(promoteTypes(ScalarType::UInt16, ScalarType::UInt16), ScalarType::UInt16);
  EXPECT_FALSE(canPromoteTypes(ScalarType::UInt64, ScalarType::Int64));
  EXPECT_FALSE(canPromoteTypes(ScalarType::UInt16, ScalarType::UInt32));
  EXPECT_FALSE(canPromoteTypes(ScalarType::Bool, ScalarType::UInt32));
  EXPECT_EQ(promoteTypes(ScalarType::Float16, ScalarType::BFloat16), ScalarType::Float32);
  EXPECT_EQ(promoteTypes(ScalarType::Int64, ScalarType::Float16), ScalarType::Float16);
  EXPECT_EQ(promoteTypes(ScalarType::Int64, ScalarType::BFloat16), ScalarType::BFloat16);
  EXPECT_EQ(promoteTypes(ScalarType::Bool, ScalarType::Bool), ScalarType::Bool);
  EXPECT_EQ(promoteTypes(ScalarType::Int32, ScalarType::Int64), ScalarType::Int64);
  EXPECT_EQ(promoteTypes(ScalarType::Float32, ScalarType::Float64), ScalarType::Float64);
}

TEST(PromoteTypesTest, AlgebraicProperties) {
  for (ScalarType a : kAll) {
    EXPECT_EQ(promoteTypes(a, a), a) << a;
    if (!isBarebonesUnsignedType(a)) {
      EXPECT_EQ(promoteTypes(ScalarType::Bool, a), a) << a;
    }
    for (ScalarType b : kAll) {
      EXPECT_EQ(canPromoteTypes(a, b), canPromoteTypes(b, a)) << a << ", " << b;
      if (!canPromoteTypes(a, b)) continue;
      ScalarType ab = promoteTypes(a, b);
      EXPECT_EQ(ab, promoteTypes(b, a)) << a << ", " << b;
      // The result must be able to hold either input, or in-place ops like
      // `a += b` on the promoted tensor would be rejected.
      EXPECT_TRUE(canCast(a, ab)) << a << " -> " << ab;
      EXPECT_TRUE(canCast(b, ab)) << b << " -> " << ab;
      for (ScalarType c : kAll) {
        if (!canPromoteTypes(ab, c) || !canPromoteTypes(b, c) || !canPromoteTypes(a, promoteTypes(b, c))) continue;
        EXPECT_EQ(promoteTypes(ab, c), promoteTypes(a, promoteTypes(b, c))) << a << ", " << b << ", " << c;
      }
    }
  }
}

TEST(CanCastTest, CategoryRule) {
  // Categories are ordered bool < integral < floating; a cast may stay in its
  // category or move up, never down.
  auto category = [](ScalarType t) { return t == ScalarType::Bool ? 0 : isFloatingType(t) ? 2 : 1; };
  for (ScalarType from : kAll) {
    for (ScalarType to : kAll) {
      EXPECT_EQ(canCast(from, to), category(from) <= category(to)) << from << " -> " << to;
    }
  }
}

TEST(CanCastTest, NamedCases) {
  EXPECT_FALSE(canCast(ScalarType::Float32, ScalarType::Int64));
  EXPECT_FALSE(canCast(ScalarType::BFloat16, ScalarType::UInt8));
  EXPECT_FALSE(canCast(ScalarType::Float64, ScalarType::Bool));
  EXPECT_FALSE(canCast(ScalarType::Int8, ScalarType::Bool));
  EXPECT_TRUE(canCast(ScalarType::Bool, ScalarType::Float16));
  EXPECT_TRUE(canCast(ScalarType::Int64, ScalarType::UInt8));  // narrowing is allowed
  EXPECT_TRUE(canCast(ScalarType::Float64, ScalarType::Float16));
  EXPECT_TRUE(canCast(ScalarType::Int64, ScalarType::BFloat16));
  EXPECT_TRUE(canCast(ScalarType::Int16, ScalarType::UInt64));
  EXPECT_FALSE(canCast(ScalarType::Float32, ScalarType::UInt32));
  EXPECT_FALSE(canCast(ScalarType::UInt16, ScalarType::Bool));
}

TEST(ScalarTypeDeathTest, InvalidValuesAbort) {
  EXPECT_DEATH(promoteTypes(kInvalid, ScalarType::Bool), "promoteTypes: invalid ScalarType value 42");
  EXPECT_DEATH(canCast(ScalarType::Bool, kInvalid), "canCast: invalid ScalarType value 42");
  EXPECT_DEATH(elementSize(kInvalid), "elementSize: invalid ScalarType value 42");
  EXPECT_DEATH(visitScalarType(kInvalid, []<typename T>() {}), "visitScalarType: invalid ScalarType value 42");
}

// ---------------------------------------------------------------------------
// Type mapping and visiting

#define CHECK_MAPPING(cpp_type, name)                                      \
  static_assert(CppTypeToScalarType<cpp_type>::value == ScalarType::name); \
  static_assert(std::is_same_v<ScalarTypeToCppType<ScalarType::name>::type, cpp_type>);
CHECK_MAPPING(bool, Bool)
CHECK_MAPPING(uint8_t, UInt8)
CHECK_MAPPING(int8_t, Int8)
CHECK_MAPPING(int32_t, Int32)
CHECK_MAPPING(int64_t, Int64)
CHECK_MAPPING(Half, Float16)
CHECK_MAPPING(BFloat16, BFloat16)
CHECK_MAPPING(float, Float32)
CHECK_MAPPING(double, Float64)
CHECK_MAPPING(int16_t, Int16)
CHECK_MAPPING(uint16_t, UInt16)
CHECK_MAPPING(uint32_t, UInt32)
CHECK_MAPPING(uint64_t, UInt64)
#undef CHECK_MAPPING
static_assert(std::is_same_v<ScalarTypeToCppType_t<ScalarType::Int64>, int64_t>);

template <typename T>
concept HasScalarType = requires {
  CppTypeToScalarType<T>::value;
};
static_assert(!HasScalarType<char>);  // distinct from int8_t; must not silently map
static_assert(!HasScalarType<long long> || std::is_same_v<long long, int64_t>);

TEST(VisitScalarTypeTest, PassesTheMatchingCppType) {
  for (ScalarType t : kAll) {
    ScalarType seen = visitScalarType(t, []<typename T>() { return CppTypeToScalarType<T>::value; });
    EXPECT_EQ(seen, t);
  }
}

TEST(VisitScalarTypeTest, PreservesReferencesAndSupportsVoid) {
  int target = 0;
  auto ref = [&target]<typename T>() -> int& { return target; };
  static_assert(std::is_same_v<decltype(visitScalarType(ScalarType::Int8, ref)), int&>);
  visitScalarType(ScalarType::Float64, ref) = 7;
  EXPECT_EQ(target, 7);

  int calls = 0;
  visitScalarType(ScalarType::Float16, [&calls]<typename T>() { calls += std::is_same_v<T, Half> ? 1 : 100; });
  EXPECT_EQ(calls, 1);
}

// ---------------------------------------------------------------------------
// Half

TEST(HalfTest, KnownBitPatternsFromFloat) {
  EXPECT_EQ(halfBits(0.0f), 0x0000);
  EXPECT_EQ(halfBits(-0.0f), 0x8000);
  EXPECT_EQ(halfBits(1.0f), 0x3c00);
  EXPECT_EQ(halfBits(-2.0f), 0xc000);
  EXPECT_EQ(halfBits(0.5f), 0x3800);
  EXPECT_EQ(halfBits(0.1f), 0x2e66);
  EXPECT_EQ(halfBits(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(halfBits(65504.0f), 0x7bff);    // largest finite
  EXPECT_EQ(halfBits(65519.996f), 0x7bff);  // just below the overflow threshold
  EXPECT_EQ(halfBits(65520.0f), 0x7c00);    // tie between 65504 (odd) and 2^16 -> inf
  EXPECT_EQ(halfBits(-65520.0f), 0xfc00);
  EXPECT_EQ(halfBits(1e10f), 0x7c00);
  EXPECT_EQ(halfBits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(halfBits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(halfBits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(halfBits(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(halfBits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(halfBits(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(halfBits(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(halfBits(1e-8f), 0x0000);
  EXPECT_EQ(halfBits(-1e-8f), 0x8000);
  EXPECT_EQ(halfBits(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(HalfTest, RoundsTiesToEven) {
  // Normal range: 1 + 2^-11 is halfway between 0x3c00 and 0x3c01.
  EXPECT_EQ(halfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(halfBits(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  EXPECT_EQ(halfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(halfBits(2049.0f), 0x6800);  // 2048 (even) vs 2050
  EXPECT_EQ(halfBits(2051.0f), 0x6802);  // 2050 (odd) vs 2052 (even)
  // Subnormal range: multiples of 2^-25 are ties.
  EXPECT_EQ(halfBits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(halfBits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(halfBits(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(halfBits(std::ldexp(5.0f, -25)), 0x0002);
  // Largest subnormal + half ulp rounds up into the normal range.
  EXPECT_EQ(halfBits(std::ldexp(2047.0f, -25)), 0x0400);
  // Mantissa carry bumps the exponent.
  EXPECT_EQ(halfBits(std::nextafter(2.0f, 0.0f)), 0x4000);
}

TEST(HalfTest, NanStaysNan) {
  EXPECT_EQ(halfBits(std::numeric_limits<float>::quiet_NaN()), 0x7e00);
  EXPECT_EQ(halfBits(-std::numeric_limits<float>::quiet_NaN()), 0xfe00);
  // Payload only in bits that do not survive the conversion: must not become inf.
  EXPECT_EQ(halfBits(floatFromBits(0x7f800001)), 0x7e00);
  EXPECT_EQ(halfBits(floatFromBits(0xff800001)), 0xfe00);
  // Top payload bits are kept.
  EXPECT_EQ(halfBits(floatFromBits(0x7fc02000)), 0x7e01);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(HalfTest, KnownBitPatternsToFloat) {
  EXPECT_EQ(static_cast<float>(Half::fromBits(0x3c00)), 1.0f);
  EXPECT_EQ(static_cast<float>(Half::fromBits(0xc000)), -2.0f);
  EXPECT_EQ(static_cast<float>(Half::fromBits(0x7bff)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Half::fromBits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(Half::fromBits(0x03ff)), std::ldexp(1023.0f, -24));
  EXPECT_EQ(static_cast<float>(Half::fromBits(0x0400)), std::ldexp(1.0f, -14));
  EXPECT_EQ(static_cast<float>(Half::fromBits(0x2e66)), 0.0999755859375f);
  EXPECT_EQ(static_cast<float>(Half::fromBits(0x7c00)), std::numeric_limits<float>::infinity());
  EXPECT_EQ(static_cast<float>(Half::fromBits(0xfc00)), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bitsOfFloat(Half::fromBits(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(bitsOfFloat(Half::fromBits(0x7e00)), 0x7fc00000u);
  // A signalling NaN comes back quiet, as IEEE 754 conversions (and F16C) do.
  EXPECT_EQ(bitsOfFloat(Half::fromBits(0xfc01)), 0xffc02000u);
}

TEST(HalfTest, EveryBitPatternRoundTrips) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = Half::fromBits(h);
    const uint16_t back = Half(f).bits;
    if (halfIsNan(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // Sign and payload survive; a signalling NaN comes back quiet.
      ASSERT_EQ(back, h | 0x0200) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h << " -> " << f;
    }
  }
}

// The finite non-negative half values in bit-pattern order (which is value
// order), plus 2^16 at index 0x7c00 standing in for inf: under round-to-
// nearest-even, overflow behaves as if the exponent range were unbounded.
std::vector<double> positiveHalfValues() {
  std::vector<double> values;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const uint32_t exp = h >> 10, mant = h & 0x3ff;
    values.push_back(exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, int(exp) - 25));
  }
  values.push_back(65536.0);
  return values;
}

// Reference float->half computed by searching the value table.
uint16_t referenceHalfBits(float f, const std::vector<double>& values) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65536.0) return sign | 0x7c00;
  const size_t lo = (std::upper_bound(values.begin(), values.end(), a) - values.begin()) - 1;
  if (values[lo] == a) return static_cast<uint16_t>(sign | lo);
  const double dlo = a - values[lo], dhi = values[lo + 1] - a;
  const size_t pick = dlo < dhi ? lo : dhi < dlo ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
  return static_cast<uint16_t>(sign | pick);
}

TEST(HalfTest, TiesAndNeighboursOfEveryMidpoint) {
  const std::vector<double> values = positiveHalfValues();
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double mid = (values[h] + values[h + 1]) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid);
    const uint16_t tie = static_cast<uint16_t>(h % 2 == 0 ? h : h + 1);
    const float below = std::nextafter(m, 0.0f), above = std::nextafter(m, std::numeric_limits<float>::infinity());
    ASSERT_EQ(halfBits(static_cast<float>(values[h])), h);
    ASSERT_EQ(halfBits(below), h) << std::hex << h;
    ASSERT_EQ(halfBits(m), tie) << std::hex << h;
    ASSERT_EQ(halfBits(above), h + 1) << std::hex << h;
    ASSERT_EQ(halfBits(-below), 0x8000 | h) << std::hex << h;
    ASSERT_EQ(halfBits(-m), 0x8000 | tie) << std::hex << h;
    ASSERT_EQ(halfBits(-above), 0x8000 | (h + 1)) << std::hex << h;
  }
}

TEST(HalfTest, MatchesReferenceAcrossFloatRange) {
  const std::vector<double> values = positiveHalfValues();
  // A prime stride visits every exponent with varied low mantissa bits.
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4093) {
    const float f = floatFromBits(static_cast<uint32_t>(b));
    if (std::isnan(f)) {
      ASSERT_TRUE(halfIsNan(halfBits(f))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(halfBits(f), referenceHalfBits(f, values)) << std::hex << b << " = " << f;
  }
}

#ifdef BACKPLANE_TEST_HAVE_F16C
// F16C (CPUID.1:ECX bit 29) is VEX-encoded, so the OS must also have enabled
// AVX state (OSXSAVE, bit 27, and XCR0 bits 1-2). Spelled out because clang
// 14's __builtin_cpu_supports does not know "f16c".
bool cpuHasF16C() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  if (!(ecx & (1u << 29)) || !(ecx & (1u << 27))) return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  return (xcr0_lo & 6u) == 6u;
}

__attribute__((target("f16c"))) uint16_t hardwareHalfBits(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) uint32_t hardwareHalfToFloatBits(uint16_t h) { return bitsOfFloat(_cvtsh_ss(h)); }
#endif

TEST(HalfTest, MatchesF16CHardware) {
#ifdef BACKPLANE_TEST_HAVE_F16C
  if (!cpuHasF16C()) GTEST_SKIP() << "CPU lacks F16C";
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    ASSERT_EQ(bitsOfFloat(Half::fromBits(static_cast<uint16_t>(h))), hardwareHalfToFloatBits(static_cast<uint16_t>(h)))
        << std::hex << h;
  }
  for (uint64_t b = 0; b <= 0xffffffffu; b += 1021) {  // includes NaN payloads
    const float f = floatFromBits(static_cast<uint32_t>(b));
    ASSERT_EQ(halfBits(f), hardwareHalfBits(f)) << std::hex << b;
  }
#else
  GTEST_SKIP() << "not x86-64";
#endif
}

TEST(HalfTest, ConstexprAndValueInitialisation) {
  static_assert(Half(1.0f).bits == 0x3c00);
  static_assert(static_cast<float>(Half::fromBits(0x0001)) == 0x1p-24f);
  // Kernels write `T acc{}` and expect zero even though the type is trivial.
  alignas(Half) unsigned char buf[sizeof(Half)] = {0xff, 0xff};
  Half* h = new (buf) Half();
  EXPECT_EQ(h->bits, 0);
  EXPECT_EQ(static_cast<float>(*h), 0.0f);
}

TEST(HalfTest, ArithmeticGoesThroughFloat) {
  const Half a(1.5f), b(2.25f);
  EXPECT_EQ(a + b, 3.75f);
  EXPECT_TRUE(a < b);
  EXPECT_EQ(Half(a * b).bits, halfBits(3.375f));
}

TEST(HalfTest, HalfAndBFloat16FollowTheRuleEveryLayerShares) {
  // The same cases and sweeps as the SDK's and the GPU plugins' types meet
  // (Note [16-bit float conversions]).
  float16_test::expectFloat16ConversionsFollowTheRule(float16_test::scalarConversionsOf<Half, BFloat16>());
}

// ---------------------------------------------------------------------------
// BFloat16

TEST(BFloat16Test, KnownBitPatterns) {
  EXPECT_EQ(bf16Bits(0.0f), 0x0000);
  EXPECT_EQ(bf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16Bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16Bits(3.0f), 0x4040);
  EXPECT_EQ(bf16Bits(0.1f), 0x3dcd);  // 0x3dcccccd rounds up
  EXPECT_EQ(bf16Bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16Bits(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(bf16Bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(bf16Bits(floatFromBits(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(bf16Bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(static_cast<float>(BFloat16::fromBits(0x3f80)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16::fromBits(0xc000)), -2.0f);
  EXPECT_EQ(bitsOfFloat(BFloat16::fromBits(0x0001)), 0x00010000u);
}

TEST(BFloat16Test, RoundsTiesToEven) {
  EXPECT_EQ(bf16Bits(1.00390625f), 0x3f80);  // 1 + 2^-8: tie, 0x3f80 is even
  EXPECT_EQ(bf16Bits(std::nextafter(1.00390625f, 2.0f)), 0x3f81);
  EXPECT_EQ(bf16Bits(1.01171875f), 0x3f82);  // 1 + 3*2^-8: tie, 0x3f81 is odd
  EXPECT_EQ(bf16Bits(-1.00390625f), 0xbf80);
  EXPECT_EQ(bf16Bits(floatFromBits(0x7f7f8000)), 0x7f80);  // tie at the top -> inf
  EXPECT_EQ(bf16Bits(floatFromBits(0x00008000)), 0x0000);  // subnormal ties
  EXPECT_EQ(bf16Bits(floatFromBits(0x00018000)), 0x0002);
  EXPECT_EQ(bf16Bits(floatFromBits(0x3fffffff)), 0x4000);  // carry into exponent
}

TEST(BFloat16Test, NanStaysNan) {
  EXPECT_EQ(bf16Bits(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(bf16Bits(-std::numeric_limits<float>::quiet_NaN()), 0xffc0);
  // Truncating or rounding these would give inf or overflow into the sign.
  EXPECT_EQ(bf16Bits(floatFromBits(0x7f800001)), 0x7fc0);
  EXPECT_EQ(bf16Bits(floatFromBits(0x7fffffff)), 0x7fff);
  EXPECT_EQ(bf16Bits(floatFromBits(0xffffffff)), 0xffff);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(BFloat16Test, EveryBitPatternRoundTrips) {
  for (uint32_t i = 0; i <= 0xffff; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const float f = BFloat16::fromBits(b);
    ASSERT_EQ(bitsOfFloat(f), i << 16);  // widening is exact
    if (bf16IsNan(b)) {
      ASSERT_EQ(BFloat16(f).bits, b | 0x0040) << std::hex << b;
    } else {
      ASSERT_EQ(BFloat16(f).bits, b) << std::hex << b;
    }
  }
}

TEST(BFloat16Test, TiesAndNeighboursOfEveryMidpoint) {
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    // The float exactly halfway between bfloat16 b and b+1.
    const float m = floatFromBits((b << 16) | 0x8000);
    const uint16_t tie = static_cast<uint16_t>(b % 2 == 0 ? b : b + 1);
    ASSERT_EQ(bf16Bits(std::nextafter(m, 0.0f)), b) << std::hex << b;
    ASSERT_EQ(bf16Bits(m), tie) << std::hex << b;
    ASSERT_EQ(bf16Bits(std::nextafter(m, std::numeric_limits<float>::infinity())), b + 1) << std::hex << b;
    ASSERT_EQ(bf16Bits(-m), 0x8000 | tie) << std::hex << b;
  }
}

TEST(BFloat16Test, ConstexprAndValueInitialisation) {
  static_assert(BFloat16(1.0f).bits == 0x3f80);
  static_assert(static_cast<float>(BFloat16::fromBits(0x4040)) == 3.0f);
  alignas(BFloat16) unsigned char buf[sizeof(BFloat16)] = {0xff, 0xff};
  BFloat16* v = new (buf) BFloat16();
  EXPECT_EQ(v->bits, 0);
}

}  // namespace
}  // namespace backplane
