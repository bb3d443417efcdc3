// tp_wd_sdk: a C++ SDK plugin that implements, on cpu, an operator that
// another plugin (tp_wd_definer) defines, with bp::Library::implWhenDefined,
// so that it may load before or after the definer:
//   tpwd::shift(Tensor self, float amount) -> Tensor: self + amount
//   (float32, contiguous).
#include <backplane/plugin.hpp>

namespace {

bp::Tensor shift(const bp::Tensor& self, double amount) {
  BP_PLUGIN_CHECK(self.dtype() == bp::ScalarType::Float32 && self.is_contiguous() && self.device().type == 0,
                  "tpwd::shift (tp_wd_sdk) needs a contiguous float32 cpu tensor");
  bp::Tensor out = bp::Tensor::empty(self.sizes(), self.dtype(), self.device());
  const float* x = self.data_ptr<const float>();
  float* y = out.data_ptr<float>();
  for (int64_t i = 0; i < self.numel(); ++i) y[i] = x[i] + static_cast<float>(amount);
  return out;
}

void init(bp::Library& m) { m.implWhenDefined("tpwd::shift", 0, &shift); }

}  // namespace

BACKPLANE_PLUGIN("tp_wd_sdk", "0.0.1", init)
