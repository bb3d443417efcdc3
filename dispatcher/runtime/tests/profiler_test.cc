// backplane::Profiler (profiler.h): per-op rows with counts, how the calls
// ran, CPU-fallback bytes, self and total time; nested calls, errors,
// threads, the one-profiler rule, the device-synchronisation option, and the
// printed table.
#include "backplane/runtime/profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backplane/core/str_cat.h"
#include "backplane/core/transfers.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/plugin_registry.h"
#include "test_device.h"

namespace backplane {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

using AddSig = Tensor(const Tensor&, const Tensor&, const Scalar&);
using AddOutSig = Tensor(const Tensor&, const Tensor&, const Scalar&, const Tensor&);

// A device whose memory is host memory and which counts synchronize()
// calls, to observe ProfilerOptions::synchronize_device.
class SyncCountingDevice final : public DeviceInterface, private Allocator {
 public:
  static SyncCountingDevice& install() {
    static SyncCountingDevice* device = [] {
      auto* d = new SyncCountingDevice(valueOrThrow(DeviceTypeRegistry::global().registerType("profsync")));
      throwIfError(DeviceTypeRegistry::global().setInterface(d->type_, d));
      return d;
    }();
    return *device;
  }
  Device device(DeviceIndex index) const { return Device(type_, index); }
  int syncs(DeviceIndex index) const { return syncs_[index].load(); }

  int deviceCount() const override { return 2; }
  bool isHostAccessible() const override { return true; }
  Allocator& allocator() override { return *this; }
  void copyHostToDevice(void* dst, Device, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copyDeviceToHost(void* dst, const void* src, Device, size_t n) override { std::memcpy(dst, src, n); }
  void copyDeviceToDevice(void* dst, Device, const void* src, Device, size_t n) override { std::memmove(dst, src, n); }
  void memset(void* dst, Device, uint8_t value, size_t n) override { std::memset(dst, value, n); }
  void synchronize(Device device) override { ++syncs_[device.index]; }

 private:
  explicit SyncCountingDevice(DeviceType type) : type_(type) {}
  DataPtr allocate(size_t nbytes, Device device) override {
    void* p = std::malloc(nbytes == 0 ? 1 : nbytes);
    return DataPtr(
        p, nullptr, [](void*, void* ptr) { std::free(ptr); }, device);
  }
  const DeviceType type_;
  std::atomic<int> syncs_[2] = {0, 0};
};

class ProfilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(plugins().load(BACKPLANE_CPU_PLUGIN_PATH).ok()); }
  void SetUp() override { Dispatcher::singleton().setFallbackMode(FallbackMode::Silent); }
  void TearDown() override { Dispatcher::singleton().setFallbackMode(FallbackMode::Warn); }

  static TypedOperatorHandle<AddSig> add() {
    return Dispatcher::singleton().findOpOrThrow("bp::add.Tensor").typed<AddSig>();
  }
  static TypedOperatorHandle<AddSig> sub() {
    return Dispatcher::singleton().findOpOrThrow("bp::sub.Tensor").typed<AddSig>();
  }
  static Tensor floats(int64_t n, Device device = Device(DeviceType::CPU)) {
    return tensorFromVector<float>(std::vector<float>(n, 1.5f), {n}, device);
  }
  // The row, failing the test if the report has none.
  static const OpStats& row(const OpReport& report, std::string_view op, DispatchKey backend) {
    const OpStats* r = report.find(op, backend);
    if (!r) {
      ADD_FAILURE() << "no row for " << op << " on " << backend << " in\n" << report.table();
      static const OpStats empty;
      return empty;
    }
    return *r;
  }
};

TEST_F(ProfilerTest, CountsCallsPerOpAndHowTheyRan) {
  Tensor a = floats(4), b = floats(4);
  Profiler prof;
  for (int i = 0; i < 3; ++i) add().call(a, b, 1);
  sub().call(a, b, 1);
  OpReport report = prof.report();

  const OpStats& add_row = row(report, "bp::add.Tensor", DispatchKey::CPU);
  EXPECT_EQ(add_row.calls, 3u);
  EXPECT_EQ(add_row.composite_calls, 3u) << "add.Tensor is a composite over add.out";
  EXPECT_EQ(add_row.how(), "composite");
  const OpStats& out_row = row(report, "bp::add.out", DispatchKey::CPU);
  EXPECT_EQ(out_row.calls, 3u);
  EXPECT_EQ(out_row.native_calls, 3u) << "the CPU plugin implements add.out";
  EXPECT_EQ(out_row.how(), "native");
  EXPECT_EQ(out_row.fallback_bytes, 0u);
  EXPECT_EQ(row(report, "bp::sub.Tensor", DispatchKey::CPU).calls, 1u);
  EXPECT_EQ(row(report, "bp::sub.out", DispatchKey::CPU).calls, 1u);
  EXPECT_EQ(report.ops.size(), 4u) << report.table();
  for (size_t i = 1; i < report.ops.size(); ++i)
    EXPECT_GE(report.ops[i - 1].self_time, report.ops[i].self_time) << "rows are sorted by self time";
}

