// init throws a C++ exception, which plugins must not do: the host catches
// it and refuses the plugin, saying init threw.
#include <stdexcept>

#include "backplane/plugin_api.h"

namespace {
const BP_PluginInfo kInfo = {BP_PluginInfo_STRUCT_SIZE, BP_PLUGIN_MAGIC, BP_ABI_MAJOR, BP_ABI_MINOR,
                             "tp_init_throws",          "0.0.1"};
}  // namespace

extern "C" BP_EXPORT const BP_PluginInfo* backplane_plugin_query(void) { return &kInfo; }

extern "C" BP_EXPORT BP_Error* backplane_plugin_init(const BP_HostApi* host, BP_Plugin* plugin) {
  if (BP_Error* err = host->def(plugin, "tp_init_throws::probe(Tensor self) -> Tensor")) return err;
  throw std::runtime_error("toy driver exploded during init");
}
