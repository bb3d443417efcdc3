// Benchmarks of the sparse-convolution plugin (plugins/spconv) on a
// KITTI-like scan (samples/sparse_lidar/lidar_synth.h: 64 beams, spatial
// shape [41, 1600, 1408], about 32k voxels); scripts/bench.sh runs them.
//
// BM_SubmConv3x3x3_C16, BM_SubmConv3x3x3_C64 and
// BM_SparseConv3x3x3_Stride2_C32 time spconv::indice_conv (gather, a GEMM
// per kernel offset, scatter-add) through the dispatcher on the CPU, with
// the rulebook built beforehand, as a network reuses it. Counters: voxels/s
// (input voxels per second) and GFLOP/s, the effective rate
// 2 * Cin * Cout * pairs / time, where pairs is the rulebook's total (the
// rows the GEMMs multiply, summed over the 27 offsets).
//
// BM_OneDNN_Matmul_<same name> is each one's baseline: the same total GEMM
// work, [pairs, Cin] @ [Cin, Cout], as one oneDNN matmul call on contiguous
// buffers, so no gather or scatter. Their ratio (scripts/bench_ratios.py) is
// what the rulebook's gather and scatter cost on top of the arithmetic.
//
// BM_SparseConv3x3x3_Stride2_C32_Batch4 is the strided layer on a batch of
// four scans (about 128k voxels, a few milliseconds per iteration), with its
// baseline; its _Rulebook, _Gather, _Gemm and _Scatter benchmarks time the
// phases one by one (ConvPhases below).
//
// BM_RulebookSubm_40k times spconv::get_indice_pairs alone for a
// submanifold 3x3x3 convolution on a denser scan of about 40k voxels.
//
// BM_LidarBackbone_Cpu is samples/sparse_lidar's whole forward pass
// (VoxelBackBone8x: 12 sparse convolutions, their 8 rulebooks, batch norm
// and ReLU) on the CPU, on kittiScan() (issue target: <= 40 ms).
//
//   spconv_bench --write_scan=FILE [--scan=kitti|40k]   writes the scan and exits (for compare_spconv.py)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string_view>
#include <vector>

#include "backbone.h"
#include "backplane/dispatch/dispatcher.h"
#include "bench_util.h"
#include "sparse_conv.h"

namespace backplane {
namespace {

using bench::uniformFloats;

using sparse_lidar::ConvGeometry;
using sparse_lidar::Rulebook;
using sparse_lidar::SparseTensor;
using sparse_lidar::VoxelScan;

constexpr uint64_t kScanSeed = 0;

// The benchmarks' input: the sample's default scan, about 32k voxels.
const VoxelScan& kittiScan() {
  static const VoxelScan scan = sparse_lidar::syntheticKittiScan(kScanSeed);
  return scan;
}

// A batch of four such scans (about 128k voxels): enough work per
// iteration (a few milliseconds) for a ratio that holds on a shared machine.
const VoxelScan& kittiBatch4() {
  static const VoxelScan scan = sparse_lidar::syntheticKittiScan(kScanSeed, 4);
  return scan;
}

// A denser scan (0.14 degree azimuth steps): about 40k voxels.
const VoxelScan& denseScan() {
  static const VoxelScan scan = sparse_lidar::syntheticKittiScan(kScanSeed, 1, {.azimuth_step_deg = 0.14});
  return scan;
}

bool pluginsLoaded(benchmark::State& state) {
  return bench::cpuPluginLoaded(state) && bench::pluginLoaded(state, BACKPLANE_SPCONV_PLUGIN_PATH);
}

// One convolution on kittiScan(): its input, filters and rulebook.
struct ConvCase {
  int64_t cin, cout;
  ConvGeometry geometry;
  bool subm;
  SparseTensor input;
  Tensor filters;
  Rulebook rulebook;
  int64_t pairs = 0;

  ConvCase(int64_t in_channels, int64_t out_channels, ConvGeometry g, bool is_subm, const VoxelScan& scan = kittiScan())
      : cin(in_channels), cout(out_channels), geometry(g), subm(is_subm) {
    input = SparseTensor::fromScan(scan, Device(DeviceType::CPU));
    input.features =
        tensorFromVector(uniformFloats(static_cast<size_t>(scan.numVoxels() * cin), 1), {scan.numVoxels(), cin});
    filters = tensorFromVector(uniformFloats(static_cast<size_t>(27 * cin * cout), 2), {3, 3, 3, cin, cout});
    rulebook = sparse_lidar::buildRulebook(input, geometry, subm);
    pairs = rulebook.totalPairs();
  }

