#pragma once
// What fuzz_plugin_abi's fake plugin (abi_fuzz_plugin.cc) exports besides
// the plugin entry points; the target finds these with dlsym.
#include <cstddef>
#include <cstdint>

extern "C" {

// How often the plugin's init and shutdown ran, and its allocations alive.
struct FuzzAbiPluginCounts {
  int init_calls, shutdown_calls;
  int64_t live_allocations;
};

// Sets what the next query and init do: `good` loads the fixed good plugin
// ("fuzzgood"); otherwise `data` is the script and `strings` the table its
// string fields pick from.
using FuzzAbiPluginSetScriptFn = void (*)(const uint8_t* data, size_t size, const char* const* strings,
                                          size_t num_strings, int good);
using FuzzAbiPluginCountsFn = FuzzAbiPluginCounts (*)();

}  // extern "C"
