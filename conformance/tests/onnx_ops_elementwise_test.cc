// The elementwise entries of the ONNX -> standard-op table (Note [ONNX
// elementwise semantics] in onnx_ops_elementwise.cc), on the CPU plugin:
// nodes built by hand, outputs checked against values worked out from ONNX's
// definitions, and the nodes no standard op expresses reported unsupported
// with their reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backplane/conformance/onnx_ops.h"
#include "backplane/core/error.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/plugin_environment.h"

namespace backplane::conformance::onnx {
namespace {

const ::testing::Environment* const kCpuPlugin =
    &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH}).leaveFallbackMode();

const Device kCpu(DeviceType::CPU);

NodeTest node(const std::string& op_type, int64_t opset, std::map<std::string, AttributeValue> attributes = {},
              size_t num_outputs = 1) {
  NodeTest n;
  n.name = "test_" + op_type;
  n.op_type = op_type;
  n.opset = opset;
  n.attributes = std::move(attributes);
  for (size_t i = 0; i < num_outputs; ++i) n.outputs.push_back("y" + std::to_string(i));
  return n;
}

template <typename T>
Tensor t(std::vector<T> values, std::vector<int64_t> sizes = {}) {
  if (sizes.empty()) sizes = {static_cast<int64_t>(values.size())};
  return Tensor(tensorFromVector(values, sizes));
}

// A 0-d tensor.
template <typename T>
Tensor scalar(T value) {
  return Tensor(tensorFromVector(std::vector<T>{value}, {}));
}

// Runs `n` on the CPU and returns its one output; fails the test if it is unsupported.
Tensor run1(NodeTest n, NodeInputs inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) n.inputs.push_back(inputs[i] ? "x" + std::to_string(i) : "");
  NodeRun r = runNode(n, inputs, kCpu);
  EXPECT_TRUE(r.supported) << r.reason;
  if (!r.supported || r.outputs.empty()) return Tensor();
  return r.outputs[0];
}

std::string unsupportedReason(NodeTest n, NodeInputs inputs) {
  NodeRun r = runNode(n, inputs, kCpu);
  EXPECT_FALSE(r.supported);
  return r.reason;
}

template <typename T>
void expectValues(const Tensor& got, ScalarType dtype, const std::vector<T>& want) {
  ASSERT_TRUE(got.defined());
  EXPECT_EQ(got.dtype(), dtype);
  EXPECT_EQ(got.contiguous().toVector<T>(), want);
}

void expectNear(const Tensor& got, ScalarType dtype, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_TRUE(got.defined());
  EXPECT_EQ(got.dtype(), dtype);
  std::vector<double> g = got.to(ScalarType::Float64).contiguous().toVector<double>();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(g[i])) << "element " << i;
    else
      EXPECT_NEAR(g[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "element " << i;
  }
}

TEST(OnnxElementwise, IntegerDivTruncatesAndFloatDivIsTrue) {
  expectValues<int32_t>(run1(node("Div", 14), {t<int32_t>({7, -7, 7, -7}), t<int32_t>({2, 2, -2, -2})}),
                        ScalarType::Int32, {3, -3, -3, 3});
  expectNear(run1(node("Div", 14), {t<float>({7, -7}), t<float>({2, 2})}), ScalarType::Float32, {3.5, -3.5});
}

TEST(OnnxElementwise, ModFollowsTheFmodAttribute) {
  const Tensor a = t<int32_t>({-4, 7, 5, 4, -7, 8}), b = t<int32_t>({2, -3, 8, -2, 3, 5});
  // fmod=0: the divisor's sign (Python's %); fmod=1: the dividend's (C's fmod).
  expectValues<int32_t>(run1(node("Mod", 13), {a, b}), ScalarType::Int32, {0, -2, 5, 0, 2, 3});
  expectValues<int32_t>(run1(node("Mod", 13, {{"fmod", int64_t{1}}}), {a, b}), ScalarType::Int32, {0, 1, 5, 0, -1, 3});
  expectNear(run1(node("Mod", 13, {{"fmod", int64_t{1}}}), {t<float>({-4.5f, 7.5f}), t<float>({2, -2})}),
             ScalarType::Float32, {-0.5, 1.5});
  EXPECT_NE(unsupportedReason(node("Mod", 13), {t<float>({1}), t<float>({2})}).find("fmod=1"), std::string::npos);
}

