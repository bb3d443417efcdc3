// Dispatch overhead, as ratios within one run (scripts/bench.sh):
//   BM_RawFunctionPointer     the no-op kernel called through an opaque function pointer
//   BM_DispatchUnboxed_Noop   the same kernel registered for CPU, called typed through the dispatcher
//   BM_DispatchBoxed_Noop     the same op called boxed (stack reused across iterations)
//   BM_PluginKernelCall       a no-op kernel living in a plugin, called typed: the cost of the ABI
//   BM_PluginKernelCall_LinearSignature / _BoxedSignature
//                             the plugin no-op with linear's signature (called typed) and with one no
//                             standard op has (called boxed)
//   BM_PluginKernelDecline_*  a plugin kernel declining every call to the no-op: the cost of a decline
//   BM_PluginKernelWithRule   the plugin no-op behind a plugin rule (m.meta): the cost of a rule
//   BM_LoadAllPlugins         loading every plugin in the default plugin directories
// The no-op returns its input, so every variant pays for the returned Tensor
// handle (one atomic increment and decrement); the ratios isolate dispatch.
#include <benchmark/benchmark.h>

#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"

using namespace backplane;

namespace {

Tensor noop(const Tensor& self) { return self; }

struct Fixture {
  Fixture() : lib("bench") {
    throwIfError(lib.def("noop(Tensor self) -> Tensor"));
    throwIfError(lib.impl("noop", DispatchKey::CPU, BP_FN(noop)));
  }
  Library lib;
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_RawFunctionPointer(benchmark::State& state) {
  Tensor x = emptyTensor({1});
  Tensor (*volatile fn)(const Tensor&) = &noop;  // opaque: the compiler cannot inline it
  for (auto _ : state) {
    Tensor y = fn(x);
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_RawFunctionPointer);

// For scale: the same opaque call on a plain 16-byte struct, with no
// reference count to move (what PyTorch's 3.4 ns raw-call figure measures).
struct Small {
  int64_t a, b;
};
Small passSmall(const Small& s) { return s; }
void BM_RawFunctionPointer_PlainStruct(benchmark::State& state) {
  Small x{1, 2};
  Small (*volatile fn)(const Small&) = &passSmall;
  for (auto _ : state) {
    Small y = fn(x);
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_RawFunctionPointer_PlainStruct);

// The timed loop of the typed no-op benchmarks: one function for both, so
// that the in-process and the plugin kernel are called through identical
// code and their difference is the kernel's side only.
[[gnu::noinline]] void typedNoopLoop(benchmark::State& state, const char* op_name) {
  auto op = Dispatcher::singleton().findOpOrThrow(op_name).typed<Tensor(const Tensor&)>();
  Tensor x = emptyTensor({1});
  for (auto _ : state) {
    Tensor y = op.call(x);
    benchmark::DoNotOptimize(y);
  }
}

void BM_DispatchUnboxed_Noop(benchmark::State& state) {
  fixture();
  typedNoopLoop(state, "bench::noop");
}
BENCHMARK(BM_DispatchUnboxed_Noop);

void BM_DispatchBoxed_Noop(benchmark::State& state) {
  fixture();
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("bench::noop");
  Tensor x = emptyTensor({1});
  Stack stack;
  stack.reserve(4);
  for (auto _ : state) {
    stack.clear();
    stack.emplace_back(x);
    op.callBoxed(stack);
    benchmark::DoNotOptimize(stack.back());
  }
}
BENCHMARK(BM_DispatchBoxed_Noop);

// Loads bench/plugins/bench_plugin once; false (the benchmark skipped) if
// it does not load.
bool benchPluginLoaded(benchmark::State& state) {
  static const absl::Status loaded = plugins().load(BACKPLANE_BENCH_PLUGIN_PATH).status();
  if (!loaded.ok()) state.SkipWithError(std::string(loaded.message()).c_str());
  return loaded.ok();
}

void BM_PluginKernelCall(benchmark::State& state) {
  if (benchPluginLoaded(state)) typedNoopLoop(state, "bench_plugin::noop");
}
BENCHMARK(BM_PluginKernelCall);

// The no-op with linear's signature (Tensor, Tensor, Tensor?): every standard
// op's signature has a typed call (typed_calls.h), so this costs what
// BM_PluginKernelCall does. The same with a signature no standard op has
// (Tensor, float[]), which a plugin's own operator may have: called boxed.
void BM_PluginKernelCall_LinearSignature(benchmark::State& state) {
  if (!benchPluginLoaded(state)) return;
  auto op = Dispatcher::singleton()
                .findOpOrThrow("bench_plugin::noop_linear")
                .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&)>();
  Tensor x = emptyTensor({1});
  const std::optional<Tensor> bias;
  for (auto _ : state) {
    Tensor y = op.call(x, x, bias);
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_PluginKernelCall_LinearSignature);

void BM_PluginKernelCall_BoxedSignature(benchmark::State& state) {
  if (!benchPluginLoaded(state)) return;
  auto op = Dispatcher::singleton()
                .findOpOrThrow("bench_plugin::noop_weights")
                .typed<Tensor(const Tensor&, ArrayRef<double>)>();
  Tensor x = emptyTensor({1});
  const std::vector<double> weights = {0.5};
  for (auto _ : state) {
    Tensor y = op.call(x, weights);
    benchmark::DoNotOptimize(y);
  }
}
BENCHMARK(BM_PluginKernelCall_BoxedSignature);

// Note [Declined calls]: a plugin kernel that declines every call, which then
// runs the plugin's no-op (the kernel registered before it): against
// BM_PluginKernelCall, the cost of one decline, through the C ABI (a
// returned BP_DECLINED) and through the C++ SDK (bp::decline throws).
void BM_PluginKernelDecline_Abi(benchmark::State& state) {
  if (benchPluginLoaded(state)) typedNoopLoop(state, "bench_plugin::declined_raw");
}
BENCHMARK(BM_PluginKernelDecline_Abi);

void BM_PluginKernelDecline_Sdk(benchmark::State& state) {
  if (benchPluginLoaded(state)) typedNoopLoop(state, "bench_plugin::declined_sdk");
}
BENCHMARK(BM_PluginKernelDecline_Sdk);

// Note [A plugin's own operators]: the plugin's no-op with a rule (m.meta)
// the host runs before it; against BM_PluginKernelCall, what the rule costs
// (one more call into the plugin, boxed).
void BM_PluginKernelWithRule(benchmark::State& state) {
  if (benchPluginLoaded(state)) typedNoopLoop(state, "bench_plugin::checked");
}
BENCHMARK(BM_PluginKernelWithRule);

// One iteration: unload (not timed) and load again every plugin that
// loadAll() finds in the default directories.
void BM_LoadAllPlugins(benchmark::State& state) {
  size_t count = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (const PluginStatus& p : plugins().plugins())
      if (p.loaded && p.name != "bench_plugin") (void)plugins().unload(p.name);
    state.ResumeTiming();
    count = 0;
    for (const PluginStatus& p : plugins().loadAll()) count += p.loaded;
  }
  state.counters["plugins"] = static_cast<double>(count);
}
BENCHMARK(BM_LoadAllPlugins)->Unit(benchmark::kMillisecond)->Iterations(20);

}  // namespace

BENCHMARK_MAIN();
