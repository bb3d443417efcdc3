// train: trains the small BERT-style classifier of classifier.h on the
// device picked at run time and prints its loss curve.
//
//   train [--device auto|cpu|cuda:0|...] [--steps N] [--optimizer adamw|sgd] [--lr X] [--seed N]
//         [--bucket-mb X] [--trace FILE]
//
// Under a launcher with two or more ranks (mpirun -np 2 train ...) it trains
// data parallel (Note [Gradient buckets]): each rank takes its rows of every
// batch, the gradients are averaged in buckets of --bucket-mb MiB during
// backward, and the loss printed is the mean over the ranks, which is the
// loss of the whole batch: the same curve as one process. --trace FILE
// writes the run's timeline (Note [Timelines]) in the Chrome trace event
// format, every rank's threads in one file (rank 0 writes it).
//
// Each step draws a new batch (seed + step), computes the cross entropy,
// backpropagates it on the device and takes one optimizer step (AdamW, or
// SGD with momentum 0.9). Exit codes: 0 every loss was finite, 1 a loss was
// not or an error occurred (a --device that does not exist is one), 2 a
// usage error. train_parity_test.cc checks the same loop against libtorch.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "backplane/autograd/autograd.h"
#include "backplane/autograd/optim.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/ops/ops.h"
#include "backplane/runtime/collectives.h"
#include "backplane/runtime/distributed_data_parallel.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "classifier.h"
#include "sample_app.h"

