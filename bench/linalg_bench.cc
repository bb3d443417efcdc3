// Benchmarks of the "linalg" standard operators (scripts/bench.sh).
//
// BM_Matmul_512_f32 is a 512x512 @ 512x512 float32 product through the
// dispatcher as an application makes it: a typed call of bp::mm.out into a
// preallocated `out` (the meta kernel checks the arguments, the CPU
// plugin's kernel runs oneDNN). BM_OneDNN_Matmul_512_f32 is its baseline:
// the oneDNN matmul primitive the plugin uses (the same descriptors: a
// batch of one, row-major), created outside the timed loop and executed
// directly. Their ratio is the dispatcher's and plugin's overhead.
//
// BM_Linear_f32 is a transformer-sized linear layer through the dispatcher:
// bp::linear(input [512, 768], weight [3072, 768], bias [3072]), the result
// allocated per call as applications get it. BM_OneDNN_Linear_f32 is its
// baseline: the oneDNN matmul with a bias argument that the CPU plugin's
// kernel runs (weight read transposed through its strides), into a
// preallocated buffer.
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <optional>
#include <random>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"
#include "bench_util.h"

namespace backplane {
namespace {

using bench::uniformFloats;

constexpr int64_t kN = 512;

// The 512 product through the dispatcher: its operands, its preallocated
// out, and one call of mm.out (made once here: the warm-up, primitive
// creation).
struct Product512 {
  Tensor a = tensorFromVector(uniformFloats(static_cast<size_t>(kN * kN), 1), {kN, kN});
  Tensor b = tensorFromVector(uniformFloats(static_cast<size_t>(kN * kN), 2), {kN, kN});
  Tensor out = emptyTensor({kN, kN}, ScalarType::Float32);
  TypedOperatorHandle<Tensor(const Tensor&, const Tensor&, const Tensor&)> mm_out =
      Dispatcher::singleton().findOpOrThrow("bp::mm.out").typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  Product512() { call(); }
  void call() {
    Tensor r = mm_out.call(a, b, out);
    benchmark::DoNotOptimize(r);
  }
};

void BM_Matmul_512_f32(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  Product512 product;
  for (auto _ : state) product.call();
  state.SetItemsProcessed(state.iterations() * 2 * kN * kN * kN);  // flops
}
BENCHMARK(BM_Matmul_512_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_OneDNN_Matmul_512_f32(benchmark::State& state) {
  using dt = dnnl::memory::data_type;
  const size_t n = static_cast<size_t>(kN * kN);
  std::vector<float> a = uniformFloats(n, 1), b = uniformFloats(n, 2), c(n);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const dnnl::memory::desc md({1, kN, kN}, dt::f32, dnnl::memory::dims{kN * kN, kN, 1});
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng));
  dnnl::memory ma(md, eng, a.data()), mb(md, eng, b.data()), mc(md, eng, c.data());
  prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});  // warm-up
  s.wait();
  for (auto _ : state) {
    prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    s.wait();
    benchmark::DoNotOptimize(c.data());
  }
  state.SetItemsProcessed(state.iterations() * 2 * kN * kN * kN);
}
BENCHMARK(BM_OneDNN_Matmul_512_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The same two products with a model's other ops between calls, as in every
// layer: a bias add, gelu, layer_norm and softmax on a [512, 768]
// activation, each allocating its result through the dispatcher. Only the
// product is timed (manual time), so the ratio of the two says whether
// Backplane's product keeps its speed where other ops ran just before it
// (their threads, their cache lines, their allocations): an earlier
// whole-program run lost 10-36% there while oneDNN called directly did not.
class OpsBetween {
 public:
  OpsBetween()
      : x_(tensorFromVector(uniformFloats(static_cast<size_t>(kAct * kWidth), 4), {kAct, kWidth})),
        bias_(tensorFromVector(uniformFloats(static_cast<size_t>(kWidth), 5), {kWidth})),
        add_(op("bp::add.Tensor").typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>()),
        gelu_(op("bp::gelu").typed<Tensor(const Tensor&, std::string_view)>()),
        layer_norm_(op("bp::layer_norm")
                        .typed<Tensor(const Tensor&, IntArrayRef, const std::optional<Tensor>&,
                                      const std::optional<Tensor>&, double, bool)>()),
        softmax_(op("bp::softmax.int").typed<Tensor(const Tensor&, int64_t, std::optional<ScalarType>)>()) {}
  void run() {
    Tensor h = add_.call(x_, bias_, 1);
    h = gelu_.call(h, "none");
    const std::vector<int64_t> width{kWidth};
    h = layer_norm_.call(h, width, std::nullopt, std::nullopt, 1e-5, true);
    h = softmax_.call(h, -1, std::nullopt);
    benchmark::DoNotOptimize(h);
  }

 private:
  static constexpr int64_t kAct = 512, kWidth = 768;
  static OperatorHandle op(const char* name) { return Dispatcher::singleton().findOpOrThrow(name); }
  Tensor x_, bias_;
  TypedOperatorHandle<Tensor(const Tensor&, const Tensor&, const Scalar&)> add_;
  TypedOperatorHandle<Tensor(const Tensor&, std::string_view)> gelu_;
  TypedOperatorHandle<Tensor(const Tensor&, IntArrayRef, const std::optional<Tensor>&, const std::optional<Tensor>&,
                             double, bool)>
      layer_norm_;
  TypedOperatorHandle<Tensor(const Tensor&, int64_t, std::optional<ScalarType>)> softmax_;
};

// Runs `between`, then times `product` alone, per iteration.
template <typename F>
void timeProductAfterOps(benchmark::State& state, F&& product) {
  OpsBetween between;
  for (auto _ : state) {
    between.run();
    const auto start = std::chrono::steady_clock::now();
    product();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetItemsProcessed(state.iterations() * 2 * kN * kN * kN);
}

void BM_Matmul_512_f32_Interleaved(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  Product512 product;
  timeProductAfterOps(state, [&] { product.call(); });
}
BENCHMARK(BM_Matmul_512_f32_Interleaved)->Unit(benchmark::kMicrosecond)->UseManualTime();

void BM_OneDNN_Matmul_512_f32_Interleaved(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;  // for the ops between
  using dt = dnnl::memory::data_type;
  const size_t n = static_cast<size_t>(kN * kN);
  std::vector<float> a = uniformFloats(n, 1), b = uniformFloats(n, 2), c(n);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const dnnl::memory::desc md({1, kN, kN}, dt::f32, dnnl::memory::dims{kN * kN, kN, 1});
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng));
  dnnl::memory ma(md, eng, a.data()), mb(md, eng, b.data()), mc(md, eng, c.data());
  prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  s.wait();
  timeProductAfterOps(state, [&] {
    prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    s.wait();
    benchmark::DoNotOptimize(c.data());
  });
}
BENCHMARK(BM_OneDNN_Matmul_512_f32_Interleaved)->Unit(benchmark::kMicrosecond)->UseManualTime();

