// Streams and events for applications (backplane/runtime/stream.h) over core's
// DeviceInterface.
#include "backplane/runtime/stream.h"

#include <string>
#include <utility>
#include <vector>

#include "backplane/core/device_type_registry.h"
#include "backplane/core/error.h"

namespace backplane {

namespace {

// The present devices that have streams (or events), for error messages:
// "gpusim:0, cuda:0", or a sentence when there are none.
std::string devicesWith(bool (DeviceInterface::*has)() const) {
  const DeviceTypeRegistry& reg = DeviceTypeRegistry::global();
  std::string out;
  for (const Device& d : reg.presentDevices()) {
    DeviceInterface* i = reg.interface(d.type);
    if (i == nullptr || !(i->*has)()) continue;
    out += strCat(out.empty() ? "" : ", ", d.str());
  }
  return out.empty() ? std::string("no device present has them (their plugins provide them: cuda, hip)") : out;
}

// The interface of `device`, which must have streams; `what` names the call.
DeviceInterface& withStreams(Device device, const char* what) {
  DeviceInterface& i = DeviceTypeRegistry::global().interfaceOrThrow(device.type);
  if (!i.hasStreams()) {
    BP_THROW(kUnimplemented, what, ": ", deviceTypeName(device.type),
             " has no streams; streams are for devices whose plugin provides them (",
             devicesWith(&DeviceInterface::hasStreams), "). On ", device.str(),
             " work runs in call order: skip the streams there");
  }
  return i;
}

DeviceInterface& withEvents(Device device, const char* what) {
  DeviceInterface& i = DeviceTypeRegistry::global().interfaceOrThrow(device.type);
  if (!i.hasEvents()) {
    BP_THROW(kUnimplemented, what, ": ", deviceTypeName(device.type),
             " has no events; events are for devices whose plugin provides them (",
             devicesWith(&DeviceInterface::hasEvents), "). On ", device.str(),
             " work runs in call order: skip the events there");
  }
  return i;
}

void sameDevice(const char* what, Device event_device, Device stream_device) {
  if (event_device == stream_device) return;
  BP_THROW(kInvalidArgument, what, ": the event is on ", event_device.str(), " but the stream on ", stream_device.str(),
           "; streams and events belong to one device: use an Event made on ", stream_device.str());
}

}  // namespace

// ------------------------------------------------------------------ Stream

// One stream: owned (made by create(), destroyed with the last Stream that
// names it) or a view (the default stream, or current()'s answer).
struct Stream::State {
  Device device;
  DeviceInterface::StreamHandle handle = nullptr;
  bool owned = false;

  ~State() {
    if (!owned) return;
    try {
      DeviceTypeRegistry::global().interfaceOrThrow(device.type).destroyStream(device, handle);
    } catch (const std::exception&) {
      // A destructor cannot report; the plugin has logged its error. The
      // handle is not used again.
    }
  }
};

Stream Stream::create(Device device) {
  device = device.resolved();
  DeviceInterface& i = withStreams(device, "Stream::create");
  auto state = std::make_shared<State>();
  state->device = device;
  state->handle = i.createStream(device);
  state->owned = true;
  return Stream(std::move(state));
}

Stream Stream::defaultStream(Device device) {
  device = device.resolved();
  (void)withStreams(device, "Stream::defaultStream");
  auto state = std::make_shared<State>();
  state->device = device;
  return Stream(std::move(state));
}

Stream Stream::current(Device device) {
  device = device.resolved();
  DeviceInterface& i = withStreams(device, "Stream::current");
  auto state = std::make_shared<State>();
  state->device = device;
  state->handle = i.currentStream(device);
  return Stream(std::move(state));
}

void Stream::setCurrent(const Stream& stream) {
  withStreams(stream.device(), "Stream::setCurrent").setCurrentStream(stream.device(), stream.handle());
}

Device Stream::device() const { return state_->device; }
bool Stream::isDefault() const { return state_->handle == nullptr; }
DeviceInterface::StreamHandle Stream::handle() const { return state_->handle; }

void Stream::synchronize() const { withStreams(device(), "Stream::synchronize").synchronizeStream(device(), handle()); }

Event Stream::record() const {
  Event e(device());
  e.record(*this);
  return e;
}

void Stream::wait(const Event& event) const { event.wait(*this); }

// ------------------------------------------------------------------- Event

Event::Event(Device device) : device_(device.resolved()) {
  handle_ = withEvents(device_, "Event").createEvent(device_);
}

Event Event::timed(Device device) {
  const Device d = device.resolved();
  return Event(d, withEvents(d, "Event::timed").createTimedEvent(d), true);
}

Event::~Event() {
  if (handle_ == nullptr) return;
  try {
    DeviceTypeRegistry::global().interfaceOrThrow(device_.type).destroyEvent(device_, handle_);
  } catch (const std::exception&) {
    // As Stream::State: nothing to report to from a destructor.
  }
}

Event::Event(Event&& other) noexcept
    : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)), timed_(other.timed_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Event old(std::move(*this));  // destroys ours
    device_ = other.device_;
    handle_ = std::exchange(other.handle_, nullptr);
    timed_ = other.timed_;
  }
  return *this;
}

