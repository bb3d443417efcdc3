// Streams and events (backplane/runtime/stream.h) on the simulator plugin, as an
// application uses them. The simulator defers the work of app streams until
// something forces it (Note [Deferred streams in the simulator]), so an
// order that only holds by luck on a GPU fails here every time: the tests
// that need an event show that without it the result is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "backplane/backplane.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/stream.h"
#include "backplane/testing/errors.h"
#include "gpu_test_util.h"

namespace backplane {
namespace {

using ::testing::Each;
using testing::expectError;
using ::testing::HasSubstr;

class GpusimStreamsTest : public gpu_test::GpusimSuite {
 protected:
  void SetUp() override {
    dev_ = sim();
    // An empty cache, so that the allocator tests know which block a
    // request gets.
    static auto empty_cache = Dispatcher::singleton().findOpOrThrow("gpusim::empty_cache").typed<void(int64_t)>();
    empty_cache.call(0);
  }

  static int64_t stat(std::string_view name) {
    static auto op =
        Dispatcher::singleton().findOpOrThrow("gpusim::memory_stat").typed<int64_t(std::string_view, int64_t)>();
    return op.call(name, 0);
  }
  // Skips a test that needs deferred streams when the environment turns
  // them off (BACKPLANE_GPUSIM_SYNC_STREAMS=1, sim_runtime.h).
  static bool deferredStreamsOff() {
    const char* v = std::getenv("BACKPLANE_GPUSIM_SYNC_STREAMS");
    return v != nullptr && std::string_view(v) == "1";
  }
  // The values of a float tensor (copied on the current stream).
  static std::vector<float> values(const Tensor& t) { return t.cpu().contiguous().toVector<float>(); }

