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

void registerRulebookKernels(bp::Library& m, int32_t type);  // spconv_rulebook.cu: get_indice_pairs
void registerConvKernels(bp::Library& m, int32_t type);      // spconv_conv.cu: indice_conv and its backward
void registerPoolKernels(bp::Library& m, int32_t type);      // spconv_pool.cu: indice_maxpool and its backward

}  // namespace bp_spconv_gpu
