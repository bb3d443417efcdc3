// Note [Declared dtypes]: a native kernel that declares the dtypes it serves
// gets only calls whose every tensor argument has one of them; the others go
// where they would without it (here the CPU fallback from the test device,
// whose memory the host cannot read), through every call path.
#include <atomic>

#include "backplane/dispatch/builtin_kernels.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/profiler.h"
#include "backplane/testing/cpu_kernels.h"
#include "test_device.h"

namespace backplane {
namespace {

using testing::expectError;
using ::testing::HasSubstr;

std::atomic<int> g_native_calls{0}, g_cpu_calls{0}, g_older_calls{0}, g_composite_calls{0};

// The kernels only count and hand back their first argument: what matters is
// which of them ran.
Tensor nativeBinary(const Tensor& a, const Tensor&) {
  ++g_native_calls;
  return a;
}
Tensor cpuBinary(const Tensor& a, const Tensor&) {
  EXPECT_TRUE(a.device().isCpu());
  ++g_cpu_calls;
  return a;
}
Tensor nativeOut(const Tensor&, const Tensor&, const Tensor& out) {
  ++g_native_calls;
  return out;
}
Tensor cpuOut(const Tensor&, const Tensor&, const Tensor& out) {
  ++g_cpu_calls;
  return out;
}
Tensor nativeList(TensorList xs, const std::optional<Tensor>&) {
  ++g_native_calls;
  return xs[0];
}
Tensor cpuList(TensorList xs, const std::optional<Tensor>&) {
  ++g_cpu_calls;
  return xs[0];
}

class DeclaredDtypesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = &testing::TestDevice::install();
    key_ = backendKey(dev_->type());
    Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
    g_native_calls = g_cpu_calls = g_older_calls = g_composite_calls = 0;
    ASSERT_TRUE(lib_.def("bin(Tensor a, Tensor b) -> Tensor").ok());
    ASSERT_TRUE(lib_.def("bin.out(Tensor a, Tensor b, *, Tensor(a!) out) -> Tensor(a!)").ok());
    ASSERT_TRUE(lib_.def("list(Tensor[] xs, Tensor? bias=None) -> Tensor").ok());
    ASSERT_TRUE(lib_.impl("bin", DispatchKey::CPU, &cpuBinary).ok());
    ASSERT_TRUE(lib_.impl("bin.out", DispatchKey::CPU, &cpuOut).ok());
    ASSERT_TRUE(lib_.impl("list", DispatchKey::CPU, &cpuList).ok());
    ASSERT_TRUE(lib_.impl("bin", dev_->type(), &nativeBinary, {ScalarType::Float32}).ok());
    ASSERT_TRUE(lib_.impl("bin.out", dev_->type(), &nativeOut, {ScalarType::Float32}).ok());
    ASSERT_TRUE(lib_.impl("list", dev_->type(), &nativeList, {ScalarType::Float32}).ok());
  }
  void TearDown() override {
    lib_.reset();
    EXPECT_TRUE(Dispatcher::singleton().checkInvariants().ok());
    Dispatcher::singleton().setFallbackMode(FallbackMode::Warn);
  }
  Tensor on(ScalarType dtype) const { return Tensor(emptyTensor({3}, dtype, dev_->device())); }
  OperatorHandle op(const char* name) { return Dispatcher::singleton().findOpOrThrow(name); }

  testing::TestDevice* dev_;
  DispatchKey key_;
  Library lib_{"dt"};
};

TEST_F(DeclaredDtypesTest, DeclaredDtypeReachesTheKernelOthersTheCpuFallback) {
  auto bin = op("dt::bin").typed<Tensor(const Tensor&, const Tensor&)>();
  EXPECT_EQ(bin.kernelKind(key_), KernelKind::Native);
  const uint64_t fallbacks = bin.fallbackCalls(key_);

  bin.call(on(ScalarType::Float32), on(ScalarType::Float32));
  EXPECT_EQ(g_native_calls, 1);
  EXPECT_EQ(g_cpu_calls, 0);
  EXPECT_EQ(bin.fallbackCalls(key_), fallbacks);

  Tensor r = bin.call(on(ScalarType::Int64), on(ScalarType::Int64));
  EXPECT_EQ(g_native_calls, 1) << "int64 is not declared";
  EXPECT_EQ(g_cpu_calls, 1);
  EXPECT_EQ(bin.fallbackCalls(key_), fallbacks + 1);
  EXPECT_EQ(r.device(), dev_->device()) << "the CPU fallback moved the result back";

  bin.call(on(ScalarType::Float16), on(ScalarType::Float16));
  EXPECT_EQ(bin.fallbackCalls(key_), fallbacks + 2);
  // One argument outside the set is enough.
  bin.call(on(ScalarType::Float32), on(ScalarType::Int64));
  bin.call(on(ScalarType::Int64), on(ScalarType::Float32));
  EXPECT_EQ(g_native_calls, 1);
  EXPECT_EQ(g_cpu_calls, 4);
  EXPECT_EQ(bin.fallbackCalls(key_), fallbacks + 4);
}