  double flops() const { return 2.0 * static_cast<double>(cin * cout * pairs); }
  void setCounters(benchmark::State& state) const {
    const double iterations = static_cast<double>(state.iterations());
    state.counters["voxels/s"] =
        benchmark::Counter(iterations * static_cast<double>(input.numVoxels()), benchmark::Counter::kIsRate);
    state.counters["GFLOP/s"] = benchmark::Counter(iterations * flops() * 1e-9, benchmark::Counter::kIsRate);
    state.counters["pairs"] = static_cast<double>(pairs);
    state.counters["out_voxels"] = static_cast<double>(rulebook.numOut());
  }
};

// The cases, built once (the plugins must be loaded first).
const ConvCase& submC16() {
  static const ConvCase c(16, 16, {.padding = {1, 1, 1}}, true);
  return c;
}
const ConvCase& submC64() {
  static const ConvCase c(64, 64, {.padding = {1, 1, 1}}, true);
  return c;
}
constexpr ConvGeometry kStride2{.stride = {2, 2, 2}, .padding = {1, 1, 1}};
const ConvCase& stride2C32() {
  static const ConvCase c(32, 32, kStride2, false);
  return c;
}
const ConvCase& stride2C32Batch4() {
  static const ConvCase c(32, 32, kStride2, false, kittiBatch4());
  return c;
}

void runConv(benchmark::State& state, const ConvCase& (*make)()) {
  if (!pluginsLoaded(state)) return;
  const ConvCase& c = make();
  benchmark::DoNotOptimize(sparse_lidar::applyConv(c.input, c.filters, c.rulebook));  // warm-up
  for (auto _ : state) {
    SparseTensor out = sparse_lidar::applyConv(c.input, c.filters, c.rulebook);
    benchmark::DoNotOptimize(out);
  }
  c.setCounters(state);
}

// The same GEMM work as `make`'s convolution in one oneDNN matmul.
void runOneDnnMatmul(benchmark::State& state, const ConvCase& (*make)()) {
  if (!pluginsLoaded(state)) return;
  const ConvCase& c = make();
  using dt = dnnl::memory::data_type;
  const int64_t m = c.pairs, k = c.cin, n = c.cout;
  std::vector<float> a = uniformFloats(static_cast<size_t>(m * k), 3), b = uniformFloats(static_cast<size_t>(k * n), 4);
  std::vector<float> out(static_cast<size_t>(m * n));
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const dnnl::memory::desc a_md({m, k}, dt::f32, dnnl::memory::dims{k, 1});
  const dnnl::memory::desc b_md({k, n}, dt::f32, dnnl::memory::dims{n, 1});
  const dnnl::memory::desc c_md({m, n}, dt::f32, dnnl::memory::dims{n, 1});
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, b_md, c_md), eng));
  dnnl::memory ma(a_md, eng, a.data()), mb(b_md, eng, b.data()), mc(c_md, eng, out.data());
  auto run = [&] {
    prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    s.wait();
  };
  run();  // warm-up
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(out.data());
  }
  c.setCounters(state);
}

void BM_SubmConv3x3x3_C16(benchmark::State& state) { runConv(state, submC16); }
void BM_SubmConv3x3x3_C64(benchmark::State& state) { runConv(state, submC64); }
void BM_SparseConv3x3x3_Stride2_C32(benchmark::State& state) { runConv(state, stride2C32); }
void BM_OneDNN_Matmul_SubmConv3x3x3_C16(benchmark::State& state) { runOneDnnMatmul(state, submC16); }
void BM_OneDNN_Matmul_SubmConv3x3x3_C64(benchmark::State& state) { runOneDnnMatmul(state, submC64); }
void BM_OneDNN_Matmul_SparseConv3x3x3_Stride2_C32(benchmark::State& state) { runOneDnnMatmul(state, stride2C32); }
void BM_SparseConv3x3x3_Stride2_C32_Batch4(benchmark::State& state) { runConv(state, stride2C32Batch4); }
void BM_OneDNN_Matmul_SparseConv3x3x3_Stride2_C32_Batch4(benchmark::State& state) {
  runOneDnnMatmul(state, stride2C32Batch4);
}
BENCHMARK(BM_SubmConv3x3x3_C16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OneDNN_Matmul_SubmConv3x3x3_C16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SubmConv3x3x3_C64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OneDNN_Matmul_SubmConv3x3x3_C64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SparseConv3x3x3_Stride2_C32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OneDNN_Matmul_SparseConv3x3x3_Stride2_C32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SparseConv3x3x3_Stride2_C32_Batch4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OneDNN_Matmul_SparseConv3x3x3_Stride2_C32_Batch4)->Unit(benchmark::kMillisecond)->UseRealTime();

