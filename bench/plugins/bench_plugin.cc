// A plugin with one no-op kernel, to measure the cost of crossing the ABI
// (BM_PluginKernelCall against BM_DispatchUnboxed_Noop).
#include "backplane/plugin.hpp"

namespace {

bp::Tensor noop(const bp::Tensor& self) { return self; }

void init(bp::Library& m) {
  m.def("bench_plugin::noop(Tensor self) -> Tensor");
  // Bound at compile time, like BP_FN(noop) in the in-process benchmark.
  m.impl("bench_plugin::noop", /*cpu=*/0, bp::kernel<&noop>());
}

}  // namespace

BACKPLANE_PLUGIN("bench_plugin", "1.0", init)
