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

namespace train {
namespace {

using namespace backplane;

constexpr int kSteps = 20;
constexpr double kLossTolerance = 1e-4;  // relative, per step

at::Tensor toTorch(const Tensor& t) {
  const Tensor c = t.cpu().contiguous();
  const at::ScalarType dt = c.dtype() == ScalarType::Int64 ? at::kLong : at::kFloat;
  BP_CHECK(c.dtype() == ScalarType::Int64 || c.dtype() == ScalarType::Float32, "toTorch: ", c.str());
  at::Tensor out = at::empty(std::vector<int64_t>(c.sizes().begin(), c.sizes().end()), dt);
  std::memcpy(out.data_ptr(), c.data_ptr(), static_cast<size_t>(c.numel()) * c.itemsize());
  return out;
}

// The classifier in ATen: parameters in ClassifierWeights::parameters()'s
// order (for each layer the embeddings' four, layer 0 only, then the
// block's sixteen, then the head's two).
struct TorchClassifier {
  ClassifierConfig config;
  std::vector<at::Tensor> params;

  at::Tensor logits(const at::Tensor& ids, const at::Tensor& lengths) const {
    const encoder::EncoderConfig& c = config.encoder;
    const int64_t B = ids.size(0), S = ids.size(1), H = c.hidden, heads = c.heads, d = c.headDim();
    size_t next = 0;
    auto take = [&] { return params.at(next++); };
    auto norm = [&](const at::Tensor& x) {
      at::Tensor w = take(), b = take();
      return at::layer_norm(x, {H}, w, b, c.layer_norm_eps);
    };
    auto dense = [&](const at::Tensor& x) {
      at::Tensor w = take(), b = take();
      return at::linear(x, w, b);
    };
    at::Tensor words = take(), positions = take();
    at::Tensor x = norm(at::embedding(words, ids) + positions.narrow(0, 0, S));
    for (int64_t l = 0; l < config.layers; ++l) {
      auto split = [&](const at::Tensor& t) { return t.view({B, S, heads, d}).transpose(1, 2); };
      at::Tensor q = split(dense(x)), k = split(dense(x)), v = split(dense(x));
      at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(d)));
      at::Tensor padding = at::arange(S).ge(lengths.unsqueeze(1));
      at::Tensor probs = scores.masked_fill(padding.view({B, 1, 1, S}), encoder::kMaskedScore).softmax(-1);
      at::Tensor context = at::matmul(probs, v).transpose(1, 2).reshape({B, S, H});
      at::Tensor attended = dense(context);
      x = norm(attended + x);
      at::Tensor inner = at::gelu(dense(x));
      at::Tensor out = dense(inner);
      x = norm(out + x);
    }
    return dense(x.select(1, 0));
  }
};

at::Tensor torchCrossEntropy(const at::Tensor& logits, const at::Tensor& labels) {
  return -at::log_softmax(logits, 1).gather(1, labels.unsqueeze(1)).mean();
}

// The losses of kSteps training steps, ours on `dev` and libtorch's, made
// with `ours` / `theirs` optimizers.
template <class Ours, class Theirs>
void compareTraining(Device dev, Ours&& make_ours, Theirs&& make_theirs) {
  const ClassifierConfig config;
  const ClassifierWeights cpu_weights = ClassifierWeights::random(config, 3);
  const ClassifierWeights weights = cpu_weights.to(dev);
  std::vector<Tensor> params = weights.parameters();
  TorchClassifier torch_model{config, {}};
  for (const Tensor& p : cpu_weights.parameters()) torch_model.params.push_back(toTorch(p).requires_grad_());
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
