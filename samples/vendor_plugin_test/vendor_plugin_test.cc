// vendor_plugin_test: loads the toyaccel sample plugin (samples/vendor_plugin/,
// built OUT OF TREE against an installed Backplane; its path comes from
// BACKPLANE_TOYACCEL_PLUGIN) plus the in-tree CPU plugin, and checks what a
// vendor's plugin must deliver through the dispatcher:
//   - the device type: two devices whose memory the host cannot dereference
//     (opaque handles), bounds-checked copies, views and device-to-device
//     copies through the plugin's copy functions;
//   - native float32 kernels (add.out, mul.out, relu.out, mm.out,
//     sum.IntList_out) on toyaccel:0 and :1, served by the plugin
//     (KernelKind::Native) through their functional, in-place and out=
//     forms, matching the CPU plugin on broadcast, strided, 0-d and empty
//     inputs and strided `out` tensors;
//   - CPU fallback for everything else (sub, neg, div, and the five ops in
//     any other dtype than float32): right results, left on the toyaccel
//     device, counted, with the bytes it moved;
//   - errors for mixed devices;
//   - unloading once the tensors are gone (refused while one lives).
// run_vendor_test.sh builds the plugin with g++ and with clang++ -stdlib=libc++
// and runs this program (built with the host's compiler) against each.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/stream.h"

namespace backplane {
namespace {

using ::testing::HasSubstr;
using ::testing::NanSensitiveFloatEq;
using ::testing::Pointwise;

const char* g_toy_path = nullptr;  // BACKPLANE_TOYACCEL_PLUGIN
DeviceType g_toy = DeviceType::CPU;

constexpr const char* kToy = "toyaccel";
const Device kCpu(DeviceType::CPU);
Device toy(int index) { return Device(g_toy, static_cast<DeviceIndex>(index)); }
DispatchKey toyKey() { return backendKey(g_toy); }

std::optional<PluginStatus> statusOf(const std::string& name) {
  for (const PluginStatus& s : plugins().plugins())
    if (s.name == name && s.loaded) return s;
  return std::nullopt;
}

// Loads the CPU plugin and toyaccel before any test; unloads toyaccel after
// the last one, when every toyaccel tensor is gone.
class ToyAccelEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    absl::StatusOr<PluginStatus> cpu = plugins().load(BACKPLANE_CPU_PLUGIN_PATH);
    ASSERT_TRUE(cpu.ok()) << "loading the in-tree CPU plugin " << BACKPLANE_CPU_PLUGIN_PATH << ": " << cpu.status();
    ASSERT_TRUE(cpu->loaded) << cpu->error;
    absl::StatusOr<PluginStatus> s = plugins().load(g_toy_path);
    ASSERT_TRUE(s.ok()) << "loading the toyaccel plugin " << g_toy_path << ": " << s.status();
    ASSERT_TRUE(s->loaded) << s->error;
    std::optional<DeviceType> t = DeviceTypeRegistry::global().find(kToy);
    ASSERT_TRUE(t.has_value()) << "the plugin loaded but registered no device type 'toyaccel'";
    g_toy = *t;
  }
  void TearDown() override {
    if (!statusOf(kToy)) return;  // SetUp failed
    absl::Status s = plugins().unload(kToy);
    ASSERT_TRUE(s.ok()) << "unloading toyaccel after the last test: " << s;
    EXPECT_FALSE(statusOf(kToy).has_value());
    EXPECT_FALSE(DeviceTypeRegistry::global().find(kToy).has_value()) << "the device type outlived its plugin";
    EXPECT_FALSE(Device::parse("toyaccel:0").ok());
    OperatorHandle add = Dispatcher::singleton().findOpOrThrow("bp::add.out");
    EXPECT_NE(add.kernelKind(backendKey(g_toy)), KernelKind::Native) << "the plugin's kernel outlived it";
    EXPECT_TRUE(Dispatcher::singleton().checkInvariants().ok());
  }
};

// --------------------------------------------------------------- helpers

Tensor f32(const std::vector<float>& v, IntArrayRef sizes, Device d = kCpu) {
  return tensorFromVector<float>(v, sizes, d);
}

