// The profiler from Python: backplane::Profiler, OpReport and OpStats, which
// backplane/profiler.py wraps as the context manager `backplane.profile()`.
//
// The C++ semantics hold unchanged (backplane/runtime/profiler.h): every op call on
// any thread while a profiler records, one row per (op, backend), self and
// total time, at most one profiler recording in the process. Starting one,
// stopping it and taking a report take the profiler's locks (and
// synchronize_device waits for devices), so they run without the GIL: a
// Python thread calling ops meanwhile is never kept waiting on us, nor we on
// it.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backplane/dispatch/dispatch_key.h"
#include "backplane/runtime/profiler.h"
#include "bindings.h"

namespace backplane::python {
namespace {

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

std::string statsRepr(const OpStats& s) {
  return "backplane.OpStats(op='" + s.op + "', backend='" + dispatchKeyName(s.backend) +
         "', calls=" + std::to_string(s.calls) + ", how='" + s.how() +
         "', self_time_ns=" + std::to_string(s.self_time.count()) +
         ", total_time_ns=" + std::to_string(s.total_time.count()) + ")";
}

// The backend key a Python caller names: a dispatch key's name ("CPU") or a
// device type's ("cpu", "cuda").
DispatchKey backendFrom(const std::string& name) {
  std::optional<DispatchKey> key = parseDispatchKey(name);
  if (!key) {
    BP_THROW(kInvalidArgument, "no backend named '", name,
             "': name a dispatch key as the report shows it ('CPU', 'cuda') or a device type ('cpu')");
  }
  return *key;
}

}  // namespace

void bindProfiler(nb::module_& m) {
  nb::class_<OpStats>(m, "OpStats",
                      "One (operator, backend) row of a profile: how many calls, how they ran (native, composite, "
                      "CPU fallback, backend fallback), the bytes they moved and their time. Times are in seconds "
                      "(self_time, total_time) and in nanoseconds (self_time_ns, total_time_ns).")
      .def_ro("op", &OpStats::op, "The operator, 'bp::add.Tensor'.")
      .def_prop_ro(
          "backend", [](const OpStats& s) { return dispatchKeyName(s.backend); },
          "The backend whose kernel served the calls, as the report names it ('CPU', 'cuda').")
      .def_ro("calls", &OpStats::calls)
      .def_ro("native_calls", &OpStats::native_calls, "Calls served by a kernel registered for the backend.")
      .def_ro("composite_calls", &OpStats::composite_calls,
              "Calls served by a backend-agnostic decomposition into other ops.")
      .def_ro("cpu_fallback_calls", &OpStats::cpu_fallback_calls,
              "Calls with no kernel for the backend: inputs copied to the host, the CPU kernel ran.")
      .def_ro("backend_fallback_calls", &OpStats::backend_fallback_calls,
              "Calls served by a boxed fallback registered for the backend.")
      .def_prop_ro("fallback_calls", &OpStats::fallbackCalls, "cpu_fallback_calls + backend_fallback_calls.")
      .def_ro("failed_calls", &OpStats::failed_calls, "Calls that raised (also counted by how they ran).")
      .def_ro("fallback_bytes", &OpStats::fallback_bytes,
              "Bytes the CPU fallback copied between the device and the host for these calls.")
      .def_ro("transfer_bytes", &OpStats::transfer_bytes,
              "Bytes these calls themselves (not the ops they called) moved between the host and a device.")
      .def_ro("transfer_copies", &OpStats::transfer_copies, "The copies that moved transfer_bytes.")
      .def_prop_ro(
          "total_time", [](const OpStats& s) { return seconds(s.total_time); },
          "Seconds in these calls, including the ops they called.")
      .def_prop_ro(
          "self_time", [](const OpStats& s) { return seconds(s.self_time); },
          "Seconds in these calls, excluding the ops they called.")
      .def_prop_ro("total_time_ns", [](const OpStats& s) { return static_cast<int64_t>(s.total_time.count()); })
      .def_prop_ro("self_time_ns", [](const OpStats& s) { return static_cast<int64_t>(s.self_time.count()); })
      .def_prop_ro("how", &OpStats::how,
                   "How the calls ran: 'native', 'composite', 'cpu_fallback', 'backend_fallback', or a mix "
                   "('native 3, cpu_fallback 1'), with ' (N failed)' when some raised.")
      .def("__repr__", &statsRepr);

  nb::class_<OpReport>(m, "OpReport", "What a profile recorded: one OpStats row per (op, backend).")
      .def_prop_ro(
          "rows", [](const OpReport& r) { return r.ops; }, "The rows, longest self time first.")
      .def_prop_ro(
          "wall_time", [](const OpReport& r) { return seconds(r.wall_time); },
          "Seconds from the start until the stop (or until this report, if it was taken while recording).")
      .def_prop_ro("wall_time_ns", [](const OpReport& r) { return static_cast<int64_t>(r.wall_time.count()); })
      .def(
          "find",
          [](const OpReport& r, const std::string& op, const std::string& backend) -> std::optional<OpStats> {
            const OpStats* row = r.find(op, backendFrom(backend));
            return row ? std::optional<OpStats>(*row) : std::nullopt;
          },
          nb::arg("op"), nb::arg("backend") = "CPU",
          "The row of `op` ('bp::add.Tensor') on `backend` ('CPU', 'cuda' or a device type 'cpu'), or None.")
      .def(
          "chrome_trace",
          [](const OpReport& r, int pid, const std::string& process_name) { return r.chromeTrace(pid, process_name); },
          nb::arg("pid") = 0, nb::arg("process_name") = "backplane",
          "With record_events: the calls as a Chrome trace (JSON text; Perfetto and chrome://tracing open it): "
          "a track per thread and one per device stream, in process `pid`.")
      .def_prop_ro(
          "event_count", [](const OpReport& r) { return r.events.size(); },
          "With record_events: the calls kept for the timeline.")
      .def_prop_ro(
          "streams", [](const OpReport& r) { return r.streams; },
          "With record_events: the device streams with a track ('gpusim:0 default stream').")
      .def("summary", &OpReport::summary, "One line: ops, calls, how they ran, time in ops, wall time, transfers.")
      .def("table", &OpReport::table,
           "A fixed-width table of every row, then the summary line (for people; read `rows` in code).")
      .def("__str__", &OpReport::table)
      .def("__len__", [](const OpReport& r) { return r.ops.size(); });

  // backplane/profiler.py's profile owns one of these per recording.
  nb::class_<Profiler>(m, "_Profiler", "Records every op call from construction until stop() (backplane.profile).")
      .def(
          "__init__",
          [](Profiler* self, bool synchronize_device, bool record_events) {
            nb::gil_scoped_release release;
            new (self)
                Profiler(ProfilerOptions{.synchronize_device = synchronize_device, .record_events = record_events});
          },
          nb::arg("synchronize_device") = false, nb::arg("record_events") = false)
      .def("stop", &Profiler::stop, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("recording",
                   [](const Profiler& p) {
                     nb::gil_scoped_release release;
                     return p.recording();
                   })
      .def("report", &Profiler::report, nb::call_guard<nb::gil_scoped_release>());
}

}  // namespace backplane::python
