// dlpack_test_plugin: the device types dlpack_test.cc exports and imports
// through, written against the plugin SDK as a vendor's plugin would be.
//
//   "dlpkdev" (2 devices): declares DLPack device type kDLExtDev (12) with
//     DeviceBackend::dlpackDeviceType(), like a CUDA plugin declaring kDLCUDA.
//   "dlpkolddev" (1 device): a raw BP_DeviceTypeDesc as a plugin built
//     before ABI 1.2 sends it: struct_size ends before dlpack_device_type,
//     whose bytes say 12 anyway. The host must read 0 (none).
//
// Built a second time as dlpack_test_plugin_negative (DLPK_PLUGIN_NAME and
// DLPK_DLPACK_DEVICE_TYPE set by CMake), whose dlpkdev declares -1: the host
// must refuse the device type and fail the load.
//
// The memory is ordinary heap memory, but host_accessible is 0: the host
// only passes the addresses around, which is all DLPack needs.
#include <backplane/plugin.hpp>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#ifndef DLPK_PLUGIN_NAME
#define DLPK_PLUGIN_NAME "dlpack_test_plugin"
#define DLPK_DLPACK_DEVICE_TYPE 12  // kDLExtDev
#endif

namespace {

class HeapBackend final : public bp::DeviceBackend {
 public:
  int deviceCount() override { return 2; }
  int32_t dlpackDeviceType() override { return DLPK_DLPACK_DEVICE_TYPE; }
  void* allocate(int, size_t n) override { return std::malloc(n); }
  void deallocate(int, void* p) override { std::free(p); }
  void copyHostToDevice(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToHost(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToDevice(int, void* d, int, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void memset(int, void* d, uint8_t v, size_t n) override { std::memset(d, v, n); }
};

// dlpkolddev's functions, in plain C form (it bypasses DeviceBackend).
int32_t oldDeviceCount(void*) { return 1; }
BP_Error* oldAllocate(void*, int32_t, size_t nbytes, void** out) {
  *out = nbytes == 0 ? nullptr : std::malloc(nbytes);
  if (nbytes != 0 && *out == nullptr) return bp::host().error_new(BP_RESOURCE_EXHAUSTED, "dlpkolddev: out of memory");
  return nullptr;
}
void oldDeallocate(void*, int32_t, void* p) { std::free(p); }
BP_Error* oldCopy(void*, int32_t, void* dst, const void* src, size_t nbytes) {
  if (nbytes != 0) std::memcpy(dst, src, nbytes);
  return nullptr;
}

void init(bp::Library& m) {
  static HeapBackend backend;  // must outlive the plugin
  m.registerDevice("dlpkdev", &backend);

  static BP_DeviceTypeDesc old;
  std::memset(&old, 0, sizeof old);
  old.struct_size = offsetof(BP_DeviceTypeDesc, dlpack_device_type);
  old.name = "dlpkolddev";
  old.device_count = &oldDeviceCount;
  old.allocate = &oldAllocate;
  old.deallocate = &oldDeallocate;
  old.copy_host_to_device = &oldCopy;
  old.copy_device_to_host = &oldCopy;
  old.dlpack_device_type = 12;  // past struct_size: not part of what the host may read
  m.registerDeviceType(old);
}

}  // namespace

BACKPLANE_PLUGIN(DLPK_PLUGIN_NAME, "1.0.0", init)
