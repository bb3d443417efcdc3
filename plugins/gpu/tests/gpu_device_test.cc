// The real GPU plugins' kernels against the CPU plugin, on a machine with a
// GPU (every test skips without one): a few ops of each family, the same
// random numbers for the same seed, and the caching allocator's statistics.
// The simulator runs the full conformance suite in CI; this is the check
// that the same code does the same on the hardware.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/random.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/stream.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

using gpu_test::GpuPlugin;

class GpuDeviceTest : public ::testing::TestWithParam<GpuPlugin> {
 protected:
  void SetUp() override {
    rt_ = gpu_test::runtimeWith(GetParam().path);
    if (!gpu_test::hasDevice(*rt_, dev0())) GTEST_SKIP() << "no " << GetParam().type << " device here";
    dev_ = Device::fromString(dev0());
  }
  std::string dev0() const { return std::string(GetParam().type) + ":0"; }
  int64_t stat(std::string_view name) const {
    return Dispatcher::singleton()
        .findOpOrThrow(std::string(GetParam().type) + "::memory_stat")
        .typed<int64_t(std::string_view, int64_t)>()
        .call(name, 0);
  }

  // |gpu - cpu| <= atol + rtol * |cpu| elementwise, after moving to the cpu.
  static void expectClose(const Tensor& gpu, const Tensor& cpu, double atol, double rtol) {
    ASSERT_EQ(gpu.sizes(), cpu.sizes());
    const std::vector<double> g = gpu.cpu().to(ScalarType::Float64).contiguous().toVector<double>();
    const std::vector<double> c = cpu.to(ScalarType::Float64).contiguous().toVector<double>();
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_LE(std::abs(g[i] - c[i]), atol + rtol * std::abs(c[i]))
          << "element " << i << ": " << g[i] << " vs " << c[i];
    }
  }

  std::unique_ptr<Runtime> rt_;
  Device dev_{DeviceType::CPU};
};

TEST_P(GpuDeviceTest, ElementwiseWithBroadcastingAndStrides) {
  Tensor a = randn({64, 33});
  Tensor b = randn({33});
  Tensor ga = a.to(dev_), gb = b.to(dev_);
  expectClose(add(ga, gb, 2), add(a, b, 2), 1e-6, 1e-6);
  expectClose(mul(ga.t(), ga.t()), mul(a.t(), a.t()), 1e-6, 1e-6);
  expectClose(exp(ga), exp(a), 1e-6, 1e-5);
  expectClose(gelu(ga), gelu(a), 1e-6, 1e-5);
  expectClose(add(ga.to(ScalarType::Float16), gb.to(ScalarType::Float16)),
              add(a.to(ScalarType::Float16), b.to(ScalarType::Float16)), 0, 0);
}

TEST_P(GpuDeviceTest, Float16AndBFloat16CastsFollowTheRuleEveryLayerShares) {
  // The device's conversion kernels, compiled by nvcc or hipcc, give the
  // bits of the host's types (Note [16-bit float conversions]).
  float16_test::expectFloat16ConversionsFollowTheRule(gpu_test::castsOn(dev_));
}

TEST_P(GpuDeviceTest, ReductionsAndNorms) {
  Tensor x = randn({17, 300});
  Tensor g = x.to(dev_);
  expectClose(sum(g, {1}), sum(x, {1}), 1e-4, 1e-5);
  expectClose(amax(g, {0}), amax(x, {0}), 0, 0);
  expectClose(softmax(g, 1), softmax(x, 1), 1e-6, 1e-5);
  expectClose(log_softmax(g, 0), log_softmax(x, 0), 1e-5, 1e-5);
  Tensor w = randn({300}), bias = randn({300});
  expectClose(layer_norm(g, {300}, w.to(dev_), bias.to(dev_)), layer_norm(x, {300}, w, bias), 1e-4, 1e-4);
}

