// bp::detail::runPluginInit and runPluginShutdown, the bodies of the entry
// points BACKPLANE_PLUGIN defines (Note [Plugin init checks]).
// Not part of the API: names in bp::detail may change in any release.
#ifndef BACKPLANE_PLUGIN_DETAIL_PLUGIN_INIT_HPP_
#define BACKPLANE_PLUGIN_DETAIL_PLUGIN_INIT_HPP_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "backplane/plugin/detail/host_table.hpp"
#include "backplane/plugin/library.hpp"
#include "backplane/plugin_api.h"

namespace bp {
namespace detail {

// Note [Plugin init checks]
// backplane_plugin_init validates the host table before trusting it:
// 1. A table that cannot make an error (NULL, struct_size too small to hold
//    error_new, or error_new NULL) cannot be told "no": the ABI offers no way
//    to fail without error_new. Init then writes one line to stderr, stores
//    nothing, registers nothing and returns NULL; the plugin is inert
//    (bp::host() keeps throwing).
// 2. Otherwise it rejects, with BP_FAILED_PRECONDITION made by the host's
//    error_new, a host whose abi_major differs from BP_ABI_MAJOR, whose
//    abi_minor is older than BP_ABI_MINOR, whose struct_size is over
//    BP_MAX_STRUCT_SIZE or smaller than the BP_HostApi the SDK knows, or
//    that lacks a slot the SDK needs unconditionally (error_free,
//    error_code, error_message, tensor_info, tensor_retain,
//    tensor_release). This assumes {struct_size, abi_major, abi_minor,
//    error_new} keep their places in every ABI major.
// 3. It then copies the table, records the plugin, and runs INIT_FN with a
//    Library, converting exceptions to errors. The table stays installed if
//    init fails, so Tensors the plugin still holds can be released.
inline BP_Error* checkHost(const BP_HostApi* h, const char* plugin_name) noexcept {
  const char* pname = plugin_name ? plugin_name : "?";
  char msg[512];
  msg[0] = '\0';
  // (+1 on both sides: "< 0" would draw -Wtype-limits while BP_ABI_MINOR is 0)
  if (h->abi_major != BP_ABI_MAJOR || uint64_t{h->abi_minor} + 1 < uint64_t{BP_ABI_MINOR} + 1) {
    std::snprintf(msg, sizeof msg,
                  "plugin '%s' was built against Backplane plugin ABI %d.%d, but the host provides ABI %u.%u; rebuild "
                  "the plugin against the host's plugin_api.h",
                  pname, BP_ABI_MAJOR, BP_ABI_MINOR, h->abi_major, h->abi_minor);
  } else if (h->struct_size < BP_HostApi_STRUCT_SIZE || h->struct_size > BP_MAX_STRUCT_SIZE) {
    std::snprintf(msg, sizeof msg,
                  "plugin '%s': the host's BP_HostApi.struct_size is %zu, but ABI %d.%d needs %zu to %u bytes", pname,
                  h->struct_size, BP_ABI_MAJOR, BP_ABI_MINOR, size_t{BP_HostApi_STRUCT_SIZE}, BP_MAX_STRUCT_SIZE);
  } else {
    const char* missing = !h->error_free       ? "error_free"
                          : !h->error_code     ? "error_code"
                          : !h->error_message  ? "error_message"
                          : !h->tensor_info    ? "tensor_info"
                          : !h->tensor_retain  ? "tensor_retain"
                          : !h->tensor_release ? "tensor_release"
                                               : nullptr;
    if (missing == nullptr) return nullptr;
    std::snprintf(msg, sizeof msg, "plugin '%s': the host's BP_HostApi has no %s (NULL slot)", pname, missing);
  }
  BP_Error* e = h->error_new(BP_FAILED_PRECONDITION, msg);
  if (e == nullptr) std::fprintf(stderr, "backplane: %s\n", msg);
  return e;
}

template <class InitFn>
BP_Error* runPluginInit(const BP_HostApi* h, BP_Plugin* plugin, const char* plugin_name, InitFn&& init) noexcept {
  static_assert(std::is_invocable_v<InitFn&, Library&>,
                "BACKPLANE_PLUGIN: INIT_FN must be callable as void INIT_FN(bp::Library& m)");
  constexpr size_t kErrorNewEnd = BP_STRUCT_SIZE(BP_HostApi, error_new);
  if (h == nullptr || h->struct_size < kErrorNewEnd || h->error_new == nullptr) {
    std::fprintf(stderr,
                 "backplane: plugin '%s' was given an unusable host table (NULL, too small, or no error_new); it "
                 "registers nothing\n",
                 plugin_name ? plugin_name : "?");
    return nullptr;  // Note [Plugin init checks], case 1
  }
  if (BP_Error* e = checkHost(h, plugin_name)) return e;
  installHost(*h, plugin);
  try {
    Library m(plugin);
    init(m);
    return nullptr;
  } catch (...) {
    return currentExceptionToError();
  }
}

template <class ShutdownFn>
void runPluginShutdown(BP_Plugin* plugin, ShutdownFn&& fn) noexcept {
  try {
    if constexpr (std::is_invocable_v<ShutdownFn&, BP_Plugin*>) {
      fn(plugin);
    } else {
      static_assert(std::is_invocable_v<ShutdownFn&>,
                    "BACKPLANE_PLUGIN_SHUTDOWN: FN must be callable as void FN() or void FN(BP_Plugin*)");
      (void)plugin;
      fn();
    }
  } catch (...) {
    logCurrentException("plugin shutdown");
  }
}

}  // namespace detail
}  // namespace bp

#endif  // BACKPLANE_PLUGIN_DETAIL_PLUGIN_INIT_HPP_
