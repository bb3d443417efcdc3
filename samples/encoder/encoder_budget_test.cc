// The encoder layer on the GPU simulator, held to the budgets that make a
// GPU performance bug visible on a machine without a GPU: no op moves bytes
// between the host and the device except the app's own moves of its input
// and output, a fixed number of kernel launches per layer, and a fixed
// number of synchronising reads of device memory (Note [Launch counters] in
// plugins/gpu/gpu_port.h, Note [Counting host<->device transfers] in
// backplane/core/transfers.h). A kernel that stages through the host, a
// composite that copies what a view could express, or an op that starts
// launching per element fails here, in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/core/transfers.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/stream.h"
#include "encoder.h"
#include "test_config.h"

namespace encoder {
namespace {

using namespace backplane;

// The budget of one layer, counted on the simulator (the CUDA and HIP
// plugins run the same host code, so they launch the same kernels). When a
// change lowers a count, lower the budget with it; when one raises it, the
// change has to say why here. Launches (25 native kernel calls):
//   embedding: index_select (the gather, which checks its indices as it
//   reads them: 1), + positions (1)
//   6 linears: bias broadcast into the output + GEMM (12)
//   3 layer_norms (3), 2 residual adds (2), gelu (1)
//   attention: the heads of q, k^T and v copied into one batch stride for
//   bmm (3) and 2 bmms (2); the scale (1: the GPU plugins' mul takes the
//   number as a CPU scalar, Note [CPU scalars as kernel arguments]); arange
//   + ge for the padding mask (2); masked_fill (1); softmax (1); the merged
//   heads' reshape copy (1)
constexpr int64_t kLaunchesPerLayer = 31;
//   host reads: none. No standard op waits for the device: an index out of
//   range is reported at the next synchronization (Note [Deferred device
//   errors] in plugins/gpu/device_errors.h).
constexpr int64_t kHostReadsPerLayer = 0;

class EncoderBudgetTest : public ::testing::Test {
 protected:
  // The CPU plugin from the build tree's plugin directory, and the
  // simulator by path (it is not in any default directory).
  static Runtime& runtime() {
    static Runtime runtime([] {
      RuntimeOptions o;
      o.plugin_paths = {BACKPLANE_GPUSIM_PLUGIN_PATH};
      return o;
    }());
    return runtime;
  }
  static void SetUpTestSuite() { runtime(); }
  static int64_t activity(std::string_view name) {
    static const auto stat =
        Dispatcher::singleton().findOpOrThrow("gpusim::activity_stat").typed<int64_t(std::string_view)>();
    return stat.call(name);
  }
  static Device sim() { return runtime().device("gpusim:0"); }
};

TEST_F(EncoderBudgetTest, NoOpMovesBytesBetweenHostAndDeviceButTheAppsOwnMoves) {
  const EncoderWeights weights = EncoderWeights::random(smallConfig(), 7);
  const EncoderBatch batch = EncoderBatch::random(smallConfig(), 7);

  Profiler profiler;
  const EncoderWeights w = weights.to(sim());
  const EncoderBatch b = batch.to(sim());
  const TransferCount before_layer = hostDeviceTransfers();
  const Tensor out = encoderLayer(w, b);
  const TransferCount after_layer = hostDeviceTransfers();
  const Tensor result = out.cpu();
  profiler.stop();

  EXPECT_EQ(after_layer.bytes - before_layer.bytes, 0u) << profiler.report().table();
  EXPECT_EQ(after_layer.copies - before_layer.copies, 0u);

  // Every byte the report attributes is one of the app's own moves: to()
  // of the weights and the batch, cpu() of the result, each a copy_ between
  // devices. Nothing inside the layer shows up.
  uint64_t expected = result.nbytes() + batch.token_ids.nbytes() + batch.lengths.nbytes();
  for (const Tensor& t : weights.parameters()) expected += t.nbytes();
  const OpReport report = profiler.report();
  uint64_t reported = 0;
  for (const OpStats& row : report.ops) {
    if (row.transfer_bytes != 0) {
      EXPECT_EQ(row.op, "bp::copy_") << "only the app's moves may cross; " << row.op << " moved "
                                     << formatBytes(row.transfer_bytes) << "\n"
                                     << report.table();
    }
    reported += row.transfer_bytes;
    EXPECT_EQ(row.fallbackCalls(), 0u) << row.op << " fell back\n" << report.table();
  }
  EXPECT_EQ(reported, expected) << report.table();
  EXPECT_NE(report.summary().find("host<->device: " + formatBytes(expected) + " in "), std::string::npos)
      << report.summary();
}

TEST_F(EncoderBudgetTest, OneLayerStaysWithinItsLaunchAndHostReadBudget) {
  const EncoderWeights w = EncoderWeights::random(smallConfig(), 7).to(sim());
  const EncoderBatch b = EncoderBatch::random(smallConfig(), 7).to(sim());
  encoderLayer(w, b);  // a first layer: nothing is cached between layers, but be sure
  const int64_t launches = activity("kernel_launches"), reads = activity("host_reads");
  const Tensor out = encoderLayer(w, b);
  const int64_t layer_launches = activity("kernel_launches") - launches;
  const int64_t layer_reads = activity("host_reads") - reads;
  EXPECT_EQ(out.device(), sim());
  EXPECT_LE(layer_launches, kLaunchesPerLayer) << "the layer launched more kernels than its budget";
  EXPECT_GE(layer_launches, kLaunchesPerLayer - 4)
      << "the layer launched far fewer kernels than its budget: lower kLaunchesPerLayer to " << layer_launches
      << " so that the budget keeps catching regressions";
  EXPECT_EQ(layer_reads, kHostReadsPerLayer) << "the layer waited for the device";
}

// The layer's block (from the embedded tokens, a leaf that requires grad)
// forward and backward, as cuda_bench's BM_Cuda_EncoderLayer_ForwardBackward_f32
// times it: a backward that starts waiting for the device, copying what a
// view could express or launching per element fails here. Launches:
//   forward: the layer's 31 less the embedding's 3 (28)
//   backward: 6 products' input and weight gradients (12 mm) and bias
//   gradients (6 sums); the 2 bmms' 4 operand gradients (4); the 2
//   layer_norms' input and parameter gradients (2 each: 4); the softmax's,
//   the padding mask's (masked_fill of the gradient), the scale's (mul) and
//   gelu's (1 each: 4); the heads of q, k and v's gradients and the merged
//   heads' copied back into rows for the products (4); the 4 additions of
//   gradients reaching x and y along two paths (4). 38 in all.
// These are the simulator's counts at smallConfig, whose 32 rows are too few
// for the 6 bias sums and the 2 layer_norm parameter sums to split across
// blocks (Note [Split reductions] in plugins/gpu/block_reduce.cuh). At
// BERT-base on a GPU of many multiprocessors (an H100's 132) each of those
// 8 splits and adds a launch that merges its parts: 74 there.
constexpr int64_t kLaunchesPerForwardBackward = 66;

TEST_F(EncoderBudgetTest, ForwardAndBackwardStayWithinTheirLaunchAndHostReadBudget) {
  const BlockGradients block(EncoderWeights::random(smallConfig(), 7).to(sim()),
                             EncoderBatch::random(smallConfig(), 7).to(sim()), 0.5);
  block.step();
  const int64_t launches = activity("kernel_launches"), reads = activity("host_reads");
  block.step();
  const int64_t step_launches = activity("kernel_launches") - launches;
  EXPECT_LE(step_launches, kLaunchesPerForwardBackward)
      << "forward and backward launched more kernels than their budget";
  EXPECT_GE(step_launches, kLaunchesPerForwardBackward - 4)
      << "forward and backward launched far fewer kernels than their budget: lower kLaunchesPerForwardBackward to "
      << step_launches << " so that the budget keeps catching regressions";
  EXPECT_EQ(activity("host_reads") - reads, 0) << "forward or backward waited for the device";
}

// Note [Graphs in the application API]: the layer captured once replays
// to the eager result, bit for bit (the same kernels in the same order),
// with one graph launch and no kernel launched by the host; refilled in
// place with another batch's tokens, it gives that batch's result.
TEST_F(EncoderBudgetTest, TheLayerCapturedAsAGraphReplaysToTheEagerResult) {
  const EncoderWeights w = EncoderWeights::random(smallConfig(), 7).to(sim());
  EncoderBatch b = EncoderBatch::random(smallConfig(), 7).to(sim());
  const EncoderBatch other = EncoderBatch::random(smallConfig(), 8).to(sim());
  const std::vector<float> eager = encoderLayer(w, b).cpu().contiguous().toVector<float>();
  const std::vector<float> eager_other = encoderLayer(w, other).cpu().contiguous().toVector<float>();
  ASSERT_NE(eager, eager_other);
  Stream side = Stream::create(sim());
  Tensor out;
  const Graph layer = Graph::capture(side, [&] { out = encoderLayer(w, b); });
  const int64_t launches = activity("kernel_launches");
  layer.replay();
  side.synchronize();
  EXPECT_EQ(activity("kernel_launches"), launches) << "the replay launched kernels from the host";
  EXPECT_EQ(out.device(), sim());
  {
    StreamGuard on(side);
    EXPECT_EQ(out.cpu().contiguous().toVector<float>(), eager);
  }
  b.token_ids.copy_(other.token_ids);
  b.lengths.copy_(other.lengths);
  layer.replay();
  side.synchronize();
  StreamGuard on(side);
  EXPECT_EQ(out.cpu().contiguous().toVector<float>(), eager_other);
}

TEST_F(EncoderBudgetTest, UnknownActivityStatisticIsAnErrorNamingTheKnownOnes) {
  try {
    activity("launches");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown statistic 'launches'; use kernel_launches, host_reads, "
                                         "host_read_bytes or graph_launches"),
              std::string::npos)
        << e.what();
  }
}