TEST_P(GpuDeviceTest, MatrixProducts) {
  Tensor a = randn({65, 130}), b = randn({130, 47});
  expectClose(matmul(a.to(dev_), b.to(dev_)), matmul(a, b), 1e-3, 1e-4);
  Tensor x = randn({3, 20, 30}), y = randn({3, 30, 10});
  expectClose(bmm(x.to(dev_), y.to(dev_)), bmm(x, y), 1e-3, 1e-4);
  Tensor h = a.to(ScalarType::Float16), k = b.to(ScalarType::Float16);
  expectClose(mm(h.to(dev_), k.to(dev_)), mm(h, k), 0.05, 0.01);
}

TEST_P(GpuDeviceTest, DataMovement) {
  Tensor a = randn({4, 5}), b = randn({4, 3});
  expectClose(cat({a.to(dev_), b.to(dev_)}, 1), cat({a, b}, 1), 0, 0);
  Tensor idx = tensorFromVector<int64_t>({3, 0, 3, 1}, {4});
  expectClose(index_select(a.to(dev_), 0, idx.to(dev_)), index_select(a, 0, idx), 0, 0);
  expectClose(a.to(dev_).t().contiguous(), a.t().contiguous(), 0, 0);
}

TEST_P(GpuDeviceTest, SameSeedSameRandomNumbersAsTheCpu) {
  manualSeed(1234);
  Tensor c = randn({1000});
  manualSeed(1234);
  Tensor g = randn({1000}, {.device = dev_});
  expectClose(g, c, 1e-6, 1e-6);
}

TEST_P(GpuDeviceTest, AllocatorStatistics) {
  const int64_t hits = stat("cache_hits");
  { Tensor t = empty({1 << 20}, {.device = dev_}); }
  EXPECT_GE(stat("reserved_bytes"), 4 << 20);
  { Tensor t = empty({1 << 20}, {.device = dev_}); }
  EXPECT_GT(stat("cache_hits"), hits);
  Dispatcher::singleton().findOpOrThrow(std::string(GetParam().type) + "::empty_cache").typed<void(int64_t)>().call(0);
  EXPECT_EQ(stat("reserved_bytes"), stat("allocated_bytes"));
}

// A real out-of-memory (the simulator's tests cover every path exactly:
// gpusim_memory_exhaustion_test.cc): chunks of a quarter of the device until
// the driver says no; the error names the device, the statistics are those
// of the live chunks, and once they are freed the device works again.
TEST_P(GpuDeviceTest, OutOfMemoryLeavesTheAllocatorConsistent) {
  const auto empty_cache =
      Dispatcher::singleton().findOpOrThrow(std::string(GetParam().type) + "::empty_cache").typed<void(int64_t)>();
  empty_cache.call(0);
  uint64_t total = 0;
  for (const DeviceInfo& d : rt_->devices())
    if (d.device.str() == dev0()) total = d.properties.total_memory;
  ASSERT_GT(total, 0u);
  const int64_t chunk = static_cast<int64_t>(total / 4);
  const int64_t base = stat("allocated_bytes"), ooms = stat("out_of_memory_errors");
  std::vector<Tensor> live;
  std::string message;
  int64_t block = 0;                                // the chunk's size class
  for (int i = 0; i < 8 && message.empty(); ++i) {  // 8 quarters cannot fit
    try {
      live.push_back(empty({chunk}, {.dtype = ScalarType::UInt8, .device = dev_}));
      if (block == 0) block = stat("allocated_bytes") - base;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), absl::StatusCode::kResourceExhausted) << e.what();
      message = e.message();
    }
  }
  EXPECT_THAT(message, ::testing::HasSubstr("out of memory on " + dev0() + ": tried to allocate " +
                                            std::to_string(chunk) + " bytes"));
  const int64_t allocated = stat("allocated_bytes");
  EXPECT_EQ(stat("reserved_bytes"), allocated);  // nothing cached: emptied before the retry, or never
  EXPECT_EQ(stat("out_of_memory_errors"), ooms + 1);
  EXPECT_EQ(allocated - base, block * static_cast<int64_t>(live.size()));
  live.clear();
  EXPECT_EQ(stat("allocated_bytes"), base);
  empty_cache.call(0);
  EXPECT_EQ(stat("reserved_bytes"), base);
  Tensor a = full({1000}, 2.0, {.device = dev_});
  expectClose(a * a, full({1000}, 4.0), 0, 0);
}

