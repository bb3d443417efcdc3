// The sparse-convolution rulebook kernels on the GPU.
#include "../spconv.h"
#include "spconv_gpu.h"

namespace bp_spconv_gpu {

void registerRulebookKernels(bp::Library& m, int32_t type) {
  (void)m;
  (void)type;
}

}  // namespace bp_spconv_gpu
