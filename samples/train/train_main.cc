// train: trains the small BERT-style classifier of classifier.h on the
// device picked at run time and prints its loss curve.
//
//   train [--device auto|cpu|cuda:0|...] [--steps N] [--optimizer adamw|sgd] [--lr X] [--seed N]
//
// Each step draws a new batch (seed + step), computes the cross entropy,
// backpropagates it on the device and takes one optimizer step (AdamW, or
// SGD with momentum 0.9). Exit codes: 0 every loss was finite, 1 a loss was
// not or an error occurred (a --device that does not exist is one), 2 a
// usage error. train_parity_test.cc checks the same loop against libtorch.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backplane/autograd/optim.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "classifier.h"
#include "sample_app.h"

namespace train {
namespace {

using namespace backplane;

constexpr const char* kUsage =
    "usage: train [--device auto|cpu|cuda:0|...] [--steps N] [--optimizer adamw|sgd] "
    "[--lr X] [--seed N]";

struct Flags {
  std::string device = "auto";
  int64_t steps = 20;
  std::string optimizer = "adamw";
  double lr = 1e-3;
  uint64_t seed = 0;
};

std::optional<Flags> parseFlags(int argc, char** argv, std::string& error) {
  Flags flags;
  std::string lr;
  if (!sample::parseFlags(argc, argv,
                          {{"--device", &flags.device},
                           {"--steps", &flags.steps},
                           {"--optimizer", &flags.optimizer},
                           {"--lr", &lr},
                           {"--seed", &flags.seed}},
                          error))
    return std::nullopt;
  if (flags.steps < 1) {
    error = strCat("--steps must be at least 1, got ", flags.steps);
    return std::nullopt;
  }
  if (flags.optimizer != "adamw" && flags.optimizer != "sgd") {
    error = strCat("--optimizer must be adamw or sgd, got '", flags.optimizer, "'");
    return std::nullopt;
  }
  if (!lr.empty()) {
    char* end = nullptr;
    flags.lr = std::strtod(lr.c_str(), &end);
    if (end != lr.c_str() + lr.size() || !(flags.lr > 0) || !std::isfinite(flags.lr)) {
      error = strCat("--lr needs a positive number, got '", lr, "'");
      return std::nullopt;
    }
  }
  return flags;
}

int run(const Flags& flags) {
  const ClassifierConfig config;
  Runtime rt;
  const Device dev = rt.device(flags.device);
  ClassifierWeights weights = ClassifierWeights::random(config, flags.seed).to(dev);
  std::vector<Tensor> params = weights.parameters();
  for (const Tensor& p : params) p.requires_grad_();
  std::unique_ptr<optim::Optimizer> opt;
  if (flags.optimizer == "adamw")
    opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = flags.lr});
  else
    opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = flags.lr, .momentum = 0.9});

  std::printf("train: %s; %s lr %g; %lld steps, seed %llu\n", config.str().c_str(),
              flags.optimizer == "adamw" ? "AdamW" : "SGD (momentum 0.9)", flags.lr,
              static_cast<long long>(flags.steps), static_cast<unsigned long long>(flags.seed));
  std::printf("device: %s\n", sample::deviceLine(rt, flags.device, dev).c_str());
  Profiler profiler;
  double first = 0, last = 0;
  bool finite = true;
  for (int64_t step = 0; step < flags.steps; ++step) {
    const TrainingBatch batch = TrainingBatch::random(config, flags.seed + static_cast<uint64_t>(step)).to(dev);
    opt->zero_grad();
    Tensor loss = crossEntropy(classifierLogits(weights, batch.tokens), batch.labels);
    loss.backward();
    opt->step();
    last = loss.item<double>();
    if (step == 0) first = last;
    finite = finite && std::isfinite(last);
    std::printf("step %3lld  loss %.6f\n", static_cast<long long>(step + 1), last);
  }
  std::printf("loss: %.6f -> %.6f over %lld steps\n", first, last, static_cast<long long>(flags.steps));
  std::printf("fallback: %s\n", sample::fallbackLine(profiler.report()).c_str());
  if (!finite) {
    std::fprintf(stderr, "train: error: a loss was not finite\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace train

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::printf("%s\n\n%s\n", train::kUsage,
                  "Trains a small BERT-style classifier (embeddings, two encoder layers, a linear head) on the\n"
                  "chosen device for --steps batches and prints the loss after each step.\n"
                  "  --device SPEC     auto (default), cpu, cuda, cuda:1, or a vendor's device type\n"
                  "  --steps N         optimizer steps (20)\n"
                  "  --optimizer NAME  adamw (default) or sgd (momentum 0.9)\n"
                  "  --lr X            learning rate (0.001)\n"
                  "  --seed N          seed of the weights; batch k is drawn from seed + k (0)");
      return 0;
    }
  }
  std::string error;
  const std::optional<train::Flags> flags = train::parseFlags(argc, argv, error);
  if (!flags) {
    std::fprintf(stderr, "train: %s\n%s\n", error.c_str(), train::kUsage);
    return 2;
  }
  try {
    return train::run(*flags);
  } catch (const backplane::Error& e) {
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return 1;
  }
}