// Work on two streams ordered by an event: the consumer reads what the
// producer wrote, also when the producer has much more to do. A free on a
// side stream followed by reuse on the default stream keeps both results.
TEST_P(GpuDeviceTest, StreamsOrderedByAnEvent) {
  constexpr int64_t n = int64_t{1} << 22;
  Stream producer = Stream::create(dev_), consumer = Stream::create(dev_);
  Tensor y = zeros({n}, {.device = dev_});
  Event ready(dev_);
  {
    StreamGuard on(producer);
    Tensor big = randn({1024, 1024}, {.device = dev_});
    for (int i = 0; i < 8; ++i) big = big.matmul(big) * 1e-3;  // keep the producer busy
    y.fill_(5.0);
    ready.record();
  }
  Tensor z;
  {
    StreamGuard on(consumer);
    ready.wait();
    z = y + 1.0;
  }
  EXPECT_FALSE(Stream::current(dev_) == consumer);
  consumer.synchronize();
  const std::vector<float> v = z.cpu().toVector<float>();
  EXPECT_EQ(std::count(v.begin(), v.end(), 6.0f), n);
  ready.synchronize();
  EXPECT_TRUE(ready.query());

  Tensor out;
  {
    StreamGuard on(producer);
    Tensor a = full({n}, 1.0, {.device = dev_});
    out = a * 2.0;
  }
  Tensor c = full({n}, 5.0, {.device = dev_});
  producer.synchronize();
  const std::vector<float> vo = out.cpu().toVector<float>(), vc = c.cpu().toVector<float>();
  EXPECT_EQ(std::count(vo.begin(), vo.end(), 2.0f), n);
  EXPECT_EQ(std::count(vc.begin(), vc.end(), 5.0f), n);
}

// The convolution, pooling, batch_norm, sort, topk and scan kernels
// against the CPU plugin on the device (the simulator's tests cover their
// paths: conv_pool_test.cc, sort_scan_pad_test.cc).
TEST_P(GpuDeviceTest, ConvolutionPoolingNormsSortsAndScans) {
  const Tensor x = randn({4, 8, 17, 19}), w = randn({16, 8, 3, 3}), b = randn({16});
  const Tensor gx = x.to(dev_);
  expectClose(conv2d(gx, w.to(dev_), b.to(dev_), {2, 1}, {1, 1}), conv2d(x, w, b, {2, 1}, {1, 1}), 1e-4, 1e-4);
  expectClose(max_pool2d(gx, {3, 3}, {2, 2}, {1, 1}), max_pool2d(x, {3, 3}, {2, 2}, {1, 1}), 0, 0);
  expectClose(avg_pool2d(gx, {2, 2}), avg_pool2d(x, {2, 2}), 1e-6, 1e-6);
  Tensor rm = zeros({8}), rv = ones({8});
  Tensor grm = rm.to(dev_), grv = rv.to(dev_);
  static auto batch_norm =
      Dispatcher::singleton()
          .findOpOrThrow("bp::batch_norm")
          .typed<Tensor(const Tensor&, const std::optional<Tensor>&, const std::optional<Tensor>&,
                        const std::optional<Tensor>&, const std::optional<Tensor>&, bool, double, double, bool)>();
  expectClose(batch_norm.call(gx, std::nullopt, std::nullopt, grm, grv, true, 0.1, 1e-5, true),
              batch_norm.call(x, std::nullopt, std::nullopt, rm, rv, true, 0.1, 1e-5, true), 1e-4, 1e-4);
  expectClose(grv, rv, 1e-5, 1e-5);
  const Tensor r = randn({6, 3000});
  auto [values, indices] = sort(r.to(dev_), 1, true);
  auto [want_values, want_indices] = sort(r, 1, true);
  expectClose(values, want_values, 0, 0);
  EXPECT_EQ(indices.cpu().toVector<int64_t>(), want_indices.toVector<int64_t>());
  auto [top, top_indices] = topk(r.to(dev_), 5, 1);
  expectClose(top, std::get<0>(topk(r, 5, 1)), 0, 0);
  expectClose(cumsum(r.to(dev_), 1), cumsum(r, 1), 1e-4, 1e-5);
}

