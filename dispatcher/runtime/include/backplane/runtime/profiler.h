#pragma once
// Profiler: a per-op report of a region of an application. Which ops ran
// natively on their device and which fell back (with counts and the bytes the
// CPU fallback copied), and the time spent in each.
//
//   backplane::Profiler prof;                  // starts recording
//   Tensor y = ...;                            // run ops, on any thread
//   backplane::OpReport report = prof.report();
//   std::cout << report.table();
//
// What it measures. Every operator call made while a Profiler is active, on
// any thread, through any entry point (typed calls, boxed calls, plugins
// calling ops), is one call of the row (operator, backend), where the backend
// is the dispatch key whose kernel served the call ("CPU", "cuda",
// "testdev"). A call is timed from when its kernel is entered until it
// returns, with a steady clock; the shape check that call() runs before the
// kernel (Note [Meta kernels]) is not included.
//
// Total and self time. Composite ops are written with other ops, and every
// op may call others; each nested call is a call of its own row too. An
// op's total time includes the ops it called; its self time does not. So
// self times add up to the time spent in ops, and total times do not (a
// composite and the ops inside it count the same time). Rows are sorted by
// self time: the top rows are where the time went. Fallback bytes and
// host<->device transfers follow the same rule: they belong to the call that
// moved them, not to its callers. Copies made outside any op (an app's
// item() or toVector(), tensorFromVector) are not in the report.
//
// Asynchronous devices. A device kernel may return before the device has
// finished (CUDA launches work and returns), so by default an op's time is
// the time to issue it, and the device time shows up in whichever later op
// waits for it (often a copy to the host). ProfilerOptions::synchronize_device
// waits for the device before and after every op, so that each op's time
// includes its device work; that serialises host and device, so the whole
// run gets slower, but the per-op times are honest.
//
// Thread-safety. Profiler's methods may be called from any thread. Each
// thread records into its own buffer (no lock shared between threads on the
// call path); report() merges the buffers.
//
// One at a time: at most one Profiler is active in a process. Starting a
// second one while the first is recording throws Error (kFailedPrecondition);
// profilers do not nest, because every call would have to be charged to
// each of them. Stop the first (stop() or its destructor) before starting
// another.
//
// Watchdog. A kernel that hangs cannot be stopped from inside the process:
// a thread cannot be cancelled safely in the middle of a plugin's code, and
// a device kernel cannot be recalled. What a Profiler can do is notice:
// with ProfilerOptions::hang_after set, a thread of its own looks at the
// calls in flight and reports each call that has run longer than that (its
// op, backend, device, thread and callers) to ProfilerOptions::on_hang, or
// as a line on stderr. The callback may std::abort() to get a core dump of
// the hung process, or record and let it run. Processes that must survive a
// hanging kernel run it in a worker process with a timeout, as `backplane
// conformance` does (Note [Watchdog] in profiler.cc).
//
// Cost. While no Profiler is active the Profiling dispatch key is not in any
// call's key set, so calls take exactly the path they take without the
// profiler. While one is active, each call pays two clock reads, a few
// thread-local accesses and a hash-table update under its thread's own lock.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backplane/dispatch/dispatch_key.h"