int64_t numelOf(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// Values in [-4, 4) (with a few exact zeros), the same for the same seed.
Tensor random(IntArrayRef sizes, Device d, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(static_cast<size_t>(numelOf(sizes)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 7 == 3 ? 0.0f : dist(gen);
  return f32(v, sizes, d);
}

using BinaryAlpha = TypedOperatorHandle<Tensor(const Tensor&, const Tensor&, const Scalar&)>;
using Binary = TypedOperatorHandle<Tensor(const Tensor&, const Tensor&)>;
using Unary = TypedOperatorHandle<Tensor(const Tensor&)>;
using Sum = TypedOperatorHandle<Tensor(const Tensor&, std::optional<ScalarType>)>;
using SumDim = TypedOperatorHandle<Tensor(const Tensor&, std::optional<IntArrayRef>, bool, std::optional<ScalarType>)>;
using UnaryOut = TypedOperatorHandle<Tensor(const Tensor&, const Tensor&)>;
using BinaryOut = TypedOperatorHandle<Tensor(const Tensor&, const Tensor&, const Tensor&)>;
using BinaryAlphaOut = TypedOperatorHandle<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>;

BinaryAlpha addOp() {
  return Dispatcher::singleton()
      .findOpOrThrow("bp::add.Tensor")
      .typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>();
}
BinaryAlpha subOp() {
  return Dispatcher::singleton()
      .findOpOrThrow("bp::sub.Tensor")
      .typed<Tensor(const Tensor&, const Tensor&, const Scalar&)>();
}
Binary mulOp() {
  return Dispatcher::singleton().findOpOrThrow("bp::mul.Tensor").typed<Tensor(const Tensor&, const Tensor&)>();
}
Binary divOp() {
  return Dispatcher::singleton().findOpOrThrow("bp::div.Tensor").typed<Tensor(const Tensor&, const Tensor&)>();
}
Unary reluOp() { return Dispatcher::singleton().findOpOrThrow("bp::relu").typed<Tensor(const Tensor&)>(); }
Unary negOp() { return Dispatcher::singleton().findOpOrThrow("bp::neg").typed<Tensor(const Tensor&)>(); }
Sum sumOp() {
  return Dispatcher::singleton().findOpOrThrow("bp::sum").typed<Tensor(const Tensor&, std::optional<ScalarType>)>();
}
SumDim sumDimOp() {
  return Dispatcher::singleton()
      .findOpOrThrow("bp::sum.dim_IntList")
      .typed<Tensor(const Tensor&, std::optional<IntArrayRef>, bool, std::optional<ScalarType>)>();
}
Binary mmOp() { return Dispatcher::singleton().findOpOrThrow("bp::mm").typed<Tensor(const Tensor&, const Tensor&)>(); }
UnaryOut reluOutOp() {
  return Dispatcher::singleton().findOpOrThrow("bp::relu.out").typed<Tensor(const Tensor&, const Tensor&)>();
}
BinaryOut mulOutOp() {
  return Dispatcher::singleton()
      .findOpOrThrow("bp::mul.out")
      .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
}
BinaryAlphaOut addOutOp() {
  return Dispatcher::singleton()
      .findOpOrThrow("bp::add.out")
      .typed<Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&)>();
}
OperatorHandle opNamed(const char* name) { return Dispatcher::singleton().findOpOrThrow(name); }

// The toyaccel kernels are the .out forms; these count how often each ran
// through the CPU fallback instead.
const char* const kNativeOuts[] = {"bp::add.out", "bp::mul.out", "bp::relu.out", "bp::mm.out", "bp::sum.IntList_out"};
std::vector<uint64_t> nativeOutFallbacks() {
  std::vector<uint64_t> n;
  for (const char* op : kNativeOuts) n.push_back(opNamed(op).fallbackCalls(toyKey()));
  return n;
}

// x86-64 (48-bit) canonical: bits 63..47 all equal.
bool isCanonical(const void* p) {
  const uint64_t top = reinterpret_cast<uintptr_t>(p) >> 47;
  return top == 0 || top == (uint64_t{1} << 17) - 1;
}

// The message of the Error `f` throws ("" and a test failure if none).
std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  ADD_FAILURE() << "expected an Error";
  return "";
}

// ------------------------------------------------------ loading, devices

TEST(ToyAccelPlugin, LoadsWithOneDeviceTypeOfTwoDevicesAndEightKernels) {
  std::optional<PluginStatus> s = statusOf(kToy);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->version, "1.0.0");
  EXPECT_EQ(s->abi_major, 1u);
  ASSERT_EQ(s->devices.size(), 1u);
  EXPECT_EQ(s->devices[0].type_name, kToy);
  EXPECT_EQ(s->devices[0].device_count, 2);
  EXPECT_EQ(s->kernels, 8u) << "add.out, mul.out, relu.out, mm.out and sum.IntList_out; bias_relu for toyaccel and "
                               "cpu, bias_relu_backward for cpu; no fallback";
  DeviceInterface* iface = DeviceTypeRegistry::global().interface(g_toy);
  ASSERT_NE(iface, nullptr);
  EXPECT_FALSE(iface->isHostAccessible());
  EXPECT_EQ(iface->deviceCount(), 2);
  absl::StatusOr<Device> d = Device::parse("toyaccel:1");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, toy(1));
  EXPECT_THAT(errorOf([] { emptyTensor({2}, ScalarType::Float32, toy(2)); }), HasSubstr("toyaccel"));
}

TEST(ToyAccelPlugin, StandardOpsAreNativeOrFallBackToCpu) {
  const DispatchKey k = toyKey();
  for (const char* op : kNativeOuts) EXPECT_EQ(opNamed(op).kernelKind(k), KernelKind::Native) << op;
  // Structured ops: the functional and in-place forms are composites over
  // `.out`, native or not.
  for (const char* op : {"bp::add.Tensor", "bp::add_.Tensor", "bp::mul.Tensor", "bp::relu", "bp::relu_", "bp::mm",
                         "bp::sum", "bp::sum.dim_IntList", "bp::sub.Tensor", "bp::neg", "bp::div.Tensor"}) {
    EXPECT_EQ(opNamed(op).kernelKind(k), KernelKind::Composite) << op;
  }
  // Without a toyaccel kernel, the CPU kernel serves toyaccel through the fallback.
  for (const char* op : {"bp::sub.out", "bp::neg.out", "bp::div.out", "bp::mean.out"}) {
    EXPECT_EQ(opNamed(op).kernelKind(k), KernelKind::CpuFallback) << op;
  }
}

// ----------------------------------------------------------------- memory

