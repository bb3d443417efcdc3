// A plugin for the `backplane` tool's tests, built against plugin_api.h
// only. It gives the tool something known to report:
//   - device type "clitest" with two host-memory devices that report
//     properties ("CLI test device N", 2 GiB, compute 1.2, 4 compute units);
//   - device type "clitestnone" with no devices (and a reason), and a boxed
//     fallback for every operator on it;
//   - operators in namespace "clitest":
//       native_everywhere  kernels for cpu and clitest
//       cpu_only           a cpu kernel only (clitest gets the CPU fallback)
//       no_kernels         defined, no kernel (a schema with quotes and a
//                          backslash in a default, to exercise JSON escaping)
//       some_dtypes        kernels for cpu and for clitest, which declares
//                          float32 and float16 only (BP_KernelDesc.dtypes)
// It lands outside the default plugin directory, so only tests that pass
// --plugin see it.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backplane/plugin_api.h"

namespace {

const BP_HostApi* g_host = nullptr;

int32_t clitestCount(void*) { return 2; }
int32_t noneCount(void*) { return 0; }
const char* noneReason(void*) { return "no clitestnone hardware (test plugin)"; }

BP_Error* clitestProperties(void*, int32_t device, BP_DeviceProperties* out) {
  std::snprintf(out->name, sizeof out->name, "CLI test device %d", static_cast<int>(device));
  out->total_memory = uint64_t{2} << 30;
  out->compute_major = 1;
  out->compute_minor = 2;
  out->multiprocessor_count = 4;
  return nullptr;
}

BP_Error* allocate(void*, int32_t, size_t nbytes, void** out) {
  *out = nbytes ? std::malloc(nbytes) : nullptr;
  if (nbytes && !*out) return g_host->error_new(BP_RESOURCE_EXHAUSTED, "clitest: out of memory");
  return nullptr;
}
void deallocate(void*, int32_t, void* ptr) { std::free(ptr); }
BP_Error* copy(void*, int32_t, void* dst, const void* src, size_t nbytes) {
  if (nbytes) std::memcpy(dst, src, nbytes);
  return nullptr;
}

// Returns its first argument (the tool never calls kernels).
BP_Error* identity(void*, const BP_KernelCall* call) {
  if (call->num_args < 1 || call->args[0].tag != BP_VALUE_TENSOR || call->num_returns < 1)
    return g_host->error_new(BP_INVALID_ARGUMENT, "clitest: expected one tensor argument and one return");
  call->returns[0].tag = BP_VALUE_TENSOR;
  call->returns[0].u.tensor = g_host->tensor_retain(call->args[0].u.tensor);
  return nullptr;
}
BP_Error* refuse(void*, const BP_KernelCall*) {
  return g_host->error_new(BP_UNIMPLEMENTED, "clitestnone has no devices");
}

BP_DeviceTypeDesc deviceDesc(const char* name, int32_t (*count)(void*), const char* (*reason)(void*)) {
  BP_DeviceTypeDesc d{};
  d.struct_size = BP_DeviceTypeDesc_STRUCT_SIZE;
  d.name = name;
  d.host_accessible = 1;
  d.device_count = count;
  d.unavailable_reason = reason;
  d.allocate = allocate;
  d.deallocate = deallocate;
  d.copy_host_to_device = copy;
  d.copy_device_to_host = copy;
  return d;
}

BP_KernelDesc kernel(BP_KernelFn fn) {
  BP_KernelDesc k{};
  k.struct_size = BP_KernelDesc_STRUCT_SIZE;
  k.fn = fn;
  return k;
}

}  // namespace

extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) {
  static const BP_PluginInfo info = {BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR,
                                     "cli_test_plugin",         "0.1.0-test"};
  return &info;
}

extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  g_host = host;
  int32_t clitest = 0, none = 0;
  BP_DeviceTypeDesc clitest_desc = deviceDesc("clitest", clitestCount, nullptr);
  clitest_desc.get_properties = clitestProperties;
  BP_DeviceTypeDesc none_desc = deviceDesc("clitestnone", noneCount, noneReason);
  BP_KernelDesc id = kernel(identity), no = kernel(refuse);
  BP_Error* e = nullptr;
  if ((e = host->register_device_type(plugin, &clitest_desc, &clitest))) return e;
  if ((e = host->register_device_type(plugin, &none_desc, &none))) return e;
  if ((e = host->def(plugin, "clitest::native_everywhere(Tensor self) -> Tensor"))) return e;
  if ((e = host->def(plugin, "clitest::cpu_only(Tensor self) -> Tensor"))) return e;
  if ((e = host->def(plugin, "clitest::no_kernels(Tensor self, str note=\"say \\\"hi\\\" \\\\ bye\") -> Tensor")))
    return e;
  if ((e = host->impl(plugin, "clitest::native_everywhere", 0, &id))) return e;
  if ((e = host->impl(plugin, "clitest::native_everywhere", clitest, &id))) return e;
  if ((e = host->impl(plugin, "clitest::cpu_only", 0, &id))) return e;
  if ((e = host->def(plugin, "clitest::some_dtypes(Tensor self) -> Tensor"))) return e;
  if ((e = host->impl(plugin, "clitest::some_dtypes", 0, &id))) return e;
  BP_KernelDesc some = kernel(identity);
  some.dtypes = BP_DTYPE_BIT(BP_FLOAT32) | BP_DTYPE_BIT(BP_FLOAT16);
  if ((e = host->impl(plugin, "clitest::some_dtypes", clitest, &some))) return e;
  if ((e = host->fallback(plugin, none, &no))) return e;
  return nullptr;
}
