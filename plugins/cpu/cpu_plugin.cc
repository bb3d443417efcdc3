// The CPU plugin: kernels for the standard operators on the host, written
// against the plugin SDK only (no host headers), like any vendor's plugin.
// Each family of operators lives in its own file and registers its kernels
// here. Structured ops implement `op.out` (Note [The standard operator
// table] on the host side): the host has already checked the arguments and
// sized `out` with the op's shape rule when a kernel runs.
#include "cpu_common.h"
#include "kernels.h"

namespace {

void init(bp::Library& m) {
  bp_cpu::initThreads();
  bp_cpu::registerCreationKernels(m);
  bp_cpu::registerElementwiseKernels(m);
  bp_cpu::registerElementwiseMoreKernels(m);
  bp_cpu::registerReductionKernels(m);
  bp_cpu::registerLinalgKernels(m);
  bp_cpu::registerNNKernels(m);
  bp_cpu::registerOptimKernels(m);
  bp_cpu::registerDataMovementKernels(m);
  bp_cpu::registerSortScanPadKernels(m);
}

}  // namespace

BACKPLANE_PLUGIN("cpu", "0.2.0", init)
