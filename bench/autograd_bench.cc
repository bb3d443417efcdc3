// Autograd's cost on the BERT-base encoder layer (samples/encoder), CPU,
// float32, every weight a leaf that requires grad:
//   BM_EncoderLayer_Forward_Recorded   the forward, recording its graph (freed each iteration)
//   BM_EncoderLayer_ForwardBackward    the same forward, then backward into every weight's grad
// The backward's own time is the difference; scripts/bench_ratios.py reports
// ForwardBackward / Forward_Recorded, whose target (backward <= 2.2x the
// forward) is <= 3.2x.
#include <benchmark/benchmark.h>

#include <vector>

#include "backplane/autograd/autograd.h"
#include "bench_util.h"
#include "encoder.h"

namespace {

using namespace backplane;

struct EncoderSetup {
  encoder::EncoderWeights weights = encoder::EncoderWeights::random(encoder::EncoderConfig{}, 7);
  encoder::EncoderBatch batch = encoder::EncoderBatch::random(encoder::EncoderConfig{}, 7);
  std::vector<Tensor> parameters;
  Tensor out_grad;
  EncoderSetup() {
    parameters = weights.parameters();
    for (const Tensor& p : parameters) p.requires_grad_();
    const encoder::EncoderConfig c;
    out_grad = Tensor(emptyTensor({c.batch, c.seq, c.hidden})).fill_(1.0 / 1024);
  }
};

void BM_EncoderLayer_Forward_Recorded(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  static EncoderSetup s;
  for (auto _ : state) {
    Tensor out = encoder::encoderLayer(s.weights, s.batch);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_EncoderLayer_Forward_Recorded)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_EncoderLayer_ForwardBackward(benchmark::State& state) {
  if (!bench::cpuPluginLoaded(state)) return;
  static EncoderSetup s;
  for (auto _ : state) {
    encoder::encoderLayer(s.weights, s.batch).backward(s.out_grad);
    for (const Tensor& p : s.parameters) p.set_grad(Tensor());
  }
}
BENCHMARK(BM_EncoderLayer_ForwardBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