// Note [Timelines]: every call an event on its thread's track, nested
// calls inside their callers, and a trace in the Chrome trace event format.
TEST_F(ProfilerTest, RecordedEventsMakeAChromeTraceWithATrackPerThread) {
  Tensor a = floats(4), b = floats(4);
  Profiler prof({.record_events = true});
  add().call(a, b, 1);
  std::thread([&] { sub().call(a, b, 1); }).join();
  prof.stop();
  const OpReport report = prof.report();
  ASSERT_EQ(report.events.size(), 4u) << "add.Tensor, add.out, sub.Tensor, sub.out";
  ASSERT_EQ(report.threads.size(), 2u);
  EXPECT_EQ(report.events[0].op, "bp::add.Tensor");
  EXPECT_EQ(report.events[1].op, "bp::add.out");
  EXPECT_EQ(report.events[0].thread, 0);
  EXPECT_EQ(report.events[2].thread, 1);
  // add.out runs inside add.Tensor.
  EXPECT_GE(report.events[1].start, report.events[0].start);
  EXPECT_LE(report.events[1].start + report.events[1].duration, report.events[0].start + report.events[0].duration);
  for (size_t i = 1; i < report.events.size(); ++i) EXPECT_GE(report.events[i].start, report.events[i - 1].start);
  const std::string trace = report.chromeTrace(3, "rank 3");
  EXPECT_THAT(trace, HasSubstr(R"({"displayTimeUnit":"ms","traceEvents":[{"name":"process_name","ph":"M","pid":3)"));
  EXPECT_THAT(trace, HasSubstr(R"("args":{"name":"rank 3"})"));
  EXPECT_THAT(trace, HasSubstr(R"({"name":"thread_name","ph":"M","pid":3,"tid":1)"));
  EXPECT_THAT(trace, HasSubstr(R"({"name":"bp::sub.out","cat":"op","ph":"X","ts":)"));
  EXPECT_THAT(trace, HasSubstr(R"("pid":3,"tid":1,"args":{"backend":"CPU"}})"));
  EXPECT_EQ(std::count(trace.begin(), trace.end(), '{'), std::count(trace.begin(), trace.end(), '}'));
  EXPECT_EQ(trace.back(), '}');
  // Without record_events there are no events.
  Profiler plain;
  add().call(a, b, 1);
  EXPECT_TRUE(plain.report().events.empty());
}

TEST_F(ProfilerTest, CompositeSelfTimeExcludesItsNestedOutCall) {
  Tensor a = floats(1 << 16), b = floats(1 << 16);
  Profiler prof;
  for (int i = 0; i < 5; ++i) add().call(a, b, 2);
  OpReport report = prof.report();
  const OpStats& composite = row(report, "bp::add.Tensor", DispatchKey::CPU);
  const OpStats& nested = row(report, "bp::add.out", DispatchKey::CPU);
  for (const OpStats& r : report.ops) {
    EXPECT_LE(r.self_time, r.total_time) << r.op;
    EXPECT_GT(r.self_time.count(), 0) << r.op;
  }
  EXPECT_EQ(nested.self_time, nested.total_time) << "add.out calls no other op";
  EXPECT_EQ(composite.total_time, composite.self_time + nested.total_time)
      << "add.Tensor's only nested op is add.out: total = self + the nested total";
}