namespace {
void requireLive(const Event& e, const char* what) {
  if (e.handle() == nullptr) BP_THROW(kFailedPrecondition, what, ": the event was moved from");
}
}  // namespace

void Event::record(const Stream& stream) {
  requireLive(*this, "Event::record");
  sameDevice("Event::record", device_, stream.device());
  withEvents(device_, "Event::record").recordEvent(device_, handle_, stream.handle());
}

void Event::record() { record(Stream::current(device_)); }

void Event::wait(const Stream& stream) const {
  requireLive(*this, "Event::wait");
  // A stream of another type is an error; of another device of the type,
  // the type orders it if it can (event_wait_device), else the error says
  // to synchronize instead.
  if (stream.device().type != device_.type) sameDevice("Event::wait", device_, stream.device());
  withEvents(device_, "Event::wait").waitEventOnDevice(device_, handle_, stream.device(), stream.handle());
}

void Event::wait() const { wait(Stream::current(device_)); }

void Event::synchronize() const {
  requireLive(*this, "Event::synchronize");
  withEvents(device_, "Event::synchronize").synchronizeEvent(device_, handle_);
}

bool Event::query() const {
  requireLive(*this, "Event::query");
  return withEvents(device_, "Event::query").queryEvent(device_, handle_);
}

double Event::elapsedMs(const Event& end) const {
  requireLive(*this, "Event::elapsedMs");
  requireLive(end, "Event::elapsedMs");
  if (!(device_ == end.device_)) {
    BP_THROW(kInvalidArgument, "Event::elapsedMs: the start event is on ", device_.str(), " but the end event on ",
             end.device_.str(), "; time two events of one device");
  }
  if (!timed_ || !end.timed_) {
    BP_THROW(kInvalidArgument, "Event::elapsedMs: the ", timed_ ? "end" : "start",
             " event was made without timing; make both with Event::timed (enable_timing=True in Python)");
  }
  return withEvents(device_, "Event::elapsedMs").eventElapsedMs(device_, handle_, end.handle_);
}

// ------------------------------------------------------------------- Graph

namespace {

DeviceInterface& withGraphs(Device device, const char* what) {
  DeviceInterface& i = withStreams(device, what);
  if (!i.capabilities().graphs) {
    BP_THROW(kUnimplemented, what, ": ", deviceTypeName(device.type),
             " cannot capture graphs (CUDA, HIP and gpusim can); run the work directly there");
  }
  return i;
}

}  // namespace

Graph Graph::capture(const Stream& stream, const std::function<void()>& work, GraphOptions options) {
  const Device d = stream.device();
  DeviceInterface& iface = withGraphs(d, "Graph::capture");
  iface.beginGraphCapture(d, stream.handle(), options.pool_bytes);
  DeviceInterface::GraphHandle handle = nullptr;
  try {
    StreamGuard on(stream);
    work();
  } catch (...) {
    // End the capture so the device can capture again, and drop its graph.
    try {
      iface.destroyGraph(d, iface.endGraphCapture(d, stream.handle()));
    } catch (const std::exception&) {
      // The error that ended `work` is the one to report.
    }
    throw;
  }
  handle = iface.endGraphCapture(d, stream.handle());
  return Graph(stream, handle);
}

Graph::~Graph() {
  if (handle_ == nullptr) return;
  try {
    DeviceTypeRegistry::global().interfaceOrThrow(device().type).destroyGraph(device(), handle_);
  } catch (const std::exception&) {
    // As Event: nothing to report to from a destructor.
  }
}

Graph::Graph(Graph&& other) noexcept : stream_(other.stream_), handle_(other.handle_) { other.handle_ = nullptr; }

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  std::swap(stream_, other.stream_);
  std::swap(handle_, other.handle_);
  return *this;
}

void Graph::replay() const {
  BP_CHECK(handle_ != nullptr, "Graph::replay: this graph was moved from");
  withGraphs(device(), "Graph::replay").replayGraph(device(), handle_, stream_.handle());
}

// ------------------------------------------------------------- StreamGuard

StreamGuard::StreamGuard(const Stream& stream) : current_(stream), previous_(Stream::current(stream.device())) {
  Stream::setCurrent(current_);
}

StreamGuard::~StreamGuard() {
  try {
    Stream::setCurrent(previous_);
  } catch (const std::exception&) {
    // The previous stream was destroyed while the guard lived (a misuse the
    // header warns of); the device keeps its current stream.
  }
}

}  // namespace backplane
