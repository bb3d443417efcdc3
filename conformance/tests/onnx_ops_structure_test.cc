// The structural ONNX ops' table entries (onnx_ops_<family>.cc), on the
// CPU, on hand-made nodes with hand-computed outputs: the attribute and
// opset semantics a model relies on, and the combinations that no standard
// op expresses, which must be unsupported with a reason (never a result).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "backplane/conformance/onnx_ops.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/plugin_environment.h"

namespace backplane::conformance::onnx {
namespace {

const ::testing::Environment* const kCpuPlugin =
    &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH}).leaveFallbackMode();

const Device kCpu(DeviceType::CPU);

NodeTest node(std::string op, int64_t opset, std::map<std::string, AttributeValue> attrs = {}, size_t n_out = 1) {
  NodeTest n;
  n.name = "hand_made_" + op;
  n.op_type = std::move(op);
  n.opset = opset;
  n.attributes = std::move(attrs);
  for (size_t i = 0; i < n_out; ++i) n.outputs.push_back("y" + std::to_string(i));
  return n;
}

Tensor f32(const std::vector<float>& v, std::vector<int64_t> sizes) { return tensorFromVector(v, sizes, kCpu); }
Tensor i64(const std::vector<int64_t>& v, std::vector<int64_t> sizes) { return tensorFromVector(v, sizes, kCpu); }

// Runs `n` on `inputs` (naming the node's inputs after them), expecting it supported.
std::vector<Tensor> run(NodeTest n, NodeInputs inputs) {
  n.inputs.clear();
  for (size_t i = 0; i < inputs.size(); ++i) n.inputs.push_back(inputs[i] ? "x" + std::to_string(i) : "");
  NodeRun r = runNode(n, inputs, kCpu);
  EXPECT_TRUE(r.supported) << n.op_type << ": " << r.reason;
  return r.outputs;
}

std::string unsupportedReason(NodeTest n, NodeInputs inputs) {
  n.inputs.assign(inputs.size(), "x");
  NodeRun r = runNode(n, inputs, kCpu);
  EXPECT_FALSE(r.supported) << n.op_type << " gave a result";
  EXPECT_TRUE(r.outputs.empty());
  return r.reason;
}

void expectTensor(const Tensor& t, std::vector<int64_t> sizes, std::vector<double> values, double tol = 1e-5) {
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), sizes);
  std::vector<double> got = t.toVector<double>();
  ASSERT_EQ(got.size(), values.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], values[i], tol) << "element " << i;
}

TEST(OnnxStructureOps, ReduceSumAxesInputFromOpset13AttributeBefore) {
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  expectTensor(run(node("ReduceSum", 13, {{"keepdims", int64_t{0}}}), {x, i64({-1}, {1})})[0], {2}, {3, 7});
  expectTensor(run(node("ReduceSum", 11, {{"axes", std::vector<int64_t>{0}}}), {x})[0], {1, 2}, {4, 6});
  // No axes: every dim; with noop_with_empty_axes, the input itself.
  expectTensor(run(node("ReduceSum", 13), {x})[0], {1, 1}, {10});
  expectTensor(run(node("ReduceSum", 13, {{"noop_with_empty_axes", int64_t{1}}}), {x, i64({}, {0})})[0], {2, 2},
               {1, 2, 3, 4});
}

TEST(OnnxStructureOps, ReductionsOfEachKind) {
  Tensor x = f32({1, -2, 3, -4}, {2, 2});
  auto axis1 = [](std::string op) { return node(std::move(op), 18, {{"keepdims", int64_t{0}}}); };
  Tensor axes = i64({1}, {1});
  expectTensor(run(axis1("ReduceMax"), {x, axes})[0], {2}, {1, 3});
  expectTensor(run(axis1("ReduceMin"), {x, axes})[0], {2}, {-2, -4});
  expectTensor(run(axis1("ReduceProd"), {x, axes})[0], {2}, {-2, -12});
  expectTensor(run(axis1("ReduceL1"), {x, axes})[0], {2}, {3, 7});
  expectTensor(run(axis1("ReduceL2"), {x, axes})[0], {2}, {std::sqrt(5.0), 5});
  expectTensor(run(axis1("ReduceSumSquare"), {x, axes})[0], {2}, {5, 25});
  expectTensor(run(axis1("ReduceMean"), {x, axes})[0], {2}, {-0.5, -0.5});
  // Stable for large values: log(e^1000 + e^1000) = 1000 + log 2.
  Tensor big = f32({1000, 1000}, {2});
  expectTensor(run(node("ReduceLogSumExp", 18), {big})[0], {1}, {1000 + std::log(2.0)}, 1e-3);
  // An empty reduction gives the identity.
  Tensor empty = f32({}, {0, 3});
  expectTensor(run(node("ReduceProd", 18, {{"keepdims", int64_t{0}}}), {empty, i64({0}, {1})})[0], {3}, {1, 1, 1});
}

TEST(OnnxStructureOps, IntegerMeanIsUnsupported) {
  std::string why = unsupportedReason(node("ReduceMean", 18), {i64({1, 2}, {2})});
  EXPECT_NE(why.find("integer"), std::string::npos) << why;
}

