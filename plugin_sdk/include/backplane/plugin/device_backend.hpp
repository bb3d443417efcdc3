// bp::DeviceBackend, the interface a plugin implements to add a device type
// (memory, copies, streams and events), and bp::HostMemoryBackend for a
// device whose memory is host memory. Part of <backplane/plugin.hpp>;
// compiles on its own.
#ifndef BACKPLANE_PLUGIN_DEVICE_BACKEND_HPP_
#define BACKPLANE_PLUGIN_DEVICE_BACKEND_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin_api.h"

namespace bp {

// Implement this to add a device type in C++; register it with
// Library::registerDevice. The host calls these from any thread, so an
// implementation must be thread-safe. Exceptions become host errors (or are
// logged where the C slot has no error return). The object must outlive the
// plugin (a static is simplest).
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // Number of devices of this type present now (0 if none).
  virtual int deviceCount() = 0;
  // Why deviceCount() is 0 ("no driver"); nullptr when devices exist. The
  // string must live as long as the plugin.
  virtual const char* unavailableReason() { return nullptr; }
  // True if the host may dereference this device's memory. Read once, at
  // registration.
  virtual bool hostAccessible() { return false; }
  // The DLPack DLDeviceType whose consumers can use this device's addresses
  // as they are (kDLCUDA = 2 for CUDA memory, kDLROCM = 10 for HIP), so that
  // tensors move to and from PyTorch, CuPy or NumPy without a copy; 0 when
  // the addresses mean nothing outside this plugin. Read once, at
  // registration. ABI 1.2.
  virtual int32_t dlpackDeviceType() { return 0; }
  // `nbytes` bytes on `device`; never called for 0 bytes (the SDK answers
  // NULL). Return nullptr or throw when out of memory.
  virtual void* allocate(int device, size_t nbytes) = 0;
  // Frees what allocate returned; never called with nullptr.
  virtual void deallocate(int device, void* p) = 0;
  // Copies and fills; never called with n == 0.
  virtual void copyHostToDevice(int device, void* dst, const void* src, size_t n) = 0;
  virtual void copyDeviceToHost(int device, void* dst, const void* src, size_t n) = 0;
  virtual void copyDeviceToDevice(int dst_device, void* dst, int src_device, const void* src, size_t n) = 0;
  virtual void memset(int device, void* dst, uint8_t value, size_t n) = 0;
  // Waits for all work queued on `device`. Default: nothing to wait for.
  virtual void synchronize(int device) { (void)device; }
  // Streams and events (optional). Read once at registration: when
  // hasStreams() is true, registerDevice fills the stream slots and the host
  // calls the stream functions below; likewise hasEvents() for the event
  // functions. The handles are the plugin's own (check what the host passes
  // back). A null BP_Stream* is the device's default stream. The current
  // stream is per host thread and device: every kernel and copy this
  // backend queues for a thread goes to that thread's current stream.
  virtual bool hasStreams() { return false; }
  virtual BP_Stream* createStream(int device) { return noStreams<BP_Stream*>(device, "createStream"); }
  // Destroys a stream from createStream; its queued work still completes.
  virtual void destroyStream(int device, BP_Stream* stream) {
    (void)stream;
    noStreams<void>(device, "destroyStream");
  }
  // Returns when the work queued on `stream` has finished.
  virtual void synchronizeStream(int device, BP_Stream* stream) {
    (void)stream;
    noStreams<void>(device, "synchronizeStream");
  }
  // The calling thread's current stream of `device` (nullptr: the default).
  virtual BP_Stream* currentStream(int device) { return noStreams<BP_Stream*>(device, "currentStream"); }
  virtual void setCurrentStream(int device, BP_Stream* stream) {
    (void)stream;
    noStreams<void>(device, "setCurrentStream");
  }
  virtual bool hasEvents() { return false; }
  virtual BP_Event* createEvent(int device) { return noStreams<BP_Event*>(device, "createEvent"); }
  virtual void destroyEvent(int device, BP_Event* event) {
    (void)event;
    noStreams<void>(device, "destroyEvent");
  }
  // Marks the point in `stream` that `event` completes at.
  virtual void recordEvent(int device, BP_Event* event, BP_Stream* stream) {
    (void)event, (void)stream;
    noStreams<void>(device, "recordEvent");
  }
  // Makes later work on `stream` wait for `event`; must not block the host.
  virtual void waitEvent(int device, BP_Event* event, BP_Stream* stream) {
    (void)event, (void)stream;
    noStreams<void>(device, "waitEvent");
  }
  // Returns when `event` has completed.
  virtual void synchronizeEvent(int device, BP_Event* event) {
    (void)event;
    noStreams<void>(device, "synchronizeEvent");
  }
  // Whether `event` has completed, without blocking. ABI 1.3.
  virtual bool queryEvent(int device, BP_Event* event) {
    (void)event;
    return noStreams<bool>(device, "queryEvent");
  }
  // Whether waitEventOnDevice works (ABI 1.8; the host then offers the
  // event_wait_device capability).
  virtual bool hasEventWaitDevice() { return false; }
  // Makes later work on `stream` of `stream_device` wait for `event`, made
  // on `event_device` (another device of this type); must not block the host.
  virtual void waitEventOnDevice(int event_device, BP_Event* event, int stream_device, BP_Stream* stream) {
    (void)event, (void)stream_device, (void)stream;
    noStreams<void>(event_device, "waitEventOnDevice");
  }
  // Whether createTimedEvent and eventElapsedMs work (ABI 1.12; the host
  // then offers the event_timing capability, and the profiler draws a
  // timeline track per stream). Read once, at registration.
  virtual bool hasEventTiming() { return false; }
  // An event like createEvent's (destroyed with destroyEvent) that also
  // takes the time at which the device reaches each record of it.
  virtual BP_Event* createTimedEvent(int device) { return noTiming<BP_Event*>(device, "createTimedEvent"); }
  // The device's milliseconds from `start` to `end`, both from
  // createTimedEvent, recorded and complete (fail with
  // BP_FAILED_PRECONDITION for one not yet complete).
  virtual double eventElapsedMs(int device, BP_Event* start, BP_Event* end) {
    (void)start, (void)end;
    return noTiming<double>(device, "eventElapsedMs");
  }
  // Whether the four graph functions below work (ABI 1.13, Note [Graphs] in
  // plugin_api.h; the host then offers the graphs capability). Read once,
  // at registration; needs hasStreams().
  virtual bool hasGraphs() { return false; }
  // Starts capturing the work this thread queues on `stream`, its
  // allocations served from a pool of `pool_bytes` kept for the graph.
  virtual void beginGraphCapture(int device, BP_Stream* stream, size_t pool_bytes) {
    (void)stream, (void)pool_bytes;
    noGraphs<void>(device, "beginGraphCapture");
  }
  // Stops the capture on `stream` and returns the graph.
  virtual BP_Graph* endGraphCapture(int device, BP_Stream* stream) {
    (void)stream;
    return noGraphs<BP_Graph*>(device, "endGraphCapture");
  }
  // Queues the graph's work on `stream`.
  virtual void replayGraph(int device, BP_Graph* graph, BP_Stream* stream) {
    (void)graph, (void)stream;
    noGraphs<void>(device, "replayGraph");
  }
  // Releases the graph (its pool once no tensor allocated from it is left).
  virtual void destroyGraph(int device, BP_Graph* graph) {
    (void)graph;
    noGraphs<void>(device, "destroyGraph");
  }

