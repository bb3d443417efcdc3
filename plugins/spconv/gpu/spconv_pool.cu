// The sparse-convolution pool kernels on the GPU.
#include "../spconv.h"
#include "spconv_gpu.h"

namespace bp_spconv_gpu {

void registerPoolKernels(bp::Library& m, int32_t type) {
  (void)m;
  (void)type;
}

}  // namespace bp_spconv_gpu
