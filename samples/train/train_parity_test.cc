// The training sample against libtorch: the classifier of classifier.h
// written again with ATen's ops, from the same initial weights, on the same
// batches, with the same optimizer; its loss at each of 20 steps must equal
// ours to 1e-4 relative. Ours runs on the CPU and on the GPU simulator
// (where the forward, the backward and the optimizer's step run on the
// device), theirs on the CPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backplane/autograd/optim.h"
#include "backplane/runtime/runtime.h"
#include "backplane/testing/plugin_environment.h"
#include "classifier.h"
#include "torch_classifier.h"

namespace train {
namespace {

using namespace backplane;

constexpr int kSteps = 20;
constexpr double kLossTolerance = 1e-4;  // relative, per step

// The losses of kSteps training steps, ours on `dev` and libtorch's, made
// with `ours` / `theirs` optimizers.
template <class Ours, class Theirs>
void compareTraining(Device dev, Ours&& make_ours, Theirs&& make_theirs) {
  const ClassifierConfig config;
  const ClassifierWeights cpu_weights = ClassifierWeights::random(config, 3);
  const ClassifierWeights weights = cpu_weights.to(dev);
  std::vector<Tensor> params = weights.parameters();
  TorchClassifier torch_model = torchCopyOf(cpu_weights);
  for (const Tensor& p : params) p.requires_grad_();
  std::unique_ptr<optim::Optimizer> ours = make_ours(params);
  auto theirs = make_theirs(torch_model.params);
  double first = 0, last = 0, worst = 0;
  for (int step = 0; step < kSteps; ++step) {
    const TrainingBatch cpu_batch = TrainingBatch::random(config, 100 + static_cast<uint64_t>(step));
    const TrainingBatch batch = cpu_batch.to(dev);
    ours->zero_grad();
    Tensor loss = crossEntropy(classifierLogits(weights, batch.tokens), batch.labels);
    loss.backward();
    ours->step();

    theirs->zero_grad();
    at::Tensor torch_loss =
        torchCrossEntropy(torch_model.logits(toTorch(cpu_batch.tokens.token_ids), toTorch(cpu_batch.tokens.lengths)),
                          toTorch(cpu_batch.labels));
    torch_loss.backward();
    theirs->step();

    const double a = loss.item<double>(), b = torch_loss.item<double>();
    ASSERT_LE(std::abs(a - b), kLossTolerance * std::abs(b))
        << "step " << step + 1 << ": our loss " << a << ", libtorch's " << b;
    if (step == 0) first = b;
    last = b;
    worst = std::max(worst, std::abs(a - b) / std::abs(b));
  }
  std::printf("%d steps on %s: loss %.6f -> %.6f; largest relative difference from libtorch %.2e\n", kSteps,
              dev.str().c_str(), first, last, worst);
  // The comparison means something only if training moved the loss.
  EXPECT_LT(last, first * 0.98) << "the loss did not fall: " << first << " -> " << last;
}

const auto* const kEnv =
    &backplane::testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH, BACKPLANE_GPUSIM_PLUGIN_PATH});

Device simulator() { return Runtime().device("gpusim:0"); }

auto adamw(std::vector<Tensor> p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 2e-3}); }
auto torchAdamw(std::vector<at::Tensor> p) {
  return std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(2e-3));
}

TEST(TrainAgainstLibtorch, AdamWLossesMatchOnTheCpu) { compareTraining(Device(DeviceType::CPU), adamw, torchAdamw); }

TEST(TrainAgainstLibtorch, AdamWLossesMatchOnTheGpuSimulator) { compareTraining(simulator(), adamw, torchAdamw); }

TEST(TrainAgainstLibtorch, SgdWithMomentumLossesMatchOnTheCpu) {
  compareTraining(
      Device(DeviceType::CPU),
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
      },
      [](std::vector<at::Tensor> p) {
        return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.05).momentum(0.9));
      });
}

}  // namespace
}  // namespace train
