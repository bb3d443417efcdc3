// The simulator used from many host threads at once, as an application's
// worker threads use a GPU: each with its own streams and events, sharing
// the device's caching allocator and its deferred-stream queue (Note
// [Deferred streams in the simulator]), and freeing blocks made on other
// threads' streams; data parallelism's threads (parallelApply's replicas,
// DistributedDataParallel's communication thread beside backward) and the
// profiler's stream tracks on them. In the ThreadSanitizer subset (label
// tsan), where every race in the runtime (runtime.cu), the simulator (sim/),
// the host's stream API, data parallelism or the profiler is a failure.
// Loads the simulator alone: no CPU plugin (no OpenMP, no MPI).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backplane/autograd/autograd.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/dispatch/library.h"
#include "backplane/ops/ops.h"
#include "backplane/ops/tensor.h"
#include "backplane/runtime/data_parallel.h"
#include "backplane/runtime/distributed_data_parallel.h"
#include "backplane/runtime/profiler.h"
#include "backplane/runtime/runtime.h"
#include "backplane/runtime/stream.h"

#ifndef BACKPLANE_GPUSIM_PLUGIN_PATH
#error "BACKPLANE_GPUSIM_PLUGIN_PATH must name the simulator plugin"
#endif

namespace backplane {
namespace {

using ::testing::Each;

class GpusimThreadsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RuntimeOptions o;
    o.plugin_paths = {BACKPLANE_GPUSIM_PLUGIN_PATH};
    o.load_default_plugins = false;
    runtime() = std::make_unique<Runtime>(o);
    for (const PluginStatus& p : runtime()->plugins()) ASSERT_TRUE(p.loaded) << p.path << ": " << p.error;
  }
  static void TearDownTestSuite() { runtime().reset(); }
  static std::unique_ptr<Runtime>& runtime() {
    static std::unique_ptr<Runtime> rt;
    return rt;
  }
  static Device sim() { return runtime()->device("gpusim:0"); }
  static std::vector<float> values(const Tensor& t) { return t.cpu().toVector<float>(); }
  static int64_t stat(std::string_view name) {
    static auto op =
        Dispatcher::singleton().findOpOrThrow("gpusim::memory_stat").typed<int64_t(std::string_view, int64_t)>();
    return op.call(name, 0);
  }
};

constexpr int64_t kN = 256;

// The all_reduce calls this test's world-of-one engine served.
std::atomic<int>& allReduceCalls() {
  static std::atomic<int> calls{0};
  return calls;
}

// Every thread runs a producer/consumer pair of its own streams, ordered by
// an event, many times; all results are right, and the allocator's books
// balance afterwards.
TEST_F(GpusimThreadsTest, ThreadsWithTheirOwnStreamsAndEventsGetTheirOwnResults) {
  const Device dev = sim();
  const int64_t allocated_before = stat("allocated_bytes");
  constexpr int kThreads = 4, kRounds = 20;
  std::mutex mu;
  std::vector<std::string> bad;  // guarded by mu
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        Stream producer = Stream::create(dev), consumer = Stream::create(dev);
        for (int r = 0; r < kRounds; ++r) {
          const float v = float(t * 100 + r);
          Tensor y = zeros({kN}, {.device = dev});
          Event ready(dev);
          {
            StreamGuard on(producer);
            y.fill_(v);
            ready.record();
          }
          Tensor z;
          {
            StreamGuard on(consumer);
            ready.wait();
            z = y * 2.0 + 1.0;
          }
          consumer.synchronize();
          const std::vector<float> got = values(z);
          if (got != std::vector<float>(kN, 2 * v + 1)) {
            std::lock_guard<std::mutex> lock(mu);
            bad.push_back("thread " + std::to_string(t) + " round " + std::to_string(r) + ": got " +
                          std::to_string(got[0]));
          }
        }
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(mu);
        bad.push_back("thread " + std::to_string(t) + ": " + e.message());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_TRUE(bad.empty()) << bad.size() << " bad, first: " << bad.front();
  EXPECT_EQ(stat("allocated_bytes"), allocated_before) << "every block the threads made was freed";
}