TEST(ToyAccelMemory, AddressesAreOpaqueHandlesAndDataRoundTrips) {
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}, toy(0));
  Tensor b = f32({7, 8}, {2}, toy(1));
  // A host that dereferenced these would fault: they are not canonical.
  EXPECT_FALSE(isCanonical(a.data_ptr())) << a.data_ptr();
  EXPECT_FALSE(isCanonical(b.data_ptr())) << b.data_ptr();
  EXPECT_EQ(a.device(), toy(0));
  EXPECT_EQ(a.toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.toVector<float>(), (std::vector<float>{7, 8}));
  // Views are metadata; reading them stages their span through the plugin.
  EXPECT_EQ(a.t().toVector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(a.select(1, 2).toVector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(a.t().contiguous().toVector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // Device to device, across the two devices, and a strided write.
  Tensor on1 = emptyTensor({2, 3}, ScalarType::Float32, toy(1));
  copyElements(on1, a);
  EXPECT_EQ(on1.toVector<float>(), a.toVector<float>());
  Tensor col = emptyTensor({3, 2}, ScalarType::Float32, toy(0));
  copyElements(col.t(), a);
  EXPECT_EQ(col.toVector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(a.clone().toVector<float>(), a.toVector<float>());
  Tensor empty = f32({}, {0, 4}, toy(1));
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.toVector<float>().empty());
}

TEST(ToyAccelMemory, CopiesAreBoundsCheckedAndBadHandlesAreRefused) {
  DeviceInterface* iface = DeviceTypeRegistry::global().interface(g_toy);
  ASSERT_NE(iface, nullptr);
  Tensor t = f32({1, 2, 3, 4}, {4}, toy(0));
  Tensor other = f32({5}, {1}, toy(1));
  char* base = static_cast<char*>(t.data_ptr());
  float buf[8] = {};
  // Starts inside the 16-byte allocation, runs 8 bytes past its end.
  std::string past = errorOf([&] { iface->copyDeviceToHost(buf, base + 8, toy(0), 16); });
  EXPECT_THAT(past, HasSubstr("runs past the end of its allocation"));
  EXPECT_THAT(past, HasSubstr("toyaccel:0"));
  EXPECT_THAT(errorOf([&] { iface->copyHostToDevice(base + 16, toy(0), buf, 4); }),
              HasSubstr("not inside any live allocation"));
  EXPECT_THAT(errorOf([&] { iface->copyDeviceToHost(buf, buf + 4, toy(0), 4); }),
              HasSubstr("is not a toyaccel address"));
  EXPECT_THAT(errorOf([&] { iface->memset(other.data_ptr(), toy(0), 0, 4); }), HasSubstr("belongs to toyaccel:1"));
  // More than a device's 256 MiB arena: the plugin says "out of memory".
  EXPECT_THAT(errorOf([] {
                emptyTensor({100, 1000, 1000}, ScalarType::Float32, toy(1));
              }),
              HasSubstr("out of memory on toyaccel:1"));
  // In range: fine, and nothing above wrote anything.
  iface->copyDeviceToHost(buf, base + 4, toy(0), 12);
  EXPECT_EQ(std::vector<float>(buf, buf + 3), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(t.toVector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(other.toVector<float>(), (std::vector<float>{5}));
}

// ----------------------------------------------------- native kernels

class ToyAccelNative : public ::testing::TestWithParam<int> {
 protected:
  Device dev() const { return toy(GetParam()); }
};

TEST_P(ToyAccelNative, AddWithAlphaAndBroadcasting) {
  BinaryAlpha add = addOp();
  const std::vector<uint64_t> fallbacks = nativeOutFallbacks();
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  Tensor b = f32({10, 20, 30}, {3}, dev());
  Tensor r = add.call(a, b, 2);
  EXPECT_EQ(r.device(), dev());
  EXPECT_EQ(r.sizes(), IntArrayRef({2, 3}));
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{21, 42, 63, 24, 45, 66}));
  Tensor col = f32({1, 2}, {2, 1}, dev());
  EXPECT_EQ(add.call(col, b, 1).toVector<float>(), (std::vector<float>{11, 21, 31, 12, 22, 32}));
  EXPECT_EQ(add.call(a, b, 0.5).toVector<float>(), (std::vector<float>{6, 12, 18, 9, 15, 21}));
  EXPECT_EQ(nativeOutFallbacks(), fallbacks) << "a native kernel must not go through the CPU fallback";
}

TEST_P(ToyAccelNative, MulOnStridedExpandedAndOffsetViews) {
  Binary mul = mulOp();
  const std::vector<uint64_t> fallbacks = nativeOutFallbacks();
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  EXPECT_EQ(mul.call(a.t(), a.t()).toVector<float>(), (std::vector<float>{1, 16, 4, 25, 9, 36}));
  Tensor row = f32({1, 2, 3}, {3}, dev()).expand({2, 3});
  EXPECT_EQ(mul.call(row, a).toVector<float>(), (std::vector<float>{1, 4, 9, 4, 10, 18}));
  Tensor every_other = f32({1, 2, 3, 4, 5, 6}, {6}, dev()).slice(0, 1, 6, 2);  // 2, 4, 6
  EXPECT_EQ(mul.call(every_other, a.select(0, 1)).toVector<float>(), (std::vector<float>{8, 20, 36}));
  Tensor r = mul.call(a, a);
  EXPECT_EQ(r.device(), dev());
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_EQ(nativeOutFallbacks(), fallbacks);
}

TEST_P(ToyAccelNative, ReluKeepsNaNAndInfinities) {
  Unary relu = reluOp();
  const std::vector<uint64_t> fallbacks = nativeOutFallbacks();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = f32({-1, 2, -3, 4, nan, -inf, inf, 0}, {2, 4}, dev());
  Tensor r = relu.call(a);
  EXPECT_EQ(r.device(), dev());
  EXPECT_THAT(r.toVector<float>(), Pointwise(NanSensitiveFloatEq(), std::vector<float>{0, 2, 0, 4, nan, 0, inf, 0}));
  EXPECT_EQ(relu.call(a.t()).toVector<float>().size(), 8u);
  EXPECT_THAT(relu.call(a.slice(1, 0, 4, 2)).toVector<float>(),  // columns 0 and 2
              Pointwise(NanSensitiveFloatEq(), std::vector<float>{0, 0, nan, inf}));
  EXPECT_EQ(nativeOutFallbacks(), fallbacks);
}

TEST_P(ToyAccelNative, MmOnTransposedOperands) {
  const std::vector<uint64_t> fallbacks = nativeOutFallbacks();
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  Tensor b = f32({1, 0, -1, 2, 0.5f, 1}, {3, 2}, dev());
  Tensor r = mmOp().call(a, b);
  EXPECT_EQ(r.device(), dev());
  EXPECT_EQ(r.sizes(), IntArrayRef({2, 2}));
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{0.5f, 7, 2, 16}));
  // a^T @ a: both operands strided.
  EXPECT_EQ(mmOp().call(a.t(), a).toVector<float>(), (std::vector<float>{17, 22, 27, 22, 29, 36, 27, 36, 45}));
  // k == 0: zeros.
  EXPECT_EQ(mmOp().call(f32({}, {2, 0}, dev()), f32({}, {0, 3}, dev())).toVector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(nativeOutFallbacks(), fallbacks);
}

TEST_P(ToyAccelNative, SumOverDimsWithKeepdim) {
  const std::vector<uint64_t> fallbacks = nativeOutFallbacks();
  Tensor m = f32({-1, 2, -3, 4, 5, 6}, {2, 3}, dev());
  Tensor all = sumOp().call(m.t(), std::nullopt);
  EXPECT_EQ(all.dim(), 0);
  EXPECT_EQ(all.item<float>(), 13.0f);
  const int64_t dim0[] = {0}, dim_last[] = {-1}, both[] = {1, 0};
  EXPECT_EQ(sumDimOp().call(m, IntArrayRef(dim0), false, std::nullopt).toVector<float>(),
            (std::vector<float>{3, 7, 3}));
  Tensor kept = sumDimOp().call(m, IntArrayRef(dim_last), true, std::nullopt);
  EXPECT_EQ(kept.sizes(), IntArrayRef({2, 1}));
  EXPECT_EQ(kept.toVector<float>(), (std::vector<float>{-2, 15}));
  EXPECT_EQ(sumDimOp().call(m.t(), IntArrayRef(both), false, std::nullopt).item<float>(), 13.0f);
  // Over an empty dimension: zeros of the kept shape.
  EXPECT_EQ(sumDimOp().call(f32({}, {0, 3}, dev()), IntArrayRef(dim0), false, std::nullopt).toVector<float>(),
            std::vector<float>(3, 0.0f));
  EXPECT_EQ(nativeOutFallbacks(), fallbacks);
}

// out= forms: a strided `out` is written through its strides, and in place
// (`out` is the input) each element is read before it is written.
TEST_P(ToyAccelNative, OutFormsWriteStridedAndAliasedOutputs) {
  const std::vector<uint64_t> fallbacks = nativeOutFallbacks();
  Tensor a = f32({1, -2, 3, -4, 5, -6}, {2, 3}, dev());
  Tensor holder = f32({0, 0, 0, 0, 0, 0}, {3, 2}, dev());
  Tensor out_t = holder.t();  // [2, 3], not contiguous
  Tensor r = reluOutOp().call(a, out_t);
  EXPECT_EQ(r.unsafeGetImpl(), out_t.unsafeGetImpl());
  EXPECT_EQ(out_t.toVector<float>(), (std::vector<float>{1, 0, 3, 0, 5, 0}));
  EXPECT_EQ(holder.toVector<float>(), (std::vector<float>{1, 0, 0, 5, 3, 0}));
  mulOutOp().call(a, a, a);  // a *= a, through mul.out(out=self)
  EXPECT_EQ(a.toVector<float>(), (std::vector<float>{1, 4, 9, 16, 25, 36}));
  Tensor b = f32({1, 2, 3}, {3}, dev());
  addOutOp().call(a, b, Scalar(-1.0), a);  // a -= b (broadcast), in place
  EXPECT_EQ(a.toVector<float>(), (std::vector<float>{0, 2, 6, 15, 23, 33}));
  Tensor empty_out = f32({}, {0}, dev());  // resized by the shape rule
  addOutOp().call(a, b, Scalar(int64_t{1}), empty_out);
  EXPECT_EQ(empty_out.sizes(), IntArrayRef({2, 3}));
  EXPECT_EQ(empty_out.toVector<float>(), (std::vector<float>{1, 4, 9, 16, 25, 36}));
  EXPECT_EQ(nativeOutFallbacks(), fallbacks);
}

TEST_P(ToyAccelNative, ZeroDimAndEmptyTensors) {
  Tensor s = f32({3}, {}, dev());
  Tensor r = addOp().call(s, s, 1);
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.item<float>(), 6.0f);
  Tensor v = f32({1, 2}, {2}, dev());
  EXPECT_EQ(mulOp().call(s, v).toVector<float>(), (std::vector<float>{3, 6}));
  Tensor e = f32({}, {0, 3}, dev());
  Tensor re = addOp().call(e, f32({1, 2, 3}, {3}, dev()), 1);
  EXPECT_EQ(re.sizes(), IntArrayRef({0, 3}));
  EXPECT_EQ(re.device(), dev());
  EXPECT_EQ(reluOp().call(e).sizes(), IntArrayRef({0, 3}));
}

