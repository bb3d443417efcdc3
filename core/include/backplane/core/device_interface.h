#pragma once
// DeviceInterface: what the host needs from a device type to hold tensors on
// it: an allocator and functions that move bytes. Registered per device type
// in the DeviceTypeRegistry.
//
// Note [The host never dereferences device memory]
// Addresses of a device whose isHostAccessible() is false are opaque to the
// host: the host may add byte offsets to them (as integers) and hand them
// back to this interface, nothing more. Every byte moves through the copy
// functions below. The in-tree test device returns non-canonical addresses so
// that any host dereference crashes at once.

#include <cstddef>
#include <cstdint>
#include <string>

#include "backplane/core/allocator.h"
#include "backplane/core/device.h"
#include "backplane/core/error.h"

namespace backplane {

// What a device says about itself; zero/empty fields are unknown.
struct DeviceProperties {
  std::string name;                          // "NVIDIA H100 80GB HBM3"; at least the device type's name
  uint64_t total_memory = 0;                 // bytes
  int compute_major = 0, compute_minor = 0;  // vendor-defined capability
  int multiprocessor_count = 0;              // SMs, compute units, or hardware threads
};

// What a device type can do beyond holding memory, as an application asks
// it (Runtime::capabilities, DeviceInfo::capabilities): which groups of
// DeviceInterface functions work, and which optional ones within them.
struct DeviceCapabilities {
  bool streams = false;            // createStream, destroyStream, synchronizeStream
  bool current_stream = false;     // currentStream, setCurrentStream
  bool events = false;             // createEvent, destroyEvent, recordEvent, synchronizeEvent
  bool event_wait = false;         // waitEvent: a stream waits for an event, the host does not block
  bool event_query = false;        // queryEvent: completion without blocking
  bool event_wait_device = false;  // waitEventOnDevice: an event orders another device's stream (ABI 1.8)
  bool event_timing = false;       // createTimedEvent, eventElapsedMs: the device's time (ABI 1.12)
  bool graphs = false;             // beginGraphCapture, endGraphCapture, replayGraph, destroyGraph (ABI 1.13)
  bool host_accessible = false;    // the host may dereference its memory
  bool dlpack = false;             // tensors cross DLPack without a copy (dlpackDeviceType() != 0)
  // "streams, current_stream, events, ..." (the true ones, in this order),
  // or "none".
  std::string str() const;
};

class DeviceInterface {
 public:
  virtual ~DeviceInterface() = default;

  // What this device type can do. The default derives it from hasStreams(),
  // hasEvents(), isHostAccessible() and dlpackDeviceType(), taking every
  // function of a group that exists to work; a device whose optional
  // functions may be missing (a plugin's) overrides it.
  virtual DeviceCapabilities capabilities() const;

  // Devices of this type present now (0 when the driver or hardware is
  // missing; unavailableReason() then says why).
  virtual int deviceCount() const = 0;
  virtual std::string unavailableReason() const { return {}; }
  // True when the host may read and write this device's memory directly.
  virtual bool isHostAccessible() const { return false; }
  // The DLPack device type (a DLDeviceType of dlpack.h: kDLCUDA = 2,
  // kDLROCM = 10, ...) whose consumers can use this device's addresses as
  // they are, or 0 when the addresses mean nothing outside Backplane. DLPack
  // export and import (backplane/runtime/dlpack.h) of a non-cpu device's tensors
  // work only when it names one.
  virtual int32_t dlpackDeviceType() const { return 0; }
  virtual Allocator& allocator() = 0;

  // Byte copies. `dst`/`src` device addresses may carry an offset into an
  // allocation. Copies are complete when the call returns (a device with
  // streams synchronises its current stream as needed). Errors throw Error.
  virtual void copyHostToDevice(void* dst, Device dst_device, const void* src, size_t nbytes) = 0;
  virtual void copyDeviceToHost(void* dst, const void* src, Device src_device, size_t nbytes) = 0;
  virtual void copyDeviceToDevice(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) = 0;
  virtual void memset(void* dst, Device device, uint8_t value, size_t nbytes) = 0;
  virtual void synchronize(Device device) = 0;

  // What `device` says about itself. The default knows only the type's name.
  virtual DeviceProperties properties(Device device) const {
    DeviceProperties p;
    p.name = deviceTypeName(device.type);
    return p;
  }

  // Streams and events, as opaque handles owned by the device: destroy every
  // handle you create (with the matching destroy function, on the same
  // device) and use none after destroying it. A null StreamHandle is the
  // device's default stream. Devices without them (hasStreams()/hasEvents()
  // false) throw Error(kUnimplemented) from every function of the group.
  using StreamHandle = void*;
  using EventHandle = void*;
  using GraphHandle = void*;

