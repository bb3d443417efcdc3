// Standard operators of dispatcher/ops/src/elementwise_more.cc through the
// CPU plugin and the public API (backplane/ops/ops.h): rounding division,
// remainder and fmod, rounding, sign, erf, bitwise and logical ops,
// isnan/isinf/isfinite, nan_to_num, the activations and the Scalar
// overloads, each against the values PyTorch gives.
#include <cfloat>
#include <cstdint>
#include <limits>

#include "backplane/ops/ops.h"
#include "ops_test_util.h"

namespace backplane::ops_test {
namespace {

using ::testing::HasSubstr;

Tensor t(const std::vector<double>& v, ScalarType dtype) {
  return fromDoubles(v, {static_cast<int64_t>(v.size())}, dtype);
}

void expectSame(const Tensor& r, const std::vector<double>& expected, ScalarType dtype) {
  expectClose(r, expected, {static_cast<int64_t>(expected.size())}, dtype);
}

TEST(RoundingDivision, FloorAndTruncRoundTowardNegativeInfinityAndZero) {
  for (ScalarType dt : {ScalarType::Int8, ScalarType::Int32, ScalarType::Int64, ScalarType::Float32,
                        ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
    SCOPED_TRACE(scalarTypeName(dt));
    Tensor a = t({-7, 7, -7, 7, 6}, dt), b = t({2, -2, -2, 2, 3}, dt);
    expectSame(floor_divide(a, b), {-4, -4, 3, 3, 2}, dt);
    expectSame(div(a, b, "floor"), {-4, -4, 3, 3, 2}, dt);
    expectSame(div(a, b, "trunc"), {-3, -3, 3, 3, 2}, dt);
    expectSame(remainder(a, b), {1, -1, -1, 1, 0}, dt);  // the divisor's sign
    expectSame(fmod(a, b), {-1, 1, -1, 1, 0}, dt);       // the dividend's sign
  }
  // No rounding mode: true division (integers give float32).
  expectSame(div(t({1, 3}, ScalarType::Int64), t({2, 2}, ScalarType::Int64), std::nullopt), {0.5, 1.5},
             ScalarType::Float32);
  EXPECT_THAT(errorOf([] { div(t({1}, ScalarType::Float32), t({1}, ScalarType::Float32), "round"); }),
              HasSubstr("'rounding_mode' must be None (true division), 'trunc' or 'floor', but got 'round'"));
}

TEST(RoundingDivision, FloatsFollowPythonIncludingZerosAndInfinities) {
  Tensor a = t({-7.5, 7.5, 0, 1, -1, 5}, ScalarType::Float64);
  Tensor b = t({2, -2, -3, 0, 0, INFINITY}, ScalarType::Float64);
  std::vector<double> q = values(floor_divide(a, b));
  EXPECT_EQ(q[0], -4);
  EXPECT_EQ(q[1], -4);
  EXPECT_EQ(q[2], 0);
  EXPECT_TRUE(std::signbit(q[2])) << "0 // -3 is -0.0";
  EXPECT_EQ(q[3], INFINITY);
  EXPECT_EQ(q[4], -INFINITY);
  EXPECT_EQ(q[5], 0);
  std::vector<double> r = values(remainder(a, b));
  EXPECT_EQ(r[0], 0.5);
  EXPECT_EQ(r[1], -0.5);
  EXPECT_TRUE(std::isnan(r[3]));
  std::vector<double> f = values(fmod(a, b));
  EXPECT_EQ(f[0], -1.5);
  EXPECT_EQ(f[1], 1.5);
  EXPECT_EQ(f[5], 5);
}

TEST(RoundingDivision, IntegerDivisionByZeroRaisesAndMostNegativeByMinusOneWraps) {
  Tensor a = t({5, 6}, ScalarType::Int32), zero = t({1, 0}, ScalarType::Int32);
  for (auto f : std::vector<std::function<Tensor()>>{
           [&] { return floor_divide(a, zero); }, [&] { return remainder(a, zero); }, [&] { return fmod(a, zero); },
           [&] { return div(a, zero, "trunc"); }, [&] { return remainder(a, Scalar(int64_t{0})); },
           [&] { return div(a, Scalar(int64_t{0}), "floor"); }}) {
    EXPECT_THAT(errorOf([&] { f(); }), HasSubstr("ZeroDivisionError"));
  }
  // Floating division by zero does not raise: IEEE's result.
  EXPECT_EQ(values(div(t({1}, ScalarType::Float32), t({0}, ScalarType::Float32), "trunc"))[0], INFINITY);
  const double i32min = std::numeric_limits<int32_t>::min();
  Tensor m = t({i32min, i32min}, ScalarType::Int32), minus1 = t({-1, -1}, ScalarType::Int32);
  expectSame(floor_divide(m, minus1), {i32min, i32min}, ScalarType::Int32);
  expectSame(div(m, minus1, "trunc"), {i32min, i32min}, ScalarType::Int32);
  expectSame(remainder(m, minus1), {0, 0}, ScalarType::Int32);
  expectSame(fmod(m, minus1), {0, 0}, ScalarType::Int32);
  const int64_t i64min = std::numeric_limits<int64_t>::min();
  Tensor m64 = tensorFromVector<int64_t>({i64min}, {1});
  EXPECT_EQ(floor_divide(m64, Scalar(int64_t{-1})).toVector<int64_t>()[0], i64min);
}

TEST(RoundingDivision, PromotesAndRefusesBool) {
  Tensor i = t({7, -7}, ScalarType::Int32);
  // A floating number makes an integral tensor compute in float32.
  expectSame(floor_divide(i, Scalar(2.5)), {2, -3}, ScalarType::Float32);
  expectSame(remainder(i, Scalar(int64_t{3})), {1, 2}, ScalarType::Int32);
  // An integer number is converted to the tensor's dtype as a cast: 300 is 44 in uint8.
  expectSame(remainder(t({100}, ScalarType::UInt8), Scalar(int64_t{300})), {12}, ScalarType::UInt8);
  // A 0-d tensor of a higher category promotes.
  expectSame(floor_divide(i, fromDoubles({2.0}, {}, ScalarType::Float64)), {3, -4}, ScalarType::Float64);
  Tensor b = t({1, 0}, ScalarType::Bool);
  for (auto f : std::vector<std::function<Tensor()>>{
           [&] { return floor_divide(b, b); }, [&] { return remainder(b, b); }, [&] { return div(b, b, "floor"); }}) {
    EXPECT_THAT(errorOf([&] { f(); }), HasSubstr("every dtype but bool"));
  }
  // True division of bools is float32.
  expectSame(div(b, t({1, 1}, ScalarType::Bool), std::nullopt), {1, 0}, ScalarType::Float32);
}

TEST(Rounding, RoundsHalfToEvenAndKeepsIntegers) {
  for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16, ScalarType::BFloat16}) {
    SCOPED_TRACE(scalarTypeName(dt));
    Tensor x = t({0.5, 1.5, 2.5, -0.5, -2.5, -1.25}, dt);
    expectSame(round(x), {0, 2, 2, -0.0, -2, -1}, dt);
    expectSame(floor(x), {0, 1, 2, -1, -3, -2}, dt);
    expectSame(ceil(x), {1, 2, 3, -0.0, -2, -1}, dt);
    expectSame(trunc(x), {0, 1, 2, -0.0, -2, -1}, dt);
  }
  // -2.675 * 100 is -267.5 in double, which rounds to even; 12.5 too.
  expectSame(round(t({1.2345, -2.675, 0.125}, ScalarType::Float64), 2), {1.23, -2.68, 0.12}, ScalarType::Float64);
  expectSame(round(t({15, 25, 149}, ScalarType::Float32), -1), {20, 20, 150}, ScalarType::Float32);
  for (ScalarType dt : {ScalarType::UInt8, ScalarType::Int8, ScalarType::Int32, ScalarType::Int64}) {
    expectSame(floor(t({3, 1}, dt)), {3, 1}, dt);
    expectSame(round(t({3, 1}, dt)), {3, 1}, dt);
  }
  EXPECT_THAT(errorOf([] { floor(t({1}, ScalarType::Bool)); }), HasSubstr("every dtype but bool"));
  EXPECT_THAT(errorOf([] { round(t({1}, ScalarType::Int32), 1); }), HasSubstr("bp::round.decimals"));
}

TEST(SignAndErf, MatchPyTorch) {
  expectSame(sign(t({-2, 0, 3, NAN, -0.0}, ScalarType::Float32)), {-1, 0, 1, 0, 0}, ScalarType::Float32);
  expectSame(sign(t({-2, 0, 3}, ScalarType::Int8)), {-1, 0, 1}, ScalarType::Int8);
  expectSame(sign(t({0, 7}, ScalarType::UInt8)), {0, 1}, ScalarType::UInt8);
  expectSame(sign(t({1, 0}, ScalarType::Bool)), {1, 0}, ScalarType::Bool);
  expectSame(erf(t({0, 1, -2}, ScalarType::Int64)), {0, std::erf(1.0), std::erf(-2.0)}, ScalarType::Float32);
  expectSame(erf(t({0.5}, ScalarType::Float16)), {std::erf(0.5)}, ScalarType::Float16);
}

TEST(Activations, MatchTheirFormulas) {
  Tensor x = t({-2, -0.5, 0, 1.5, NAN}, ScalarType::Float32);
  expectSame(leaky_relu(x), {-0.02, -0.005, 0, 1.5, NAN}, ScalarType::Float32);
  expectSame(leaky_relu(x, 0.2), {-0.4, -0.1, 0, 1.5, NAN}, ScalarType::Float32);
  expectSame(hardtanh(x), {-1, -0.5, 0, 1, NAN}, ScalarType::Float32);
  expectSame(hardtanh(x, -0.25, 0.5), {-0.25, -0.25, 0, 0.5, NAN}, ScalarType::Float32);
  expectSame(elu(x), {std::expm1(-2.0), std::expm1(-0.5), 0, 1.5, NAN}, ScalarType::Float32);
  expectSame(elu(x, 2, 3, 0.5), {6 * std::expm1(-1.0), 6 * std::expm1(-0.25), 0, 4.5, NAN}, ScalarType::Float32);
  expectSame(softplus(x),
             {std::log1p(std::exp(-2.0)), std::log1p(std::exp(-0.5)), std::log(2.0), std::log1p(std::exp(1.5)), NAN},
             ScalarType::Float32);
  // Above the threshold softplus is the identity.
  expectSame(softplus(t({30, 3}, ScalarType::Float64), 2, 8), {30, 0.5 * std::log1p(std::exp(6.0))},
             ScalarType::Float64);
  // hardtanh keeps an integral dtype (its bounds do not promote); a bound
  // the dtype cannot hold is refused.
  expectSame(hardtanh(t({-5, 0, 5}, ScalarType::Int32), -2, 3), {-2, 0, 3}, ScalarType::Int32);
  expectSame(hardtanh(t({-5, 0, 5}, ScalarType::Int64), -2.5, 3.5), {-2, 0, 3}, ScalarType::Int64);
  EXPECT_THAT(errorOf([] { hardtanh(t({1}, ScalarType::UInt8)); }), HasSubstr("out of the range of self's dtype"));
  EXPECT_THAT(errorOf([] { hardtanh(t({1}, ScalarType::Bool)); }), HasSubstr("every dtype but bool"));
  for (auto f : std::vector<std::function<Tensor()>>{[] { return leaky_relu(t({1}, ScalarType::Int32)); },
                                                     [] { return elu(t({1}, ScalarType::Int32)); },
                                                     [] { return softplus(t({1}, ScalarType::Int64)); }}) {
    EXPECT_THAT(errorOf([&] { f(); }), HasSubstr("float16, bfloat16, float32, float64"));
  }
}

TEST(BitwiseAndLogical, BitwiseOnIntegersAndBoolsLogicalOnAnything) {
  Tensor a = t({12, -1, 5}, ScalarType::Int8), b = t({10, 3, -6}, ScalarType::Int8);
  expectSame(bitwise_and(a, b), {8, 3, 0}, ScalarType::Int8);
  expectSame(bitwise_or(a, b), {14, -1, -1}, ScalarType::Int8);
  expectSame(bitwise_xor(a, b), {6, -4, -1}, ScalarType::Int8);
  expectSame(bitwise_not(a), {-13, 0, -6}, ScalarType::Int8);
  expectSame(bitwise_and(a, Scalar(int64_t{4})), {4, 4, 4}, ScalarType::Int8);
  expectSame(bitwise_not(t({1, 0}, ScalarType::Bool)), {0, 1}, ScalarType::Bool);
  expectSame(bitwise_xor(t({1, 0}, ScalarType::Bool), t({1, 1}, ScalarType::Bool)), {0, 1}, ScalarType::Bool);
  // bool with an int64 0-d tensor promotes to int64.
  expectSame(bitwise_or(t({1, 0}, ScalarType::Bool), fromDoubles({6}, {}, ScalarType::Int64)), {7, 6},
             ScalarType::Int64);
  EXPECT_THAT(errorOf([] { bitwise_and(t({1}, ScalarType::Float32), t({1}, ScalarType::Float32)); }),
              HasSubstr("logical_and()"));
  EXPECT_THAT(errorOf([] { bitwise_and(t({1}, ScalarType::Int32), Scalar(1.5)); }), HasSubstr("float32"));

  Tensor x = t({0, NAN, -2, 0}, ScalarType::Float32), y = t({0, 0, 3, 1}, ScalarType::Int64);
  expectSame(logical_and(x, y), {0, 0, 1, 0}, ScalarType::Bool);
  expectSame(logical_or(x, y), {0, 1, 1, 1}, ScalarType::Bool);
  expectSame(logical_xor(x, y), {0, 1, 0, 1}, ScalarType::Bool);
  expectSame(logical_not(x), {1, 0, 0, 1}, ScalarType::Bool);
  // In place: 0/1 in self's dtype.
  Tensor self = t({0, 2.5, -1, 0}, ScalarType::Float32);
  callT("logical_or_", {self, y});
  expectSame(self, {0, 1, 1, 1}, ScalarType::Float32);
}

TEST(FloatingClasses, IsnanIsinfIsfiniteAndNanToNum) {
  Tensor x = t({NAN, INFINITY, -INFINITY, 1.5}, ScalarType::Float32);
  expectSame(isnan(x), {1, 0, 0, 0}, ScalarType::Bool);
  expectSame(isinf(x), {0, 1, 1, 0}, ScalarType::Bool);
  expectSame(isfinite(x), {0, 0, 0, 1}, ScalarType::Bool);
  expectSame(isfinite(t({3, 0}, ScalarType::Int32)), {1, 1}, ScalarType::Bool);
  expectSame(isnan(t({3, 0}, ScalarType::Bool)), {0, 0}, ScalarType::Bool);
  expectSame(nan_to_num(x), {0, FLT_MAX, -FLT_MAX, 1.5}, ScalarType::Float32);
  expectSame(nan_to_num(x, 2.0, 100.0, -100.0), {2, 100, -100, 1.5}, ScalarType::Float32);
  expectSame(nan_to_num(t({NAN, INFINITY, -INFINITY}, ScalarType::Float16)), {0, 65504, -65504}, ScalarType::Float16);
  // A replacement beyond the dtype's range is its infinity, as a cast.
  expectSame(nan_to_num(t({INFINITY}, ScalarType::Float16), std::nullopt, 1e10), {INFINITY}, ScalarType::Float16);
  expectSame(nan_to_num(t({4, -4}, ScalarType::Int32)), {4, -4}, ScalarType::Int32);
  EXPECT_THAT(errorOf([&] {
                callT("nan_to_num.out", {x, IValue(), IValue(), IValue(), emptyTensor({4}, ScalarType::Float64)});
              }),
              HasSubstr("pass an out of dtype float32"));
}

TEST(ScalarOverloads, PromoteAsPythonNumbersAndWrapIntoTheDtype) {
  Tensor i8 = t({100, -100}, ScalarType::Int8);
  expectSame(callT("add.Scalar", {i8, Scalar(int64_t{100}), Scalar(int64_t{1})}), {-56, 0}, ScalarType::Int8);
  expectSame(callT("add.Scalar", {i8, Scalar(0.5), Scalar(int64_t{2})}), {101, -99}, ScalarType::Float32);
  expectSame(callT("sub.Scalar", {i8, Scalar(int64_t{1}), Scalar(int64_t{1})}), {99, -101}, ScalarType::Int8);
  expectSame(callT("mul.Scalar", {t({1.5}, ScalarType::Float16), Scalar(2.0)}), {3}, ScalarType::Float16);
  expectSame(callT("div.Scalar", {t({3}, ScalarType::Int64), Scalar(int64_t{2})}), {1.5}, ScalarType::Float32);
  expectSame(callT("div.Scalar_mode", {t({-3}, ScalarType::Int64), Scalar(int64_t{2}), IValue("floor")}), {-2},
             ScalarType::Int64);
  expectSame(callT("true_divide.Scalar", {t({3}, ScalarType::Int32), Scalar(int64_t{4})}), {0.75}, ScalarType::Float32);
  EXPECT_THAT(errorOf([] {
                callT("sub.Scalar", {t({1}, ScalarType::Bool), Scalar(true), Scalar(int64_t{1})});
              }),
              HasSubstr("subtraction with a bool operand"));
  EXPECT_THAT(errorOf([] {
                callT("sub.Scalar", {t({1}, ScalarType::Int32), Scalar(true), Scalar(int64_t{1})});
              }),
              HasSubstr("subtraction with a bool operand"));
  EXPECT_THAT(errorOf([] {
                callT("add.Scalar", {t({1}, ScalarType::Int32), Scalar(int64_t{1}), Scalar(0.5)});
              }),
              HasSubstr("alpha must be an integer"));
  // In place and out=.
  Tensor self = t({1, 2}, ScalarType::Float32);
  callT("mul_.Scalar", {self, Scalar(int64_t{3})});
  expectSame(self, {3, 6}, ScalarType::Float32);
  Tensor out = emptyTensor({0}, ScalarType::Float64);
  callT("floor_divide.Scalar_out", {t({7, -7}, ScalarType::Int32), Scalar(int64_t{2}), out});
  expectSame(out, {3, -4}, ScalarType::Float64);
  // An integral self cannot hold a floating result in place.
  EXPECT_THAT(errorOf([] {
                callT("add_.Scalar", {t({1}, ScalarType::Int32), Scalar(0.5), Scalar(int64_t{1})});
              }),
              HasSubstr("cannot be cast"));
}

}  // namespace
}  // namespace backplane::ops_test