TEST(OnnxElementwise, PowHasTheBasesType) {
  expectValues<int32_t>(run1(node("Pow", 15), {t<int32_t>({1, 2, 3}), t<float>({4, 5, 6})}), ScalarType::Int32,
                        {1, 32, 729});
  expectNear(run1(node("Pow", 15), {t<float>({1, 2, 3}), t<int64_t>({4, 5, 6})}), ScalarType::Float32, {1, 32, 729});
  expectValues<int64_t>(run1(node("Pow", 15), {t<int64_t>({2, 3}), t<int64_t>({10, 3})}), ScalarType::Int64,
                        {1024, 27});
}

TEST(OnnxElementwise, VariadicOpsFoldEveryInputWithBroadcasting) {
  const Tensor a = t<float>({3, 2, 1}), b = t<float>({1, 4, 4}), c = t<float>({2, 5, 3});
  expectNear(run1(node("Max", 13), {a, b, c}), ScalarType::Float32, {3, 5, 4});
  expectNear(run1(node("Min", 13), {a, b, c}), ScalarType::Float32, {1, 2, 1});
  expectNear(run1(node("Sum", 13), {a, b, c}), ScalarType::Float32, {6, 11, 8});
  expectNear(run1(node("Mean", 13), {a, b, c}), ScalarType::Float32, {2, 11.0 / 3, 8.0 / 3});
  expectNear(run1(node("Max", 13), {a}), ScalarType::Float32, {3, 2, 1});
  const Tensor m = run1(node("Max", 13), {t<float>({1, 5, 3, 0}, {2, 2}), t<float>({2})});
  EXPECT_EQ(std::vector<int64_t>(m.sizes().begin(), m.sizes().end()), (std::vector<int64_t>{2, 2}));
  expectNear(m, ScalarType::Float32, {2, 5, 3, 2});
}

TEST(OnnxElementwise, UnsignedOperandsAreExactOrUnsupported) {
  // uint16/uint32/uint64 arithmetic runs in int64 and wraps as the unsigned type.
  expectValues<uint16_t>(run1(node("Add", 14), {t<uint16_t>({65535, 1}), t<uint16_t>({1, 2})}), ScalarType::UInt16,
                         {0, 3});
  expectValues<uint64_t>(
      run1(node("Add", 14), {t<uint64_t>({std::numeric_limits<uint64_t>::max(), 5}), t<uint64_t>({2, 6})}),
      ScalarType::UInt64, {1, 11});
  expectValues<uint32_t>(run1(node("Div", 14), {t<uint32_t>({4000000000u, 7}), t<uint32_t>({3, 2})}),
                         ScalarType::UInt32, {1333333333u, 3});
  expectValues<uint32_t>(run1(node("Max", 13), {t<uint32_t>({4000000000u, 7}), t<uint32_t>({3, 9})}),
                         ScalarType::UInt32, {4000000000u, 9});
  expectValues<uint16_t>(run1(node("BitwiseNot", 18), {t<uint16_t>({0, 65535, 1})}), ScalarType::UInt16,
                         {65535, 0, 65534});
  // Division needs uint64's value, which int64 does not hold.
  EXPECT_NE(unsupportedReason(node("Div", 14), {t<uint64_t>({4}), t<uint64_t>({2})}).find("uint64"), std::string::npos);
  // Max and Min order uint64 with its comparisons: 2^63 + 1 is the larger.
  const uint64_t big = (uint64_t{1} << 63) + 1;
  expectValues<uint64_t>(run1(node("Max", 13), {t<uint64_t>({big, 1}), t<uint64_t>({2, 3}), t<uint64_t>({5})}),
                         ScalarType::UInt64, {big, 5});
  expectValues<uint64_t>(run1(node("Min", 13), {t<uint64_t>({big, 1}), t<uint64_t>({2, 3})}), ScalarType::UInt64,
                         {2, 1});
}

TEST(OnnxElementwise, ComparisonsAndLogicGiveBool) {
  const Tensor a = t<int32_t>({1, 2, 3}), b = t<int32_t>({2, 2, 2});
  expectValues<bool>(run1(node("Less", 13), {a, b}), ScalarType::Bool, {true, false, false});
  expectValues<bool>(run1(node("GreaterOrEqual", 16), {a, b}), ScalarType::Bool, {false, true, true});
  expectValues<bool>(run1(node("Equal", 19), {t<uint64_t>({1u << 31, 5}), t<uint64_t>({1u << 31, 6})}),
                     ScalarType::Bool, {true, false});
  const Tensor p = t<bool>({true, true, false, false}), q = t<bool>({true, false, true, false});
  expectValues<bool>(run1(node("Xor", 7), {p, q}), ScalarType::Bool, {false, true, true, false});
  expectValues<bool>(run1(node("Not", 1), {p}), ScalarType::Bool, {false, false, true, true});
  expectValues<int64_t>(run1(node("Where", 16), {p, t<int64_t>({1, 2, 3, 4}), t<int64_t>({9, 8, 7, 6})}),
                        ScalarType::Int64, {1, 2, 7, 6});
}