// The same inputs, built the same way on the cpu and on toyaccel, through
// the same views: toyaccel must agree with the CPU plugin.
struct LayoutCase {
  const char* name;
  std::function<std::pair<Tensor, Tensor>(Device)> make;
};

std::vector<LayoutCase> layoutCases() {
  return {
      {"contiguous",
       [](Device d) {
         return std::pair(random({2, 3}, d, 1), random({2, 3}, d, 2));
       }},
      {"broadcast row",
       [](Device d) {
         return std::pair(random({4, 3}, d, 3), random({3}, d, 4));
       }},
      {"broadcast both",
       [](Device d) {
         return std::pair(random({2, 1, 3}, d, 5), random({4, 1}, d, 6));
       }},
      {"transposed",
       [](Device d) {
         return std::pair(random({2, 3}, d, 7).t(), random({3, 2}, d, 8));
       }},
      {"expanded",
       [](Device d) {
         return std::pair(random({3}, d, 9).expand({4, 3}), random({4, 3}, d, 10));
       }},
      {"sliced", [](Device d) { return std::pair(random({8}, d, 11).slice(0, 1, 8, 3), random({3}, d, 12)); }},
      {"offset",
       [](Device d) {
         return std::pair(random({4, 5}, d, 13).select(0, 2), random({5}, d, 14));
       }},
      {"permuted",
       [](Device d) {
         return std::pair(random({2, 3, 4}, d, 15).permute({2, 0, 1}), random({4, 1, 3}, d, 16));
       }},
      {"overlapping",
       [](Device d) {
         return std::pair(random({6}, d, 17).as_strided({3, 3}, {1, 1}), random({3, 3}, d, 18));
       }},
      {"0-d and 2-d",
       [](Device d) {
         return std::pair(random({}, d, 19), random({2, 2}, d, 20));
       }},
      {"0-d and 0-d", [](Device d) { return std::pair(random({}, d, 21), random({}, d, 22)); }},
      {"empty",
       [](Device d) {
         return std::pair(random({0, 3}, d, 23), random({3}, d, 24));
       }},
      {"large transposed",
       [](Device d) {
         return std::pair(random({33, 64}, d, 25).t(), random({33}, d, 26));
       }},
  };
}

