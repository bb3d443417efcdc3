// A plugin whose one kernel declares the dtypes it serves (bp::Dtypes, ABI
// 1.5), built like a vendor's plugin (SDK headers only), for the tests of
// `backplane conformance` itself: device type "declared" (one device over
// host memory) with add.out for float32 only, computed as
// self - (-alpha) * other through sub.out (which the CPU fallback serves).
// Every other dtype runs through the CPU fallback by declaration, so
// `backplane conformance --strict` passes it. It lands outside the default
// plugin directory: only tests that pass --plugin load it.
#include <cstdlib>
#include <cstring>
#include <string>

#include "backplane/plugin.hpp"

namespace {

class HostMemory : public bp::DeviceBackend {
 public:
  int deviceCount() override { return 1; }
  bool hostAccessible() override { return true; }
  void* allocate(int, size_t n) override {
    if (n == 0) return nullptr;
    void* p = std::malloc(n);
    if (!p) bp::fail(BP_RESOURCE_EXHAUSTED, "declared: cannot allocate " + std::to_string(n) + " bytes");
    return p;
  }
  void deallocate(int, void* p) override { std::free(p); }
  void copyHostToDevice(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToHost(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToDevice(int, void* d, int, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void memset(int, void* d, uint8_t v, size_t n) override { std::memset(d, v, n); }
};

bp::Tensor float32Add(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha, const bp::Tensor& out) {
  BP_PLUGIN_CHECK(self.dtype() == bp::ScalarType::Float32 && other.dtype() == bp::ScalarType::Float32 &&
                      out.dtype() == bp::ScalarType::Float32,
                  "declared: add.out declares float32 only, yet got another dtype");
  static const bp::Operator sub = bp::Operator::find("sub.out");
  const bp::Scalar minus_alpha = alpha.isIntegral() ? bp::Scalar(-alpha.toInt()) : bp::Scalar(-alpha.toDouble());
  return sub.call(self, other, minus_alpha, out);
}

void init(bp::Library& m) {
  static HostMemory backend;
  const int32_t declared = m.registerDevice("declared", &backend);
  m.impl("add.out", declared, &float32Add, {bp::ScalarType::Float32});
}

}  // namespace

BACKPLANE_PLUGIN("declared_dtypes_test_plugin", "0.1.0-test", init)