constexpr int64_t kRows = 512, kIn = 768, kOut = 3072;

void BM_Linear_f32(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  Tensor x = tensorFromVector(uniformFloats(static_cast<size_t>(kRows * kIn), 1), {kRows, kIn});
  Tensor w = tensorFromVector(uniformFloats(static_cast<size_t>(kOut * kIn), 2), {kOut, kIn});
  std::optional<Tensor> bias = tensorFromVector(uniformFloats(static_cast<size_t>(kOut), 3), {kOut});
  auto linear = Dispatcher::singleton()
                    .findOpOrThrow("bp::linear")
                    .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&)>();
  linear.call(x, w, bias);  // warm-up: primitive creation
  for (auto _ : state) {
    Tensor r = linear.call(x, w, bias);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * 2 * kRows * kIn * kOut);  // flops
}
BENCHMARK(BM_Linear_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A feed-forward layer's first dense layer and its gelu, the same shapes as
// BM_Linear_f32: fused in one _addmm_activation call (Note [Fused
// activation products]: the CPU plugin's oneDNN product with a gelu
// post-op), and unfused, linear then gelu. Against each other: what fusing
// saves; the fused one against BM_Linear_f32: what the gelu epilogue costs.
void runDenseGelu(benchmark::State& state, bool fused) {
  if (!bench::cpuPluginLoaded(state)) return;
  Tensor x = tensorFromVector(uniformFloats(static_cast<size_t>(kRows * kIn), 1), {kRows, kIn});
  Tensor w = tensorFromVector(uniformFloats(static_cast<size_t>(kOut * kIn), 2), {kOut, kIn});
  Tensor bias = tensorFromVector(uniformFloats(static_cast<size_t>(kOut), 3), {kOut});
  auto fused_op = Dispatcher::singleton()
                      .findOpOrThrow("bp::_addmm_activation")
                      .typed<Tensor(const Tensor&, const Tensor&, const Tensor&, const Scalar&, const Scalar&, bool)>();
  auto linear = Dispatcher::singleton()
                    .findOpOrThrow("bp::linear")
                    .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&)>();
  auto gelu = Dispatcher::singleton().findOpOrThrow("bp::gelu").typed<Tensor(const Tensor&, std::string_view)>();
  const Tensor wt = w.t();
  auto run = [&] {
    return fused ? fused_op.call(bias, x, wt, 1, 1, true) : gelu.call(linear.call(x, w, bias), "none");
  };
  run();  // warm-up: primitive creation
  for (auto _ : state) {
    Tensor r = run();
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * 2 * kRows * kIn * kOut);  // flops
}
void BM_LinearGelu_Fused_f32(benchmark::State& state) { runDenseGelu(state, true); }
void BM_LinearGelu_Unfused_f32(benchmark::State& state) { runDenseGelu(state, false); }
BENCHMARK(BM_LinearGelu_Fused_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_LinearGelu_Unfused_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

// linear.out, derived from linear (Note [Derived out= forms]): the same
// product into a temporary, then one copy into `out`. Against BM_Linear_f32
// at one size and BM_Linear_Tiny at a tiny one, its cost shows: the copy,
// and the boxed call the derived form makes.
void runLinearOut(benchmark::State& state, int64_t rows, int64_t in, int64_t out_features) {
  if (!bench::cpuPluginLoaded(state)) return;
  Tensor x = tensorFromVector(uniformFloats(static_cast<size_t>(rows * in), 1), {rows, in});
  Tensor w = tensorFromVector(uniformFloats(static_cast<size_t>(out_features * in), 2), {out_features, in});
  std::optional<Tensor> bias = tensorFromVector(uniformFloats(static_cast<size_t>(out_features), 3), {out_features});
  Tensor out = emptyTensor({rows, out_features}, ScalarType::Float32);
  auto linear_out = Dispatcher::singleton()
                        .findOpOrThrow("bp::linear.out")
                        .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&, const Tensor&)>();
  linear_out.call(x, w, bias, out);
  for (auto _ : state) {
    Tensor r = linear_out.call(x, w, bias, out);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * 2 * rows * in * out_features);
}
void BM_LinearOut_f32(benchmark::State& state) { runLinearOut(state, kRows, kIn, kOut); }
BENCHMARK(BM_LinearOut_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Linear_Tiny(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  Tensor x = tensorFromVector(uniformFloats(8, 1), {2, 4});
  Tensor w = tensorFromVector(uniformFloats(16, 2), {4, 4});
  std::optional<Tensor> bias = tensorFromVector(uniformFloats(4, 3), {4});
  auto linear = Dispatcher::singleton()
                    .findOpOrThrow("bp::linear")
                    .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&)>();
  for (auto _ : state) {
    Tensor r = linear.call(x, w, bias);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Linear_Tiny);
void BM_LinearOut_Tiny(benchmark::State& state) { runLinearOut(state, 2, 4, 4); }
BENCHMARK(BM_LinearOut_Tiny);

void BM_OneDNN_Linear_f32(benchmark::State& state) {
  using dt = dnnl::memory::data_type;
  std::vector<float> x = uniformFloats(static_cast<size_t>(kRows * kIn), 1);
  std::vector<float> w = uniformFloats(static_cast<size_t>(kOut * kIn), 2);
  std::vector<float> bias = uniformFloats(static_cast<size_t>(kOut), 3);
  std::vector<float> y(static_cast<size_t>(kRows * kOut));
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const dnnl::memory::desc src({1, kRows, kIn}, dt::f32, dnnl::memory::dims{kRows * kIn, kIn, 1});
  // weight [out, in] row-major, read as [in, out] (column-major): no copy.
  const dnnl::memory::desc wei({1, kIn, kOut}, dt::f32, dnnl::memory::dims{kIn * kOut, 1, kIn});
  const dnnl::memory::desc bia({1, 1, kOut}, dt::f32, dnnl::memory::dims{kOut, kOut, 1});
  const dnnl::memory::desc dst({1, kRows, kOut}, dt::f32, dnnl::memory::dims{kRows * kOut, kOut, 1});
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bia, dst), eng));
  dnnl::memory mx(src, eng, x.data()), mw(wei, eng, w.data()), mb(bia, eng, bias.data()), my(dst, eng, y.data());
  auto run = [&] {
    prim.execute(s, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, my}});
    s.wait();
  };
  run();  // warm-up
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * 2 * kRows * kIn * kOut);
}
BENCHMARK(BM_OneDNN_Linear_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace backplane
