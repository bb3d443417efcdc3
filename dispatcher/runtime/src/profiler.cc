// Note [Profiling]
// A Profiler is a session. Starting one publishes it as the process's active
// session and adds the Profiling key (the highest functionality key) to every
// call's key set; its boxed fallback, profilingKernel, times the call and
// redispatches below Profiling. When no session is active the key is in no
// key set, so calls never reach profilingKernel and cost what they cost
// without it.
//
// Per-thread recording: each thread attaches to the active session the first
// time it runs a profiled call (a ThreadRecords, registered with the session
// under the session lock once per thread and session) and from then on adds
// to its own rows under its own mutex, which nothing else takes until
// report() merges the threads' rows. The thread finds out whether it is still
// attached by comparing the session id it holds with the active one (one
// atomic load). stop() closes every ThreadRecords under its mutex, so a call
// that finishes after stop() returns is dropped rather than racing report().
//
// Nested calls: a composite calls other ops, which reach profilingKernel
// again. Each call is a CallFrame on the C++ stack, linked to its caller's
// frame through a thread-local pointer; a call adds its total time to its
// caller's `children`, and self time is total minus children. CPU-fallback
// bytes are attributed the same way: detail::tls_fallback_bytes is zeroed
// when a frame starts and restored when it ends, so a frame sees exactly the
// bytes of the fallbacks it ran itself. Host<->device transfers come from
// core's per-thread counters, which only grow (Note [Counting host<->device
// transfers]): a frame reads them when it starts and ends, and its self
// transfers are the difference less what its nested calls moved. An exception from the op is caught,
// the frame is finished (so the stack stays consistent and the failed call
// is counted), and the same exception object is rethrown.
//
// Note [Watchdog]
// ProfilerOptions::hang_after. A kernel that hangs cannot be cancelled
// in-process: the thread running it is inside a plugin's code (or waiting on
// a device), and neither killing a thread nor unwinding it from outside is
// safe; a device kernel cannot be recalled either. So the watchdog only
// reports. With it on, each profiled call also pushes an entry (op, backend,
// device, start) onto its thread's `in_flight` stack under the thread's
// records mutex and pops it when the call returns; the session's watchdog
// thread wakes every hang_after / 4, takes each thread's mutex in turn, and
// reports the innermost call of each thread that has run past the limit
// (with the ops it was called from), marking it and its callers reported so
// that a hang is reported once. Reports go to on_hang outside every lock.
// The cost is the profiler's, only while one with a watchdog records: off,
// the Profiling key is in no key set and nothing of this runs. A process
// that must survive a hanging kernel runs the work in a worker process and
// kills it after a timeout: `backplane conformance` does (Note [Conformance
// workers] in conformance/src/workers.cc).
//
// The kind of a call (native, composite, fallback) is read from the slot of
// the backend key the call resolves to, not of the next key below Profiling,
// which may be another wrapper (Tracing, a User key) and says nothing about
// how the op ran on the device.
#include "backplane/runtime/profiler.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"
#include "backplane/core/transfers.h"
#include "backplane/dispatch/builtin_kernels.h"
#include "backplane/dispatch/dispatcher.h"

namespace backplane {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;
using RowKey = std::pair<const OperatorEntry*, DispatchKey>;
using Rows = absl::flat_hash_map<RowKey, OpStats>;

// One thread's rows for one session: written by that thread, read by
// report(), so `mu` is contended only while a report is being made.
// Whether `iface` still serves `device`'s type (a plugin unloaded since
// took its interface, and the events made through it, away).
bool stillLoaded(Device device, DeviceInterface* iface) {
  return DeviceTypeRegistry::global().interface(device.type) == iface;
}

// Destroys an event, ignoring a failure: cleanup must not throw (from a
// destructor, or after the op ran), and an event a plugin fails to destroy
// is the plugin's to leak.
void destroyQuietly(DeviceInterface* iface, Device device, DeviceInterface::EventHandle event) noexcept {
  if (event == nullptr || !stillLoaded(device, iface)) return;
  try {
    iface->destroyEvent(device, event);
  } catch (...) {
  }
}

// One call's device work (Note [Stream tracks]).
struct DeviceEvent {
  const OperatorEntry* op;
  DispatchKey backend;
  Device device;
  DeviceInterface* iface;
  DeviceInterface::StreamHandle stream;
  DeviceInterface::EventHandle start;
  DeviceInterface::EventHandle end;
};

// The session's anchors, one per device and interface (Note [Stream
// tracks]). `mu` is held while an anchor is made, which may synchronize a
// device; only calls that need an anchor and report() wait for it.
struct DeviceAnchors {
  struct Anchor {
    Device device;
    DeviceInterface* iface;
    DeviceInterface::EventHandle event;
    Clock::time_point host;
  };
  absl::Mutex mu;
  std::vector<Anchor> list ABSL_GUARDED_BY(mu);
  bool closed ABSL_GUARDED_BY(mu) = false;  // stop(): no new anchors

