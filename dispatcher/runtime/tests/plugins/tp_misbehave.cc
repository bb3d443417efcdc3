// tp_misbehave: cpu kernels that misbehave at run time, for
// misbehaving_kernel_test.cc. Built with the C++ SDK, except throws_raw.
//   tpm::twice(Tensor self) -> Tensor            2 * self (float32): well behaved
//   tpm::fails(Tensor self) -> Tensor            returns an error (BP_DATA_LOSS)
//   tpm::throws(Tensor self) -> Tensor           throws std::runtime_error (the SDK's
//                                                adapter turns it into an error)
//   tpm::throws_raw(Tensor self) -> Tensor       a raw BP_KernelFn that throws past the
//                                                ABI, which plugins must not do (the
//                                                host catches it)
//   tpm::reenter(Tensor self) -> Tensor          twice(twice(self)), each call through
//                                                the host's dispatcher from inside the kernel
//   tpm::reenter_standard(Tensor self) -> Tensor add(self, self) through the dispatcher
//   tpm::reenter_fails(Tensor self) -> Tensor    calls fails(self) through the dispatcher
//   tpm::reenter_deep(Tensor self, int depth) -> Tensor
//                                                itself with depth - 1, down to twice(self)
//   tpm::masked(Tensor self, bool[] output_mask) -> (Tensor, Tensor)
//                                                twice(self) where the mask says so, an
//                                                undefined tensor elsewhere (allowed: Note
//                                                [Masked returns])
//   tpm::half_undefined(Tensor self) -> (Tensor, Tensor)
//                                                twice(self) and an undefined tensor, with
//                                                no mask to allow it
#include <stdexcept>
#include <tuple>

#include "backplane/plugin.hpp"

namespace {

bp::Tensor twice(const bp::Tensor& self) {
  BP_PLUGIN_CHECK(self.dtype() == bp::ScalarType::Float32 && self.is_contiguous(),
                  "tpm::twice: float32 contiguous only");
  bp::Tensor out = bp::Tensor::empty(self.sizes(), self.dtype(), self.device());
  const float* x = self.data_ptr<float>();
  float* y = out.data_ptr<float>();
  for (int64_t i = 0; i < self.numel(); ++i) y[i] = 2 * x[i];
  return out;
}

bp::Tensor fails(const bp::Tensor&) { bp::fail(BP_DATA_LOSS, "tpm::fails: the toy device lost the data"); }

bp::Tensor throws(const bp::Tensor&) { throw std::runtime_error("tpm::throws: the toy driver exploded"); }

BP_Error* throwsRaw(void*, const BP_KernelCall*) {
  throw std::runtime_error("tpm::throws_raw: the toy driver exploded");
}

bp::Tensor reenter(const bp::Tensor& self) {
  static const bp::Operator op = bp::Operator::find("tpm::twice");
  return op.call(op.call(self));
}

bp::Tensor reenterStandard(const bp::Tensor& self) {
  static const bp::Operator add = bp::Operator::find("add.Tensor");
  return add.call(self, self, bp::Scalar(1.0));
}

bp::Tensor reenterFails(const bp::Tensor& self) {
  static const bp::Operator op = bp::Operator::find("tpm::fails");
  return op.call(self);
}

bp::Tensor reenterDeep(const bp::Tensor& self, int64_t depth) {
  static const bp::Operator deep = bp::Operator::find("tpm::reenter_deep");
  static const bp::Operator twice_op = bp::Operator::find("tpm::twice");
  return depth <= 0 ? twice_op.call(self) : deep.call(self, depth - 1);
}

std::tuple<bp::Tensor, bp::Tensor> masked(const bp::Tensor& self, bp::BoolList output_mask) {
  BP_PLUGIN_CHECK(output_mask.size() == 2, "tpm::masked: output_mask must have 2 values");
  return {output_mask[0] ? twice(self) : bp::Tensor(), output_mask[1] ? twice(self) : bp::Tensor()};
}

std::tuple<bp::Tensor, bp::Tensor> halfUndefined(const bp::Tensor& self) { return {twice(self), bp::Tensor()}; }

void init(bp::Library& m) {
  m.def("tpm::twice(Tensor self) -> Tensor");
  m.def("tpm::fails(Tensor self) -> Tensor");
  m.def("tpm::throws(Tensor self) -> Tensor");
  m.def("tpm::throws_raw(Tensor self) -> Tensor");
  m.def("tpm::reenter(Tensor self) -> Tensor");
  m.def("tpm::reenter_standard(Tensor self) -> Tensor");
  m.def("tpm::reenter_fails(Tensor self) -> Tensor");
  m.def("tpm::reenter_deep(Tensor self, int depth) -> Tensor");
  m.impl("tpm::twice", 0, &twice);
  m.impl("tpm::fails", 0, &fails);
  m.impl("tpm::throws", 0, &throws);
  m.impl("tpm::throws_raw", 0, &throwsRaw, nullptr);
  m.impl("tpm::reenter", 0, &reenter);
  m.impl("tpm::reenter_standard", 0, &reenterStandard);
  m.impl("tpm::reenter_fails", 0, &reenterFails);
  m.impl("tpm::reenter_deep", 0, &reenterDeep);
  m.def("tpm::masked(Tensor self, bool[] output_mask) -> (Tensor, Tensor)");
  m.def("tpm::half_undefined(Tensor self) -> (Tensor, Tensor)");
  m.impl("tpm::masked", 0, &masked);
  m.impl("tpm::half_undefined", 0, &halfUndefined);
}

}  // namespace

BACKPLANE_PLUGIN("tp_misbehave", "0.0.1", init)
