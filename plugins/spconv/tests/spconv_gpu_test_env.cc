// The plugins of spconv_gpu_tests, loaded once for the program: the CPU
// plugin, the GPU simulator, and then the spconv plugin, which defines the
// ops, as the default plugin directory's order has it (backplane_cuda before
// backplane_spconv): the simulator's spconv kernels wait for the definition
// (Note [Sparse convolution on the GPU]).
#include <gtest/gtest.h>

#include <cstdlib>

#include "backplane/dispatch/dispatcher.h"
#include "backplane/runtime/plugin_registry.h"
#include "backplane/testing/plugin_environment.h"

namespace backplane {
namespace {

// BACKPLANE_DETERMINISTIC is read by the GPU plugin when it loads: the
// deterministic mode starts on (SpconvGpuConv.TheEnvironmentSetsTheInitialMode);
// tests that need either mode set it.
const auto* const kEnv = &testing::addPluginEnvironment(
                              {BACKPLANE_CPU_PLUGIN_PATH, BACKPLANE_GPUSIM_PLUGIN_PATH, BACKPLANE_SPCONV_PLUGIN_PATH})
                              .beforeLoad([] { setenv("BACKPLANE_DETERMINISTIC", "1", 1); });

}  // namespace
}  // namespace backplane