TEST_P(ToyAccelNative, AgreesWithTheCpuPluginOnEveryLayout) {
  for (const LayoutCase& c : layoutCases()) {
    SCOPED_TRACE(c.name);
    auto [ca, cb] = c.make(kCpu);
    auto [ta, tb] = c.make(dev());
    ASSERT_EQ(ta.device(), dev());
    auto check = [&](const Tensor& want, const Tensor& got) {
      EXPECT_EQ(got.device(), dev());
      EXPECT_EQ(got.sizes(), want.sizes());
      EXPECT_THAT(got.toVector<float>(), Pointwise(::testing::FloatNear(1e-4f), want.toVector<float>()));
    };
    check(addOp().call(ca, cb, 1), addOp().call(ta, tb, 1));
    check(addOp().call(ca, cb, -2.5), addOp().call(ta, tb, -2.5));
    check(mulOp().call(ca, cb), mulOp().call(ta, tb));
    check(reluOp().call(ca), reluOp().call(ta));
    check(reluOp().call(cb), reluOp().call(tb));
    check(sumOp().call(ca, std::nullopt), sumOp().call(ta, std::nullopt));
  }
}

INSTANTIATE_TEST_SUITE_P(BothDevices, ToyAccelNative, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) { return "toyaccel" + std::to_string(i.param); });

// ----------------------------------------------------------- CPU fallback

class ToyAccelFallback : public ::testing::TestWithParam<int> {
 protected:
  Device dev() const { return toy(GetParam()); }
  // Runs `call` and checks that op `name` went through the CPU fallback
  // once, moving `bytes` bytes between toyaccel and the host.
  template <class F>
  Tensor expectFallback(const char* name, uint64_t bytes, F&& call) {
    const OperatorHandle op = Dispatcher::singleton().findOpOrThrow(name);
    const uint64_t calls0 = op.fallbackCalls(toyKey()), bytes0 = op.fallbackBytes(toyKey());
    Tensor r = call();
    EXPECT_EQ(op.fallbackCalls(toyKey()), calls0 + 1);
    EXPECT_EQ(op.fallbackBytes(toyKey()), bytes0 + bytes);
    EXPECT_EQ(r.device(), dev()) << "a fallback result goes back to the inputs' device";
    return r;
  }
};

TEST_P(ToyAccelFallback, SubWithAlphaAndBroadcasting) {
  BinaryAlpha sub = subOp();
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  Tensor b = f32({10, 20, 30}, {3}, dev());
  // In: a (24 bytes) and b (12); out: the [2, 3] result (24), which is only
  // written (nothing copied in).
  Tensor r = expectFallback("bp::sub.out", 24 + 12 + 24, [&] { return sub.call(a, b, 2); });
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{-19, -38, -57, -16, -35, -54}));
}

TEST_P(ToyAccelFallback, NegOfAStridedView) {
  Unary neg = negOp();
  Tensor every_other = f32({1, 2, 3, 4, 5, 6}, {6}, dev()).slice(0, 0, 6, 2);  // 1, 3, 5
  // In: the view's span, elements 0..4 (20 bytes); out: 3 floats (12).
  Tensor r = expectFallback("bp::neg.out", 20 + 12, [&] { return neg.call(every_other); });
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{-1, -3, -5}));
}

// The five native ops serve float32 only (bp::Dtypes): other dtypes go to
// the CPU fallback, with no per-dtype code in the plugin.
TEST_P(ToyAccelFallback, SumOfInt32FallsBackToAnInt64Result) {
  Sum sum = sumOp();
  ASSERT_EQ(sum.kernelKind(toyKey()), KernelKind::Composite);
  Tensor m = tensorFromVector<int32_t>({-1, 2, -3, 4}, {2, 2}, dev());
  // sum is a composite over sum.IntList_out, whose toyaccel kernel declares
  // float32 only. In: the view's span (16 bytes); out: the 0-d int64
  // result (8), only written.
  Tensor r = expectFallback("bp::sum.IntList_out", 16 + 8, [&] { return sum.call(m.t(), std::nullopt); });
  EXPECT_EQ(r.dim(), 0);
  EXPECT_EQ(r.dtype(), ScalarType::Int64);
  EXPECT_EQ(r.item<int64_t>(), 2);
}

TEST_P(ToyAccelFallback, Float64AddAndInt32ReluFallBack) {
  Tensor d = tensorFromVector<double>({1, 2}, {2}, dev()), e = tensorFromVector<double>({10, 20}, {2}, dev());
  Tensor r = expectFallback("bp::add.out", 16 + 16 + 16, [&] { return addOp().call(d, e, 1); });
  EXPECT_EQ(r.toVector<double>(), (std::vector<double>{11, 22}));
  Tensor i = tensorFromVector<int32_t>({-1, 3}, {2}, dev());
  EXPECT_EQ(expectFallback("bp::relu.out", 8 + 8, [&] { return reluOp().call(i); }).toVector<int32_t>(),
            (std::vector<int32_t>{0, 3}));
  // float32 inputs with a float64 `out`: not every tensor is float32. A
  // caller's add.out computes such a call in float32 and casts (Note [out=
  // of another dtype]), so only a composite that skips the meta hands the
  // kernel a mixed call; the declared dtypes send it to the fallback.
  Tensor a = f32({1, -1}, {2}, dev()), b = f32({2, 3}, {2}, dev());
  Tensor out = tensorFromVector<double>({0, 0}, {2}, dev());
  expectFallback("bp::add.out", 8 + 8 + 16, [&] { return addOutOp().callSkippingMeta(a, b, 1, out); });
  EXPECT_EQ(out.toVector<double>(), (std::vector<double>{3, 2}));
  // relu.out writes only its result's dtype (as PyTorch).
  Tensor f = f32({1, -1}, {2}, dev());
  Tensor out64 = tensorFromVector<double>({0, 0}, {2}, dev());
  EXPECT_THROW(reluOutOp().call(f, out64), std::exception);
}

