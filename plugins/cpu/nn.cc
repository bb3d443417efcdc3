#include "cpu_common.h"
#include "kernels.h"

namespace bp_cpu {

void registerNNKernels(bp::Library& m) { (void)m; }

}  // namespace bp_cpu