  // Whether (device, iface) has an anchor, making it if not; false once
  // closed. Throws what the device threw.
  bool ensure(Device device, DeviceInterface* iface, const DeviceCapabilities& caps) {
    absl::MutexLock lock(&mu);
    if (closed) return false;
    for (const Anchor& a : list)
      if (a.device == device && a.iface == iface) return true;
    Anchor a{device, iface, iface->createTimedEvent(device), {}};
    DeviceInterface::StreamHandle idle = nullptr;
    try {
      if (caps.streams)
        idle = iface->createStream(device);
      else
        iface->synchronize(device);
      const Clock::time_point before = Clock::now();
      iface->recordEvent(device, a.event, idle);
      const Clock::time_point after = Clock::now();
      a.host = before + (after - before) / 2;
      if (idle != nullptr) iface->destroyStream(device, std::exchange(idle, nullptr));
    } catch (...) {
      if (idle != nullptr) {
        try {
          iface->destroyStream(device, idle);
        } catch (...) {
        }
      }
      destroyQuietly(iface, device, a.event);
      throw;
    }
    list.push_back(a);
    return true;
  }
  std::vector<Anchor> snapshot() {
    absl::MutexLock lock(&mu);
    return list;
  }
  void close() {
    absl::MutexLock lock(&mu);
    closed = true;
  }
  ~DeviceAnchors() {
    absl::MutexLock lock(&mu);
    for (const Anchor& a : list) destroyQuietly(a.iface, a.device, a.event);
  }
};

struct ThreadRecords {
  ThreadRecords(bool synchronize, bool watch) : synchronize_device(synchronize), watched(watch) {
    std::ostringstream id;
    id << std::this_thread::get_id();
    thread = id.str();
  }
  const bool synchronize_device;  // ProfilerOptions::synchronize_device
  bool record_events = false;     // ProfilerOptions::record_events
  int index = 0;                  // this thread's place in the session (OpReport::threads)
  const bool watched;             // ProfilerOptions::hang_after is set (Note [Watchdog])
  std::string thread;             // the id of the thread that records here
  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;  // set by stop(), after which calls are dropped
  Rows rows ABSL_GUARDED_BY(mu);
  // The thread's profiled calls now running, outermost first (when watched).
  struct InFlight {
    const OperatorEntry* op;
    DispatchKey backend;
    std::optional<Device> device;
    std::chrono::steady_clock::time_point start;
    bool reported;
  };
  std::vector<InFlight> in_flight ABSL_GUARDED_BY(mu);
  // Every call, when record_events is set (Note [Timelines]).
  struct Event {
    const OperatorEntry* op;
    DispatchKey backend;
    std::chrono::steady_clock::time_point start;
    std::chrono::nanoseconds duration;
  };
  std::vector<Event> events ABSL_GUARDED_BY(mu);
  // Note [Stream tracks]
  // With record_events, a call on a device with event timing records a
  // timed event on the thread's current stream before its kernel runs and
  // one after; report() reads the device's time between them, and from the
  // session's anchor for the device to the first. An anchor is made by the
  // first call on its device (on any thread): a timed event recorded on a
  // stream made for it, which is idle, so the device reaches it at once,
  // between two host clock reads (their midpoint is the anchor's host
  // time); a device without streams is synchronized first instead. A call's
  // host time is the anchor's plus the device's time since the anchor. The
  // events are the session's, destroyed with it (~ProfilerSession), or at
  // once for a call that ends after stop(). No lock of the profiler is held
  // while a plugin is asked anything that may wait for the device, so the
  // watchdog reports a device that hangs; report() waits for the calls'
  // device work with the locks released.
  std::vector<DeviceEvent> device_events ABSL_GUARDED_BY(mu);
  std::shared_ptr<DeviceAnchors> anchors;  // the session's; set when the thread attaches
};

}  // namespace

namespace detail {
struct ProfilerSession {
  // Set before the session is published, constant afterwards.
  uint64_t id = 0;
  ProfilerOptions options;
  Clock::time_point start;

  absl::Mutex mu;
  std::optional<Clock::time_point> stopped ABSL_GUARDED_BY(mu);
  std::vector<std::shared_ptr<ThreadRecords>> threads ABSL_GUARDED_BY(mu);
  // The watchdog (Note [Watchdog]): started by the constructor when
  // hang_after is set, told to stop and joined by stop().
  std::thread watchdog;
  bool stopping ABSL_GUARDED_BY(mu) = false;