TEST_F(DeclaredDtypesTest, OutputsCountAsArguments) {
  auto out = op("dt::bin.out").typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  out.call(on(ScalarType::Float32), on(ScalarType::Float32), on(ScalarType::Float32));
  EXPECT_EQ(g_native_calls, 1);
  out.call(on(ScalarType::Float32), on(ScalarType::Float32), on(ScalarType::Float64));
  EXPECT_EQ(g_native_calls, 1) << "a float64 out is not declared";
  EXPECT_EQ(g_cpu_calls, 1);
}

TEST_F(DeclaredDtypesTest, EveryListElementAndPresentOptionalCounts) {
  auto list = op("dt::list").typed<Tensor(TensorList, const std::optional<Tensor>&)>();
  const Tensor f = on(ScalarType::Float32), i = on(ScalarType::Int64);
  list.call({f, f}, std::nullopt);
  EXPECT_EQ(g_native_calls, 1) << "None does not count";
  list.call({f, f}, f);
  EXPECT_EQ(g_native_calls, 2);
  list.call({f, i}, std::nullopt);
  EXPECT_EQ(g_native_calls, 2) << "the list's second element is int64";
  EXPECT_EQ(g_cpu_calls, 1);
  list.call({f, f}, i);
  EXPECT_EQ(g_native_calls, 2) << "the optional bias is present and int64";
  EXPECT_EQ(g_cpu_calls, 2);
}

TEST_F(DeclaredDtypesTest, BoxedCallsAndRedispatchFollowTheSameRule) {
  OperatorHandle bin = op("dt::bin");
  Stack s{IValue(on(ScalarType::Float32)), IValue(on(ScalarType::Float32))};
  bin.callBoxed(s);
  EXPECT_EQ(g_native_calls, 1);
  s = {IValue(on(ScalarType::Float32)), IValue(on(ScalarType::Int32))};
  bin.callBoxed(s);
  EXPECT_EQ(g_native_calls, 1);
  EXPECT_EQ(g_cpu_calls, 1);

  s = {IValue(on(ScalarType::Int8)), IValue(on(ScalarType::Int8))};
  bin.redispatchBoxed(DispatchKeySet(key_), s);
  EXPECT_EQ(g_cpu_calls, 2);
  auto typed = bin.typed<Tensor(const Tensor&, const Tensor&)>();
  typed.redispatch(DispatchKeySet(key_), on(ScalarType::Bool), on(ScalarType::Bool));
  EXPECT_EQ(g_cpu_calls, 3);
  typed.redispatch(DispatchKeySet(key_), on(ScalarType::Float32), on(ScalarType::Float32));
  typed.callSkippingMeta(on(ScalarType::Float32), on(ScalarType::Float32));
  EXPECT_EQ(g_native_calls, 3);
  typed.callSkippingMeta(on(ScalarType::UInt8), on(ScalarType::Float32));
  EXPECT_EQ(g_cpu_calls, 4);
}

TEST_F(DeclaredDtypesTest, TheProfilerReportsADeclinedCallAsTheFallback) {
  auto bin = op("dt::bin").typed<Tensor(const Tensor&, const Tensor&)>();
  Profiler prof;
  bin.call(on(ScalarType::Float32), on(ScalarType::Float32));
  bin.call(on(ScalarType::Int64), on(ScalarType::Int64));
  bin.call(on(ScalarType::Int64), on(ScalarType::Int64));
  prof.stop();
  const OpReport report = prof.report();
  const OpStats* row = report.find("dt::bin", key_);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->native_calls, 1u);
  EXPECT_EQ(row->cpu_fallback_calls, 2u);
  EXPECT_EQ(row->how(), "native 1, cpu_fallback 2");
}

