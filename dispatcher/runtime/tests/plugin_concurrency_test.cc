// Plugins loaded and unloaded while other threads call into them and hold
// their tensors (Note [Plugin call tracking], Note [Refused unloads]), with
// tp_good (tests/plugins/tp_good.cc: device type tpdev, op tp::twice). In
// the ThreadSanitizer subset (label tsan: scripts/test.sh --sanitize=thread),
// where every race of the protocol is a failure; a crash anywhere is one too
// (a plugin closed under a live tensor or a running call faults).
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/cpu_kernels.h"

#ifndef BACKPLANE_TEST_PLUGIN_DIR
#error "BACKPLANE_TEST_PLUGIN_DIR must name the folder the test plugins are built into"
#endif

namespace backplane {
namespace {

using testing::floats;
using ::testing::HasSubstr;

using Twice = TypedOperatorHandle<Tensor(const Tensor&)>;

std::string pluginFile(std::string_view name) { return strCat(BACKPLANE_TEST_PLUGIN_DIR, "/", name, ".so"); }

bool isLoaded(std::string_view name) {
  for (const PluginStatus& p : plugins().plugins())
    if (p.loaded && p.name == name) return true;
  return false;
}

int loadedCount(std::string_view name) {
  int n = 0;
  for (const PluginStatus& p : plugins().plugins()) n += p.loaded && p.name == name;
  return n;
}

int64_t liveAllocations(std::string_view name) {
  for (const PluginStatus& p : plugins().plugins())
    if (p.loaded && p.name == name) return p.live_allocations;
  return -1;
}

Twice twiceOp() { return Dispatcher::singleton().findOpOrThrow("tp::twice").typed<Tensor(const Tensor&)>(); }

// Errors collected on worker threads (gtest's assertions are for the main one).
class Problems {
 public:
  void add(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (list_.size() < 20) list_.push_back(std::move(what));
    ++count_;
  }
  std::string str() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = std::to_string(count_) + " problem(s)";
    for (const std::string& s : list_) out += "\n  " + s;
    return out;
  }
  bool empty() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_ == 0;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> list_;  // guarded by mu_
  long count_ = 0;                 // guarded by mu_
};

// What a call may answer while its plugin is being unloaded or reloaded: the
// old kernel backing out, the op undefined, or (while init runs, between its
// def and its impl) defined without a cpu kernel yet.
bool isUnloadRefusal(const std::string& m) {
  return m.find("has been unloaded") != std::string::npos || m.find("is not defined") != std::string::npos ||
         m.find("has no kernel for dispatch key CPU") != std::string::npos;
}

class PluginConcurrencyTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* name : {"tp_good", "tp_kernel_error"}) {
      if (isLoaded(name)) {
        absl::Status s = plugins().unload(name);
        EXPECT_TRUE(s.ok()) << "left loaded by the test and cannot be unloaded: " << s;
      }
    }
    absl::Status inv = Dispatcher::singleton().checkInvariants();
    EXPECT_TRUE(inv.ok()) << inv;
  }
};