TEST(OnnxElementwise, UnaryMathAndActivations) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  expectNear(run1(node("Round", 11), {t<float>({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.6f})}), ScalarType::Float32,
             {0, 2, 2, 0, -2, 3});
  expectNear(run1(node("Reciprocal", 13), {t<float>({2, -4})}), ScalarType::Float32, {0.5, -0.25});
  expectNear(run1(node("LeakyRelu", 16, {{"alpha", 0.1}}), {t<float>({-2, 3})}), ScalarType::Float32, {-0.2, 3});
  expectNear(run1(node("LeakyRelu", 16), {t<float>({-2})}), ScalarType::Float32, {-0.02});
  // Selu's defaults: gamma * (x > 0 ? x : alpha * (exp(x) - 1)).
  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  expectNear(run1(node("Selu", 6), {t<float>({-1, 2})}), ScalarType::Float32,
             {gamma * alpha * (std::exp(-1.0) - 1), gamma * 2});
  expectNear(run1(node("Celu", 12, {{"alpha", 2.0}}), {t<float>({-1, 1})}), ScalarType::Float32,
             {2 * (std::exp(-0.5) - 1), 1});
  expectNear(run1(node("HardSigmoid", 6, {{"alpha", 0.5}, {"beta", 0.6}}), {t<float>({-2, 0, 1})}), ScalarType::Float32,
             {0, 0.6, 1});
  expectNear(run1(node("HardSwish", 14), {t<float>({-4, 1, 4})}), ScalarType::Float32, {0, 1 * (1.0 / 6 + 0.5), 4});
  expectNear(run1(node("ThresholdedRelu", 10, {{"alpha", 2.0}}), {t<float>({1, 2, 3, static_cast<float>(nan)})}),
             ScalarType::Float32, {0, 0, 3, 0});
  expectNear(run1(node("Shrink", 9, {{"lambd", 1.5}, {"bias", 1.5}}), {t<float>({-2, -1, 0, 1, 2})}),
             ScalarType::Float32, {-0.5, 0, 0, 0, 0.5});
  expectNear(run1(node("Softsign", 1), {t<float>({-3, 1})}), ScalarType::Float32, {-0.75, 0.5});
  expectNear(run1(node("PRelu", 16), {t<float>({-2, 3, -4, 5}, {2, 2}), t<float>({0.5f, 0.25f})}), ScalarType::Float32,
             {-1, 3, -2, 5});
  expectNear(run1(node("Sinh", 9), {t<float>({1})}), ScalarType::Float32, {std::sinh(1.0)});
  expectNear(run1(node("Asinh", 9), {t<float>({-2, 0.5f})}), ScalarType::Float32, {std::asinh(-2.0), std::asinh(0.5)});
  expectNear(run1(node("Atanh", 9), {t<float>({-0.5f, 0.25f})}), ScalarType::Float32,
             {std::atanh(-0.5), std::atanh(0.25)});
  expectNear(run1(node("Tan", 7), {t<double>({0.5, -1})}), ScalarType::Float64, {std::tan(0.5), std::tan(-1.0)}, 1e-12);
  EXPECT_NE(unsupportedReason(node("Gelu", 20, {{"approximate", std::string("erf")}}), {t<float>({1})}).find("erf"),
            std::string::npos);
}

TEST(OnnxElementwise, IsInfHonoursItsDetectAttributes) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = t<float>({-inf, 1, inf, std::numeric_limits<float>::quiet_NaN()});
  expectValues<bool>(run1(node("IsInf", 20), {x}), ScalarType::Bool, {true, false, true, false});
  expectValues<bool>(run1(node("IsInf", 20, {{"detect_negative", int64_t{0}}}), {x}), ScalarType::Bool,
                     {false, false, true, false});
  expectValues<bool>(run1(node("IsInf", 20, {{"detect_positive", int64_t{0}}}), {x}), ScalarType::Bool,
                     {true, false, false, false});
  expectValues<bool>(run1(node("IsNaN", 20), {x}), ScalarType::Bool, {false, false, false, true});
}

