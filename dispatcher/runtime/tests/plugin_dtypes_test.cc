// BP_KernelDesc.dtypes (ABI 1.5) and bp::Dtypes through a real SDK plugin
// (tests/plugins/tp_dtypes.cc): a kernel of the plugin's device that declares
// float32 gets float32 calls; the others run the plugin's CPU kernel through
// the CPU fallback (Note [Declared dtypes]; in process:
// declared_dtypes_test.cc; the ABI's edge cases: abi_rules_test.cc). And
// bp::decline (BP_DECLINED, ABI 1.7): a call the kernel declines at run time
// goes the same way, and reports count it there (Note [Declined calls]).
#include <string>

#include "backplane/core/device_type_registry.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/runtime/profiler.h"
#include "backplane/testing/cpu_kernels.h"

#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif

namespace backplane {
namespace {

using ::testing::HasSubstr;

class PluginDtypesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<PluginStatus> s = plugins().load(strCat(BACKPLANE_TEST_PLUGIN_DIR, "/tp_dtypes.so"));
    ASSERT_TRUE(s.ok()) << s.status();
  }
  static void TearDownTestSuite() { EXPECT_TRUE(plugins().unload("tp_dtypes").ok()); }
  void SetUp() override {
    Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
    type_ = *DeviceTypeRegistry::global().find("tpdtdev");
    key_ = backendKey(type_);
  }
  void TearDown() override { Dispatcher::singleton().setFallbackMode(FallbackMode::Warn); }

  static int64_t calls(int64_t which) {
    return Dispatcher::singleton().findOpOrThrow("tpdt::info").typed<int64_t(int64_t)>().call(which);
  }
  Tensor on(ScalarType dtype) const { return Tensor(emptyTensor({4}, dtype, Device(type_, 0))); }

  DeviceType type_;
  DispatchKey key_;
};

TEST_F(PluginDtypesTest, DeclaredDtypeRunsTheDeviceKernelOthersTheCpuFallback) {
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("tpdt::twice");
  ASSERT_TRUE(op.declaredDtypes(key_).has_value());
  EXPECT_EQ(op.declaredDtypes(key_)->str(), "float32");
  EXPECT_EQ(op.declinedKind(key_), KernelKind::CpuFallback);
  auto twice = op.typed<Tensor(const Tensor&)>();
  const int64_t dev0 = calls(0), cpu0 = calls(1);
  const uint64_t fb0 = op.fallbackCalls(key_);

  Tensor r = twice.call(on(ScalarType::Float32));
  EXPECT_EQ(r.device(), Device(type_, 0));
  EXPECT_EQ(calls(0), dev0 + 1);
  EXPECT_EQ(calls(1), cpu0);

  for (ScalarType t : {ScalarType::Int64, ScalarType::Float16, ScalarType::Bool}) {
    Tensor d = twice.call(on(t));
    EXPECT_EQ(d.device(), Device(type_, 0)) << "the CPU fallback moved the result back";
    EXPECT_EQ(d.dtype(), t);
  }
  EXPECT_EQ(calls(0), dev0 + 1) << "the device kernel saw only float32";
  EXPECT_EQ(calls(1), cpu0 + 3);
  EXPECT_EQ(op.fallbackCalls(key_), fb0 + 3);
}

TEST_F(PluginDtypesTest, ImplWhenDefinedCarriesTheDeclaredSetToo) {
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("tpdt::cat_sum");
  ASSERT_TRUE(op.declaredDtypes(key_).has_value());
  EXPECT_EQ(op.declaredDtypes(key_)->str(), "float16, float32");
  auto cat = op.typed<Tensor(TensorList)>();
  const int64_t dev0 = calls(2), cpu0 = calls(3);
  cat.call({on(ScalarType::Float32), on(ScalarType::Float16)});
  EXPECT_EQ(calls(2), dev0 + 1);
  cat.call({on(ScalarType::Float32), on(ScalarType::BFloat16)});
  EXPECT_EQ(calls(2), dev0 + 1) << "one list element outside the set sends the call to the fallback";
  EXPECT_EQ(calls(3), cpu0 + 1);
}

TEST_F(PluginDtypesTest, DumpStateNamesTheSetAndWhoServesTheRest) {
  EXPECT_THAT(Dispatcher::singleton().findOpOrThrow("tpdt::twice").dumpState(),
              HasSubstr("native [plugin tp_dtypes] dtypes (float32), others: cpu_fallback"));
}