// Threads dispatch to the plugin's cpu kernel while the main thread unloads
// and reloads it.
TEST_F(PluginConcurrencyTest, UnloadWhileOtherThreadsDispatchIsSafe) {
  const std::string file = pluginFile("tp_good");
  ASSERT_TRUE(plugins().load(file).ok());
  const Twice held = twiceOp();  // handles stay valid across unload and reload

  std::atomic<bool> stop{false};
  std::atomic<long> ok{0}, refused{0};
  Problems bad;
  auto caller = [&](bool keep_handle) {
    Tensor x = floats({1, 2, 3});
    while (!stop.load(std::memory_order_relaxed)) {
      try {
        Tensor r = keep_handle ? held.call(x) : twiceOp().call(x);
        if (r.toVector<float>() == std::vector<float>{2, 4, 6}) {
          ok.fetch_add(1, std::memory_order_relaxed);
        } else {
          bad.add("wrong result");
        }
      } catch (const Error& e) {
        if (isUnloadRefusal(e.message()))
          refused.fetch_add(1, std::memory_order_relaxed);
        else
          bad.add(e.message());
      }
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(caller, true);
  threads.emplace_back(caller, false);
  threads.emplace_back(caller, true);

  auto wait_for_calls = [&](long n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (ok.load() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  };
  constexpr int kRounds = 20;
  for (int i = 0; i < kRounds; ++i) {
    wait_for_calls(ok.load() + 3);  // let calls run into the plugin before pulling it away
    absl::Status u = plugins().unload("tp_good");
    EXPECT_TRUE(u.ok()) << "round " << i << ": " << u;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    absl::StatusOr<PluginStatus> s = plugins().load(file);
    EXPECT_TRUE(s.ok()) << "round " << i << ": " << s.status();
    if (!u.ok() || !s.ok()) break;  // (not ASSERT: the threads must be joined)
  }
  wait_for_calls(ok.load() + 3);
  stop = true;
  for (auto& t : threads) t.join();

  EXPECT_TRUE(bad.empty()) << bad.str();
  EXPECT_GT(ok.load(), kRounds) << "calls got through between the reloads";
  EXPECT_EQ(held.call(floats({5})).item<float>(), 10);
  EXPECT_TRUE(plugins().unload("tp_good").ok());
  EXPECT_EQ(loadedCount("tp_good"), 0);
  RecordProperty("calls_ok", std::to_string(ok.load()));
  RecordProperty("calls_refused", std::to_string(refused.load()));
}

// plugins() is a status query any thread may make (a monitoring thread, a
// CLI listing plugins) while another loads or unloads.
//
// Regression: plugins() once copied plugin records outside the registry's
// lock while unload() wrote them (a data race ThreadSanitizer reported).
TEST_F(PluginConcurrencyTest, StatusIsReadableWhileLoadingAndUnloading) {
  const std::string file = pluginFile("tp_good");
  std::atomic<bool> stop{false};
  std::atomic<long> snapshots{0};
  std::thread reader([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (const PluginStatus& p : plugins().plugins()) {
        if (p.name == "tp_good" && p.loaded) {
          EXPECT_EQ(p.devices.size(), 1u);
        }
      }
      snapshots.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<PluginStatus> s = plugins().load(file);
    EXPECT_TRUE(s.ok()) << s.status();
    absl::Status u = plugins().unload("tp_good");
    EXPECT_TRUE(u.ok()) << u;
    if (!s.ok() || !u.ok()) break;
  }
  while (snapshots.load() < 20) std::this_thread::yield();
  stop = true;
  reader.join();
}

// Another thread loads and unloads other plugins meanwhile: tp_kernel_error
// (loads, unloads) and tp_rollback (registers a device type, an op and
// kernels, then fails; everything is rolled back). Returns when `stop` is set.
std::thread churnOtherPlugins(std::atomic<bool>& stop, std::atomic<long>& rounds, Problems& bad) {
  return std::thread([&] {
    const std::string kernel_error = pluginFile("tp_kernel_error"), rollback = pluginFile("tp_rollback");
    while (!stop.load(std::memory_order_relaxed)) {
      absl::StatusOr<PluginStatus> s = plugins().load(kernel_error);
      if (!s.ok()) bad.add("tp_kernel_error did not load: " + std::string(s.status().message()));
      absl::StatusOr<PluginStatus> r = plugins().load(rollback);
      if (r.ok() || r.status().message().find("bp::sum.dim_IntList_out") == std::string::npos) {
        bad.add("tp_rollback: expected its load to fail naming bp::sum.dim_IntList_out, got " +
                (r.ok() ? std::string("a loaded plugin") : std::string(r.status().message())));
      }
      if (absl::Status u = plugins().unload("tp_kernel_error"); !u.ok())
        bad.add("tp_kernel_error did not unload: " + std::string(u.message()));
      rounds.fetch_add(1, std::memory_order_relaxed);
    }
  });
}

// Item 5 of issue 24: an app's threads hold tensors on a plugin's device and
// call ops on them while another thread tries to unload the plugin, and a
// third loads and unloads other plugins. Every unload is refused, naming the
// plugin, the device type and the live allocations, and no call on those
// threads fails because of it; once the threads have freed their tensors the
// unload succeeds, and after a reload the same handles work again.
TEST_F(PluginConcurrencyTest, UnloadIsRefusedWhileThreadsHoldItsTensorsAndSucceedsOnceTheyAreFreed) {
  const std::string file = pluginFile("tp_good");
  ASSERT_TRUE(plugins().load(file).ok());
  const std::optional<DeviceType> tpdev = DeviceTypeRegistry::global().find("tpdev");
  ASSERT_TRUE(tpdev.has_value());
  const Twice twice = twiceOp();

  constexpr int kHolders = 6, kTensorsEach = 3;
  std::atomic<int> holding{0};
  std::atomic<bool> release{false}, stop{false};
  std::atomic<long> calls{0}, refused_after_free{0}, churn_rounds{0};
  Problems bad;
  auto holder = [&](int t) {
    const Device dev(*tpdev, t % 2);  // both of tpdev's devices
    {
      std::vector<Tensor> mine;
      for (int i = 0; i < kTensorsEach; ++i) mine.push_back(floats({float(t), float(i), 1}, dev));
      holding.fetch_add(1);
      // Ops on the held tensors: none may fail while the tensors live.
      while (!release.load(std::memory_order_relaxed)) {
        for (int i = 0; i < kTensorsEach; ++i) {
          try {
            Tensor r = twice.call(mine[i]);
            if (r.device() != dev || r.toVector<float>() != std::vector<float>{2.f * t, 2.f * i, 2})
              bad.add("wrong result on " + dev.str());
            mine[i] = floats({float(t), float(i), 1}, dev);  // a new allocation; the old one is freed
            calls.fetch_add(1, std::memory_order_relaxed);
          } catch (const Error& e) {
            bad.add("a call on a live " + dev.str() + " tensor failed: " + e.message());
          }
        }
      }
    }  // frees them
    holding.fetch_sub(1);
    // Afterwards: calls on the cpu kernel, which may be refused once the
    // plugin is gone, and must work again after the reload.
    Tensor x = floats({1, 2});
    while (!stop.load(std::memory_order_relaxed)) {
      try {
        if (twice.call(x).toVector<float>() != std::vector<float>{2, 4}) bad.add("wrong cpu result");
      } catch (const Error& e) {
        if (isUnloadRefusal(e.message()))
          refused_after_free.fetch_add(1, std::memory_order_relaxed);
        else
          bad.add(e.message());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kHolders; ++t) threads.emplace_back(holder, t);
  threads.push_back(churnOtherPlugins(stop, churn_rounds, bad));
  while (holding.load() < kHolders) std::this_thread::yield();

  // Unload attempts from another thread while the tensors live, and ops run.
  std::thread unloader([&] {
    for (int i = 0; i < 50; ++i) {
      absl::Status u = plugins().unload("tp_good");
      if (u.code() != absl::StatusCode::kFailedPrecondition ||
          u.message().find("cannot unload plugin 'tp_good': ") == std::string::npos ||
          u.message().find(" allocation(s) it made on tpdev are still alive; destroy those tensors first") ==
              std::string::npos) {
        bad.add("unload attempt " + std::to_string(i) + " while tensors are alive: " + u.ToString());
      }
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  unloader.join();
  EXPECT_GE(liveAllocations("tp_good"), kHolders * kTensorsEach);
  EXPECT_TRUE(isLoaded("tp_good"));
  EXPECT_GT(calls.load(), 0);

  // The threads free their tensors; then the unload goes through.
  release = true;
  while (holding.load() > 0) std::this_thread::yield();
  EXPECT_EQ(liveAllocations("tp_good"), 0);
  absl::Status u = plugins().unload("tp_good");
  EXPECT_TRUE(u.ok()) << u;
  EXPECT_FALSE(DeviceTypeRegistry::global().find("tpdev").has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // calls meet the unloaded plugin
  absl::StatusOr<PluginStatus> re = plugins().load(file);
  EXPECT_TRUE(re.ok()) << re.status();
  const long refused_then = refused_after_free.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // and the reloaded one
  stop = true;
  for (auto& t : threads) t.join();

  EXPECT_TRUE(bad.empty()) << bad.str();
  EXPECT_GT(refused_then, 0) << "no call met the unloaded plugin";
  EXPECT_GT(churn_rounds.load(), 0);
  EXPECT_EQ(twice.call(floats({5}, Device(*tpdev, 1))).toVector<float>(), std::vector<float>{10})
      << "the handle from before the unload works after the reload, with the same device type number";
  RecordProperty("calls_on_held_tensors", std::to_string(calls.load()));
}

// Allocations racing the unload itself: threads make, use and free tpdev
// tensors in a loop, holding none between rounds, while the main thread
// unloads and reloads the plugin. Unloads then often find no tensor alive,
// close the gate and wait for the calls inside, one of which is making a
// tensor: that unload must be refused, and the call that reads the new
// tensor right after must not fail (before Note [Refused unloads] it did:
// it met the closed gate of an unload that was about to be refused).
// Loading is not atomic (init registers the device type before the op and
// its kernels), so a call that overlapped a reload may find tp::twice not
// defined yet; only such calls are excused, by a load generation count.
// An unload either finds no tensor (it succeeds, and calls meet the
// unloaded plugin) or is refused; a tensor a thread got is never left
// without its plugin, and a call on it never fails (Note [Refused unloads]:
// calls that meet a refused unload wait for its outcome).
TEST_F(PluginConcurrencyTest, AllocationsRacingTheUnloadNeverOutliveThePlugin) {
  const std::string file = pluginFile("tp_good");
  ASSERT_TRUE(plugins().load(file).ok());
  const DeviceType tpdev = *DeviceTypeRegistry::global().find("tpdev");
  const Twice twice = twiceOp();

  std::atomic<bool> stop{false};
  std::atomic<long> made{0}, not_made{0}, excused{0};
  std::atomic<uint64_t> load_generation{0};  // odd while the main thread reloads
  Problems bad;
  auto worker = [&](int t) {
    const Device dev(tpdev, t % 2);
    while (!stop.load(std::memory_order_relaxed)) {
      std::this_thread::sleep_for(std::chrono::microseconds(20 * (t + 1)));
      Tensor x;
      const uint64_t generation = load_generation.load();
      try {
        x = floats({float(t), 1}, dev);
      } catch (const Error& e) {
        // The plugin is gone (or its device type, between unload and reload).
        const std::string& m = e.message();
        if (m.find("has been unloaded") != std::string::npos || m.find("tpdev") != std::string::npos ||
            m.find("device type") != std::string::npos) {
          not_made.fetch_add(1, std::memory_order_relaxed);
        } else {
          bad.add("making a tensor: " + m);
        }
        continue;
      }
      made.fetch_add(1, std::memory_order_relaxed);
      try {  // the tensor pins its plugin: none of these may fail
        if (x.toVector<float>() != std::vector<float>{float(t), 1}) bad.add("read back wrong values");
        if (twice.call(x).toVector<float>() != std::vector<float>{2.f * t, 2}) bad.add("wrong result");
      } catch (const Error& e) {
        if (generation % 2 == 1 || load_generation.load() != generation)
          excused.fetch_add(1);
        else
          bad.add("a call on a live tensor failed: " + e.message());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  constexpr int kAttempts = 1000;
  int unloaded = 0, refused = 0;
  for (int i = 0; i < kAttempts; ++i) {
    absl::Status u = plugins().unload("tp_good");
    if (u.ok()) {
      ++unloaded;
      load_generation.fetch_add(1);
      absl::StatusOr<PluginStatus> s = plugins().load(file);
      load_generation.fetch_add(1);
      EXPECT_TRUE(s.ok()) << s.status();
      if (!s.ok()) break;
    } else {
      ++refused;
      EXPECT_EQ(u.code(), absl::StatusCode::kFailedPrecondition) << u;
      EXPECT_THAT(std::string(u.message()), HasSubstr("are still alive; destroy those tensors first"));
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_TRUE(bad.empty()) << bad.str();
  EXPECT_GT(made.load(), 0);
  EXPECT_EQ(unloaded + refused, kAttempts);
  RecordProperty("unloaded", std::to_string(unloaded));
  RecordProperty("refused", std::to_string(refused));
  RecordProperty("calls_overlapping_a_reload", std::to_string(excused.load()));
}

// The window of Note [Refused unloads], made to happen: a thread is inside
// the plugin's allocate (a large block, which tp_good zero-fills) when
// another thread starts an unload. No tensor is alive yet, so the unload
// closes the gate and waits for the allocation; the allocation then counts,
// so the unload is refused. The thread's next call, which reads its new
// tensor while the unloader has not yet reopened the gate, must work.
TEST_F(PluginConcurrencyTest, ATensorMadeDuringARefusedUnloadCanBeUsedAtOnce) {
  const std::string file = pluginFile("tp_good");
  ASSERT_TRUE(plugins().load(file).ok());
  const DeviceType tpdev = *DeviceTypeRegistry::global().find("tpdev");
  constexpr int64_t kFloats = int64_t{32} << 20;  // 128 MiB: tens of milliseconds to zero
  for (int round = 0; round < 3; ++round) {
    std::atomic<bool> allocating{false};
    std::string error;
    float first = -1;
    std::thread maker([&] {
      allocating = true;
      try {
        Tensor x = emptyTensor({kFloats}, ScalarType::Float32, Device(tpdev, 0));
        first = x.slice(0, 0, 1).toVector<float>()[0];  // at once: the unloader may still be deciding
      } catch (const Error& e) {
        error = e.message();
      }
    });
    while (!allocating.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    absl::Status u = plugins().unload("tp_good");
    maker.join();
    EXPECT_EQ(u.code(), absl::StatusCode::kFailedPrecondition) << "round " << round << ": " << u;
    EXPECT_THAT(std::string(u.message()),
                HasSubstr("cannot unload plugin 'tp_good': 1 allocation(s) it made on tpdev are still alive"));
    EXPECT_EQ(error, "") << "round " << round << ": the call after the allocation failed";
    EXPECT_EQ(first, 0.0f);
  }
  EXPECT_TRUE(plugins().unload("tp_good").ok());
}

}  // namespace
}  // namespace backplane
