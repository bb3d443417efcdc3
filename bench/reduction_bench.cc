// Benchmarks of the reduction family's softmax (scripts/bench.sh).
//
// BM_Softmax_f32_Dispatcher: softmax over the last dim of a [256, 1024]
// float32 tensor (a batch of attention-score rows) through the dispatcher as
// an application calls it: a typed call of bp::softmax.int_out into a
// preallocated out (the meta kernel checks the arguments, the CPU plugin
// runs its own kernels, Note [Softmax kernels]). BM_OneDNN_Softmax_f32 is
// its baseline: oneDNN's softmax_v2 primitive on the same tensor, created
// outside the timed loop and executed directly. BM_LogSoftmax_f32_Dispatcher
// is log_softmax on the same tensor, against oneDNN's softmax_log.
//
// BM_Softmax_Dim0_f32 (the same tensor along dim 0) and BM_Softmax_Mid_f32
// ([16, 256, 64] along dim 1) time a dim that is not innermost, against
// oneDNN on the same axis (oneDNN 2.6 has only its reference kernel there).
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <optional>
#include <random>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"
#include "bench_util.h"

namespace backplane {
namespace {

using bench::uniformFloats;

constexpr int64_t kRows = 256, kCols = 1024;

// `name` (softmax.int_out or log_softmax.int_out) of a random float32
// tensor of `sizes` along `dim`, into a preallocated out.
void runSoftmax(benchmark::State& state, const char* name, std::vector<int64_t> sizes, int64_t dim) {
  if (!bench::cpuPluginLoaded(state)) return;
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  Tensor x = tensorFromVector(uniformFloats(static_cast<size_t>(numel), 1, -4, 4), sizes);
  Tensor out = emptyTensor(sizes, ScalarType::Float32);
  auto op = Dispatcher::singleton()
                .findOpOrThrow(name)
                .typed<Tensor(const Tensor&, int64_t, std::optional<ScalarType>, const Tensor&)>();
  op.call(x, dim, std::nullopt, out);  // warm-up: primitive creation
  for (auto _ : state) {
    Tensor y = op.call(x, dim, std::nullopt, out);
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(state.iterations() * numel);
  state.SetBytesProcessed(state.iterations() * numel * 2 * static_cast<int64_t>(sizeof(float)));
}

void BM_Softmax_f32_Dispatcher(benchmark::State& state) { runSoftmax(state, "bp::softmax.int_out", {kRows, kCols}, 1); }
BENCHMARK(BM_Softmax_f32_Dispatcher)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LogSoftmax_f32_Dispatcher(benchmark::State& state) {
  runSoftmax(state, "bp::log_softmax.int_out", {kRows, kCols}, 1);
}
BENCHMARK(BM_LogSoftmax_f32_Dispatcher)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Softmax_Dim0_f32(benchmark::State& state) { runSoftmax(state, "bp::softmax.int_out", {kRows, kCols}, 0); }
BENCHMARK(BM_Softmax_Dim0_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Softmax_Mid_f32(benchmark::State& state) { runSoftmax(state, "bp::softmax.int_out", {16, 256, 64}, 1); }
BENCHMARK(BM_Softmax_Mid_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

// oneDNN's softmax_v2 primitive (`algo`) on the same tensor along `axis`,
// created outside the timed loop and executed directly.
void runOneDnnSoftmax(benchmark::State& state, dnnl::algorithm algo, const std::vector<int64_t>& sizes, int64_t axis) {
  using dnnl::memory;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  memory::dims strides(sizes.size(), 1);
  for (size_t i = sizes.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * sizes[i + 1];
  const memory::desc md(memory::dims(sizes.begin(), sizes.end()), memory::data_type::f32, strides);
  const dnnl::softmax_v2_forward::primitive_desc pd(
      {dnnl::prop_kind::forward_inference, algo, md, md, static_cast<int>(axis)}, engine);
  const dnnl::softmax_v2_forward prim(pd);
  std::vector<float> x = uniformFloats(static_cast<size_t>(numel), 1, -4, 4), y(x.size());
  memory src(md, engine, x.data()), dst(md, engine, y.data());
  for (auto _ : state) {
    prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    stream.wait();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * numel);
  state.SetBytesProcessed(state.iterations() * numel * 2 * static_cast<int64_t>(sizeof(float)));
}

void BM_OneDNN_Softmax_f32(benchmark::State& state) {
  runOneDnnSoftmax(state, dnnl::algorithm::softmax_accurate, {kRows, kCols}, 1);
}
BENCHMARK(BM_OneDNN_Softmax_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_OneDNN_LogSoftmax_f32(benchmark::State& state) {
  runOneDnnSoftmax(state, dnnl::algorithm::softmax_log, {kRows, kCols}, 1);
}
BENCHMARK(BM_OneDNN_LogSoftmax_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_OneDNN_Softmax_Dim0_f32(benchmark::State& state) {
  runOneDnnSoftmax(state, dnnl::algorithm::softmax_accurate, {kRows, kCols}, 0);
}
BENCHMARK(BM_OneDNN_Softmax_Dim0_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_OneDNN_Softmax_Mid_f32(benchmark::State& state) {
  runOneDnnSoftmax(state, dnnl::algorithm::softmax_accurate, {16, 256, 64}, 1);
}
BENCHMARK(BM_OneDNN_Softmax_Mid_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace backplane