namespace backplane {

namespace detail {
struct ProfilerSession;  // profiler.cc
}  // namespace detail

// A call the watchdog found running for longer than ProfilerOptions::hang_after.
struct HangReport {
  std::string op;                                // "bp::add.Tensor"
  DispatchKey backend = DispatchKey::Undefined;  // the backend key whose kernel serves the call
  std::string device;                            // "gpusim:0", "cpu"; "" when the call has no backend
  std::chrono::nanoseconds running_for{0};       // when the watchdog looked
  std::chrono::nanoseconds limit{0};             // hang_after
  std::string thread;                            // the calling thread's std::thread::id
  std::vector<std::string> callers;              // the ops it was called from, innermost first
  // "backplane: watchdog: bp::add.Tensor on gpusim:0 (backend gpusim) has
  // been running for 2.00 s, over the limit of 500.00 ms (thread 1403...,
  // called from bp::linear)".
  std::string str() const;
};

struct ProfilerOptions {
  // Wait for the call's device (DeviceInterface::synchronize) before and
  // after every op on a device other than the CPU, so that an op's time
  // includes the device work it issued. Off by default: it slows the run.
  bool synchronize_device = false;
  // The watchdog: report every op call still running after this long (0:
  // off, the default). The innermost such call of a thread is reported, with
  // its callers, once; the watchdog looks every hang_after / 4 (at least
  // every millisecond). On a device that returns before its work is done
  // (CUDA), a call's time is the time to issue it: set synchronize_device
  // too for the watchdog to see a kernel that never finishes.
  std::chrono::nanoseconds hang_after{0};
  // Where the watchdog's reports go, called on the watchdog's thread; empty
  // (the default): HangReport::str() as a line on stderr. It may
  // std::abort() (to get a core dump) or return; it must not start or stop a
  // Profiler.
  std::function<void(const HangReport&)> on_hang = nullptr;
  // Keep every call as an event (its op, thread, start and duration) for a
  // timeline: OpReport::events and chromeTrace() (Note [Timelines]). Off by
  // default: it costs memory per call (about 48 bytes). On a device with
  // event timing (DeviceCapabilities::event_timing: CUDA, HIP, the
  // simulator) each call on it also makes and records two timed events on
  // the thread's current stream, for OpReport::device_events, kept until
  // the Profiler is destroyed.
  bool record_events = false;
};

// One call, when ProfilerOptions::record_events is set.
struct TraceEvent {
  std::string op;                                // "bp::add.Tensor"
  DispatchKey backend = DispatchKey::Undefined;  // the backend key whose kernel served it
  int thread = 0;                                // index into OpReport::threads
  std::chrono::nanoseconds start{0};             // since the Profiler started
  std::chrono::nanoseconds duration{0};          // including the ops it called
};

// The device work of one call on a stream, when record_events is set and the
// call's device has event timing: from when the device reached the call's
// first piece of work to when it finished its last, on the host's clock.
struct DeviceTraceEvent {
  std::string op;                                // "bp::add.Tensor"
  DispatchKey backend = DispatchKey::Undefined;  // the backend key whose kernel served it
  int stream = 0;                                // index into OpReport::streams
  std::chrono::nanoseconds start{0};             // since the Profiler started
  std::chrono::nanoseconds duration{0};          // including the ops it called
};

// One (operator, backend) row of an OpReport.
struct OpStats {
  std::string op;                                // "bp::add.Tensor"
  DispatchKey backend = DispatchKey::Undefined;  // the backend key whose kernel served the calls
  uint64_t calls = 0;
  // How the calls ran. They add up to `calls`, except calls of an op with no
  // kernel for the backend at all (those fail, and count in failed_calls).
  uint64_t native_calls = 0;            // a kernel registered for the backend
  uint64_t composite_calls = 0;         // a backend-agnostic decomposition into other ops
  uint64_t cpu_fallback_calls = 0;      // no kernel: inputs copied to the host, the CPU kernel ran
  uint64_t backend_fallback_calls = 0;  // a boxed fallback registered for the backend
  uint64_t failed_calls = 0;            // threw an error (also counted above)
  // Bytes the CPU fallback copied between the device and the host for these
  // calls, both directions.
  uint64_t fallback_bytes = 0;
  // Every byte these calls moved between the host and a device themselves
  // (not the ops they called), through any device's copy functions: the CPU
  // fallback's staging, copy_ and to() between devices, item() inside a
  // kernel, and a device with no strided copy kernel whose contiguous()
  // stages through the host (Note [Counting host<->device transfers] in
  // backplane/core/transfers.h). On a device that keeps its data, only the
  // explicit moves of an app's inputs and outputs show here.
  uint64_t transfer_bytes = 0;
  uint64_t transfer_copies = 0;            // the copy calls that moved them
  std::chrono::nanoseconds total_time{0};  // including the ops these calls made
  std::chrono::nanoseconds self_time{0};   // excluding them

