// tp_own_ops: a C++ SDK plugin with an operator of its own that has a rule
// (m.meta) and conformance samples (m.spec), ABI 1.9 (Note [A plugin's own
// operators] in plugin_api.h), for plugin_own_ops_test.cc.
// Device type "tpowndev": two devices of host memory. Operators:
//   tpown::add_bias(Tensor x, Tensor bias) -> Tensor   x + bias along x's
//       last dim; rule: one device, one dtype, bias of x.size(-1);
//       tpowndev: float32 (counted in info(0)); cpu: float32 (info(1))
//   tpown::add_bias.out, tpown::add_bias_   derived by the host (m.deriveForms)
//   tpown::add_bias_twice(Tensor x, Tensor bias) -> Tensor
//       a composite: add_bias(add_bias(x, bias), bias)
//   tpown::info(int which) -> int
// With TPOWN_BAD set, init makes one wrong registration (see badRegistration)
// and fails with the host's error.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include <backplane/plugin.hpp>

namespace {

std::atomic<int64_t> g_calls[2];

class HostMemory final : public bp::HostMemoryBackend {
 public:
  int deviceCount() override { return 2; }
};
HostMemory g_backend;

std::string deviceName(bp::Device d) { return std::string(bp::deviceTypeName(d.type)) + ":" + std::to_string(d.index); }

void addBiasMeta(const bp::Tensor& x, const bp::Tensor& bias) {
  BP_PLUGIN_CHECK(x.device() == bias.device(), "tpown::add_bias: x is on ", deviceName(x.device()), " but bias is on ",
                  deviceName(bias.device()));
  BP_PLUGIN_CHECK(x.dtype() == bias.dtype(), "tpown::add_bias: x and bias differ in dtype");
  BP_PLUGIN_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(x.dim() - 1),
                  "tpown::add_bias: bias must have x's last size");
}

bp::Tensor addBias(const bp::Tensor& x, const bp::Tensor& bias) {
  bp::Tensor out = bp::Tensor::empty(x.sizes(), x.dtype(), x.device());
  bp::forEach<float>(out, x, bias, [](float a, float b) { return a + b; });
  return out;
}
bp::Tensor addBiasDev(const bp::Tensor& x, const bp::Tensor& bias) {
  ++g_calls[0];
  return addBias(x, bias);
}
bp::Tensor addBiasCpu(const bp::Tensor& x, const bp::Tensor& bias) {
  ++g_calls[1];
  return addBias(x, bias);
}
// A composite: x + 2 * bias through another operator, on any device.
bp::Tensor addBiasTwice(const bp::Tensor& x, const bp::Tensor& bias) {
  static const bp::Operator add_bias = bp::Operator::find("tpown::add_bias");
  return add_bias.call(add_bias.call(x, bias), bias);
}
int64_t info(int64_t which) { return which >= 0 && which < 2 ? g_calls[which].load() : -1; }
void wrongRule(const bp::Tensor&) {}

constexpr const char* kSamples = R"(
# x + bias along the last dim
dtypes: float32
rows: T[4,8], T[8]
transposed: T[5,3].T, T[3]
raises bias of the wrong length: float32[4,8], float32[7]
raises bias on the host: float32[4,8], float32[8]@cpu
)";

// The wrong registration TPOWN_BAD names (after the good ones).
void badRegistration(bp::Library& m, const std::string& bad) {
  if (bad == "meta_standard")
    m.meta(
        "bp::add.Tensor", +[](const bp::Tensor&, const bp::Tensor&, const bp::Scalar&) {});
  if (bad == "meta_undefined") m.meta("tpown::add_bais", &addBiasMeta);
  if (bad == "meta_twice") m.meta("tpown::add_bias", &addBiasMeta);
  if (bad == "meta_signature") m.meta("tpown::add_bias", &wrongRule);
  if (bad == "spec_twice") m.spec("tpown::add_bias", kSamples);
  if (bad == "spec_count") m.spec("tpown::info", "one: 1, 2");
  if (bad == "spec_kind") m.spec("tpown::info", "one: float32[2]");
  if (bad == "spec_t") m.spec("tpown::info", "\n\nfirst: 1\nsecond: T[3]");
  if (bad == "spec_dtype") m.spec("tpown::info", "dtypes: float33\none: 1");
  if (bad == "spec_empty") m.spec("tpown::info", "# nothing\n");
  if (bad == "forms_twice") m.deriveForms("tpown::add_bias", BP_FORM_OUT);
  if (bad == "forms_int") m.deriveForms("tpown::info", BP_FORM_OUT);
  if (bad == "forms_none") m.deriveForms("tpown::add_bias_twice", 0);
  if (bad == "composite_standard")
    m.composite(
        "bp::neg", +[](const bp::Tensor& t) { return t; });
}

void init(bp::Library& m) {
  const int32_t dev = m.registerDevice("tpowndev", &g_backend);
  m.def("tpown::add_bias(Tensor x, Tensor bias) -> Tensor");
  m.def("tpown::info(int which) -> int");
  m.meta("tpown::add_bias", &addBiasMeta);
  m.impl("tpown::add_bias", dev, &addBiasDev, {bp::ScalarType::Float32});
  m.impl("tpown::add_bias", 0, &addBiasCpu, {bp::ScalarType::Float32});
  m.impl("tpown::info", 0, &info);
  m.spec("tpown::add_bias", kSamples);
  m.deriveForms("tpown::add_bias", BP_FORM_OUT | BP_FORM_INPLACE);
  m.def("tpown::add_bias_twice(Tensor x, Tensor bias) -> Tensor");
  m.composite("tpown::add_bias_twice", &addBiasTwice);
  if (const char* bad = std::getenv("TPOWN_BAD")) badRegistration(m, bad);
}

}  // namespace

BACKPLANE_PLUGIN("tp_own_ops", "0.0.1", init)