  // Note [Stream tracks]; shared with every thread's records.
  std::shared_ptr<DeviceAnchors> anchors = std::make_shared<DeviceAnchors>();

  ~ProfilerSession() {
    absl::MutexLock lock(&mu);
    for (const auto& records : threads) {
      absl::MutexLock records_lock(&records->mu);
      for (const DeviceEvent& e : records->device_events) {
        destroyQuietly(e.iface, e.device, e.start);
        destroyQuietly(e.iface, e.device, e.end);
      }
      records->device_events.clear();
    }
  }
};
}  // namespace detail

namespace {

// The process's active session (Note [Profiling]). `id` mirrors session->id
// (0 when none) so that a call can check it without the lock. Never
// destroyed: threads may still run ops during static destruction.
struct ActiveSession {
  absl::Mutex mu;  // taken before any ProfilerSession::mu
  std::shared_ptr<detail::ProfilerSession> session ABSL_GUARDED_BY(mu);
  std::atomic<uint64_t> id{0};
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
};

ActiveSession& activeSession() {
  static ActiveSession* active = new ActiveSession();
  return *active;
}

struct CallCost {
  Clock::time_point start;
  nanoseconds total{0};
  nanoseconds self{0};
  uint64_t fallback_bytes = 0;
  TransferCount transfers;  // self
};

class CallFrame;

struct ThreadState {
  uint64_t session_id = 0;                 // the session `records` belongs to; 0 for none
  std::shared_ptr<ThreadRecords> records;  // null when not recording into that session
  CallFrame* top = nullptr;                // innermost call being timed
};
thread_local ThreadState tls_thread;

// One call being timed (Note [Profiling]). finish() must run exactly once,
// on success and on error alike: it pops the frame.
class CallFrame {
 public:
  explicit CallFrame(ThreadState& thread)
      : thread_(thread),
        parent_(thread.top),
        saved_fallback_bytes_(detail::tls_fallback_bytes),
        start_transfers_(detail::tls_host_device_transfers) {
    thread.top = this;
    detail::tls_fallback_bytes = 0;
    start_ = Clock::now();
  }
  CallFrame(const CallFrame&) = delete;
  CallFrame& operator=(const CallFrame&) = delete;

  CallCost finish() {
    const nanoseconds total = Clock::now() - start_;
    const TransferCount now = detail::tls_host_device_transfers;
    const TransferCount moved{now.bytes - start_transfers_.bytes, now.copies - start_transfers_.copies};
    const CallCost cost{
        start_, total, total - children_, detail::tls_fallback_bytes,
        TransferCount{moved.bytes - children_transfers_.bytes, moved.copies - children_transfers_.copies}};
    detail::tls_fallback_bytes = saved_fallback_bytes_;
    thread_.top = parent_;
    if (parent_) {
      parent_->children_ += total;
      parent_->children_transfers_.bytes += moved.bytes;
      parent_->children_transfers_.copies += moved.copies;
    }
    return cost;
  }