TEST_P(ToyAccelFallback, DivByAZeroDimTensor) {
  Binary div = divOp();
  Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev());
  Tensor two = f32({2}, {}, dev());
  Tensor r = expectFallback("bp::div.out", 24 + 4 + 24, [&] { return div.call(a, two); });
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
}

TEST_P(ToyAccelFallback, NativeAndFallbackOpsCompose) {
  // relu(a * b + c) - c: native, native, native, fallback; all on toyaccel.
  Tensor a = f32({1, -2, 3}, {3}, dev()), b = f32({2, 2, -2}, {3}, dev()), c = f32({1, 1, 1}, {3}, dev());
  Tensor r = subOp().call(reluOp().call(addOp().call(mulOp().call(a, b), c, 1)), c, 1);
  EXPECT_EQ(r.device(), dev());
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{2, -1, -1}));
}

INSTANTIATE_TEST_SUITE_P(BothDevices, ToyAccelFallback, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) { return "toyaccel" + std::to_string(i.param); });

TEST(ToyAccelFallbackMode, ErrorModeRefusesFallbackButNativeKernelsStillRun) {
  Dispatcher& d = Dispatcher::singleton();
  const FallbackMode before = d.fallbackMode();
  d.setFallbackMode(FallbackMode::Error);
  Tensor a = f32({1, 2}, {2}, toy(0));
  std::string msg = errorOf([&] { subOp().call(a, a, 1); });
  EXPECT_THAT(msg, HasSubstr("bp::sub.out"));
  EXPECT_THAT(msg, HasSubstr("toyaccel"));
  EXPECT_THAT(msg, HasSubstr("CPU fallback is disabled"));
  EXPECT_EQ(addOp().call(a, a, 1).toVector<float>(), (std::vector<float>{2, 4}));
  d.setFallbackMode(before);
}

// ---------------------------------------------------- devices and dtypes

TEST(ToyAccelMixed, TensorsOnTheTwoToyDevicesDoNotMix) {
  Tensor a = f32({1, 2}, {2}, toy(0)), b = f32({3, 4}, {2}, toy(1));
  for (const std::string& msg : {errorOf([&] { addOp().call(a, b, 1); }), errorOf([&] { mulOp().call(b, a); })}) {
    EXPECT_THAT(msg, HasSubstr("expected all tensors on one device"));
    EXPECT_THAT(msg, HasSubstr("toyaccel:0"));
    EXPECT_THAT(msg, HasSubstr("toyaccel:1"));
  }
}

TEST(ToyAccelMixed, CpuTensorsMixOnlyAsZeroDimScalars) {
  Tensor a = f32({1, 2, 3}, {3}, toy(1));
  std::string msg = errorOf([&] { addOp().call(a, f32({1, 1, 1}, {3}), 1); });
  EXPECT_THAT(msg, HasSubstr("bp::add.Tensor"));
  EXPECT_THAT(msg, HasSubstr("on cpu"));
  EXPECT_THAT(msg, HasSubstr("expected all tensors on one device"));
  // A 0-d cpu tensor is a scalar, as in PyTorch; the result stays on toyaccel.
  Tensor r = addOp().call(a, f32({10}, {}), 1);
  EXPECT_EQ(r.device(), toy(1));
  EXPECT_EQ(r.toVector<float>(), (std::vector<float>{11, 12, 13}));
  Tensor m = mulOp().call(f32({2}, {}), f32({1, 2}, {2}, toy(0)));
  EXPECT_EQ(m.device(), toy(0));
  EXPECT_EQ(m.toVector<float>(), (std::vector<float>{2, 4}));
}

// The shape rule runs before any kernel: what it refuses never reaches toyaccel.
TEST(ToyAccelMixed, ShapeErrorsComeFromTheRuleNotTheKernel) {
  const std::vector<uint64_t> fallbacks = nativeOutFallbacks();
  EXPECT_THAT(errorOf([&] {
                addOp().call(f32({1, 2, 3}, {3}, toy(0)), f32({1, 2}, {2}, toy(0)), 1);
              }),
              HasSubstr("bp::add"));
  EXPECT_THAT(errorOf([&] {
                mmOp().call(f32({1, 2}, {1, 2}, toy(0)), f32({1, 2}, {1, 2}, toy(0)));
              }),
              HasSubstr("bp::mm"));
  EXPECT_EQ(nativeOutFallbacks(), fallbacks);
}

