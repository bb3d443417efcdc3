// The Profiler across threads (backplane/runtime/profiler.h: "Profiler's methods may
// be called from any thread") and its watchdog (ProfilerOptions::hang_after),
// with ops of the test's own (no plugin). In the ThreadSanitizer subset
// (label tsan: scripts/test.sh --sanitize=thread).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/profiler.h"

namespace backplane {
namespace {

using Sig = Tensor(const Tensor&);
using std::chrono::milliseconds;
using ::testing::HasSubstr;

class ProfilerThreadsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lib() = std::make_unique<Library>("proft");
    ASSERT_TRUE(lib()->def("work(Tensor a) -> Tensor").ok());
    ASSERT_TRUE(lib()->def("outer(Tensor a) -> Tensor").ok());
    ASSERT_TRUE(lib()->impl("work", DispatchKey::CPU, [](const Tensor& a) { return a; }).ok());
    ASSERT_TRUE(
        lib()->impl("outer", DispatchKey::CPU, [](const Tensor& a) { return work().call(work().call(a)); }).ok());
    // A kernel that hangs for as long as its argument says (in ms).
    ASSERT_TRUE(lib()->def("stuck(Tensor a) -> Tensor").ok());
    ASSERT_TRUE(lib()->def("calls_stuck(Tensor a) -> Tensor").ok());
    ASSERT_TRUE(lib()
                    ->impl("stuck", DispatchKey::CPU,
                           [](const Tensor& a) {
                             std::this_thread::sleep_for(milliseconds(static_cast<int>(a.item<float>())));
                             return a;
                           })
                    .ok());
    ASSERT_TRUE(lib()
                    ->impl("calls_stuck", DispatchKey::CPU,
                           [](const Tensor& a) {
                             return Dispatcher::singleton().findOpOrThrow("proft::stuck").typed<Sig>().call(a);
                           })
                    .ok());
  }
  static void TearDownTestSuite() { lib().reset(); }
  static std::unique_ptr<Library>& lib() {
    static std::unique_ptr<Library> l;
    return l;
  }
  static TypedOperatorHandle<Sig> work() { return Dispatcher::singleton().findOpOrThrow("proft::work").typed<Sig>(); }
  static TypedOperatorHandle<Sig> outer() { return Dispatcher::singleton().findOpOrThrow("proft::outer").typed<Sig>(); }
  static uint64_t calls(const OpReport& r, const char* op) {
    const OpStats* s = r.find(op, DispatchKey::CPU);
    return s ? s->calls : 0;
  }
};

TEST_F(ProfilerThreadsTest, CallsOnManyThreadsAreAllCounted) {
  constexpr int kThreads = 8, kCallsPerThread = 50;
  Tensor a = tensorFromVector<float>({1, 2}, {2});
  Profiler prof;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCallsPerThread; ++i) outer().call(a);
    });
  }
  for (std::thread& t : threads) t.join();  // their buffers outlive them
  OpReport report = prof.report();
  EXPECT_EQ(calls(report, "proft::outer"), uint64_t{kThreads * kCallsPerThread});
  EXPECT_EQ(calls(report, "proft::work"), uint64_t{2 * kThreads * kCallsPerThread});
  const OpStats* o = report.find("proft::outer", DispatchKey::CPU);
  ASSERT_NE(o, nullptr);
  EXPECT_LE(o->self_time, o->total_time);
}

// Profilers start, report and stop on one thread while others call ops
// without pause: every report is consistent (outer's calls are counted with
// both of their work calls, up to the calls in flight), counts only grow
// while recording, and nothing is added after stop().
TEST_F(ProfilerThreadsTest, StartReportAndStopWhileOtherThreadsCall) {
  std::atomic<bool> stop{false};
  std::atomic<long> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Tensor a = tensorFromVector<float>({1}, {1});
      while (!stop.load(std::memory_order_relaxed)) {
        outer().call(a);
        done.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (int session = 0; session < 5; ++session) {
    Profiler prof;
    uint64_t last = 0;
    for (int i = 0; i < 10; ++i) {
      const long target = done.load() + 20;
      while (done.load() < target) std::this_thread::yield();
      OpReport r = prof.report();
      const uint64_t outer_calls = calls(r, "proft::outer");
      EXPECT_GE(outer_calls, last) << "counts shrank while recording";
      last = outer_calls;
      // Per thread, up to 4 work calls without their outer: 2 of an outer
      // that began before the session, 2 of the one in flight (a call is
      // recorded when it finishes).
      EXPECT_LE(calls(r, "proft::work"), 2 * outer_calls + 4 * 4);
    }
    prof.stop();
    const OpReport stopped = prof.report();
    const long target = done.load() + 50;
    while (done.load() < target) std::this_thread::yield();
    EXPECT_EQ(calls(prof.report(), "proft::outer"), calls(stopped, "proft::outer")) << "recorded after stop()";
    EXPECT_GT(calls(stopped, "proft::outer"), 0u);
  }
  stop = true;
  for (std::thread& t : threads) t.join();
}

// Threads that start, call and exit while a Profiler records: their calls
// stay in the report after they have gone.
TEST_F(ProfilerThreadsTest, CallsOfThreadsThatHaveExitedStayInTheReport) {
  Profiler prof;
  Tensor a = tensorFromVector<float>({1}, {1});
  for (int wave = 0; wave < 5; ++wave) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&] { work().call(a); });
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(calls(prof.report(), "proft::work"), 20u);
}

