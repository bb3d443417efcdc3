#pragma once
// The host's record of one plugin (what BP_Plugin* points to), the bridge
// from a plugin's device table to the core's DeviceInterface, and the kernel
// adapters. Private to the dispatcher.

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>

#include "backplane/core/device_interface.h"
#include "backplane/dispatcher/dispatcher.h"
#include "backplane/dispatcher/plugin_registry.h"
#include "backplane/plugin_api.h"
#include "plugin_calls.h"

namespace backplane::plugin_detail {

class PluginDeviceInterface;

struct LoadedPlugin {
  int slot = -1;  // index into the per-thread call depths (Note [Plugin call tracking])
  PluginStatus status;
  boost::dll::shared_library library;
  BP_PluginShutdownFn shutdown = nullptr;
  // Cleared when the plugin starts going away; calls then refuse to enter.
  std::atomic<bool> alive{true};
  // Allocations made through its device types that are not yet freed.
  std::atomic<int64_t> live_allocations{0};
  bool initializing = false;
  std::vector<RegistrationHandle> handles;
  std::vector<PluginDeviceInterface*> devices;
  std::vector<std::pair<OperatorEntry*, DispatchKey>> owned_impls;
};

// The host function table handed to every plugin.
const BP_HostApi& hostApi();

// Host-side error object behind BP_Error*.
BP_Error* makeError(BP_ErrorCode code, std::string message);
// Converts and frees a plugin-returned error; throws Error with `context`.
[[noreturn]] void throwPluginError(const LoadedPlugin& plugin, BP_Error* error, const std::string& context);
// The status of the exception being handled, as a new BP_Error.
BP_Error* errorFromCurrentException();

class PluginDeviceInterface final : public DeviceInterface, public Allocator {
 public:
  PluginDeviceInterface(LoadedPlugin* plugin, const BP_DeviceTypeDesc& desc, DeviceType type);
  DeviceType type() const { return type_; }
  const std::string& name() const { return name_; }

  int deviceCount() const override;
  std::string unavailableReason() const override;
  bool isHostAccessible() const override { return desc_.host_accessible != 0; }
  // 0 for a plugin built before ABI 1.2: readStruct zeroes the missing field.
  int32_t dlpackDeviceType() const override { return desc_.dlpack_device_type; }
  Allocator& allocator() override { return *this; }
  DataPtr allocate(size_t nbytes, Device device) override;
  void copyHostToDevice(void* dst, Device dst_device, const void* src, size_t nbytes) override;
  void copyDeviceToHost(void* dst, const void* src, Device src_device, size_t nbytes) override;
  void copyDeviceToDevice(void* dst, Device dst_device, const void* src, Device src_device,
                          size_t nbytes) override;
  void memset(void* dst, Device device, uint8_t value, size_t nbytes) override;
  void synchronize(Device device) override;
  DeviceProperties properties(Device device) const override;
  bool hasStreams() const override;
  StreamHandle createStream(Device device) override;
  void destroyStream(Device device, StreamHandle stream) override;
  void synchronizeStream(Device device, StreamHandle stream) override;
  StreamHandle currentStream(Device device) override;
  void setCurrentStream(Device device, StreamHandle stream) override;
  bool hasEvents() const override;
  EventHandle createEvent(Device device) override;
  void destroyEvent(Device device, EventHandle event) override;
  void recordEvent(Device device, EventHandle event, StreamHandle stream) override;
  void waitEvent(Device device, EventHandle event, StreamHandle stream) override;
  void synchronizeEvent(Device device, EventHandle event) override;
  bool queryEvent(Device device, EventHandle event) override;

 private:
  static void deallocate(void* ctx, void* ptr);
  void check(BP_Error* error, const char* what) const;
  struct DeviceSlot {
    PluginDeviceInterface* owner;
    int32_t index;
  };
  LoadedPlugin* plugin_;
  BP_DeviceTypeDesc desc_;  // copied, missing tail fields zeroed
  DeviceType type_;
  std::string name_;
  std::vector<DeviceSlot> slots_;
};

// A plugin kernel as the dispatch table stores it: the unboxed entry point
// when the schema's signature has a compiled adapter, and always a boxed one.
KernelFunction makePluginKernel(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op);
// A plugin's boxed fallback for its device type: serves every operator.
KernelFunction makePluginFallback(LoadedPlugin* plugin, const BP_KernelDesc& desc);

// Copies a struct of `given` bytes into a zeroed T (ABI rule: accept
// larger, default a smaller one's missing tail). Fails on 0 or absurd sizes.
template <typename T>
absl::StatusOr<T> readStruct(const T* p, const char* what) {
  if (p == nullptr) return absl::InvalidArgumentError(std::string(what) + " is NULL");
  size_t given = p->struct_size;
  if (given < sizeof(size_t) + sizeof(void*) || given > BP_MAX_STRUCT_SIZE) {
    return absl::InvalidArgumentError(std::string(what) + " has an invalid struct_size " +
                                      std::to_string(given) + " (expected about " + std::to_string(sizeof(T)) +
                                      "); the plugin was built against a broken or foreign header");
  }
  T out{};
  std::memcpy(&out, p, std::min(given, sizeof(T)));
  out.struct_size = sizeof(T);
  return out;
}

}  // namespace backplane::plugin_detail