TEST_F(ProfilerTest, FallbackOnADeviceWithoutKernelsReportsCallsAndBytes) {
  auto& device = testing::TestDevice::install("profdev", 1);
  const DispatchKey key = backendKey(device.type());
  const int64_t n = 10;
  Tensor a = floats(n, device.device()), b = floats(n, device.device());
  device.resetCounters();
  const uint64_t global_bytes = Dispatcher::singleton().findOpOrThrow("bp::add.out").fallbackBytes(key);
  Profiler prof;
  add().call(a, b, 1);
  add().call(a, b, 1);
  OpReport report = prof.report();

  const OpStats& composite = row(report, "bp::add.Tensor", key);
  EXPECT_EQ(composite.composite_calls, 2u);
  EXPECT_EQ(composite.fallback_bytes, 0u) << "bytes belong to the call that fell back, not to its caller";
  const OpStats& out = row(report, "bp::add.out", key);
  EXPECT_EQ(out.calls, 2u);
  EXPECT_EQ(out.cpu_fallback_calls, 2u);
  EXPECT_EQ(out.how(), "cpu_fallback");
  // Per call: self and other to the host, the result back; the contiguous
  // out= tensor is only written, so it is not copied in.
  const uint64_t bytes_per_call = 3 * n * sizeof(float);
  EXPECT_EQ(out.fallback_bytes, 2 * bytes_per_call);
  EXPECT_EQ(out.fallback_bytes, device.bytesToHost() + device.bytesFromHost());
  EXPECT_EQ(Dispatcher::singleton().findOpOrThrow("bp::add.out").fallbackBytes(key) - global_bytes, out.fallback_bytes);
  EXPECT_THAT(report.summary(), HasSubstr("2 ops ran (4 calls): 0 native, 1 composite, 1 fell back (2 calls, 240 B "
                                          "copied); "));
}

TEST_F(ProfilerTest, HostDeviceTransfersBelongToTheOpThatMovedThem) {
  auto& device = testing::TestDevice::install("profdev", 1);
  const DispatchKey key = backendKey(device.type());
  const int64_t n = 10;
  Tensor a = floats(n, device.device()), b = floats(n, device.device());
  device.resetCounters();
  Profiler prof;
  add().call(a, b, 1);
  Tensor m = Tensor(tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3})).to(device.device());
  const uint64_t device_bytes = device.bytesToHost() + device.bytesFromHost();
  prof.stop();
  OpReport report = prof.report();

  const OpStats& out = row(report, "bp::add.out", key);
  EXPECT_EQ(out.transfer_bytes, out.fallback_bytes) << "the fallback's staging is a host<->device transfer";
  EXPECT_EQ(out.transfer_copies, 3u) << "self and other in, the result out";
  EXPECT_EQ(row(report, "bp::add.Tensor", key).transfer_bytes, 0u) << "not the composite that called it";
  EXPECT_EQ(row(report, "bp::copy_", key).transfer_bytes, m.nbytes()) << "to() moved m's bytes once";

  uint64_t bytes = 0, copies = 0;
  for (const OpStats& r : report.ops) bytes += r.transfer_bytes, copies += r.transfer_copies;
  EXPECT_EQ(bytes, device_bytes) << "every byte the device moved is reported\n" << report.table();
  const std::string summary = report.summary();
  const std::string ending = strCat("; host<->device: ", formatBytes(bytes), " in ", copies, " copies");
  ASSERT_GE(summary.size(), ending.size());
  EXPECT_EQ(summary.substr(summary.size() - ending.size()), ending) << summary;
  EXPECT_THAT(report.table(), HasSubstr("host<->device"));
}