 private:
  ThreadState& thread_;
  CallFrame* const parent_;
  const uint64_t saved_fallback_bytes_;
  const TransferCount start_transfers_;
  Clock::time_point start_;
  nanoseconds children_{0};
  TransferCount children_transfers_;
};

// This thread's records for session `id`, attaching the thread to it on its
// first call; null when `id` is no longer (or not) the active session.
std::shared_ptr<ThreadRecords> recordsFor(ThreadState& thread, uint64_t id) {
  if (id == thread.session_id) return thread.records;
  thread.session_id = id;
  thread.records.reset();
  if (id == 0) return nullptr;
  ActiveSession& active = activeSession();
  absl::MutexLock lock(&active.mu);
  if (!active.session || active.session->id != id) return nullptr;
  const ProfilerOptions& options = active.session->options;
  thread.records = std::make_shared<ThreadRecords>(options.synchronize_device, options.hang_after.count() > 0);
  thread.records->record_events = options.record_events;
  thread.records->anchors = active.session->anchors;
  absl::MutexLock session_lock(&active.session->mu);
  thread.records->index = static_cast<int>(active.session->threads.size());
  active.session->threads.push_back(thread.records);
  return thread.records;
}

void addCall(ThreadRecords& records, const OperatorEntry& op, DispatchKey backend, KernelKind kind,
             const CallCost& cost, bool failed) {
  absl::MutexLock lock(&records.mu);
  if (records.closed) return;
  OpStats& row = records.rows[RowKey(&op, backend)];
  row.backend = backend;
  ++row.calls;
  switch (kind) {
    case KernelKind::Native: ++row.native_calls; break;
    case KernelKind::Composite: ++row.composite_calls; break;
    case KernelKind::CpuFallback: ++row.cpu_fallback_calls; break;
    case KernelKind::BackendFallback: ++row.backend_fallback_calls; break;
    case KernelKind::Missing:
    case KernelKind::Fallthrough: break;
  }
  if (failed) ++row.failed_calls;
  row.fallback_bytes += cost.fallback_bytes;
  row.transfer_bytes += cost.transfers.bytes;
  row.transfer_copies += cost.transfers.copies;
  row.total_time += cost.total;
  row.self_time += cost.self;
  if (records.record_events) records.events.push_back({&op, backend, cost.start, cost.total});
}

void mergeInto(OpStats& into, const OpStats& from) {
  into.backend = from.backend;
  into.calls += from.calls;
  into.native_calls += from.native_calls;
  into.composite_calls += from.composite_calls;
  into.cpu_fallback_calls += from.cpu_fallback_calls;
  into.backend_fallback_calls += from.backend_fallback_calls;
  into.failed_calls += from.failed_calls;
  into.fallback_bytes += from.fallback_bytes;
  into.transfer_bytes += from.transfer_bytes;
  into.transfer_copies += from.transfer_copies;
  into.total_time += from.total_time;
  into.self_time += from.self_time;
}

// The device a call on device type `type` runs on: that of its first
// argument on the type (a tensor, a tensor in a list, or a Device).
Device callDevice(const OperatorHandle& op, const Stack& stack, DeviceType type) {
  const size_t n = std::min(op.schema().arguments().size(), stack.size());
  auto onType = [&](const TensorBase& t) { return t.defined() && t.device().type == type; };
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const IValue& v = stack[i];
    if (v.isTensor() && onType(v.toTensor())) return v.toTensor().device();
    if (v.isDevice() && v.toDevice().type == type) return v.toDevice().resolved();
    if (v.isTensorList()) {
      for (const TensorBase& t : v.toTensorList())
        if (onType(t)) return t.device();
    }
    if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList())
        if (t && onType(*t)) return t->device();
    }
  }
  return Device(type).resolved();
}

// A call's start event on its device's current stream (Note [Stream
// tracks]), or nothing when the device has no event timing. Never throws:
// the timeline is the profiler's business, not the op's, so a device that
// fails to make or record an event leaves this call off its stream's track.
struct DeviceSpan {
  Device device;
  DeviceInterface* iface = nullptr;
  DeviceInterface::StreamHandle stream = nullptr;
  DeviceInterface::EventHandle start = nullptr;
};

std::optional<DeviceSpan> startDeviceSpan(ThreadRecords& records, const OperatorHandle& op, const Stack& stack,
                                          DispatchKey backend) {
  DeviceSpan span;
  span.device = callDevice(op, stack, deviceTypeOf(backend));
  span.iface = DeviceTypeRegistry::global().interface(span.device.type);
  if (span.iface == nullptr) return std::nullopt;
  try {
    const DeviceCapabilities caps = span.iface->capabilities();
    if (!caps.event_timing || !records.anchors->ensure(span.device, span.iface, caps)) return std::nullopt;
    if (caps.current_stream) span.stream = span.iface->currentStream(span.device);
    span.start = span.iface->createTimedEvent(span.device);
    span.iface->recordEvent(span.device, span.start, span.stream);
  } catch (...) {
    destroyQuietly(span.iface, span.device, span.start);
    return std::nullopt;
  }
  return span;
}

// Records the call's end event on the stream its start went to and keeps
// the pair for report(); an event the device fails to make or record drops
// the call from the track, as above. Never throws.
void finishDeviceSpan(ThreadRecords& records, const OperatorEntry& op, DispatchKey backend,
                      const DeviceSpan& span) noexcept {
  DeviceInterface::EventHandle end = nullptr;
  try {
    end = span.iface->createTimedEvent(span.device);
    span.iface->recordEvent(span.device, end, span.stream);
    absl::MutexLock lock(&records.mu);
    if (!records.closed) {
      records.device_events.push_back({&op, backend, span.device, span.iface, span.stream, span.start, end});
      return;
    }
  } catch (...) {
  }
  destroyQuietly(span.iface, span.device, end);
  destroyQuietly(span.iface, span.device, span.start);
}

// "850 ns", "12.3 us", "4.56 ms", "1.23 s".
std::string formatDuration(nanoseconds d) {
  const double ns = static_cast<double>(d.count());
  char buf[32];
  if (ns < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (ns < 1e6)
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  else if (ns < 1e9)
    std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  return buf;
}

}  // namespace