// Results made on one thread's stream and handed to another thread with an
// event (the consumer's stream waits for it, as CUDA requires), read and
// freed there: the caching allocator must not hand a block out before the
// stream that last used it is done, while a third thread allocates from the
// same size class on its default stream. The deferred streams run on
// whichever host thread forces them.
TEST_F(GpusimThreadsTest, ResultsHandedToAnotherThreadWithAnEventAreRightAndFreedSafely) {
  const Device dev = sim();
  constexpr int kRounds = 30;
  struct Handover {
    Tensor result;
    std::shared_ptr<Event> ready;
  };
  std::mutex mu;
  std::vector<Handover> handed_over;  // guarded by mu
  std::vector<std::string> bad;       // guarded by mu
  std::thread producer([&] {
    Stream side = Stream::create(dev);
    StreamGuard on(side);
    for (int r = 0; r < kRounds; ++r) {
      Tensor a = full({kN}, double(r), {.device = dev});
      Handover h{a * 3.0, std::make_shared<Event>(dev)};  // still queued on `side` when handed over
      h.ready->record();
      std::lock_guard<std::mutex> lock(mu);
      handed_over.push_back(std::move(h));
    }  // `a` freed on `side` each round
  });
  std::thread consumer([&] {
    for (int seen = 0; seen < kRounds;) {
      Handover h;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (size_t(seen) < handed_over.size()) h = std::move(handed_over[size_t(seen)]);
      }
      if (!h.result.defined()) {
        std::this_thread::yield();
        continue;
      }
      h.ready->wait();  // this thread's default stream waits for the producer's work
      const std::vector<float> got = values(h.result);
      if (got != std::vector<float>(kN, 3.0f * float(seen))) {
        std::lock_guard<std::mutex> lock(mu);
        bad.push_back("handed-over result " + std::to_string(seen) + " holds " + std::to_string(got[0]));
      }
      ++seen;
    }  // each freed here, on another thread than the stream that made it
  });
  std::thread other([&] {
    for (int r = 0; r < kRounds; ++r) {
      Tensor c = full({kN}, 7.0, {.device = dev});
      if (values(c) != std::vector<float>(kN, 7.0f)) {
        std::lock_guard<std::mutex> lock(mu);
        bad.push_back("default-stream block overwritten");
      }
    }
  });
  producer.join();
  consumer.join();
  other.join();
  EXPECT_TRUE(bad.empty()) << bad.size() << " bad, first: " << bad.front();
}

// Device-wide synchronize and statistics from one thread while others work.
TEST_F(GpusimThreadsTest, SynchronizeAndStatisticsWhileOtherThreadsQueueWork) {
  const Device dev = sim();
  static auto synchronize = Dispatcher::singleton().findOpOrThrow("gpusim::synchronize").typed<void(int64_t)>();
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&, t] {
      Stream s = Stream::create(dev);
      StreamGuard on(s);
      while (!stop.load()) {
        Tensor x = full({kN}, double(t), {.device = dev}) + 1.0;
        if (values(x) != std::vector<float>(kN, float(t + 1))) wrong++;
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    synchronize.call(0);
    EXPECT_GE(stat("reserved_bytes"), stat("allocated_bytes"));
  }
  stop = true;
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(wrong.load(), 0);
}

