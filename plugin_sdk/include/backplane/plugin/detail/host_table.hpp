// The plugin's own copy of the host table and handle (Note [Per-plugin
// state]), the checks for NULL host slots, and the helpers that turn the
// exception being handled into a host error or a log line (Note [Exceptions
// at the ABI boundary]).
// Not part of the API: names in bp::detail may change in any release.
//
// Note [Per-plugin state]
// The host table, the plugin handle and the device descriptors live in
// `inline` variables / function statics in bp::detail, marked hidden
// (BP_SDK_HIDDEN), so each plugin .so has its own copy even if the vendor
// forgets -fvisibility=hidden and the host loads plugins RTLD_GLOBAL. Types
// keep default visibility: hiding them would make GCC warn about every
// vendor class that holds a bp::Tensor. Build plugins with
// -fvisibility=hidden anyway, so that only the extern "C" entry points that
// BACKPLANE_PLUGIN defines are exported.
#ifndef BACKPLANE_PLUGIN_DETAIL_HOST_TABLE_HPP_
#define BACKPLANE_PLUGIN_DETAIL_HOST_TABLE_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "backplane/plugin/errors.hpp"
#include "backplane/plugin_api.h"

// Hidden visibility for the SDK's per-plugin state; see Note [Per-plugin state].
#if defined(__GNUC__)
#define BP_SDK_HIDDEN __attribute__((visibility("hidden")))
#else
#define BP_SDK_HIDDEN
#endif

namespace bp {
namespace detail {

// Set once by backplane_plugin_init (installHost) before the plugin's init
// function runs, then only read; see Note [Per-plugin state]. The host's
// table stays valid until the plugin's shutdown returns (Note [ABI rules] in
// plugin_api.h); g_host points at g_host_table, a copy cut to the fields
// the SDK knows, so that a Tensor released after shutdown (a static
// destroyed when the library closes) still finds tensor_release, and so
// that reading a slot is one load from this plugin's own data.
BP_SDK_HIDDEN inline BP_HostApi g_host_table = {};
BP_SDK_HIDDEN inline const BP_HostApi* g_host = nullptr;
BP_SDK_HIDDEN inline BP_Plugin* g_plugin = nullptr;
// Bit t is set when device type t's memory is host memory as far as this
// plugin knows: cpu (type 0) always, and every type this plugin registered
// with host_accessible set. Written during init only (registerDevice,
// registerDeviceType); read by Tensor::data_ptr<T>() (Note [Host and device
// addresses]). Device types of other plugins are not known here.
BP_SDK_HIDDEN inline uint64_t g_host_accessible_types = 1;

// Whether this plugin knows device type `type`'s memory to be host memory.
inline bool isHostAccessibleType(int32_t type) noexcept {
  return static_cast<uint32_t>(type) < 64 && ((g_host_accessible_types >> type) & 1) != 0;
}

// Copies `table` (up to the size the SDK knows; fields past a smaller
// struct_size stay NULL) and records `plugin`. Tests call it with a fake host.
inline void installHost(const BP_HostApi& table, BP_Plugin* plugin) noexcept {
  BP_HostApi copy;
  std::memset(&copy, 0, sizeof copy);
  size_t n = table.struct_size < BP_HostApi_STRUCT_SIZE ? table.struct_size : BP_HostApi_STRUCT_SIZE;
  std::memcpy(&copy, &table, n);
  g_host_table = copy;
  g_host = &g_host_table;
  g_plugin = plugin;
  g_host_accessible_types = 1;  // cpu; the plugin's own types are added as it registers them
}

[[noreturn, gnu::cold, gnu::noinline]] inline void hostNotReady() {
  fail(BP_FAILED_PRECONDITION,
       "bp::host() was called before backplane_plugin_init: the host table is set by BACKPLANE_PLUGIN when the "
       "host initializes the plugin; do not call into the host from static initializers");
}
[[noreturn, gnu::cold, gnu::noinline]] inline void hostSlotMissing(const char* name) {
  fail(BP_UNIMPLEMENTED, std::string("the host does not implement BP_HostApi::") + name + " (NULL slot)");
}

// `fn` if the host implements that slot; else throws BP_UNIMPLEMENTED.
template <class Fn>
Fn hostSlot(Fn fn, const char* name) {
  if (fn == nullptr) [[unlikely]]
    hostSlotMissing(name);
  return fn;
}

// A host error, made with error_new (which copies `message`). Never throws.
inline BP_Error* makeHostError(BP_ErrorCode code, const char* message) noexcept {
  if (code == BP_OK) code = BP_UNKNOWN;  // NULL means success; an error must not say OK
  if (g_host == nullptr || g_host->error_new == nullptr) return nullptr;  // unreachable after a successful init
  return g_host->error_new(code, message ? message : "");
}

// Converts the exception being handled into a host error; call only inside a
// catch block (Note [Exceptions at the ABI boundary]).
inline BP_Error* currentExceptionToError() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return makeHostError(e.code(), e.message().c_str());
  } catch (const std::bad_alloc& e) {
    return makeHostError(BP_RESOURCE_EXHAUSTED, e.what());
  } catch (const std::exception& e) {
    return makeHostError(BP_INTERNAL, e.what());
  } catch (...) {
    return makeHostError(BP_UNKNOWN, "unknown exception (not derived from std::exception)");
  }
}

// Logs through the host if it can; never throws.
inline void logNoThrow(BP_LogLevel level, const char* message) noexcept {
  if (g_host != nullptr && g_host->log != nullptr) g_host->log(g_plugin, level, message);
}

// Logs the exception being handled; call only inside a catch block.
inline void logCurrentException(const char* where) noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    try {
      logNoThrow(BP_LOG_ERROR, (std::string(where) + " threw: " + e.what()).c_str());
    } catch (...) {
      logNoThrow(BP_LOG_ERROR, where);
    }
  } catch (...) {
    logNoThrow(BP_LOG_ERROR, where);
  }
}

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_HOST_TABLE_HPP_
