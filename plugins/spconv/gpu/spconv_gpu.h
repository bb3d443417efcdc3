#pragma once
// The sparse-convolution operators' GPU kernels (Note [Sparse convolution on
// the GPU] in spconv_register.cu). These sources are not a plugin of their
// own: they are compiled into every GPU plugin (backplane_cuda, backplane_hip
// and the simulator's backplane_gpusim, through plugins/gpu/CMakeLists.txt),
// in the gpu_port.h dialect, because they need that plugin's streams,
// allocator and launch. The operators themselves are defined by the spconv
// plugin (../spconv_plugin.cc); the shape checks are its (../checks.cc,
// compiled in here as well), so both devices refuse the same calls with the
// same messages.

#include <cstdint>

#include "backplane/plugin.hpp"

namespace bp_spconv_gpu {

// Registers every spconv kernel below for the GPU plugin's device type.
void registerKernels(bp::Library& m, int32_t type);

// Registers `kernel` for the spconv operator `op` on `type`, whether the
// spconv plugin has defined it yet or not (implWhenDefined): the GPU
// plugins load before it from the default plugin directory. If another
// plugin already implements `op` there (the spconv plugin's device-generic
// path, when BACKPLANE_SPCONV_GENERIC_DEVICES names this device type and it
// loaded first), that kernel stays and this logs a warning: the plugin still
// loads.
void registerKernel(bp::Library& m, const char* op, int32_t type, const bp::Kernel& kernel);

void registerRulebookKernels(bp::Library& m, int32_t type);  // spconv_rulebook.cu: get_indice_pairs
void registerConvKernels(bp::Library& m, int32_t type);      // spconv_conv.cu: indice_conv and its backward
void registerPoolKernels(bp::Library& m, int32_t type);      // spconv_pool.cu: indice_maxpool and its backward

}  // namespace bp_spconv_gpu