  Device dev_{DeviceType::CPU};
};

constexpr int64_t kN = 1000;

TEST_F(GpusimStreamsTest, AStreamThatWaitsForAnEventReadsTheProducersResult) {
  Stream producer = Stream::create(dev_), consumer = Stream::create(dev_);
  Tensor y = zeros({kN}, {.device = dev_});  // default stream: done now
  Event ready(dev_);
  {
    StreamGuard on(producer);
    y.fill_(5.0);
    ready.record();
  }
  Tensor z;
  {
    StreamGuard on(consumer);
    ready.wait();
    z = y + 1.0;
  }
  consumer.synchronize();
  EXPECT_THAT(values(z), Each(6.0f));
}

// The same program without the wait: on the simulator the consumer runs
// before the producer, as a GPU may. This is what makes the test above fail
// if Event::wait did nothing.
TEST_F(GpusimStreamsTest, WithoutTheWaitTheConsumerSeesTheValuesFromBefore) {
  if (deferredStreamsOff()) GTEST_SKIP() << "BACKPLANE_GPUSIM_SYNC_STREAMS=1 runs every stream at once";
  Stream producer = Stream::create(dev_), consumer = Stream::create(dev_);
  Tensor y = zeros({kN}, {.device = dev_});
  {
    StreamGuard on(producer);
    y.fill_(5.0);
  }
  Tensor z;
  {
    StreamGuard on(consumer);
    z = y + 1.0;
  }
  consumer.synchronize();
  EXPECT_THAT(values(z), Each(1.0f)) << "the simulator ran the producer's work without being forced";
  producer.synchronize();
  EXPECT_THAT(values(y), Each(5.0f));
}

TEST_F(GpusimStreamsTest, EventsAndStreamSynchronizeBlockTheHostUntilTheWorkIsDone) {
  if (deferredStreamsOff()) GTEST_SKIP() << "BACKPLANE_GPUSIM_SYNC_STREAMS=1 runs every stream at once";
  Stream side = Stream::create(dev_);
  Tensor y = zeros({kN}, {.device = dev_});
  Event done(dev_);
  EXPECT_TRUE(done.query()) << "an event never recorded has completed";
  {
    StreamGuard on(side);
    y.fill_(3.0);
    done.record();
  }
  EXPECT_FALSE(done.query()) << "query must not force the work";
  done.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_THAT(values(y), Each(3.0f));

  // Stream::record and Stream::wait, and the default stream waiting.
  {
    StreamGuard on(side);
    y.fill_(4.0);
  }
  Stream::defaultStream(dev_).wait(side.record());
  EXPECT_THAT(values(y), Each(4.0f));  // .cpu() runs on the default stream, now after side's fill
}

TEST_F(GpusimStreamsTest, CopiesToTheHostOnAStreamWaitForThatStream) {
  Stream side = Stream::create(dev_);
  StreamGuard on(side);
  Tensor x = full({kN}, 2.0, {.device = dev_});
  Tensor y = x * 3.0;
  EXPECT_THAT(values(y), Each(6.0f));
}

TEST_F(GpusimStreamsTest, GuardRestoresThePreviousStreamAlsoOnAnException) {
  Stream a = Stream::create(dev_), b = Stream::create(dev_);
  EXPECT_TRUE(Stream::current(dev_).isDefault());
  {
    StreamGuard on_a(a);
    EXPECT_EQ(Stream::current(dev_), a);
    {
      StreamGuard on_b(b);
      EXPECT_EQ(Stream::current(dev_), b);
      EXPECT_EQ(on_b.previous(), a);
    }
    EXPECT_EQ(Stream::current(dev_), a);
  }
  EXPECT_TRUE(Stream::current(dev_).isDefault());

  try {
    StreamGuard on_a(a);
    throw std::runtime_error("leaving the scope by an exception");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(Stream::current(dev_).isDefault());
}

TEST_F(GpusimStreamsTest, TheCurrentStreamIsPerHostThread) {
  Stream a = Stream::create(dev_);
  StreamGuard on(a);
  bool other_thread_default = false;
  std::thread([&] { other_thread_default = Stream::current(dev_).isDefault(); }).join();
  EXPECT_TRUE(other_thread_default);
  EXPECT_EQ(Stream::current(dev_), a);
}

TEST_F(GpusimStreamsTest, DestroyingTheCurrentStreamRunsItsWorkAndRestoresTheDefault) {
  Tensor y = zeros({kN}, {.device = dev_});
  {
    Stream s = Stream::create(dev_);
    Stream::setCurrent(s);
    y.fill_(7.0);
  }  // the last copy goes: the stream is destroyed after its work
  EXPECT_TRUE(Stream::current(dev_).isDefault());
  EXPECT_THAT(values(y), Each(7.0f));
}

// A block freed on a side stream while the side stream's work on it is
// still queued: a request from the default stream may get that block only
// after that work. Were it handed over at once, the side stream's pending
// fill would land in the new tensor when the side stream runs.
TEST_F(GpusimStreamsTest, AFreedBlockIsNotReusedOnAnotherStreamBeforeItsWorkIsDone) {
  Stream side = Stream::create(dev_);
  Tensor out;
  {
    StreamGuard on(side);
    Tensor a = full({kN}, 1.0, {.device = dev_});  // queued on side
    out = a * 2.0;                                 // queued on side
  }                                                // `a` is freed on side, its fill and read still queued
  const int64_t hits = stat("cache_hits");
  Tensor c = full({kN}, 5.0, {.device = dev_});  // the default stream, the same size class as `a`
  EXPECT_EQ(stat("cache_hits"), hits + 1) << "the block is reused, after the side stream's work";
  side.synchronize();
  EXPECT_THAT(values(c), Each(5.0f));
  EXPECT_THAT(values(out), Each(2.0f));
}

// The other way: made on the default stream, read on a side stream, freed
// there. The default stream may reuse the block only after the side
// stream's read.
TEST_F(GpusimStreamsTest, ABlockFreedFromAnotherStreamWaitsForThatStreamsWork) {
  Stream side = Stream::create(dev_);
  Tensor out;
  Tensor a = full({kN}, 1.0, {.device = dev_});  // the default stream: done now
  {
    StreamGuard on(side);
    out = a * 2.0;                // queued on side
    Tensor dying = std::move(a);  // freed at the end of the scope, while side is current
  }
  Tensor c = full({kN}, 5.0, {.device = dev_});  // the default stream; may take a's block
  side.synchronize();
  EXPECT_THAT(values(out), Each(2.0f)) << "the side stream read `a` after the block was refilled";
  EXPECT_THAT(values(c), Each(5.0f));
}

TEST_F(GpusimStreamsTest, OverlapsACopyWithComputeAsTheReadmeShows) {
  Stream copies = Stream::create(dev_);
  Tensor batch = full({kN}, 3.0);  // on the cpu
  Event ready(dev_);
  Tensor x_next;
  {
    StreamGuard on(copies);
    x_next = batch.to(dev_);
    ready.record();
  }
  Tensor y = full({kN}, 1.0, {.device = dev_}) * 2.0;  // meanwhile, on the default stream
  ready.wait();
  Tensor y2 = x_next * 2.0;
  EXPECT_THAT(values(y2), Each(6.0f));
  EXPECT_THAT(values(y), Each(2.0f));
}

TEST_F(GpusimStreamsTest, CliSaysTheSimulatorHasStreamsAndEvents) {
  const std::string cmd = std::string(BACKPLANE_CLI_PATH) + " --no-default-plugins --plugin " +
                          BACKPLANE_GPUSIM_PLUGIN_PATH + " devices 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), &pclose);
  ASSERT_TRUE(pipe);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  // One line per device type: gpusim's lists streams and events, cpu's neither.
  bool gpusim_line = false, cpu_line = false;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    if (line.rfind("gpusim ", 0) == 0) {
      gpusim_line = true;
      EXPECT_THAT(line, HasSubstr("capabilities: streams, current_stream, events, event_wait, event_query"));
    } else if (line.rfind("cpu ", 0) == 0) {
      cpu_line = true;
      EXPECT_THAT(line, HasSubstr("capabilities: host_accessible"));
    }
    start = end + 1;
  }
  EXPECT_TRUE(gpusim_line && cpu_line) << out;
}

TEST_F(GpusimStreamsTest, TheCpuHasNoStreamsAndSaysWhereTheyAre) {
  const Device cpu(DeviceType::CPU);
  try {
    (void)Stream::create(cpu);
    FAIL() << "Stream::create(cpu) returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(e.what(), HasSubstr("cpu has no streams"));
    EXPECT_THAT(e.what(), HasSubstr("gpusim:0"));
  }
  try {
    Event e(cpu);
    FAIL() << "Event(cpu) returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(e.what(), HasSubstr("cpu has no events"));
  }
  EXPECT_THROW((void)Stream::current(cpu), Error);
}

// Note [Event timing in the simulator]: a timed event takes the time at
// which the device reaches it. On a deferred stream that is when the work
// before it is forced, so the time between two events spans the host's wait
// before the synchronize: the device's time, not the time to issue.
TEST_F(GpusimStreamsTest, TimedEventsMeasureWhenTheDeviceRanTheWork) {
  if (deferredStreamsOff()) GTEST_SKIP() << "BACKPLANE_GPUSIM_SYNC_STREAMS=1 runs every stream at once";
  ASSERT_TRUE(runtime()->capabilities(dev_).event_timing) << runtime()->capabilities(dev_).str();
  Stream side = Stream::create(dev_);
  const auto before = std::chrono::steady_clock::now();
  Event start = Event::timed(dev_), end = Event::timed(dev_);
  Tensor y = zeros({kN}, {.device = dev_});
  start.record(side);  // the stream is idle: reached now
  {
    StreamGuard on(side);
    y.fill_(2.0);
  }
  end.record(side);  // reached when the fill runs
  expectError([&] { (void)start.elapsedMs(end); }, absl::StatusCode::kFailedPrecondition, {"not completed yet"});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  end.synchronize();
  const double host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before).count();
  const double ms = start.elapsedMs(end);
  EXPECT_GE(ms, 30.0) << "the fill ran when forced, after the host's sleep";
  EXPECT_LE(ms, host_ms);
  EXPECT_LE(end.elapsedMs(start), -30.0) << "end before start is negative";
  EXPECT_THAT(values(y), Each(2.0f));