// The watchdog names the call that runs past the limit (the innermost: the
// kernel that hangs, with the op that called it), its device and thread, and
// how long it has run; once per call. Calls within the limit, on other
// threads meanwhile, are not reported: the busy thread times each of its
// short calls itself, and may be reported only if one of them really ran
// past the limit (on a loaded machine a thread can be descheduled that long
// in the middle of a call).
TEST_F(ProfilerThreadsTest, TheWatchdogReportsACallThatRunsPastTheLimitOnce) {
  std::mutex mu;
  std::vector<HangReport> reports;  // guarded by mu
  ProfilerOptions options;
  options.hang_after = milliseconds(100);
  options.on_hang = [&](const HangReport& r) {
    std::lock_guard<std::mutex> lock(mu);
    reports.push_back(r);
  };
  auto threadId = [] {
    std::ostringstream id;
    id << std::this_thread::get_id();
    return id.str();
  };
  std::string stuck_thread, busy_thread;
  std::chrono::steady_clock::duration longest_busy_call{0};
  {
    Profiler prof(options);
    std::atomic<bool> stop{false};
    std::thread busy([&] {  // short calls on another thread
      busy_thread = threadId();
      Tensor a = tensorFromVector<float>({1}, {1});
      while (!stop.load()) {
        const auto start = std::chrono::steady_clock::now();
        outer().call(a);
        longest_busy_call = std::max(longest_busy_call, std::chrono::steady_clock::now() - start);
      }
    });
    std::thread stuck([&] {
      stuck_thread = threadId();
      Dispatcher::singleton()
          .findOpOrThrow("proft::calls_stuck")
          .typed<Sig>()
          .call(tensorFromVector<float>({1500}, {1}));
    });
    stuck.join();
    stop = true;
    busy.join();
    EXPECT_EQ(calls(prof.report(), "proft::stuck"), 1u);
  }
  std::lock_guard<std::mutex> lock(mu);
  std::string all;
  std::vector<HangReport> of_stuck;
  size_t of_busy = 0;
  for (const HangReport& each : reports) {
    all += each.str() + "\n";
    if (each.thread == stuck_thread) of_stuck.push_back(each);
    if (each.thread == busy_thread) ++of_busy;
  }
  EXPECT_EQ(of_stuck.size() + of_busy, reports.size()) << "a report of neither thread:\n" << all;
  if (of_busy > 0) {
    EXPECT_GE(longest_busy_call, milliseconds(100)) << "a call within the limit was reported:\n" << all;
  }
  ASSERT_EQ(of_stuck.size(), 1u) << "one report per hung call; got:\n" << all;
  const HangReport& r = of_stuck[0];
  EXPECT_EQ(r.op, "proft::stuck");
  EXPECT_EQ(r.backend, DispatchKey::CPU);
  EXPECT_EQ(r.device, "cpu");
  EXPECT_GE(r.running_for, milliseconds(100));
  // The call sleeps 1.5 s: a wide margin over the 100 ms limit, so that a
  // watchdog thread late under load still reports while the call runs.
  EXPECT_LT(r.running_for, milliseconds(1500)) << "reported while it ran, not after";
  EXPECT_EQ(r.limit, milliseconds(100));
  EXPECT_EQ(r.callers, std::vector<std::string>{"proft::calls_stuck"});
  EXPECT_THAT(r.str(), HasSubstr("backplane: watchdog: proft::stuck on cpu (backend CPU) has been running for "));
  EXPECT_THAT(r.str(), HasSubstr("over the limit of 100.00 ms"));
  EXPECT_THAT(r.str(), HasSubstr("called from proft::calls_stuck"));
}

// Without on_hang the report is a line on stderr; stopping the Profiler
// stops the watchdog (a call still running then is not reported).
TEST_F(ProfilerThreadsTest, TheWatchdogLogsToStderrByDefaultAndStopsWithTheProfiler) {
  ProfilerOptions options;
  options.hang_after = milliseconds(50);
  ::testing::internal::CaptureStderr();
  {
    Profiler prof(options);
    Dispatcher::singleton().findOpOrThrow("proft::stuck").typed<Sig>().call(tensorFromVector<float>({200}, {1}));
  }
  {
    ProfilerOptions late;
    late.hang_after = milliseconds(100);
    late.on_hang = [](const HangReport& r) { ADD_FAILURE() << "reported after stop(): " << r.str(); };
    Profiler prof(late);
    std::thread t([] {
      Dispatcher::singleton().findOpOrThrow("proft::stuck").typed<Sig>().call(tensorFromVector<float>({250}, {1}));
    });
    std::this_thread::sleep_for(milliseconds(20));
    prof.stop();
    t.join();
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("backplane: watchdog: proft::stuck on cpu (backend CPU) has been running for "));
  EXPECT_THAT(err, HasSubstr("over the limit of 50.00 ms"));
}

}  // namespace
}  // namespace backplane