// Note [cuDNN convolutions]: on CUDA, conv2d and conv2d_backward run cuDNN
// (cuda::cudnn_version() > 0 where it opened) and agree with the CPU plugin
// and with the plugin's own kernels (cuDNN switched off) over strides,
// padding, dilation, groups, depthwise, 1x1, bias, and float16; with cuDNN
// off conv2d_backward is declined to its composite.
TEST_P(GpuDeviceTest, ConvolutionsOnCudnnAgreeWithTheCpuAndTheOwnKernels) {
  if (std::string(GetParam().type) != "cuda") GTEST_SKIP() << "cuDNN is the CUDA plugin's";
  Dispatcher& d = Dispatcher::singleton();
  const int64_t version = d.findOpOrThrow("cuda::cudnn_version").typed<int64_t()>().call();
  auto setCudnn = d.findOpOrThrow("cuda::set_cudnn_enabled").typed<void(bool)>();
  ASSERT_GT(version, 0) << "cuDNN did not open (BACKPLANE_CUDNN_LIBRARY, LD_LIBRARY_PATH)";
  d.findOpOrThrow("cuda::set_allow_tf32").typed<void(bool)>().call(false);
  using Conv2dBackward = std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, IntArrayRef,
                                                            IntArrayRef, IntArrayRef, int64_t, std::array<bool, 3>);
  auto backward = d.findOpOrThrow("bp::conv2d_backward").typed<Conv2dBackward>();
  struct Case {
    int64_t n, c, oc, hw, k, stride, pad, dil, groups;
    bool bias;
  };
  for (const Case& c : {Case{2, 8, 16, 17, 3, 1, 1, 1, 1, true}, Case{3, 6, 4, 20, 3, 2, 0, 1, 1, false},
                        Case{1, 4, 8, 15, 3, 1, 2, 2, 2, true}, Case{2, 16, 16, 12, 3, 1, 1, 1, 16, false},
                        Case{4, 32, 8, 9, 1, 1, 0, 1, 1, true}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << c.n << " c=" << c.c << " oc=" << c.oc << " k=" << c.k
                                      << " stride=" << c.stride << " groups=" << c.groups);
    const Tensor x = randn({c.n, c.c, c.hw, c.hw}, {ScalarType::Float64});
    const Tensor w = randn({c.oc, c.c / c.groups, c.k, c.k}, {ScalarType::Float64});
    const std::optional<Tensor> b = c.bias ? std::optional<Tensor>(randn({c.oc}, {ScalarType::Float64})) : std::nullopt;
    const std::vector<int64_t> s{c.stride, c.stride}, p{c.pad, c.pad}, dl{c.dil, c.dil};
    const Tensor want = conv2d(x, w, b, s, p, dl, c.groups);
    for (ScalarType dt : {ScalarType::Float32, ScalarType::Float64, ScalarType::Float16}) {
      const double tol = dt == ScalarType::Float16 ? 2e-2 : dt == ScalarType::Float32 ? 1e-4 : 1e-10;
      const Tensor gx = x.to(dt).to(dev_), gw = w.to(dt).to(dev_);
      const std::optional<Tensor> gb = b ? std::optional<Tensor>(b->to(dt).to(dev_)) : std::nullopt;
      const Tensor on_cudnn = conv2d(gx, gw, gb, s, p, dl, c.groups);
      expectClose(on_cudnn, want, tol * 10, tol);
      setCudnn.call(false);
      const Tensor own = conv2d(gx, gw, gb, s, p, dl, c.groups);
      setCudnn.call(true);
      expectClose(on_cudnn, own.cpu(), tol * 10, tol);
    }
    const Tensor go = randn(want.sizes(), {ScalarType::Float64});
    const std::array<bool, 3> mask{true, true, c.bias};
    auto [gi, gw, gb] = backward.call(go.to(dev_), x.to(dev_), w.to(dev_), s, p, dl, c.groups, mask);
    auto [wi, ww, wb] = backward.call(go, x, w, s, p, dl, c.groups, mask);
    expectClose(gi, wi, 1e-9, 1e-9);
    expectClose(gw, ww, 1e-9, 1e-9);
    if (c.bias) expectClose(gb, wb, 1e-9, 1e-9);
    setCudnn.call(false);  // declined to the composite, which agrees too
    auto [ci, cw, cb] = backward.call(go.to(dev_), x.to(dev_), w.to(dev_), s, p, dl, c.groups, mask);
    setCudnn.call(true);
    expectClose(ci, wi, 1e-9, 1e-9);
    expectClose(cw, ww, 1e-9, 1e-9);
  }
}

