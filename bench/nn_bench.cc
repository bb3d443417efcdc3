// Benchmarks of the "nn" standard operators (scripts/bench.sh).
//
// BM_Conv2d_ResNetBlock is the 3x3 convolution of a ResNet basic block
// (N=1, 64 -> 64 channels, 56x56, stride 1, padding 1, no bias) through the
// dispatcher as an application calls it: a typed call of bp::conv2d (the
// meta kernel checks the arguments, the CPU plugin allocates the output and
// runs oneDNN). BM_OneDNN_Conv2d_ResNetBlock is its baseline: the oneDNN
// convolution primitive the plugin uses (plain nchw activations and oihw
// weights, forward inference), created outside the timed loop and executed
// directly into a preallocated output. Their ratio is the dispatcher's and
// plugin's overhead.
//
// BM_Conv2dBackward_ResNetBlock is the same convolution's backward op,
// bp::conv2d_backward for the input's and the weight's gradients (the CPU
// plugin's oneDNN backward-data and backward-weights primitives), against
// BM_Conv2dBackward_ResNetBlock_Composite, the op's composite (two conv2d
// calls over flipped, dilated and permuted copies: Note [Window op
// gradients]) run directly on the same tensors, which is what the formula
// called before the op had a CPU kernel. Both include output allocation.
//
// BM_LayerNorm_f32 (a [512, 768] activation normalized over its last
// dimension, with weight and bias: a transformer layer's layer_norm) and
// BM_MaxPool2d_f32 (the ResNet stem's pooling: N=1, 64 channels, 112x112,
// kernel 3, stride 2, padding 1) time bp::layer_norm and bp::max_pool2d
// through the dispatcher, output allocation included.
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/standard_ops.h"
#include "backplane/runtime/plugin_registry.h"
#include "bench_util.h"

