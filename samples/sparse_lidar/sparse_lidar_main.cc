// sparse_lidar: SECOND's sparse 3-D backbone on a synthetic LiDAR scan, on
// the device picked at run time, checked, profiled and timed.
//
//   sparse_lidar [--device auto|cpu|cuda:0|...] [--batch N] [--seed N] [--iters N] [--points N]
//
// A 64-beam scan (lidar_synth.h) is voxelised on KITTI's grid and run through
// VoxelBackBone8x (backbone.h) with weights from a fixed seed. Every layer's
// output on the device is checked against the same layer on the CPU (or, when
// the device is the CPU, against the plain double-precision reference of
// reference.h, on a sample of each layer's rows); then --iters runs are timed
// layer by layer and one more is profiled op by op. Exit codes: 0 the check
// passed, 1 it failed or an error occurred (a --device that does not exist
// is one: the message lists the devices present), 2 a usage error.
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backbone.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "lidar_synth.h"
#include "reference.h"
#include "sample_app.h"

namespace sparse_lidar {
namespace {

using namespace backplane;
using sample::deviceLine;
using sample::fallbackLine;
using Clock = std::chrono::steady_clock;
using Millis = std::chrono::duration<double, std::milli>;

constexpr const char* kUsage =
    "usage: sparse_lidar [--device auto|cpu|cuda:0|...] [--batch N] [--seed N] [--iters N] [--points N]";

constexpr const char* kHelp =
    "\n"
    "Generates a synthetic 64-beam LiDAR scan (cars, pedestrians, walls and poles on a ground plane), voxelises it\n"
    "on KITTI's grid [41, 1600, 1408] (0.05 x 0.05 x 0.1 m voxels), and runs SECOND's VoxelBackBone8x (submanifold\n"
    "and strided sparse convolutions, batch norm and ReLU; weights from a fixed seed) through the sparse-convolution\n"
    "plugin on the chosen device. Checks every layer against the CPU (on the CPU itself: against a plain\n"
    "double-precision reference, on a sample of rows), prints which ops ran natively and which fell back to the\n"
    "CPU, and the time of each layer.\n"
    "\n"
    "options:\n"
    "  --device SPEC   auto (default: the first of cuda, hip, a vendor's device, cpu that is present;\n"
    "                  BACKPLANE_DEVICE overrides it), cpu, cuda, cuda:1, or a vendor's device type\n"
    "  --batch N       scans per batch, each from its own seed (1)\n"
    "  --seed N        seed of the scans and the weights (0)\n"
    "  --iters N       timed runs after the warm-up (3)\n"
    "  --points N      at most N LiDAR returns per scan, evenly spread over it (0: all, about 115k);\n"
    "                  a few thousand make a scan small enough for the GPU simulator\n";

// On the CPU, each layer's features are checked on every kRowStep-th row
// (all sites are checked): the double-precision reference of a whole layer
// costs about as much as the layer on one core.
constexpr int64_t kRowStep = 7;

struct Flags {
  std::string device = "auto";
  int64_t batch = 1;
  int64_t iters = 3;
  int64_t points = 0;
  uint64_t seed = 0;
};

// The command line as Flags, or nullopt and the message of a usage error.
std::optional<Flags> parseFlags(int argc, char** argv, std::string& error) {
  Flags flags;
  if (!sample::parseFlags(argc, argv,
                          {{"--device", &flags.device},
                           {"--batch", &flags.batch},
                           {"--seed", &flags.seed},
                           {"--iters", &flags.iters},
                           {"--points", &flags.points}},
                          error)) {
    return std::nullopt;
  }
  for (const auto& [name, value] : {std::pair{"--batch", flags.batch}, std::pair{"--iters", flags.iters}}) {
    if (value < 1) {
      error = strCat(name, " must be at least 1, got ", value);
      return std::nullopt;
    }
  }
  if (flags.points < 0) {
    error = strCat("--points must be at least 0 (0: every return), got ", flags.points);
    return std::nullopt;
  }
  return flags;
}

// What the checked run learns about each layer.
struct LayerRecord {
  SparseTensor output;
  int64_t pairs = 0;
  bool built_rulebook = false;  // the first layer of its indice_key
};

// The backbone on `input`, keeping every layer's output and its rulebook's size.
std::vector<LayerRecord> recordedRun(const BackboneWeights& weights, const SparseTensor& input) {
  std::vector<LayerRecord> records;
  std::map<std::string, int> seen_keys;
  runBackbone(weights, input, [&](size_t i, const Rulebook& rulebook, const SparseTensor& output) {
    const bool first = seen_keys[weights.layers[i].indice_key]++ == 0;
    records.push_back({output, rulebook.totalPairs(), first});
  });
  return records;
}

std::string shapeString(const Shape3& s) { return strCat("[", s[0], ", ", s[1], ", ", s[2], "]"); }

// "subm 3x3x3", "conv 3x3x3 /2", "conv 3x1x1 /2,1,1".
std::string convString(const SparseConvLayer& l) {
  const ConvGeometry& g = l.geometry;
  std::string s = strCat(l.subm ? "subm " : "conv ", g.kernel[0], "x", g.kernel[1], "x", g.kernel[2]);
  if (g.stride == Shape3{1, 1, 1}) return s;
  if (g.stride[0] == g.stride[1] && g.stride[1] == g.stride[2]) return strCat(s, " /", g.stride[0]);
  return strCat(s, " /", g.stride[0], ",", g.stride[1], ",", g.stride[2]);
}

int run(const Flags& flags) {
  Runtime rt;
  const Device dev = rt.device(flags.device);
  const bool on_cpu = dev.type == DeviceType::CPU;
  DeviceInterface& device_api = DeviceTypeRegistry::global().interfaceOrThrow(dev.type);

  const Clock::time_point scan_start = Clock::now();
  LidarConfig lidar;
  lidar.max_points = flags.points;
  const VoxelScan scan = syntheticKittiScan(flags.seed, flags.batch, lidar);
  const Millis scan_time = Clock::now() - scan_start;
  int64_t points = 0;
  for (int64_t p : scan.points) points += p;

  // Weights and input are made on the CPU, then moved: the CPU copies are
  // what the check runs against.
  const BackboneWeights cpu_weights = BackboneWeights::random(voxelBackBone8x(scan.channels), flags.seed);
  const SparseTensor cpu_input = SparseTensor::fromScan(scan, Device(DeviceType::CPU));
  const BackboneWeights weights = cpu_weights.to(dev);
  const SparseTensor input = cpu_input.to(dev);
  const std::vector<SparseConvLayer>& layers = weights.layers;

  // The first run is the warm-up and the run that is checked, layer by layer.
  const std::vector<LayerRecord> records = recordedRun(weights, input);
  std::vector<LayerRecord> cpu_records;
  if (!on_cpu) cpu_records = recordedRun(cpu_weights, cpu_input);
  const int64_t row_step = on_cpu ? kRowStep : 1;
  LayerDifference worst;
  size_t worst_layer = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const HostSparse actual = HostSparse::from(records[i].output);
    const HostSparse expected =
        on_cpu ? referenceLayer(layers[i], cpu_weights.weights[i],
                                HostSparse::from(i == 0 ? cpu_input : records[i - 1].output), row_step)
               : HostSparse::from(cpu_records[i].output);
    const LayerDifference d = compareLayer(actual, expected, row_step);
    if (i == 0 || d.max_rel > worst.max_rel) {
      worst = d;
      worst_layer = i;
    }
  }
  const bool passed = worst.max_rel <= kFeatureTolerance;
  const std::string against = on_cpu ? strCat("the double-precision reference (every site; features of every ",
                                              row_step, "th row), each layer on its own input")
                                     : std::string("the CPU run");