  // Whether createStream, destroyStream and synchronizeStream work.
  virtual bool hasStreams() const { return false; }
  // A new stream on `device`.
  virtual StreamHandle createStream(Device device) { noStreams(device, "createStream"); }
  // Destroys a stream made by createStream.
  virtual void destroyStream(Device device, StreamHandle) { noStreams(device, "destroyStream"); }
  // Returns when all work queued on the stream has finished.
  virtual void synchronizeStream(Device device, StreamHandle) { noStreams(device, "synchronizeStream"); }
  // The stream work on `device` goes to now (borrowed: do not destroy it).
  virtual StreamHandle currentStream(Device device) { noStreams(device, "currentStream"); }
  // Makes `stream` (still owned by its creator) the current one on `device`.
  virtual void setCurrentStream(Device device, StreamHandle) { noStreams(device, "setCurrentStream"); }

  // Whether createEvent, destroyEvent, recordEvent and synchronizeEvent work.
  virtual bool hasEvents() const { return false; }
  // A new event on `device`.
  virtual EventHandle createEvent(Device device) { noEvents(device, "createEvent"); }
  // Destroys an event made by createEvent.
  virtual void destroyEvent(Device device, EventHandle) { noEvents(device, "destroyEvent"); }
  // Marks the point in `stream` that the event completes at.
  virtual void recordEvent(Device device, EventHandle, StreamHandle) { noEvents(device, "recordEvent"); }
  // Makes later work on `stream` wait for the event (the host does not block).
  virtual void waitEvent(Device device, EventHandle, StreamHandle) { noEvents(device, "waitEvent"); }
  // Returns when the event has completed.
  virtual void synchronizeEvent(Device device, EventHandle) { noEvents(device, "synchronizeEvent"); }
  // Whether the event has completed (all work before its last record has
  // finished, or it was never recorded), without blocking. Optional within
  // the group: a device that cannot tell throws kUnimplemented.
  virtual bool queryEvent(Device device, EventHandle) { noEvents(device, "queryEvent"); }
  // Makes later work on `stream` of `stream_device` wait for `event`, made on
  // `event_device` of the same type, without blocking the host. The default
  // serves one device (waitEvent); across devices it throws kUnimplemented,
  // unless the type can (capabilities().event_wait_device).
  virtual void waitEventOnDevice(Device event_device, EventHandle event, Device stream_device, StreamHandle stream);
  // An event like createEvent's (destroyed with destroyEvent) that also takes
  // the device's time when the device reaches each record of it
  // (capabilities().event_timing; kUnimplemented otherwise).
  virtual EventHandle createTimedEvent(Device device) { noEventTiming(device, "createTimedEvent"); }
  // The device's milliseconds from `start` to `end`, both from
  // createTimedEvent, recorded and complete (synchronizeEvent first);
  // negative when the device reached `end` first.
  virtual double eventElapsedMs(Device device, EventHandle start, EventHandle end) {
    (void)start, (void)end;
    noEventTiming(device, "eventElapsedMs");
  }

  // Graphs (capabilities().graphs; kUnimplemented otherwise; Note [Graphs]
  // in plugin_api.h): the work this thread queues on `stream` from
  // beginGraphCapture to endGraphCapture is captured, not run, with the
  // memory it allocates from a pool of `pool_bytes`; replayGraph queues it
  // again on `stream`; destroyGraph releases the graph.
  virtual void beginGraphCapture(Device device, StreamHandle stream, size_t pool_bytes) {
    (void)stream, (void)pool_bytes;
    noGraphs(device, "beginGraphCapture");
  }
  virtual GraphHandle endGraphCapture(Device device, StreamHandle stream) {
    (void)stream;
    noGraphs(device, "endGraphCapture");
  }
  virtual void replayGraph(Device device, GraphHandle graph, StreamHandle stream) {
    (void)graph, (void)stream;
    noGraphs(device, "replayGraph");
  }
  virtual void destroyGraph(Device device, GraphHandle graph) {
    (void)graph;
    noGraphs(device, "destroyGraph");
  }

 protected:
  [[noreturn]] static void noStreams(Device device, const char* what) {
    BP_THROW(kUnimplemented, what, ": device type '", deviceTypeName(device.type), "' has no streams");
  }
  [[noreturn]] static void noEventTiming(Device device, const char* what) {
    BP_THROW(kUnimplemented, what, ": device type '", deviceTypeName(device.type), "' has no event timing");
  }
  [[noreturn]] static void noGraphs(Device device, const char* what) {
    BP_THROW(kUnimplemented, what, ": device type '", deviceTypeName(device.type),
             "' cannot capture graphs (CUDA, HIP and gpusim can)");
  }
  [[noreturn]] static void noEvents(Device device, const char* what) {
    BP_THROW(kUnimplemented, what, ": device type '", deviceTypeName(device.type), "' has no events");
  }
};

// Copies `nbytes` between any two devices (either may be the host), picking
// the right interface function; between two different non-host device types
// the bytes go through a host buffer.
void copyBytesBetweenDevices(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace backplane
