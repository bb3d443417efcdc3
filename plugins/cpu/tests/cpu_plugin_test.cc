// The CPU plugin, loaded the way applications load it, through the
// dispatcher: results, broadcasting, strides, promotion, errors, and CPU
// fallback of standard ops from a device without kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "test_device.h"

namespace backplane {
namespace {

using ::testing::HasSubstr;

class CpuPluginTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<PluginStatus> s = plugins().load(BACKPLANE_CPU_PLUGIN_PATH);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->loaded);
    EXPECT_EQ(s->name, "cpu");
  }
  static TypedOperatorHandle<Tensor(const Tensor&, const Tensor&, const Scalar&)> binaryAlpha(const char* name) {
    return Dispatcher::singleton().findOpOrThrow(name).typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>();
  }
  static TypedOperatorHandle<Tensor(const Tensor&, const Tensor&)> binary(const char* name) {
    return Dispatcher::singleton().findOpOrThrow(name).typed<Tensor(const Tensor&, const Tensor&)>();
  }
  static TypedOperatorHandle<Tensor(const Tensor&)> unary(const char* name) {
    return Dispatcher::singleton().findOpOrThrow(name).typed<Tensor(const Tensor&)>();
  }
};

Tensor f32(std::vector<float> v, IntArrayRef sizes, Device d = Device(DeviceType::CPU)) {
  return tensorFromVector<float>(v, sizes, d);
}

TEST_F(CpuPluginTest, AddWithAlphaAndBroadcasting) {
  auto add = binaryAlpha("bp::add.Tensor");
  // Structured: the plugin implements add.out; add.Tensor is a composite over it.
  EXPECT_EQ(add.kernelKind(DispatchKey::CPU), KernelKind::Composite);
  EXPECT_EQ(Dispatcher::singleton().findOpOrThrow("bp::add.out").kernelKind(DispatchKey::CPU), KernelKind::Native);
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f32({10, 20, 30}, {3});
  Tensor r = add.call(a, b, 2);
  EXPECT_EQ(r.sizes(), IntArrayRef({2, 3}));
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{21, 42, 63, 24, 45, 66}));
  Tensor col = f32({1, 2}, {2, 1});
  EXPECT_EQ(add.call(col, b, 1).toVector<float>(), (std::vector<float>{11, 21, 31, 12, 22, 32}));
}

// BACKPLANE_NUM_THREADS governs the plugin's kernels only: the calling
// thread's OpenMP setting, which every OpenMP user in the process reads
// (PyTorch's threads in the same Python process), is as it was after
// elementwise, data movement, reduction and oneDNN kernels ran in parallel.
TEST_F(CpuPluginTest, KernelsLeaveTheCallersOpenMPSettingAsTheyFoundIt) {
  const int before = omp_get_max_threads();
  const int callers = before + 3;  // not the plugin's setting (at most every core)
  omp_set_num_threads(callers);
  const Tensor x = ones({512, 1024});
  const Tensor y = (x * 2 + x).sum({1});
  const Tensor z = mm(x.narrow(0, 0, 256), x.t()).t().contiguous();
  EXPECT_EQ(omp_get_max_threads(), callers);
  EXPECT_EQ(y.toVector<float>()[0], 3 * 1024);
  EXPECT_EQ(z.toVector<float>()[0], 1024);
  omp_set_num_threads(before);
}

TEST_F(CpuPluginTest, StridedAndExpandedInputs) {
  auto mul = binary("bp::mul.Tensor");
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor r = mul.call(a.t(), a.t());  // [3, 2] transposed views
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{1, 16, 4, 25, 9, 36}));
  Tensor row = f32({1, 2, 3}, {3}).expand({2, 3});
  EXPECT_EQ(mul.call(row, a).toVector<float>(), (std::vector<float>{1, 4, 9, 4, 10, 18}));
  Tensor every_other = f32({1, 2, 3, 4, 5, 6}, {6}).slice(0, 0, 6, 2);
  EXPECT_EQ(unary("bp::neg").call(every_other).toVector<float>(), (std::vector<float>{-1, -3, -5}));
}

TEST_F(CpuPluginTest, PromotionFollowsPyTorch) {
  auto add = binaryAlpha("bp::add.Tensor");
  Tensor i = tensorFromVector<int64_t>({1, 2}, {2});
  Tensor f = f32({0.5, 0.25}, {2});
  Tensor r = add.call(i, f, 1);
  EXPECT_EQ(r.dtype(), ScalarType::Float32);
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{1.5f, 2.25f}));
  Tensor i32 = tensorFromVector<int32_t>({7, 9}, {2});
  EXPECT_EQ(add.call(i32, i, 1).dtype(), ScalarType::Int64);
  Tensor q = binary("bp::div.Tensor").call(i32, tensorFromVector<int32_t>({2, 2}, {2}));
  EXPECT_EQ(q.dtype(), ScalarType::Float32) << "true division";
  EXPECT_EQ(q.toVector<float>(), (std::vector<float>{3.5f, 4.5f}));
}

TEST_F(CpuPluginTest, UnaryAndReduction) {
  Tensor a = f32({-1, 2, -3, 4}, {2, 2});
  EXPECT_EQ(unary("bp::relu").call(a).toVector<float>(), (std::vector<float>{0, 2, 0, 4}));
  auto sum = Dispatcher::singleton().findOpOrThrow("bp::sum").typed<Tensor(const Tensor&, std::optional<ScalarType>)>();
  Tensor s = sum.call(a, std::nullopt);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<float>(), 2.0f);
  Tensor ints = tensorFromVector<int32_t>({1, 2, 3}, {3});
  EXPECT_EQ(sum.call(ints, std::nullopt).dtype(), ScalarType::Int64);
  EXPECT_EQ(sum.call(ints, ScalarType::Float64).item<double>(), 6.0);
  Tensor empty = f32({}, {0, 3});
  EXPECT_EQ(sum.call(empty, std::nullopt).item<float>(), 0.0f);
  EXPECT_EQ(unary("bp::neg").call(empty).sizes(), IntArrayRef({0, 3}));
}

TEST_F(CpuPluginTest, ErrorsNameTheOpAndWhatIsWrong) {
  auto add = binaryAlpha("bp::add.Tensor");
  try {
    add.call(f32({1, 2, 3}, {3}), f32({1, 2}, {2}), 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("bp::add.Tensor"));
    EXPECT_THAT(e.message(), HasSubstr("cannot be broadcast"));
  }
  Tensor b = tensorFromVector<bool>({true}, {1});
  try {
    unary("bp::relu").call(b);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("dtype bool"));
    EXPECT_THAT(e.message(), HasSubstr("(accepted: every dtype but bool); convert it to an accepted dtype"));
  }
}

TEST_F(CpuPluginTest, DevicesWithoutKernelsFallBackToThePlugin) {
  auto& dev = testing::TestDevice::install();
  Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  auto add = binaryAlpha("bp::add.Tensor");
  const DispatchKey key = backendKey(dev.type());
  OperatorHandle add_out = Dispatcher::singleton().findOpOrThrow("bp::add.out");
  EXPECT_EQ(add.kernelKind(key), KernelKind::Composite);
  EXPECT_EQ(add_out.kernelKind(key), KernelKind::CpuFallback);
  uint64_t before = add_out.fallbackCalls(key);
  Tensor r = add.call(f32({1, 2}, {2}, dev.device()), f32({3, 4}, {2}, dev.device()), 1);
  EXPECT_EQ(r.device(), dev.device());
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{4, 6}));
  EXPECT_EQ(add_out.fallbackCalls(key), before + 1);
  Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
}

}  // namespace
}  // namespace backplane