std::string formatBytes(uint64_t n) {
  char buf[32];
  const double d = static_cast<double>(n);
  if (n < (uint64_t{1} << 10))
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  else if (n < (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", d / (1 << 10));
  else if (n < (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", d / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f GiB", d / (1 << 30));
  return buf;
}

// ------------------------------------------------------------ the kernel

// Times the call for the active Profiler and redispatches below Profiling:
// the Profiling key's fallback, which the first Profiler registers.
static void profilingKernel(OperatorKernel*, const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  const DispatchKeySet below = ks & DispatchKeySet::below(DispatchKey::Profiling);
  ThreadState& thread = tls_thread;
  // A shared_ptr, not a raw pointer: a nested call may attach this thread
  // to a newer session (and drop thread.records) while this one runs.
  const std::shared_ptr<ThreadRecords> records = recordsFor(thread, activeSession().id.load(std::memory_order_acquire));
  if (!records) {  // the session stopped between the key-set read and here
    op.redispatchBoxedSameArguments(below, *stack);
    return;
  }
  const DispatchKey backend = op.entry().resolveKey(below & DispatchKeySet::allBackends());
  // After the dtype rule: a call its native kernel declines is reported as
  // served by what served it (Note [Declared dtypes]); so is one it
  // declines at run time, known only after the call (Note [Declined calls]).
  KernelKind kind = op.servingKind(backend, *stack);
  const detail::DeclineNote& declines = detail::threadDeclineNote();
  const uint64_t declines_before = declines.count;

  DeviceInterface* device_interface = nullptr;
  Device device;
  if (records->synchronize_device && isBackendKey(backend) && backend != DispatchKey::CPU) {
    device = callDevice(op, *stack, deviceTypeOf(backend));
    device_interface = DeviceTypeRegistry::global().interface(device.type);
  }
  // Before the clock starts: earlier work belongs to whoever issued it (the
  // caller's self time, when this call is nested).
  if (device_interface) device_interface->synchronize(device);

  if (records->watched) {
    std::optional<Device> on;
    if (isBackendKey(backend)) on = callDevice(op, *stack, deviceTypeOf(backend));
    absl::MutexLock lock(&records->mu);
    records->in_flight.push_back({&op.entry(), backend, on, Clock::now(), false});
  }
  std::optional<DeviceSpan> span;
  if (records->record_events && isBackendKey(backend) && backend != DispatchKey::CPU)
    span = startDeviceSpan(*records, op, *stack, backend);
  CallFrame frame(thread);
  std::exception_ptr error;
  try {
    op.redispatchBoxedSameArguments(below, *stack);
    if (device_interface) device_interface->synchronize(device);
  } catch (...) {
    error = std::current_exception();
  }

  if (records->watched) {
    absl::MutexLock lock(&records->mu);
    records->in_flight.pop_back();
  }
  const CallCost cost = frame.finish();
  if (span) finishDeviceSpan(*records, op.entry(), backend, *span);
  if (declines.count != declines_before && declines.op == &op.entry()) kind = declines.served_by;
  addCall(*records, op.entry(), backend, kind, cost, error != nullptr);
  if (error) std::rethrow_exception(error);
}

// ------------------------------------------------------------ the watchdog

namespace {

// The calls of `s` running past the limit that are not reported yet: per
// thread the innermost one, which is marked reported with its callers.
std::vector<HangReport> findHangs(detail::ProfilerSession& s, Clock::time_point now)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  std::vector<HangReport> found;
  const nanoseconds limit = s.options.hang_after;
  for (const auto& records : s.threads) {
    absl::MutexLock lock(&records->mu);
    auto& calls = records->in_flight;
    for (size_t i = calls.size(); i-- > 0;) {
      if (now - calls[i].start < limit) continue;
      if (!calls[i].reported) {
        HangReport r;
        r.op = calls[i].op->qualifiedName();
        r.backend = calls[i].backend;
        r.device = calls[i].device ? calls[i].device->str() : std::string();
        r.running_for = now - calls[i].start;
        r.limit = limit;
        r.thread = records->thread;
        for (size_t j = i; j-- > 0;) r.callers.push_back(calls[j].op->qualifiedName());
        found.push_back(std::move(r));
      }
      for (size_t j = 0; j <= i; ++j) calls[j].reported = true;
      break;
    }
  }
  return found;
}

void watchdogLoop(detail::ProfilerSession* s) {
  const nanoseconds period = std::max<nanoseconds>(s->options.hang_after / 4, std::chrono::milliseconds(1));
  for (;;) {
    std::vector<HangReport> found;
    {
      absl::MutexLock lock(&s->mu);
      s->mu.AwaitWithTimeout(absl::Condition(&s->stopping), absl::FromChrono(period));
      if (s->stopping) return;
      found = findHangs(*s, Clock::now());
    }
    for (const HangReport& r : found) {
      if (s->options.on_hang)
        s->options.on_hang(r);
      else
        logLine(r.str());
    }
  }
}

}  // namespace

std::string HangReport::str() const {
  std::string callers_part;
  for (const std::string& c : callers) callers_part += (callers_part.empty() ? ", called from " : " < ") + c;
  return strCat("backplane: watchdog: ", op, device.empty() ? std::string() : strCat(" on ", device), " (backend ",
                dispatchKeyName(backend), ") has been running for ", formatDuration(running_for),
                ", over the limit of ", formatDuration(limit), " (thread ", thread, callers_part, ")");
}

// ------------------------------------------------------------ Profiler

namespace detail {
// The Profiling key's fallback registration, made by the first Profiler and
// never destroyed.
RegistrationHandle* g_profiling_kernel = nullptr;
}  // namespace detail

Profiler::Profiler(ProfilerOptions options) : session_(std::make_shared<detail::ProfilerSession>()) {
  session_->options = options;
  ActiveSession& active = activeSession();
  absl::MutexLock lock(&active.mu);
  if (active.session) {
    BP_THROW(kFailedPrecondition,
             "cannot start a Profiler: another Profiler is already recording, and profilers do not nest. "
             "Stop the first one (Profiler::stop() or its destructor) before starting another, or take "
             "its report() at the points you want to compare");
  }
  session_->id = active.next_id++;
  session_->start = Clock::now();
  active.session = session_;
  active.id.store(session_->id, std::memory_order_release);
  if (options.hang_after.count() > 0) session_->watchdog = std::thread(&watchdogLoop, session_.get());
  // The profiling kernel is the Profiling key's fallback, registered by the
  // first Profiler and kept for the process (the dispatcher, a layer below,
  // does not know this one). It only runs while the key is included.
  // The handle hangs off a global, so leak checkers see it reachable.
  static const bool registered = [] {
    detail::g_profiling_kernel = new RegistrationHandle(valueOrThrow(Dispatcher::singleton().registerFallback(
        DispatchKey::Profiling, KernelFunction::makeFromBoxedFunction(&profilingKernel), "built-in profiler")));
    return true;
  }();
  (void)registered;
  Dispatcher::singleton().setProfiling(true);
}

Profiler::~Profiler() { stop(); }

void Profiler::stop() {
  ActiveSession& active = activeSession();
  {
    absl::MutexLock lock(&active.mu);
    if (active.session != session_) return;  // already stopped
    Dispatcher::singleton().setProfiling(false);
    active.id.store(0, std::memory_order_release);
    active.session.reset();
  }
  {
    absl::MutexLock lock(&session_->mu);
    session_->stopped = Clock::now();
    for (const auto& records : session_->threads) {
      absl::MutexLock records_lock(&records->mu);
      records->closed = true;
    }
    session_->stopping = true;  // wakes the watchdog
  }
  session_->anchors->close();
  if (session_->watchdog.joinable()) session_->watchdog.join();
}

bool Profiler::recording() const {
  absl::MutexLock lock(&session_->mu);
  return !session_->stopped.has_value();
}

namespace {
// The device work of `records`' calls on the host's clock (Note [Stream
// tracks]), each stream named once in report.streams. Waits for the work.
// The streams of a report, numbered per device ("cuda:0 stream 1") in the
// order met; a stream is its device and handle (null: the default stream).
struct StreamNames {
  std::vector<std::pair<Device, DeviceInterface::StreamHandle>> keys;  // parallel to OpReport::streams

  int indexOf(Device device, DeviceInterface::StreamHandle stream, std::vector<std::string>& names) {
    int on_device = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!(keys[i].first == device)) continue;
      if (keys[i].second == stream) return static_cast<int>(i);
      if (keys[i].second != nullptr) ++on_device;
    }
    keys.emplace_back(device, stream);
    names.push_back(stream == nullptr ? strCat(device.str(), " default stream")
                                      : strCat(device.str(), " stream ", on_device + 1));
    return static_cast<int>(keys.size() - 1);
  }
};

// The device work of `events` on the host's clock (Note [Stream tracks]),
// each stream named once in report.streams. Waits for the work; called with
// no lock of the profiler held. A call whose events the device cannot time
// (an error, its plugin unloaded) is left out.
void addDeviceEvents(const std::vector<DeviceEvent>& events, DeviceAnchors& anchors, Clock::time_point session_start,
                     StreamNames& streams, OpReport& report) {
  auto ns = [](double ms) { return nanoseconds(static_cast<int64_t>(ms * 1e6)); };
  const std::vector<DeviceAnchors::Anchor> known = anchors.snapshot();
  for (const DeviceEvent& e : events) {
    if (!stillLoaded(e.device, e.iface)) continue;  // its plugin was unloaded: no device to ask
    const auto anchor = std::find_if(known.begin(), known.end(), [&](const DeviceAnchors::Anchor& a) {
      return a.device == e.device && a.iface == e.iface;
    });
    if (anchor == known.end()) continue;  // cannot happen: the anchor comes first
    try {
      e.iface->synchronizeEvent(e.device, e.end);
      const double from_ms = e.iface->eventElapsedMs(e.device, anchor->event, e.start);
      const double span_ms = e.iface->eventElapsedMs(e.device, e.start, e.end);
      report.device_events.push_back({e.op->qualifiedName(), e.backend,
                                      streams.indexOf(e.device, e.stream, report.streams),
                                      anchor->host - session_start + ns(from_ms), ns(std::max(0.0, span_ms))});
    } catch (...) {
    }
  }
}
}  // namespace

