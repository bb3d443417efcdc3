// The backbone through the sparse-convolution plugin against its plain
// double-precision reference on a tiny grid, on the CPU, on a device whose
// every op falls back to the CPU, and on the GPU simulator, where it runs
// the GPU plugins' kernels; and the rulebook cache's contract.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "backbone.h"
#include "backplane/autograd/autograd.h"
#include "backplane/autograd/optim.h"
#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "reference.h"
#include "test_device.h"

namespace sparse_lidar {
namespace {

using namespace backplane;

// A tiny grid deep enough for the backbone's four z reductions (41 -> 21 ->
// 11 -> 5 -> 2) and sites on a sloped surface, one or two cells thick, as
// LiDAR returns are: every kernel offset finds neighbours somewhere.
constexpr Shape3 kTinyShape = {41, 24, 20};
constexpr int64_t kBatch = 2;

VoxelScan tinyScan() {
  VoxelScan scan;
  scan.batch_size = kBatch;
  scan.spatial_shape = kTinyShape;
  scan.points.assign(kBatch, 0);
  uint32_t state = 12345;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
  for (int32_t b = 0; b < kBatch; ++b) {
    for (int32_t z = 0; z < kTinyShape[0]; ++z) {
      for (int32_t y = 0; y < kTinyShape[1]; ++y) {
        for (int32_t x = 0; x < kTinyShape[2]; ++x) {
          const int32_t surface = 14 + (x + y + 3 * b) / 3;
          if ((z != surface && z != surface + 1) || next() % 3 == 0) continue;
          scan.indices.insert(scan.indices.end(), {b, z, y, x});
          for (int f = 0; f < 4; ++f) scan.features.push_back(static_cast<float>(next() % 2001) / 1000.0f - 1.0f);
          ++scan.points[static_cast<size_t>(b)];
        }
      }
    }
  }
  return scan;
}

constexpr uint64_t kSeed = 11;

class BackboneTest : public ::testing::Test {
 protected:
  // The GPU simulator first, then the CPU and sparse-convolution plugins from
  // the build tree's plugin directory: the simulator plugin registers its
  // spconv kernels before the spconv plugin defines the ops, as the CUDA and
  // HIP plugins do when they load from the same directory.
  static void SetUpTestSuite() {
    static const Runtime runtime([] {
      RuntimeOptions o;
      o.plugin_paths = {BACKPLANE_GPUSIM_PLUGIN_PATH};
      return o;
    }());
  }
  void SetUp() override {
    input_ = SparseTensor::fromScan(tinyScan(), Device(DeviceType::CPU));
    weights_ = BackboneWeights::random(voxelBackBone8x(4), kSeed);
  }

  // Every layer's output on `input`.
  std::vector<SparseTensor> layerOutputs(const BackboneWeights& weights, const SparseTensor& input) {
    std::vector<SparseTensor> outputs;
    runBackbone(weights, input, [&](size_t, const Rulebook&, const SparseTensor& out) { outputs.push_back(out); });
    return outputs;
  }

  // Runs the backbone on `dev`, checks that every layer stays there and
  // matches the CPU run within `max_rel` and that no call failed; returns
  // the profile of the device run.
  OpReport runOnDeviceAndCompare(Device dev, double max_rel) {
    const std::vector<SparseTensor> on_cpu = layerOutputs(weights_, input_);
    Profiler profiler;
    const std::vector<SparseTensor> on_dev = layerOutputs(weights_.to(dev), input_.to(dev));
    profiler.stop();
    EXPECT_EQ(on_dev.size(), on_cpu.size());
    for (size_t i = 0; i < on_dev.size() && i < on_cpu.size(); ++i) {
      EXPECT_EQ(on_dev[i].features.device(), dev);
      const LayerDifference d = compareLayer(HostSparse::from(on_dev[i]), HostSparse::from(on_cpu[i]));
      EXPECT_LE(d.max_rel, max_rel) << weights_.layers[i].name;
    }
    OpReport report = profiler.report();
    for (const OpStats& row : report.ops) EXPECT_EQ(row.failed_calls, 0u) << row.op;
    return report;
  }

