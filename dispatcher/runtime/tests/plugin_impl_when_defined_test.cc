// BP_HostApi.impl_when_defined (ABI 1.4) and bp::Library::implWhenDefined,
// through real plugins (tests/plugins/tp_wd_*): a device plugin's kernel for
// an operator that another plugin defines, whichever loads first (Note
// [Kernels for operators defined later]; in process: impl_when_defined_test.cc).
//   tp_wd_definer      defines tpwd::scale(Tensor self, float factor) -> Tensor
//                      and tpwd::shift(Tensor self, float amount) -> Tensor
//   tp_wd_definer_int  the same with `int factor`: a definition tp_wd_kernel does not fit
//   tp_wd_kernel       C, impl_when_defined for tpwd::scale on cpu (x * factor)
//   tp_wd_kernel_bad   the same declaring (Tensor, int) -> Tensor
//   tp_wd_kernel_nosig the same declaring no signature
//   tp_wd_kernel_v1_3  the same reporting ABI 1.3, checking struct_size first
//   tp_wd_sdk          C++ SDK, implWhenDefined for tpwd::shift on cpu (x + amount)
#include <optional>
#include <string>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/plugin_api.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/cpu_kernels.h"

#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif

namespace backplane {
namespace {

using testing::expectError;
using testing::floats;
using ::testing::HasSubstr;
using ::testing::Not;

// The slot is appended to the host table, after the last 1.1 slot.
static_assert(offsetof(BP_HostApi, impl_when_defined) == BP_STRUCT_SIZE(BP_HostApi, device_type_name),
              "ABI 1.4 appended impl_when_defined right after device_type_name");
static_assert(offsetof(BP_HostApi, derivative) == BP_STRUCT_SIZE(BP_HostApi, impl_when_defined),
              "ABI 1.6 appended derivative right after impl_when_defined");
static_assert(offsetof(BP_HostApi, meta) == BP_STRUCT_SIZE(BP_HostApi, derivative),
              "ABI 1.9 appended meta right after derivative");
static_assert(offsetof(BP_HostApi, group_info) == BP_STRUCT_SIZE(BP_HostApi, derive_forms),
              "ABI 1.10 appended group_info right after derive_forms");
static_assert(offsetof(BP_HostApi, store_set) == BP_STRUCT_SIZE(BP_HostApi, group_info),
              "ABI 1.11 appended store_set right after group_info");
static_assert(BP_HostApi_STRUCT_SIZE == BP_STRUCT_SIZE(BP_HostApi, store_get),
              "store_get is the host table's last slot");

const char* const kPlugins[] = {"tp_wd_definer",      "tp_wd_definer_int", "tp_wd_kernel", "tp_wd_kernel_bad",
                                "tp_wd_kernel_nosig", "tp_wd_kernel_v1_3", "tp_wd_sdk"};

std::string pluginFile(std::string_view name) { return strCat(BACKPLANE_TEST_PLUGIN_DIR, "/", name, ".so"); }

bool isLoaded(std::string_view name) {
  for (const PluginStatus& p : plugins().plugins())
    if (p.loaded && p.name == name) return true;
  return false;
}

Dispatcher& dispatcher() { return Dispatcher::singleton(); }

std::vector<float> scale(std::vector<float> x, double f) {
  return dispatcher()
      .findOpOrThrow("tpwd::scale")
      .typed<Tensor(const Tensor&, double)>()
      .call(floats(std::move(x)), f)
      .toVector<float>();
}

KernelKind scaleKind() {
  std::optional<OperatorHandle> op = dispatcher().findOp("tpwd::scale");
  return op ? op->kernelKind(DispatchKey::CPU) : KernelKind::Missing;
}

std::vector<Dispatcher::InactiveKernel> inactiveScaleKernels() {
  std::vector<Dispatcher::InactiveKernel> out;
  for (Dispatcher::InactiveKernel& k : dispatcher().inactiveKernels())
    if (k.op == "tpwd::scale") out.push_back(std::move(k));
  return out;
}

class PluginImplWhenDefinedTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : kPlugins) {
      if (isLoaded(name)) {
        absl::Status s = plugins().unload(name);
        EXPECT_TRUE(s.ok()) << "left loaded by the test and cannot be unloaded: " << s;
      }
    }
    absl::Status inv = dispatcher().checkInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
  }
  static PluginStatus load(std::string_view name) {
    absl::StatusOr<PluginStatus> s = plugins().load(pluginFile(name));
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : PluginStatus{};
  }
  static void unload(std::string_view name) {
    absl::Status s = plugins().unload(name);
    EXPECT_TRUE(s.ok()) << s;
  }
  static void expectInvariants() {
    absl::Status inv = dispatcher().checkInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
  }
};