TEST_F(PluginDtypesTest, ADeclinedCallRunsWhereItWouldHaveGoneWithoutTheKernel) {
  OperatorHandle op = Dispatcher::singleton().findOpOrThrow("tpdt::small");
  auto small = op.typed<Tensor(const Tensor&)>();
  auto on = [&](int64_t n) { return Tensor(emptyTensor({n}, ScalarType::Float32, Device(type_, 0))); };
  const int64_t dev0 = calls(4), cpu0 = calls(5);
  const uint64_t fb0 = op.fallbackCalls(key_), declined0 = op.declinedCalls(key_);

  EXPECT_EQ(small.call(on(4)).sizes(), IntArrayRef({4}));
  EXPECT_EQ(calls(4), dev0 + 1) << "4 elements: the device kernel serves it";
  Tensor big = small.call(on(9));  // typed (unboxed) call
  EXPECT_EQ(big.device(), Device(type_, 0)) << "the CPU fallback moved the result back";
  EXPECT_EQ(big.sizes(), IntArrayRef({9}));
  Stack stack{IValue(on(7))};  // boxed call
  op.callBoxed(stack);
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(stack[0].toTensor().device(), Device(type_, 0));

  EXPECT_EQ(calls(4), dev0 + 1) << "the declined calls did not count as served";
  EXPECT_EQ(calls(5), cpu0 + 2) << "the CPU kernel ran the two declined calls";
  EXPECT_EQ(op.fallbackCalls(key_), fb0 + 2);
  EXPECT_EQ(op.declinedCalls(key_), declined0 + 2);
  EXPECT_EQ(op.kernelKind(key_), KernelKind::Native) << "the table still holds the kernel";
}

TEST_F(PluginDtypesTest, UnderFallbackErrorADeclineIsRefusedWithItsReason) {
  Dispatcher::singleton().setFallbackMode(FallbackMode::Error);
  auto small = Dispatcher::singleton().findOpOrThrow("tpdt::small").typed<Tensor(const Tensor&)>();
  const int64_t cpu0 = calls(5);
  try {
    small.call(Tensor(emptyTensor({8}, ScalarType::Float32, Device(type_, 0))));
    FAIL() << "a declined call ran on the CPU under BACKPLANE_FALLBACK=error";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("its kernel declined it: tpdtdev serves at most 4 elements"));
    EXPECT_THAT(e.message(), HasSubstr("CPU fallback is disabled (BACKPLANE_FALLBACK=error)"));
  }
  EXPECT_EQ(calls(5), cpu0);
}

TEST_F(PluginDtypesTest, ADeclineWithNothingElseToServeItNamesTheReason) {
  auto nocpu = Dispatcher::singleton().findOpOrThrow("tpdt::nocpu").typed<Tensor(const Tensor&)>();
  try {
    nocpu.call(on(ScalarType::Float32));
    FAIL() << "a call that nothing serves returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(e.message(), HasSubstr("tpdt::nocpu: its tpdtdev kernel declined the call (tpdt::nocpu declines every "
                                       "call; arguments: Tensor[4] float32 tpdtdev:0) and nothing else serves the op"));
    EXPECT_THAT(e.message(), HasSubstr("the CPU fallback needs a CPU kernel"));
  }
}

TEST_F(PluginDtypesTest, TheProfilerCountsADeclinedCallWhereItRan) {
  auto small = Dispatcher::singleton().findOpOrThrow("tpdt::small").typed<Tensor(const Tensor&)>();
  Profiler prof;
  small.call(Tensor(emptyTensor({2}, ScalarType::Float32, Device(type_, 0))));
  small.call(Tensor(emptyTensor({20}, ScalarType::Float32, Device(type_, 0))));
  small.call(Tensor(emptyTensor({30}, ScalarType::Float32, Device(type_, 0))));
  const OpReport report = prof.report();
  const OpStats* row = report.find("tpdt::small", key_);
  ASSERT_NE(row, nullptr) << report.table();
  EXPECT_EQ(row->calls, 3u);
  EXPECT_EQ(row->native_calls, 1u);
  EXPECT_EQ(row->cpu_fallback_calls, 2u);
}

}  // namespace
}  // namespace backplane