// Note [cuDNN batch norm and pooling]: on CUDA, batch_norm (training, with
// the running statistics updated, and evaluation), its training backward,
// and the max and average pooling forwards run cuDNN and agree with the CPU
// plugin and with the plugin's own kernels (cuDNN switched off).
TEST_P(GpuDeviceTest, BatchNormAndPoolingOnCudnnAgreeWithTheCpuAndTheOwnKernels) {
  if (std::string(GetParam().type) != "cuda") GTEST_SKIP() << "cuDNN is the CUDA plugin's";
  Dispatcher& d = Dispatcher::singleton();
  ASSERT_GT(d.findOpOrThrow("cuda::cudnn_version").typed<int64_t()>().call(), 0);
  auto setCudnn = d.findOpOrThrow("cuda::set_cudnn_enabled").typed<void(bool)>();
  using BatchNorm = Tensor(const Tensor&, const std::optional<Tensor>&, const std::optional<Tensor>&,
                           const std::optional<Tensor>&, const std::optional<Tensor>&, bool, double, double, bool);
  auto batch_norm = d.findOpOrThrow("bp::batch_norm").typed<BatchNorm>();
  using BatchNormBackward = std::tuple<Tensor, Tensor, Tensor>(
      const Tensor&, const Tensor&, const std::optional<Tensor>&, const std::optional<Tensor>&,
      const std::optional<Tensor>&, bool, double, std::array<bool, 3>);
  auto backward = d.findOpOrThrow("bp::batch_norm_backward").typed<BatchNormBackward>();
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 16, 9, 11}, std::vector<int64_t>{32, 5}}) {
    SCOPED_TRACE(::testing::PrintToString(shape));
    const int64_t c = shape[1];
    const Tensor x = randn(shape).mul(3.0).add(2.0), w = randn({c}), b = randn({c});
    for (bool training : {true, false}) {
      const Tensor rm = randn({c}), rv = rand({c}).add(0.5);
      Tensor want_rm = rm.clone(), want_rv = rv.clone();
      const Tensor want = batch_norm.call(x, w, b, want_rm, want_rv, training, 0.1, 1e-5, true);
      for (bool cudnn : {true, false}) {
        setCudnn.call(cudnn);
        Tensor grm = rm.to(dev_), grv = rv.to(dev_);
        const Tensor got = batch_norm.call(x.to(dev_), w.to(dev_), b.to(dev_), grm, grv, training, 0.1, 1e-5, true);
        setCudnn.call(true);
        expectClose(got, want, 1e-4, 1e-4);
        expectClose(grm, want_rm, 1e-5, 1e-5);
        expectClose(grv, want_rv, 1e-5, 1e-5);
      }
    }
    const Tensor go = randn(shape);
    auto [wi, ww, wb] = backward.call(go, x, w, std::nullopt, std::nullopt, true, 1e-5, {true, true, true});
    auto [gi, gw, gb] =
        backward.call(go.to(dev_), x.to(dev_), w.to(dev_), std::nullopt, std::nullopt, true, 1e-5, {true, true, true});
    expectClose(gi, wi, 1e-4, 1e-4);
    expectClose(gw, ww, 1e-3, 1e-4);
    expectClose(gb, wb, 1e-3, 1e-4);
  }
  // Pooling: NaN propagates through the maximum; padding counted or not in the average.
  Tensor x = randn({2, 3, 13, 10});
  std::vector<float> v = x.contiguous().toVector<float>();
  v[17] = std::nanf("");
  x = tensorFromVector<float>(v, {2, 3, 13, 10}, Device(DeviceType::CPU));
  auto avg =
      d.findOpOrThrow("bp::avg_pool2d")
          .typed<Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool, std::optional<int64_t>)>();
  const Tensor gx = x.to(dev_);
  for (bool cudnn : {true, false}) {
    setCudnn.call(cudnn);
    expectClose(max_pool2d(gx, {3, 3}, {2, 2}, {1, 1}), max_pool2d(x, {3, 3}, {2, 2}, {1, 1}), 0, 0);
    // A transposed view, read through its strides.
    expectClose(max_pool2d(gx.transpose(2, 3), {2, 3}), max_pool2d(x.transpose(2, 3), {2, 3}), 0, 0);
    for (bool count_pad : {true, false}) {
      expectClose(avg.call(gx, {3, 3}, {2, 2}, {1, 1}, false, count_pad, std::nullopt),
                  avg.call(x, {3, 3}, {2, 2}, {1, 1}, false, count_pad, std::nullopt), 1e-6, 1e-6);
    }
  }
  setCudnn.call(true);
}

