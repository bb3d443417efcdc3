// BACKPLANE_PLUGIN and BACKPLANE_PLUGIN_SHUTDOWN: the macros that define a
// plugin's exported entry points around its init function. Part of
// <backplane/plugin.hpp>; compiles on its own.
#ifndef BACKPLANE_PLUGIN_ENTRY_POINTS_HPP_
#define BACKPLANE_PLUGIN_ENTRY_POINTS_HPP_

#include <type_traits>

#include "backplane/plugin/detail/plugin_init.hpp"
#include "backplane/plugin_api.h"

// Defines the plugin's exported entry points. NAME and VERSION are string
// literals ("toy", "1.0.0"); INIT_FN is `void INIT_FN(bp::Library& m)`.
// Use once per plugin, at global scope; no semicolon is needed after it.
// See Note [Plugin init checks].
#define BACKPLANE_PLUGIN(NAME, VERSION, INIT_FN)                                                    \
  extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) {                          \
    static const BP_PluginInfo info = {                                                             \
        BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR, NAME, VERSION};     \
    return &info;                                                                                   \
  }                                                                                                 \
  extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) { \
    return ::bp::detail::runPluginInit(host, plugin, NAME, INIT_FN);                                \
  }                                                                                                 \
  static_assert(std::is_same_v<decltype(&backplane_plugin_query), BP_PluginQueryFn> &&              \
                    std::is_same_v<decltype(&backplane_plugin_init), BP_PluginInitFn>,              \
                "BACKPLANE_PLUGIN: entry points do not match plugin_api.h");

// Defines the optional backplane_plugin_shutdown export; FN is `void FN()`
// or `void FN(BP_Plugin*)`. Exceptions are logged, not propagated.
#define BACKPLANE_PLUGIN_SHUTDOWN(FN)                                                      \
  extern "C" BP_EXPORT void backplane_plugin_shutdown(BP_Plugin* plugin) {                 \
    ::bp::detail::runPluginShutdown(plugin, FN);                                           \
  }                                                                                        \
  static_assert(std::is_same_v<decltype(&backplane_plugin_shutdown), BP_PluginShutdownFn>, \
                "BACKPLANE_PLUGIN_SHUTDOWN: entry point does not match plugin_api.h");

#endif  // BACKPLANE_PLUGIN_ENTRY_POINTS_HPP_