// Where the strided convolution's time goes, phase by phase, on the same
// batch: the rulebook (spconv::get_indice_pairs), and the convolution as a
// device without a fused kernel runs it (plugins/spconv/generic_device.cc),
// one pass per phase over the 27 offsets: gather (index_select.out of the
// input rows each offset takes), GEMM (mm.out by W[k]) and scatter
// (scatter_add_ of the products into the zeroed output rows). The CPU
// plugin's kernel fuses the three per tile of output rows (Note [Direct
// sparse convolution kernel]), so against their sum
// (BM_SparseConv3x3x3_Stride2_C32_Batch4) it shows what fusing saves.
struct ConvPhases {
  const ConvCase& c;
  std::vector<Tensor> in_rows, out_spread, weights, gathered, products;
  Tensor out;

  explicit ConvPhases(const ConvCase& conv) : c(conv) {
    const int64_t K = c.geometry.kernelVolume(), n = c.rulebook.pairs.size(2);
    const Tensor pairs = c.rulebook.pairs.to(ScalarType::Int64).contiguous();  // [K, 2, N]
    const std::vector<int64_t> counts = c.rulebook.pair_num.to(ScalarType::Int64).toVector<int64_t>();
    for (int64_t k = 0; k < K; ++k) {
      const int64_t m = counts[static_cast<size_t>(k)];
      if (m == 0) continue;
      const int64_t base = pairs.storage_offset() + k * 2 * n;
      in_rows.push_back(pairs.as_strided({m}, {1}, base));
      out_spread.push_back(pairs.as_strided({m, c.cout}, {1, 0}, base + n));
      weights.push_back(c.filters.reshape({K, c.cin, c.cout}).select(0, k));
      gathered.push_back(emptyTensor({m, c.cin}, ScalarType::Float32));
      products.push_back(emptyTensor({m, c.cout}, ScalarType::Float32));
    }
    out = emptyTensor({c.rulebook.numOut(), c.cout}, ScalarType::Float32);
  }
  void gather() {
    static const auto op = Dispatcher::singleton()
                               .findOpOrThrow("bp::index_select.out")
                               .typed<Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&)>();
    for (size_t k = 0; k < in_rows.size(); ++k) op.call(c.input.features, 0, in_rows[k], gathered[k]);
  }
  void gemm() {
    static const auto op = Dispatcher::singleton()
                               .findOpOrThrow("bp::mm.out")
                               .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
    for (size_t k = 0; k < in_rows.size(); ++k) op.call(gathered[k], weights[k], products[k]);
  }
  void scatter() {
    static const auto zero = Dispatcher::singleton().findOpOrThrow("bp::zero_").typed<Tensor(const Tensor&)>();
    static const auto op = Dispatcher::singleton()
                               .findOpOrThrow("bp::scatter_add_")
                               .typed<Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&)>();
    zero.call(out);
    for (size_t k = 0; k < in_rows.size(); ++k) op.call(out, 0, out_spread[k], products[k]);
  }
};

ConvPhases& stride2Phases() {
  static ConvPhases p(stride2C32Batch4());
  return p;
}

