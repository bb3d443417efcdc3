// backplane/ops/ops.h and the tensor methods: the application's view of the
// standard operators, on the CPU plugin and on a device with no kernels
// (everything there runs through the CPU fallback), which must agree.
#include "backplane/ops/ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/random.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/cpu_kernels.h"
#include "backplane/testing/plugin_environment.h"
#include "test_device.h"

namespace backplane {
namespace {

using testing::errorOf;

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

const auto* const kEnv = &testing::addPluginEnvironment({BACKPLANE_CPU_PLUGIN_PATH}).afterLoad([] {
  testing::TestDevice::install("apidev", 2);
});

// Every test runs on "cpu" and on "apidev:1" (no kernels: CPU fallback).
class OpsApi : public ::testing::TestWithParam<std::string> {
 protected:
  Device dev() const { return Device::fromString(GetParam()); }
  Tensor f32(std::vector<float> v, IntArrayRef sizes) const { return tensorFromVector<float>(v, sizes, dev()); }
};

TEST_P(OpsApi, ArithmeticOperatorsBroadcastAndStayOnTheDevice) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = f32({10, 20, 30}, {3});
  Tensor sum = a + b;
  EXPECT_EQ(sum.device(), dev());
  EXPECT_EQ(sum.toVector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((a - b).toVector<float>(), (std::vector<float>{-9, -18, -27, -6, -15, -24}));
  EXPECT_EQ((a * b).toVector<float>(), (std::vector<float>{10, 40, 90, 40, 100, 180}));
  EXPECT_EQ((b / a.select(0, 0)).toVector<float>(), (std::vector<float>{10, 10, 10}));
  EXPECT_EQ((-a).toVector<float>(), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ(a.add(b, 2).toVector<float>(), (std::vector<float>{21, 42, 63, 24, 45, 66}));
}

TEST_P(OpsApi, NumbersMixWithTensorsOnEitherSide) {
  Tensor a = f32({1, 2, 4}, {3});
  EXPECT_EQ((a * 2.0).toVector<float>(), (std::vector<float>{2, 4, 8}));
  EXPECT_EQ((a + 1).toVector<float>(), (std::vector<float>{2, 3, 5}));
  EXPECT_EQ((10 - a).toVector<float>(), (std::vector<float>{9, 8, 6}));
  EXPECT_EQ((8.0 / a).toVector<float>(), (std::vector<float>{8, 4, 2}));
  EXPECT_EQ((a / 4).toVector<float>(), (std::vector<float>{0.25f, 0.5f, 1}));
  Tensor r = 3 * a;
  EXPECT_EQ(r.device(), dev());
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{3, 6, 12}));
}

TEST_P(OpsApi, NumbersPromoteLikePythonNumbers) {
  Tensor i = tensorFromVector<int32_t>({1, 2}, {2}, dev());
  EXPECT_EQ((i * 2).dtype(), ScalarType::Int32);      // an integer keeps the tensor's dtype
  EXPECT_EQ((i * 2.5).dtype(), ScalarType::Float32);  // a float makes an integer tensor float32
  EXPECT_EQ((i * 2.5).toVector<float>(), (std::vector<float>{2.5f, 5}));
  EXPECT_EQ((i / 4).dtype(), ScalarType::Float32);  // true division
  Tensor h = f32({1, 2}, {2}).to(ScalarType::Float16);
  EXPECT_EQ((h * 2.5).dtype(), ScalarType::Float16);  // a float keeps a floating dtype
  Tensor flags = tensorFromVector<bool>({true, false}, {2}, dev());
  EXPECT_EQ((flags + 1).dtype(), ScalarType::Int64);
  EXPECT_EQ((flags + 1).toVector<int64_t>(), (std::vector<int64_t>{2, 1}));
}

TEST_P(OpsApi, CompoundAssignmentWritesIntoTheLeftTensor) {
  Tensor a = f32({1, 2, 3}, {3});
  Tensor alias = a;
  a += f32({1, 1, 1}, {3});
  a *= f32({2, 2, 2}, {3});
  a -= f32({1, 1, 1}, {3});
  a /= f32({3, 3, 3}, {3});
  EXPECT_EQ(alias.toVector<float>(), (std::vector<float>{1, 5.f / 3, 7.f / 3}));
  // The result must fit the left tensor: float into int32 is refused.
  Tensor i = tensorFromVector<int32_t>({1}, {1}, dev());
  EXPECT_THAT(errorOf([&] { i += f32({0.5f}, {1}); }), HasSubstr("int32"));
  EXPECT_EQ(i.toVector<int32_t>(), (std::vector<int32_t>{1}));
}

TEST_P(OpsApi, MethodsMatchTheFreeFunctions) {
  Tensor x = f32({-1, 0, 2, 3}, {2, 2});
  EXPECT_EQ(x.relu().toVector<float>(), (std::vector<float>{0, 0, 2, 3}));
  EXPECT_EQ(x.abs().toVector<float>(), abs(x).toVector<float>());
  EXPECT_EQ(x.matmul(x).toVector<float>(), (std::vector<float>{1, 0, 4, 9}));
  EXPECT_EQ(matmul(x, x).toVector<float>(), x.mm(x).toVector<float>());
  EXPECT_EQ(x.sum().item<float>(), 4);
  EXPECT_EQ(x.sum({1}).toVector<float>(), (std::vector<float>{-1, 5}));
  EXPECT_EQ(x.mean({0}, /*keepdim=*/true).sizes(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(x.argmax().item<int64_t>(), 3);
  EXPECT_EQ(x.amax({1}).toVector<float>(), (std::vector<float>{0, 3}));
  EXPECT_EQ(x.gt(0.5).toVector<bool>(), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(x.eq(x).toVector<bool>(), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(x.clamp(0, 2).toVector<float>(), (std::vector<float>{0, 0, 2, 2}));
  EXPECT_EQ(x.masked_fill(x.lt(0), 7).toVector<float>(), (std::vector<float>{7, 0, 2, 3}));
  EXPECT_EQ(x.pow(2).toVector<float>(), (std::vector<float>{1, 0, 4, 9}));
  EXPECT_THAT(x.exp().log().toVector<float>(), Pointwise(FloatNear(1e-6), x.toVector<float>()));
  EXPECT_THAT(x.gelu().toVector<float>(),
              Pointwise(FloatNear(1e-6), std::vector<float>{-0.158655f, 0, 1.954500f, 2.995950f}));
}

TEST_P(OpsApi, LayersOfATransformer) {
  Tensor x = f32({1, 2, 3, 4, 6, 8}, {2, 3});
  Tensor p = x.softmax(-1);
  EXPECT_THAT(p.sum({1}).toVector<float>(), Pointwise(FloatNear(1e-6), std::vector<float>{1, 1}));
  EXPECT_THAT(p.toVector<float>(), Pointwise(FloatNear(1e-6), std::vector<float>{0.0900306f, 0.2447285f, 0.6652410f,
                                                                                 0.0158762f, 0.1173104f, 0.8668133f}));
  Tensor ln = layer_norm(x, {3}, std::nullopt, std::nullopt, 0);
  EXPECT_THAT(ln.toVector<float>(),
              Pointwise(FloatNear(1e-5), std::vector<float>{-1.2247449f, 0, 1.2247449f, -1.2247449f, 0, 1.2247449f}));
  Tensor w = f32({1, 0, 0, 0, 1, 1}, {2, 3});  // [out=2, in=3]
  Tensor y = linear(x, w, f32({100, 200}, {2}));
  EXPECT_EQ(y.toVector<float>(), (std::vector<float>{101, 205, 104, 214}));
  Tensor table = f32({0, 0, 1, 1, 2, 2}, {3, 2});
  Tensor ids = tensorFromVector<int64_t>({2, 0}, {2}, dev());
  EXPECT_EQ(embedding(table, ids).toVector<float>(), (std::vector<float>{2, 2, 0, 0}));
  EXPECT_EQ(cat({x, x}, 0).sizes(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(stack({x, x}, 1).sizes(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(where(x.gt(3), x, zeros_like(x)).toVector<float>(), (std::vector<float>{0, 0, 0, 4, 6, 8}));
}

TEST_P(OpsApi, FactoriesTakeDtypeAndDevice) {
  Tensor z = zeros({2, 3}, {.dtype = ScalarType::Float16, .device = dev()});
  EXPECT_EQ(z.dtype(), ScalarType::Float16);
  EXPECT_EQ(z.device(), dev());
  EXPECT_EQ(z.toVector<float>(), std::vector<float>(6, 0));
  EXPECT_EQ(ones({2}, {.device = dev()}).dtype(), ScalarType::Float32);
  EXPECT_EQ(full({2}, 7, {.device = dev()}).toVector<float>(), (std::vector<float>{7, 7}));
  EXPECT_EQ(arange(4, {.device = dev()}).dtype(), ScalarType::Int64);
  EXPECT_EQ(arange(0, 1, 0.25, {.device = dev()}).toVector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(empty({0}, {.device = dev()}).numel(), 0);
}

TEST_P(OpsApi, ASeedGivesTheSameRandomNumbersOnEveryDevice) {
  manualSeed(1234);
  std::vector<float> on_device = randn({64}, {.device = dev()}).toVector<float>();
  manualSeed(1234);
  std::vector<float> on_cpu = randn({64}).toVector<float>();
  EXPECT_EQ(on_device, on_cpu);
  Tensor u = rand({1000}, {.device = dev()});
  EXPECT_GE(u.amin().item<float>(), 0.f);
  EXPECT_LT(u.amax().item<float>(), 1.f);
}

TEST_P(OpsApi, ToMovesBetweenDevicesAndDtypes) {
  Tensor a = f32({1.5f, -2}, {2});
  Tensor host = a.cpu();
  EXPECT_EQ(host.device(), Device(DeviceType::CPU));
  EXPECT_EQ(host.toVector<float>(), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(host.to(dev()).device(), dev());
  EXPECT_EQ(a.to(GetParam()).device(), dev());
  // Already there: the same tensor unless a copy is asked for.
  EXPECT_TRUE(a.to(dev()).is_alias_of(a));
  EXPECT_FALSE(a.to(dev(), /*copy=*/true).is_alias_of(a));
  Tensor i = a.to(ScalarType::Int32);
  EXPECT_EQ(i.dtype(), ScalarType::Int32);
  EXPECT_EQ(i.toVector<int32_t>(), (std::vector<int32_t>{1, -2}));
  Tensor both = host.to(dev(), ScalarType::Float64);
  EXPECT_EQ(both.device(), dev());
  EXPECT_EQ(both.dtype(), ScalarType::Float64);
  EXPECT_THAT(errorOf([&] { (void)a.to("nodevice:0"); }), HasSubstr("nodevice"));
}

TEST_P(OpsApi, InPlaceMethodsReturnTheTensorItself) {
  Tensor a = f32({1, 2}, {2});
  const Tensor& r = a.fill_(5);
  EXPECT_EQ(&r, &a);
  EXPECT_EQ(a.toVector<float>(), (std::vector<float>{5, 5}));
  a.zero_();
  EXPECT_EQ(a.toVector<float>(), (std::vector<float>{0, 0}));
  a.copy_(f32({3, 4}, {2}));
  EXPECT_EQ(a.toVector<float>(), (std::vector<float>{3, 4}));
  a.copy_(tensorFromVector<float>({8, 9}, {2}));  // from the CPU
  EXPECT_EQ(a.toVector<float>(), (std::vector<float>{8, 9}));
}

TEST_P(OpsApi, BadArgumentsSayWhatWasWrong) {
  Tensor a = f32({1, 2, 3}, {3});
  std::string shapes = errorOf([&] { (void)(a + f32({1, 2}, {2})); });
  EXPECT_THAT(shapes, HasSubstr("bp::add.Tensor"));
  EXPECT_THAT(shapes, HasSubstr("[3]"));
  EXPECT_THAT(shapes, HasSubstr("[2]"));
  Tensor elsewhere =
      tensorFromVector<float>({1, 2, 3}, {3}, dev().isCpu() ? Device::fromString("apidev:0") : Device(DeviceType::CPU));
  EXPECT_THAT(errorOf([&] { (void)(a * elsewhere); }), HasSubstr("expected all tensors on one device"));
  EXPECT_THAT(errorOf([&] { (void)a.matmul(f32({1, 2}, {2})); }), HasSubstr("matmul"));
  EXPECT_THAT(errorOf([&] { (void)a.softmax(3); }), HasSubstr("out of range"));
  EXPECT_THAT(errorOf([&] { (void)Tensor().relu(); }), HasSubstr("undefined"));
}

INSTANTIATE_TEST_SUITE_P(Devices, OpsApi, ::testing::Values("cpu", "apidev:1"),
                         [](const auto& info) { return info.param == "cpu" ? "Cpu" : "DeviceWithoutKernels"; });

}  // namespace
}  // namespace backplane