TEST_F(DeclaredDtypesTest, HandleAndDumpStateShowTheDeclaredSet) {
  OperatorHandle bin = op("dt::bin");
  ASSERT_TRUE(bin.declaredDtypes(key_).has_value());
  EXPECT_EQ(*bin.declaredDtypes(key_), DtypeSet({ScalarType::Float32}));
  EXPECT_EQ(bin.declaredDtypes(key_)->str(), "float32");
  EXPECT_EQ(bin.declinedKind(key_), KernelKind::CpuFallback);
  EXPECT_FALSE(bin.declaredDtypes(DispatchKey::CPU).has_value()) << "the CPU kernel declares nothing";
  EXPECT_FALSE(bin.declinedKind(DispatchKey::CPU).has_value());
  EXPECT_THAT(bin.dumpState(),
              HasSubstr("native [library dt] dtypes (float32), others: cpu_fallback [built-in CPU fallback]"));
}

TEST_F(DeclaredDtypesTest, DeclinedCallsGoToTheCompositeWhenThereIsOne) {
  ASSERT_TRUE(lib_.def("comp(Tensor a, Tensor b) -> Tensor").ok());
  ASSERT_TRUE(lib_.implComposite("comp",
                                 [](const Tensor& a, const Tensor&) {
                                   ++g_composite_calls;
                                   return a;
                                 })
                  .ok());
  ASSERT_TRUE(lib_.impl("comp", dev_->type(), &nativeBinary, {ScalarType::Float32, ScalarType::Float16}).ok());
  auto comp = op("dt::comp").typed<Tensor(const Tensor&, const Tensor&)>();
  EXPECT_EQ(comp.declinedKind(key_), KernelKind::Composite);
  comp.call(on(ScalarType::Float16), on(ScalarType::Float32));
  EXPECT_EQ(g_native_calls, 1);
  comp.call(on(ScalarType::BFloat16), on(ScalarType::Float32));
  EXPECT_EQ(g_composite_calls, 1);
}

TEST_F(DeclaredDtypesTest, AnOlderImplServesWhatTheNewerDeclines) {
  ASSERT_TRUE(lib_.impl("bin", dev_->type(),
                        [](const Tensor& a, const Tensor&) {
                          ++g_older_calls;
                          return a;
                        })
                  .ok());
  Library newer("dt");
  ASSERT_TRUE(newer.impl("dt::bin", dev_->type(), &nativeBinary, {ScalarType::Int64}).ok());
  auto bin = op("dt::bin").typed<Tensor(const Tensor&, const Tensor&)>();
  EXPECT_EQ(bin.declinedKind(key_), KernelKind::Native);
  bin.call(on(ScalarType::Int64), on(ScalarType::Int64));
  bin.call(on(ScalarType::Float32), on(ScalarType::Float32));
  EXPECT_EQ(g_native_calls, 1);
  EXPECT_EQ(g_older_calls, 1) << "float32 went to the impl the newer one shadows";
  EXPECT_EQ(g_cpu_calls, 0);
  EXPECT_TRUE(Dispatcher::singleton().checkInvariants().ok());
  newer.reset();
  EXPECT_FALSE(bin.declaredDtypes(key_).has_value());
  bin.call(on(ScalarType::Int64), on(ScalarType::Int64));
  EXPECT_EQ(g_older_calls, 2);
}