// toyaccel::bias_relu, the plugin's own operator (Note [toyaccel::bias_relu]):
// its rule refuses what its kernels cannot take before any of them runs,
// the toyaccel kernel agrees with the cpu one, float64 goes to the cpu kernel
// through the fallback, and it trains on toyaccel through its declared
// derivative.
TEST(ToyAccelOwnOperator, BiasReluRuleKernelsAndGradient) {
  auto op = Dispatcher::singleton().findOpOrThrow("toyaccel::bias_relu").typed<Tensor(const Tensor&, const Tensor&)>();
  const std::vector<float> xs = {-3, 1, 2, -0.5f, 4, -2};
  const std::vector<float> bs = {1, -2, 0.25f};
  const std::vector<float> want = {0, 0, 2.25f, 0.5f, 2, 0};
  EXPECT_EQ(op.call(f32(xs, {2, 3}, toy(1)), f32(bs, {3}, toy(1))).toVector<float>(), want);
  EXPECT_EQ(op.call(f32(xs, {2, 3}), f32(bs, {3})).toVector<float>(), want);
  Tensor r64 = op.call(f32(xs, {2, 3}, toy(0)).to(ScalarType::Float64), f32(bs, {3}, toy(0)).to(ScalarType::Float64));
  EXPECT_EQ(r64.device(), toy(0));
  EXPECT_EQ(r64.dtype(), ScalarType::Float64);
  EXPECT_EQ(r64.to(ScalarType::Float32).toVector<float>(), want);

  EXPECT_THAT(errorOf([&] {
                op.call(f32(xs, {2, 3}, toy(0)), f32(bs, {3}, toy(1)));
              }),
              HasSubstr("toyaccel::bias_relu: x is on toyaccel:0 but bias is on toyaccel:1"));
  EXPECT_THAT(errorOf([&] { op.call(f32(xs, {2, 3}, toy(0)), f32(bs, {3})); }), HasSubstr("but bias is on cpu:0"));
  EXPECT_THAT(errorOf([&] {
                op.call(f32(xs, {3, 2}, toy(0)), f32(bs, {3}, toy(0)));
              }),
              HasSubstr("bias must have one dim of x's last size (2)"));

  // The forms the host derived: out= (an empty out is resized) and in place.
  auto out_form = Dispatcher::singleton()
                      .findOpOrThrow("toyaccel::bias_relu.out")
                      .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  Tensor out = f32({}, {0}, toy(1));
  out_form.call(f32(xs, {2, 3}, toy(1)), f32(bs, {3}, toy(1)), out);
  EXPECT_EQ(out.toVector<float>(), want);
  Tensor self = f32(xs, {2, 3}, toy(1));
  Dispatcher::singleton()
      .findOpOrThrow("toyaccel::bias_relu_")
      .typed<Tensor(const Tensor&, const Tensor&)>()
      .call(self, f32(bs, {3}, toy(1)));
  EXPECT_EQ(self.toVector<float>(), want);

  // Gradients on toyaccel, through toyaccel::bias_relu_backward.
  Tensor x = f32(xs, {2, 3}, toy(0)), b = f32(bs, {3}, toy(0));
  x.requires_grad_();
  b.requires_grad_();
  op.call(x, b).sum().backward();
  EXPECT_EQ(x.grad().toVector<float>(), (std::vector<float>{0, 0, 1, 1, 1, 0}));
  EXPECT_EQ(b.grad().toVector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(x.grad().device(), toy(0));
}

// Regression: ops without a toyaccel kernel (run by the CPU fallback) once
// accepted mixed devices that the native kernels, like PyTorch, reject.
TEST(ToyAccelMixed, FallbackOpsRejectMixedDevicesToo) {
  Tensor a = f32({1, 2}, {2}, toy(0)), b = f32({3, 4}, {2}, toy(1));
  EXPECT_THAT(errorOf([&] { subOp().call(a, b, 1); }), HasSubstr("toyaccel:1"));
  EXPECT_THAT(errorOf([&] { subOp().call(a, f32({1, 1}, {2}), 1); }), HasSubstr("cpu"));
}

// -------------------------------------- what the sample adds for vendors

// add.out declares float16 and float32: a float16 + float32 call (and any
// other mix of the two) runs the toyaccel kernel, reading each tensor in its
// own dtype, and agrees with the CPU.
TEST(ToyAccelMixedDtypes, AddOutTakesFloat16AndFloat32TogetherNatively) {
  EXPECT_EQ(opNamed("bp::add.out").declaredDtypes(toyKey())->str(), "float16, float32");
  const std::vector<uint64_t> fallbacks = nativeOutFallbacks();
  const Tensor a = f32({1.5f, -2, 3.25f}, {3}).to(ScalarType::Float16), b = f32({0.25f, 4, -1}, {3});
  const Tensor want = addOp().call(a, b, 2);  // on the cpu: float32
  Tensor got = addOp().call(a.to(toy(0)), b.to(toy(0)), 2);
  EXPECT_EQ(got.dtype(), ScalarType::Float32);
  EXPECT_EQ(got.toVector<float>(), want.toVector<float>());
  // Into a float16 out the caller chose: float32 + float16 -> float16.
  Tensor out16 = f32({0, 0, 0}, {3}, toy(1)).to(ScalarType::Float16);
  addOutOp().call(b.to(toy(1)), a.to(toy(1)), 1, out16);
  EXPECT_EQ(out16.to(ScalarType::Float32).toVector<float>(), (std::vector<float>{1.75f, 2, 2.25f}));
  EXPECT_EQ(nativeOutFallbacks(), fallbacks) << "a declared mix must not go through the CPU fallback";
}

// mm.out declines what toyaccel's matrix unit cannot hold (bp::decline): the
// call runs where it would have gone without the kernel, the CPU fallback,
// with the same result; the declines are counted, and with
// BACKPLANE_FALLBACK=error the call is refused, naming the reason.
TEST(ToyAccelDecline, MmDeclinesOperandsLargerThanTheDeviceHolds) {
  OperatorHandle mm_out = opNamed("bp::mm.out");
  const uint64_t declined = mm_out.declinedCalls(toyKey()), fallbacks = mm_out.fallbackCalls(toyKey());
  std::vector<float> row(2100, 0.5f);
  const Tensor a = f32(row, {1, 2100}), b = f32(row, {2100, 1});
  Tensor got = mmOp().call(a.to(toy(0)), b.to(toy(0)));
  EXPECT_EQ(got.device(), toy(0));
  EXPECT_EQ(got.toVector<float>(), (std::vector<float>{525}));
  EXPECT_EQ(mm_out.declinedCalls(toyKey()), declined + 1);
  EXPECT_EQ(mm_out.fallbackCalls(toyKey()), fallbacks + 1);
  mmOp().call(f32({1, 2}, {1, 2}, toy(0)), f32({3, 4}, {2, 1}, toy(0)));
  EXPECT_EQ(mm_out.declinedCalls(toyKey()), declined + 1) << "a small mm is served natively";

  Dispatcher& d = Dispatcher::singleton();
  const FallbackMode before = d.fallbackMode();
  d.setFallbackMode(FallbackMode::Error);
  EXPECT_THAT(errorOf([&] { mmOp().call(a.to(toy(0)), b.to(toy(0))); }),
              HasSubstr("its kernel declined it: toyaccel's mm holds at most 2048 rows or columns"));
  d.setFallbackMode(before);
}

// Streams and events on a plugin device (Note [toyaccel streams]), as an
// application uses them: the capabilities say so, a StreamGuard sets the
// current stream of one device alone, an event orders a stream of the same
// or the other device, and a stream of one device is refused on another.
TEST(ToyAccelStreams, StreamsAndEventsThroughTheApplicationApi) {
  Runtime rt(RuntimeOptions{.load_default_plugins = false});
  const DeviceCapabilities caps = rt.capabilities(toy(0));
  EXPECT_EQ(caps.str(), "streams, current_stream, events, event_wait, event_query, event_wait_device");

  Stream s0 = Stream::create(toy(0));
  EXPECT_FALSE(s0.isDefault());
  {
    StreamGuard on(s0);
    EXPECT_EQ(Stream::current(toy(0)), s0);
    EXPECT_TRUE(Stream::current(toy(1)).isDefault()) << "the current stream is set for its device alone";
    Tensor x = f32({1, 2, 3}, {3}, toy(0));
    Event done = s0.record();
    EXPECT_EQ(addOp().call(x, x, 1).toVector<float>(), (std::vector<float>{2, 4, 6}));
    Stream::defaultStream(toy(0)).wait(done);
    EXPECT_TRUE(done.query());
  }
  EXPECT_TRUE(Stream::current(toy(0)).isDefault());
  Event e(toy(0));
  e.record(s0);
  e.wait(Stream::create(toy(1)));  // another device's stream (event_wait_device)
  e.synchronize();
  s0.synchronize();
  // An event of toyaccel:1 recorded on a stream of toyaccel:0: refused.
  Event other(toy(1));
  const std::string refused = errorOf([&] { other.record(s0); });
  EXPECT_THAT(refused, HasSubstr("toyaccel:1"));
  EXPECT_THAT(refused, HasSubstr("toyaccel:0"));
}

// ------------------------------------------------------------ concurrency

TEST(ToyAccelConcurrency, KernelsAndCopiesFromManyThreads) {
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      const Device d = toy(t % 2);
      for (int i = 0; i < 100; ++i) {
        const float x = static_cast<float>(t * 1000 + i);
        Tensor a = f32({x, -x, 1}, {3}, d);
        Tensor r = reluOp().call(addOp().call(a, a, 1));
        if (r.toVector<float>() != std::vector<float>{2 * x, 0, 2}) ++failures[static_cast<size_t>(t)];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures, (std::vector<int>{0, 0, 0, 0}));
}

// ------------------------------------------------------------------ unload

// ------------------------------------------------- the application API

// What an application sees: the Runtime finds toyaccel's devices and picks
// one for "auto" (a vendor type comes before the cpu), and ops.h code that
// knows nothing about toyaccel runs there, native or through the fallback.
TEST(ToyAccelApplicationApi, AutoPicksToyAccelAndTheSameCodeRunsThere) {
  Runtime rt(RuntimeOptions{.load_default_plugins = false});
  std::vector<std::string> present;
  for (const DeviceInfo& d : rt.devices()) present.push_back(d.device.str() + " " + d.provider);
  EXPECT_THAT(present, ::testing::IsSupersetOf({"toyaccel:0 toyaccel", "toyaccel:1 toyaccel", "cpu built-in"}));
  const Device dev = rt.device("auto");
  ASSERT_EQ(dev, toy(0));

  auto layer = [](const Tensor& x, const Tensor& w) { return ((x * 2.0 + x).matmul(w) - 1).relu().sum({1}); };
  Tensor x = random({4, 3}, kCpu, 21), w = random({3, 5}, kCpu, 22);
  Tensor on_toy = layer(x.to(dev), w.to(dev));
  EXPECT_EQ(on_toy.device(), dev);
  EXPECT_THAT(on_toy.toVector<float>(), Pointwise(::testing::FloatNear(1e-4f), layer(x, w).toVector<float>()));
  EXPECT_THAT(tensorFromVector<float>({1, 2}, {2}, dev).format(), HasSubstr("toyaccel:0)"));
  EXPECT_THAT(errorOf([&] { rt.device("toyaccel:2"); }), HasSubstr("toyaccel has 2 devices"));
}

TEST(ToyAccelUnload, RefusedWhileATensorIsAlive) {
  Tensor keep = f32({1}, {1}, toy(1));
  absl::Status s = plugins().unload(kToy);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("toyaccel"));
  ASSERT_TRUE(statusOf(kToy).has_value()) << "the plugin must still be loaded";
  EXPECT_EQ(keep.toVector<float>(), (std::vector<float>{1}));
  EXPECT_GE(statusOf(kToy)->live_allocations, 1);
}
// The unload itself runs in ToyAccelEnvironment::TearDown, after every test.

}  // namespace
}  // namespace backplane

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();
  const char* path = std::getenv("BACKPLANE_TOYACCEL_PLUGIN");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr,
                 "vendor_plugin_test: BACKPLANE_TOYACCEL_PLUGIN is not set. Set it to the toyaccel plugin (.so) "
                 "built from samples/vendor_plugin against an installed Backplane, or run "
                 "samples/vendor_plugin_test/run_vendor_test.sh (ctest -R vendor_plugin), which builds it.\n");
    return 2;
  }
  backplane::g_toy_path = path;
  ::testing::AddGlobalTestEnvironment(new backplane::ToyAccelEnvironment);
  return RUN_ALL_TESTS();
}
