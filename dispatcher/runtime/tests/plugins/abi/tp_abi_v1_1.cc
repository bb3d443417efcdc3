// tp_abi_v1_1: a plugin built for ABI 1.1 that uses the slot 1.1 appended to
// the host table, BP_HostApi.device_type_name, the correct way: only after
// checking that the table it was handed is long enough to hold it
// (hostHas() below). A plugin that also wants to load into 1.0 hosts
// reports abi_minor 0 and takes the same path; there the check fails and it
// does without the slot.
//
// Also records what its init saw of the host table (rule: struct_size,
// abi_major and abi_minor equal the host header's).
//
// Registers device type "abiv11dev" and defines, on cpu:
//   abi_v1_1::info(int which) -> int: 0 the host table's struct_size, 1 its
//     abi_major, 2 its abi_minor (as init saw them), 3 the device type number
//     register_device_type returned, 4 nameIs(own type, "abiv11dev") during
//     init, kCounterBase + kTrap: calls of the trap below.
//   abi_v1_1::type_name_is(int device_type, str expected, int table_size) -> int:
//     nameIs() on the host's table, or (table_size > 0) on a copy of it
//     whose struct_size is table_size, as an older host would hand out, and
//     whose device_type_name is a trap that must not be called.
#include "abi_plugin.hpp"

namespace {

const BP_PluginInfo kInfo = {
    BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, "tp_abi_v1_1", "1.1.0"};

const BP_HostApi* g_host = nullptr;
int32_t g_device_type = -1;

// The pattern: a slot may be used only if the table reaches past its end
// (and, being a function slot, it is not NULL).
#define HOST_HAS(host, field) ((host)->struct_size >= BP_STRUCT_SIZE(BP_HostApi, field) && (host)->field != NULL)

enum NameResult : int64_t { kNameMatches = 1, kNameDiffers = 0, kNameIsNull = -1, kNoSlot = -2 };

// Compares the host's name for `type` with expected[0, expected_len).
NameResult nameIs(const BP_HostApi* host, int32_t type, const char* expected, size_t expected_len) {
  if (!HOST_HAS(host, device_type_name)) return kNoSlot;  // an older host: do without
  const char* name = host->device_type_name(type);
  if (name == nullptr) return kNameIsNull;
  return std::strlen(name) == expected_len && std::memcmp(name, expected, expected_len) == 0 ? kNameMatches
                                                                                             : kNameDiffers;
}

const char* trapDeviceTypeName(int32_t) {
  count(kTrap);
  return "trap: device_type_name past the table's struct_size was called";
}

BP_Error* typeNameIsKernel(void*, const BP_KernelCall* call) {
  if (call->num_args != 3 || call->args[0].tag != BP_VALUE_INT || call->args[1].tag != BP_VALUE_STRING ||
      call->args[2].tag != BP_VALUE_INT || call->num_returns != 1)
    return error(BP_INTERNAL, "type_name_is: expected (int, str, int) and one return");
  const int32_t type = static_cast<int32_t>(call->args[0].u.i);
  const int64_t table_size = call->args[2].u.i;
  NameResult r;
  if (table_size <= 0) {
    r = nameIs(g_host, type, call->args[1].u.str.data, call->args[1].u.str.size);
  } else {
    if (static_cast<uint64_t>(table_size) > sizeof(BP_HostApi))
      return error(BP_INVALID_ARGUMENT, "type_name_is: table_size %lld is larger than BP_HostApi",
                   static_cast<long long>(table_size));
    BP_HostApi older = *g_host;
    older.struct_size = static_cast<size_t>(table_size);
    older.device_type_name = &trapDeviceTypeName;  // what lies past an older table is not ours to call
    r = nameIs(&older, type, call->args[1].u.str.data, call->args[1].u.str.size);
  }
  call->returns[0].tag = BP_VALUE_INT;
  call->returns[0].u.i = r;
  return nullptr;
}

BP_Error* init(const BP_HostApi* host, BP_Plugin* plugin) {
  // The host checked the major and that our minor is not newer than its own;
  // the table must still be at least what 1.0 defined.
  if (host->struct_size < BP_STRUCT_SIZE(BP_HostApi, op_redispatch))
    return host->error_new(BP_FAILED_PRECONDITION, "tp_abi_v1_1: the host table is smaller than ABI 1.0's");
  g_host = host;
  saveHostFns(host);
  g_info[0] = static_cast<int64_t>(host->struct_size);
  g_info[1] = host->abi_major;
  g_info[2] = host->abi_minor;
  arenaInit();

  BP_DeviceTypeDesc dev = deviceDesc("abiv11dev", /*with_optional_slots=*/true);
  if (BP_Error* e = host->register_device_type(plugin, &dev, &g_device_type)) return e;
  g_info[3] = g_device_type;
  g_info[4] = nameIs(host, g_device_type, "abiv11dev", std::strlen("abiv11dev"));

  if (BP_Error* e = host->def(plugin, "abi_v1_1::info(int which) -> int")) return e;
  BP_KernelDesc info = kernelDesc(&infoKernel, nullptr, nullptr);
  if (BP_Error* e = host->impl(plugin, "abi_v1_1::info", 0, &info)) return e;
  if (BP_Error* e = host->def(plugin, "abi_v1_1::type_name_is(int device_type, str expected, int table_size) -> int"))
    return e;
  BP_KernelDesc name = kernelDesc(&typeNameIsKernel, nullptr, nullptr);
  if (BP_Error* e = host->impl(plugin, "abi_v1_1::type_name_is", 0, &name)) return e;
  return nullptr;
}

}  // namespace

extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &kInfo; }

extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  try {
    return init(host, plugin);
  } catch (...) {
    return host->error_new(BP_INTERNAL, "tp_abi_v1_1: init failed with an exception");
  }
}

extern "C" BP_EXPORT void backplane_plugin_shutdown(BP_Plugin*) {
  arenaShutdown();
  g_host = nullptr;
  g_device_type = -1;
}