namespace train {
namespace {

using namespace backplane;

constexpr const char* kUsage =
    "usage: train [--device auto|cpu|cuda:0|...] [--steps N] [--optimizer adamw|sgd] "
    "[--lr X] [--seed N] [--bucket-mb X] [--trace FILE]";

struct Flags {
  std::string device = "auto";
  int64_t steps = 20;
  std::string optimizer = "adamw";
  double lr = 1e-3;
  uint64_t seed = 0;
  double bucket_mb = 25;  // --bucket-mb: DistributedDataParallel's bucket_cap_mb
  std::string trace;      // --trace FILE; empty: none
};

std::optional<Flags> parseFlags(int argc, char** argv, std::string& error) {
  Flags flags;
  if (!sample::parseFlags(argc, argv,
                          {{"--device", &flags.device},
                           {"--steps", &flags.steps},
                           {"--optimizer", &flags.optimizer},
                           {"--lr", sample::PositiveNumber{&flags.lr}},
                           {"--seed", &flags.seed},
                           {"--bucket-mb", sample::PositiveNumber{&flags.bucket_mb}},
                           {"--trace", &flags.trace}},
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
  return flags;
}

// Every rank's trace events in one Chrome trace, written by rank 0: the
// fragments' lengths, then the fragments padded to the longest, gathered
// through the CPU engine.
void writeTrace(const std::string& path, const OpReport& report, const comm::Group& world) {
  const std::string mine = report.chromeTraceEvents(world.rank(), strCat("rank ", world.rank()));
  std::string merged = mine;
  if (world.size() > 1) {
    const Tensor lengths = comm::allGather(full({1}, static_cast<int64_t>(mine.size())));
    const std::vector<int64_t> n = lengths.toVector<int64_t>();
    const int64_t longest = *std::max_element(n.begin(), n.end());
    Tensor padded = zeros({longest}, {.dtype = ScalarType::UInt8});
    std::memcpy(padded.data_ptr(), mine.data(), mine.size());
    const Tensor all = comm::allGather(padded);
    const auto* bytes = static_cast<const char*>(all.data_ptr());
    merged.clear();
    for (int r = 0; r < world.size(); ++r)
      merged += (r ? "," : "") + std::string(bytes + r * longest, static_cast<size_t>(n[static_cast<size_t>(r)]));
  }
  if (world.rank() != 0) return;
  std::FILE* f = std::fopen(path.c_str(), "w");
  BP_CHECK(f != nullptr, "--trace: cannot write '", path, "': ", std::strerror(errno));
  std::fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[%s]}\n", merged.c_str());
  const bool ok = std::ferror(f) == 0;
  BP_CHECK(std::fclose(f) == 0 && ok, "--trace: writing '", path, "' failed");
}

int run(const Flags& flags) {
  const ClassifierConfig config;
  Runtime rt;
  const Device dev = rt.device(flags.device);
  const comm::Group world = comm::world();
  const int ranks = world.size(), rank = world.rank();
  BP_CHECK(config.encoder.batch % ranks == 0, "the batch of ", config.encoder.batch, " rows does not split over ",
           ranks, " ranks");
  const int64_t rows = config.encoder.batch / ranks;
  ClassifierWeights weights = ClassifierWeights::random(config, flags.seed).to(dev);
  std::vector<Tensor> params = weights.parameters();
  for (const Tensor& p : params) p.requires_grad_();
  std::unique_ptr<parallel::DistributedDataParallel> ddp;
  if (ranks > 1)
    ddp = std::make_unique<parallel::DistributedDataParallel>(
        params,
        parallel::DdpOptions{
            .group = world, .bucket_cap_mb = flags.bucket_mb, .first_bucket_mb = std::min(1.0, flags.bucket_mb)});
  std::unique_ptr<optim::Optimizer> opt;
  if (flags.optimizer == "adamw")
    opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = flags.lr});
  else
    opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = flags.lr, .momentum = 0.9});

  std::printf("train: %s; %s lr %g; %lld steps, seed %llu\n", config.str().c_str(),
              flags.optimizer == "adamw" ? "AdamW" : "SGD (momentum 0.9)", flags.lr,
              static_cast<long long>(flags.steps), static_cast<unsigned long long>(flags.seed));
  std::printf("device: %s\n", sample::deviceLine(rt, flags.device, dev).c_str());
  if (ddp)
    std::printf("data parallel: rank %d of %d, %lld rows of each batch, %zu gradient buckets\n", rank, ranks,
                static_cast<long long>(rows), ddp->bucketCount());
  Profiler profiler({.record_events = !flags.trace.empty()});
  double first = 0, last = 0;
  bool finite = true;
  for (int64_t step = 0; step < flags.steps; ++step) {
    TrainingBatch batch = TrainingBatch::random(config, flags.seed + static_cast<uint64_t>(step));
    if (ddp) {  // this rank's rows
      batch.tokens.token_ids = batch.tokens.token_ids.narrow(0, rank * rows, rows);
      batch.tokens.lengths = batch.tokens.lengths.narrow(0, rank * rows, rows);
      batch.labels = batch.labels.narrow(0, rank * rows, rows);
    }
    batch = batch.to(dev);
    opt->zero_grad();
    Tensor loss = crossEntropy(classifierLogits(weights, batch.tokens), batch.labels);
    loss.backward();
    if (ddp) ddp->finishGradientSync();
    opt->step();
    Tensor reported = loss.detach().to(Device(DeviceType::CPU));
    if (ddp) comm::allReduce_(reported, comm::ReduceOp::Avg, world);  // the whole batch's loss
    last = reported.item<double>();
    if (step == 0) first = last;
    finite = finite && std::isfinite(last);
    std::printf("step %3lld  loss %.9f\n", static_cast<long long>(step + 1), last);
  }
  std::printf("loss: %.6f -> %.6f over %lld steps\n", first, last, static_cast<long long>(flags.steps));
  profiler.stop();
  const OpReport report = profiler.report();
  std::printf("fallback: %s\n", sample::fallbackLine(report).c_str());
  if (!flags.trace.empty()) {
    writeTrace(flags.trace, report, world);
    if (rank == 0) std::printf("trace: %s (%zu events on rank 0)\n", flags.trace.c_str(), report.events.size());
  }
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
                  "  --seed N          seed of the weights; batch k is drawn from seed + k (0)\n"
                  "  --bucket-mb X     under mpirun: the gradient buckets' size in MiB (25)\n"
                  "  --trace FILE      write the run's timeline in the Chrome trace event format (Perfetto,\n"
                  "                    chrome://tracing); under mpirun every rank's, written by rank 0");
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