void BM_SparseConv3x3x3_Stride2_C32_Batch4_Rulebook(benchmark::State& state) {
  if (!pluginsLoaded(state)) return;
  const ConvCase& c = stride2C32Batch4();
  for (auto _ : state) {
    Rulebook r = sparse_lidar::buildRulebook(c.input, c.geometry, c.subm);
    benchmark::DoNotOptimize(r);
  }
  c.setCounters(state);
}
template <void (ConvPhases::*Phase)()>
void runPhase(benchmark::State& state) {
  if (!pluginsLoaded(state)) return;
  ConvPhases& p = stride2Phases();
  (p.*Phase)();  // warm-up
  for (auto _ : state) (p.*Phase)();
  p.c.setCounters(state);
}
void BM_SparseConv3x3x3_Stride2_C32_Batch4_Gather(benchmark::State& state) { runPhase<&ConvPhases::gather>(state); }
void BM_SparseConv3x3x3_Stride2_C32_Batch4_Gemm(benchmark::State& state) { runPhase<&ConvPhases::gemm>(state); }
void BM_SparseConv3x3x3_Stride2_C32_Batch4_Scatter(benchmark::State& state) { runPhase<&ConvPhases::scatter>(state); }
BENCHMARK(BM_SparseConv3x3x3_Stride2_C32_Batch4_Rulebook)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SparseConv3x3x3_Stride2_C32_Batch4_Gather)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SparseConv3x3x3_Stride2_C32_Batch4_Gemm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SparseConv3x3x3_Stride2_C32_Batch4_Scatter)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RulebookSubm_40k(benchmark::State& state) {
  if (!pluginsLoaded(state)) return;
  const SparseTensor input = SparseTensor::fromScan(denseScan(), Device(DeviceType::CPU));
  const ConvGeometry subm{.padding = {1, 1, 1}};
  benchmark::DoNotOptimize(sparse_lidar::buildRulebook(input, subm, true));  // warm-up
  for (auto _ : state) {
    Rulebook r = sparse_lidar::buildRulebook(input, subm, true);
    benchmark::DoNotOptimize(r);
  }
  state.counters["voxels/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(input.numVoxels()), benchmark::Counter::kIsRate);
  state.counters["voxels"] = static_cast<double>(input.numVoxels());
}
BENCHMARK(BM_RulebookSubm_40k)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LidarBackbone_Cpu(benchmark::State& state) {
  if (!pluginsLoaded(state)) return;
  const VoxelScan& scan = kittiScan();
  const Device cpu(DeviceType::CPU);
  const sparse_lidar::BackboneWeights weights =
      sparse_lidar::BackboneWeights::random(sparse_lidar::voxelBackBone8x(scan.channels), 0).to(cpu);
  const SparseTensor input = SparseTensor::fromScan(scan, cpu);
  benchmark::DoNotOptimize(sparse_lidar::runBackbone(weights, input));  // warm-up
  for (auto _ : state) {
    SparseTensor out = sparse_lidar::runBackbone(weights, input);
    benchmark::DoNotOptimize(out);
  }
  state.counters["voxels"] = static_cast<double>(scan.numVoxels());
}
BENCHMARK(BM_LidarBackbone_Cpu)->Unit(benchmark::kMillisecond)->UseRealTime();

// Writes `scan` as: int64 N, int64 batch_size, int64 spatial_shape[3], int64
// channels, then indices int32 [N, 4] and features float32 [N, channels],
// little-endian as the machine is (compare_spconv.py reads it with numpy).
bool writeScan(const VoxelScan& scan, const char* path) {
  std::FILE* f = std::fopen(path, "wb");
  if (!f) return false;
  const int64_t header[6] = {scan.numVoxels(),      scan.batch_size,       scan.spatial_shape[0],
                             scan.spatial_shape[1], scan.spatial_shape[2], scan.channels};
  bool ok = std::fwrite(header, sizeof header, 1, f) == 1 &&
            std::fwrite(scan.indices.data(), sizeof(int32_t), scan.indices.size(), f) == scan.indices.size() &&
            std::fwrite(scan.features.data(), sizeof(float), scan.features.size(), f) == scan.features.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace
}  // namespace backplane

int main(int argc, char** argv) {
  const char* scan_path = nullptr;
  bool dense = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--write_scan=")) scan_path = argv[i] + std::strlen("--write_scan=");
    if (arg == "--scan=40k") dense = true;
  }
  if (scan_path) {
    if (backplane::writeScan(dense ? backplane::denseScan() : backplane::kittiScan(), scan_path)) return 0;
    std::fprintf(stderr, "spconv_bench: cannot write the scan to '%s'\n", scan_path);
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
