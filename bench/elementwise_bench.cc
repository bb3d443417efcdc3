// Benchmarks of the "elementwise" standard operators (scripts/bench.sh),
// through the dispatcher and the CPU plugin, as applications call them:
//   BM_Add_1M_f32          add.out of two contiguous 1M-element float32 tensors into a
//                          preallocated out: the kernel's throughput plus one dispatch
//                          (allocation excluded on purpose: a fresh 4 MB buffer costs page
//                          faults that measure the allocator, not the kernel)
//   BM_Add_1M_f32_Alloc    the same through add.Tensor, allocating the result each time
//   BM_Memcpy_Equivalent   memcpy moving the same bytes as BM_Add_1M_f32 (8 MB read + 4 MB
//                          written = 12 MB, i.e. a 6 MB memcpy); compare bytes_per_second
//   BM_Add_Tiny_EndToEnd   add.Tensor of two 1-element tensors: dispatch, composite, meta
//   BM_Add_Tiny_EndToEnd_RequiresGrad   the same on two leaves that require grad (records the graph)
//                          rule, output allocation and the plugin kernel; compare with
//                          BM_RawFunctionPointer (dispatch_bench.cc)
//   BM_AddOut_Tiny         add.out of two 1-element float32 tensors into a float32 out:
//                          dispatch, the meta rule (which returns false: the kernel runs)
//                          and the kernel; no allocation
//   BM_AddOut_Tiny_IntoFloat64  the same into a float64 out: the meta computes into a
//                          float32 temporary and casts it into out (Note [out= of another
//                          dtype]); the price of a mixed-dtype out= in one run
//   BM_Gelu_3M_f32         gelu.out (erf form) of a contiguous [1024, 3072] float32 tensor,
//                          a BERT-base FFN activation, into a preallocated out: oneDNN's
//                          kernel (Note [oneDNN gelu] in plugins/cpu/elementwise.cc)
//   BM_Gelu_3M_f32_Loop    the same values read from rows with a one-element gap (not
//                          contiguous, so the plugin's own loop runs, reading rows in order):
//                          the speed-up of the oneDNN path, in one run
#include <benchmark/benchmark.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"
#include "bench_util.h"

using namespace backplane;

namespace {

constexpr int64_t kMillion = 1 << 20;

Tensor filled(int64_t n, float v) {
  return tensorFromVector<float>(std::vector<float>(static_cast<size_t>(n), v), {n});
}

void BM_Add_1M_f32(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  auto add_out = Dispatcher::singleton()
                     .findOpOrThrow("bp::add.out")
                     .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
  Tensor a = filled(kMillion, 1.5f), b = filled(kMillion, 2.5f), out = filled(kMillion, 0.0f);
  const Scalar one(int64_t{1});
  for (auto _ : state) {
    Tensor r = add_out.call(a, b, one, out);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * kMillion * int64_t{sizeof(float)});
}
BENCHMARK(BM_Add_1M_f32)->UseRealTime();

void BM_Add_1M_f32_Alloc(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  auto add = Dispatcher::singleton()
                 .findOpOrThrow("bp::add.Tensor")
                 .typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>();
  Tensor a = filled(kMillion, 1.5f), b = filled(kMillion, 2.5f);
  const Scalar one(int64_t{1});
  for (auto _ : state) {
    Tensor r = add.call(a, b, one);
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(state.iterations() * 3 * kMillion * int64_t{sizeof(float)});
}
BENCHMARK(BM_Add_1M_f32_Alloc)->UseRealTime();

void BM_Memcpy_Equivalent(benchmark::State& state) {
  const size_t bytes = 3 * kMillion * sizeof(float) / 2;  // read + written = add's 12 MB
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Memcpy_Equivalent)->UseRealTime();

void runGelu(benchmark::State& state, bool gapped_rows) {
  if (!bench::cpuPluginLoaded(state)) return;
  auto gelu_out = Dispatcher::singleton()
                      .findOpOrThrow("bp::gelu.out")
                      .typed<Tensor(const Tensor&, std::string_view, const Tensor&)>();
  constexpr int64_t kRows = 1024, kCols = 3072;
  const int64_t row = gapped_rows ? kCols + 1 : kCols;
  std::vector<float> values(static_cast<size_t>(kRows * row));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) * 0.008f - 4.0f;
  const Tensor x = tensorFromVector<float>(values, {kRows, row}).narrow(1, 0, kCols);
  Tensor out = tensorFromVector<float>(std::vector<float>(static_cast<size_t>(kRows * kCols)), {kRows, kCols});
  for (auto _ : state) {
    Tensor r = gelu_out.call(x, "none", out);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kRows * kCols);
}
void BM_Gelu_3M_f32(benchmark::State& state) { runGelu(state, false); }
void BM_Gelu_3M_f32_Loop(benchmark::State& state) { runGelu(state, true); }
BENCHMARK(BM_Gelu_3M_f32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Gelu_3M_f32_Loop)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Add_Tiny_EndToEnd(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  auto add = Dispatcher::singleton()
                 .findOpOrThrow("bp::add.Tensor")
                 .typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>();
  Tensor a = filled(1, 1.5f), b = filled(1, 2.5f);
  const Scalar one(int64_t{1});
  for (auto _ : state) {
    Tensor r = add.call(a, b, one);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Add_Tiny_EndToEnd);

// The same call on two leaves that require grad: the Autograd kernel runs
// the add below its key and records its node (the graph is freed with r).
void BM_Add_Tiny_EndToEnd_RequiresGrad(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  auto add = Dispatcher::singleton()
                 .findOpOrThrow("bp::add.Tensor")
                 .typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>();
  Tensor a = filled(1, 1.5f), b = filled(1, 2.5f);
  a.requires_grad_();
  b.requires_grad_();
  const Scalar one(int64_t{1});
  for (auto _ : state) {
    Tensor r = add.call(a, b, one);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Add_Tiny_EndToEnd_RequiresGrad);

void runAddOutTiny(benchmark::State& state, ScalarType out_dtype) {
  if (!bench::cpuPluginLoaded(state)) return;
  auto add = Dispatcher::singleton()
                 .findOpOrThrow("bp::add.out")
                 .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
  Tensor a = filled(1, 1.5f), b = filled(1, 2.5f), out = emptyTensor({1}, out_dtype);
  const Scalar one(int64_t{1});
  for (auto _ : state) {
    Tensor r = add.call(a, b, one, out);
    benchmark::DoNotOptimize(r);
  }
}
void BM_AddOut_Tiny(benchmark::State& state) { runAddOutTiny(state, ScalarType::Float32); }
void BM_AddOut_Tiny_IntoFloat64(benchmark::State& state) { runAddOutTiny(state, ScalarType::Float64); }
BENCHMARK(BM_AddOut_Tiny);
BENCHMARK(BM_AddOut_Tiny_IntoFloat64);

}  // namespace
