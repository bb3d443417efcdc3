#pragma once
// Streams and events for applications: overlap copies with compute, order
// work across queues, wait for a point in a queue. Over core's
// DeviceInterface, for devices whose plugin provides them (cuda, hip, the
// gpusim test device); the cpu and devices without them throw a clear
// Error (kUnimplemented).
//
//   backplane::Stream copies = backplane::Stream::create(dev);
//   backplane::Event ready(dev);
//   {
//     backplane::StreamGuard on(copies);   // work of this thread on dev goes to `copies`
//     x_next = batch.to(dev);
//     ready.record();                      // on `copies`, the current stream
//   }
//   y = model(x);                          // meanwhile, on the default stream
//   ready.wait();                          // the default stream waits for the copy...
//   y2 = model(x_next);                    // ...so this reads the copied batch
//
// Note [Streams in the application API]
// - Every operator a host thread calls on a device is queued on that
//   thread's current stream of the device: the default stream unless a
//   StreamGuard (or Stream::setCurrent) says otherwise. The current stream
//   is per host thread and device, as in CUDA.
// - Work on two streams runs in any order unless an Event orders it:
//   record() on the producing stream, wait() on the consuming one (the host
//   does not block). synchronize() blocks the host instead. Reading a result
//   on another stream without either is a race; the gpusim test device
//   makes such a race visible: its app streams defer their work until
//   something forces it, so the reader sees stale memory every time.
// - Memory: a tensor freed on one stream is not reused by work on another
//   before the work queued for it is done (the plugin's caching allocator
//   orders it). A tensor used on a third stream (neither the one current
//   when it was made nor the one current when it dies) must be kept alive
//   until that stream's work is waited for.
// - Copies to the host (t.cpu(), t.item()) wait for the current stream
//   only: wait for the producing stream's event first.
// - Streams and events belong to one device; using an event of one device
//   with a stream of another is an error naming both.

#include <cstddef>
#include <functional>
#include <memory>

#include "backplane/core/device.h"
#include "backplane/core/device_interface.h"

namespace backplane {

class Event;

// A queue of work on one device. Copyable: copies name the same queue; a
// stream made by create() is destroyed (after its queued work completes)
// when the last copy goes. Destroying a stream that is current on this
// thread makes the default stream current again; on another thread, that
// thread must have switched away first.
class Stream {
 public:
  // A new stream on `device`. Throws Error (kUnimplemented) for a device
  // without streams: "cpu has no streams; ...".
  static Stream create(Device device);
  // The device's default stream (where work goes when no other is current).
  static Stream defaultStream(Device device);
  // This thread's current stream of `device`: a view, valid while the
  // stream it names lives.
  static Stream current(Device device);
  // Makes `stream` this thread's current stream of its device. Prefer
  // StreamGuard, which restores the previous one.
  static void setCurrent(const Stream& stream);

  Device device() const;
  bool isDefault() const;
  // Blocks the host until the work queued on this stream has finished.
  void synchronize() const;
  // A new event recorded on this stream now.
  Event record() const;
  // Makes later work on this stream wait for `event` (the host does not block).
  void wait(const Event& event) const;

  // The device's handle (null for the default stream), for interop.
  DeviceInterface::StreamHandle handle() const;

  friend bool operator==(const Stream& a, const Stream& b) {
    return a.device() == b.device() && a.handle() == b.handle();
  }
  friend bool operator!=(const Stream& a, const Stream& b) { return !(a == b); }

