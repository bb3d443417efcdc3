// The host as a plugin sees it: bp::host() (the function table),
// pluginHandle(), throwIfError (a host error as a bp::Error), logMessage and
// deviceTypeName. Part of <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_HOST_HPP_
#define BACKPLANE_PLUGIN_HOST_HPP_

#include <cstdint>
#include <string>

#include "backplane/plugin/detail/host_table.hpp"
#include "backplane/plugin/errors.hpp"
#include "backplane/plugin_api.h"

namespace bp {

// The host's function table. Throws bp::Error(BP_FAILED_PRECONDITION) before
// backplane_plugin_init has run. Thread-safe afterwards (read-only).
inline const BP_HostApi& host() {
  if (detail::g_host == nullptr) [[unlikely]]
    detail::hostNotReady();
  return *detail::g_host;
}

// The host's handle for this plugin (nullptr before init). Thread-safe.
inline BP_Plugin* pluginHandle() noexcept { return detail::g_plugin; }

// If `error` is non-NULL: takes its code and message, frees it with
// host().error_free, and throws them as bp::Error. Takes ownership of `error`.
inline void throwIfError(BP_Error* error) {
  if (error == nullptr) return;
  const BP_HostApi& h = host();
  struct Freer {
    const BP_HostApi& h;
    BP_Error* e;
    ~Freer() {
      if (h.error_free) h.error_free(e);
    }
  } freer{h, error};
  BP_ErrorCode code = h.error_code ? h.error_code(error) : BP_UNKNOWN;
  const char* msg = h.error_message ? h.error_message(error) : nullptr;
  std::string message = msg ? msg : "";
  throw Error(code == BP_OK ? BP_UNKNOWN : code, std::move(message));
}

// Logs through the host, prefixed with the plugin's name. Thread-safe if the
// host's log is; does nothing before init.
inline void logMessage(BP_LogLevel level, const std::string& message) noexcept {
  detail::logNoThrow(level, message.c_str());
}

#if BP_ABI_MINOR >= 1
// The name of device type number `type` ("cpu", "toy"), or nullptr if none is
// registered under it; the string lives as long as the process. ABI 1.1.
// Throws bp::Error(BP_UNIMPLEMENTED) if the host leaves the slot NULL.
inline const char* deviceTypeName(int32_t type) {
  return detail::hostSlot(host().device_type_name, "device_type_name")(type);
}
#endif

#if BP_ABI_MINOR >= 10
// Process group `group` (the `int group` argument of a comm:: operator;
// Note [Collective engines] in plugin_api.h): this process's rank, the
// size, the members' world ranks and the timeout. ABI 1.10. Throws
// bp::Error(BP_NOT_FOUND) for an unknown id, and BP_UNIMPLEMENTED from an
// older host.
inline BP_GroupInfo groupInfo(int64_t group) {
  const BP_HostApi& h = host();
  if (h.group_info == nullptr) {
    fail(BP_UNIMPLEMENTED,
         detail::concat("groupInfo(", group, "): the host provides plugin ABI ", h.abi_major, ".", h.abi_minor,
                        ", which has no process groups (added in ABI 1.10); upgrade "
                        "the host to run this plugin's collectives"));
  }
  BP_GroupInfo info{};
  info.struct_size = BP_GroupInfo_STRUCT_SIZE;
  throwIfError(h.group_info(group, &info));
  return info;
}
#endif

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_HOST_HPP_