  uint64_t fallbackCalls() const { return cpu_fallback_calls + backend_fallback_calls; }
  // How the calls ran, by kernelKindName(): "native", "cpu_fallback", or for
  // a mix "native 3, cpu_fallback 1".
  std::string how() const;
};

// What a Profiler recorded.
struct OpReport {
  std::vector<OpStats> ops;  // longest self time first
  // With ProfilerOptions::record_events: every call, by start time, and the
  // recording threads' names (the first thread to call an op is 0).
  std::vector<TraceEvent> events;
  std::vector<std::string> threads;
  // With record_events, on devices with event timing: the calls' device
  // work, by start time, and the streams it ran on ("gpusim:0 default
  // stream", "cuda:0 stream 1": numbered per device in the order the report
  // met them). report() waits for the device work of the calls it reports.
  std::vector<DeviceTraceEvent> device_events;
  std::vector<std::string> streams;
  // When the Profiler started, on the steady clock (since its epoch: on
  // Linux the boot, the same for every process of a machine, so that the
  // timelines of ranks on one machine line up).
  std::chrono::nanoseconds started_at{0};
  // From the Profiler's start until it was stopped (or until report() if it
  // is still running).
  std::chrono::nanoseconds wall_time{0};

  // The row of `op` ("bp::add.Tensor") on `backend`, or nullptr.
  const OpStats* find(std::string_view op, DispatchKey backend) const;
  // "6 ops ran (143 calls): 4 native, 1 composite, 1 fell back (20 calls,
  // 3.0 KiB copied); 1.21 ms in ops, 1.50 ms wall; host<->device: 3.0 KiB in
  // 40 copies". An op counts as fell back if any of its calls did, else as
  // composite if any was, else native. The host<->device part adds up every
  // row's transfer_bytes and transfer_copies.
  std::string summary() const;
  // Note [Timelines]
  // The events as a trace in the Chrome trace event format (a JSON object
  // with "traceEvents"), which Perfetto (ui.perfetto.dev) and
  // chrome://tracing open, as PyTorch's export_chrome_trace: one complete
  // ("X") event per call, in microseconds of the steady clock (started_at
  // plus the event's start), on one track per recording thread
  // (`tid`), in the process `pid` (a rank: one track group per rank when the
  // traces of several ranks are merged, chromeTraceEvents below), named
  // `process_name`. Nested calls sit under their callers. Each stream has a
  // track of its own after the threads' ("gpusim:0 stream 1"), with the
  // device work of each call that ran on it (`device_events`, category
  // "device"), so a kernel shows when the device ran it, not only when the
  // host issued it.
  //
  // How a stream's track is timed: the call's two timed events on its
  // stream (DeviceInterface::createTimedEvent, plugin ABI 1.12) give the
  // device's time. The first call on a device records an anchor event on a
  // stream of its own, idle, between two reads of the host's clock, so the
  // device's clock maps to the host's (the anchor's host time + the
  // device's time since it), as PyTorch's profiler with CUDA events did; a
  // device without streams is synchronized once for it instead. CUDA gives
  // the time since the anchor as a float of milliseconds: past about ten
  // minutes from the anchor, a start is placed to within tens of
  // microseconds (the duration stays exact to the event's resolution). A
  // stream is known by its handle: one destroyed and another made at the
  // same address share a track. The events stay until the Profiler is
  // destroyed (two per call on such a device), and report() waits for the
  // work they mark, with none of the profiler's locks held. A device
  // without event timing has no stream tracks: its work shows only as the
  // calls that issued or waited for it (set synchronize_device for calls
  // that include it).
  std::string chromeTrace(int pid = 0, const std::string& process_name = "backplane") const;
  // The same events as a comma-separated list of JSON objects, to merge
  // the traces of several processes into one {"traceEvents": [...]}.
  std::string chromeTraceEvents(int pid = 0, const std::string& process_name = "backplane") const;

  // A fixed-width table of every row (op, backend, calls, how, fallback
  // bytes, host<->device bytes and copies, self, self %, total), then the
  // summary line. For humans: parse
  // `ops` instead.
  std::string table() const;
};

// A byte count as the report prints it: "512 B", "1.5 KiB", "3.0 MiB", "1.2 GiB".
std::string formatBytes(uint64_t bytes);

// Records every op call from construction until stop() or destruction.
// Not copyable or movable: the recording belongs to this object.
class Profiler {
 public:
  // Starts recording. Throws Error (kFailedPrecondition) if another Profiler
  // is recording.
  explicit Profiler(ProfilerOptions options = {});
  // Stops recording.
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Stops recording; calls still running on other threads when it returns
  // are not recorded. Idempotent. The report stays available.
  void stop();
  bool recording() const;
  // A snapshot of what was recorded so far (while recording, calls finishing
  // on other threads may or may not be in it).
  OpReport report() const;

 private:
  std::shared_ptr<detail::ProfilerSession> session_;
};

}  // namespace backplane
