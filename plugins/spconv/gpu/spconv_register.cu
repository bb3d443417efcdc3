// Registers the sparse-convolution kernels of a GPU plugin.
//
// Note [Sparse convolution on the GPU]
// (Written when the kernels land: the rulebook, the convolutions and the
// pooling on the device, and how they are registered before or after the
// spconv plugin defines the operators.)
#include "spconv_gpu.h"

namespace bp_spconv_gpu {

void registerKernels(bp::Library& m, int32_t type) {
  // Until kernels may be registered ahead of the definition, they are
  // registered only when the spconv plugin has already defined the ops.
  try {
    (void)bp::Operator::find("spconv::get_indice_pairs");
  } catch (const bp::Error&) {
    return;
  }
  registerRulebookKernels(m, type);
  registerConvKernels(m, type);
  registerPoolKernels(m, type);
}

}  // namespace bp_spconv_gpu