OpReport Profiler::report() const {
  OpReport report;
  Rows merged;
  StreamNames streams;
  std::vector<DeviceEvent> device_events;  // resolved after the locks are released
  {
    absl::MutexLock lock(&session_->mu);
    report.wall_time = session_->stopped.value_or(Clock::now()) - session_->start;
    report.started_at = session_->start.time_since_epoch();
    for (const auto& records : session_->threads) {
      absl::MutexLock records_lock(&records->mu);
      for (const auto& [key, row] : records->rows) mergeInto(merged[key], row);
      if (!records->record_events) continue;
      report.threads.push_back(records->thread);
      for (const ThreadRecords::Event& e : records->events)
        report.events.push_back(
            {e.op->qualifiedName(), e.backend, records->index, e.start - session_->start, e.duration});
      device_events.insert(device_events.end(), records->device_events.begin(), records->device_events.end());
    }
  }
  addDeviceEvents(device_events, *session_->anchors, session_->start, streams, report);
  // By start; a caller before a call it made at the same instant (longer first).
  auto byStart = [](const auto& a, const auto& b) {
    return a.start != b.start ? a.start < b.start : a.duration > b.duration;
  };
  std::stable_sort(report.events.begin(), report.events.end(), byStart);
  std::stable_sort(report.device_events.begin(), report.device_events.end(), byStart);
  report.ops.reserve(merged.size());
  for (auto& [key, row] : merged) {
    row.op = key.first->qualifiedName();
    report.ops.push_back(std::move(row));
  }
  std::sort(report.ops.begin(), report.ops.end(), [](const OpStats& a, const OpStats& b) {
    if (a.self_time != b.self_time) return a.self_time > b.self_time;
    if (a.op != b.op) return a.op < b.op;
    return a.backend < b.backend;
  });
  return report;
}