TEST_F(ProfilerTest, ContiguousOnADeviceWithoutACopyKernelStagesThroughTheHostAndIsCounted) {
  // The test device has no _copy_on_device_ kernel: core stages the strided
  // copy through the host (Note [Tensor and TensorBase]), without a
  // fallback warning or error, and the counters see every byte.
  auto& device = testing::TestDevice::install("profdev", 1);
  Tensor m = Tensor(tensorFromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3})).to(device.device());
  device.resetCounters();
  Dispatcher::singleton().setFallbackMode(FallbackMode::Error);
  const TransferCount before = hostDeviceTransfers();
  Tensor c = m.t().contiguous();
  const TransferCount after = hostDeviceTransfers();
  Dispatcher::singleton().setFallbackMode(FallbackMode::Silent);
  EXPECT_EQ(after.bytes - before.bytes, device.bytesToHost() + device.bytesFromHost());
  EXPECT_GT(after.bytes - before.bytes, 0u);
  EXPECT_EQ(c.device(), device.device());
  EXPECT_EQ(c.toVector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST_F(ProfilerTest, RecordsNothingBeforeStartOrAfterStop) {
  Tensor a = floats(4), b = floats(4);
  add().call(a, b, 1);
  EXPECT_FALSE(Dispatcher::singleton().profiling());
  OpReport stopped;
  {
    Profiler prof;
    EXPECT_TRUE(prof.recording());
    EXPECT_TRUE(Dispatcher::singleton().profiling());
    EXPECT_TRUE(prof.report().ops.empty()) << "calls before the profiler started are not recorded";
    add().call(a, b, 1);
    prof.stop();
    EXPECT_FALSE(prof.recording());
    EXPECT_FALSE(Dispatcher::singleton().profiling()) << "stop() takes the Profiling key off every call";
    add().call(a, b, 1);
    stopped = prof.report();
    prof.stop();  // idempotent
    EXPECT_EQ(prof.report().wall_time, stopped.wall_time) << "the clock stopped with stop()";
  }
  EXPECT_EQ(row(stopped, "bp::add.Tensor", DispatchKey::CPU).calls, 1u);
  EXPECT_FALSE(Dispatcher::singleton().profiling());
  Profiler next;
  add().call(a, b, 1);
  EXPECT_EQ(row(next.report(), "bp::add.Tensor", DispatchKey::CPU).calls, 1u) << "a new profiler starts empty";
}

TEST_F(ProfilerTest, ASecondActiveProfilerIsRefused) {
  Tensor a = floats(4), b = floats(4);
  Profiler first;
  try {
    Profiler second;
    FAIL() << "a second Profiler started while the first was recording";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(e.message(), HasSubstr("another Profiler is already recording"));
    EXPECT_THAT(e.message(), HasSubstr("Stop the first one"));
  }
  EXPECT_TRUE(first.recording()) << "the refused profiler did not disturb the first";
  add().call(a, b, 1);
  EXPECT_EQ(row(first.report(), "bp::add.Tensor", DispatchKey::CPU).calls, 1u);
  first.stop();
  Profiler after;
  EXPECT_TRUE(after.recording());
}

TEST_F(ProfilerTest, AnOpThatThrowsPropagatesItsErrorAndKeepsTheRecordsConsistent) {
  Library lib("proftest");
  ASSERT_TRUE(lib.def("failing(Tensor x) -> Tensor").ok());
  ASSERT_TRUE(lib.def("outer(Tensor x) -> Tensor").ok());
  ASSERT_TRUE(lib.def("sleepy(Tensor x) -> Tensor").ok());
  ASSERT_TRUE(lib.impl("failing", DispatchKey::CPU,
                       [](const Tensor&) -> Tensor { throw std::out_of_range("failing: index 7 is out of range"); })
                  .ok());
  auto failing = Dispatcher::singleton().findOpOrThrow("proftest::failing").typed<Tensor(const Tensor&)>();
  ASSERT_TRUE(lib.impl("outer", DispatchKey::CPU,
                       [failing](const Tensor& x) {
                         Tensor y = add().call(x, x, 1);
                         return failing.call(y);
                       })
                  .ok());
  ASSERT_TRUE(lib.impl("sleepy", DispatchKey::CPU,
                       [](const Tensor& x) {
                         std::this_thread::sleep_for(milliseconds(20));
                         return x;
                       })
                  .ok());
  auto outer = Dispatcher::singleton().findOpOrThrow("proftest::outer").typed<Tensor(const Tensor&)>();
  auto sleepy = Dispatcher::singleton().findOpOrThrow("proftest::sleepy").typed<Tensor(const Tensor&)>();

  Tensor x = floats(4);
  Profiler prof;
  try {
    outer.call(x);
    FAIL() << "outer did not throw";
  } catch (const std::out_of_range& e) {
    EXPECT_STREQ(e.what(), "failing: index 7 is out of range") << "the op's own exception, unchanged";
  }
  OpReport after_error = prof.report();
  const OpStats& outer_row = row(after_error, "proftest::outer", DispatchKey::CPU);
  const OpStats& failing_row = row(after_error, "proftest::failing", DispatchKey::CPU);
  const OpStats& add_row = row(after_error, "bp::add.Tensor", DispatchKey::CPU);
  EXPECT_EQ(outer_row.calls, 1u);
  EXPECT_EQ(outer_row.failed_calls, 1u);
  EXPECT_EQ(outer_row.how(), "native (1 failed)");
  EXPECT_EQ(failing_row.failed_calls, 1u);
  EXPECT_EQ(add_row.calls, 1u);
  EXPECT_EQ(add_row.failed_calls, 0u);
  EXPECT_EQ(outer_row.total_time, outer_row.self_time + add_row.total_time + failing_row.total_time)
      << "both nested calls, the failed one included, were charged to outer";

  // The failed frames are gone: a later top-level call is nobody's child.
  sleepy.call(x);
  OpReport later = prof.report();
  const OpStats& sleepy_row = row(later, "proftest::sleepy", DispatchKey::CPU);
  EXPECT_EQ(sleepy_row.self_time, sleepy_row.total_time);
  EXPECT_GE(sleepy_row.self_time, milliseconds(20));
  EXPECT_EQ(row(later, "proftest::outer", DispatchKey::CPU).total_time, outer_row.total_time);
}

TEST_F(ProfilerTest, CallsOnManyThreadsAreAllCounted) {
  constexpr int kThreads = 8, kCallsPerThread = 50;
  Tensor a = floats(16), b = floats(16);
  Profiler prof;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCallsPerThread; ++i) add().call(a, b, 1);
    });
  }
  for (std::thread& t : threads) t.join();  // their buffers outlive them
  OpReport report = prof.report();
  EXPECT_EQ(row(report, "bp::add.Tensor", DispatchKey::CPU).calls, uint64_t{kThreads * kCallsPerThread});
  EXPECT_EQ(row(report, "bp::add.out", DispatchKey::CPU).calls, uint64_t{kThreads * kCallsPerThread});
}

