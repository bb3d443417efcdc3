// A plugin with no-op kernels, to measure the cost of crossing the ABI
// (BM_PluginKernelCall against BM_DispatchUnboxed_Noop) and of declining a
// call (BM_PluginKernelDecline*, Note [Declined calls]).
#include "backplane/plugin.hpp"

namespace {

bp::Tensor noop(const bp::Tensor& self) { return self; }
// The no-op with linear's signature, which the host calls typed, and with
// one no standard op has, which it calls boxed.
bp::Tensor noopLinear(const bp::Tensor& self, const bp::Tensor&, const std::optional<bp::Tensor>&) { return self; }
bp::Tensor noopWeights(const bp::Tensor& self, const bp::DoubleList&) { return self; }

// Declines every call through the C ABI: a returned BP_DECLINED error.
BP_Error* declineRaw(void*, const BP_KernelCall*) { return bp::host().error_new(BP_DECLINED, "benchmark"); }
// Declines every call through the C++ SDK: bp::decline throws.
bp::Tensor declineSdk(const bp::Tensor&) { bp::decline("benchmark"); }

// A rule that checks what a real one checks: the tensor is defined.
void checkedRule(const bp::Tensor& self) {
  BP_PLUGIN_CHECK(self.defined(), "bench_plugin::checked: self is undefined");
}

void init(bp::Library& m) {
  m.def("bench_plugin::noop(Tensor self) -> Tensor");
  // Bound at compile time, like BP_FN(noop) in the in-process benchmark.
  m.impl("bench_plugin::noop", /*cpu=*/0, bp::kernel<&noop>());
  // Two cpu kernels each: the no-op, then one that declines every call, which
  // so goes to the no-op (the impl registered before it).
  m.def("bench_plugin::declined_raw(Tensor self) -> Tensor");
  m.impl("bench_plugin::declined_raw", 0, bp::kernel<&noop>());
  m.impl("bench_plugin::declined_raw", 0, &declineRaw, nullptr, "(Tensor) -> Tensor");
  // The no-op behind a rule (m.meta): what a plugin's own operator with a
  // shape/dtype/device rule pays per call for it.
  m.def("bench_plugin::checked(Tensor self) -> Tensor");
  m.impl("bench_plugin::checked", 0, bp::kernel<&noop>());
  m.meta("bench_plugin::checked", &checkedRule);
  m.def("bench_plugin::noop_linear(Tensor input, Tensor weight, Tensor? bias) -> Tensor");
  m.impl("bench_plugin::noop_linear", 0, bp::kernel<&noopLinear>());
  m.def("bench_plugin::noop_weights(Tensor self, float[] weights) -> Tensor");
  m.impl("bench_plugin::noop_weights", 0, bp::kernel<&noopWeights>());
  m.def("bench_plugin::declined_sdk(Tensor self) -> Tensor");
  m.impl("bench_plugin::declined_sdk", 0, bp::kernel<&noop>());
  m.impl("bench_plugin::declined_sdk", 0, bp::kernel<&declineSdk>());
}

}  // namespace

BACKPLANE_PLUGIN("bench_plugin", "1.0", init)