  // Fills `out` (zeroed, struct_size set; write only the fields). Default:
  // name = the device type's name.
  virtual void properties(int device, BP_DeviceProperties& out) {
    (void)device;
    const size_t n = type_name_.size() < sizeof(out.name) - 1 ? type_name_.size() : sizeof(out.name) - 1;
    std::memcpy(out.name, type_name_.data(), n);
    out.name[n] = '\0';
  }

  // The name and number this backend was registered under ("" / -1 before).
  const std::string& typeName() const noexcept { return type_name_; }
  int32_t deviceType() const noexcept { return device_type_; }

 private:
  friend class Library;
  template <class R>
  R noStreams(int device, const char* what) {
    fail(BP_UNIMPLEMENTED, detail::concat(what, ": ", type_name_, ":", device, " has no streams or events"));
  }
  template <class R>
  R noGraphs(int device, const char* what) {
    fail(BP_UNIMPLEMENTED, detail::concat(what, ": ", type_name_, ":", device, " cannot capture graphs"));
  }
  template <class R>
  R noTiming(int device, const char* what) {
    fail(BP_UNIMPLEMENTED, detail::concat(what, ": ", type_name_, ":", device, " has no event timing"));
  }
  std::string type_name_;
  int32_t device_type_ = -1;
};

// A DeviceBackend whose memory is host memory (hostAccessible() is true):
// allocate is aligned operator new (64 bytes; nullptr when out of memory),
// the copies are memmove and memset is memset. A subclass overrides
// deviceCount() and whatever else it needs (properties, synchronize). Its
// kernels may read tensors with data_ptr<T>() and bp::forEach. For a real
// device whose memory the host cannot read, derive from DeviceBackend.
class HostMemoryBackend : public DeviceBackend {
 public:
  static constexpr size_t kAlignment = 64;

  bool hostAccessible() override { return true; }
  void* allocate(int, size_t nbytes) override {
    return ::operator new (nbytes, std::align_val_t{kAlignment}, std::nothrow);
  }
  void deallocate(int, void* p) override { ::operator delete (p, std::align_val_t{kAlignment}); }
  void copyHostToDevice(int, void* dst, const void* src, size_t n) override { std::memmove(dst, src, n); }
  void copyDeviceToHost(int, void* dst, const void* src, size_t n) override { std::memmove(dst, src, n); }
  void copyDeviceToDevice(int, void* dst, int, const void* src, size_t n) override { std::memmove(dst, src, n); }
  void memset(int, void* dst, uint8_t value, size_t n) override { std::memset(dst, value, n); }
};

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DEVICE_BACKEND_HPP_
