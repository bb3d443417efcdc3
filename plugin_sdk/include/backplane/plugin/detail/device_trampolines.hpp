// bp::detail::DeviceTrampolines: the C functions of a BP_DeviceTypeDesc that
// Library::registerDevice fills, each calling into a DeviceBackend and
// turning its exceptions into host errors or log lines.
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_DEVICE_TRAMPOLINES_HPP_
#define BACKPLANE_PLUGIN_DETAIL_DEVICE_TRAMPOLINES_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backplane/plugin/detail/concat.hpp"
#include "backplane/plugin/detail/host_table.hpp"
#include "backplane/plugin/device_backend.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin_api.h"

namespace bp {
namespace detail {

// C trampolines from BP_DeviceTypeDesc into a DeviceBackend (ctx).
struct DeviceTrampolines {
  static DeviceBackend& b(void* ctx) noexcept { return *static_cast<DeviceBackend*>(ctx); }

  static int32_t deviceCount(void* ctx) noexcept {
    try {
      const int n = b(ctx).deviceCount();
      return n < 0 ? 0 : static_cast<int32_t>(n);
    } catch (...) {
      logCurrentException("DeviceBackend::deviceCount");
      return 0;
    }
  }
  static const char* unavailableReason(void* ctx) noexcept {
    try {
      return b(ctx).unavailableReason();
    } catch (...) {
      logCurrentException("DeviceBackend::unavailableReason");
      return "DeviceBackend::unavailableReason threw an exception";
    }
  }
  static BP_Error* getProperties(void* ctx, int32_t device, BP_DeviceProperties* out) noexcept {
    try {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "get_properties: NULL out");
      BP_DeviceProperties p;
      std::memset(&p, 0, sizeof p);
      constexpr size_t kSize = BP_DeviceProperties_STRUCT_SIZE;
      p.struct_size = kSize;
      b(ctx).properties(device, p);
      p.name[sizeof(p.name) - 1] = '\0';
      // Write no more than the caller's buffer (its struct_size; a caller
      // that left it 0 gets the 1.0 layout), never past the fields this
      // header knows (not our tail padding), and keep its struct_size.
      const size_t cap = out->struct_size == 0 || out->struct_size > kSize ? kSize : out->struct_size;
      const size_t keep = out->struct_size == 0 ? kSize : out->struct_size;
      std::memcpy(out, &p, cap);
      out->struct_size = keep;
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* allocate(void* ctx, int32_t device, size_t nbytes, void** out) noexcept {
    try {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "allocate: NULL out");
      *out = nullptr;
      if (nbytes == 0) return nullptr;
      void* p = b(ctx).allocate(device, nbytes);
      if (p == nullptr) {
        fail(BP_RESOURCE_EXHAUSTED,
             concat("out of memory on ", b(ctx).typeName(), ":", device, " allocating ", nbytes, " bytes"));
      }
      *out = p;
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static void deallocate(void* ctx, int32_t device, void* p) noexcept {
    if (p == nullptr) return;
    try {
      b(ctx).deallocate(device, p);
    } catch (...) {
      logCurrentException("DeviceBackend::deallocate");
    }
  }
  static BP_Error* copyHostToDevice(void* ctx, int32_t device, void* dst, const void* src, size_t n) noexcept {
    if (n == 0) return nullptr;
    try {
      b(ctx).copyHostToDevice(device, dst, src, n);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* copyDeviceToHost(void* ctx, int32_t device, void* dst, const void* src, size_t n) noexcept {
    if (n == 0) return nullptr;
    try {
      b(ctx).copyDeviceToHost(device, dst, src, n);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* copyDeviceToDevice(void* ctx, int32_t dst_device, void* dst, int32_t src_device, const void* src,
                                      size_t n) noexcept {
    if (n == 0) return nullptr;
    try {
      b(ctx).copyDeviceToDevice(dst_device, dst, src_device, src, n);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* memset(void* ctx, int32_t device, void* dst, uint8_t value, size_t n) noexcept {
    if (n == 0) return nullptr;
    try {
      b(ctx).memset(device, dst, value, n);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* synchronize(void* ctx, int32_t device) noexcept {
    try {
      b(ctx).synchronize(device);
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  // Runs `f`, turning exceptions into a host error.
  template <class F>
  static BP_Error* guarded(F&& f) noexcept {
    try {
      f();
      return nullptr;
    } catch (...) {
      return currentExceptionToError();
    }
  }
  static BP_Error* streamCreate(void* ctx, int32_t device, BP_Stream** out) noexcept {
    return guarded([&] {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "stream_create: NULL out");
      *out = nullptr;
      *out = b(ctx).createStream(device);
    });
  }
  static void streamDestroy(void* ctx, int32_t device, BP_Stream* stream) noexcept {
    try {
      b(ctx).destroyStream(device, stream);
    } catch (...) {
      logCurrentException("DeviceBackend::destroyStream");
    }
  }
  static BP_Error* streamSynchronize(void* ctx, int32_t device, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).synchronizeStream(device, stream); });
  }
  static BP_Error* getCurrentStream(void* ctx, int32_t device, BP_Stream** out) noexcept {
    return guarded([&] {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "get_current_stream: NULL out");
      *out = nullptr;
      *out = b(ctx).currentStream(device);
    });
  }
  static BP_Error* setCurrentStream(void* ctx, int32_t device, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).setCurrentStream(device, stream); });
  }
  static BP_Error* eventCreate(void* ctx, int32_t device, BP_Event** out) noexcept {
    return guarded([&] {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "event_create: NULL out");
      *out = nullptr;
      *out = b(ctx).createEvent(device);
    });
  }
  static void eventDestroy(void* ctx, int32_t device, BP_Event* event) noexcept {
    try {
      b(ctx).destroyEvent(device, event);
    } catch (...) {
      logCurrentException("DeviceBackend::destroyEvent");
    }
  }
  static BP_Error* eventRecord(void* ctx, int32_t device, BP_Event* event, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).recordEvent(device, event, stream); });
  }
  static BP_Error* eventWait(void* ctx, int32_t device, BP_Event* event, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).waitEvent(device, event, stream); });
  }
  static BP_Error* eventSynchronize(void* ctx, int32_t device, BP_Event* event) noexcept {
    return guarded([&] { b(ctx).synchronizeEvent(device, event); });
  }
  static BP_Error* eventWaitDevice(void* ctx, int32_t event_device, BP_Event* event, int32_t stream_device,
                                   BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).waitEventOnDevice(event_device, event, stream_device, stream); });
  }
  static BP_Error* eventQuery(void* ctx, int32_t device, BP_Event* event, uint8_t* out_complete) noexcept {
    return guarded([&] {
      if (out_complete == nullptr) fail(BP_INVALID_ARGUMENT, "event_query: NULL out_complete");
      *out_complete = b(ctx).queryEvent(device, event) ? 1 : 0;
    });
  }
  static BP_Error* eventCreateTimed(void* ctx, int32_t device, BP_Event** out) noexcept {
    return guarded([&] {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "event_create_timed: NULL out");
      *out = nullptr;
      *out = b(ctx).createTimedEvent(device);
    });
  }
  static BP_Error* eventElapsedMs(void* ctx, int32_t device, BP_Event* start, BP_Event* end, double* out_ms) noexcept {
    return guarded([&] {
      if (out_ms == nullptr) fail(BP_INVALID_ARGUMENT, "event_elapsed_ms: NULL out_ms");
      *out_ms = b(ctx).eventElapsedMs(device, start, end);
    });
  }
  static BP_Error* graphCaptureBegin(void* ctx, int32_t device, BP_Stream* stream, size_t pool_bytes) noexcept {
    return guarded([&] { b(ctx).beginGraphCapture(device, stream, pool_bytes); });
  }
  static BP_Error* graphCaptureEnd(void* ctx, int32_t device, BP_Stream* stream, BP_Graph** out) noexcept {
    return guarded([&] {
      if (out == nullptr) fail(BP_INVALID_ARGUMENT, "graph_capture_end: NULL out");
      *out = nullptr;
      *out = b(ctx).endGraphCapture(device, stream);
    });
  }
  static BP_Error* graphReplay(void* ctx, int32_t device, BP_Graph* graph, BP_Stream* stream) noexcept {
    return guarded([&] { b(ctx).replayGraph(device, graph, stream); });
  }
  static void graphDestroy(void* ctx, int32_t device, BP_Graph* graph) noexcept {
    try {
      b(ctx).destroyGraph(device, graph);
    } catch (...) {
      logCurrentException("DeviceBackend::destroyGraph");
    }
  }
};

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_DEVICE_TRAMPOLINES_HPP_
