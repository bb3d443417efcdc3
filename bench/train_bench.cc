// One training step of samples/train's classifier (forward, cross entropy,
// backward, AdamW step) on the CPU, float32, against the same step in
// libtorch 1.13 (the same model written with ATen's ops, the same weights,
// batch and optimizer) in the same process:
//   BM_TrainStep_Backplane   zero_grad, forward, loss, backward, step
//   BM_TrainStep_Libtorch    the same in libtorch
//   BM_Torch_Add_Tiny            at::add of two 1-element float32 tensors
//   BM_Torch_Add_Tiny_RequiresGrad   the same on two leaves that require grad
// scripts/bench_ratios.py reports Backplane / libtorch (target <= 1.0x), and
// libtorch's own cost of recording a tiny add's node beside Backplane's
// (BM_Add_Tiny_EndToEnd_RequiresGrad in dispatch_bench).
// Built when libtorch is found (cmake/BackplaneLibtorch.cmake).
#include <benchmark/benchmark.h>
#include <torch/optim/adamw.h>

#include <memory>
#include <vector>

#include "backplane/autograd/optim.h"
#include "bench_util.h"
#include "classifier.h"
#include "torch_classifier.h"

namespace {

using namespace backplane;

struct Setup {
  train::ClassifierConfig config;
  train::ClassifierWeights weights = train::ClassifierWeights::random(config, 5);
  train::TrainingBatch batch = train::TrainingBatch::random(config, 6);
};

void BM_TrainStep_Backplane(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  Setup s;
  std::vector<Tensor> params = s.weights.parameters();
  for (const Tensor& p : params) p.requires_grad_();
  optim::AdamW opt(params, {.lr = 1e-3});
  for (auto _ : state) {
    opt.zero_grad();
    Tensor loss = train::crossEntropy(train::classifierLogits(s.weights, s.batch.tokens), s.batch.labels);
    loss.backward();
    opt.step();
    benchmark::DoNotOptimize(loss);
  }
}
BENCHMARK(BM_TrainStep_Backplane)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_TrainStep_Libtorch(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;  // the batch and weights are drawn with the CPU plugin
  Setup s;
  train::TorchClassifier model = train::torchCopyOf(s.weights);
  torch::optim::AdamW opt(model.params, torch::optim::AdamWOptions(1e-3));
  const at::Tensor ids = train::toTorch(s.batch.tokens.token_ids), lengths = train::toTorch(s.batch.tokens.lengths);
  const at::Tensor labels = train::toTorch(s.batch.labels);
  for (auto _ : state) {
    opt.zero_grad();
    at::Tensor loss = train::torchCrossEntropy(model.logits(ids, lengths), labels);
    loss.backward();
    opt.step();
    benchmark::DoNotOptimize(loss);
  }
}
BENCHMARK(BM_TrainStep_Libtorch)->Unit(benchmark::kMicrosecond)->UseRealTime();

void runTorchAddTiny(benchmark::State& state, bool requires_grad) {
  at::Tensor a = at::full({1}, 1.5f).set_requires_grad(requires_grad);
  at::Tensor b = at::full({1}, 2.5f).set_requires_grad(requires_grad);
  for (auto _ : state) {
    at::Tensor r = at::add(a, b);
    benchmark::DoNotOptimize(r);
  }
}
void BM_Torch_Add_Tiny(benchmark::State& state) { runTorchAddTiny(state, false); }
void BM_Torch_Add_Tiny_RequiresGrad(benchmark::State& state) { runTorchAddTiny(state, true); }
BENCHMARK(BM_Torch_Add_Tiny);
BENCHMARK(BM_Torch_Add_Tiny_RequiresGrad);

}  // namespace

BENCHMARK_MAIN();
