// encoder: one BERT-base encoder layer on the device picked at run time,
// checked, profiled and timed.
//
//   encoder [--device auto|cpu|cuda:0|...] [--devices LIST] [--batch N] [--seq N] [--hidden N] [--heads N]
//           [--ffn N] [--vocab N] [--iters N] [--seed N] [--output FILE]
//
// The layer's weights come from a fixed seed. Its output on the device is
// checked against the same layer on the CPU (or, when the device is the CPU,
// against the plain double-precision reference of reference.h); then --iters
// runs are timed and one more is profiled op by op. Exit codes: 0 the check
// passed, 1 it failed or an error occurred (a --device that does not exist
// is one: the message lists the devices present), 2 a usage error. With
// --devices the layer runs data parallel over the devices listed (Note [Data
// parallel in one process]) and is checked against the first device alone.
//
// The `output:` line sums the layer's output, and --output FILE writes every
// value, so that another implementation of the layer (the Python one,
// samples/python/encoder_layer.py, prints and writes the same) can be
// compared with this one.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/core/str_cat.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/data_parallel.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "encoder.h"
#include "reference.h"
#include "sample_app.h"

namespace encoder {
namespace {

using namespace backplane;
using sample::deviceLine;
using sample::fallbackLine;

constexpr const char* kUsage =
    "usage: encoder [--device auto|cpu|cuda:0|...] [--devices LIST] [--batch N] [--seq N] [--hidden N] [--heads N]\n"
    "               [--ffn N] [--vocab N] [--iters N] [--seed N] [--output FILE]";

constexpr const char* kHelp =
    "\n"
    "Runs one BERT-style encoder layer (embeddings, self-attention with a padding mask, feed-forward with GELU,\n"
    "each with a residual and layer_norm) with weights from a fixed seed on the chosen device; checks its output\n"
    "against the same layer on the CPU (on the CPU itself: against a plain double-precision reference), prints\n"
    "which ops ran natively and which fell back to the CPU, and the time per layer.\n"
    "\n"
    "options (defaults: BERT-base):\n"
    "  --device SPEC   auto (default: the first of cuda, hip, a vendor's device, cpu that is present;\n"
    "                  BACKPLANE_DEVICE overrides it), cpu, cuda, cuda:1, or a vendor's device type\n"
    "  --batch N       sequences per batch (8)\n"
    "  --seq N         tokens per sequence (128)\n"
    "  --hidden N      hidden size (768)\n"
    "  --heads N       attention heads; must divide --hidden (12)\n"
    "  --ffn N         feed-forward inner size (3072)\n"
    "  --vocab N       vocabulary size (30522)\n"
    "  --devices LIST  data parallel in this process (Note [Data parallel in one process]): the batch split\n"
    "                  over the comma-separated devices (e.g. cpu,gpusim:0,cuda:0), the weights copied to\n"
    "                  each, the layer run on all at once, the outputs gathered on the first; checked\n"
    "                  against the same layer on the first device alone\n"
    "  --iters N       timed runs after the warm-up (5)\n"
    "  --seed N        seed of the weights and the batch (0)\n"
    "  --output FILE   also write the output's values to FILE: a '#' line with its sizes, then one value\n"
    "                  per line in row-major order, printed with %.9g (float32 values round-trip)\n";

// The reference runs in plain loops on one core, about 0.5 s per sequence
// at BERT-base size, so a CPU run is checked on its first sequences only:
// sequence 0 is unpadded and sequence 1 padded, which covers both kinds of
// attention rows. (encoder_test.cc checks whole batches of a small config.)
constexpr int64_t kReferenceSequences = 2;

struct Flags {
  std::string device = "auto";
  std::string devices;  // --devices LIST; empty: one device
  EncoderConfig config;
  int64_t iters = 5;
  uint64_t seed = 0;
  std::string output;  // --output FILE; empty: no file
};

// The command line as Flags, or nullopt and the message of a usage error.
std::optional<Flags> parseFlags(int argc, char** argv, std::string& error) {
  Flags flags;
  if (!sample::parseFlags(argc, argv,
                          {{"--device", &flags.device},
                           {"--devices", &flags.devices},
                           {"--batch", &flags.config.batch},
                           {"--seq", &flags.config.seq},
                           {"--hidden", &flags.config.hidden},
                           {"--heads", &flags.config.heads},
                           {"--ffn", &flags.config.ffn},
                           {"--vocab", &flags.config.vocab},
                           {"--iters", &flags.iters},
                           {"--seed", &flags.seed},
                           {"--output", &flags.output}},
                          error)) {
    return std::nullopt;
  }
  if (flags.iters < 1) {
    error = strCat("--iters must be at least 1, got ", flags.iters);
    return std::nullopt;
  }
  try {
    flags.config.validate();
  } catch (const Error& e) {
    error = e.message();
    return std::nullopt;
  }
  return flags;
}

// Whether `dev`'s plugin runs float32 matrix products in TF32 (its
// <type>::allow_tf32 op, Note [TF32 matrix products]); false for devices
// without the op.
bool tf32MatrixProducts(Device dev) {
  if (dev.type == DeviceType::CPU) return false;
  const std::optional<OperatorHandle> op =
      Dispatcher::singleton().findOp(strCat(deviceTypeName(dev.type), "::allow_tf32"));
  return op && op->typed<bool()>().call();
}

// --output FILE: "# <sizes> <dtype>", then one value per line (%.9g: a
// float32 value reads back exactly).
void writeValues(const std::string& path, const Tensor& output, const std::vector<double>& values) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  BP_CHECK(f != nullptr, "--output: cannot open '", path, "' for writing: ", std::strerror(errno));
  std::fprintf(f, "# %s %s\n", strCat(output.sizes()).c_str(), std::string(scalarTypeName(output.dtype())).c_str());
  for (double v : values) std::fprintf(f, "%.9g\n", v);
  const bool written = std::ferror(f) == 0;
  const bool closed = std::fclose(f) == 0;
  BP_CHECK(written && closed, "--output: writing '", path, "' failed: ", std::strerror(errno));
}

// --devices: the layer data parallel over the listed devices (Note [Data
// parallel in one process]), checked against the same layer on the first
// device alone, then timed.
int runDataParallel(const Flags& flags) {
  const EncoderConfig& config = flags.config;
  Runtime rt;
  std::vector<Device> devices;
  for (std::string_view rest = flags.devices; !rest.empty();) {
    const size_t comma = rest.find(',');
    devices.push_back(rt.device(std::string(rest.substr(0, comma))));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  BP_CHECK(devices.size() >= 2, "--devices needs two or more devices, got '", flags.devices, "'; for one use --device");
  const EncoderWeights cpu_weights = EncoderWeights::random(config, flags.seed);
  const EncoderBatch cpu_batch = EncoderBatch::random(config, flags.seed);
  // Replicate: the weights on every device.
  std::vector<EncoderWeights> replicas;
  for (const Device& d : devices) replicas.push_back(cpu_weights.to(d));
  const std::vector<int64_t> split = parallel::splitSizes(config.batch, devices.size());
  auto layer = [&] {
    // Scatter the batch, run every replica at once, gather on the first device.
    const std::vector<Tensor> tokens = parallel::scatter(cpu_batch.token_ids, devices);
    const std::vector<Tensor> lengths = parallel::scatter(cpu_batch.lengths, devices);
    std::vector<Tensor> outputs(devices.size());
    parallel::parallelApply(devices.size(), [&](size_t i) {
      outputs[i] = encoderLayer(replicas[i], EncoderBatch{tokens[i], lengths[i]});
    });
    return parallel::gather(outputs, devices[0]);
  };
  const Tensor output = layer();
  const Tensor single = encoderLayer(replicas[0], cpu_batch.to(devices[0]));
  const Difference diff = compareResults(output.toVector<double>(), single.toVector<double>());
  const bool tf32 = tf32MatrixProducts(devices[0]);
  const double tolerance = tf32 ? kTf32OutputTolerance : kOutputTolerance;
  const bool passed = diff.max_abs <= tolerance && output.sizes() == single.sizes();

  for (const Device& d : devices) DeviceTypeRegistry::global().interfaceOrThrow(d.type).synchronize(d);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < flags.iters; ++i) layer();
  for (const Device& d : devices) DeviceTypeRegistry::global().interfaceOrThrow(d.type).synchronize(d);
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;

  std::string names, parts;
  for (size_t i = 0; i < devices.size(); ++i) {
    names += (i ? ", " : "") + devices[i].str();
    parts += (i ? " + " : "") + std::to_string(split[i]);
  }
  std::printf("encoder layer: %s, seed %llu\n", config.str().c_str(), static_cast<unsigned long long>(flags.seed));
  std::printf("devices:  %s (data parallel in one process: %s sequences)\n", names.c_str(), parts.c_str());
  std::printf("check:    output %s gathered on %s %s the layer on %s alone: max abs diff %.1e %s tolerance %.0e\n",
              strCat(output.sizes()).c_str(), devices[0].str().c_str(), passed ? "matches" : "DOES NOT MATCH",
              devices[0].str().c_str(), diff.max_abs, passed ? "<=" : ">", tolerance);
  std::printf("time:     %.2f ms per layer (scatter, replicas, gather; mean of %lld runs after a warm-up)\n",
              elapsed.count() / static_cast<double>(flags.iters), static_cast<long long>(flags.iters));
  return passed ? 0 : 1;
}

int run(const Flags& flags) {
  const EncoderConfig& config = flags.config;
  Runtime rt;
  const Device dev = rt.device(flags.device);
  const bool on_cpu = dev.type == DeviceType::CPU;
  DeviceInterface& device_api = DeviceTypeRegistry::global().interfaceOrThrow(dev.type);

  // Weights and batch are made on the CPU, then moved: the CPU copies are
  // what the check runs against.
  const EncoderWeights cpu_weights = EncoderWeights::random(config, flags.seed);
  const EncoderBatch cpu_batch = EncoderBatch::random(config, flags.seed);
  const EncoderWeights weights = cpu_weights.to(dev);
  const EncoderBatch batch = cpu_batch.to(dev);

  // The first run is the warm-up and the run that is checked.
  const Tensor output = encoderLayer(weights, batch);
  const int64_t checked = on_cpu ? std::min(kReferenceSequences, config.batch) : config.batch;
  const std::vector<double> actual = output.narrow(0, 0, checked).toVector<double>();
  const std::vector<double> expected = on_cpu ? referenceEncoderLayer(cpu_weights, cpu_batch, checked)
                                              : encoderLayer(cpu_weights, cpu_batch).toVector<double>();
  const std::string against =
      on_cpu ? strCat("the double-precision reference (sequences 0..", checked - 1, " of ", config.batch, ")")
             : std::string("the CPU run");
  const Difference diff = compareResults(actual, expected);
  // TF32 products are less precise by design: the check uses the tolerance
  // TF32 justifies and says so (Note [Encoder tolerance]).
  const bool tf32 = tf32MatrixProducts(dev);
  const double tolerance = tf32 ? kTf32OutputTolerance : kOutputTolerance;
  const bool passed = diff.max_abs <= tolerance;

  device_api.synchronize(dev);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < flags.iters; ++i) encoderLayer(weights, batch);
  device_api.synchronize(dev);
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;