TEST(OnnxElementwise, ClipBoundsAreAttributesBeforeOpset11AndInputsFrom11) {
  const Tensor x = t<float>({-3, 0, 3});
  expectNear(run1(node("Clip", 6, {{"min", -1.0}, {"max", 1.0}}), {x}), ScalarType::Float32, {-1, 0, 1});
  expectNear(run1(node("Clip", 13), {x, std::nullopt, scalar<float>(2)}), ScalarType::Float32, {-3, 0, 2});
  expectNear(run1(node("Clip", 13), {x, scalar<float>(-1)}), ScalarType::Float32, {-1, 0, 3});
  expectNear(run1(node("Clip", 13), {x}), ScalarType::Float32, {-3, 0, 3});
  // min > max: every element is max, as numpy.clip gives.
  expectNear(run1(node("Clip", 13), {x, scalar<float>(2), scalar<float>(1)}), ScalarType::Float32, {1, 1, 1});
  expectValues<int8_t>(run1(node("Clip", 13), {t<int8_t>({-100, 5, 100}), scalar<int8_t>(-10), scalar<int8_t>(10)}),
                       ScalarType::Int8, {-10, 5, 10});
}

TEST(OnnxElementwise, CastMapsOnnxTypesAndRefusesTheOnesBackplaneLacks) {
  expectValues<int32_t>(run1(node("Cast", 13, {{"to", int64_t{6}}}), {t<float>({1.7f, -1.7f})}), ScalarType::Int32,
                        {1, -1});
  expectNear(run1(node("Cast", 13, {{"to", int64_t{10}}}), {t<double>({0.5, 2})}), ScalarType::Float16, {0.5, 2});
  expectNear(run1(node("CastLike", 15), {t<int64_t>({3}), t<double>({0})}), ScalarType::Float64, {3});
  // Opset 1-5 name the type.
  expectValues<int64_t>(run1(node("Cast", 1, {{"to", std::string("INT64")}}), {t<float>({2.5f})}), ScalarType::Int64,
                        {2});
  const std::string reason =
      unsupportedReason(node("Cast", 19, {{"to", int64_t{17}}, {"saturate", int64_t{0}}}), {t<float>({1})});
  EXPECT_NE(reason.find("FLOAT8E4M3FN"), std::string::npos) << reason;
}

TEST(OnnxElementwise, DropoutIsTheIdentityAtInferenceAndRandomInTraining) {
  const Tensor x = t<float>({1, 2, 3});
  NodeTest d = node("Dropout", 13, {}, 2);
  d.inputs = {"x", "ratio", "training_mode"};
  NodeRun r = runNode(d, {x, scalar<float>(0.5f), std::nullopt}, kCpu);
  ASSERT_TRUE(r.supported) << r.reason;
  ASSERT_EQ(r.outputs.size(), 2u);
  expectNear(r.outputs[0], ScalarType::Float32, {1, 2, 3});
  expectValues<bool>(r.outputs[1], ScalarType::Bool, {true, true, true});
  // Training with ratio 0 keeps everything; any other ratio draws a random mask.
  r = runNode(d, {x, scalar<float>(0), scalar<bool>(true)}, kCpu);
  ASSERT_TRUE(r.supported) << r.reason;
  expectNear(r.outputs[0], ScalarType::Float32, {1, 2, 3});
  EXPECT_NE(unsupportedReason(d, {x, scalar<float>(0.5f), scalar<bool>(true)}).find("random"), std::string::npos);
  expectNear(run1(node("Dropout", 10, {{"ratio", 0.2}}), {x}), ScalarType::Float32, {1, 2, 3});
}