// Forward plus backward (docs/autograd.md) on the simulator: the backward's
// formulas are ops of the device the forward ran on, so no byte crosses
// between host and device and no op falls back; the gradients of every
// weight equal the CPU's.
TEST_F(EncoderBudgetTest, ForwardAndBackwardMoveNoBytesAndMatchTheCpu) {
  const EncoderBatch batch = EncoderBatch::random(smallConfig(), 7);
  auto gradients = [&](Device device, TransferCount* moved, std::string* table) {
    // Fresh weights from the same seed for each device, made leaves there.
    const EncoderWeights w = EncoderWeights::random(smallConfig(), 7).to(device);
    const EncoderBatch b = batch.to(device);
    for (const Tensor& p : w.parameters()) p.requires_grad_();
    const Tensor out_grad =
        Tensor(tensorFromVector<float>(
                   std::vector<float>(static_cast<size_t>(batch.token_ids.numel() * smallConfig().hidden), 0.5f),
                   {batch.token_ids.size(0), batch.token_ids.size(1), smallConfig().hidden}))
            .to(device);
    Profiler profiler;
    const TransferCount before = hostDeviceTransfers();
    encoderLayer(w, b).backward(out_grad);
    const TransferCount after = hostDeviceTransfers();
    profiler.stop();
    if (moved) *moved = TransferCount{after.bytes - before.bytes, after.copies - before.copies};
    if (table) *table = profiler.report().table();
    std::vector<Tensor> grads;
    for (const Tensor& p : w.parameters()) grads.push_back(p.grad().cpu());
    return grads;
  };
  TransferCount moved;
  std::string table;
  const std::vector<Tensor> on_sim = gradients(sim(), &moved, &table);
  EXPECT_EQ(moved.bytes, 0u) << table;
  EXPECT_EQ(moved.copies, 0u) << table;
  const std::vector<Tensor> on_cpu = gradients(Device(DeviceType::CPU), nullptr, nullptr);
  ASSERT_EQ(on_sim.size(), on_cpu.size());
  for (size_t i = 0; i < on_sim.size(); ++i) {
    ASSERT_TRUE(on_sim[i].defined() && on_cpu[i].defined()) << "parameter " << i << " got no gradient";
    const std::vector<float> a = on_sim[i].toVector<float>(), e = on_cpu[i].toVector<float>();
    ASSERT_EQ(a.size(), e.size());
    for (size_t j = 0; j < a.size(); ++j)
      ASSERT_NEAR(a[j], e[j], 1e-3 + 1e-3 * std::abs(e[j])) << "parameter " << i << " element " << j;
  }
}

}  // namespace
}  // namespace encoder