  // One run op by op, after the timed ones (a warm run: every allocation a
  // hit in the allocator's cache); synchronize_device makes each op's time
  // include its device work.
  OpReport report;
  {
    Profiler profiler({.synchronize_device = true});
    encoderLayer(weights, batch);
    report = profiler.report();
  }

  std::printf("encoder layer: %s, seed %llu\n", config.str().c_str(), static_cast<unsigned long long>(flags.seed));
  std::printf("device:   %s\n", deviceLine(rt, flags.device, dev).c_str());
  std::printf("check:    output %s %s %s: max abs diff %.1e %s tolerance %.0e%s\n", strCat(output.sizes()).c_str(),
              passed ? "matches" : "DOES NOT MATCH", against.c_str(), diff.max_abs, passed ? "<=" : ">", tolerance,
              tf32 ? " (TF32 matrix products are on: float32 GEMM inputs are rounded to 10 mantissa bits)" : "");
  if (!passed) {
    const int64_t row = diff.index / config.hidden;
    std::printf("          largest at sequence %lld, position %lld, feature %lld: %.6g, expected %.6g\n",
                static_cast<long long>(row / config.seq), static_cast<long long>(row % config.seq),
                static_cast<long long>(diff.index % config.hidden), actual[diff.index], expected[diff.index]);
  }
  // Summed in double in row-major order, as encoder_layer.py sums them.
  const std::vector<double> values = output.toVector<double>();
  double sum = 0, sum_squares = 0;
  for (double v : values) {
    sum += v;
    sum_squares += v * v;
  }
  if (!flags.output.empty()) writeValues(flags.output, output, values);
  std::printf("output:   sum %.6e, sum of squares %.6e over %zu values%s\n", sum, sum_squares, values.size(),
              flags.output.empty() ? "" : strCat("; written to ", flags.output).c_str());
  std::printf("fallback: %s\n", fallbackLine(report).c_str());
  std::printf("time:     %.2f ms per layer (mean of %lld runs after a warm-up)\n",
              elapsed.count() / static_cast<double>(flags.iters), static_cast<long long>(flags.iters));
  std::printf("\n%s\n", rt.describe().c_str());
  std::printf(
      "\ntolerance: %.0e absolute: outputs are layer-normalised, of order 1; float32 matmuls sum over\n"
      "K = %lld and %lld, and other devices' kernels sum in other orders (samples/encoder/reference.h,\n"
      "Note [Encoder tolerance])\n",
      tolerance, static_cast<long long>(config.hidden), static_cast<long long>(config.ffn));
  std::printf("\nper-op report of one layer on %s (each op synchronized; self time excludes the ops it calls):\n%s",
              dev.str().c_str(), report.table().c_str());
  return passed ? 0 : 1;
}

}  // namespace
}  // namespace encoder

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::printf("%s\n%s", encoder::kUsage, encoder::kHelp);
      return 0;
    }
  }
  std::string error;
  std::optional<encoder::Flags> flags = encoder::parseFlags(argc, argv, error);
  if (!flags) {
    std::fprintf(stderr, "encoder: %s\n%s\n", error.c_str(), encoder::kUsage);
    return 2;
  }
  try {
    return flags->devices.empty() ? encoder::run(*flags) : encoder::runDataParallel(*flags);
  } catch (const backplane::Error& e) {
    std::fprintf(stderr, "encoder: error: %s\n", e.what());
    return 1;
  }
}