// Note [Deferred device errors]: a bad index is reported at the next
// synchronization, from the mapped error slot, and the device stays usable.
TEST_P(GpuDeviceTest, BadIndicesAreReportedAtTheNextSynchronization) {
  const Tensor self = randn({4, 3}).to(dev_);
  const Tensor picked = index_select(self, 0, tensorFromVector<int64_t>({1, 7}, {2}, dev_));
  try {
    Stream::current(dev_).synchronize();
    ADD_FAILURE() << "no error at the synchronization";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), ::testing::HasSubstr("index 7 (element 1 of 'index') is out of range"));
  }
  expectClose(index_select(self, 0, tensorFromVector<int64_t>({3, 0}, {2}, dev_)),
              index_select(self.cpu(), 0, tensorFromVector<int64_t>({3, 0}, {2})), 0, 0);
}

// Note [Graphs in the application API] on the device's graphs (CUDA or HIP
// graphs): a capture replays on refilled inputs.
TEST_P(GpuDeviceTest, AGraphReplaysOnNewInputs) {
  ASSERT_TRUE(rt_->capabilities(dev_).graphs);
  Stream side = Stream::create(dev_);
  Tensor x = randn({256, 64}).to(dev_), w = randn({64, 32}).to(dev_);
  Tensor y;
  const Graph graph = Graph::capture(side, [&] { y = (x.matmul(w) * 0.5).softmax(-1).sum(0); });
  for (int i = 0; i < 3; ++i) {
    const Tensor host_x = randn({256, 64});
    x.copy_(host_x.to(dev_));
    graph.replay();
    side.synchronize();
    expectClose(y, (host_x.matmul(w.cpu()) * 0.5).softmax(-1).sum(0), 1e-4, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Built, GpuDeviceTest,
                         ::testing::ValuesIn(gpu_test::builtPlugins(gpu_test::WithSimulator::kNo)),
                         [](const ::testing::TestParamInfo<GpuPlugin>& info) { return std::string(info.param.type); });

}  // namespace
}  // namespace backplane
