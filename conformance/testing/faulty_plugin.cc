// A plugin with deliberately faulty kernels, built like a vendor's plugin
// (SDK headers only), for the tests of `backplane conformance` itself. It
// registers device type "faulty" (one device over host memory: the device
// API checks pass and every op it lacks runs through the CPU fallback) and
// three kernels the runner must catch:
//   add.out  subtracts (a wrong result: reported as fail with the error)
//   neg.out  aborts the process (reported as a crash; the run goes on)
//   abs.out  never returns (reported as a crash after --timeout)
// It lands outside the default plugin directory: only tests that pass
// --plugin load it.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "backplane/plugin.hpp"

namespace {

class HostMemory : public bp::DeviceBackend {
 public:
  int deviceCount() override { return 1; }
  bool hostAccessible() override { return true; }
  // An impossible size is BP_RESOURCE_EXHAUSTED (malloc, not operator new:
  // under AddressSanitizer a failing operator new aborts the process).
  void* allocate(int, size_t n) override {
    if (n == 0) return nullptr;
    void* p = std::malloc(n);
    if (!p) bp::fail(BP_RESOURCE_EXHAUSTED, "faulty: cannot allocate " + std::to_string(n) + " bytes");
    return p;
  }
  void deallocate(int, void* p) override { std::free(p); }
  void copyHostToDevice(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToHost(int, void* d, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void copyDeviceToDevice(int, void* d, int, const void* s, size_t n) override { std::memcpy(d, s, n); }
  void memset(int, void* d, uint8_t v, size_t n) override { std::memset(d, v, n); }
};

bp::Tensor subtractingAdd(const bp::Tensor& self, const bp::Tensor& other, const bp::Scalar& alpha,
                          const bp::Tensor& out) {
  // "sub.out": a name without a namespace is a standard operator's.
  static const bp::Operator sub = bp::Operator::find("sub.out");
  return sub.call(self, other, alpha, out);
}

bp::Tensor abortingNeg(const bp::Tensor&, const bp::Tensor&) { std::abort(); }

bp::Tensor hangingAbs(const bp::Tensor&, const bp::Tensor& out) {
  for (;;) ::pause();
  return out;
}

void init(bp::Library& m) {
  static HostMemory backend;
  const int32_t faulty = m.registerDevice("faulty", &backend);
  m.impl("bp::add.out", faulty, &subtractingAdd);
  m.impl("bp::neg.out", faulty, &abortingNeg);
  m.impl("bp::abs.out", faulty, &hangingAbs);
}

}  // namespace

BACKPLANE_PLUGIN("faulty_test_plugin", "0.1.0-test", init)