// The order the GPU plugins meet the sparse-convolution plugin in: the kernel
// plugin first (backplane_cuda.so sorts before backplane_spconv.so).
TEST_F(PluginImplWhenDefinedTest, KernelPluginLoadedBeforeTheDefiner) {
  PluginStatus k = load("tp_wd_kernel");
  EXPECT_TRUE(k.loaded);
  EXPECT_EQ(k.kernels, 1u);
  EXPECT_EQ(k.abi_minor, static_cast<uint32_t>(BP_ABI_MINOR));
  // Waiting: not callable.
  expectError([] { dispatcher().findOpOrThrow("tpwd::scale"); }, absl::StatusCode::kNotFound,
              {"tpwd::scale: the operator is not defined"});
  ASSERT_EQ(inactiveScaleKernels().size(), 1u);
  EXPECT_EQ(inactiveScaleKernels()[0].registrant, "plugin tp_wd_kernel");

  load("tp_wd_definer");
  EXPECT_EQ(scaleKind(), KernelKind::Native);
  EXPECT_EQ(scale({1, -2, 3}, 2), (std::vector<float>{2, -4, 6}));
  EXPECT_TRUE(inactiveScaleKernels().empty());
  EXPECT_THAT(dispatcher().findOpOrThrow("tpwd::scale").dumpState(), HasSubstr("CPU: native [plugin tp_wd_kernel]"));

  // The definer goes: the kernel waits again; it comes back: the kernel serves calls.
  unload("tp_wd_definer");
  EXPECT_FALSE(dispatcher().findOp("tpwd::scale")->hasSchema());
  ASSERT_EQ(inactiveScaleKernels().size(), 1u);
  expectError([] { scale({1}, 2); }, {"tpwd::scale", "not defined"});
  load("tp_wd_definer");
  EXPECT_EQ(scale({1, 2}, 0.5), (std::vector<float>{0.5f, 1}));

  // The kernel plugin goes: the op stays defined, without a kernel.
  unload("tp_wd_kernel");
  EXPECT_EQ(scaleKind(), KernelKind::Missing);
  EXPECT_TRUE(inactiveScaleKernels().empty());
  expectError([] { scale({1}, 2); }, absl::StatusCode::kUnimplemented,
              {"tpwd::scale has no kernel for dispatch key CPU"});
  expectInvariants();
}