  // An event made without timing, or a timed one never recorded, is refused by name.
  Event plain(dev_);
  plain.record();
  expectError([&] { (void)start.elapsedMs(plain); }, absl::StatusCode::kInvalidArgument,
              {"the end event was made without timing", "enable_timing=True"});
  expectError([&] { (void)start.elapsedMs(Event::timed(dev_)); }, absl::StatusCode::kFailedPrecondition,
              {"never recorded"});
}

// Note [Stream tracks] (profiler.cc): with record_events, each call on the
// simulator also has its device work on its stream's track, timed by the
// device. Work queued on a deferred stream runs when the host synchronizes,
// so its track shows it there, after the host's sleep, while the calls that
// issued it finished before the sleep.
TEST_F(GpusimStreamsTest, TheProfilersTimelineHasATrackPerStreamWithTheDeviceWork) {
  if (deferredStreamsOff()) GTEST_SKIP() << "BACKPLANE_GPUSIM_SYNC_STREAMS=1 runs every stream at once";
  Tensor x = full({kN}, 1.0, {.device = dev_});
  Stream side = Stream::create(dev_);
  Profiler prof({.record_events = true});
  Tensor y = x * 2.0;  // the default stream
  Tensor z;
  {
    StreamGuard on(side);
    z = y + 1.0;
    z = z * 3.0;
  }
  const auto slept_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  side.synchronize();
  prof.stop();
  const OpReport report = prof.report();
  EXPECT_THAT(values(z), Each(9.0f));

  ASSERT_EQ(report.streams.size(), 2u) << ::testing::PrintToString(report.streams);
  EXPECT_EQ(report.streams[0], "gpusim:0 default stream");
  EXPECT_EQ(report.streams[1], "gpusim:0 stream 1");
  const auto slept =
      std::chrono::duration_cast<std::chrono::nanoseconds>(slept_at.time_since_epoch()) - report.started_at;
  int on_side = 0, on_default = 0;
  for (const DeviceTraceEvent& e : report.device_events) {
    EXPECT_EQ(std::string(dispatchKeyName(e.backend)), "gpusim") << e.op;
    if (e.stream == 0) {
      ++on_default;
      EXPECT_LE(e.start + e.duration, slept) << e.op << ": the default stream runs its work when issued";
    } else if (e.op == "bp::mul.out") {
      ++on_side;
      // z * 3 was queued behind z = y + 1: the device reached it after the sleep.
      // (Half the sleep: room for the anchor's placement on a busy machine.)
      EXPECT_GE(e.start, slept + std::chrono::milliseconds(25)) << e.op << " ran when the host synchronized";
    } else {
      ++on_side;
    }
  }
  EXPECT_GE(on_default, 1) << "y = x * 2";
  EXPECT_GE(on_side, 2) << "z = y + 1 and z * 3, each with its out= call";
  // The host's events for the same calls all ended before the sleep.
  for (const TraceEvent& e : report.events) EXPECT_LE(e.start + e.duration, slept) << e.op;

  const std::string trace = report.chromeTrace();
  const size_t first_stream_tid = report.threads.size();
  EXPECT_THAT(trace, HasSubstr(R"({"name":"thread_name","ph":"M","pid":0,"tid":)" +
                               std::to_string(first_stream_tid + 1) + R"(,"args":{"name":"gpusim:0 stream 1"}})"));
  EXPECT_THAT(trace, HasSubstr(R"("cat":"device","ph":"X")"));
}

// Note [Graphs in the application API]: the work captured once replays on
// new values of its input, refilled in place, with one launch and no
// kernel launched by the host; the captured values are not computed at the
// capture.
TEST_F(GpusimStreamsTest, AGraphReplaysTheCapturedWorkOnNewInputs) {
  ASSERT_TRUE(runtime()->capabilities(dev_).graphs) << runtime()->capabilities(dev_).str();
  Stream side = Stream::create(dev_);
  Tensor x = tensorFromVector<float>({1, -2, 3, -4}, {4}, dev_);
  Tensor y;
  const int64_t launches = activity("kernel_launches");
  Graph graph = Graph::capture(side, [&] { y = (x * 2.0 + 1.0).relu().sum(); });
  const int64_t captured = activity("kernel_launches") - launches;
  EXPECT_GE(captured, 3) << "the host issued the captured launches";
  EXPECT_EQ(graph.device(), dev_);
  for (const std::vector<float>& input : {std::vector<float>{1, -2, 3, -4}, std::vector<float>{5, 6, -7, 0.5f}}) {
    x.copy_(tensorFromVector<float>(input, {4}, cpu()));  // outside the capture: in place
    const int64_t before = activity("kernel_launches"), graphs_before = activity("graph_launches");
    graph.replay();
    EXPECT_EQ(activity("kernel_launches"), before) << "a replay launches nothing itself";
    EXPECT_EQ(activity("graph_launches"), graphs_before + 1);
    side.synchronize();
    float want = 0;
    for (float v : input) want += std::max(0.0f, v * 2 + 1);
    EXPECT_EQ(values(y), (std::vector<float>{want}));
  }
  // The output outlives the graph: its memory stays until it is freed.
  graph = Graph::capture(side, [&] { (void)(x + 1.0); });
  EXPECT_EQ(values(y).size(), 1u);
  // A replay still queued (side's work is deferred) when the graph and its
  // last output go: the pool is freed only after that work has run (under
  // ASan a write into a freed pool would be reported).
  {
    Tensor z;
    {
      const Graph last = Graph::capture(side, [&] { z = x * 5.0; });
      last.replay();
    }
    z = Tensor();
  }
  side.synchronize();
}

// A graph destroyed while its output lives keeps its pool; when that output
// goes during another graph's capture, the pool is released after the
// capture (its release synchronizes the device, which the capturing thread
// may not do), and the capture is unharmed.
TEST_F(GpusimStreamsTest, APoolLeftDuringAnotherCaptureIsReleasedAfterIt) {
  Stream side = Stream::create(dev_);
  const Tensor x = tensorFromVector<float>({1, 2, 3}, {3}, dev_);
  const int64_t reserved = stat("reserved_bytes");
  Tensor first;
  {
    const Graph g = Graph::capture(
        side, [&] { first = x * 2.0; }, GraphOptions{.pool_bytes = 1 << 20});
    g.replay();
    side.synchronize();
  }
  EXPECT_EQ(values(first), (std::vector<float>{2, 4, 6}));
  const int64_t with_first = stat("reserved_bytes");
  EXPECT_GT(with_first, reserved) << "the first graph's pool lives with its output";
  Tensor second;
  const Graph g = Graph::capture(
      side,
      [&] {
        first = Tensor();  // the first pool's last block goes during this capture
        second = x + 1.0;
      },
      GraphOptions{.pool_bytes = 1 << 20});
  EXPECT_EQ(stat("reserved_bytes"), with_first) << "one pool released (the first), one made (this graph's)";
  g.replay();
  side.synchronize();
  EXPECT_EQ(values(second), (std::vector<float>{2, 3, 4}));
}

// What a replay cannot repeat is refused during the capture with an error
// that names it; the capture ends cleanly and the device captures again.
TEST_F(GpusimStreamsTest, WhatAGraphCannotRepeatIsRefusedDuringTheCapture) {
  Stream side = Stream::create(dev_);
  const Tensor x = tensorFromVector<float>({1, 2, 3}, {3}, dev_);
  const int64_t reserved = stat("reserved_bytes");
  expectError([&] { (void)Graph::capture(side, [&] { (void)(x * 2.0).cpu(); }); },
              absl::StatusCode::kFailedPrecondition,
              {"gpusim:0: a copy to the host cannot be captured in a graph", "do it before or after the capture"});
  expectError([&] { (void)Graph::capture(side, [&] {
                      x.copy_(tensorFromVector<float>({4, 5, 6}, {3}, cpu()));
                    }); },
              absl::StatusCode::kFailedPrecondition, {"a copy from the host", "cannot be captured in a graph"});
  expectError([&] { (void)Graph::capture(side, [&] { side.synchronize(); }); }, absl::StatusCode::kFailedPrecondition,
              {"synchronizing the stream", "capturing a graph"});
  expectError([&] { (void)Graph::capture(side, [&] { Event(dev_).record(); }); }, absl::StatusCode::kFailedPrecondition,
              {"recording an event", "capturing a graph"});
  expectError([&] { (void)Graph::capture(side, [&] { (void)nonzero(x); }); }, absl::StatusCode::kFailedPrecondition,
              {"cannot be captured in a graph"});
  expectError(
      [&] {
        (void)Graph::capture(
            side, [&] { (void)zeros({1 << 20}, {.device = dev_}); }, GraphOptions{.pool_bytes = 4096});
      },
      absl::StatusCode::kResourceExhausted,
      {"an allocation of 4194304 bytes outgrows the graph's memory pool (4096 bytes", "GraphOptions::pool_bytes"});
  EXPECT_EQ(stat("reserved_bytes"), reserved) << "the pools of the failed captures are freed";
  // A capture on a stream of one device is one at a time; after the
  // failures above the device captures again.
  Tensor y;
  Graph graph = Graph::capture(side, [&] { y = x * 3.0; });
  graph.replay();
  side.synchronize();
  EXPECT_EQ(values(y), (std::vector<float>{3, 6, 9}));
}

}  // namespace
}  // namespace backplane
