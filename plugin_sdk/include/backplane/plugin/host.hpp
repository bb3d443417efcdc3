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

#if BP_ABI_MINOR >= 11
namespace detail {
inline const BP_HostApi& storeHost(const char* what) {
  const BP_HostApi& h = host();
  if (h.store_get == nullptr || h.store_set == nullptr) {
    fail(BP_UNIMPLEMENTED, concat(what, ": the host provides plugin ABI ", h.abi_major, ".", h.abi_minor,
                                  ", which has no key-value store (added in ABI 1.11); upgrade the host"));
  }
  return h;
}
}  // namespace detail

// The world's key-value store, keyed per process group (BP_HostApi.store_set
// and store_get, ABI 1.11): what a group's ranks exchange before their
// collective library runs. storeGet waits for the key at most the group's
// timeout; both throw bp::Error (BP_DEADLINE_EXCEEDED, BP_FAILED_PRECONDITION
// when the world has no store, saying what to set).
inline void storeSet(int64_t group, const std::string& key, const void* value, size_t size) {
  throwIfError(detail::storeHost("storeSet").store_set(group, key.c_str(), value, size));
}
inline std::string storeGet(int64_t group, const std::string& key) {
  const BP_HostApi& h = detail::storeHost("storeGet");
  std::string value(256, '\0');
  size_t size = 0;
  BP_Error* e = h.store_get(group, key.c_str(), value.data(), value.size(), &size);
  if (e != nullptr && h.error_code(e) == BP_OUT_OF_RANGE) {  // larger than the first guess: it is there now
    h.error_free(e);
    value.resize(size);
    e = h.store_get(group, key.c_str(), value.data(), value.size(), &size);
  }
  throwIfError(e);
  value.resize(size);
  return value;
}
#endif

}  // namespace bp

#endif  // BACKPLANE_PLUGIN_HOST_HPP_