namespace backplane {
namespace {

using bench::uniformFloats;

constexpr int64_t kChannels = 64, kSize = 56, kKernel = 3;

// Multiply-adds of one convolution, counted as 2 flops each.
int64_t convFlops() { return 2 * kChannels * kChannels * kKernel * kKernel * kSize * kSize; }

void BM_Conv2d_ResNetBlock(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  Tensor x = tensorFromVector(uniformFloats(kChannels * kSize * kSize, 1), {1, kChannels, kSize, kSize});
  Tensor w = tensorFromVector(uniformFloats(kChannels * kChannels * kKernel * kKernel, 2),
                              {kChannels, kChannels, kKernel, kKernel});
  auto conv2d = Dispatcher::singleton()
                    .findOpOrThrow("bp::conv2d")
                    .typed<Tensor(const Tensor&, const Tensor&, const std::optional<Tensor>&, IntArrayRef, IntArrayRef,
                                  IntArrayRef, int64_t)>();
  const std::vector<int64_t> one{1, 1};
  const std::optional<Tensor> no_bias;
  conv2d.call(x, w, no_bias, one, one, one, 1);  // warm-up: primitive creation
  for (auto _ : state) {
    Tensor y = conv2d.call(x, w, no_bias, one, one, one, 1);
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(state.iterations() * convFlops());
}
BENCHMARK(BM_Conv2d_ResNetBlock)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_OneDNN_Conv2d_ResNetBlock(benchmark::State& state) {
  using dnnl::memory;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc src_md({1, kChannels, kSize, kSize}, f32, tag::nchw);
  const memory::desc w_md({kChannels, kChannels, kKernel, kKernel}, f32, tag::oihw);
  const memory::desc dst_md({1, kChannels, kSize, kSize}, f32, tag::nchw);
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                             src_md, w_md, dst_md, {1, 1}, {0, 0}, {1, 1}, {1, 1});
  const dnnl::convolution_forward::primitive_desc pd(desc, engine);
  const dnnl::convolution_forward conv(pd);
  std::vector<float> x = uniformFloats(kChannels * kSize * kSize, 1);
  std::vector<float> w = uniformFloats(kChannels * kChannels * kKernel * kKernel, 2);
  std::vector<float> y(static_cast<size_t>(kChannels * kSize * kSize));
  memory src(src_md, engine, x.data()), weights(w_md, engine, w.data()), dst(dst_md, engine, y.data());
  for (auto _ : state) {
    conv.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * convFlops());
  state.SetLabel(pd.impl_info_str());
}
BENCHMARK(BM_OneDNN_Conv2d_ResNetBlock)->Unit(benchmark::kMicrosecond)->UseRealTime();

// conv2d_backward's arguments for the ResNet block: grad_output, input,
// weight, stride, padding, dilation, groups, output_mask (input and weight).
Stack convBackwardArgs() {
  Tensor x = tensorFromVector(uniformFloats(kChannels * kSize * kSize, 1), {1, kChannels, kSize, kSize});
  Tensor w = tensorFromVector(uniformFloats(kChannels * kChannels * kKernel * kKernel, 2),
                              {kChannels, kChannels, kKernel, kKernel});
  Tensor g = tensorFromVector(uniformFloats(kChannels * kSize * kSize, 7), {1, kChannels, kSize, kSize});
  const std::vector<int64_t> one{1, 1};
  return {g, x, w, one, one, one, int64_t{1}, std::vector<bool>{true, true, false}};
}

void BM_Conv2dBackward_ResNetBlock(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  const Stack args = convBackwardArgs();
  using Sig = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, IntArrayRef, IntArrayRef,
                                                 IntArrayRef, int64_t, std::array<bool, 3>);
  auto op = Dispatcher::singleton().findOpOrThrow("bp::conv2d_backward").typed<Sig>();
  const std::vector<int64_t> one{1, 1};
  auto run = [&] {
    return op.call(args[0].toTensor(), args[1].toTensor(), args[2].toTensor(), one, one, one, 1, {true, true, false});
  };
  run();  // warm-up: primitive creation
  for (auto _ : state) {
    auto grads = run();
    benchmark::DoNotOptimize(grads);
  }
  state.SetItemsProcessed(state.iterations() * 2 * convFlops());
}
BENCHMARK(BM_Conv2dBackward_ResNetBlock)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_Conv2dBackward_ResNetBlock_Composite(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  const Stack args = convBackwardArgs();
  const OperatorHandle op = Dispatcher::singleton().findOpOrThrow("bp::conv2d_backward");
  const KernelFunction& composite = findStandardOp("conv2d_backward")->composite;
  const DispatchKeySet keys(DispatchKey::CPU);
  auto run = [&] {
    Stack stack = args;
    composite.callBoxed(op, keys, &stack);
    return stack;
  };
  run();  // warm-up: primitive creation
  for (auto _ : state) {
    Stack grads = run();
    benchmark::DoNotOptimize(grads);
  }
  state.SetItemsProcessed(state.iterations() * 2 * convFlops());
}
BENCHMARK(BM_Conv2dBackward_ResNetBlock_Composite)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LayerNorm_f32(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  constexpr int64_t kRows = 512, kCols = 768;
  Tensor x = tensorFromVector(uniformFloats(kRows * kCols, 3), {kRows, kCols});
  const std::optional<Tensor> w = tensorFromVector(uniformFloats(kCols, 4), {kCols});
  const std::optional<Tensor> b = tensorFromVector(uniformFloats(kCols, 5), {kCols});
  auto layer_norm = Dispatcher::singleton()
                        .findOpOrThrow("bp::layer_norm")
                        .typed<Tensor(const Tensor&, IntArrayRef, const std::optional<Tensor>&,
                                      const std::optional<Tensor>&, double, bool)>();
  const std::vector<int64_t> normalized{kCols};
  layer_norm.call(x, normalized, w, b, 1e-5, true);  // warm-up: primitive creation
  for (auto _ : state) {
    Tensor y = layer_norm.call(x, normalized, w, b, 1e-5, true);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kRows * kCols * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_LayerNorm_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_MaxPool2d_f32(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  constexpr int64_t kSide = 112;
  Tensor x = tensorFromVector(uniformFloats(kChannels * kSide * kSide, 6), {1, kChannels, kSide, kSide});
  auto max_pool2d = Dispatcher::singleton()
                        .findOpOrThrow("bp::max_pool2d")
                        .typed<Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool)>();
  const std::vector<int64_t> kernel{3, 3}, stride{2, 2}, padding{1, 1}, dilation{1, 1};
  max_pool2d.call(x, kernel, stride, padding, dilation, false);  // warm-up: primitive creation
  for (auto _ : state) {
    Tensor y = max_pool2d.call(x, kernel, stride, padding, dilation, false);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(state.iterations() * kChannels * kSide * kSide * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_MaxPool2d_f32)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace backplane
