// Registers the sparse-convolution kernels of a GPU plugin.
//
// Note [Sparse convolution on the GPU]
// The spconv operators (defined by the spconv plugin, ../spconv_plugin.cc)
// run natively on every GPU plugin: get_indice_pairs builds the rulebook on
// the device (Note [Rulebook on the GPU]), indice_conv and its backward are
// fused gather-GEMM-scatter or output-stationary kernels (Note [Sparse
// convolution kernels on the GPU]), and max pooling runs there too (Note
// [Sparse max pooling on the GPU]). Nothing crosses between host and device
// but one small read per rulebook (its output count and error word).
//
// These sources live with the spconv plugin but are compiled into each GPU
// plugin (plugins/gpu/CMakeLists.txt), because they use that plugin's
// streams, caching allocator and launch: a separate plugin could not reach
// them through the SDK. The GPU plugins load before the spconv plugin from
// the default plugin directory (sorted by name) and after it when an app
// loads them by path, so the kernels are registered with implWhenDefined:
// they wait for the definition, and serve calls from then on, whichever
// order the plugins load in.
#include <string>

#include "gpu/gpu_port.h"
#include "spconv_gpu.h"

namespace bp_spconv_gpu {

void registerKernel(bp::Library& m, const char* op, int32_t type, const bp::Kernel& kernel) {
  try {
    m.implWhenDefined(op, type, kernel);
  } catch (const bp::Error& e) {
    if (e.code() != BP_ALREADY_EXISTS) throw;
    m.log(BP_LOG_WARNING, std::string(op) + " on " + BP_GPU_NAME +
                              " keeps the kernel another plugin registered for it, so it does not run this "
                              "plugin's native kernel (" +
                              e.message() + ")");
  }
}

void registerKernels(bp::Library& m, int32_t type) {
  registerRulebookKernels(m, type);
  registerConvKernels(m, type);
  registerPoolKernels(m, type);
}

}  // namespace bp_spconv_gpu