// parallelApply's replicas run forward and backward on the simulator at
// once, each with its own replica of the parameters and on its own stream,
// while the profiler records every call and its stream's track; each
// replica's gradient is its own, and the profiler saw every replica's work.
TEST_F(GpusimThreadsTest, ParallelApplyReplicasTrainAtOnceUnderTheProfiler) {
  const Device dev = sim();
  constexpr size_t kReplicas = 3;
  const Tensor w = full({kN}, 2.0, {.device = dev});
  std::vector<Tensor> grads(kReplicas);
  // Made before and kept alive across: a stream is known by its handle
  // (profiler.h), so replicas must not reuse a freed stream's address.
  std::vector<Stream> streams;
  for (size_t i = 0; i < kReplicas; ++i) streams.push_back(Stream::create(dev));
  Profiler prof({.record_events = true});
  parallel::parallelApply(kReplicas, [&](size_t i) {
    const Stream& s = streams[i];
    StreamGuard on(s);
    Tensor replica = w.clone().requires_grad_();
    const Tensor x = full({kN}, double(i + 1), {.device = dev});
    sum(mul(mul(x, replica), replica)).backward();  // d/dw sum(x w^2) = 2 x w
    grads[i] = replica.grad();
    s.synchronize();
  });
  prof.stop();
  for (size_t i = 0; i < kReplicas; ++i) EXPECT_THAT(values(grads[i]), Each(float(2 * (i + 1) * 2))) << "replica " << i;
  const OpReport report = prof.report();
  EXPECT_GE(report.threads.size(), kReplicas);
  EXPECT_GE(report.streams.size(), kReplicas) << "one stream per replica";
  EXPECT_FALSE(report.device_events.empty());
}

// DistributedDataParallel's communication thread runs each bucket's
// all_reduce while backward goes on in the caller's thread and the autograd
// hooks hand it buckets. The engine here is this test's, for a world of one
// on the simulator (the average of one gradient is itself), so that no MPI
// runs under ThreadSanitizer; the engines themselves are tested under
// mpirun (plugins/mpi/tests) and on a GPU (gpu_collectives_tests).
TEST_F(GpusimThreadsTest, DistributedDataParallelsCommunicationThreadBesideBackward) {
  const Device dev = sim();
  const DispatchKey key = *parseDispatchKey("gpusim");
  static Library* engine = [key] {
    auto* lib = new Library("gpusimthreadstest");
    std::atomic<int>* calls = &allReduceCalls();
    throwIfError(lib->impl("comm::all_reduce_", key, [calls](const Tensor& self, std::string_view, int64_t) {
      ++*calls;
      return self;
    }));
    throwIfError(lib->impl("comm::broadcast_", key, [](const Tensor& self, int64_t, int64_t) { return self; }));
    return lib;
  }();
  (void)engine;
  std::vector<Tensor> params;
  for (int i = 0; i < 6; ++i) params.push_back(full({kN}, 0.5 * (i + 1), {.device = dev}).requires_grad_());
  parallel::DistributedDataParallel ddp(params,
                                        {.group = comm::world(), .bucket_cap_mb = 0.002, .first_bucket_mb = 0.001});
  ASSERT_GE(ddp.bucketCount(), 3u);
  const Tensor x = full({kN}, 3.0, {.device = dev});
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const int before = allReduceCalls().load();
    for (Tensor& p : params) p.set_grad(Tensor());
    Tensor h = x;
    for (const Tensor& p : params) h = mul(h, p);  // x * p0 * ... * p5
    sum(h).backward();
    ddp.finishGradientSync();
    EXPECT_EQ(allReduceCalls().load() - before, static_cast<int>(ddp.bucketCount()));
    // d/dp_i of sum(x * prod p) = x * prod_{j != i} p_j.
    for (size_t i = 0; i < params.size(); ++i) {
      double want = 3.0;
      for (size_t j = 0; j < params.size(); ++j)
        if (j != i) want *= 0.5 * (j + 1);
      const std::vector<float> got = values(params[i].grad());
      ASSERT_EQ(got.size(), static_cast<size_t>(kN));
      EXPECT_NEAR(got[0], want, 1e-5 * want) << "parameter " << i;
      EXPECT_THAT(got, Each(got[0]));
    }
  }
}

}  // namespace
}  // namespace backplane