void redispatchBelowUser0(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  op.redispatchBoxed(ks & DispatchKeySet::below(DispatchKey::User0), *stack);
}

TEST_F(ProfilerTest, AWrapperKeyDoesNotHideHowTheOpRanOnItsBackend) {
  Library lib("proftest_wrapper");
  ASSERT_TRUE(lib.fallback(DispatchKey::User0, KernelFunction::makeFromBoxedFunction(&redispatchBelowUser0)).ok());
  IncludeDispatchKeyGuard wrap(DispatchKey::User0);
  Tensor a = floats(4), b = floats(4);
  Profiler prof;
  add().call(a, b, 1);
  OpReport report = prof.report();
  EXPECT_EQ(row(report, "bp::add.out", DispatchKey::CPU).how(), "native");
  EXPECT_EQ(row(report, "bp::add.Tensor", DispatchKey::CPU).how(), "composite");
}

TEST_F(ProfilerTest, SynchronizeDeviceWaitsBeforeAndAfterEveryDeviceOp) {
  auto& device = SyncCountingDevice::install();
  Tensor a = floats(4, device.device(1)), b = floats(4, device.device(1));
  Tensor c = floats(4), d = floats(4);
  const int before = device.syncs(1);
  {
    Profiler prof;
    add().call(a, b, 1);
  }
  EXPECT_EQ(device.syncs(1), before) << "off by default";
  Profiler prof(ProfilerOptions{.synchronize_device = true});
  add().call(a, b, 1);
  EXPECT_EQ(device.syncs(1), before + 4) << "add.Tensor and its nested add.out, each before and after";
  EXPECT_EQ(device.syncs(0), 0) << "the device the arguments are on";
  add().call(c, d, 1);
  EXPECT_EQ(device.syncs(1), before + 4) << "CPU ops wait for no device";
  EXPECT_EQ(row(prof.report(), "bp::add.out", backendKey(device.device(1).type)).how(), "cpu_fallback");
}

TEST_F(ProfilerTest, TableListsEveryRowAndTheSummary) {
  auto& device = testing::TestDevice::install("profdev", 1);
  Tensor a = floats(8), b = floats(8);
  Tensor da = floats(8, device.device()), db = floats(8, device.device());
  Profiler prof;
  add().call(a, b, 1);
  add().call(da, db, 1);
  prof.stop();
  const OpReport report = prof.report();
  const std::string table = report.table();
  EXPECT_THAT(table, HasSubstr("op"));
  EXPECT_THAT(table, HasSubstr("fallback bytes"));
  EXPECT_THAT(table, HasSubstr("self %"));
  EXPECT_THAT(table, ::testing::ContainsRegex("bp::add.out +profdev +1 +cpu_fallback +96 B"));
  EXPECT_THAT(table, ::testing::ContainsRegex("bp::add.out +CPU +1 +native +-"));
  EXPECT_THAT(table, ::testing::ContainsRegex("bp::add.Tensor +CPU +1 +composite"));
  EXPECT_THAT(table, ::testing::ContainsRegex("bp::add.Tensor +profdev +1 +composite"));
  EXPECT_THAT(table, HasSubstr(report.summary()));
  EXPECT_THAT(report.summary(), HasSubstr("4 ops ran (4 calls): 1 native, 2 composite, 1 fell back (1 call, 96 B"));
  // One line per row, plus the header and the summary.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), static_cast<long>(report.ops.size() + 2)) << table;
}

TEST_F(ProfilerTest, FindReturnsNullForAnOpThatDidNotRun) {
  Profiler prof;
  add().call(floats(2), floats(2), 1);
  OpReport report = prof.report();
  EXPECT_EQ(report.find("bp::mul.Tensor", DispatchKey::CPU), nullptr);
  EXPECT_EQ(report.find("bp::add.Tensor", DispatchKey::CUDA), nullptr);
  EXPECT_NE(report.find("bp::add.Tensor", DispatchKey::CPU), nullptr);
}

}  // namespace
}  // namespace backplane
