#pragma once
// The host's record of one plugin (what BP_Plugin* points to), the bridge
// from a plugin's device table to the core's DeviceInterface, and the kernel
// adapters. Private to the dispatcher.

#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>

#include "backplane/core/device_interface.h"
#include "backplane/dispatch/dispatcher.h"
#include "backplane/ops/derivatives.h"
#include "backplane/plugin_api.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/runtime/plugin_specs.h"
#include "plugin_calls.h"

namespace backplane::plugin_detail {

class PluginDeviceInterface;

struct LoadedPlugin {
  int slot = -1;  // index into the per-thread call depths (Note [Plugin call tracking])
  PluginStatus status;
  boost::dll::shared_library library;
  BP_PluginShutdownFn shutdown = nullptr;
  // Whether calls may enter it (Note [Plugin call tracking], Note [Refused unloads]).
  PluginGate gate;
  // Allocations made through its device types that are not yet freed.
  std::atomic<int64_t> live_allocations{0};
  bool initializing = false;
  std::vector<RegistrationHandle> handles;
  std::vector<DerivativeRegistration> derivatives;         // BP_HostApi.derivative (Note [Declared derivatives])
  std::vector<std::string> defined_ops;                    // what its def calls defined, qualified
  std::vector<std::string> meta_ops;                       // the ops it gave a meta (one each)
  std::vector<std::shared_ptr<const DeclaredSpec>> specs;  // BP_HostApi.spec
  // BP_HostApi.derive_forms: functional op -> its forms' names (the
  // registrations are in `handles`).
  std::map<std::string, DerivedFormNames> derived;
  std::vector<PluginDeviceInterface*> devices;
  std::vector<std::pair<OperatorEntry*, DispatchKey>> owned_impls;
};

// Note [Dtypes of older plugins] (plugin_api.h): the dtypes a plugin built
// against ABI 1.0-1.4 knows, BP_BOOL..BP_FLOAT64.
inline constexpr int kAbi14NumDtypes = BP_FLOAT64 + 1;
inline const DtypeSet kAbi14Dtypes{ScalarType::Bool,     ScalarType::UInt8,   ScalarType::Int8,
                                   ScalarType::Int32,    ScalarType::Int64,   ScalarType::Float16,
                                   ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};
inline bool predatesAbi15Dtypes(const LoadedPlugin& p) { return p.status.abi_minor < 5; }
// Built against ABI 1.7 or later: its impl kernels may return BP_DECLINED
// (Note [Declined calls]).
inline bool knowsAbi17Declines(const LoadedPlugin& p) { return p.status.abi_minor >= 7; }
// BP_KernelDesc.typed_fn as the host reads it (Note [Typed kernel entries]):
// NULL from a plugin older than ABI 1.14, or without a cpp_signature
// (registration refuses that).
inline BP_TypedKernelFn typedEntryOf(const LoadedPlugin& p, const BP_KernelDesc& desc) {
  return p.status.abi_minor >= 14 && desc.cpp_signature != nullptr ? desc.typed_fn : nullptr;
}

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
  void copyDeviceToDevice(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) override;
  void memset(void* dst, Device device, uint8_t value, size_t nbytes) override;
  void synchronize(Device device) override;
  DeviceProperties properties(Device device) const override;
  DeviceCapabilities capabilities() const override;
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
  void waitEventOnDevice(Device event_device, EventHandle event, Device stream_device, StreamHandle stream) override;
  EventHandle createTimedEvent(Device device) override;
  double eventElapsedMs(Device device, EventHandle start, EventHandle end) override;
  void beginGraphCapture(Device device, StreamHandle stream, size_t pool_bytes) override;
  GraphHandle endGraphCapture(Device device, StreamHandle stream) override;
  void replayGraph(Device device, GraphHandle graph, StreamHandle stream) override;
  void destroyGraph(Device device, GraphHandle graph) override;

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
// The makers below set *typed (when given) to whether unboxed calls go
// through the kernel's typed entry (Note [Typed kernel entries]).
KernelFunction makePluginKernel(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op,
                                bool* typed = nullptr);
// The same for impl_when_defined. The kernel carries the signature the
// plugin declares in desc.cpp_signature, for the dispatcher to check against
// each definition that arrives (Note [Kernels for operators defined later]).
// Before the op is defined it is adapted to that signature (boxed only, and
// unchecked, without one).
KernelFunction makePluginKernelWhenDefined(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op,
                                           bool* typed = nullptr);
// A plugin's boxed fallback for its device type: serves every operator.
KernelFunction makePluginFallback(LoadedPlugin* plugin, const BP_KernelDesc& desc);
// BP_HostApi.meta's rule (no returns) and BP_HostApi.spec's reference
// (called outside the dispatch table, so it may not decline).
KernelFunction makePluginMeta(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op);
// impl with BP_ANY_DEVICE_TYPE: the op's composite (it may not decline).
KernelFunction makePluginComposite(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op,
                                   bool* typed = nullptr);
KernelFunction makePluginReference(LoadedPlugin* plugin, const BP_KernelDesc& desc, const OperatorHandle& op);

// Note [Reading ABI structs]
// A receiver reads a field only if struct_size covers its end (Note [ABI
// rules]): struct_size may be this header's BP_<type>_STRUCT_SIZE (the end
// of the last field), the sizeof an older SDK sent (which counts tail
// padding), a smaller struct's size, or a larger one's. AbiFields<T> lists
// every field of T with its offset, size and alignment, so the host can cut
// a given struct_size down to the fields it covers whole; the static_asserts
// below check each list against the struct (no field missing or out of
// order, the last one ends at BP_<type>_STRUCT_SIZE).
struct AbiField {
  size_t offset, size, align;
  constexpr size_t end() const { return offset + size; }
};

template <typename T>
struct AbiFields;  // specialised for each struct the host reads or fills in part

#define BP_ABI_FIELD(f) \
  AbiField { offsetof(S, f), sizeof(S::f), alignof(decltype(S::f)) }
template <>
struct AbiFields<BP_PluginInfo> {
  using S = BP_PluginInfo;
  static constexpr size_t kStructSize = BP_PluginInfo_STRUCT_SIZE;
  static constexpr AbiField kFields[] = {BP_ABI_FIELD(struct_size), BP_ABI_FIELD(magic), BP_ABI_FIELD(abi_major),
                                         BP_ABI_FIELD(abi_minor),   BP_ABI_FIELD(name),  BP_ABI_FIELD(version)};
};
template <>
struct AbiFields<BP_KernelDesc> {
  using S = BP_KernelDesc;
  static constexpr size_t kStructSize = BP_KernelDesc_STRUCT_SIZE;
  static constexpr AbiField kFields[] = {BP_ABI_FIELD(struct_size),   BP_ABI_FIELD(fn),     BP_ABI_FIELD(ctx),
                                         BP_ABI_FIELD(cpp_signature), BP_ABI_FIELD(dtypes), BP_ABI_FIELD(flags),
                                         BP_ABI_FIELD(typed_fn)};
};
template <>
struct AbiFields<BP_DeviceTypeDesc> {
  using S = BP_DeviceTypeDesc;
  static constexpr size_t kStructSize = BP_DeviceTypeDesc_STRUCT_SIZE;
  static constexpr AbiField kFields[] = {BP_ABI_FIELD(struct_size),
                                         BP_ABI_FIELD(name),
                                         BP_ABI_FIELD(ctx),
                                         BP_ABI_FIELD(host_accessible),
                                         BP_ABI_FIELD(device_count),
                                         BP_ABI_FIELD(unavailable_reason),
                                         BP_ABI_FIELD(get_properties),
                                         BP_ABI_FIELD(allocate),
                                         BP_ABI_FIELD(deallocate),
                                         BP_ABI_FIELD(copy_host_to_device),
                                         BP_ABI_FIELD(copy_device_to_host),
                                         BP_ABI_FIELD(copy_device_to_device),
                                         BP_ABI_FIELD(memset),
                                         BP_ABI_FIELD(synchronize),
                                         BP_ABI_FIELD(stream_create),
                                         BP_ABI_FIELD(stream_destroy),
                                         BP_ABI_FIELD(stream_synchronize),
                                         BP_ABI_FIELD(get_current_stream),
                                         BP_ABI_FIELD(set_current_stream),
                                         BP_ABI_FIELD(event_create),
                                         BP_ABI_FIELD(event_destroy),
                                         BP_ABI_FIELD(event_record),
                                         BP_ABI_FIELD(event_wait),
                                         BP_ABI_FIELD(event_synchronize),
                                         BP_ABI_FIELD(dlpack_device_type),
                                         BP_ABI_FIELD(event_query),
                                         BP_ABI_FIELD(event_wait_device),
                                         BP_ABI_FIELD(event_create_timed),
                                         BP_ABI_FIELD(event_elapsed_ms),
                                         BP_ABI_FIELD(graph_capture_begin),
                                         BP_ABI_FIELD(graph_capture_end),
                                         BP_ABI_FIELD(graph_replay),
                                         BP_ABI_FIELD(graph_destroy)};
};
template <>
struct AbiFields<BP_TensorInfo> {
  using S = BP_TensorInfo;
  static constexpr size_t kStructSize = BP_TensorInfo_STRUCT_SIZE;
  static constexpr AbiField kFields[] = {BP_ABI_FIELD(struct_size),    BP_ABI_FIELD(data),  BP_ABI_FIELD(sizes),
                                         BP_ABI_FIELD(strides),        BP_ABI_FIELD(dim),   BP_ABI_FIELD(numel),
                                         BP_ABI_FIELD(storage_offset), BP_ABI_FIELD(dtype), BP_ABI_FIELD(device),
                                         BP_ABI_FIELD(is_contiguous)};
};
template <>
struct AbiFields<BP_GroupInfo> {
  using S = BP_GroupInfo;
  static constexpr size_t kStructSize = BP_GroupInfo_STRUCT_SIZE;
  static constexpr AbiField kFields[] = {
      BP_ABI_FIELD(struct_size), BP_ABI_FIELD(id),         BP_ABI_FIELD(rank),       BP_ABI_FIELD(size),
      BP_ABI_FIELD(world_ranks), BP_ABI_FIELD(world_rank), BP_ABI_FIELD(world_size), BP_ABI_FIELD(timeout_seconds)};
};
template <>
struct AbiFields<BP_SpecDesc> {
  using S = BP_SpecDesc;
  static constexpr size_t kStructSize = BP_SpecDesc_STRUCT_SIZE;
  static constexpr AbiField kFields[] = {BP_ABI_FIELD(struct_size), BP_ABI_FIELD(samples), BP_ABI_FIELD(reference),
                                         BP_ABI_FIELD(atol), BP_ABI_FIELD(rtol)};
};
#undef BP_ABI_FIELD

// Whether AbiFields<T> lists every field of T in order: each field starts
// where the previous one ends, rounded up to its alignment, the first at 0,
// the last ends at BP_<type>_STRUCT_SIZE, and sizeof(T) is that rounded up
// to T's alignment.
template <typename T>
constexpr bool abiFieldsComplete() {
  size_t end = 0;
  for (const AbiField& f : AbiFields<T>::kFields) {
    if (f.offset != (end + f.align - 1) / f.align * f.align) return false;
    end = f.end();
  }
  return end == AbiFields<T>::kStructSize && sizeof(T) == (end + alignof(T) - 1) / alignof(T) * alignof(T);
}
static_assert(abiFieldsComplete<BP_PluginInfo>(), "AbiFields<BP_PluginInfo> does not match plugin_api.h");
static_assert(abiFieldsComplete<BP_KernelDesc>(), "AbiFields<BP_KernelDesc> does not match plugin_api.h");
static_assert(abiFieldsComplete<BP_DeviceTypeDesc>(), "AbiFields<BP_DeviceTypeDesc> does not match plugin_api.h");
static_assert(abiFieldsComplete<BP_TensorInfo>(), "AbiFields<BP_TensorInfo> does not match plugin_api.h");
static_assert(abiFieldsComplete<BP_SpecDesc>(), "AbiFields<BP_SpecDesc> does not match plugin_api.h");
static_assert(abiFieldsComplete<BP_GroupInfo>(), "AbiFields<BP_GroupInfo> does not match plugin_api.h");

// The bytes of T that `given` bytes cover whole fields of: the end of the
// last field that ends at or before `given` (0 if none).
template <typename T>
constexpr size_t coveredFieldsSize(size_t given) {
  size_t covered = 0;
  for (const AbiField& f : AbiFields<T>::kFields) {
    if (f.end() > given) break;
    covered = f.end();
  }
  return covered;
}

// Copies the fields of *p that its struct_size covers into a zeroed T, whose
// struct_size becomes BP_<type>_STRUCT_SIZE (Note [Reading ABI structs]):
// larger structs are accepted, fields past or cut by a smaller one read as
// zero/NULL. Fails on NULL, on a size too small to hold a field after
// struct_size, and on sizes over BP_MAX_STRUCT_SIZE.
template <typename T>
absl::StatusOr<T> readStruct(const T* p, const char* what) {
  if (p == nullptr) return absl::InvalidArgumentError(std::string(what) + " is NULL");
  const size_t given = p->struct_size;
  if (given < sizeof(size_t) + sizeof(void*) || given > BP_MAX_STRUCT_SIZE) {
    return absl::InvalidArgumentError(std::string(what) + " has an invalid struct_size " + std::to_string(given) +
                                      " (expected about " + std::to_string(AbiFields<T>::kStructSize) +
                                      "); the plugin was built against a broken or foreign header");
  }
  T out;
  std::memset(&out, 0, sizeof out);
  std::memcpy(&out, p, coveredFieldsSize<T>(given));
  out.struct_size = AbiFields<T>::kStructSize;
  return out;
}

}  // namespace backplane::plugin_detail