  SparseTensor input_;
  BackboneWeights weights_;
};

TEST_F(BackboneTest, CpuMatchesThePlainReferenceAtEveryLayer) {
  const std::vector<SparseTensor> outputs = layerOutputs(weights_, input_);
  ASSERT_EQ(outputs.size(), weights_.layers.size());
  // The reference runs the whole chain itself, from the input.
  HostSparse expected = HostSparse::from(input_);
  for (size_t i = 0; i < outputs.size(); ++i) {
    expected = referenceLayer(weights_.layers[i], weights_.weights[i], expected);
    const LayerDifference d = compareLayer(HostSparse::from(outputs[i]), expected);
    EXPECT_LE(d.max_rel, 1e-5) << weights_.layers[i].name << " row " << d.row << " channel " << d.channel;
    EXPECT_GT(outputs[i].numVoxels(), 0) << weights_.layers[i].name;
    EXPECT_EQ(outputs[i].spatial_shape, expected.spatial_shape) << weights_.layers[i].name;
  }
  EXPECT_EQ(outputs.back().spatial_shape, (Shape3{2, 3, 3}));
  EXPECT_EQ(outputs.back().features.size(1), 128);
}

TEST_F(BackboneTest, ComparisonCatchesOneWrongWeight) {
  const SparseTensor out = runBackbone(weights_, input_);
  BackboneWeights wrong = weights_;
  std::vector<float> filters = wrong.weights[3].filters.toVector<float>();
  filters[13 * 32 * 32 + 5] += 0.1f;  // the centre offset of conv2.1
  wrong.weights[3].filters = tensorFromVector(filters, weights_.weights[3].filters.sizes());
  const LayerDifference d = compareLayer(HostSparse::from(runBackbone(wrong, input_)), HostSparse::from(out));
  EXPECT_GT(d.max_rel, 100 * kFeatureTolerance);
}

TEST_F(BackboneTest, LayersSharingAnIndiceKeyBuildOneRulebook) {
  Profiler profiler;
  runBackbone(weights_, input_);
  profiler.stop();
  const OpReport report = profiler.report();
  const OpStats* pairs = report.find("spconv::get_indice_pairs", DispatchKey::CPU);
  const OpStats* conv = report.find("spconv::indice_conv", DispatchKey::CPU);
  ASSERT_NE(pairs, nullptr) << report.table();
  ASSERT_NE(conv, nullptr) << report.table();
  // 12 layers, 8 keys: subm1, spconv2, subm2, spconv3, subm3, spconv4, subm4, spconv_down2.
  EXPECT_EQ(pairs->calls, 8u);
  EXPECT_EQ(conv->calls, 12u);
}

TEST_F(BackboneTest, TestDeviceFallsBackToTheCpuAndMatchesIt) {
  // The test device has no kernels: every op runs through the CPU fallback,
  // on memory the host can only reach through the device's copy functions.
  const Device dev = backplane::testing::TestDevice::install("testdev").device(0);
  const OpReport report = runOnDeviceAndCompare(dev, 1e-6);
  const OpStats* conv = report.find("spconv::indice_conv", backendKey(dev.type));
  ASSERT_NE(conv, nullptr) << report.table();
  EXPECT_EQ(conv->fallbackCalls(), 12u);
}

// One training step of the backbone through the sparse-convolution
// plugin's declared derivatives (indice_conv's gradient is its
// indice_conv_backward, Note [Declared derivatives]): in float64, the
// gradients of the filters at the first, a middle and the last layer and of
// the last layer's scale and shift against central finite differences (eps 1e-6, atol 1e-5, rtol
// 1e-3); then an SGD step that lowers the loss, on the CPU and on the GPU
// simulator (whose gradients match the CPU's).
BackboneWeights inFloat64(const BackboneWeights& w) {
  BackboneWeights out = w;
  for (LayerWeights& l : out.weights) {
    l.filters = l.filters.to(ScalarType::Float64);
    l.scale = l.scale.to(ScalarType::Float64);
    l.shift = l.shift.to(ScalarType::Float64);
  }
  return out;
}

// 0.5 * sum(features^2) of the backbone's output, a scalar.
Tensor backboneLoss(const BackboneWeights& w, const SparseTensor& input) {
  const Tensor f = runBackbone(w, input).features;
  return (f * f).sum() * 0.5;
}

TEST_F(BackboneTest, OneTrainingStepThroughTheSpconvDerivatives) {
  BackboneWeights w = inFloat64(weights_);
  SparseTensor input = input_;
  input.features = input.features.to(ScalarType::Float64);
  std::vector<Tensor> params;
  for (LayerWeights& l : w.weights)
    for (Tensor* t : {&l.filters, &l.scale, &l.shift}) params.push_back(t->requires_grad_());
  Tensor loss = backboneLoss(w, input);
  loss.backward();
  const size_t last = w.weights.size() - 1;
  // The filters (the spconv derivative) at three layers; the scale and
  // shift (standard ops) at the last one. Each check runs the backbone twice.
  for (size_t layer : {size_t{0}, last / 2, last}) {
    LayerWeights& l = w.weights[layer];
    std::vector<Tensor*> checked = {&l.filters};
    if (layer == last) checked.insert(checked.end(), {&l.scale, &l.shift});
    for (Tensor* t : checked) {
      const Tensor grad = t->grad();
      ASSERT_TRUE(grad.defined()) << w.layers[layer].name;
      const std::vector<double> analytic = grad.contiguous().toVector<double>();
      // Two elements of each: the first and the last.
      for (int64_t e : {int64_t{0}, t->numel() - 1}) {
        auto lossWith = [&](double delta) {
          autograd::NoGradGuard no_grad;
          const Tensor flat = t->detach().view({-1});
          const double before = flat.select(0, e).item<double>();
          flat.select(0, e).fill_(before + delta);
          const double v = backboneLoss(w, input).item<double>();
          flat.select(0, e).fill_(before);
          return v;
        };
        const double eps = 1e-6;
        const double numeric = (lossWith(eps) - lossWith(-eps)) / (2 * eps);
        EXPECT_NEAR(analytic[static_cast<size_t>(e)], numeric, 1e-5 + 1e-3 * std::abs(numeric))
            << w.layers[layer].name << " element " << e << " of a parameter shaped " << t->str();
      }
    }
  }
  // The simulator's gradients are the CPU's.
  {
    const Device dev = Runtime().device("gpusim:0");
    BackboneWeights on_dev = w.to(dev);
    std::vector<Tensor> dev_params;
    for (LayerWeights& l : on_dev.weights)
      for (Tensor* t : {&l.filters, &l.scale, &l.shift}) dev_params.push_back(t->detach().requires_grad_());
    size_t k = 0;
    for (LayerWeights& l : on_dev.weights)
      for (Tensor* t : {&l.filters, &l.scale, &l.shift}) *t = dev_params[k++];
    Profiler profiler;
    backboneLoss(on_dev, input.to(dev)).backward();
    profiler.stop();
    // The GPU plugins' own backward kernels ran: nothing fell back to the CPU.
    const OpReport report = profiler.report();
    const OpStats* conv_backward = report.find("spconv::indice_conv_backward", backendKey(dev.type));
    ASSERT_NE(conv_backward, nullptr) << report.table();
    EXPECT_EQ(conv_backward->fallbackCalls(), 0u) << report.table();
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(dev_params[i].grad().defined()) << "parameter " << i;
      EXPECT_EQ(dev_params[i].grad().device(), dev);
      const std::vector<double> a = dev_params[i].grad().cpu().contiguous().toVector<double>();
      const std::vector<double> b = params[i].grad().contiguous().toVector<double>();
      for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(a[j], b[j], 1e-9 * (1 + std::abs(b[j]))) << "parameter " << i;
    }
  }
  // One step of SGD lowers the loss.
  const double before = loss.item<double>();
  optim::SGD opt(params, {.lr = 1e-4});
  opt.step();
  const double after = backboneLoss(w, input).item<double>();
  EXPECT_LT(after, before);
}

TEST_F(BackboneTest, GpuSimulatorRunsEveryLayerNativelyAndMatchesTheCpu) {
  const Device dev = Runtime().device("gpusim:0");
  // The convolutions' atomics may add in another order than the CPU.
  const std::vector<SparseTensor> on_cpu = layerOutputs(weights_, input_);
  const BackboneWeights weights = weights_.to(dev);
  const SparseTensor input = input_.to(dev);
  const auto activity = [](const char* name) {
    static const auto stat =
        Dispatcher::singleton().findOpOrThrow("gpusim::activity_stat").typed<int64_t(std::string_view)>();
    return stat.call(name);
  };
  const int64_t launches = activity("kernel_launches"), reads = activity("host_reads");
  Profiler profiler;
  const std::vector<SparseTensor> on_dev = layerOutputs(weights, input);
  profiler.stop();
  const int64_t forward_launches = activity("kernel_launches") - launches;
  const int64_t forward_reads = activity("host_reads") - reads;
  ASSERT_EQ(on_dev.size(), on_cpu.size());
  for (size_t i = 0; i < on_dev.size(); ++i) {
    EXPECT_EQ(on_dev[i].features.device(), dev);
    EXPECT_EQ(on_dev[i].indices.device(), dev);
    const LayerDifference d = compareLayer(HostSparse::from(on_dev[i]), HostSparse::from(on_cpu[i]));
    EXPECT_LE(d.max_rel, 1e-5) << weights_.layers[i].name;
  }
  const OpReport report = profiler.report();
  // Rulebooks and convolutions run on the device, natively: nothing falls
  // back and no byte crosses between host and device inside the forward pass.
  for (const char* op : {"spconv::get_indice_pairs", "spconv::indice_conv"}) {
    const OpStats* row = report.find(op, backendKey(dev.type));
    ASSERT_NE(row, nullptr) << op << "\n" << report.table();
    EXPECT_EQ(row->fallbackCalls(), 0u) << op << "\n" << report.table();
    EXPECT_EQ(row->native_calls, row->calls) << op << "\n" << report.table();
  }
  uint64_t transfer_bytes = 0, fallback_calls = 0;
  for (const OpStats& row : report.ops) {
    transfer_bytes += row.transfer_bytes;
    fallback_calls += row.fallbackCalls();
    EXPECT_EQ(row.failed_calls, 0u) << row.op;
  }
  EXPECT_EQ(transfer_bytes, 0u) << report.table();
  EXPECT_EQ(fallback_calls, 0u) << report.table();
  EXPECT_NE(report.summary().find("host<->device: 0 B in 0 copies"), std::string::npos) << report.summary();
  // What a GPU would wait for: one read back per rulebook (its output
  // count, which sizes the output), nothing per convolution and nothing in
  // a standard op (Note [Deferred device errors]); and the launches of one
  // forward pass,
  // so that a kernel split in two shows here (110 when this was written).
  EXPECT_EQ(forward_reads, 8) << "8 rulebooks";
  EXPECT_LE(forward_launches, 110) << "kernel launches per forward pass";
  std::printf("forward pass on the simulator: %lld kernel launches, %lld host reads\n",
              static_cast<long long>(forward_launches), static_cast<long long>(forward_reads));
}

TEST_F(BackboneTest, ACachedRulebookMustMatchTheLayerThatReusesIt) {
  RulebookCache cache;
  const ConvGeometry subm3{.padding = {1, 1, 1}};
  rulebookFor(input_, subm3, /*subm=*/true, cache, "subm1");
  EXPECT_EQ(&rulebookFor(input_, subm3, true, cache, "subm1"), cache.find("subm1"));
  EXPECT_EQ(cache.size(), 1u);
  try {
    rulebookFor(input_, {.stride = {2, 2, 2}}, false, cache, "subm1");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("indice_key 'subm1' holds the rulebook of another convolution"),
              std::string::npos)
        << e.what();
  }
  const SparseTensor fewer{input_.features.narrow(0, 0, 10), input_.indices.narrow(0, 0, 10), kTinyShape, kBatch};
  try {
    rulebookFor(fewer, subm3, true, cache, "subm1");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("but the input has 10"), std::string::npos) << e.what();
  }
}

TEST(VoxelBackBone8xTest, RunsAtSecondsGridsOnKittisGrid) {
  // Pure arithmetic: no plugin needed.
  Shape3 shape = {41, 1600, 1408};
  std::vector<Shape3> after_down;
  for (const SparseConvLayer& l : voxelBackBone8x(4)) {
    if (l.subm) continue;
    shape = l.geometry.outputShape(shape);
    after_down.push_back(shape);
  }
  EXPECT_EQ(after_down, (std::vector<Shape3>{{21, 800, 704}, {11, 400, 352}, {5, 200, 176}, {2, 200, 176}}));
}

}  // namespace
}  // namespace sparse_lidar