  // Timed runs, layer by layer: waiting for the device after each layer
  // charges its work to it.
  std::vector<double> layer_ms(layers.size(), 0.0);
  device_api.synchronize(dev);
  const Clock::time_point start = Clock::now();
  for (int64_t it = 0; it < flags.iters; ++it) {
    Clock::time_point layer_start = Clock::now();
    runBackbone(weights, input, [&](size_t i, const Rulebook&, const SparseTensor&) {
      device_api.synchronize(dev);
      const Clock::time_point now = Clock::now();
      layer_ms[i] += Millis(now - layer_start).count();
      layer_start = now;
    });
  }
  const Millis elapsed = Clock::now() - start;

  // One run op by op, after the timed runs: by then the allocator's cache
  // holds blocks for every tensor of a pass, as in a model serving scans one
  // after another. (Run right after the checked run, whose layer outputs
  // stay alive, many of its tensors took fresh memory, and the first op to
  // write each, mostly relu.out, was charged its page faults: 5.6 ms of 12
  // relu.out calls against 1.2 ms here.) synchronize_device makes each op's
  // time include its device work.
  OpReport report;
  {
    Profiler profiler({.synchronize_device = true});
    runBackbone(weights, input);
    report = profiler.report();
  }

  std::printf("sparse_lidar: VoxelBackBone8x on a synthetic 64-beam scan, batch %lld, seed %llu\n",
              static_cast<long long>(flags.batch), static_cast<unsigned long long>(flags.seed));
  std::printf("scan:     %lld voxels of %s from %lld points (generated and voxelised in %.0f ms)\n",
              static_cast<long long>(scan.numVoxels()), shapeString(scan.spatial_shape).c_str(),
              static_cast<long long>(points), scan_time.count());
  std::printf("device:   %s\n", deviceLine(rt, flags.device, dev).c_str());
  std::printf("check:    every layer's output %s %s: max diff %.1e of the layer's largest feature %s tolerance %.0e\n",
              passed ? "matches" : "DOES NOT MATCH", against.c_str(), worst.max_rel, passed ? "<=" : ">",
              kFeatureTolerance);
  if (!passed) {
    std::printf("          largest in %s, row %lld, channel %lld\n", layers[worst_layer].name.c_str(),
                static_cast<long long>(worst.row), static_cast<long long>(worst.channel));
  }
  std::printf("fallback: %s\n", fallbackLine(report).c_str());
  std::printf("time:     %.2f ms per forward pass (mean of %lld runs after a warm-up; rulebooks included)\n",
              elapsed.count() / static_cast<double>(flags.iters), static_cast<long long>(flags.iters));
  std::printf("\n%s\n", rt.describe().c_str());
  std::printf("\nlayers (ms: mean per run; * builds the rulebook its indice_key shares, the others reuse it):\n");
  std::printf("  %-11s %-17s %-10s %-18s %8s %10s %9s\n", "layer", "conv", "channels", "grid", "voxels", "pairs", "ms");
  for (size_t i = 0; i < layers.size(); ++i) {
    const SparseConvLayer& l = layers[i];
    std::printf("  %-11s %-17s %-10s %-18s %8lld %10lld %8.2f%s\n", l.name.c_str(), convString(l).c_str(),
                strCat(l.in_channels, " -> ", l.out_channels).c_str(),
                shapeString(records[i].output.spatial_shape).c_str(),
                static_cast<long long>(records[i].output.numVoxels()), static_cast<long long>(records[i].pairs),
                layer_ms[i] / static_cast<double>(flags.iters), records[i].built_rulebook ? "*" : "");
  }
  std::printf(
      "\ntolerance: %.0e of each layer's largest feature: float32 sums of up to 1728 products per output\n"
      "(samples/sparse_lidar/reference.h, Note [Backbone tolerance])\n",
      kFeatureTolerance);
  std::printf(
      "\nper-op report of one forward pass on %s (each op synchronized; self time excludes the ops it "
      "calls):\n%s",
      dev.str().c_str(), report.table().c_str());
  return passed ? 0 : 1;
}

}  // namespace
}  // namespace sparse_lidar

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::printf("%s\n%s", sparse_lidar::kUsage, sparse_lidar::kHelp);
      return 0;
    }
  }
  std::string error;
  std::optional<sparse_lidar::Flags> flags = sparse_lidar::parseFlags(argc, argv, error);
  if (!flags) {
    std::fprintf(stderr, "sparse_lidar: %s\n%s\n", error.c_str(), sparse_lidar::kUsage);
    return 2;
  }
  try {
    return sparse_lidar::run(*flags);
  } catch (const backplane::Error& e) {
    std::fprintf(stderr, "sparse_lidar: error: %s\n", e.what());
    return 1;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "sparse_lidar: error: %s\n", e.what());
    return 1;
  }
}