// ------------------------------------------------------------ the report

namespace {
// `s` as a JSON string's contents.
std::string jsonEscaped(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

std::string OpReport::chromeTraceEvents(int pid, const std::string& process_name) const {
  std::string out = strCat(R"({"name":"process_name","ph":"M","pid":)", pid, R"(,"tid":0,"args":{"name":")",
                           jsonEscaped(process_name), R"("}})");
  for (size_t t = 0; t < threads.size(); ++t)
    out += strCat(R"(,{"name":"thread_name","ph":"M","pid":)", pid, R"(,"tid":)", t, R"(,"args":{"name":"thread )", t,
                  " (", jsonEscaped(threads[t]), R"x()"}})x");
  // Stream tracks come after the threads' (Note [Stream tracks]).
  const size_t first_stream = threads.size();
  for (size_t s = 0; s < streams.size(); ++s)
    out += strCat(R"(,{"name":"thread_name","ph":"M","pid":)", pid, R"(,"tid":)", first_stream + s,
                  R"(,"args":{"name":")", jsonEscaped(streams[s]), R"("}})");
  char num[64];
  auto add = [&](std::string_view op, DispatchKey backend, const char* category, size_t tid, nanoseconds start,
                 nanoseconds duration) {
    std::snprintf(num, sizeof num, R"("ts":%.3f,"dur":%.3f)", static_cast<double>((started_at + start).count()) / 1e3,
                  static_cast<double>(duration.count()) / 1e3);
    out += strCat(R"(,{"name":")", jsonEscaped(op), R"(","cat":")", category, R"(","ph":"X",)", num, R"(,"pid":)", pid,
                  R"(,"tid":)", tid, R"(,"args":{"backend":")", jsonEscaped(dispatchKeyName(backend)), R"("}})");
  };
  for (const TraceEvent& e : events) add(e.op, e.backend, "op", e.thread, e.start, e.duration);
  for (const DeviceTraceEvent& e : device_events)
    add(e.op, e.backend, "device", first_stream + e.stream, e.start, e.duration);
  return out;
}