TEST(OnnxElementwise, BitShiftIsExactForShiftsThatFitInt64) {
  expectValues<uint8_t>(run1(node("BitShift", 11, {{"direction", std::string("LEFT")}}),
                             {t<uint8_t>({1, 255, 3}), t<uint8_t>({1, 1, 7})}),
                        ScalarType::UInt8, {2, 254, 128});
  expectValues<uint16_t>(run1(node("BitShift", 11, {{"direction", std::string("RIGHT")}}),
                              {t<uint16_t>({256, 3, 65535}), t<uint16_t>({4, 1, 15})}),
                         ScalarType::UInt16, {16, 1, 1});
  expectValues<uint64_t>(
      run1(node("BitShift", 11, {{"direction", std::string("LEFT")}}), {t<uint64_t>({6}), t<uint64_t>({62})}),
      ScalarType::UInt64, {uint64_t{1} << 63});  // 6 << 62 wraps modulo 2^64
  // uint64 values of 2^63 and up shift right as unsigned.
  const uint64_t top = uint64_t{1} << 63;
  expectValues<uint64_t>(run1(node("BitShift", 11, {{"direction", std::string("RIGHT")}}),
                              {t<uint64_t>({top + 8, top + 8, 5, top}), t<uint64_t>({3, 0, 1, 62})}),
                         ScalarType::UInt64, {(top >> 3) + 1, top + 8, 2, 2});
  EXPECT_NE(unsupportedReason(node("BitShift", 11, {{"direction", std::string("LEFT")}}),
                              {t<uint64_t>({1}), t<uint64_t>({63})})
                .find("[0, 62]"),
            std::string::npos);
}

TEST(OnnxElementwise, QuantizeRoundsHalfToEvenAndSaturates) {
  // x / 2 = 0.5, 1.5, 2.5, -500, 500; rounded to even, + 128, saturated to uint8.
  expectValues<uint8_t>(
      run1(node("QuantizeLinear", 19), {t<float>({1, 3, 5, -1000, 1000}), scalar<float>(2), scalar<uint8_t>(128)}),
      ScalarType::UInt8, {128, 130, 130, 0, 255});
  // Per axis 0 of a [2, 2] input, no zero point: uint8.
  expectValues<uint8_t>(
      run1(node("QuantizeLinear", 19, {{"axis", int64_t{0}}}), {t<float>({2, 4, 30, 60}, {2, 2}), t<float>({2, 10})}),
      ScalarType::UInt8, {1, 2, 3, 6});
  // Blocks of 2 along axis 1: scales 1 and 10.
  expectNear(run1(node("DequantizeLinear", 21, {{"axis", int64_t{1}}, {"block_size", int64_t{2}}}),
                  {t<uint8_t>({10, 20, 30, 40}, {1, 4}), t<float>({1, 10}, {1, 2})}),
             ScalarType::Float32, {10, 20, 300, 400});
  expectNear(run1(node("DequantizeLinear", 19), {t<int8_t>({-128, 0, 127}), scalar<float>(0.5f), scalar<int8_t>(-1)}),
             ScalarType::Float32, {-63.5, 0.5, 64});
}

TEST(OnnxElementwise, WhatTheTableDoesNotMapIsUnsupportedWithAReason) {
  EXPECT_EQ(unsupportedReason(node("NoSuchOp", 13), {t<float>({1})}), "no mapping for ONNX op_type NoSuchOp");
  NodeTest other_domain = node("Add", 1);
  other_domain.domain = "com.microsoft";
  EXPECT_NE(unsupportedReason(other_domain, {t<float>({1}), t<float>({1})}).find("com.microsoft"), std::string::npos);
  // Opset 1..6 broadcasting along an axis is not numpy's.
  EXPECT_NE(unsupportedReason(node("Add", 6, {{"broadcast", int64_t{1}}, {"axis", int64_t{0}}}),
                              {t<float>({1, 2, 3, 4}, {2, 2}), t<float>({1, 2})})
                .find("axis"),
            std::string::npos);
  const std::vector<std::string> mapped = mappedOpTypes();
  for (const char* op : {"Add", "Cast", "Clip", "Dropout", "Where", "Sigmoid"})
    EXPECT_NE(std::find(mapped.begin(), mapped.end(), op), mapped.end()) << op;
  EXPECT_TRUE(std::is_sorted(mapped.begin(), mapped.end()));
}

TEST(OnnxOpTable, AnOpTypeRegisteredTwiceIsAnErrorNamingIt) {
  ASSERT_NE(findNode("Add"), nullptr);  // the table is filled
  try {
    registerNode("Add", [](const NodeTest&, const NodeInputs&, Device) { return unsupported("never"); });
    FAIL() << "registering Add twice did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Add is registered twice"), std::string::npos) << e.what();
  }
  EXPECT_THROW(registerNode("NotAnOnnxOp", nullptr), Error);
  EXPECT_EQ(findNode("NotAnOnnxOp"), nullptr);
}

}  // namespace
}  // namespace backplane::conformance::onnx