TEST_F(DeclaredDtypesTest, DeclinedWithNothingElseNamesTheDeclaredAndRefusedDtypes) {
  Library cpu_only("dtcpu");
  ASSERT_TRUE(cpu_only.def("only(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(
      cpu_only
          .impl("only", DispatchKey::CPU, [](const Tensor& a) { return a; }, {ScalarType::Float32, ScalarType::Float64})
          .ok());
  auto only = op("dtcpu::only").typed<Tensor(const Tensor&)>();
  only.call(Tensor(emptyTensor({2}, ScalarType::Float64)));
  expectError([&] { only.call(Tensor(emptyTensor({2}, ScalarType::Int32))); },
              {"dtcpu::only has no kernel for dispatch key CPU and dtype int32", "declares the dtypes float32, float64",
               "refuses int32"});
  // From the test device, which has no kernel: the CPU fallback would run
  // the CPU kernel, which refuses int32; the error names the caller's
  // device, not a CPU call the caller never made.
  expectError([&] { only.call(on(ScalarType::Int32)); },
              {"dtcpu::only has no kernel for " + on(ScalarType::Int32).device().str() + " that takes int32",
               "it has no", "so the call went to the CPU fallback, whose CPU kernel",
               "declares float32, float64 and refuses int32. Declare int32 in the CPU kernel's registration"});
}

// The CPU fallback's early error is for calls nothing at the CPU key takes:
// a dtype the newest CPU kernel refuses still reaches an older CPU impl
// that takes every dtype (Note [Declared dtypes]).
int g_older_cpu_calls = 0, g_newer_cpu_calls = 0;
TEST_F(DeclaredDtypesTest, TheCpuFallbackStillReachesAnOlderCpuImplForARefusedDtype) {
  Library older("dtcpu2");
  ASSERT_TRUE(older.def("two(Tensor a) -> Tensor").ok());
  ASSERT_TRUE(older
                  .impl("two", DispatchKey::CPU,
                        [](const Tensor& a) {
                          ++g_older_cpu_calls;
                          return a;
                        })
                  .ok());
  Library newer("dtcpu2");
  ASSERT_TRUE(newer
                  .impl("two", DispatchKey::CPU,
                        [](const Tensor& a) {
                          ++g_newer_cpu_calls;
                          return a;
                        },
                        {ScalarType::Float32})
                  .ok());
  auto two = op("dtcpu2::two").typed<Tensor(const Tensor&)>();
  two.call(on(ScalarType::Int32));
  EXPECT_EQ(g_older_cpu_calls, 1) << "int32 went to the older CPU impl through the CPU fallback";
  two.call(on(ScalarType::Float32));
  EXPECT_EQ(g_newer_cpu_calls, 1);
}

// A fallthrough registered as the backend key's fallback means "nothing at
// this key": a declined call must end in the missing-kernel error, not be
// sent back to the same slot (the declining kernel) over and over.
TEST_F(DeclaredDtypesTest, AFallthroughFallbackAtTheKeyIsNotWhereDeclinedCallsGo) {
  Library fallthrough("dtft");
  ASSERT_TRUE(fallthrough.fallback(key_, KernelFunction::makeFallthrough()).ok());
  auto bin = op("dt::bin").typed<Tensor(const Tensor&, const Tensor&)>();
  bin.call(on(ScalarType::Float32), on(ScalarType::Float32));
  EXPECT_EQ(g_native_calls, 1);
  expectError([&] { bin.call(on(ScalarType::Int64), on(ScalarType::Int64)); },
              {"dt::bin", "declares the dtypes float32", "refuses int64"});
  EXPECT_EQ(g_native_calls, 1);
  EXPECT_EQ(g_cpu_calls, 0);
  fallthrough.reset();
  bin.call(on(ScalarType::Int64), on(ScalarType::Int64));  // the CPU fallback again
  EXPECT_EQ(g_cpu_calls, 1);
}

TEST_F(DeclaredDtypesTest, OnlyNativeBackendKernelsMayDeclareDtypes) {
  absl::Status s = lib_.impl("bin", DispatchKey::Tracing, &nativeBinary, {ScalarType::Float32});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("only a native kernel at a backend key may declare the dtypes it serves"));
  s = lib_.impl("bin", dev_->type(), KernelFunction::makeFallthrough(), {ScalarType::Float32});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // Declaring every dtype is declaring none.
  Library all("dt");
  ASSERT_TRUE(all.impl("dt::bin", DispatchKey::CPU, &cpuBinary,
                       {ScalarType::Bool, ScalarType::UInt8, ScalarType::Int8, ScalarType::Int32, ScalarType::Int64,
                        ScalarType::Float16, ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64,
                        ScalarType::Int16, ScalarType::UInt16, ScalarType::UInt32, ScalarType::UInt64})
                  .ok());
  EXPECT_FALSE(op("dt::bin").declaredDtypes(DispatchKey::CPU).has_value());
}

TEST(DtypeSetTest, MaskEncodingAndUnknownBits) {
  EXPECT_TRUE(DtypeSet().isAll());
  EXPECT_EQ(DtypeSet({ScalarType::Float32}).mask(), uint64_t{1} << 7);
  EXPECT_TRUE(DtypeSet({ScalarType::Float32}).contains(ScalarType::Float32));
  EXPECT_FALSE(DtypeSet({ScalarType::Float32}).contains(ScalarType::Float16));
  EXPECT_EQ(DtypeSet({ScalarType::Float32, ScalarType::Float16}).str(), "float16, float32");
  ASSERT_TRUE(DtypeSet::fromMask(0).ok());
  EXPECT_TRUE(DtypeSet::fromMask(0)->isAll());
  absl::StatusOr<DtypeSet> bad = DtypeSet::fromMask((uint64_t{1} << 7) | (uint64_t{1} << 40));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("dtype number(s) 40"));
}

}  // namespace
}  // namespace backplane