std::string OpReport::chromeTrace(int pid, const std::string& process_name) const {
  return strCat(R"({"displayTimeUnit":"ms","traceEvents":[)", chromeTraceEvents(pid, process_name), "]}");
}

std::string OpStats::how() const {
  const std::array<std::pair<KernelKind, uint64_t>, 4> kinds = {{
      {KernelKind::Native, native_calls},
      {KernelKind::Composite, composite_calls},
      {KernelKind::CpuFallback, cpu_fallback_calls},
      {KernelKind::BackendFallback, backend_fallback_calls},
  }};
  std::string out;
  for (const auto& [kind, n] : kinds) {
    if (n == 0) continue;
    out += strCat(out.empty() ? "" : ", ", kernelKindName(kind));
    if (n != calls) out += strCat(" ", n);
  }
  if (out.empty()) out = "no kernel";
  if (failed_calls != 0) out += strCat(" (", failed_calls, " failed)");
  return out;
}

const OpStats* OpReport::find(std::string_view op, DispatchKey backend) const {
  for (const OpStats& row : ops)
    if (row.op == op && row.backend == backend) return &row;
  return nullptr;
}

std::string OpReport::summary() const {
  uint64_t calls = 0, native = 0, composite = 0, fell_back = 0, fallback_calls = 0, bytes = 0, failed = 0;
  uint64_t transfer_bytes = 0, transfer_copies = 0;
  nanoseconds in_ops{0};
  for (const OpStats& row : ops) {
    calls += row.calls;
    if (row.fallbackCalls() != 0)
      ++fell_back;
    else if (row.composite_calls != 0)
      ++composite;
    else if (row.native_calls != 0)
      ++native;
    fallback_calls += row.fallbackCalls();
    bytes += row.fallback_bytes;
    failed += row.failed_calls;
    transfer_bytes += row.transfer_bytes;
    transfer_copies += row.transfer_copies;
    in_ops += row.self_time;
  }
  return strCat(ops.size(), ops.size() == 1 ? " op" : " ops", " ran (", calls, calls == 1 ? " call" : " calls",
                "): ", native, " native, ", composite, " composite, ", fell_back, " fell back (", fallback_calls,
                fallback_calls == 1 ? " call, " : " calls, ", formatBytes(bytes), " copied); ",
                failed == 0 ? "" : strCat(failed, failed == 1 ? " call" : " calls", " failed; "),
                formatDuration(in_ops), " in ops, ", formatDuration(wall_time),
                " wall; host<->device: ", formatBytes(transfer_bytes), " in ", transfer_copies,
                transfer_copies == 1 ? " copy" : " copies");
}

std::string OpReport::table() const {
  constexpr size_t kColumns = 9;
  using Line = std::array<std::string, kColumns>;
  constexpr std::array<bool, kColumns> kRightAligned = {false, false, true, false, true, true, true, true, true};
  nanoseconds in_ops{0};
  for (const OpStats& row : ops) in_ops += row.self_time;

  std::vector<Line> lines = {
      {"op", "backend", "calls", "how", "fallback bytes", "host<->device", "self", "self %", "total"}};
  for (const OpStats& row : ops) {
    char share[16];
    const double fraction = in_ops.count() ? static_cast<double>(row.self_time.count()) / in_ops.count() : 0;
    std::snprintf(share, sizeof share, "%.1f%%", 100 * fraction);
    lines.push_back({row.op, dispatchKeyName(row.backend), std::to_string(row.calls), row.how(),
                     row.fallbackCalls() ? formatBytes(row.fallback_bytes) : "-",
                     row.transfer_copies ? strCat(formatBytes(row.transfer_bytes), " in ", row.transfer_copies) : "-",
                     formatDuration(row.self_time), share, formatDuration(row.total_time)});
  }
  std::array<size_t, kColumns> widths{};
  for (const Line& line : lines)
    for (size_t c = 0; c < kColumns; ++c) widths[c] = std::max(widths[c], line[c].size());

  std::string out;
  for (const Line& line : lines) {
    std::string text;
    for (size_t c = 0; c < kColumns; ++c) {
      const std::string pad(widths[c] - line[c].size(), ' ');
      text += (c ? "  " : "") + (kRightAligned[c] ? pad + line[c] : line[c] + pad);
    }
    text.erase(text.find_last_not_of(' ') + 1);
    out += text + "\n";
  }
  return out + summary() + "\n";
}

}  // namespace backplane