TEST(OnnxStructureOps, ArgMaxSelectLastIndex) {
  Tensor x = f32({1, 3, 3, 2}, {4});
  Tensor first = run(node("ArgMax", 13, {{"keepdims", int64_t{0}}}), {x})[0];
  EXPECT_EQ(first.dtype(), ScalarType::Int64);
  expectTensor(first, {}, {1});
  expectTensor(run(node("ArgMax", 13, {{"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}), {x})[0], {}, {2});
  expectTensor(run(node("ArgMin", 13, {{"select_last_index", int64_t{1}}}), {f32({0, 5, 0}, {3})})[0], {1}, {2});
}

TEST(OnnxStructureOps, GemmTransposesScalesAndAddsC) {
  Tensor a = f32({1, 2, 3, 4}, {2, 2});  // transA: [[1, 3], [2, 4]]
  Tensor b = f32({1, 0, 0, 1}, {2, 2});
  Tensor c = f32({10, 20}, {2});
  auto out = run(node("Gemm", 13, {{"transA", int64_t{1}}, {"alpha", 2.0}, {"beta", 0.5}}), {a, b, c});
  expectTensor(out[0], {2, 2}, {2 + 5, 6 + 10, 4 + 5, 8 + 10});
  expectTensor(run(node("MatMul", 13), {a, b})[0], {2, 2}, {1, 2, 3, 4});
}

TEST(OnnxStructureOps, ConvWithAsymmetricPadsAndOneD) {
  Tensor x = f32(std::vector<float>(9, 1), {1, 1, 3, 3});
  Tensor w = f32(std::vector<float>(4, 1), {1, 1, 2, 2});
  // Pads (top 1, left 1, bottom 0, right 0): zeros above and to the left.
  auto out = run(node("Conv", 11, {{"pads", std::vector<int64_t>{1, 1, 0, 0}}}), {x, w});
  expectTensor(out[0], {1, 1, 3, 3}, {1, 2, 2, 2, 4, 4, 2, 4, 4});
  // SAME_UPPER with stride 2 on length 5: output ceil(5/2) = 3, pads (1, 1) for k=3.
  Tensor x1 = f32({1, 2, 3, 4, 5}, {1, 1, 5});
  Tensor w1 = f32({1, 1, 1}, {1, 1, 3});
  auto out1 =
      run(node("Conv", 11, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", std::vector<int64_t>{2}}}), {x1, w1});
  expectTensor(out1[0], {1, 1, 3}, {3, 9, 9});
}

TEST(OnnxStructureOps, ConvTransposeAsAConvolution) {
  Tensor x = f32({1, 2}, {1, 1, 2});
  Tensor w = f32({1, 1}, {1, 1, 2});
  expectTensor(run(node("ConvTranspose", 11), {x, w})[0], {1, 1, 3}, {1, 3, 2});
  expectTensor(run(node("ConvTranspose", 11, {{"strides", std::vector<int64_t>{2}}}), {x, w})[0], {1, 1, 4},
               {1, 1, 2, 2});
  expectTensor(run(node("ConvTranspose", 11, {{"pads", std::vector<int64_t>{1, 0}}}), {x, w})[0], {1, 1, 2}, {3, 2});
  // An output_shape past the natural size adds a zero at the end.
  expectTensor(run(node("ConvTranspose", 11, {{"output_shape", std::vector<int64_t>{4}}}), {x, w})[0], {1, 1, 4},
               {1, 3, 2, 0});
}

TEST(OnnxStructureOps, PoolingAndItsUnsupportedCases) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  std::map<std::string, AttributeValue> k2{{"kernel_shape", std::vector<int64_t>{2, 2}}};
  expectTensor(run(node("MaxPool", 12, k2), {x})[0], {1, 1, 2, 2}, {5, 6, 8, 9});
  expectTensor(run(node("AveragePool", 12, k2), {x})[0], {1, 1, 2, 2}, {3, 4, 6, 7});
  auto ceil = k2;
  ceil["strides"] = std::vector<int64_t>{2, 2};
  ceil["ceil_mode"] = int64_t{1};
  expectTensor(run(node("MaxPool", 12, ceil), {x})[0], {1, 1, 2, 2}, {5, 6, 8, 9});
  expectTensor(run(node("GlobalAveragePool", 1), {x})[0], {1, 1, 1, 1}, {5});
  expectTensor(run(node("GlobalMaxPool", 1), {x})[0], {1, 1, 1, 1}, {9});
  // Indices: flat positions in the input, row-major or (storage_order 1) column-major.
  Tensor x4 = f32({1, 4, 3, 2}, {1, 1, 2, 2});
  auto with_idx = run(node("MaxPool", 12, k2, 2), {x4});
  ASSERT_EQ(with_idx.size(), 2u);
  expectTensor(with_idx[0], {1, 1, 1, 1}, {4});
  EXPECT_EQ(with_idx[1].dtype(), ScalarType::Int64);
  expectTensor(with_idx[1], {1, 1, 1, 1}, {1});
  auto column = k2;
  column["storage_order"] = int64_t{1};
  expectTensor(run(node("MaxPool", 12, column, 2), {x4})[1], {1, 1, 1, 1}, {2});
  auto one_d =
      run(node("MaxPool", 12, {{"kernel_shape", std::vector<int64_t>{2}}, {"strides", std::vector<int64_t>{2}}}, 2),
          {f32({1, 3, 2, 5}, {1, 1, 4})});
  expectTensor(one_d[0], {1, 1, 2}, {3, 5});
  expectTensor(one_d[1], {1, 1, 2}, {1, 3});
  EXPECT_NE(unsupportedReason(
                node("MaxPool", 12, {{"kernel_shape", std::vector<int64_t>{2}}, {"storage_order", int64_t{1}}}, 2),
                {f32({1, 3, 2, 5}, {1, 1, 4})})
                .find("storage_order"),
            std::string::npos);
  // Dilated: the corners of the 3x3 input.
  auto dil = k2;
  dil["dilations"] = std::vector<int64_t>{2, 2};
  expectTensor(run(node("AveragePool", 19, dil), {x})[0], {1, 1, 1, 1}, {5});
  // Asymmetric pads (top 1, left 1) not counted in the average.
  auto asym = k2;
  asym["pads"] = std::vector<int64_t>{1, 1, 0, 0};
  expectTensor(run(node("AveragePool", 19, asym), {x})[0], {1, 1, 3, 3}, {1, 1.5, 2.5, 2.5, 3, 4, 5.5, 6, 7});
  // ceil_mode where the last window overhangs, with a dilation: the
  // overhang is not counted. 4x4 input 0..15, windows at 0 and 2 (the
  // second takes row/col 2 only).
  dil["ceil_mode"] = int64_t{1};
  dil["strides"] = std::vector<int64_t>{2, 2};
  std::vector<float> v16(16);
  for (int i = 0; i < 16; ++i) v16[i] = static_cast<float>(i);
  expectTensor(run(node("AveragePool", 19, dil), {f32(v16, {1, 1, 4, 4})})[0], {1, 1, 2, 2},
               {(0 + 2 + 8 + 10) / 4.0, (2 + 10) / 2.0, (8 + 10) / 2.0, 10});
  // 3-d, by strided slices: a 2x2x2 input, one 2x2x2 window.
  std::vector<float> v8{1, 2, 3, 4, 5, 6, 7, 8};
  std::map<std::string, AttributeValue> k3{{"kernel_shape", std::vector<int64_t>{2, 2, 2}}};
  expectTensor(run(node("MaxPool", 12, k3), {f32(v8, {1, 1, 2, 2, 2})})[0], {1, 1, 1, 1, 1}, {8});
  expectTensor(run(node("AveragePool", 19, k3), {f32(v8, {1, 1, 2, 2, 2})})[0], {1, 1, 1, 1, 1}, {4.5});
  // LpPool p=2 over [3, -4]: 5.
  expectTensor(run(node("LpPool", 18, {{"kernel_shape", std::vector<int64_t>{2}}}), {f32({3, -4}, {1, 1, 2})})[0],
               {1, 1, 1}, {5});
  // An integer max pool picks exactly.
  Tensor u8 = Tensor(tensorFromVector(std::vector<uint8_t>{1, 200, 3, 255}, {1, 1, 2, 2}, kCpu));
  Tensor m8 = run(node("MaxPool", 12, k2), {u8})[0];
  EXPECT_EQ(m8.dtype(), ScalarType::UInt8);
  expectTensor(m8, {1, 1, 1, 1}, {255});
  EXPECT_NE(
      unsupportedReason(node("MaxPool", 12, {{"kernel_shape", std::vector<int64_t>{1}}}), {f32({1}, {1, 1, 1, 1})})
          .find("kernel_shape"),
      std::string::npos);
}

TEST(OnnxStructureOps, Normalizations) {
  Tensor x = f32({1, 3, 2, 6}, {1, 2, 2});  // two channels of two
  Tensor ones = f32({1, 1}, {2}), zeros2 = f32({0, 0}, {2});
  // Inference batch norm with mean 2, var 1 per channel; eps 0.
  auto bn = run(node("BatchNormalization", 15, {{"epsilon", 0.0}}), {x, ones, zeros2, f32({2, 4}, {2}), ones});
  expectTensor(bn[0], {1, 2, 2}, {-1, 1, -2, 2});
  // Training: the batch's statistics (ch0 mean 2 var 1, ch1 mean 4 var 4)
  // normalize; the running ones move halfway to them with momentum 0.5.
  auto tr = run(node("BatchNormalization", 15, {{"training_mode", int64_t{1}}, {"epsilon", 0.0}, {"momentum", 0.5}}, 3),
                {x, ones, zeros2, zeros2, ones});
  ASSERT_EQ(tr.size(), 3u);
  expectTensor(tr[0], {1, 2, 2}, {-1, 1, -1, 1});
  expectTensor(tr[1], {2}, {1, 2});
  expectTensor(tr[2], {2}, {1, 2.5});
  EXPECT_NE(unsupportedReason(node("BatchNormalization", 9, {}, 5), {x, ones, zeros2, zeros2, ones}).find("opset"),
            std::string::npos);
  auto in = run(node("InstanceNormalization", 6, {{"epsilon", 0.0}}), {x, ones, zeros2});
  expectTensor(in[0], {1, 2, 2}, {-1, 1, -1, 1});
  // Layer norm over the last axis, with the Mean and InvStdDev outputs.
  auto ln = run(node("LayerNormalization", 17, {{"epsilon", 0.0}}, 3), {x, ones, f32({0, 1}, {2})});
  expectTensor(ln[0], {1, 2, 2}, {-1, 2, -1, 2});
  expectTensor(ln[1], {1, 2, 1}, {2, 4});
  expectTensor(ln[2], {1, 2, 1}, {1, 0.5});
}

TEST(OnnxStructureOps, SoftmaxBeforeOpset13FlattensAtTheAxis) {
  Tensor x = f32({0, 0, 0, 0}, {2, 2});
  // Opset 11, axis 0: one softmax over all four; opset 13: over dim 0 only.
  expectTensor(run(node("Softmax", 11, {{"axis", int64_t{0}}}), {x})[0], {2, 2}, {0.25, 0.25, 0.25, 0.25});
  expectTensor(run(node("Softmax", 13, {{"axis", int64_t{0}}}), {x})[0], {2, 2}, {0.5, 0.5, 0.5, 0.5});
  expectTensor(run(node("LogSoftmax", 13), {f32({0, 0}, {2})})[0], {2}, {-std::log(2.0), -std::log(2.0)});
  expectTensor(run(node("Hardmax", 13), {f32({1, 3, 3}, {3})})[0], {3}, {0, 1, 0});
}

TEST(OnnxStructureOps, GatherScatterWithNegativeIndices) {
  Tensor data = f32({10, 20, 30, 40, 50, 60}, {2, 3});
  expectTensor(run(node("Gather", 13, {{"axis", int64_t{1}}}), {data, i64({-1, 0}, {1, 2})})[0], {2, 1, 2},
               {30, 10, 60, 40});
  expectTensor(run(node("GatherElements", 13, {{"axis", int64_t{1}}}), {data, i64({-1, 1}, {2, 1})})[0], {2, 1},
               {30, 50});
  Tensor d = f32({1, 2, 3}, {3});
  expectTensor(run(node("ScatterElements", 13), {d, i64({-1, 0}, {2}), f32({5, 6}, {2})})[0], {3}, {6, 2, 5});
  expectTensor(
      run(node("ScatterElements", 16, {{"reduction", std::string("add")}}), {d, i64({0, 0}, {2}), f32({5, 6}, {2})})[0],
      {3}, {12, 2, 3});
  // Duplicate targets apply in order: the last wins, or each combines.
  auto reduced = [&](const char* reduction, std::vector<int64_t> idx, std::vector<float> upd) {
    return run(node("ScatterElements", 18, {{"reduction", std::string(reduction)}}),
               {d, i64(idx, {2}), f32(upd, {2})})[0];
  };
  expectTensor(reduced("none", {0, 0}, {5, 6}), {3}, {6, 2, 3});
  expectTensor(reduced("mul", {0, 0}, {2, 3}), {3}, {6, 2, 3});
  expectTensor(reduced("max", {1, 1}, {0, 9}), {3}, {1, 9, 3});
  expectTensor(reduced("min", {2, -1}, {5, 0}), {3}, {1, 2, 0});
  EXPECT_NE(unsupportedReason(node("ScatterElements", 18, {{"reduction", std::string("mean")}}),
                              {d, i64({0}, {1}), f32({5}, {1})})
                .find("mean"),
            std::string::npos);
}

TEST(OnnxStructureOps, SliceClampsAndStepsBackwards) {
  std::vector<float> v(10);
  for (int i = 0; i < 10; ++i) v[i] = static_cast<float>(i);
  Tensor x = f32(v, {10});
  const int64_t lowest = std::numeric_limits<int64_t>::min();
  expectTensor(run(node("Slice", 13), {x, i64({-1}, {1}), i64({lowest}, {1}), i64({0}, {1}), i64({-3}, {1})})[0], {4},
               {9, 6, 3, 0});
  expectTensor(run(node("Slice", 13), {x, i64({7}, {1}), i64({1000}, {1})})[0], {3}, {7, 8, 9});
  expectTensor(run(node("Slice", 13), {x, i64({5}, {1}), i64({2}, {1})})[0], {0}, {});
  // Steps past the dim's length pick the start alone.
  const int64_t highest = std::numeric_limits<int64_t>::max();
  expectTensor(run(node("Slice", 13), {x, i64({2}, {1}), i64({100}, {1}), i64({0}, {1}), i64({highest}, {1})})[0], {1},
               {2});
  expectTensor(run(node("Slice", 13), {x, i64({-1}, {1}), i64({lowest}, {1}), i64({0}, {1}), i64({lowest}, {1})})[0],
               {1}, {9});
  // Opset 1: starts/ends as attributes.
  expectTensor(run(node("Slice", 1, {{"starts", std::vector<int64_t>{1}}, {"ends", std::vector<int64_t>{3}}}), {x})[0],
               {2}, {1, 2});
}

TEST(OnnxStructureOps, ShapeOps) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  // 0 copies the input's dim unless allowzero.
  expectTensor(run(node("Reshape", 14), {x, i64({0, -1}, {2})})[0], {2, 3}, {1, 2, 3, 4, 5, 6});
  expectTensor(run(node("Reshape", 14, {{"allowzero", int64_t{1}}}), {f32({}, {0, 3}), i64({3, 0}, {2})})[0], {3, 0},
               {});
  expectTensor(run(node("Flatten", 13, {{"axis", int64_t{0}}}), {x})[0], {1, 6}, {1, 2, 3, 4, 5, 6});
  expectTensor(run(node("Transpose", 13), {x})[0], {3, 2}, {1, 4, 2, 5, 3, 6});
  expectTensor(run(node("Unsqueeze", 13), {x, i64({-1, 0}, {2})})[0], {1, 2, 3, 1}, {1, 2, 3, 4, 5, 6});
  expectTensor(run(node("Squeeze", 11, {{"axes", std::vector<int64_t>{0}}}), {f32({1, 2}, {1, 2})})[0], {2}, {1, 2});
  expectTensor(run(node("Expand", 13), {f32({1, 2}, {2, 1}), i64({2, 1, 3}, {3})})[0], {2, 2, 3},
               {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  expectTensor(run(node("Tile", 13), {f32({1, 2}, {1, 2}), i64({2, 2}, {2})})[0], {2, 4}, {1, 2, 1, 2, 1, 2, 1, 2});
  expectTensor(run(node("Shape", 15, {{"start", int64_t{-1}}}), {x})[0], {1}, {3});
  expectTensor(run(node("Size", 13), {x})[0], {}, {6});
  Tensor v = i64({7}, {1});
  Tensor c = run(node("ConstantOfShape", 9, {{"value", v}}), {i64({2, 2}, {2})})[0];
  EXPECT_EQ(c.dtype(), ScalarType::Int64);
  expectTensor(c, {2, 2}, {7, 7, 7, 7});
  auto parts = run(node("Split", 18, {{"num_outputs", int64_t{2}}}, 2), {f32({1, 2, 3, 4, 5}, {5})});
  ASSERT_EQ(parts.size(), 2u);
  expectTensor(parts[0], {3}, {1, 2, 3});
  expectTensor(parts[1], {2}, {4, 5});
  auto sized = run(node("Split", 13, {}, 2), {f32({1, 2, 3, 4, 5}, {5}), i64({1, 4}, {2})});
  expectTensor(sized[1], {4}, {2, 3, 4, 5});
  expectTensor(run(node("Concat", 13, {{"axis", int64_t{-1}}}), {f32({1}, {1, 1}), f32({2, 3}, {1, 2})})[0], {1, 3},
               {1, 2, 3});
}

TEST(OnnxStructureOps, PadModes) {
  Tensor x = f32({1, 2, 3}, {1, 3});
  Tensor pads = i64({0, 2, 0, 0}, {4});  // two before the last dim
  expectTensor(run(node("Pad", 13, {{"mode", std::string("reflect")}}), {x, pads})[0], {1, 5}, {3, 2, 1, 2, 3});
  expectTensor(run(node("Pad", 13, {{"mode", std::string("edge")}}), {x, pads})[0], {1, 5}, {1, 1, 1, 2, 3});
  expectTensor(run(node("Pad", 13), {x, pads, f32({7}, {})})[0], {1, 5}, {7, 7, 1, 2, 3});
  // Opset 2: pads and value as attributes; a negative pad crops.
  expectTensor(run(node("Pad", 2, {{"pads", std::vector<int64_t>{0, -1, 0, 0}}}), {x})[0], {1, 2}, {2, 3});
  // Wrap: the last element before, the first two after.
  expectTensor(run(node("Pad", 19, {{"mode", std::string("wrap")}}), {x, i64({0, 1, 0, 2}, {4})})[0], {1, 6},
               {3, 1, 2, 3, 1, 2});
  EXPECT_NE(
      unsupportedReason(node("Pad", 19, {{"mode", std::string("wrap")}}), {x, i64({0, 4, 0, 0}, {4})}).find("wrap"),
      std::string::npos);
}

TEST(OnnxStructureOps, ScansSortsAndFactories) {
  Tensor x = f32({1, 2, 3}, {3});
  expectTensor(run(node("CumSum", 14), {x, i64({0}, {})})[0], {3}, {1, 3, 6});
  expectTensor(run(node("CumSum", 14, {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}), {x, i64({0}, {})})[0], {3},
               {5, 3, 0});
  auto top = run(node("TopK", 11, {{"largest", int64_t{0}}}, 2), {f32({3, 1, 2}, {3}), i64({2}, {1})});
  expectTensor(top[0], {2}, {1, 2});
  expectTensor(top[1], {2}, {1, 2});
  Tensor r = run(node("Range", 11), {i64({10}, {}), i64({4}, {}), i64({-3}, {})})[0];
  EXPECT_EQ(r.dtype(), ScalarType::Int64);
  expectTensor(r, {2}, {10, 7});
  Tensor eye =
      run(node("EyeLike", 9, {{"k", int64_t{1}}, {"dtype", int64_t{7}}}), {f32(std::vector<float>(6), {2, 3})})[0];
  EXPECT_EQ(eye.dtype(), ScalarType::Int64);
  expectTensor(eye, {2, 3}, {0, 1, 0, 0, 0, 1});
  Tensor m = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  expectTensor(run(node("Trilu", 14, {{"upper", int64_t{0}}}), {m, i64({-1}, {})})[0], {3, 3},
               {0, 0, 0, 4, 0, 0, 7, 8, 0});
  EXPECT_NE(unsupportedReason(node("Einsum", 12, {{"equation", std::string("ii->i")}}), {m}).find("Einsum"),
            std::string::npos);
}

TEST(OnnxStructureOps, MoreNormalizations) {
  // RMS of [3, 4] is sqrt(12.5).
  const double rms = std::sqrt(12.5);
  expectTensor(run(node("RMSNormalization", 23, {{"epsilon", 0.0}}), {f32({3, 4}, {2}), f32({1, 2}, {2})})[0], {2},
               {3 / rms, 8 / rms});
  expectTensor(run(node("LpNormalization", 1, {{"p", int64_t{1}}}), {f32({1, -3, 0, 0}, {2, 2})})[0], {2, 2},
               {0.25, -0.75, 0, 0});
  // One group over [1, 3]: mean 2, variance 1; per-channel scale (opset 21).
  expectTensor(run(node("GroupNormalization", 21, {{"num_groups", int64_t{1}}, {"epsilon", 0.0}}),
                   {f32({1, 3}, {1, 2, 1}), f32({1, 2}, {2}), f32({0, 0}, {2})})[0],
               {1, 2, 1}, {-1, 2});
}

TEST(OnnxStructureOps, MoreDataMovement) {
  Tensor x = f32({1, 2, 3, 4, 5}, {5});
  expectTensor(run(node("CenterCropPad", 18), {x, i64({3}, {1})})[0], {3}, {2, 3, 4});
  expectTensor(run(node("CenterCropPad", 18), {x, i64({7}, {1})})[0], {7}, {0, 1, 2, 3, 4, 5, 0});
  Tensor depth = f32({0, 1, 2, 3}, {1, 4, 1, 1});
  expectTensor(run(node("DepthToSpace", 13, {{"blocksize", int64_t{2}}}), {depth})[0], {1, 1, 2, 2}, {0, 1, 2, 3});
  expectTensor(run(node("SpaceToDepth", 13, {{"blocksize", int64_t{2}}}), {f32({0, 1, 2, 3}, {1, 1, 2, 2})})[0],
               {1, 4, 1, 1}, {0, 1, 2, 3});
  expectTensor(run(node("OneHot", 11), {i64({1, -1}, {2}), i64({3}, {}), f32({0, 5}, {2})})[0], {2, 3},
               {0, 5, 0, 0, 0, 5});
  Tensor data = f32({1, 2, 3, 4}, {2, 2});
  expectTensor(run(node("GatherND", 13), {data, i64({1, 0, 0, -1}, {2, 2})})[0], {2}, {3, 2});
  expectTensor(run(node("ScatterND", 13), {f32({1, 2, 3, 4}, {4}), i64({3, 1}, {2, 1}), f32({9, 8}, {2})})[0], {4},
               {1, 8, 3, 9});
  expectTensor(run(node("ScatterND", 18, {{"reduction", std::string("max")}}),
                   {f32({1, 2, 3, 4}, {4}), i64({0, 0}, {2, 1}), f32({5, 0}, {2})})[0],
               {4}, {5, 2, 3, 4});
  EXPECT_NE(unsupportedReason(node("ScatterND", 18, {{"reduction", std::string("mean")}}),
                              {f32({1}, {1}), i64({0}, {1, 1}), f32({2}, {1})})
                .find("mean"),
            std::string::npos);
  Tensor cond = Tensor(tensorFromVector(std::vector<uint8_t>{0, 1, 1}, {3}, kCpu)).to(ScalarType::Bool);
  expectTensor(run(node("Compress", 11), {f32({1, 2, 3}, {3}), cond})[0], {2}, {2, 3});
  // Time along dim 0, batch along dim 1: the first batch reversed over 3 steps, the second over 1.
  expectTensor(run(node("ReverseSequence", 10), {f32({1, 2, 3, 4, 5, 6}, {3, 2}), i64({3, 1}, {2})})[0], {3, 2},
               {5, 2, 3, 4, 1, 6});
}

TEST(OnnxStructureOps, LrnMvnCumProdMaxUnpool) {
  // Channels [1, 2], size 2: the squares of c..c+1, so 5 and 4.
  auto lrn =
      run(node("LRN", 13, {{"size", int64_t{2}}, {"alpha", 1.0}, {"beta", 1.0}, {"bias", 1.0}}), {f32({1, 2}, {1, 2})});
  expectTensor(lrn[0], {1, 2}, {1 / 3.5, 2 / 3.0});
  expectTensor(run(node("MeanVarianceNormalization", 13), {f32({1, 3}, {2, 1, 1, 1})})[0], {2, 1, 1, 1}, {-1, 1});
  Tensor x = f32({1, 2, 3}, {3});
  expectTensor(run(node("CumProd", 26), {x, i64({0}, {})})[0], {3}, {1, 2, 6});
  expectTensor(run(node("CumProd", 26, {{"exclusive", int64_t{1}}, {"reverse", int64_t{1}}}), {x, i64({0}, {})})[0],
               {3}, {6, 3, 1});
  std::map<std::string, AttributeValue> k2{{"kernel_shape", std::vector<int64_t>{2, 2}},
                                           {"strides", std::vector<int64_t>{2, 2}}};
  expectTensor(run(node("MaxUnpool", 11, k2), {f32({5}, {1, 1, 1, 1}), i64({3}, {1, 1, 1, 1})})[0], {1, 1, 2, 2},
               {0, 0, 0, 5});
  EXPECT_NE(unsupportedReason(node("MaxUnpool", 11, k2),
                              {f32({5}, {1, 1, 1, 1}), i64({3}, {1, 1, 1, 1}), i64({1, 1, 3, 3}, {4})})
                .find("output_shape"),
            std::string::npos);
}

TEST(OnnxStructureOps, ResizeNearestAndLinear) {
  Tensor scale2 = f32({2}, {1});
  // half_pixel, round_prefer_floor: sources -0.25, 0.25, 0.75, 1.25.
  expectTensor(run(node("Resize", 13), {f32({1, 2}, {2}), std::nullopt, scale2})[0], {4}, {1, 1, 2, 2});
  expectTensor(run(node("Resize", 13, {{"mode", std::string("linear")}}), {f32({0, 4}, {2}), std::nullopt, scale2})[0],
               {4}, {0, 1, 3, 4});
  expectTensor(
      run(node("Resize", 13,
               {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}}),
          {f32({0, 2}, {2}), std::nullopt, std::nullopt, i64({3}, {1})})[0],
      {3}, {0, 1, 2});
  // tf_crop_and_resize: roi [0.5, 1.5] samples 0.5 and 1.5, the second outside.
  expectTensor(run(node("Resize", 13,
                        {{"mode", std::string("linear")},
                         {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                         {"extrapolation_value", 10.0}}),
                   {f32({0, 4}, {2}), f32({0.5, 1.5}, {2}), std::nullopt, i64({2}, {1})})[0],
               {2}, {2, 10});
  // Cubic: a constant stays constant; on a ramp, a source on a sample is
  // that sample and one halfway between two is their mean (symmetric taps).
  expectTensor(run(node("Resize", 13, {{"mode", std::string("cubic")}}), {f32({3, 3}, {2}), std::nullopt, scale2})[0],
               {4}, {3, 3, 3, 3});
  std::vector<double> ramp =
      run(node("Resize", 13,
               {{"mode", std::string("cubic")}, {"coordinate_transformation_mode", std::string("asymmetric")}}),
          {f32({0, 1, 2, 3}, {4}), std::nullopt, scale2})[0]
          .toVector<double>();
  ASSERT_EQ(ramp.size(), 8u);
  EXPECT_NEAR(ramp[2], 1.0, 1e-6);
  EXPECT_NEAR(ramp[3], 1.5, 1e-6);
  EXPECT_NE(unsupportedReason(node("Resize", 13, {{"mode", std::string("bicubic")}}),
                              {f32({0, 4}, {2}), std::nullopt, scale2})
                .find("bicubic"),
            std::string::npos);
  EXPECT_NE(unsupportedReason(node("Resize", 18, {{"antialias", int64_t{1}}}), {f32({0, 4}, {2}), std::nullopt, scale2})
                .find("antialias"),
            std::string::npos);
}

TEST(OnnxStructureOps, WindowsAndCol2Im) {
  expectTensor(run(node("HannWindow", 17), {i64({4}, {})})[0], {4}, {0, 0.5, 1, 0.5});
  expectTensor(run(node("HannWindow", 17, {{"periodic", int64_t{0}}}), {i64({3}, {})})[0], {3}, {0, 1, 0});
  Tensor hamming = run(node("HammingWindow", 17, {{"output_datatype", int64_t{11}}}), {i64({2}, {})})[0];
  EXPECT_EQ(hamming.dtype(), ScalarType::Float64);
  expectTensor(hamming, {2}, {25.0 / 46 - 21.0 / 46, 25.0 / 46 + 21.0 / 46});
  expectTensor(run(node("BlackmanWindow", 17), {i64({2}, {})})[0], {2}, {0, 0.42 + 0.5 + 0.08});
  // Two blocks of 2 over an image of 3: the middle pixel gets both.
  expectTensor(run(node("Col2Im", 18), {f32({1, 2, 3, 4}, {1, 2, 2}), i64({3}, {1}), i64({2}, {1})})[0], {1, 1, 3},
               {1, 5, 4});
}

TEST(OnnxStructureOps, AffineGridOfTheIdentity) {
  Tensor identity = f32({1, 0, 0, 0, 1, 0}, {1, 2, 3});
  Tensor size = i64({1, 1, 1, 2}, {4});
  expectTensor(run(node("AffineGrid", 20, {{"align_corners", int64_t{1}}}), {identity, size})[0], {1, 1, 2, 2},
               {-1, 0, 1, 0});
  expectTensor(run(node("AffineGrid", 20), {identity, size})[0], {1, 1, 2, 2}, {-0.5, 0, 0.5, 0});
}

TEST(OnnxStructureOps, GridSampleModesAndPadding) {
  Tensor x = f32({10, 20}, {1, 1, 1, 2});  // H 1, W 2
  // (x, y) points: the middle, the left edge, and past the right edge (pixel 1.5).
  Tensor grid = f32({0, 0, -1, 0, 2, 0}, {1, 1, 3, 2});
  auto sample = [&](const char* mode, const char* padding) {
    return run(
        node("GridSample", 20,
             {{"mode", std::string(mode)}, {"padding_mode", std::string(padding)}, {"align_corners", int64_t{1}}}),
        {x, grid})[0];
  };
  expectTensor(sample("linear", "zeros"), {1, 1, 1, 3}, {15, 10, 10});
  expectTensor(sample("linear", "border"), {1, 1, 1, 3}, {15, 10, 20});
  expectTensor(sample("linear", "reflection"), {1, 1, 1, 3}, {15, 10, 15});
  // Nearest rounds half to even: pixel 0.5 is pixel 0.
  expectTensor(sample("nearest", "border"), {1, 1, 1, 3}, {10, 10, 20});
}

TEST(OnnxStructureOps, NllAndSoftmaxCrossEntropyLosses) {
  Tensor log_prob = f32({-1, -2, -3, -4}, {2, 2});
  Tensor target = i64({1, 0}, {2});
  expectTensor(run(node("NegativeLogLikelihoodLoss", 13), {log_prob, target})[0], {}, {2.5});
  // Weighted: (2 * 3 + 3 * 1) / (3 + 1).
  expectTensor(run(node("NegativeLogLikelihoodLoss", 13), {log_prob, target, f32({1, 3}, {2})})[0], {}, {2.25});
  expectTensor(run(node("NegativeLogLikelihoodLoss", 13, {{"ignore_index", int64_t{1}}}), {log_prob, target})[0], {},
               {3});
  expectTensor(run(node("NegativeLogLikelihoodLoss", 13, {{"reduction", std::string("none")}}), {log_prob, target})[0],
               {2}, {2, 3});
  auto sce = run(node("SoftmaxCrossEntropyLoss", 13, {}, 2), {f32({0, 0}, {1, 2}), i64({0}, {1})});
  ASSERT_EQ(sce.size(), 2u);
  expectTensor(sce[0], {}, {std::log(2.0)});
  expectTensor(sce[1], {1, 2}, {-std::log(2.0), -std::log(2.0)});
}

TEST(OnnxStructureOps, AttentionMasksAndOutputs) {
  // Q.K = 0 everywhere: uniform weights over the keys not masked out.
  Tensor q = f32({1, 1}, {1, 1, 2, 1}), k = f32({0, 0}, {1, 1, 2, 1}), v = f32({2, 4}, {1, 1, 2, 1});
  expectTensor(run(node("Attention", 23), {q, k, v})[0], {1, 1, 2, 1}, {3, 3});
  expectTensor(run(node("Attention", 23, {{"is_causal", int64_t{1}}}), {q, k, v})[0], {1, 1, 2, 1}, {2, 3});
  Tensor lower = Tensor(tensorFromVector(std::vector<uint8_t>{1, 0, 1, 1}, {2, 2}, kCpu)).to(ScalarType::Bool);
  // softcap caps the products; the boolean mask still masks.
  auto capped = run(node("Attention", 23, {{"softcap", 1.0}}, 4), {q, k, v, lower});
  ASSERT_EQ(capped.size(), 4u);
  expectTensor(capped[0], {1, 1, 2, 1}, {2, 3});
  expectTensor(capped[3], {1, 1, 2, 2}, {0, 0, 0, 0});
  // 3-d inputs with heads: one head of size 1, and a past key/value prepended.
  auto with_past = run(node("Attention", 23, {{"q_num_heads", int64_t{1}}, {"kv_num_heads", int64_t{1}}}, 3),
                       {f32({1}, {1, 1, 1}), f32({0}, {1, 1, 1}), f32({6}, {1, 1, 1}), std::nullopt,
                        f32({0}, {1, 1, 1, 1}), f32({2}, {1, 1, 1, 1})});
  expectTensor(with_past[0], {1, 1, 1}, {4});
  expectTensor(with_past[1], {1, 1, 2, 1}, {0, 0});
  expectTensor(with_past[2], {1, 1, 2, 1}, {2, 6});
}

TEST(OnnxStructureOps, RotaryEmbeddingRotatesPairs) {
  // cos 0, sin 1: a quarter turn, (1, 0) -> (0, 1); the unrotated tail stays.
  Tensor x = f32({1, 0, 7}, {1, 1, 1, 3});
  Tensor cos = f32({0}, {1, 1}), sin = f32({1}, {1, 1});
  expectTensor(
      run(node("RotaryEmbedding", 23, {{"rotary_embedding_dim", int64_t{2}}}), {x, cos, sin, i64({0}, {1, 1})})[0],
      {1, 1, 1, 3}, {0, 1, 7});
}

TEST(OnnxStructureOps, TensorScatterWritesEachBatchAtItsIndex) {
  Tensor cache = f32(std::vector<float>(6, 0), {2, 3, 1});
  Tensor update = f32({5, 6}, {2, 1, 1});
  expectTensor(run(node("TensorScatter", 24), {cache, update, i64({2, 0}, {2})})[0], {2, 3, 1}, {0, 0, 5, 6, 0, 0});
  // Circular: position 3 of 3 wraps to 0.
  expectTensor(
      run(node("TensorScatter", 24, {{"mode", std::string("circular")}}), {cache, update, i64({3, 1}, {2})})[0],
      {2, 3, 1}, {5, 0, 0, 0, 6, 0});
}

// Note [ONNX loading limits]: a tensor whose size comes from the inputs'
// values is refused past the node's cap, before it is allocated.
std::string capError(NodeTest n, NodeInputs inputs) {
  n.inputs.assign(inputs.size(), "x");
  try {
    NodeRun r = runNode(n, inputs, kCpu);
    return "no error; supported = " + std::to_string(r.supported) + " " + r.reason;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kResourceExhausted) << e.what();
    return e.message();
  }
}

TEST(OnnxStructureOps, CreationsPastTheAllocationCapAreRefused) {
  // A 200-byte test's ConstantOfShape asking for 8 GiB, against the default 1 GiB cap.
  EXPECT_EQ(capError(node("ConstantOfShape", 9), {i64({int64_t{1} << 31, 4}, {2})}),
            "ConstantOfShape: the output of shape [2147483648, 4] and dtype float32 would take 34359738368 bytes, "
            "past the cap of 1073741824 bytes on a tensor a node creates from its inputs' values; refused before "
            "allocating it (raise the cap with BACKPLANE_ONNX_MAX_ALLOC_BYTES=<bytes> if the test is meant to be "
            "this large)");
  EXPECT_NE(capError(node("ConstantOfShape", 9), {i64({int64_t{1} << 40, int64_t{1} << 40}, {2})})
                .find("would take more than 2^63 bytes"),
            std::string::npos);
  // With a small cap: 1000 float32 elements are 4000 bytes.
  auto capped = [](std::string op, int64_t opset, std::map<std::string, AttributeValue> attrs = {}) {
    NodeTest n = node(std::move(op), opset, std::move(attrs));
    n.max_alloc_bytes = 3999;
    return n;
  };
  auto refused = [](const std::string& message, const std::string& op) {
    EXPECT_EQ(message.rfind(op + ": ", 0), 0u) << message;
    EXPECT_NE(message.find("past the cap of 3999 bytes"), std::string::npos) << message;
  };
  refused(capError(capped("ConstantOfShape", 9), {i64({10, 100}, {2})}), "ConstantOfShape");
  refused(capError(capped("Expand", 13), {f32({1}, {1}), i64({1000}, {1})}), "Expand");
  refused(capError(capped("Tile", 13), {f32({1, 2}, {2}), i64({500}, {1})}), "Tile");
  refused(capError(capped("Range", 11), {f32({0}, {}), f32({1000}, {}), f32({1}, {})}), "Range");
  refused(capError(capped("Pad", 13), {f32({1}, {1}), i64({0, 999}, {2})}), "Pad");
  refused(capError(capped("Resize", 13), {f32({1, 2}, {2}), std::nullopt, f32({500}, {1})}), "Resize");
  refused(capError(capped("Resize", 13), {f32({1, 2}, {2}), std::nullopt, std::nullopt, i64({1000}, {1})}), "Resize");
  refused(capError(capped("CenterCropPad", 18), {f32({1}, {1}), i64({1000}, {1})}), "CenterCropPad");
  refused(capError(capped("HannWindow", 17), {i64({500}, {})}), "HannWindow");
  refused(capError(capped("OneHot", 11), {i64({0}, {1}), f32({1000}, {}), f32({0, 1}, {2})}), "OneHot");
  // Under the cap, the same ops run.
  NodeTest ok = capped("ConstantOfShape", 9);
  ok.max_alloc_bytes = 4000;
  expectTensor(run(ok, {i64({10, 100}, {2})})[0], {10, 100}, std::vector<double>(1000, 0.0));
}

TEST(OnnxStructureOps, EveryStructuralOpHasAnEntry) {
  const std::vector<std::string> mapped = mappedOpTypes();
  for (const char* op : {"ReduceSum",
                         "ReduceMean",
                         "ArgMax",
                         "MatMul",
                         "Gemm",
                         "Conv",
                         "MaxPool",
                         "AveragePool",
                         "BatchNormalization",
                         "LayerNormalization",
                         "Softmax",
                         "Gather",
                         "ScatterElements",
                         "Concat",
                         "Split",
                         "Transpose",
                         "Reshape",
                         "Slice",
                         "Pad",
                         "Range",
                         "TopK",
                         "CumSum",
                         "Trilu"}) {
    EXPECT_NE(std::find(mapped.begin(), mapped.end(), op), mapped.end()) << op;
  }
}

}  // namespace
}  // namespace backplane::conformance::onnx