TEST_F(PluginImplWhenDefinedTest, DefinerLoadedFirstItIsImpl) {
  load("tp_wd_definer");
  load("tp_wd_kernel");
  EXPECT_EQ(scale({3}, 3), (std::vector<float>{9}));
  // A kernel that does not fit a definition already there fails the load, as impl does.
  absl::StatusOr<PluginStatus> bad = plugins().load(pluginFile("tp_wd_kernel_bad"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("plugin 'tp_wd_kernel_bad': the CPU kernel for tpwd::scale has C++ signature (Tensor, int) -> "
                        "Tensor, but the schema tpwd::scale(Tensor self, float factor) -> Tensor needs (Tensor, float) "
                        "-> Tensor"));
  EXPECT_EQ(scale({3}, 3), (std::vector<float>{9}));
  unload("tp_wd_kernel");
  unload("tp_wd_definer");
  expectInvariants();
}

TEST_F(PluginImplWhenDefinedTest, KernelPluginUnloadedBeforeTheDefinerLoads) {
  load("tp_wd_kernel");
  unload("tp_wd_kernel");
  EXPECT_TRUE(inactiveScaleKernels().empty());
  load("tp_wd_definer");
  EXPECT_EQ(scaleKind(), KernelKind::Missing);
  expectInvariants();
}

TEST_F(PluginImplWhenDefinedTest, AKernelThatDoesNotFitStaysInactiveAndTheDefinerLoads) {
  load("tp_wd_kernel_bad");
  ::testing::internal::CaptureStderr();
  PluginStatus d = load("tp_wd_definer");
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(d.loaded) << "the definer is not to blame for another plugin's kernel";
  EXPECT_THAT(log, HasSubstr("backplane: warning: the CPU kernel for tpwd::scale from plugin tp_wd_kernel_bad has C++ "
                             "signature (Tensor, int) -> Tensor, but the schema tpwd::scale(Tensor self, float "
                             "factor) -> Tensor (defined by plugin tp_wd_definer) needs (Tensor, float) -> Tensor; the "
                             "kernel stays inactive: rebuild plugin tp_wd_kernel_bad against this definition"));
  EXPECT_EQ(scaleKind(), KernelKind::Missing);
  ASSERT_EQ(inactiveScaleKernels().size(), 1u);
  EXPECT_EQ(inactiveScaleKernels()[0].registrant, "plugin tp_wd_kernel_bad");
  expectError([] { scale({1}, 2); }, absl::StatusCode::kUnimplemented,
              {"has no kernel for dispatch key CPU",
               "An inactive kernel: the CPU kernel for tpwd::scale from plugin "
               "tp_wd_kernel_bad"});
  // The other op of the definer is unaffected; unload in either order.
  EXPECT_TRUE(dispatcher().findOpOrThrow("tpwd::shift").hasSchema());
  unload("tp_wd_definer");
  unload("tp_wd_kernel_bad");
  EXPECT_TRUE(inactiveScaleKernels().empty());
  expectInvariants();
}

TEST_F(PluginImplWhenDefinedTest, ARedefinitionChecksTheWaitingKernelsAnew) {
  load("tp_wd_kernel");
  ::testing::internal::CaptureStderr();
  load("tp_wd_definer_int");  // tpwd::scale(Tensor self, int factor)
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("(defined by plugin tp_wd_definer_int) needs (Tensor, int) -> Tensor"));
  EXPECT_EQ(scaleKind(), KernelKind::Missing);
  unload("tp_wd_definer_int");
  load("tp_wd_definer");
  EXPECT_EQ(scaleKind(), KernelKind::Native);
  EXPECT_EQ(scale({2}, 4), (std::vector<float>{8}));
  expectInvariants();
}

// Without cpp_signature the kernel is boxed: it still serves calls.
TEST_F(PluginImplWhenDefinedTest, KernelWithoutASignatureIsCalledBoxed) {
  load("tp_wd_kernel_nosig");
  load("tp_wd_definer");
  EXPECT_EQ(scale({1, 2}, 3), (std::vector<float>{3, 6}));
  Stack stack{floats({4}), 0.5};
  dispatcher().findOpOrThrow("tpwd::scale").callBoxed(stack);
  EXPECT_EQ(stack.at(0).toTensor().toVector<float>(), (std::vector<float>{2}));
}

// A plugin reporting ABI 1.3 loads into this host, and finds the 1.4 slot
// after checking struct_size (it would fall back to impl on a 1.3 host).
TEST_F(PluginImplWhenDefinedTest, PluginOfAnOlderMinorLoadsAndFindsTheSlot) {
  PluginStatus k = load("tp_wd_kernel_v1_3");
  EXPECT_TRUE(k.loaded);
  EXPECT_EQ(k.abi_minor, 3u);
  load("tp_wd_definer");  // after the kernel: only impl_when_defined allows that
  EXPECT_EQ(scale({5}, 2), (std::vector<float>{10}));
}

TEST_F(PluginImplWhenDefinedTest, SdkPluginWithImplWhenDefined) {
  PluginStatus k = load("tp_wd_sdk");
  EXPECT_EQ(k.kernels, 1u);
  EXPECT_FALSE(dispatcher().findOp("tpwd::shift")->hasSchema());
  load("tp_wd_definer");
  auto shift = dispatcher().findOpOrThrow("tpwd::shift").typed<Tensor(const Tensor&, double)>();
  EXPECT_EQ(shift.call(floats({1, 2}), 0.5).toVector<float>(), (std::vector<float>{1.5f, 2.5f}));
  expectError([&] { shift.call(tensorFromVector<int64_t>({1}, {1}), 1); },
              {"tpwd::shift (tp_wd_sdk) needs a contiguous float32 cpu tensor"});
  unload("tp_wd_sdk");
  EXPECT_EQ(dispatcher().findOpOrThrow("tpwd::shift").kernelKind(DispatchKey::CPU), KernelKind::Missing);
}

}  // namespace
}  // namespace backplane