 private:
  struct State;
  explicit Stream(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;  // never null
};

// A point in a stream's work. Move-only; destroyed with its last owner.
class Event {
 public:
  // A new event on `device`, not yet recorded (waiting for it, or
  // synchronizing it, returns at once). Throws Error (kUnimplemented) for a
  // device without events.
  explicit Event(Device device);
  // A new event that also takes the device's time when the device reaches
  // each record of it, for elapsedMs (torch.cuda.Event(enable_timing=True)).
  // Throws Error (kUnimplemented) for a device without event timing
  // (Runtime::capabilities(device).event_timing: CUDA, HIP, gpusim).
  static Event timed(Device device);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Device device() const { return device_; }
  // Marks the current end of `stream`'s work (default: this thread's
  // current stream of the event's device); the event completes when that
  // work has. A stream of another device is an error.
  void record(const Stream& stream);
  void record();
  // Makes later work on `stream` (default: the current stream) wait for
  // this event, without blocking the host.
  void wait(const Stream& stream) const;
  void wait() const;
  // Blocks the host until the event has completed.
  void synchronize() const;
  // Whether the event has completed, without blocking. Throws Error
  // (kUnimplemented) for a plugin that cannot tell (built before ABI 1.3).
  bool query() const;
  // The device's milliseconds from this event to `end` (negative when the
  // device reached `end` first), both made by timed() on one device,
  // recorded and complete (synchronize() `end` first): Error
  // kFailedPrecondition for one not yet complete or never recorded,
  // kInvalidArgument for one made without timing or on another device.
  double elapsedMs(const Event& end) const;

  DeviceInterface::EventHandle handle() const { return handle_; }

 private:
  Event(Device device, DeviceInterface::EventHandle handle, bool timed)
      : device_(device), handle_(handle), timed_(timed) {}
  Device device_;
  DeviceInterface::EventHandle handle_ = nullptr;
  bool timed_ = false;  // made by timed()
};

// Note [Graphs in the application API]
// Work that launches many small kernels (an encoder layer at a small batch)
// costs the host more than the device. A Graph captures what a stream is
// given once and replays it with one launch (torch.cuda.CUDAGraph):
//
//   backplane::Stream side = backplane::Stream::create(dev);
//   backplane::Graph layer = backplane::Graph::capture(side, [&] { y = model(x); });
//   for (...) {
//     x.copy_(next_batch);   // refill the capture's input in place
//     layer.replay();        // on `side`; y holds the new result once it is done
//     side.synchronize();
//   }
//
// - Capture runs `work` once with `stream` current on this thread, but the
//   device runs none of it: the kernels, device-to-device copies and fills
//   are recorded. Tensors made during the capture (y) hold no values until
//   the first replay.
// - Replays read and write the addresses the capture used: refill the input
//   tensors in place and read the outputs; keep both alive. Numbers and 0-d
//   CPU tensor operands are read at the capture: their values are part of
//   the graph.
// - The memory the captured work allocates comes from a pool of
//   GraphOptions::pool_bytes kept for the graph until it and every tensor
//   allocated from it are gone.
// - What a replay cannot repeat is refused during the capture, with an
//   Error that names it, and the capture still ends cleanly: reading device
//   memory on the host (t.cpu(), item(), an op with a data-dependent size
//   such as nonzero), copying from the host, synchronizing, events, an op
//   that falls back to the CPU (it copies through the host), an allocation
//   that outgrows the pool. One capture per device at a time.
// - Devices with graphs: CUDA, HIP and the gpusim test device
//   (Runtime::capabilities(device).graphs).
struct GraphOptions {
  // Bytes set aside for the memory the captured work allocates.
  size_t pool_bytes = size_t{256} << 20;
};

class Graph {
 public:
  // Captures the work `work` queues on `stream` (made this thread's current
  // stream of its device for the call). If `work` throws, the capture is
  // ended and discarded and the exception propagates. Throws Error
  // (kUnimplemented) for a device without graphs.
  static Graph capture(const Stream& stream, const std::function<void()>& work, GraphOptions options = {});
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Queues the captured work again, on the stream it was captured on (the
  // host does not wait: synchronize the stream, or read a result, to).
  void replay() const;
  const Stream& stream() const { return stream_; }
  Device device() const { return stream_.device(); }

 private:
  Graph(Stream stream, DeviceInterface::GraphHandle handle) : stream_(std::move(stream)), handle_(handle) {}
  Stream stream_;
  DeviceInterface::GraphHandle handle_ = nullptr;
};

// Makes `stream` this thread's current stream of its device for the guard's
// lifetime, then restores the stream that was current before, also when
// the scope is left by an exception. Guards nest; keep `stream` alive while
// the guard lives.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

  // The stream the guard set, and the one it restores.
  const Stream& current() const { return current_; }
  const Stream& previous() const { return previous_; }

 private:
  Stream current_;
  Stream previous_;
};

}  // namespace backplane
