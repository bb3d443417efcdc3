// Streams and events from Python: backplane/runtime/stream.h's Stream and
// Event (Note [Streams in the application API]), named as torch.cuda's
// (Stream, Event, current_stream, default_stream, record_event, wait_event,
// wait_stream, query, synchronize, Event(enable_timing=True) and
// elapsed_time; `bp.stream(s)` and `bp.current_stream` are Python's,
// python/backplane/streams.py), and Graph (Note [Graphs in the application
// API]; torch.cuda.CUDAGraph). A device without streams (the CPU) raises
// UnimplementedError, naming the device.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "backplane/runtime/stream.h"
#include "bindings.h"

namespace backplane::python {
namespace {

std::string streamRepr(const Stream& s) {
  if (s.isDefault()) return "backplane.Stream(device='" + s.device().str() + "', default)";
  return "backplane.Stream(device='" + s.device().str() +
         "', handle=" + std::to_string(reinterpret_cast<uintptr_t>(s.handle())) + ")";
}

}  // namespace

void bindStreams(nb::module_& m) {
  nb::class_<Event>(m, "Event",
                    "A point in a stream's work (torch.cuda.Event): record() marks the current end of a "
                    "stream's work; wait() makes another stream wait for it without blocking the host; "
                    "synchronize() blocks the host; query() says whether it has completed.")
      .def(
          "__init__",
          [](Event* self, nb::handle device, bool enable_timing) {
            const Device d = deviceArg(device, "Event()");
            new (self) Event(enable_timing ? Event::timed(d) : Event(d));
          },
          nb::arg("device"), nb::kw_only(), nb::arg("enable_timing") = false,
          nb::sig("def __init__(self, device: str | Device, *, enable_timing: bool = False) -> None"),
          "An event of `device`. enable_timing=True: each record() also takes the time the device reaches it, "
          "for elapsed_time() (a device without event timing raises UnimplementedError).")
      .def_prop_ro("device", &Event::device)
      .def(
          "record",
          [](Event& e, const std::optional<Stream>& stream) {
            if (stream)
              e.record(*stream);
            else
              e.record();
          },
          nb::arg("stream").none() = nb::none(),
          "Marks the current end of `stream`'s work (None: this thread's current stream of the event's device).")
      .def(
          "wait",
          [](const Event& e, const std::optional<Stream>& stream) {
            if (stream)
              e.wait(*stream);
            else
              e.wait();
          },
          nb::arg("stream").none() = nb::none(),
          "Makes later work on `stream` (None: the current stream) wait for this event; the host does not block.")
      .def(
          "synchronize",
          [](const Event& e) {
            nb::gil_scoped_release unlocked;
            e.synchronize();
          },
          "Blocks until the event has completed (at once if it was never recorded).")
      .def("query", &Event::query, "Whether the event has completed, without blocking.")
      .def(
          "elapsed_time",
          [](const Event& start, const Event& end) {
            nb::gil_scoped_release unlocked;
            return start.elapsedMs(end);
          },
          nb::arg("end"),
          "Milliseconds of device time from this event to `end`: both made with enable_timing=True on one "
          "device, recorded and completed (synchronize `end` first; FailedPreconditionError otherwise).")
      .def("__repr__", [](const Event& e) { return "backplane.Event(device='" + e.device().str() + "')"; });

  nb::class_<Stream>(m, "Stream",
                     "A queue of work on one device (torch.cuda.Stream). Operators a thread calls on the device "
                     "go to its current stream: the default one unless `with bp.stream(s):` says otherwise. Work "
                     "on two streams runs in any order unless an Event orders it.")
      .def(
          "__init__",
          [](Stream* self, nb::handle device) { new (self) Stream(Stream::create(deviceArg(device, "Stream()"))); },
          nb::arg("device"), nb::sig("def __init__(self, device: str | Device) -> None"),
          "A new stream on `device`; a device without streams (cpu) raises UnimplementedError.")
      .def_prop_ro("device", &Stream::device)
      .def_prop_ro("is_default", &Stream::isDefault, "Whether this is the device's default stream.")
      .def(
          "synchronize",
          [](const Stream& s) {
            nb::gil_scoped_release unlocked;
            s.synchronize();
          },
          "Blocks until the work queued on this stream has finished.")
      .def(
          "record_event",
          [](const Stream& s, Event* event) -> nb::object {
            if (event == nullptr) return nb::cast(s.record());
            event->record(s);
            return nb::cast(event, nb::rv_policy::reference);
          },
          nb::arg("event").none() = nb::none(), "Records `event` (None: a new one) on this stream and returns it.")
      .def("wait_event", &Stream::wait, nb::arg("event"),
           "Makes later work on this stream wait for `event`; the host does not block.")
      .def(
          "wait_stream", [](const Stream& s, const Stream& other) { s.wait(other.record()); }, nb::arg("stream"),
          "Makes later work on this stream wait for the work queued on `stream` so far.")
      .def("__eq__",
           [](const Stream& a, nb::handle b) {
             const Stream* other = nb::isinstance<Stream>(b) ? nb::inst_ptr<Stream>(b) : nullptr;
             return other != nullptr && a == *other;
           })
      .def("__hash__",
           [](const Stream& s) {
             return std::hash<std::string>()(s.device().str()) ^ std::hash<const void*>()(s.handle());
           })
      .def("__repr__", &streamRepr);

  nb::class_<Graph>(m, "Graph",
                    "Work captured once from a stream and replayed with one launch (torch.cuda.CUDAGraph). "
                    "Graph.capture(stream, fn) runs fn() with `stream` current, recording the device work it "
                    "queues instead of running it; replay() queues that work again on the same stream, reading "
                    "and writing the same tensors: refill inputs in place (x.copy_(...)) and read the outputs "
                    "fn made. Numbers and 0-d CPU tensors fn passes are read at the capture. What a replay "
                    "cannot repeat (host reads, copies from the host, synchronizing, CPU fallbacks) raises "
                    "during the capture. Devices with graphs: Runtime capabilities(device).graphs.")
      .def_static(
          "capture",
          [](const Stream& stream, const std::function<void()>& fn, size_t pool_bytes) {
            return Graph::capture(stream, fn, GraphOptions{pool_bytes});
          },
          nb::arg("stream"), nb::arg("fn"), nb::kw_only(), nb::arg("pool_bytes") = GraphOptions{}.pool_bytes,
          "Captures the work fn() queues on `stream` (not the device's default stream: make one with "
          "Stream(device)). The memory fn allocates comes from a pool of pool_bytes kept for the graph. If fn "
          "raises, the capture is discarded and the exception propagates.")
      .def(
          "replay",
          [](const Graph& g) {
            nb::gil_scoped_release unlocked;
            g.replay();
          },
          "Queues the captured work again on its stream; the host does not wait (synchronize the stream, or "
          "read a result).")
      .def_prop_ro("stream", &Graph::stream)
      .def_prop_ro("device", &Graph::device)
      .def("__repr__", [](const Graph& g) { return "backplane.Graph(" + streamRepr(g.stream()) + ")"; });

  // bp.current_stream (python/backplane/streams.py) returns the Stream
  // object made current where it can: this one is the device's bare handle.
  m.def(
      "_current_stream", [](nb::handle device) { return Stream::current(deviceArg(device, "current_stream()")); },
      nb::arg("device"), nb::sig("def _current_stream(device: str | Device) -> Stream"),
      "This thread's current stream of `device`, as a view of the device's handle.");
  m.def(
      "default_stream", [](nb::handle device) { return Stream::defaultStream(deviceArg(device, "default_stream()")); },
      nb::arg("device"), nb::sig("def default_stream(device: str | Device) -> Stream"),
      "The default stream of `device`, where work goes when no other is current.");
  m.def("_set_current_stream", &Stream::setCurrent, nb::arg("stream"),
        "Makes `stream` this thread's current stream of its device; `with bp.stream(s):` restores the previous one.");
}

}  // namespace backplane::python
